//! Loads aimed where users' traffic goes on Kubernetes (a load's `via`): a Service's ClusterIP
//! (`service:NAME[:PORT]`), the proxy Service's NodePort on a node's InternalIP
//! (`node-port:PORT`), its load balancer's status address (`load-balancer:PORT`), or a Gateway
//! API Gateway's status address (`gateway:[NS/]NAME[:PORT]`). Every
//! address comes from the API server (the Service, the nodes), so a load reaches only what the
//! run discovered there: the reach rule holds by construction. A name the parser could not
//! check (another Service, a port number) that the cluster does not have fails here, in one
//! line, before any load starts.

use super::{platform, KubeStage, PROXY, SERVICE_BOUND};
use crate::error::StackError;
use crate::platform::Stage;
use scenario::Via;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

impl KubeStage {
    /// Where a load with a cluster `via` connects, and what that address is (for env.json's
    /// load paths); waits until the address answers from here, at most [`SERVICE_BOUND`], and
    /// marks it unreached from here (for agents) if it never does.
    pub(super) fn aim_at(&self, via: &Via, tls: bool) -> Result<(SocketAddr, String), StackError> {
        let (to, what) = match via {
            Via::Gateway {
                namespace,
                name,
                port,
            } => self.gateway_target(via, namespace.as_deref(), name, port.as_deref(), tls)?,
            _ => self.service_target(via, tls)?,
        };
        // kube-proxy programs a new Service's rules on each node in its own time. An address
        // that never answers here (a remote cluster's) is left to agents in the cluster.
        let t = Instant::now();
        while !k8s::reaches(to.ip(), to.port(), Duration::from_secs(1)) {
            if t.elapsed() > SERVICE_BOUND {
                self.unreached
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(to.ip());
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.load_targets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(via.to_string(), what.clone());
        Ok((to, what))
    }

    /// A Gateway's first status address and the port of the listener `port` names (the first
    /// listener of the url's protocol when none), waiting at most [`SERVICE_BOUND`] for its
    /// controller to publish the address; a host name is looked up here.
    fn gateway_target(
        &self,
        via: &Via,
        namespace: Option<&str>,
        name: &str,
        port: Option<&str>,
        tls: bool,
    ) -> Result<(SocketAddr, String), StackError> {
        use std::net::ToSocketAddrs;
        let ns = namespace.unwrap_or(&self.namespace);
        let gw = self
            .cluster
            .wait_gateway(ns, name, SERVICE_BOUND)
            .map_err(|e| platform(format!("via '{via}': {e}")))?;
        let listener = match port {
            Some(p) => match p.parse::<u16>() {
                Ok(n) => gw.listeners.iter().find(|l| l.1 == n).cloned().or(Some((
                    String::new(),
                    n,
                    String::new(),
                ))),
                Err(_) => gw.listeners.iter().find(|l| l.0 == p).cloned(),
            },
            None => {
                let want = if tls { "HTTPS" } else { "HTTP" };
                gw.listeners.iter().find(|l| l.2 == want).cloned()
            }
        };
        let Some((lname, lport, _)) = listener else {
            let have: Vec<String> = gw
                .listeners
                .iter()
                .map(|l| format!("{} ({} {})", l.0, l.2, l.1))
                .collect();
            return Err(platform(format!(
                "via '{via}': Gateway `{name}` has no such listener (it has {})",
                have.join(", ")
            )));
        };
        let host = &gw.addresses[0];
        let ip = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => ip,
            Err(_) => (host.as_str(), lport)
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .map(|a| a.ip())
                .ok_or_else(|| {
                    platform(format!(
                        "via '{via}': Gateway `{name}`'s address {host} does not resolve here"
                    ))
                })?,
        };
        let lis = if lname.is_empty() {
            String::new()
        } else {
            format!(", listener {lname}")
        };
        Ok((
            SocketAddr::new(ip, lport),
            format!("Gateway `{ns}/{name}` at its status address {host}:{lport}{lis}"),
        ))
    }

    /// A Service's address for a `service:`, `node-port:` or `load-balancer:` via.
    /// `service:proxy` and `service:backend-GROUP` name the case's own Services
    /// (`proxy-<run id>`, `backend-GROUP-<run id>`); any other name a Service of the namespace.
    fn service_target(&self, via: &Via, tls: bool) -> Result<(SocketAddr, String), StackError> {
        let own = self.name(PROXY);
        let (svc, port) = match via {
            Via::Service(n, p) if n == PROXY => (own.clone(), p.clone()),
            Via::Service(n, p)
                if n.strip_prefix("backend-")
                    .is_some_and(|g| self.groups.iter().any(|x| x == g)) =>
            {
                (self.name(n), p.clone())
            }
            Via::Service(n, p) => (n.clone(), p.clone()),
            Via::NodePort(p) | Via::LoadBalancer(p) => (own.clone(), Some(p.clone())),
            _ => return Err(platform(format!("via '{via}' is not a cluster address"))),
        };
        let svc = svc.as_str();
        let (c, ns) = (&self.cluster, &self.namespace);
        let addr = c
            .service_address(ns, svc)
            .map_err(|e| platform(format!("via '{via}': no Service `{svc}` in {ns}: {e}")))?;
        // The proxy's Service has a port per listener port: a listener name stands for its port.
        let want = match port {
            Some(p) if svc == own => self.served.ports.get(&p).map_or(p, |n| n.to_string()),
            Some(p) => p,
            None if svc == own => self
                .listener_port(tls)
                .map(|n| n.to_string())
                .ok_or_else(|| platform(format!("via '{via}': the proxy has no such listener")))?,
            None => addr
                .ports
                .first()
                .map(|p| p.port.to_string())
                .ok_or_else(|| platform(format!("via '{via}': Service `{svc}` has no port")))?,
        };
        let sp = addr.port(&want).ok_or_else(|| {
            let have: Vec<String> = addr
                .ports
                .iter()
                .map(|p| format!("{} ({})", p.name, p.port))
                .collect();
            platform(format!(
                "via '{via}': Service `{svc}` has no port '{want}' (it has {})",
                have.join(", ")
            ))
        })?;
        let (to, what) = match via {
            Via::NodePort(_) => {
                let np = sp.node_port.ok_or_else(|| {
                    platform(format!(
                        "via '{via}': Service `{svc}` ({}) has no nodePort",
                        addr.kind
                    ))
                })?;
                let nodes = c.node_addresses()?;
                let (node, ip) = nodes
                    .first()
                    .ok_or_else(|| platform("no node has an InternalIP"))?;
                (
                    SocketAddr::new(*ip, np),
                    format!(
                        "Service `{svc}` ({}) at node {node}'s InternalIP {ip}, nodePort {np}",
                        addr.kind
                    ),
                )
            }
            Via::LoadBalancer(_) => {
                let lb = c
                    .wait_load_balancer(ns, svc, SERVICE_BOUND)
                    .map_err(|e| platform(format!("via '{via}': {e}")))?;
                let ip = lb.load_balancer[0];
                (
                    SocketAddr::new(ip, sp.port),
                    format!(
                        "Service `{svc}` (LoadBalancer) at its load balancer's address {ip}:{}",
                        sp.port
                    ),
                )
            }
            _ => {
                let ip = addr.cluster_ip.ok_or_else(|| {
                    platform(format!(
                        "via '{via}': Service `{svc}` is headless (no ClusterIP)"
                    ))
                })?;
                (
                    SocketAddr::new(ip, sp.port),
                    format!(
                        "Service `{svc}` ({}) at its ClusterIP {ip}:{}",
                        addr.kind, sp.port
                    ),
                )
            }
        };
        Ok((to, what))
    }
}
