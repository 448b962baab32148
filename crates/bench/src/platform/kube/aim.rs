//! Loads aimed where users' traffic goes on Kubernetes (a load's `via`): a Service's ClusterIP
//! (`service:NAME[:PORT]`), the proxy Service's NodePort on a node's InternalIP
//! (`node-port:PORT`), or its load balancer's status address (`load-balancer:PORT`). Every
//! address comes from the API server (the Service, the nodes), so a load reaches only what the
//! run discovered there: the reach rule holds by construction. A name the parser could not
//! check (another Service, a port number) that the cluster does not have fails here, in one
//! line, before any load starts.

use super::{platform, KubeStage, PROXY_SERVICE, SERVICE_BOUND};
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
        let (svc, port) = match via {
            Via::Service(n, p) => (n.as_str(), p.clone()),
            Via::NodePort(p) | Via::LoadBalancer(p) => (PROXY_SERVICE, Some(p.clone())),
            _ => return Err(platform(format!("via '{via}' is not a cluster address"))),
        };
        let (c, ns) = (&self.cluster, &self.namespace);
        let addr = c
            .service_address(ns, svc)
            .map_err(|e| platform(format!("via '{via}': no Service `{svc}` in {ns}: {e}")))?;
        // The proxy's Service has a port per listener port: a listener name stands for its port.
        let want = match port {
            Some(p) if svc == PROXY_SERVICE => {
                self.served.ports.get(&p).map_or(p, |n| n.to_string())
            }
            Some(p) => p,
            None if svc == PROXY_SERVICE => self
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
                let nodes = c.node_addresses().map_err(platform)?;
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
}
