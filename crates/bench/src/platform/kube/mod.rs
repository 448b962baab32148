//! The `kubernetes` platform's [`Stage`]: one case's backends and proxy as Deployments in the
//! run's namespace, driven through the API ([`k8s::Cluster`]).
//!
//! - Each backend group is a Deployment of the proxybench image (`proxybench backend`) in bridge
//!   mode, with a headless Service whose EndpointSlices give the pod IPs (198.18.0.x on the test
//!   cluster): the upstream addresses the proxy config is rendered with, as a gateway controller
//!   fills its upstreams.
//! - The proxy is one Deployment of the proxy image on the pod network, its config rendered by
//!   the same driver as locally (`stdio_logs`; listeners and the admin listener on `0.0.0.0`,
//!   their ports fixed per pod: the scenario's, else from [`LISTENER_BASE`] and
//!   [`ADMIN_BASE`]), a readiness probe on the admin listener, a topology spread constraint over
//!   the nodes, behind a Service of its own (`proxy`, of the `[platform] service_type`) whose
//!   ClusterIP the scenario's loads aim at. Reload timing and grow probes reach each replica at
//!   its pod IP, or through a port-forward per pod when this machine cannot reach the pod
//!   network ([`k8s::PodPath`]).
//! - Collectors: pod phases and readiness, restarts, Warning events, the metrics API, an optional
//!   Prometheus scrape, and every proxy pod's log followed into a file from its start (deleted
//!   pods included), split at `down` into access and error lines.
//!
//! The files, one concern each (as platform/local/): `run.rs` the platform for a whole run
//! ([`Kubernetes`]), `stage.rs` a case up and the [`Stage`] the runner drives, `manifests.rs`
//! the objects it makes, `replicas.rs` the changes actions make to a running case,
//! `records.rs` its collectors and record, `backends.rs` the backend pods, `aim.rs` where
//! loads aim, `grow.rs` its `grow` parts.

use super::Served;
use crate::error::StackError;
use backends::BackendPods;
use k8s::collect::{
    Collector, EndpointChange, PodTimeline, PodUsage, ProbeTally, Scrape, WarningEvent,
};
use k8s::k8s_openapi::api::core::v1::PodSpec;
use k8s::{Cluster, LogFollowers, PodPath, PodPort, PullPolicy, ServiceType};
use manifests::PodScripts;
use proxy::config::ProxyConfig;
use proxy::{Driver, ReplicaHandle};
use scenario::PlatformSpec;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The image backend pods run when the platform names none.
pub const DEFAULT_IMAGE: &str = "localhost/proxybench:0.1.0";
/// Where the proxy's prefix (pid file, temp dirs) is in its pod.
const POD_PREFIX: &str = "/tmp/pb";
/// The first port a listener without a fixed port gets in the proxy pods (then the next unused
/// one): each pod has its own network namespace, so the ports are the same in every pod.
pub const LISTENER_BASE: u16 = 8080;
/// The first port the admin listener (then the control API) gets in the proxy pods, when no
/// listener has it.
pub const ADMIN_BASE: u16 = 9901;
/// The name of the proxy's Service.
const PROXY_SERVICE: &str = "proxy";
/// The role the proxy Service's endpoints have among the record's pod changes: their ready
/// steps are drawn beside the pods' (an endpoint is named by its pod).
pub const ENDPOINT_ROLE: &str = "endpoint";
/// How long a Service's address may take to answer from here once its pods are Ready
/// (kube-proxy programs it after the EndpointSlice changes).
const SERVICE_BOUND: Duration = Duration::from_secs(15);
/// Set to `port-forward` to reach the proxy pods through port-forwards even when the pod
/// network is routable from here (to measure what the port-forward path costs).
pub const POD_PATH_ENV: &str = "PROXYBENCH_K8S_POD_PATH";
/// How long the config check's pod may take, from its creation to its checker's exit.
const CHECK_BOUND: Duration = Duration::from_secs(60);
/// The label every object of a case carries.
const ROLE: &str = "proxybench/role";
/// How long a wait for pods may take.
const BOUND: Duration = Duration::from_secs(120);

mod aim;
mod backends;
mod grow;
mod manifests;
mod records;
mod replicas;
mod run;
mod stage;

pub(crate) use run::Kubernetes;

/// One case on a cluster.
pub(crate) struct KubeStage {
    cluster: Cluster,
    namespace: String,
    driver: &'static dyn Driver,
    /// The config, generation, listener ports, certificate and time origin served.
    served: Served,
    /// When the stage began: the collectors stamp against it, and records.rs moves their
    /// times to the case's origin (`served.origin`, from when the stack serves).
    stage_origin: Instant,
    configs: BTreeMap<String, ProxyConfig>,
    admin_port: u16,
    control_port: u16,
    groups: Vec<String>,
    configs_out: PathBuf,
    exec_out: PathBuf,
    execs: u32,
    logs_dir: PathBuf,
    handles: Arc<Mutex<Vec<ReplicaHandle>>>,
    /// Pod watchers: the run's namespace, then each watched namespace and selector.
    pods: Vec<Collector<PodTimeline>>,
    /// Warning events of the run's namespace and of each watched one.
    warnings: Vec<Collector<Vec<WarningEvent>>>,
    /// CPU and memory of the run's pods, then of the watched pods of each other namespace.
    metrics: Vec<Collector<Vec<PodUsage>>>,
    scrape: Option<Collector<Vec<Scrape>>>,
    followers: Option<LogFollowers>,
    /// Log followers of the user's watched pods (`[platform] watch`), and how their access
    /// lines are written when the scenario says.
    watched_logs: Vec<LogFollowers>,
    watched_format: Option<proxy::logs::LogFormat>,
    /// Count the watched pods' JSON log lines by level (`watch.log_levels`).
    watched_levels: bool,
    /// A proxy the user runs (`kind = "external"`), attached: its reload command and log files.
    attached: Option<Box<dyn proxy::Replica>>,
    /// What the stage itself could not gather, one sentence each (into the record's `absent`).
    absent: Vec<String>,
    first_backend: BTreeMap<String, SocketAddr>,
    /// The proxy pods' entry and reload scripts (none before the proxy is up).
    scripts: Option<PodScripts>,
    /// The proxy pods' grace period and preStop sleep, in seconds.
    proxy_stop: Option<(u32, u32)>,
    backends: BackendPods,
    /// The proxy Service's type and ClusterIP (none before the proxy is up, or for the user's
    /// own gateway).
    service: Option<(ServiceType, Option<IpAddr>)>,
    /// How this machine reaches the proxy pods (detected once they are Ready).
    pod_path: Option<PodPath>,
    /// The platform's image pull policy and secrets, for every pod the stage makes.
    pulling: Pulling,
    /// How long the proxy pods may take to be Ready (`[platform] ready_timeout`, which bounds
    /// the backend pods' first wait too).
    ready_bound: Duration,
    /// What each load's cluster `via` resolved to, by the via as written (for the record).
    load_targets: Mutex<BTreeMap<String, String>>,
    /// The load targets that did not answer from this machine (a remote cluster's Service
    /// addresses): loads aimed there run from an agent in the cluster.
    unreached: Mutex<BTreeSet<IpAddr>>,
    /// Ports of proxy pods as this machine reaches them, by pod and port (port-forwards stay
    /// open while their pod runs).
    reach: BTreeMap<(String, u16), PodPort>,
    /// Sentences for the case's findings: the path the loads took, how pods were reached.
    notes: Vec<String>,
    /// The proxy Service's EndpointSlice watch.
    endpoints: Option<Collector<Vec<EndpointChange>>>,
    /// The kubelets' readiness probe counters of the proxy pods.
    probes: Option<Collector<Vec<ProbeTally>>>,
}

fn platform(e: impl std::fmt::Display) -> StackError {
    StackError::Platform(e.to_string())
}

/// How every pod of a run gets its image: `[platform] image_pull_policy` (or
/// `--image-pull-policy`) for every container when set, else [`PullPolicy::for_image`]; and
/// `image_pull_secrets` on every pod.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pulling {
    policy: Option<PullPolicy>,
    secrets: Vec<String>,
}

impl Pulling {
    /// The platform's settings (a policy the parser let through is one the API knows).
    pub(crate) fn of(spec: &PlatformSpec) -> Pulling {
        Pulling {
            policy: spec
                .image_pull_policy
                .as_deref()
                .and_then(PullPolicy::parse),
            secrets: spec.image_pull_secrets.clone(),
        }
    }

    /// The policy a container of `image` runs with.
    pub(crate) fn policy(&self, image: &str) -> PullPolicy {
        self.policy.unwrap_or_else(|| PullPolicy::for_image(image))
    }

    /// `pod` with the policy on each container and the pull secrets.
    pub(crate) fn apply(&self, mut pod: PodSpec) -> PodSpec {
        for c in pod.containers.iter_mut() {
            if let Some(i) = c.image.clone() {
                c.image_pull_policy = Some(self.policy(&i).to_string());
            }
        }
        if let Some(s) = k8s::pull_secrets(&self.secrets) {
            pod.image_pull_secrets = Some(s);
        }
        pod
    }
}

/// The lowest port from `from` up that `used` does not hold.
fn next_port(used: &BTreeSet<u16>, from: u16) -> u16 {
    (from..=u16::MAX)
        .find(|p| !used.contains(p))
        .unwrap_or(from)
}
