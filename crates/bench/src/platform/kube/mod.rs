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
    Collector, EndpointChange, PodTimeline, PodUsage, ProbeCounts, Scrape, WarningEvent,
};
use k8s::k8s_openapi::api::core::v1::{
    Capabilities, PodSecurityContext, PodSpec, ResourceRequirements, SeccompProfile,
    SecurityContext, Toleration,
};
use k8s::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
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
/// The base name of the proxy's Deployment, Service and ConfigMap (`proxy-<run id>`), and the
/// name a load's `service:proxy` via gives the run's own proxy Service.
const PROXY: &str = "proxy";
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
mod probe;
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
    probes: Option<Collector<ProbeCounts>>,
    /// A short id of the case's run on the cluster (`pb-<stamp>`): a templated growth's
    /// `{{ run }}`, the `app.kubernetes.io/instance` label of everything the case makes, and
    /// the suffix of its names.
    run_id: String,
    /// Whether the case holds long-lived connections (WebSocket, gRPC stream, SSE loads): an old
    /// proxy generation then keeps running while it holds them, which is what the case measures.
    long_lived: bool,
}

/// The name of run `run`'s object `base` (`proxy`, `backend-GROUP`): `base-<run id>`, so that
/// it cannot be a user's object of the same base name.
pub(super) fn named(base: &str, run: &str) -> String {
    format!("{base}-{run}")
}

/// The label selector of run `run`'s objects: [`k8s::MANAGED_BY`] and its
/// `app.kubernetes.io/instance`, then `more` (`key=value` or `key`) when not empty.
pub(super) fn run_selector(run: &str, more: &str) -> String {
    let mut s = format!(
        "{}={},{}={run}",
        k8s::MANAGED_BY.0,
        k8s::MANAGED_BY.1,
        k8s::INSTANCE
    );
    if !more.is_empty() {
        s.push(',');
        s.push_str(more);
    }
    s
}

impl KubeStage {
    /// The name of this case's object `base`: `base-<run id>` ([`named`]).
    fn name(&self, base: &str) -> String {
        named(base, &self.run_id)
    }

    /// The selector of this case's pods of `role` (`proxy`, `backend`).
    fn role_selector(&self, role: &str) -> String {
        run_selector(&self.run_id, &format!("{ROLE}={role}"))
    }
}

fn platform(e: impl std::fmt::Display) -> StackError {
    StackError::Platform(e.to_string())
}

/// How every pod of a run is made, whatever made it (proxy, backends, the config check,
/// agents): its image pull policy (`[platform] image_pull_policy` or `--image-pull-policy` for
/// every container when set, else [`PullPolicy::for_image`]) and `image_pull_secrets`; and what
/// a shared cluster asks of a pod: a non-root user with no privilege escalation, no
/// capabilities and the runtime's seccomp profile (so that the Pod Security `baseline`, even
/// `restricted`, admits it), resource requests per container ([`requests`]), and the
/// platform's `node_selector` and `tolerations`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pulling {
    policy: Option<PullPolicy>,
    secrets: Vec<String>,
    node_selector: BTreeMap<String, String>,
    tolerations: Vec<Toleration>,
    requests: BTreeMap<String, scenario::Requests>,
}

/// The user and group every container of a run runs as: `nobody` in the images `make image`
/// builds (none of them needs root: every port is above 1023, every file they write is under
/// /tmp).
pub(crate) const RUN_AS: i64 = 65534;

/// A container's default resource requests by its name (the pod role): cpu, memory. Requests,
/// never limits: the scheduler reserves them on a shared cluster, while a CPU limit would
/// throttle the proxy and bend what the run measures. The values are what such a pod uses at
/// rest, rounded up (docs/kubernetes-reference.md, "Safe on a shared cluster"); `[platform] requests`
/// sets others.
pub(crate) fn requests(container: &str) -> (&'static str, &'static str) {
    match container {
        "proxy" => ("100m", "64Mi"),
        "agent" => ("100m", "64Mi"),
        "backend" => ("20m", "32Mi"),
        _ => ("10m", "32Mi"),
    }
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
            node_selector: spec.node_selector.clone(),
            tolerations: spec
                .tolerations
                .iter()
                .map(|t| Toleration {
                    key: t.key.clone(),
                    operator: Some(t.operator.clone()),
                    value: t.value.clone(),
                    effect: t.effect.clone(),
                    toleration_seconds: t.toleration_seconds,
                })
                .collect(),
            requests: spec.requests.clone(),
        }
    }

    /// The policy a container of `image` runs with.
    pub(crate) fn policy(&self, image: &str) -> PullPolicy {
        self.policy.unwrap_or_else(|| PullPolicy::for_image(image))
    }

    /// `pod` as every pod of the run is made: the pull policy on each container and the pull
    /// secrets; the non-root, unprivileged security context; each container's requests (its
    /// name is its role); the platform's node selector (added to the pod's own) and
    /// tolerations.
    pub(crate) fn apply(&self, mut pod: PodSpec) -> PodSpec {
        for c in pod.containers.iter_mut() {
            if let Some(i) = c.image.clone() {
                c.image_pull_policy = Some(self.policy(&i).to_string());
            }
            c.security_context = Some(SecurityContext {
                allow_privilege_escalation: Some(false),
                capabilities: Some(Capabilities {
                    drop: Some(vec!["ALL".into()]),
                    ..Default::default()
                }),
                run_as_non_root: Some(true),
                ..Default::default()
            });
            let (cpu, memory) = requests(&c.name);
            let set = self.requests.get(&c.name);
            let mut r = BTreeMap::new();
            r.insert(
                "cpu".to_string(),
                Quantity(set.and_then(|s| s.cpu.clone()).unwrap_or(cpu.into())),
            );
            r.insert(
                "memory".to_string(),
                Quantity(set.and_then(|s| s.memory.clone()).unwrap_or(memory.into())),
            );
            c.resources = Some(ResourceRequirements {
                requests: Some(r),
                ..Default::default()
            });
        }
        pod.security_context = Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(RUN_AS),
            run_as_group: Some(RUN_AS),
            // Secret volumes (the backends' and agents' tokens) are readable by this group.
            fs_group: Some(RUN_AS),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        if !self.node_selector.is_empty() {
            let mut n = pod.node_selector.take().unwrap_or_default();
            n.extend(self.node_selector.clone());
            pod.node_selector = Some(n);
        }
        if !self.tolerations.is_empty() {
            let mut t = pod.tolerations.take().unwrap_or_default();
            t.extend(self.tolerations.clone());
            pod.tolerations = Some(t);
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s::k8s_openapi::api::core::v1::Container;

    /// Every container comes out unprivileged and non-root with its role's requests, and the
    /// platform's placement is added to the pod's own.
    #[test]
    fn every_pod_is_made_unprivileged_with_requests_and_placement() {
        let spec = PlatformSpec {
            node_selector: [("pool".to_string(), "bench".to_string())].into(),
            tolerations: vec![scenario::Toleration {
                key: Some("dedicated".into()),
                operator: "Equal".into(),
                value: Some("bench".into()),
                effect: Some("NoSchedule".into()),
                toleration_seconds: None,
            }],
            requests: [(
                "proxy".to_string(),
                scenario::Requests {
                    cpu: Some("1".into()),
                    memory: None,
                },
            )]
            .into(),
            ..PlatformSpec::default()
        };
        let pod = PodSpec {
            node_selector: Some([("kubernetes.io/hostname".to_string(), "n1".to_string())].into()),
            containers: ["proxy", "backend", "sidecar"]
                .map(|n| Container {
                    name: n.into(),
                    image: Some("localhost/x:1".into()),
                    ..Default::default()
                })
                .into(),
            ..Default::default()
        };
        let pod = Pulling::of(&spec).apply(pod);
        let psc = pod.security_context.unwrap();
        assert_eq!(psc.run_as_non_root, Some(true));
        assert_eq!(psc.run_as_user, Some(RUN_AS));
        assert_eq!(psc.seccomp_profile.unwrap().type_, "RuntimeDefault");
        let want = [
            ("proxy", "1", "64Mi"),
            ("backend", "20m", "32Mi"),
            ("sidecar", "10m", "32Mi"),
        ];
        for (c, (name, cpu, mem)) in pod.containers.iter().zip(want) {
            assert_eq!(c.name, name);
            let sc = c.security_context.clone().unwrap();
            assert_eq!(sc.allow_privilege_escalation, Some(false));
            assert_eq!(
                sc.capabilities.unwrap().drop.unwrap(),
                vec!["ALL".to_string()]
            );
            let r = c.resources.clone().unwrap().requests.unwrap();
            assert_eq!(
                (r["cpu"].0.as_str(), r["memory"].0.as_str()),
                (cpu, mem),
                "{name}"
            );
            assert!(c.resources.clone().unwrap().limits.is_none(), "no limits");
        }
        let nodes = pod.node_selector.unwrap();
        assert_eq!(nodes.len(), 2, "{nodes:?}");
        assert_eq!(nodes["pool"], "bench");
        let t = pod.tolerations.unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].key.as_deref(), Some("dedicated"));
        assert_eq!(t[0].operator.as_deref(), Some("Equal"));
    }
}
