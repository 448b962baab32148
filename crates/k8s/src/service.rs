//! Services proxybench puts in front of its pods, and where the API says a Service can be
//! reached: its ClusterIP, its NodePorts on each node, its load balancer's addresses.

use crate::cluster::Cluster;
use crate::error::{split, Error};
use k8s_openapi::api::core::v1::{Node, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// A Service's `type`, as proxybench makes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServiceType {
    /// A virtual address inside the cluster (the default).
    #[default]
    ClusterIp,
    /// A ClusterIP plus a port on every node.
    NodePort,
    /// A NodePort plus an address from the cluster's load balancer, when it has one.
    LoadBalancer,
}

impl ServiceType {
    /// Every type.
    pub const ALL: [ServiceType; 3] = [
        ServiceType::ClusterIp,
        ServiceType::NodePort,
        ServiceType::LoadBalancer,
    ];

    /// The API's spelling (`ClusterIP`).
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIp => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
        }
    }

    /// Parses the API's spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<ServiceType> {
        ServiceType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl std::fmt::Display for ServiceType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Service of type `kind` named `name` (labelled `labels`) over the pods `selector` picks,
/// one TCP port per `(name, port)`, each to the same port of the pods.
pub fn service(
    name: &str,
    labels: &BTreeMap<String, String>,
    selector: &BTreeMap<String, String>,
    kind: ServiceType,
    ports: &[(String, u16)],
) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some(kind.as_str().to_string()),
            selector: Some(selector.clone()),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p)| ServicePort {
                        name: Some(n.clone()),
                        port: i32::from(*p),
                        target_port: Some(IntOrString::Int(i32::from(*p))),
                        protocol: Some("TCP".into()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// One port of a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePortInfo {
    /// Its name (empty when unnamed).
    pub name: String,
    /// The Service's port.
    pub port: u16,
    /// Its port on every node, for NodePort and LoadBalancer Services.
    pub node_port: Option<u16>,
}

/// Where a Service can be reached, as the API server has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAddress {
    /// The Service's name.
    pub name: String,
    /// Its type.
    pub kind: ServiceType,
    /// Its ClusterIP (`None` for a headless Service).
    pub cluster_ip: Option<IpAddr>,
    /// Its ports.
    pub ports: Vec<ServicePortInfo>,
    /// Its load balancer's addresses (`status.loadBalancer.ingress`), once assigned.
    pub load_balancer: Vec<IpAddr>,
}

impl ServiceAddress {
    /// The port called `name`, or numbered `name`.
    pub fn port(&self, name: &str) -> Option<&ServicePortInfo> {
        self.ports
            .iter()
            .find(|p| p.name == name)
            .or_else(|| self.ports.iter().find(|p| p.port.to_string() == name))
    }

    /// The facts of a Service object.
    pub fn of(s: &Service) -> ServiceAddress {
        let spec = s.spec.clone().unwrap_or_default();
        ServiceAddress {
            name: s.metadata.name.clone().unwrap_or_default(),
            kind: spec
                .type_
                .as_deref()
                .and_then(ServiceType::parse)
                .unwrap_or_default(),
            cluster_ip: spec.cluster_ip.as_deref().and_then(|ip| ip.parse().ok()),
            ports: spec
                .ports
                .iter()
                .flatten()
                .map(|p| ServicePortInfo {
                    name: p.name.clone().unwrap_or_default(),
                    port: u16::try_from(p.port).unwrap_or(0),
                    node_port: p.node_port.and_then(|n| u16::try_from(n).ok()),
                })
                .collect(),
            load_balancer: s
                .status
                .as_ref()
                .and_then(|st| st.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref())
                .into_iter()
                .flatten()
                .filter_map(|i| i.ip.as_deref().and_then(|ip| ip.parse().ok()))
                .collect(),
        }
    }
}

impl Cluster {
    /// Service `name` of `namespace` as the API server has it now.
    pub fn service_address(&self, namespace: &str, name: &str) -> Result<ServiceAddress, Error> {
        let api: Api<Service> = Api::namespaced(self.client(), namespace);
        let s = self
            .block_on(api.get(name))
            .map_err(|e| Error::api(format!("get service/{name} in {namespace}"), e))?;
        Ok(ServiceAddress::of(&s))
    }

    /// Waits until LoadBalancer Service `name` has an address, at most `bound` (a cluster
    /// without a load balancer never gives one: the error says so).
    pub fn wait_load_balancer(
        &self,
        namespace: &str,
        name: &str,
        bound: Duration,
    ) -> Result<ServiceAddress, Error> {
        let api: Api<Service> = Api::namespaced(self.client(), namespace);
        let t0 = Instant::now();
        self.block_on(async {
            loop {
                let state = match api.get(name).await {
                    Ok(s) => {
                        let a = ServiceAddress::of(&s);
                        if !a.load_balancer.is_empty() {
                            return Ok(a);
                        }
                        "no load balancer address yet (a cluster without a load balancer \
                         controller never assigns one)"
                            .to_string()
                    }
                    Err(e) => split(e).0,
                };
                if t0.elapsed() >= bound {
                    return Err(Error::Timeout {
                        what: format!("service/{name} in {namespace} load balancer address"),
                        after: bound,
                        state,
                    });
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    }

    /// Each node's name and InternalIP (the addresses a NodePort answers on), by name.
    pub fn node_addresses(&self) -> Result<Vec<(String, IpAddr)>, Error> {
        let api: Api<Node> = Api::all(self.client());
        let list = self
            .block_on(api.list(&ListParams::default()))
            .map_err(|e| Error::api("list nodes", e))?;
        let mut out: Vec<(String, IpAddr)> = list
            .items
            .iter()
            .filter_map(|n| {
                let ip = n
                    .status
                    .as_ref()?
                    .addresses
                    .as_ref()?
                    .iter()
                    .find(|a| a.type_ == "InternalIP")?
                    .address
                    .parse()
                    .ok()?;
                Some((n.metadata.name.clone()?, ip))
            })
            .collect();
        out.sort();
        Ok(out)
    }

    /// The names of the cluster's nodes and whether each is Ready, by name.
    pub fn nodes_ready(&self) -> Result<Vec<(String, bool)>, Error> {
        let api: Api<Node> = Api::all(self.client());
        let list = self
            .block_on(api.list(&ListParams::default()))
            .map_err(|e| Error::api("list nodes", e))?;
        let mut out: Vec<(String, bool)> = list
            .items
            .iter()
            .map(|n| {
                let ready = n
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                (n.metadata.name.clone().unwrap_or_default(), ready)
            })
            .collect();
        out.sort();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_read_as_the_api_spells_them() {
        for t in ServiceType::ALL {
            assert_eq!(ServiceType::parse(t.as_str()), Some(t));
        }
        assert_eq!(ServiceType::parse("clusterip"), None);
        assert_eq!(ServiceType::default(), ServiceType::ClusterIp);
    }

    #[test]
    fn a_service_maps_each_port_to_the_same_pod_port() {
        let l: BTreeMap<String, String> = [("a".to_string(), "b".to_string())].into();
        let s = service(
            "proxy",
            &l,
            &l,
            ServiceType::NodePort,
            &[("http".into(), 8080), ("https".into(), 8443)],
        );
        let a = ServiceAddress::of(&s);
        assert_eq!(a.kind, ServiceType::NodePort);
        assert_eq!(a.port("https").map(|p| p.port), Some(8443));
        assert_eq!(a.port("8080").map(|p| p.name.as_str()), Some("http"));
        assert!(a.port("admin").is_none());
        let spec = s.spec.unwrap();
        assert_eq!(
            spec.ports.unwrap()[1].target_port,
            Some(IntOrString::Int(8443))
        );
    }
}

/// A Gateway API Gateway as its controller published it: where clients reach it and its
/// listeners, for loads aimed at the Gateway (`via = "gateway:..."`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayAddress {
    /// `status.addresses[].value`, in order (IP addresses or host names).
    pub addresses: Vec<String>,
    /// `spec.listeners[]`: name, port and protocol (`HTTP`, `HTTPS`...).
    pub listeners: Vec<(String, u16, String)>,
}

impl Cluster {
    /// Waits until Gateway `name` in `namespace` (gateway.networking.k8s.io/v1) has an address
    /// in its status, at most `bound`: a cluster without the Gateway API, or without the
    /// Gateway, fails at once; one whose controller never writes an address times out.
    pub fn wait_gateway(
        &self,
        namespace: &str,
        name: &str,
        bound: Duration,
    ) -> Result<GatewayAddress, Error> {
        use kube::api::DynamicObject;
        use kube::core::GroupVersionKind;
        let t0 = Instant::now();
        self.block_on(async {
            let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "Gateway");
            let mut found = None;
            for refresh in [false, true] {
                if let Some(f) = self.discovery(refresh).await?.resolve_gvk(&gvk) {
                    found = Some(f);
                    break;
                }
            }
            let Some((ar, _)) = found else {
                return Err(Error::Refused(
                    "the cluster serves no Gateway API (gateway.networking.k8s.io/v1 Gateway): \
                     install its CRDs and a Gateway controller"
                        .into(),
                ));
            };
            let api: Api<DynamicObject> = Api::namespaced_with(self.client(), namespace, &ar);
            loop {
                let g = api
                    .get(name)
                    .await
                    .map_err(|e| Error::api(format!("get gateway/{name} in {namespace}"), e))?;
                let addresses: Vec<String> = g.data["status"]["addresses"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x["value"].as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                if !addresses.is_empty() {
                    let listeners = g.data["spec"]["listeners"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .map(|l| {
                                    (
                                        l["name"].as_str().unwrap_or_default().to_string(),
                                        l["port"].as_u64().unwrap_or(0) as u16,
                                        l["protocol"].as_str().unwrap_or_default().to_string(),
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    return Ok(GatewayAddress {
                        addresses,
                        listeners,
                    });
                }
                if t0.elapsed() >= bound {
                    return Err(Error::Timeout {
                        what: format!("gateway/{name} in {namespace} address"),
                        after: bound,
                        state: "no address in its status yet (its controller has not \
                                programmed it)"
                            .into(),
                    });
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    }
}
