//! How this machine reaches one port of one pod: at the pod's IP when the pod network is
//! routable from here (a node of the cluster, or a machine beside it), else through a
//! port-forward of the API server, which works from anywhere the API server does. The path is
//! detected once ([`Cluster::detect_pod_path`]) and every replica probe (reload timing, config
//! generations, readiness of grown items, anyone's gateway replicas) goes the same way
//! ([`Cluster::pod_port`]).

use crate::cluster::Cluster;
use crate::error::Error;
use crate::forward::PortForward;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

/// The way this machine reaches pods' ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPath {
    /// Straight to the pod's IP: the pod network is routable from here.
    PodIp,
    /// Through the API server (`pods/portforward`): a local port per pod port.
    PortForward,
}

impl PodPath {
    /// How env.json and the report name it (`pod IP`, `port-forward`).
    pub fn as_str(self) -> &'static str {
        match self {
            PodPath::PodIp => "pod IP",
            PodPath::PortForward => "port-forward",
        }
    }
}

impl std::fmt::Display for PodPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// True when a TCP connection to `ip:port` opens within `bound`: something at the pod's IP
/// answers from here.
pub fn reaches(ip: IpAddr, port: u16, bound: Duration) -> bool {
    TcpStream::connect_timeout(&SocketAddr::new(ip, port), bound).is_ok()
}

/// One port of one pod, as this machine reaches it. Dropping it ends its port-forward, if any.
#[derive(Debug)]
pub struct PodPort {
    /// The pod's name.
    pub pod: String,
    /// The pod's IP.
    pub ip: IpAddr,
    /// The pod's port.
    pub port: u16,
    /// How it is reached.
    pub path: PodPath,
    forward: Option<PortForward>,
}

impl PodPort {
    /// Where to connect: the pod's own address, or the local end of its port-forward.
    pub fn addr(&self) -> SocketAddr {
        match &self.forward {
            Some(f) => f.addr(),
            None => SocketAddr::new(self.ip, self.port),
        }
    }

    /// Why the port-forward could not carry the last connection (opening its stream failed
    /// twice, the pod is gone...); `None` on the pod-IP path or while it works.
    pub fn forward_error(&self) -> Option<String> {
        self.forward.as_ref().and_then(PortForward::last_error)
    }
}

impl Cluster {
    /// Which way this machine reaches the pod network: [`PodPath::PodIp`] when `ip:port` (a
    /// running pod's listening port) answers a TCP connect within `bound`, else
    /// [`PodPath::PortForward`].
    pub fn detect_pod_path(&self, ip: IpAddr, port: u16, bound: Duration) -> PodPath {
        if reaches(ip, port, bound) {
            PodPath::PodIp
        } else {
            PodPath::PortForward
        }
    }

    /// Port `port` of pod `pod` (at `ip`) in `namespace`, reached by `path`: on the pod-IP path
    /// nothing is opened; on the port-forward path a local listener forwards each connection.
    pub fn pod_port(
        &self,
        namespace: &str,
        pod: &str,
        ip: IpAddr,
        port: u16,
        path: PodPath,
    ) -> Result<PodPort, Error> {
        let forward = match path {
            PodPath::PodIp => None,
            PodPath::PortForward => Some(self.port_forward(namespace, pod, port)?),
        };
        Ok(PodPort {
            pod: pod.to_string(),
            ip,
            port,
            path,
            forward,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_port_is_not_reached_and_an_open_one_is() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(reaches(
            "127.0.0.1".parse().unwrap(),
            port,
            Duration::from_secs(1)
        ));
        drop(l);
        assert!(!reaches(
            "127.0.0.1".parse().unwrap(),
            port,
            Duration::from_secs(1)
        ));
        assert_eq!(PodPath::PortForward.to_string(), "port-forward");
    }
}
