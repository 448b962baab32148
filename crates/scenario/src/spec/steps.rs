//! What a step of the action plan is: each action's settings as a scenario writes them (scale,
//! stop, grow, probe, delete pods, scale a workload), with their defaults, and the planned [`Step`].

use super::*;

/// How a removed backend leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoveMode {
    /// Reload the proxy without it first, then drain it (no request lost).
    #[default]
    Drain,
    /// Kill it first, then reload the proxy without it (a crash the control plane catches up on).
    Kill,
}

/// How a proxy replica is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopSpec {
    /// SIGQUIT: finish in-flight requests.
    #[default]
    Graceful,
    /// SIGTERM.
    Fast,
    /// SIGKILL.
    Kill,
}

/// `scale_backends = { group = "cafe", to = 5, step = "1s", remove = "drain" }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleBackends {
    /// Group to scale.
    pub group: String,
    /// Target count.
    pub to: u32,
    /// Gradual: one instance per `step`; absent: all at once.
    #[serde(default)]
    pub step: Option<Dur>,
    /// How removed instances leave.
    #[serde(default)]
    pub remove: RemoveMode,
}

/// `scale_replicas = { to = 3, step = "5s", stop = "graceful" }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleReplicas {
    /// Target count.
    pub to: u32,
    /// Gradual: one replica per `step`; absent: all at once.
    #[serde(default)]
    pub step: Option<Dur>,
    /// How removed replicas stop.
    #[serde(default)]
    pub stop: StopSpec,
}

/// `set_profile = { group = "cafe", profile = "latency=fixed(50ms)" }` (or `backend = "cafe-1"`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetProfile {
    /// Every instance of this group...
    #[serde(default)]
    pub group: Option<String>,
    /// ...or this one instance.
    #[serde(default)]
    pub backend: Option<String>,
    /// The new profile.
    pub profile: Profile,
}

/// `stop_replica = { replica = "nginx-1", mode = "kill" }` (replicas are named `KIND-N`;
/// default: the newest replica).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopReplica {
    /// Replica name; the newest running one when absent.
    #[serde(default)]
    pub replica: Option<String>,
    /// How it stops.
    #[serde(default)]
    pub mode: StopSpec,
}

/// What a `grow` action adds, one step at a time, each step a new config generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrowWhat {
    /// Plain HTTP listeners (a port each), each with a `/` route to the upstream.
    Listeners,
    /// HTTPS listeners (a port each, the run's certificate), each with a `/` route.
    HttpsListeners,
    /// Exact-path routes `/route-N` on one listener.
    Routes,
    /// GRPCRoutes, one per hostname, through an external Gateway API gateway (its built-in
    /// generator only), each timed by a gRPC call.
    GrpcRoutes,
    /// Routes on one path that differ by a header value (`x-match: vN`).
    Matches,
    /// Servers of an upstream: backend instances added to its group.
    UpstreamServers,
}

impl GrowWhat {
    /// The snake_case name used in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            GrowWhat::Listeners => "listeners",
            GrowWhat::HttpsListeners => "https_listeners",
            GrowWhat::Routes => "routes",
            GrowWhat::GrpcRoutes => "grpc_routes",
            GrowWhat::Matches => "matches",
            GrowWhat::UpstreamServers => "upstream_servers",
        }
    }
}

/// `grow = { what = "routes", to = 1000, by = 1, pause = "2s" }`: grows the config step by step,
/// reloading at each step and timing how long the new item takes to answer (time to ready). The
/// whole growth is one action; later actions wait for it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrowSpec {
    /// What to add.
    pub what: GrowWhat,
    /// How many there are after the last step (counting those the config already had).
    pub to: u32,
    /// How many each step adds.
    #[serde(default = "one")]
    pub by: u32,
    /// Pause between steps (none: the next step starts as soon as the previous one is ready).
    #[serde(default)]
    pub pause: Dur,
    /// Upstream the new routes go to (default: the first upstream); for `upstream_servers`, the
    /// upstream whose backend group grows.
    #[serde(default)]
    pub upstream: Option<String>,
    /// Listener the new routes and matches live on (default: the first plain HTTP listener).
    #[serde(default)]
    pub listener: Option<String>,
    /// Path of `matches` (default `/match`).
    #[serde(default = "match_path")]
    pub path: String,
    /// Header of `matches` (default `x-match`, values `v0`, `v1`...).
    #[serde(default = "match_header")]
    pub header: String,
    /// Stop growing at the first failed reload (and report the proxy's message as the limit hit).
    #[serde(default = "yes")]
    pub stop_on_error: bool,
    /// How long to wait for a new item to answer before calling it never ready.
    #[serde(default = "ready_timeout")]
    pub ready_timeout: Dur,
    /// Kubernetes, `[proxy] kind = "external"`: a manifest template (minijinja, with `{{ i }}`,
    /// `{{ namespace }}`, `{{ run }}`, `{{ name }}`) whose item i each step applies; `what` then
    /// names what the template adds, for the scale analysis. The path is relative to the
    /// scenario file (resolved when parsed).
    #[serde(default)]
    pub template: Option<String>,
    /// A templated growth: where its objects that name no namespace go (the run's when absent).
    #[serde(default)]
    pub namespace: Option<String>,
    /// A templated growth: what each step waits for on its applied objects
    /// (`condition=TYPE[=STATUS]`), within `ready_timeout`.
    #[serde(default)]
    pub wait: Option<String>,
    /// A templated growth: the probe each step sends to every data-plane replica (its `host`
    /// and `path` are templates too).
    #[serde(default)]
    pub probe: Option<ProbeSpec>,
    /// A built-in generator (an external gateway, no `template`): the Gateway the routes attach
    /// to, `NAME` or `NAMESPACE/NAME`; for `listeners` and `https_listeners`, the Gateway the
    /// growth makes and grows (`NAME`, in the growth's namespace).
    #[serde(default)]
    pub gateway: Option<String>,
    /// A built-in generator of listeners: the Gateway's `gatewayClassName`.
    #[serde(default)]
    pub gateway_class: Option<String>,
    /// A built-in generator: each item's hostname, a template (`{{ i }}.example.com` by
    /// default for routes, `listener-{{ i }}.example.com` for listeners, `matches.example.com`).
    #[serde(default)]
    pub hostname: Option<String>,
    /// A built-in generator: the run's backend group whose Service the routes send to; for
    /// `upstream_servers` behind an external gateway, the group that grows (`group` also reads).
    #[serde(default, alias = "group")]
    pub backend: Option<String>,
    /// A built-in generator: `SERVICE:PORT`, a Service the routes send to (instead of `backend`).
    #[serde(default)]
    pub backend_ref: Option<String>,
    /// A built-in generator of HTTPS listeners: the TLS Secret the listeners terminate with
    /// (none: the growth makes one, a self-signed certificate for every item's hostname).
    #[serde(default)]
    pub secret: Option<String>,
    /// A built-in generator of listeners: their port (80, or 443 for HTTPS).
    #[serde(default)]
    pub port: Option<u16>,
}

/// `probe = { selector = "app=gw", port = 8080, host = "r7.example", path = "/r7" }` on an
/// `apply`, a `delete` or a templated `grow` (Kubernetes): a request (or, with a `grpc` scheme,
/// a gRPC unary call) sent to every data-plane pod on its own (pod IP or port-forward) until
/// `consecutive` answers in a row have `status`; the action's record holds each replica's times
/// (first answer, stable) and the mixed window.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// Label selector of the data-plane pods (default: the run's own proxy pods).
    #[serde(default)]
    pub selector: Option<String>,
    /// Their namespace (default: the action's, else the run's).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The pod port (default: the run's proxy's first plain HTTP listener).
    #[serde(default)]
    pub port: Option<u16>,
    /// The Host header (and SNI) sent (default: the pod's address).
    #[serde(default)]
    pub host: Option<String>,
    /// The request path; for gRPC, the method (`/` means the backend's
    /// [`GRPC_PROBE_METHOD`]).
    #[serde(default = "slash")]
    pub path: String,
    /// `http` or `https`, or `grpc` (h2c) or `grpcs` (h2 over TLS) for a gRPC unary call
    /// (certificates are not verified: the probe asks whether the route serves, not who signed
    /// it).
    #[serde(default = "http_scheme")]
    pub scheme: String,
    /// The answer that means "the new state serves": an HTTP status (default 200; 404 for a
    /// deleted route), or with a gRPC scheme a gRPC status code, from `grpc-status` or from
    /// the proxy's own HTTP status (default 0, OK; 12, UNIMPLEMENTED, for a deleted GRPCRoute).
    #[serde(default)]
    pub status: Option<u16>,
    /// How many expected answers in a row make a replica stable.
    #[serde(default = "three")]
    pub consecutive: u32,
    /// From one request's start to the next one's, per replica.
    #[serde(default = "one_ms")]
    pub every: Dur,
    /// How long every replica may take to be stable, from the action's start.
    #[serde(default = "ready_timeout")]
    pub timeout: Dur,
}

fn slash() -> String {
    "/".to_string()
}
fn http_scheme() -> String {
    "http".to_string()
}
/// The method a gRPC probe calls when its `path` is `/`: the backend's unary method.
pub const GRPC_PROBE_METHOD: &str = "/proxybench.Bench/Unary";

impl ProbeSpec {
    /// The probe is a gRPC call (scheme `grpc` or `grpcs`).
    pub fn grpc(&self) -> bool {
        self.scheme.starts_with("grpc")
    }

    /// The answer that means "serves": `status`, else 200 (HTTP) or 0 (gRPC's OK).
    pub fn expected(&self) -> u16 {
        self.status.unwrap_or(if self.grpc() { 0 } else { 200 })
    }

    /// The path asked: `path`, or for a gRPC probe of `/` the backend's unary method.
    pub fn request_path(&self) -> &str {
        if self.grpc() && self.path == "/" {
            GRPC_PROBE_METHOD
        } else {
            &self.path
        }
    }
}
fn three() -> u32 {
    3
}
fn one_ms() -> Dur {
    Dur(Duration::from_millis(1))
}

/// `delete_pod = { selector = "app=x", count = 1, grace = "0s" }` (Kubernetes only).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeletePods {
    /// Label selector of the pods.
    pub selector: String,
    /// How many of the matching pods.
    #[serde(default = "one")]
    pub count: u32,
    /// Grace period (`0s` kills); Kubernetes' default of 30 s when absent.
    #[serde(default = "thirty_seconds")]
    pub grace: Dur,
}

/// `scale = { target = "deployment/NAME", to = N, step = "10s" }` (Kubernetes only).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleWorkload {
    /// The workload, `KIND/NAME`.
    pub target: String,
    /// Replicas after the action.
    pub to: u32,
    /// One replica every `step` (gradual); absent: all at once.
    #[serde(default)]
    pub step: Option<Dur>,
}

fn thirty_seconds() -> Dur {
    Dur(Duration::from_secs(30))
}

fn match_path() -> String {
    "/match".to_string()
}
fn match_header() -> String {
    "x-match".to_string()
}
fn yes() -> bool {
    true
}
fn ready_timeout() -> Dur {
    Dur(Duration::from_secs(30))
}

/// A single step of an action, at a time from the case's start.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// When it fires.
    pub at: Duration,
    /// What it does.
    pub action: Action,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Set a backend group's size (one instance at a time when gradual), reloading the proxy.
    ScaleBackends {
        /// Group.
        group: String,
        /// Size after this step.
        to: u32,
        /// How removed instances leave.
        remove: RemoveMode,
    },
    /// Set the number of proxy replicas.
    ScaleReplicas {
        /// Replicas after this step.
        to: u32,
        /// How removed replicas stop.
        stop: StopSpec,
    },
    /// Reload every replica with the current config (a new generation).
    Reload,
    /// Switch every replica to a named alternative config.
    SwapConfig(String),
    /// Change backend behaviour now: a whole group (its current members, and instances added to
    /// it later) or one instance.
    SetProfile {
        /// The group, when the action names one.
        group: Option<String>,
        /// The instance, when the action names one.
        backend: Option<String>,
        /// The new profile.
        profile: Profile,
    },
    /// Drain a backend (no reload).
    DrainBackend(String),
    /// Kill a backend abruptly (no reload).
    KillBackend(String),
    /// Bring a drained or killed backend back.
    RestartBackend(String),
    /// Grow the config step by step (one action, many reloads).
    Grow(Box<GrowSpec>),
    /// Stop one proxy replica.
    StopReplica {
        /// Replica name, or the newest when `None`.
        replica: Option<String>,
        /// How.
        mode: StopSpec,
    },
    /// Run a command of the user's (no shell), bounded in time; its output is kept.
    Exec {
        /// Program and arguments.
        argv: Vec<String>,
        /// Killed past this.
        timeout: Duration,
        /// A non-zero exit or a timeout is recorded but does not fail the run.
        allow_fail: bool,
    },
    /// Kubernetes: apply a manifest file (any objects, server-side apply).
    Apply {
        /// The manifest.
        file: PathBuf,
        /// Where its objects that name no namespace go; the run's namespace when `None`.
        namespace: Option<String>,
        /// What to wait for on every object of the manifest once applied (`wait`).
        wait: Option<Wait>,
        /// The data-plane probe whose per-replica times are the action's record (`probe`).
        probe: Option<ProbeSpec>,
    },
    /// Kubernetes: delete the objects a manifest file names.
    Delete {
        /// The manifest.
        file: PathBuf,
        /// Where its objects that name no namespace are; the run's namespace when `None`.
        namespace: Option<String>,
        /// What to wait for on every object of the manifest once deleted (`wait = "delete"`).
        wait: Option<Wait>,
        /// The data-plane probe whose per-replica times are the action's record (`probe`).
        probe: Option<ProbeSpec>,
    },
    /// Kubernetes: restart a workload's pods as `kubectl rollout restart` does.
    RolloutRestart {
        /// The workload (any kind).
        target: Workload,
        /// Its namespace; the run's when `None`.
        namespace: Option<String>,
        /// The data-plane probe whose per-replica times are the action's record (`probe`).
        probe: Option<ProbeSpec>,
    },
    /// Kubernetes: delete pods chosen by a label selector.
    DeletePod {
        /// Label selector (`app=x`).
        selector: String,
        /// How many of the matching pods (the oldest first).
        count: u32,
        /// Grace period; zero kills.
        grace: Duration,
        /// Their namespace; the run's when `None`.
        namespace: Option<String>,
    },
    /// Kubernetes: scale a workload (a Deployment or StatefulSet) to `to` replicas, one replica
    /// every `step` (all at once when `step` is zero).
    Scale {
        /// The workload (never a DaemonSet: it has no replica count).
        target: Workload,
        /// Replicas after this step.
        to: u32,
        /// Time between one-replica steps; zero scales at once.
        step: Duration,
        /// Its namespace; the run's when `None`.
        namespace: Option<String>,
        /// The data-plane probe whose per-replica times are the action's record (`probe`).
        probe: Option<ProbeSpec>,
    },
}

/// A workload a cluster action names, `KIND/NAME` in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// Its kind.
    pub kind: WorkloadKind,
    /// Its name (a DNS subdomain).
    pub name: String,
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind.name(), self.name)
    }
}

impl Action {
    /// The action's name as written in a scenario file (and in events.csv).
    pub fn kind(&self) -> &'static str {
        match self {
            Action::ScaleBackends { .. } => "scale_backends",
            Action::ScaleReplicas { .. } => "scale_replicas",
            Action::Reload => "reload",
            Action::SwapConfig(_) => "swap_config",
            Action::SetProfile { .. } => "set_profile",
            Action::DrainBackend(_) => "drain_backend",
            Action::KillBackend(_) => "kill_backend",
            Action::RestartBackend(_) => "restart_backend",
            Action::Grow(_) => "grow",
            Action::StopReplica { .. } => "stop_replica",
            Action::Exec { .. } => "exec",
            Action::Apply { .. } => "apply",
            Action::Delete { .. } => "delete",
            Action::RolloutRestart { .. } => "rollout_restart",
            Action::DeletePod { .. } => "delete_pod",
            Action::Scale { .. } => "scale",
        }
    }

    /// Whether the action exists only on the Kubernetes platform.
    pub fn needs_cluster(&self) -> bool {
        matches!(
            self,
            Action::Apply { .. }
                | Action::Delete { .. }
                | Action::RolloutRestart { .. }
                | Action::DeletePod { .. }
                | Action::Scale { .. }
        )
    }

    /// The namespace a cluster action names, when it names one (else it acts in the run's).
    pub fn namespace(&self) -> Option<&str> {
        match self {
            Action::Apply { namespace, .. }
            | Action::Delete { namespace, .. }
            | Action::RolloutRestart { namespace, .. }
            | Action::DeletePod { namespace, .. }
            | Action::Scale { namespace, .. } => namespace.as_deref(),
            _ => None,
        }
    }
}
