//! Where a case's backends and proxy run: the seam between the runner and a platform.
//!
//! A [`Platform`] lives for a whole run (on Kubernetes: the API connection and the run's
//! namespace); for each case it stands up a [`Stage`], the case's running backends and proxy,
//! which applies the case's actions and, at the end, hands back what only it can read (the
//! proxy's logs, the backends' counters, what the cluster showed). The runner, the loads and
//! the collectors talk only to these two traits.
//!
//! - `local` ([`Local`]): processes on this machine (`local::Stack`).
//! - `kubernetes`: Deployments on a cluster, through its API.
//!
//! A platform also starts the agents of a distributed load ([`agents`]): processes on this
//! machine, or an Indexed Job's pods.

use crate::error::{PlatformError, StackError};
use model::{BackendCounters, ClusterRecord, Event, ReadyRecord, ReloadRecord};
use proxy::config::ProxyConfig;
use proxy::{LogFiles, ReplicaHandle, TlsFiles};
use scenario::{Action, BackendGroup, Case};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub mod agents;
mod kube;
pub mod local;
pub mod registry;

pub use agents::{Agents, AgentsSpec};
pub use local::Local;

/// What a platform stands a case up from ([`Platform::stage`]; locally `local::Stack::up`).
pub struct StackSpec<'a> {
    /// Backend groups.
    pub backends: &'a [BackendGroup],
    /// Backend event-loop threads.
    pub backend_threads: usize,
    /// The proxy config, if any.
    pub proxy: Option<&'a ProxyConfig>,
    /// Alternatives for `swap_config`.
    pub configs: &'a BTreeMap<String, ProxyConfig>,
    /// Certificate for TLS listeners (generated once per run).
    pub tls: Option<TlsFiles>,
    /// Scratch directory for replica prefixes.
    pub work: PathBuf,
    /// Directory that receives every rendered config.
    pub configs_out: PathBuf,
    /// Directory that receives the stdout and stderr of `exec` actions (made at the first).
    pub exec_out: PathBuf,
    /// When the stage began: what the stage stamps before [`Stage::serving`] counts from it.
    pub origin: Instant,
    /// Seed for the fleet's random draws.
    pub seed: u64,
}

/// What a step did: its events (one per step of a growth), reloads, and times to ready.
#[derive(Debug, Default)]
pub struct Applied {
    /// One event per (sub)step.
    pub events: Vec<Event>,
    /// Every reload, one per replica per reload.
    pub reloads: Vec<ReloadRecord>,
    /// Times to ready of grown items.
    pub ready: Vec<ReadyRecord>,
    /// Kubernetes: the per-replica probe records of probed actions and templated growth steps.
    pub probes: Vec<model::ProbeRecord>,
}

/// What a case's stage serves, the same on every platform, which the actions and `grow`
/// change: the config, its generation, the listener ports, the certificate and the case's
/// time origin. Each stage holds one; `grow` reads and changes it through
/// [`crate::grow::Grower::served`], so no platform repeats its accessors.
#[derive(Debug)]
pub struct Served {
    /// The config being served, if there is a proxy.
    pub config: Option<ProxyConfig>,
    /// The config generation the replicas serve (or were last asked to).
    pub generation: u64,
    /// Listener name to the port clients reach it on.
    pub ports: BTreeMap<String, u16>,
    /// The certificate TLS listeners serve, if the case has one.
    pub tls: Option<TlsFiles>,
    /// The case's time origin.
    pub origin: Instant,
}

/// A run's platform: stands up each case's [`Stage`] and cleans up after the run.
pub trait Platform {
    /// The platform's name (`local`, `kubernetes`).
    fn name(&self) -> &'static str;
    /// Stands up one case: its backends, then its proxy replicas.
    fn stage(&self, case: &Case, spec: StackSpec<'_>) -> Result<Box<dyn Stage>, StackError>;
    /// Ends the run on the platform (on Kubernetes: deletes the run's namespace unless kept);
    /// what it could not undo, one sentence each. Runs after an interrupted run too.
    fn close(&mut self) -> Vec<String>;
    /// Starts the agents of a distributed load and waits until they are ready.
    fn agents(&self, spec: &AgentsSpec<'_>) -> Result<Box<dyn Agents>, PlatformError>;
    /// Whether the run's backends and proxies are processes on this machine: env.json then
    /// describes the machine, and needs a platform section only when one was asked for.
    fn on_this_machine(&self) -> bool {
        false
    }
    /// What each case gives its proxy to run on (by case name), for env.json and the
    /// comparison. Only a platform that runs the proxies on this machine can say; the default
    /// says nothing.
    fn proxy_resources(&self, _scn: &scenario::Scenario) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
}

/// One case's running backends and proxy, as the runner, the loads and the actions see them.
pub trait Stage {
    /// Listener name to the port clients reach it on (at [`Stage::listener_ip`]).
    fn ports(&self) -> &BTreeMap<String, u16>;
    /// The address loads reach the listeners at: this machine's loopback locally; on
    /// Kubernetes the ClusterIP of the proxy's Service, where users' traffic goes.
    fn listener_ip(&self) -> IpAddr {
        crate::reach::RUN_IP
    }
    /// Where a load whose `via` names an address the platform discovers (a Service's
    /// ClusterIP, a NodePort, a load balancer's address) connects; only Kubernetes has them.
    fn aim(&self, via: &scenario::Via, _tls: bool) -> Result<SocketAddr, StackError> {
        Err(StackError::Platform(format!(
            "via '{via}' is an address of the Kubernetes platform"
        )))
    }
    /// Whether a load from this machine reaches `to`: a remote cluster's Service and pod
    /// addresses may answer only inside it. The runner sends a load whose target does not
    /// answer here from one agent in the cluster instead (local: always).
    fn reaches_from_here(&self, _to: SocketAddr) -> bool {
        true
    }
    /// The port of the first listener that is (or is not) TLS.
    fn listener_port(&self, tls: bool) -> Option<u16>;
    /// The address of a group's first current member (for loads that bypass the proxy).
    fn first_backend(&self, group: &str) -> Option<SocketAddr>;
    /// The external target's attach settings, when the case's proxy is one the user runs.
    fn external(&self) -> Option<&proxy::config::External>;
    /// The stack serves from `origin` on (the runner calls it once, after the stage is up and
    /// the loads' targets and agents are ready): the case's clock starts there for actions,
    /// loads and records. What the stage stamped before it, against the spec's origin, counts
    /// from `origin` too in what it hands back (negative: before the stack served).
    fn serving(&mut self, origin: Instant);
    /// Handles of the proxy processes on this machine for the /proc and status collectors,
    /// kept current as replicas come and go (empty when the proxy runs elsewhere).
    fn handles(&self) -> Arc<Mutex<Vec<ReplicaHandle>>>;
    /// Applies one step's action now; `keep_going` turns false when the loads have ended or the
    /// run is interrupted (long actions stop early then).
    fn apply(&mut self, action: &Action, keep_going: &dyn Fn() -> bool) -> Applied;
    /// Stops the proxy and the backends and gathers what only the stage can read.
    fn down(&mut self) -> Down;
}

/// What a stage hands back when it comes down.
#[derive(Debug, Default)]
pub struct Down {
    /// The log files of every proxy replica (or pod) that ran, by name.
    pub logs: Vec<(String, LogFiles)>,
    /// Every backend's counters at the end.
    pub backends: Vec<BackendCounters>,
    /// What the cluster showed (Kubernetes only).
    pub cluster: Option<ClusterRecord>,
    /// The first teardown failure.
    pub err: Option<StackError>,
    /// How the case ran where the record has no field for it (the path the loads took, how
    /// replicas were reached), one sentence each, for the case's findings.
    pub notes: Vec<String>,
    /// Items a collector of the stage covered in part or not at all (a pod's log whose
    /// follower failed): the run records each in the case's coverage
    /// ([`model::CaseResult::add_missing`]), so that nothing reads them as whole.
    pub missed: Vec<Missed>,
}

/// One item a collector covered in part or not at all, with why: what
/// [`model::CaseResult::add_missing`] records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missed {
    /// The collector.
    pub collector: model::Collector,
    /// What one item is, plural (`logs`).
    pub unit: String,
    /// How many items the collector was meant to cover.
    pub of: usize,
    /// The item (`proxy-7c9f-x2`).
    pub item: String,
    /// Why (`container nginx: the final read did not end within 30s`).
    pub why: String,
}
