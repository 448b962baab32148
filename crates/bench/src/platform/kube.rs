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

use super::{Applied, Served, StackSpec};
use super::{Down, Stage};
use crate::error::StackError;
use backends::{BackendPods, BACKEND_PORT};
use k8s::collect::{
    Collected, Collector, EndpointChange, PodTimeline, PodUsage, ProbeTally, PromTarget, Scrape,
    WarningEvent,
};
use k8s::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s::k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, ExecAction, HTTPGetAction,
    Lifecycle, LifecycleHandler, Pod, PodSpec, PodTemplateSpec, Probe, Secret, SecretVolumeSource,
    Service, ServicePort, ServiceSpec, SleepAction, TopologySpreadConstraint, Volume, VolumeMount,
};
use k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s::{Cluster, LogFollowers, PodPath, PodPort, PullPolicy, ServiceType};
use model::{ClusterRecord, Event, ReloadRecord};
use proxy::config::ProxyConfig;
use proxy::logs::Parse as _;
use proxy::{Driver, LogFiles, RenderContext, ReplicaHandle};
use scenario::{Action, Case, PlatformSpec, RemoveMode, StopSpec};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The image backend pods run when the platform names none.
pub const DEFAULT_IMAGE: &str = "localhost/proxybench:0.1.0";
/// The image nginx pods run when the platform names none.
pub const DEFAULT_PROXY_IMAGE: &str = "localhost/proxybench-nginx:1.22.1";

/// The image a proxy of `kind` runs when the platform names none: the one `make image` builds
/// for it (k8s/image.sh, from the Debian package's binary).
pub fn default_proxy_image(kind: proxy::ProxyKind) -> &'static str {
    match kind {
        proxy::ProxyKind::Haproxy => "localhost/proxybench-haproxy:2.6.12",
        proxy::ProxyKind::Caddy => "localhost/proxybench-caddy:2.6.2",
        _ => DEFAULT_PROXY_IMAGE,
    }
}
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

#[path = "kube_aim.rs"]
mod aim;
#[path = "kube_backends.rs"]
mod backends;
#[path = "kube_grow.rs"]
mod grow;

/// One case on a cluster.
pub(crate) struct KubeStage {
    cluster: Cluster,
    namespace: String,
    driver: &'static dyn Driver,
    /// The config, generation, listener ports, certificate and time origin served.
    served: Served,
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
    metrics: Option<Collector<Vec<PodUsage>>>,
    scrape: Option<Collector<Vec<Scrape>>>,
    followers: Option<LogFollowers>,
    /// Log followers of the user's watched pods (`[platform] watch`), and how their access
    /// lines are written when the scenario says.
    watched_logs: Vec<LogFollowers>,
    watched_format: Option<proxy::logs::LogFormat>,
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

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn meta(name: &str, l: &BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(l.clone()),
        ..Default::default()
    }
}

/// A Deployment of one container with our defaults: no service account token, no cluster DNS
/// (the test cluster has none), no service links.
fn deployment(
    name: &str,
    l: &BTreeMap<String, String>,
    replicas: u32,
    mut pod: PodSpec,
) -> Deployment {
    pod.automount_service_account_token = Some(false);
    pod.enable_service_links = Some(false);
    pod.dns_policy = Some("Default".into());
    Deployment {
        metadata: meta(name, l),
        spec: Some(DeploymentSpec {
            replicas: Some(replicas as i32),
            selector: LabelSelector {
                match_labels: Some(l.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(meta(name, l)),
                spec: Some(pod),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn sh(script: &str) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), script.into()]
}

/// The proxy pod's shell scripts, around the driver's container commands: the entry (copy the
/// config from its ConfigMap, start the proxy), the reload (the next config arrives on stdin,
/// and the driver's reload makes the proxy serve it), the driver's preStop command if any, and
/// the config check a pod of the proxy's image runs before any replica gets the config.
/// Each exports `$CONF`, `$PREFIX` and, with TLS, `$TLS_CERT` and `$TLS_KEY` for the driver.
struct PodScripts {
    entry: String,
    reload: String,
    pre_stop: Option<String>,
    check: String,
    log_format: proxy::logs::LogFormat,
}

impl PodScripts {
    /// The scripts for `driver`'s proxy, whose config file is `file`; refused when the driver
    /// has no container form.
    fn of(driver: &dyn Driver, file: &str, tls: bool) -> Result<PodScripts, StackError> {
        let Some(c) = driver.container() else {
            return Err(platform(format!(
                "the {} driver has no container form: the kubernetes platform cannot run it",
                driver.name()
            )));
        };
        let conf = format!("/run/pb/{file}");
        let mut env = format!("export CONF={conf} PREFIX={POD_PREFIX}");
        if tls {
            env.push_str(" TLS_CERT=/tls/cert.pem TLS_KEY=/tls/key.pem");
        }
        Ok(PodScripts {
            entry: format!(
                "set -e; mkdir -p /run/pb {POD_PREFIX}; cat /config/{file} > {conf}; {env}; {}",
                c.start
            ),
            reload: format!("set -e; cat > {conf}; {env}; {}", c.reload),
            pre_stop: c.pre_stop.map(|p| format!("{env}; {p}")),
            check: format!(
                "set -e; mkdir -p /run/pb {POD_PREFIX}; cat /config/{file} > {conf}; {env}; {}",
                c.check
            ),
            log_format: c.log_format,
        })
    }
}

/// The proxy pods' termination grace period and preStop sleep in seconds: the platform's, else
/// Kubernetes' default grace (30 s) and a 1 s sleep (none when the grace leaves no room for it).
fn proxy_stop(spec: &PlatformSpec) -> (i64, i64) {
    let grace = spec.proxy_grace.map_or(30, |d| d.as_secs() as i64);
    let pre_stop = spec
        .proxy_pre_stop
        .map_or(if grace > 1 { 1 } else { 0 }, |d| d.as_secs() as i64);
    (grace, pre_stop)
}

/// The lowest port from `from` up that `used` does not hold.
fn next_port(used: &BTreeSet<u16>, from: u16) -> u16 {
    (from..=u16::MAX)
        .find(|p| !used.contains(p))
        .unwrap_or(from)
}

/// `GET /generation` of a pod's admin listener, at `sa` (its pod IP, or its port-forward). The
/// answer is read to its Content-Length, not to the connection's close: through a port-forward
/// the close reaches here about a second after the pod's, longer than `timeout`.
fn generation_at(sa: SocketAddr, timeout: Duration) -> Result<u64, String> {
    let mut s = TcpStream::connect_timeout(&sa, timeout).map_err(|e| format!("{sa}: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /generation HTTP/1.0\r\nHost: admin\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            if length.is_some_and(|n| raw.len() >= end + 4 + n) {
                break;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("{sa}: {e}")),
        }
    }
    let buf = String::from_utf8_lossy(&raw);
    let body = buf.split("\r\n\r\n").nth(1).unwrap_or_default();
    body.trim()
        .parse()
        .map_err(|_| format!("{sa}: no generation in {body:?}"))
}

impl KubeStage {
    /// Stands up one case in `namespace`: backend Deployments and their headless Services, then
    /// the proxy Deployment (config checked by the proxy's own checker first), the collectors
    /// and the log followers; returns once every pod is Ready. A case that cannot come up (a
    /// pod never Ready, a refused config) deletes what it made before it returns the error,
    /// also in a namespace the run did not make.
    pub(crate) fn up(
        cluster: Cluster,
        namespace: &str,
        spec: &PlatformSpec,
        case: &Case,
        stack: StackSpec<'_>,
    ) -> Result<KubeStage, StackError> {
        let mut made = None;
        match Self::up_into(&mut made, cluster, namespace, spec, case, stack) {
            Ok(()) => made.ok_or_else(|| platform("the stage was not made")),
            Err(e) => {
                if let Some(mut st) = made {
                    let _ = st.down();
                }
                Err(e)
            }
        }
    }

    /// [`KubeStage::up`]'s work, the stage in `made` as soon as it exists.
    fn up_into(
        made: &mut Option<KubeStage>,
        cluster: Cluster,
        namespace: &str,
        spec: &PlatformSpec,
        case: &Case,
        stack: StackSpec<'_>,
    ) -> Result<(), StackError> {
        let origin = stack.origin;
        let ns = namespace.to_string();
        let c = &cluster;
        let logs_dir = stack.work.join("pod-logs");
        for d in [&stack.work, &stack.configs_out] {
            std::fs::create_dir_all(d).map_err(|source| StackError::Io {
                path: d.clone(),
                source,
            })?;
        }
        let st = made.insert(KubeStage {
            cluster: cluster.clone(),
            namespace: ns.clone(),
            driver: proxy::driver(stack.proxy.map(|p| p.kind).unwrap_or_default()),
            served: Served {
                config: stack.proxy.cloned(),
                generation: 1,
                ports: BTreeMap::new(),
                tls: stack.tls.clone(),
                origin,
            },
            configs: stack.configs.clone(),
            admin_port: 0,
            control_port: 0,
            groups: Vec::new(),
            configs_out: stack.configs_out.clone(),
            exec_out: stack.exec_out.clone(),
            execs: 0,
            logs_dir: logs_dir.clone(),
            handles: Arc::new(Mutex::new(Vec::new())),
            pods: vec![c.watch_pods(&ns, "", origin)],
            warnings: vec![c.watch_warnings(&ns, origin)],
            metrics: None,
            scrape: None,
            followers: None,
            watched_logs: Vec::new(),
            watched_format: spec.watch_log_format,
            attached: None,
            absent: Vec::new(),
            first_backend: BTreeMap::new(),
            scripts: None,
            proxy_stop: None,
            service: None,
            pod_path: None,
            load_targets: Mutex::default(),
            pulling: Pulling::of(spec),
            ready_bound: spec.ready_timeout.unwrap_or(BOUND),
            reach: BTreeMap::new(),
            notes: Vec::new(),
            endpoints: None,
            probes: None,
            backends: BackendPods::new(
                c,
                &ns,
                case.backends.iter().map(|g| g.name.clone()).collect(),
                &stack.work.join("backend-logs"),
                origin,
            )?,
        });
        st.watch(spec)?;
        st.metrics = Some(c.sample_metrics(&ns, "", origin, Duration::from_secs(1)));
        if let Some(p) = &spec.prometheus {
            let target = PromTarget {
                port: p.port,
                path: p.path.clone(),
                keep: p.metrics.clone(),
            };
            st.scrape = Some(c.scrape_prometheus(&ns, &p.selector, &target, origin, p.every));
        }
        // Backends.
        let image = spec.image.clone().unwrap_or_else(|| DEFAULT_IMAGE.into());
        // An image the cluster can neither pull nor find on its nodes: one line, before any
        // pod could stick in ErrImagePull.
        let mut images = vec![(image.as_str(), st.pulling.policy(&image))];
        let proxy_image = spec.proxy_image.clone();
        if let Some(p) = proxy_image.as_deref().filter(|_| {
            st.served
                .config
                .as_ref()
                .is_some_and(|c| c.kind != proxy::ProxyKind::External)
        }) {
            images.push((p, st.pulling.policy(p)));
        }
        c.check_images(&images).map_err(platform)?;
        for g in &case.backends {
            st.groups.push(g.name.clone());
            let name = format!("backend-{}", g.name);
            let l = labels(&[(ROLE, "backend"), ("proxybench/group", &g.name)]);
            let pod = st
                .pulling
                .apply(backends::pod_spec(&image, &g.name, &g.profile));
            c.apply_object(&ns, &deployment(&name, &l, g.count, pod))
                .map_err(platform)?;
            let svc = Service {
                metadata: meta(&name, &l),
                spec: Some(ServiceSpec {
                    cluster_ip: Some("None".into()),
                    selector: Some(l.clone()),
                    ports: Some(vec![ServicePort {
                        name: Some("http".into()),
                        port: BACKEND_PORT.into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            };
            c.apply_object(&ns, &svc).map_err(platform)?;
        }
        // Ready pods, and their addresses in the EndpointSlices the config is rendered from.
        for g in &case.backends {
            backends::wait_group(c, &ns, &g.name, (g.count as i32, spec.ready_timeout))?;
        }
        // The proxy.
        let Some(cfg) = st.served.config.clone() else {
            return Ok(());
        };
        if cfg.kind == proxy::ProxyKind::External {
            // The user's own gateway: nothing to deploy; attach to its reload command and log
            // files, as a local run does.
            let ctx = RenderContext {
                prefix: stack.work.join("external"),
                generation: st.served.generation,
                ..RenderContext::default()
            };
            let rendered = st.driver.render(&cfg, &ctx)?;
            if let Err(refusal) = st.driver.check(&rendered, &stack.work)? {
                return Err(platform(refusal.message));
            }
            st.attached = Some(st.driver.start("external", &ctx, &rendered)?);
            return Ok(());
        }
        // Ports fixed per pod: the scenario's, else the next unused ones.
        let mut used: BTreeSet<u16> = cfg.listeners.iter().filter_map(|l| l.port).collect();
        for l in &cfg.listeners {
            let port = l.port.unwrap_or_else(|| next_port(&used, LISTENER_BASE));
            used.insert(port);
            st.served.ports.insert(l.name.clone(), port);
        }
        st.admin_port = next_port(&used, ADMIN_BASE);
        used.insert(st.admin_port);
        st.control_port = next_port(&used, ADMIN_BASE);
        let rendered = st.render(&cfg)?;
        let scripts = PodScripts::of(st.driver, rendered.file, stack.tls.is_some())?;
        let entry = scripts.entry.clone();
        let pre_stop_cmd = scripts.pre_stop.clone();
        let check = scripts.check.clone();
        st.scripts = Some(scripts);
        let proxy_image = spec
            .proxy_image
            .clone()
            .unwrap_or_else(|| default_proxy_image(cfg.kind).into());
        let pl = labels(&[(ROLE, "proxy")]);
        if let Some(t) = &stack.tls {
            let read = |p: &PathBuf| {
                std::fs::read_to_string(p).map_err(|source| StackError::Io {
                    path: p.clone(),
                    source,
                })
            };
            let mut sd = BTreeMap::new();
            sd.insert("cert.pem".to_string(), read(&t.cert)?);
            sd.insert("key.pem".to_string(), read(&t.key)?);
            c.apply_object(
                &ns,
                &Secret {
                    metadata: meta("proxy-tls", &pl),
                    string_data: Some(sd),
                    ..Default::default()
                },
            )
            .map_err(platform)?;
        }
        // The proxy's own checker, in a pod of its image, before any replica gets the config.
        if let Err(e) = check_in_pod(st, &rendered, &proxy_image, &check) {
            if st.served.tls.is_some() {
                let _ = c.delete_object::<Secret>(&ns, "proxy-tls", BOUND);
            }
            return Err(e);
        }
        c.apply_object(&ns, &config_map("proxy", &pl, &rendered))
            .map_err(platform)?;
        let mut volumes = vec![config_volume("proxy")];
        let mut mounts = vec![VolumeMount {
            name: "config".into(),
            mount_path: "/config".into(),
            ..Default::default()
        }];
        if stack.tls.is_some() {
            volumes.push(tls_volume());
            mounts.push(tls_mount());
        }
        let (grace, pre_stop) = proxy_stop(spec);
        st.proxy_stop = Some((grace as u32, pre_stop as u32));
        let pod_ports: BTreeSet<u16> = st.served.ports.values().copied().collect();
        let mut container_ports: Vec<ContainerPort> = pod_ports
            .iter()
            .map(|p| ContainerPort {
                container_port: i32::from(*p),
                protocol: Some("TCP".into()),
                ..Default::default()
            })
            .collect();
        container_ports.push(ContainerPort {
            name: Some("admin".into()),
            container_port: i32::from(st.admin_port),
            protocol: Some("TCP".into()),
            ..Default::default()
        });
        let pod = PodSpec {
            // One replica per node before a second on any (tainted nodes, such as a lost one,
            // are left out of the count).
            topology_spread_constraints: Some(vec![TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "kubernetes.io/hostname".into(),
                when_unsatisfiable: "DoNotSchedule".into(),
                label_selector: Some(LabelSelector {
                    match_labels: Some(pl.clone()),
                    ..Default::default()
                }),
                node_taints_policy: Some("Honor".into()),
                ..Default::default()
            }]),
            termination_grace_period_seconds: Some(grace),
            volumes: Some(volumes),
            containers: vec![Container {
                name: "proxy".into(),
                image: Some(proxy_image.clone()),
                image_pull_policy: Some(PullPolicy::for_image(&proxy_image).to_string()),
                command: Some(sh(&entry)),
                ports: Some(container_ports),
                volume_mounts: Some(mounts),
                // The kubelet asks the admin listener: its results gate the Service's
                // endpoints, and the kubelet counts them (the report's probe results).
                readiness_probe: Some(Probe {
                    http_get: Some(HTTPGetAction {
                        path: Some("/generation".into()),
                        port: IntOrString::Int(i32::from(st.admin_port)),
                        ..Default::default()
                    }),
                    period_seconds: Some(1),
                    failure_threshold: Some(1),
                    ..Default::default()
                }),
                // Stay in rotation a moment after the deletion, then the driver's own preStop
                // command (Caddy's drain), then the image's stop signal (graceful).
                lifecycle: Some(Lifecycle {
                    pre_stop: match pre_stop_cmd {
                        Some(cmd) => Some(LifecycleHandler {
                            exec: Some(ExecAction {
                                command: Some(sh(&format!("sleep {pre_stop}; {cmd}"))),
                            }),
                            ..Default::default()
                        }),
                        None => (pre_stop > 0).then(|| LifecycleHandler {
                            sleep: Some(SleepAction { seconds: pre_stop }),
                            ..Default::default()
                        }),
                    },
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        st.followers = Some(
            c.follow_logs(&ns, &format!("{ROLE}=proxy"), &logs_dir, origin)
                .map_err(platform)?,
        );
        let kind = match spec.service_type {
            scenario::ServiceKind::ClusterIp => ServiceType::ClusterIp,
            scenario::ServiceKind::NodePort => ServiceType::NodePort,
            scenario::ServiceKind::LoadBalancer => ServiceType::LoadBalancer,
        };
        st.service = Some((kind, None));
        st.endpoints = Some(c.watch_endpoints(&ns, PROXY_SERVICE, origin));
        st.apply_service()?;
        let pod = st.pulling.apply(pod);
        c.apply_object(&ns, &deployment("proxy", &pl, cfg.replicas, pod))
            .map_err(platform)?;
        st.probes = Some(c.sample_probes(
            &ns,
            &format!("{ROLE}=proxy"),
            origin,
            Duration::from_secs(1),
        ));
        c.wait_deployment_ready(&ns, "proxy", cfg.replicas as i32, st.ready_bound)
            .map_err(platform)?;
        st.find_paths(cfg.replicas)?;
        Ok(())
    }

    /// Applies the proxy's Service: one port per listener port, each to the same pod port.
    fn apply_service(&self) -> Result<(), StackError> {
        let Some((kind, _)) = self.service else {
            return Ok(());
        };
        let l = labels(&[(ROLE, "proxy")]);
        let ports: BTreeSet<u16> = self.served.ports.values().copied().collect();
        let ports: Vec<(String, u16)> = ports.into_iter().map(|p| (format!("p{p}"), p)).collect();
        self.cluster
            .apply_object(
                &self.namespace,
                &k8s::service(PROXY_SERVICE, &l, &l, kind, &ports),
            )
            .map(|_| ())
            .map_err(platform)
    }

    /// Once the proxy pods are Ready: how this machine reaches them (pod IP or port-forward),
    /// and the Service's ClusterIP, once its endpoints hold every replica and it answers from
    /// here. What was found goes into the notes.
    fn find_paths(&mut self, replicas: u32) -> Result<(), StackError> {
        let (c, ns) = (self.cluster.clone(), self.namespace.clone());
        let first = self
            .proxy_pods()?
            .into_iter()
            .find_map(|p| p.ip)
            .ok_or_else(|| platform("no Running proxy pod has an IP"))?;
        let forced = std::env::var(POD_PATH_ENV).is_ok_and(|v| v == "port-forward");
        let path = if forced {
            PodPath::PortForward
        } else {
            c.detect_pod_path(first, self.admin_port, Duration::from_secs(2))
        };
        self.pod_path = Some(path);
        self.notes.push(match path {
            PodPath::PodIp => "Reload timing, generation checks and grow probes reached each \
                               proxy pod at its pod IP (this machine routes the pod network)."
                .to_string(),
            PodPath::PortForward if forced => format!(
                "Reload timing, generation checks and grow probes reached each proxy pod \
                 through a port-forward of its own ({POD_PATH_ENV}=port-forward)."
            ),
            PodPath::PortForward => "Reload timing, generation checks and grow probes reached \
                                     each proxy pod through a port-forward of its own (this \
                                     machine does not reach the pod network)."
                .to_string(),
        });
        let Some((kind, _)) = self.service else {
            return Ok(());
        };
        let addr = c.service_address(&ns, PROXY_SERVICE).map_err(platform)?;
        let Some(ip) = addr.cluster_ip else {
            return Err(platform("the proxy's Service has no ClusterIP"));
        };
        // Every replica in the endpoints, then the address answers from here.
        let t = Instant::now();
        loop {
            let eps = c.endpoints(&ns, PROXY_SERVICE).map_err(platform)?;
            if eps.iter().filter(|e| e.ready).count() >= replicas as usize {
                break;
            }
            if t.elapsed() > BOUND {
                return Err(platform(format!(
                    "the proxy's Service had {} ready endpoints of {replicas} after {BOUND:?}",
                    eps.iter().filter(|e| e.ready).count()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let ports: Vec<String> = addr.ports.iter().map(|p| p.port.to_string()).collect();
        let port = addr.ports.first().map_or(0, |p| p.port);
        let t = Instant::now();
        let answered = loop {
            if k8s::reaches(ip, port, Duration::from_secs(1)) {
                break true;
            }
            if t.elapsed() > SERVICE_BOUND {
                break false;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        self.service = Some((kind, Some(ip)));
        self.notes.push(if answered {
            format!(
                "The loads aimed at the proxy's Service `{PROXY_SERVICE}` ({kind}) at its \
                 ClusterIP {ip} (port {}), from this machine or, for a load with agents, from \
                 their pods: kube-proxy spread their connections over the Service's ready \
                 endpoints, as users' traffic is.",
                ports.join(", ")
            )
        } else {
            format!(
                "The proxy's Service `{PROXY_SERVICE}` ({kind}) at its ClusterIP {ip} did not \
                 answer from this machine within {SERVICE_BOUND:?}: loads from here fail there; \
                 agents in the cluster (agents = N) reach it."
            )
        });
        Ok(())
    }

    /// Where this machine reaches port `port` of proxy pod `p`: its pod IP, or the local end of
    /// a port-forward kept open for it.
    fn reach_port(&mut self, p: &k8s::PodInfo, port: u16) -> Result<SocketAddr, StackError> {
        let ip =
            p.ip.ok_or_else(|| platform(format!("pod {} has no IP yet", p.name)))?;
        let key = (p.name.clone(), port);
        if let Some(pp) = self.reach.get(&key) {
            if pp.ip == ip && pp.forward_error().is_none() {
                return Ok(pp.addr());
            }
        }
        let path = self.pod_path.unwrap_or(PodPath::PodIp);
        let pp = self
            .cluster
            .pod_port(&self.namespace, &p.name, ip, port, path)
            .map_err(platform)?;
        let a = pp.addr();
        self.reach.insert(key, pp);
        Ok(a)
    }

    /// The backend groups' addresses from their Services' EndpointSlices (ready endpoints).
    fn group_addrs(&mut self) -> Result<BTreeMap<String, Vec<SocketAddr>>, StackError> {
        // New pods get their names, and their group's profile before they enter the upstreams.
        self.backends.sync(&self.cluster, &self.namespace)?;
        let mut out = BTreeMap::new();
        for g in &self.groups {
            let eps = self
                .cluster
                .endpoints(&self.namespace, &format!("backend-{g}"))
                .map_err(platform)?;
            let addrs: Vec<SocketAddr> = eps
                .iter()
                .filter(|e| e.ready && !self.backends.is_leaving(e.pod.as_deref()))
                .map(|e| SocketAddr::new(e.ip, BACKEND_PORT))
                .collect();
            if let Some(a) = addrs.first() {
                self.first_backend.insert(g.clone(), *a);
            }
            out.insert(g.clone(), addrs);
        }
        Ok(out)
    }

    /// Renders `cfg` as the current generation with the pod-side paths and the cluster's
    /// upstreams, and keeps a copy in the case's configs directory.
    fn render(&mut self, cfg: &ProxyConfig) -> Result<proxy::Rendered, StackError> {
        let groups = self.group_addrs()?;
        let ctx = self.context(groups);
        let r = self.driver.render(cfg, &ctx)?;
        let _ = std::fs::write(
            self.configs_out
                .join(format!("pod.gen{}.conf", self.served.generation)),
            &r.text,
        );
        Ok(r)
    }

    fn context(&self, groups: BTreeMap<String, Vec<SocketAddr>>) -> RenderContext {
        RenderContext {
            prefix: PathBuf::from(POD_PREFIX),
            generation: self.served.generation,
            groups,
            ports: self.served.ports.clone(),
            admin_port: self.admin_port,
            control_port: self.control_port,
            tls: self.served.tls.as_ref().map(|_| proxy::TlsFiles {
                cert: "/tls/cert.pem".into(),
                key: "/tls/key.pem".into(),
                ca: "/tls/ca.pem".into(),
            }),
            stdio_logs: true,
            // Every address of the pod's own network namespace: its Service, its kubelet's
            // probes and this machine reach it at its pod IP. The control API (Caddy's) stays
            // on the pod's loopback.
            bind: Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            cluster_upstreams: true,
            remote: true,
            ..RenderContext::default()
        }
    }

    /// The proxy pods that run and are not terminating.
    fn proxy_pods(&self) -> Result<Vec<k8s::PodInfo>, StackError> {
        let pods = self
            .cluster
            .pods(&self.namespace, Some(&format!("{ROLE}=proxy")))
            .map_err(platform)?;
        Ok(pods
            .into_iter()
            .filter(|p| !p.deleting && p.phase == "Running")
            .collect())
    }

    /// Renders the next generation and writes it into every proxy pod, each reload timed to the
    /// moment that pod's admin listener answers the new generation.
    fn reload_all(&mut self) -> (Vec<ReloadRecord>, Option<StackError>) {
        let Some(cfg) = self.served.config.clone() else {
            return (Vec::new(), Some(StackError::NoProxy));
        };
        self.served.generation += 1;
        let rendered = match self.render(&cfg) {
            Ok(r) => r,
            Err(e) => return (Vec::new(), Some(e)),
        };
        let Some(reload) = self.scripts.as_ref().map(|s| s.reload.clone()) else {
            return (Vec::new(), Some(StackError::NoProxy));
        };
        let pods = match self.proxy_pods() {
            Ok(p) => p,
            Err(e) => return (Vec::new(), Some(e)),
        };
        // Forwards to pods that are gone are closed.
        self.reach
            .retain(|(pod, _), _| pods.iter().any(|p| &p.name == pod));
        let mut out = Vec::new();
        let mut err = None;
        for p in pods {
            let t0 = Instant::now();
            let mut rec = ReloadRecord {
                replica: p.name.clone(),
                generation: self.served.generation,
                t_s: t0.duration_since(self.served.origin).as_secs_f64(),
                served_ms: None,
                old_workers_exited_ms: None,
                validate_ms: 0.0,
                error: None,
            };
            let r = self.cluster.exec(
                &self.namespace,
                &p.name,
                None,
                &["/bin/sh", "-c", &reload],
                Some(rendered.text.as_bytes()),
                Duration::from_secs(30),
            );
            let failed = match r {
                Ok(o) if o.code == 0 => None,
                Ok(o) => Some(format!(
                    "{}: reload exited {}: {}",
                    p.name,
                    o.code,
                    o.text().trim()
                )),
                Err(e) => Some(e.to_string()),
            };
            if failed.is_none() {
                let admin = self.reach_port(&p, self.admin_port);
                match admin {
                    Ok(a) => loop {
                        if generation_at(a, Duration::from_millis(500))
                            .is_ok_and(|g| g >= self.served.generation)
                        {
                            rec.served_ms = Some(t0.elapsed().as_secs_f64() * 1e3);
                            break;
                        }
                        if t0.elapsed() > Duration::from_secs(30) {
                            rec.error = Some(format!(
                                "{}: generation {} not served within 30 s",
                                p.name, self.served.generation
                            ));
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    },
                    Err(e) => rec.error = Some(e.to_string()),
                }
            } else {
                rec.error = failed;
            }
            if let Some(e) = &rec.error {
                err.get_or_insert_with(|| StackError::Reload(e.clone()));
            }
            out.push(rec);
        }
        (out, err)
    }

    /// Scales the proxy Deployment to `to`, one replica per step waiting for Ready when growing;
    /// when shrinking, the pods the Deployment picks get their grace (graceful), 1 s (fast) or 0
    /// (kill).
    fn scale_replicas(&mut self, to: u32, stop: StopSpec) -> Result<String, StackError> {
        let ns = self.namespace.clone();
        let r = self
            .cluster
            .deployment_replicas(&ns, "proxy")
            .map_err(platform)?;
        let from = r.desired as u32;
        if to >= from {
            for n in from + 1..=to {
                self.cluster
                    .scale_deployment(&ns, "proxy", n as i32)
                    .map_err(platform)?;
                self.cluster
                    .wait_deployment_ready(&ns, "proxy", n as i32, BOUND)
                    .map_err(platform)?;
            }
            return Ok(format!("{from} -> {to}"));
        }
        let before: Vec<String> = self.proxy_pods()?.into_iter().map(|p| p.name).collect();
        self.cluster
            .scale_deployment(&ns, "proxy", to as i32)
            .map_err(platform)?;
        if stop != StopSpec::Graceful {
            let grace = Duration::from_secs(if stop == StopSpec::Kill { 0 } else { 1 });
            let t = Instant::now();
            let mut victims = Vec::new();
            while victims.len() < (from - to) as usize && t.elapsed() < BOUND {
                let all = self
                    .cluster
                    .pods(&ns, Some(&format!("{ROLE}=proxy")))
                    .map_err(platform)?;
                victims = all
                    .into_iter()
                    .filter(|p| p.deleting && before.contains(&p.name))
                    .collect();
                std::thread::sleep(Duration::from_millis(20));
            }
            for v in &victims {
                self.cluster
                    .delete_pod(&ns, &v.name, Some(grace))
                    .map_err(platform)?;
            }
        }
        self.cluster
            .wait_deployment_ready(&ns, "proxy", to as i32, BOUND)
            .map_err(platform)?;
        // The action lasts until the removed pods have exited: their last requests (and any
        // failure of them) fall inside its span, as a local replica's stop does.
        let left: Vec<String> = self
            .proxy_pods()?
            .into_iter()
            .filter(|p| !p.deleting)
            .map(|p| p.name)
            .collect();
        let gone: Vec<String> = before.into_iter().filter(|n| !left.contains(n)).collect();
        for g in &gone {
            self.cluster
                .wait_pod_gone(&ns, g, None, BOUND)
                .map_err(platform)?;
        }
        self.wait_logs_ended(&gone)?;
        Ok(format!("{from} -> {to} ({stop:?})").to_lowercase())
    }

    /// Deletes one proxy pod (the named one, or the newest): its own grace period (graceful),
    /// 1 s (fast) or 0 (kill). The Deployment replaces it.
    fn stop_replica(&mut self, name: Option<&str>, stop: StopSpec) -> Result<String, StackError> {
        let mut pods = self.proxy_pods()?;
        pods.sort_by(|a, b| a.created.cmp(&b.created));
        let p = match name {
            Some(n) => pods
                .into_iter()
                .find(|p| p.name == n)
                .ok_or_else(|| StackError::NoSuchReplica(n.into()))?,
            None => pods.pop().ok_or(StackError::NoReplica)?,
        };
        let grace = match stop {
            StopSpec::Graceful => None,
            StopSpec::Fast => Some(Duration::from_secs(1)),
            StopSpec::Kill => Some(Duration::ZERO),
        };
        self.cluster
            .delete_pod(&self.namespace, &p.name, grace)
            .map_err(platform)?;
        // As a local stop waits for the process: the action lasts until the pod's proxy exited.
        self.cluster
            .wait_pod_gone(&self.namespace, &p.name, None, BOUND)
            .map_err(platform)?;
        self.wait_logs_ended(std::slice::from_ref(&p.name))?;
        Ok(format!("{} ({stop:?})", p.name).to_lowercase())
    }

    /// Waits until the followed logs of `pods` have ended: their containers exited. A pod
    /// deleted with `gracePeriodSeconds=0` leaves the API at once, but the kubelet stops its
    /// container a second or more later, and that moment (its connections closing) is what
    /// the action's span must hold.
    fn wait_logs_ended(&self, pods: &[String]) -> Result<(), StackError> {
        let Some(f) = &self.followers else {
            return Ok(());
        };
        let t = Instant::now();
        loop {
            let running: Vec<String> = f
                .snapshot()
                .into_iter()
                .filter(|l| pods.contains(&l.pod) && !l.complete && l.error.is_none())
                .map(|l| l.pod)
                .collect();
            if running.is_empty() {
                return Ok(());
            }
            if t.elapsed() > BOUND {
                return Err(platform(format!(
                    "the logs of {} had not ended {BOUND:?} after their pods left the API \
                     (their containers still running?)",
                    running.join(", ")
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Deletes the pod of backend `b` (`GROUP-I`: the I-th pod the group had, in order of
    /// creation, or a pod name): at once (`kill`) or with its grace period (drain).
    fn delete_backend(&mut self, b: &str, kill: bool) -> Result<String, StackError> {
        let p = self.backends.resolve(&self.cluster, &self.namespace, b)?;
        if p.deleting {
            return Err(platform(format!(
                "backend {b}: its pod {} is already going",
                p.name
            )));
        }
        let grace = kill.then_some(Duration::ZERO);
        self.cluster
            .delete_pod(&self.namespace, &p.name, grace)
            .map_err(platform)?;
        Ok(format!("{b}: pod {}", p.name))
    }

    /// Scales a backend group's Deployment, waits for its pods, and reloads the proxy with the
    /// EndpointSlices' addresses. A scale-down removes the newest pods as the local stack removes
    /// the newest instances: drained ones leave the upstreams first (reload, the old workers
    /// gone) and only then get SIGTERM and drain; killed ones are killed first (through their
    /// control port) and the reload follows.
    fn scale_backends(
        &mut self,
        group: &str,
        to: u32,
        remove: RemoveMode,
    ) -> (Result<String, StackError>, Vec<ReloadRecord>) {
        let (c, ns) = (self.cluster.clone(), self.namespace.clone());
        let from = match c.deployment_replicas(&ns, &backends::deployment_of(group)) {
            Ok(r) => r.desired.max(0) as u32,
            Err(e) => return (Err(platform(e)), Vec::new()),
        };
        if to >= from {
            if let Err(e) = self.backends.scale(&c, &ns, group, to) {
                return (Err(e), Vec::new());
            }
            let (rel, err) = self.reload_all();
            return (err.map_or(Ok(format!("{group}: {from} -> {to}")), Err), rel);
        }
        let kill = remove == RemoveMode::Kill;
        let gone = match self
            .backends
            .choose_leaving(&c, &ns, group, from - to, kill)
        {
            Ok(g) => g,
            Err(e) => return (Err(e), Vec::new()),
        };
        let how = format!("{remove:?}").to_lowercase();
        let detail = format!("{group}: {from} -> {to} ({how}: {})", gone.join(", "));
        let mut rel = Vec::new();
        if !kill {
            let (r, err) = self.reload_all();
            rel = r;
            if let Some(e) = err {
                return (Err(e), rel);
            }
            let pods: Vec<String> = match self.proxy_pods() {
                Ok(p) => p.into_iter().map(|p| p.name).collect(),
                Err(e) => return (Err(e), rel),
            };
            if let Err(e) = backends::wait_old_workers(&c, &ns, &pods) {
                return (Err(e), rel);
            }
        }
        if let Err(e) = self.backends.scale(&c, &ns, group, to) {
            return (Err(e), rel);
        }
        if kill {
            let (r, err) = self.reload_all();
            rel = r;
            if let Some(e) = err {
                return (Err(e), rel);
            }
        }
        (Ok(detail), rel)
    }

    /// What the collectors gathered, as the case's cluster record.
    fn record(&mut self) -> ClusterRecord {
        let info = self.cluster.info();
        let mut rec = ClusterRecord {
            namespace: self.namespace.clone(),
            context: info.context.clone(),
            server_version: info.version.clone(),
            proxy_grace_s: self.proxy_stop.map(|s| s.0),
            proxy_pre_stop_s: self.proxy_stop.map(|s| s.1),
            pod_path: self.pod_path.map(|p| p.as_str().to_string()),
            load_targets: {
                let mut t = std::mem::take(
                    &mut *self.load_targets.lock().unwrap_or_else(|p| p.into_inner()),
                );
                if let Some((kind, Some(ip))) = self.service {
                    t.insert(
                        String::new(),
                        format!("Service `{PROXY_SERVICE}` ({kind}) at its ClusterIP {ip}"),
                    );
                }
                t
            },
            ..ClusterRecord::default()
        };
        let mut absent = |what: &str, a: &Option<String>| {
            if let Some(a) = a {
                rec.absent.push(format!("{what}: {a}"));
            }
        };
        let pods: Vec<Collected<PodTimeline>> = self.pods.drain(..).map(Collector::stop).collect();
        let warnings: Vec<_> = self.warnings.drain(..).map(Collector::stop).collect();
        let metrics = self.metrics.take().map(Collector::stop);
        let scrape = self.scrape.take().map(Collector::stop);
        let endpoints = self.endpoints.take().map(Collector::stop);
        if let Some(e) = &endpoints {
            absent("EndpointSlice watch", &e.absent);
        }
        if let Some(p) = self.probes.take().map(Collector::stop) {
            self.notes.push(probe_note(&p));
        }
        for p in &pods {
            absent("pod watch", &p.absent);
        }
        for w in &warnings {
            absent("events", &w.absent);
        }
        if let Some(m) = &metrics {
            absent("metrics API", &m.absent);
        }
        if let Some(s) = &scrape {
            absent("Prometheus scrape", &s.absent);
        }
        for p in pods {
            for c in p.data.changes {
                let role = if c.pod.starts_with("proxy-") {
                    "proxy"
                } else if c.pod.starts_with("backend-") {
                    "backend"
                } else {
                    "watched"
                };
                rec.pods.push(model::PodChange {
                    t_s: c.t_s,
                    pod: c.pod,
                    role: role.into(),
                    phase: if c.gone { "Deleted".into() } else { c.phase },
                    ready: c.ready,
                    terminating: c.deleting,
                });
            }
            for r in p.data.restarts {
                rec.restarts.push(model::RestartRecord {
                    t_s: r.t_s,
                    pod: r.pod,
                    container: r.container,
                    count: r.restarts.max(0) as u32,
                    reason: r.reason.unwrap_or_default(),
                });
            }
        }
        for w in warnings.into_iter().flat_map(|w| w.data) {
            rec.warnings.push(model::ClusterEvent {
                t_s: w.t_s,
                object: w.object,
                reason: w.reason,
                message: w.message,
                count: w.count.max(0) as u32,
            });
        }
        for m in metrics.map(|m| m.data).unwrap_or_default() {
            rec.metrics.push(model::PodMetric {
                t_s: m.t_s,
                pod: m.pod,
                cpu_millicores: m.cpu_cores * 1e3,
                memory_bytes: m.memory_bytes as u64,
            });
        }
        for s in scrape.map(|s| s.data).unwrap_or_default() {
            for x in s.samples {
                let labels = x
                    .labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v:?}"))
                    .collect::<Vec<_>>()
                    .join(",");
                rec.scrapes.push(model::ScrapeSample {
                    t_s: s.t_s,
                    pod: s.pod.clone(),
                    metric: x.metric,
                    labels,
                    value: x.value,
                });
            }
        }
        rec.absent.extend(self.absent.iter().cloned());
        // The Service's endpoints beside the pods: an endpoint enters, changes (ready,
        // terminating) and leaves ("Deleted") as the EndpointSlice controller saw its pod.
        for e in endpoints.map(|e| e.data).unwrap_or_default() {
            rec.pods.push(model::PodChange {
                t_s: e.t_s,
                pod: e.endpoint,
                role: ENDPOINT_ROLE.into(),
                phase: if e.gone { "Deleted" } else { "Endpoint" }.into(),
                ready: e.ready,
                terminating: e.terminating,
            });
        }
        rec.pods.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        rec.restarts.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        rec.warnings.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        rec
    }

    /// Runs the attached gateway's reload command as the next generation.
    fn reload_attached(&mut self) -> ReloadRecord {
        let (generation, origin) = (self.served.generation, self.served.origin);
        let cfg = self.served.config.clone();
        let rendered = cfg
            .as_ref()
            .ok_or(StackError::NoProxy)
            .and_then(|c| Ok(self.driver.render(c, &RenderContext::default())?));
        let a = self
            .attached
            .as_mut()
            .expect("called with an attached proxy");
        match rendered {
            Ok(r) => a.reload(&r, generation, origin),
            Err(e) => ReloadRecord {
                replica: a.name().to_string(),
                generation,
                t_s: origin.elapsed().as_secs_f64(),
                served_ms: None,
                old_workers_exited_ms: None,
                validate_ms: 0.0,
                error: Some(e.to_string()),
            },
        }
    }

    /// Starts the collectors of the user's pods (`[platform] watch`): pods and Warning events of
    /// each watched namespace, and the logs of the pods each selector picks (in each watched
    /// namespace, or the run's own when none is named), followed from their start.
    fn watch(&mut self, spec: &PlatformSpec) -> Result<(), StackError> {
        let c = self.cluster.clone();
        let others: Vec<&String> = spec
            .watch_namespaces
            .iter()
            .filter(|n| **n != self.namespace)
            .collect();
        for ns in &others {
            if spec.watch_selectors.is_empty() {
                self.pods.push(c.watch_pods(ns, "", self.served.origin));
            }
            for sel in &spec.watch_selectors {
                self.pods.push(c.watch_pods(ns, sel, self.served.origin));
            }
            self.warnings.push(c.watch_warnings(ns, self.served.origin));
        }
        let log_namespaces: Vec<&String> = if spec.watch_namespaces.is_empty() {
            vec![&self.namespace]
        } else {
            spec.watch_namespaces.iter().collect()
        };
        if spec.watch_log_format.is_none() {
            if !spec.watch_selectors.is_empty() {
                self.absent.push(
                    "watched pods' logs: not read (platform.watch.log_format names how their \
                     access lines are written)"
                        .into(),
                );
            }
            return Ok(());
        }
        for ns in log_namespaces {
            for sel in &spec.watch_selectors {
                let dir = self.logs_dir.join("watched").join(ns);
                self.watched_logs.push(
                    c.follow_logs(ns, sel, &dir, self.served.origin)
                        .map_err(platform)?,
                );
            }
        }
        Ok(())
    }
}

/// What the kubelets counted of the proxy pods' readiness probes, as one sentence: only what was
/// read from them (never a probe result that was not measured).
fn probe_note(p: &Collected<Vec<ProbeTally>>) -> String {
    if p.data.is_empty() {
        return format!(
            "The proxy pods' readiness probes were not counted: {}.",
            p.absent
                .as_deref()
                .or(p.errors.first().map(String::as_str))
                .unwrap_or("the kubelets gave no counter")
                .trim_end_matches('.')
        );
    }
    let (mut ok, mut failed, mut unknown) = (0u64, 0u64, 0u64);
    let (mut sum, mut n) = (0.0, 0u64);
    let mut failing: BTreeSet<&str> = BTreeSet::new();
    for t in &p.data {
        ok += t.successes;
        failed += t.failures;
        unknown += t.unknown;
        if let Some(m) = t.mean_success_s {
            sum += m * t.successes as f64;
            n += t.successes;
        }
        if t.failures > 0 {
            failing.insert(&t.pod);
        }
    }
    let mean = if n > 0 {
        format!(
            "; a successful probe took {:.2} ms on average (the kubelets' histogram)",
            sum / n as f64 * 1e3
        )
    } else {
        String::new()
    };
    let who = if failing.is_empty() {
        String::new()
    } else {
        format!(
            " (failed: {})",
            failing.into_iter().collect::<Vec<_>>().join(", ")
        )
    };
    format!(
        "The kubelets counted the proxy pods' readiness probes (an httpGet of the admin \
         listener every second): {ok} succeeded, {failed} failed{who}, {unknown} unknown{mean}."
    )
}

/// Stops log followers and splits each pod's log into its access and error lines (by `format`)
/// in `dir`, as the proxy's log files the run summarizes; the first failure goes to `err`.
fn split_logs(
    followers: LogFollowers,
    format: proxy::logs::LogFormat,
    dir: &std::path::Path,
    logs: &mut Vec<(String, LogFiles)>,
    err: &mut Option<StackError>,
) {
    for f in followers.stop(Duration::from_secs(30)) {
        let access = dir.join(format!("{}.access.log", f.pod));
        let error = dir.join(format!("{}.error.log", f.pod));
        match std::fs::read_to_string(&f.path) {
            Ok(text) => {
                let (mut a, mut e) = (String::new(), String::new());
                for line in text.lines() {
                    let to = if format.access(line).is_some() {
                        &mut a
                    } else {
                        &mut e
                    };
                    to.push_str(line);
                    to.push('\n');
                }
                let _ = std::fs::write(&access, a);
                let _ = std::fs::write(&error, e);
            }
            Err(source) => {
                err.get_or_insert(StackError::Io {
                    path: f.path.clone(),
                    source,
                });
            }
        }
        if let Some(e) = &f.error {
            err.get_or_insert(platform(format!("log of pod {}: {e}", f.pod)));
        }
        logs.push((
            f.pod.clone(),
            LogFiles {
                access: Some(access),
                error: Some(error),
                format,
                ..LogFiles::default()
            },
        ));
    }
}

/// A ConfigMap named `name` holding the rendered config under its file name.
fn config_map(name: &str, l: &BTreeMap<String, String>, rendered: &proxy::Rendered) -> ConfigMap {
    let mut data = BTreeMap::new();
    data.insert(rendered.file.to_string(), rendered.text.clone());
    ConfigMap {
        metadata: meta(name, l),
        data: Some(data),
        ..Default::default()
    }
}

/// The volume of ConfigMap `name`, mounted at /config.
fn config_volume(name: &str) -> Volume {
    Volume {
        name: "config".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: name.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The volume of the proxy's certificate Secret.
fn tls_volume() -> Volume {
    Volume {
        name: "tls".into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some("proxy-tls".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Where the proxy's certificate Secret is mounted (`/tls`, as the render context names it).
fn tls_mount() -> VolumeMount {
    VolumeMount {
        name: "tls".into(),
        mount_path: "/tls".into(),
        ..Default::default()
    }
}

/// Checks `rendered` with the proxy's own checker (`nginx -t`, `haproxy -c`, `caddy validate`)
/// in a pod of the proxy's image, before any replica gets it: the config as the replicas get it
/// (pod paths, the cluster's upstreams, the certificate Secret), not a copy rendered for this
/// machine. A refusal names the checker's message and the model item it leads back to; the
/// check's ConfigMap and pod are deleted either way.
fn check_in_pod(
    st: &KubeStage,
    rendered: &proxy::Rendered,
    image: &str,
    script: &str,
) -> Result<(), StackError> {
    let (c, ns) = (&st.cluster, st.namespace.as_str());
    let name = format!("proxy-check-gen{}", st.served.generation);
    let l = labels(&[(ROLE, "proxy-check")]);
    c.apply_object(ns, &config_map(&name, &l, rendered))
        .map_err(platform)?;
    let mut volumes = vec![config_volume(&name)];
    let mut mounts = vec![VolumeMount {
        name: "config".into(),
        mount_path: "/config".into(),
        ..Default::default()
    }];
    if st.served.tls.is_some() {
        volumes.push(tls_volume());
        mounts.push(tls_mount());
    }
    let pod = Pod {
        metadata: meta(&name, &l),
        spec: Some(st.pulling.apply(PodSpec {
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            dns_policy: Some("Default".into()),
            termination_grace_period_seconds: Some(0),
            volumes: Some(volumes),
            containers: vec![Container {
                name: "check".into(),
                image: Some(image.into()),
                image_pull_policy: Some(PullPolicy::for_image(image).to_string()),
                command: Some(sh(script)),
                volume_mounts: Some(mounts),
                ..Default::default()
            }],
            ..Default::default()
        })),
        ..Default::default()
    };
    let ran = c.run_pod(ns, &pod, CHECK_BOUND);
    let _ = c.delete_object::<ConfigMap>(ns, &name, BOUND);
    let ran = ran.map_err(|e| {
        platform(format!(
            "cannot run the {} checker in a pod of {image}: {e}",
            st.driver.name()
        ))
    })?;
    let _ = std::fs::write(st.configs_out.join(format!("{name}.log")), &ran.log);
    if ran.code == 0 {
        return Ok(());
    }
    let message = ran.log.trim();
    let item = st
        .driver
        .trace(rendered, message)
        .map(|i| format!(" (model item {i})"))
        .unwrap_or_default();
    Err(platform(format!(
        "the proxy's checker refused the config in a pod of {image} (exit {}){item}: {}",
        ran.code,
        crate::runner::one_line(message)
    )))
}

impl Stage for KubeStage {
    fn ports(&self) -> &BTreeMap<String, u16> {
        &self.served.ports
    }

    fn aim(&self, via: &scenario::Via, tls: bool) -> Result<SocketAddr, StackError> {
        self.aim_at(via, tls).map(|(a, _)| a)
    }

    fn listener_ip(&self) -> IpAddr {
        match self.service {
            Some((_, Some(ip))) => ip,
            _ => crate::reach::RUN_IP,
        }
    }

    fn listener_port(&self, tls: bool) -> Option<u16> {
        let cfg = self.served.config.as_ref()?;
        let l = cfg.listeners.iter().find(|l| l.tls == tls)?;
        self.served.ports.get(&l.name).copied()
    }

    fn first_backend(&self, group: &str) -> Option<SocketAddr> {
        self.first_backend.get(group).copied()
    }

    fn external(&self) -> Option<&proxy::config::External> {
        self.served
            .config
            .as_ref()
            .and_then(|c| c.external.as_ref())
    }

    fn handles(&self) -> Arc<Mutex<Vec<ReplicaHandle>>> {
        self.handles.clone()
    }

    fn apply(&mut self, action: &Action, keep_going: &dyn Fn() -> bool) -> Applied {
        if let Action::Grow(g) = action {
            // A growth is many steps, each its own event.
            return crate::grow::grow(self, g, keep_going);
        }
        let t0 = Instant::now();
        let mut reloads = Vec::new();
        let (detail, result): (String, Result<(), StackError>) = match action {
            Action::ScaleReplicas { to, stop } => match self.scale_replicas(*to, *stop) {
                Ok(d) => (d, Ok(())),
                Err(e) => (format!("-> {to}"), Err(e)),
            },
            Action::StopReplica { replica, mode } => {
                match self.stop_replica(replica.as_deref(), *mode) {
                    Ok(d) => (d, Ok(())),
                    Err(e) => (replica.clone().unwrap_or_else(|| "newest".into()), Err(e)),
                }
            }
            Action::Reload if self.attached.is_some() => {
                // The user's gateway: its reload command, timed to its exit.
                self.served.generation += 1;
                let r = self.reload_attached();
                let err = r.error.clone();
                reloads = vec![r];
                (
                    format!("generation {}", self.served.generation),
                    err.map_or(Ok(()), |e| Err(StackError::Reload(e))),
                )
            }
            Action::Reload => {
                let (rel, err) = self.reload_all();
                reloads = rel;
                (
                    format!("generation {}", self.served.generation),
                    err.map_or(Ok(()), Err),
                )
            }
            Action::SwapConfig(name) => match self.configs.get(name).cloned() {
                Some(cfg) => {
                    self.served.config = Some(cfg);
                    let (rel, err) = self.reload_all();
                    reloads = rel;
                    (
                        format!("{name} (generation {})", self.served.generation),
                        err.map_or(Ok(()), Err),
                    )
                }
                None => (name.clone(), Err(StackError::NoConfig(name.clone()))),
            },
            Action::KillBackend(b) | Action::DrainBackend(b) => {
                let kill = matches!(action, Action::KillBackend(_));
                match self.delete_backend(b, kill) {
                    Ok(d) => (d, Ok(())),
                    Err(e) => (b.clone(), Err(e)),
                }
            }
            Action::ScaleBackends { group, to, remove } => {
                let (r, rel) = self.scale_backends(group, *to, *remove);
                reloads = rel;
                match r {
                    Ok(d) => (d, Ok(())),
                    Err(e) => (group.clone(), Err(e)),
                }
            }
            Action::Exec {
                argv,
                timeout,
                allow_fail,
            } => {
                self.execs += 1;
                super::local::run_exec(&self.exec_out, self.execs, argv, *timeout, *allow_fail)
            }
            Action::Apply(_)
            | Action::Delete(_)
            | Action::RolloutRestart(_)
            | Action::DeletePod { .. }
            | Action::Scale { .. } => {
                super::kube_run::cluster_action(&self.cluster, &self.namespace, action, keep_going)
            }
            Action::SetProfile {
                group,
                backend,
                profile,
            } => match self.backends.set_profile(
                &self.cluster,
                &self.namespace,
                group.as_deref(),
                backend.as_deref(),
                profile,
            ) {
                Ok(d) => (d, Ok(())),
                Err(e) => (
                    group.clone().or(backend.clone()).unwrap_or_default(),
                    Err(e),
                ),
            },
            Action::RestartBackend(b) => {
                match self.backends.restart(&self.cluster, &self.namespace, b) {
                    // The replacement has a new address: the proxy meets it after a reload.
                    Ok(d) => {
                        let (rel, err) = self.reload_all();
                        reloads = rel;
                        (
                            format!("{d}; generation {}", self.served.generation),
                            err.map_or(Ok(()), Err),
                        )
                    }
                    Err(e) => (b.clone(), Err(e)),
                }
            }
            Action::Grow(_) => unreachable!("a growth returned above"),
        };
        Applied {
            events: vec![Event {
                t_s: t0.duration_since(self.served.origin).as_secs_f64(),
                action: action.kind().to_string(),
                detail,
                duration_ms: t0.elapsed().as_secs_f64() * 1e3,
                error: result.err().map(|e| e.to_string()),
                limit: false,
            }],
            reloads,
            ready: Vec::new(),
        }
    }

    fn down(&mut self) -> Down {
        let mut err = None;
        // Delete our Deployments so that the proxy pods end (their logs end with them).
        let mut names = vec!["proxy".to_string()];
        names.extend(self.groups.iter().map(|g| format!("backend-{g}")));
        for n in &names {
            if let Err(e) = self.cluster.scale_deployment(&self.namespace, n, 0) {
                if !e.is_not_found() {
                    err.get_or_insert(platform(e));
                }
            }
        }
        let t = Instant::now();
        while t.elapsed() < BOUND {
            match self
                .cluster
                .pods(&self.namespace, Some(&format!("{ROLE}=proxy")))
            {
                Ok(p) if p.is_empty() => break,
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
        let format = self
            .scripts
            .as_ref()
            .map_or(proxy::logs::LogFormat::NginxJson, |s| s.log_format);
        let mut logs = Vec::new();
        if let Some(f) = self.followers.take() {
            split_logs(f, format, &self.logs_dir, &mut logs, &mut err);
        }
        if let Some(format) = self.watched_format {
            for f in std::mem::take(&mut self.watched_logs) {
                split_logs(f, format, &self.logs_dir, &mut logs, &mut err);
            }
        }
        if let Some(a) = &self.attached {
            logs.push((a.name().to_string(), a.logs()));
        }
        logs.sort_by(|a, b| a.0.cmp(&b.0));
        let (backends, missing, e) = self.backends.finish(&self.cluster, &self.namespace);
        if let Some(e) = e {
            err.get_or_insert(e);
        }
        // What the case made goes with it, also from a namespace the run did not make (the
        // user's, with `--namespace`), where nothing of ours may stay behind.
        let (c, ns) = (&self.cluster, self.namespace.as_str());
        let mut gone = |r: Result<Duration, k8s::Error>| {
            if let Err(e) = r {
                err.get_or_insert(platform(e));
            }
        };
        for n in &names {
            gone(c.delete_object::<Deployment>(ns, n, BOUND));
        }
        for g in &self.groups {
            gone(c.delete_object::<Service>(ns, &format!("backend-{g}"), BOUND));
        }
        gone(c.delete_object::<Secret>(ns, backends::TOKEN_SECRET, BOUND));
        self.reach.clear();
        if self.service.is_some() {
            gone(c.delete_object::<Service>(ns, PROXY_SERVICE, BOUND));
        }
        if self.scripts.is_some() {
            gone(c.delete_object::<ConfigMap>(ns, "proxy", BOUND));
            if self.served.tls.is_some() {
                gone(c.delete_object::<Secret>(ns, "proxy-tls", BOUND));
            }
        }
        let mut rec = self.record();
        rec.counters_missing = missing;
        Down {
            logs,
            backends,
            cluster: Some(rec),
            err,
            notes: std::mem::take(&mut self.notes),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The stage against the shared test cluster (`PROXYBENCH_TEST_KUBECONFIG`), without the
    //! runner: up, requests through the proxy pods, scale, reload, kill, down.

    use super::*;
    use scenario::layers::Source;
    use scenario::Scenario;

    const SCENARIO: &str = r#"
name = "kube-stage"
[[backends]]
name = "cafe"
count = 2
[proxy]
replicas = 1
worker_processes = 1
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
[[proxy.routes]]
path = "/"
upstream = "cafe"
[[loads]]
name = "l"
url = "http://localhost/"
connections = 1
duration = "1s"
"#;

    /// One GET through the proxy at `ip`; true on a 200.
    fn get(ip: IpAddr, port: u16) -> bool {
        let Ok(mut s) = TcpStream::connect((ip, port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        if s.write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut b = String::new();
        let _ = s.read_to_string(&mut b);
        b.starts_with("HTTP/1.1 200")
    }

    #[test]
    #[ignore = "needs the test cluster (make test-k8s)"]
    fn k8s_stage_serves_scales_reloads_and_keeps_every_pods_log() {
        let kc = std::env::var_os("PROXYBENCH_TEST_KUBECONFIG")
            .expect("PROXYBENCH_TEST_KUBECONFIG is unset: these tests need the test cluster");
        let cluster = Cluster::connect(Some(std::path::Path::new(&kc)), None).unwrap();
        let ns = k8s::namespace_name("kube-stage");
        cluster.create_namespace(&ns, &[]).unwrap();
        let scn = Scenario::parse(
            &Source {
                file: "s.toml".into(),
                text: SCENARIO.into(),
            },
            false,
        )
        .unwrap();
        let case = &scn.cases[0];
        let dir = tempfile::tempdir().unwrap();
        let spec = StackSpec {
            backends: &case.backends,
            backend_threads: 1,
            proxy: case.proxy.as_ref(),
            configs: &case.configs,
            tls: None,
            work: dir.path().join("work"),
            configs_out: dir.path().join("configs"),
            exec_out: dir.path().join("exec"),
            origin: Instant::now(),
            seed: 1,
        };
        let pspec = PlatformSpec {
            image: std::env::var("PROXYBENCH_TEST_IMAGE").ok(),
            ..PlatformSpec::default()
        };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut st = KubeStage::up(cluster.clone(), &ns, &pspec, case, spec)
                .unwrap_or_else(|e| panic!("{e}"));
            let port = st.listener_port(false).unwrap();
            let ip = st.listener_ip();
            assert!(
                !ip.is_loopback(),
                "the loads go to the proxy's Service: {ip}"
            );
            let mut ok = 0u64;
            let mut sent = 0u64;
            let burst = |n: u32, ok: &mut u64, sent: &mut u64| {
                for _ in 0..n {
                    *sent += 1;
                    *ok += u64::from(get(ip, port));
                }
            };
            burst(50, &mut ok, &mut sent);
            let noop = || true;
            for a in [
                Action::ScaleReplicas {
                    to: 2,
                    stop: StopSpec::Graceful,
                },
                Action::Reload,
                Action::StopReplica {
                    replica: None,
                    mode: StopSpec::Kill,
                },
                Action::ScaleReplicas {
                    to: 1,
                    stop: StopSpec::Graceful,
                },
            ] {
                let applied = st.apply(&a, &noop);
                eprintln!("{:?}", applied.events);
                assert!(
                    applied.events.iter().all(|e| e.error.is_none()),
                    "{:?}",
                    applied.events
                );
                if matches!(a, Action::Reload) {
                    assert_eq!(applied.reloads.len(), 2);
                    assert!(
                        applied.reloads.iter().all(|r| r.served_ms.is_some()),
                        "{:?}",
                        applied.reloads
                    );
                }
                burst(50, &mut ok, &mut sent);
            }
            let down = st.down();
            for p in &down.cluster.as_ref().unwrap().pods {
                eprintln!(
                    "{:7.3} {} {} {} ready={} terminating={}",
                    p.t_s, p.role, p.pod, p.phase, p.ready, p.terminating
                );
            }
            assert!(down.err.is_none(), "{:?}", down.err);
            let mut access = 0u64;
            for (pod, files) in &down.logs {
                let n = std::fs::read_to_string(files.access.as_ref().unwrap())
                    .unwrap()
                    .lines()
                    .count() as u64;
                eprintln!("{pod}: {n} access lines");
                access += n;
            }
            let rec = down.cluster.unwrap();
            eprintln!("{} pod changes, absent: {:?}", rec.pods.len(), rec.absent);
            assert!(
                down.logs.len() >= 3,
                "every proxy pod that ran: {:?}",
                down.logs
            );
            assert_eq!(ok, sent, "no failed request outside the kill");
            assert_eq!(access, ok, "every request is an access line of some pod");
            assert!(rec.pods.iter().any(|p| p.role == "proxy" && p.ready));
        }));
        let _ = cluster.delete_namespace(&ns, Duration::from_secs(120));
        if let Err(p) = result {
            std::panic::resume_unwind(p);
        }
    }
}
