//! `grow` on Kubernetes: the same steps, probe and records as locally ([`crate::grow`]), with
//! the cluster's parts. Each step renders the next generation and writes it into every proxy
//! pod (the stage's reload), new listeners take the next port no listener of the pods has (and
//! a port on the proxy's Service), upstream servers are pods of the group's Deployment, and the
//! newest item is probed every 100 ms as NGF's scale tests do ([`crate::grow::NGF_POLL`]), on
//! the oldest proxy pod at its pod IP (or through its port-forward).
//!
//! Upstream servers are pods, and nodes hold a limited number of them (the kubelet's max-pods,
//! 110 by default): a growth that needs more pods than the schedulable nodes have room for is
//! refused before its first step, naming the limit and the largest growth that fits.

use super::{KubeStage, Served};
use crate::error::StackError;
use crate::grow::{Grower, NGF_POLL};
use model::ReloadRecord;
use scenario::{GrowSpec, GrowWhat};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

impl Grower for KubeStage {
    fn served(&self) -> &Served {
        &self.served
    }

    fn served_mut(&mut self) -> &mut Served {
        &mut self.served
    }

    fn reload_all(&mut self) -> (Vec<ReloadRecord>, Option<StackError>) {
        KubeStage::reload_all(self)
    }

    fn add_listener_port(&mut self, name: &str) -> Result<u16, StackError> {
        let mut used: BTreeSet<u16> = self.served.ports.values().copied().collect();
        used.extend([self.admin_port, self.control_port]);
        let port = super::next_port(&used, super::LISTENER_BASE);
        self.served.ports.insert(name.to_string(), port);
        self.apply_service()?;
        Ok(port)
    }

    fn probe_addr(&mut self, port: u16) -> Result<SocketAddr, StackError> {
        let mut pods = self.proxy_pods()?;
        pods.sort_by(|a, b| a.created.cmp(&b.created));
        let p = pods.into_iter().next().ok_or(StackError::NoReplica)?;
        self.reach_port(&p, port)
    }

    fn group_size(&self, group: &str) -> u32 {
        self.cluster
            .deployment_replicas(&self.namespace, &super::backends::deployment_of(group))
            .map_or(0, |r| r.desired.max(0) as u32)
    }

    fn add_backends(&mut self, group: &str, n: u32) -> Result<(), StackError> {
        let to = self.group_size(group) + n;
        self.backends
            .scale(&self.cluster, &self.namespace, group, to)
    }

    fn ready_poll(&self) -> Duration {
        NGF_POLL
    }

    fn can_grow(&self, g: &GrowSpec, from: u32) -> Result<(), StackError> {
        if g.what != GrowWhat::UpstreamServers || g.to <= from {
            return Ok(());
        }
        // A cluster that does not let us count (no cluster-wide read access) is tried as is:
        // its scheduler then says why pods stay Pending.
        let Ok(cap) = self.cluster.pod_capacity() else {
            return Ok(());
        };
        let need = u64::from(g.to - from);
        if need <= cap.free() {
            return Ok(());
        }
        Err(StackError::Grow(format!(
            "upstream_servers to {} needs {need} more backend pods, but the cluster's {} \
             schedulable node(s) hold at most {} pods (the kubelet's max-pods) and {} run \
             already: at most {} upstream servers fit (lower `to`, or add nodes)",
            g.to,
            cap.nodes,
            cap.allocatable,
            cap.used,
            u64::from(from) + cap.free()
        )))
    }
}
