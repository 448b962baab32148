//! The neutral config model of a proxy under test, embedded as the `[proxy]` table of a scenario.
//! Its shape is user-facing: every table rejects unknown keys, durations are written `"10s"`,
//! rates `"3r/s"` and sizes `"10m"`, so a bad value is reported by the TOML parser at its line.
//! Cross-references (a route naming an unknown upstream...) are checked by
//! [`ProxyConfig::validate`], whose messages name the item.

mod check;
mod cpus;
mod external;
pub mod features;
mod kinds;
mod lb;

pub use check::Placement;
pub use cpus::Cpus;
pub use features::{Feature, Support};
pub use kinds::{LogFormat, ProxyKind};
pub use lb::Lb;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use units::{Dur, Rate, Size};

/// Everything about the proxy under test: process shape, listeners, upstreams, routes, limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyConfig {
    /// Which proxy runs.
    #[serde(default)]
    pub kind: ProxyKind,
    /// Proxy replicas sharing the listener ports (the stand-in for pods behind a Service).
    #[serde(default = "one")]
    pub replicas: u32,
    /// `worker_processes` of each replica.
    #[serde(default = "one")]
    pub worker_processes: u32,
    /// The CPUs every process of every replica is pinned to (`"1"`, `"0-1"`), as `taskset -c`
    /// would: a fair comparison gives each proxy the same cores. Unset: the run's own CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Cpus>,
    /// `worker_connections` (client plus upstream connections per worker).
    #[serde(default = "default_worker_connections")]
    pub worker_connections: u32,
    /// Requests per client keep-alive connection (`keepalive_requests`, nginx's default 1000).
    #[serde(default = "default_keepalive_requests")]
    pub keepalive_requests: u64,
    /// Idle time before a client keep-alive connection is closed (`keepalive_timeout`).
    #[serde(default = "default_keepalive_timeout")]
    pub keepalive_timeout: Dur,
    /// The drain timeout: how long the old generation may finish its connections after a
    /// reload or a graceful stop before it is cut (nginx `worker_shutdown_timeout`, HAProxy
    /// `hard-stop-after`, Caddy `grace_period`); unset, nginx and HAProxy wait for every
    /// connection (a WebSocket then keeps an old worker alive as long as it lives). Also
    /// written `drain_timeout`.
    #[serde(default, alias = "drain_timeout")]
    pub worker_shutdown_timeout: Option<Dur>,
    /// How long an upgraded connection (a WebSocket) or a gRPC stream may stay idle, nothing
    /// read nor written, before the proxy closes it (HAProxy `timeout tunnel`, for upgraded
    /// connections only; nginx `proxy_read_timeout`/`proxy_send_timeout` on websocket routes
    /// and their `grpc_` twins on grpc routes). Unset: the proxy's own default (nginx 60 s;
    /// HAProxy the client and server timeouts, 60 s as rendered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel_timeout: Option<Dur>,
    /// After a reload, how long the old configuration's upgraded connections stay open before
    /// they are closed (Caddy 2.7's `stream_close_delay`). No proxy installed here can say it:
    /// the capability table says why, and a scenario that sets it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_close_delay: Option<Dur>,
    /// Error-log level (`warn` by default; `notice` shows reloads and worker starts).
    #[serde(default)]
    pub error_log_level: LogLevel,
    /// Write the JSON access log (turn off to measure the proxy without logging cost).
    #[serde(default = "yes")]
    pub access_log: bool,
    /// Where clients connect.
    #[serde(default)]
    pub listeners: Vec<Listener>,
    /// Named pools of backends.
    #[serde(default)]
    pub upstreams: Vec<Upstream>,
    /// Which requests go where; the first matching route on a path wins.
    #[serde(default)]
    pub routes: Vec<Route>,
    /// Request-rate limits that routes refer to.
    #[serde(default)]
    pub rate_limits: Vec<RateLimit>,
    /// Verbatim snippets for what the model cannot say.
    #[serde(default)]
    pub raw: Raw,
    /// How to attach to a proxy the user runs (`[proxy.external]`); required iff `kind` is
    /// `external`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<External>,
}

impl Default for ProxyConfig {
    fn default() -> ProxyConfig {
        ProxyConfig {
            kind: ProxyKind::Nginx,
            replicas: 1,
            worker_processes: 1,
            cpus: None,
            worker_connections: default_worker_connections(),
            keepalive_requests: default_keepalive_requests(),
            keepalive_timeout: default_keepalive_timeout(),
            worker_shutdown_timeout: None,
            tunnel_timeout: None,
            stream_close_delay: None,
            error_log_level: LogLevel::Warn,
            access_log: true,
            listeners: Vec::new(),
            upstreams: Vec::new(),
            routes: Vec::new(),
            rate_limits: Vec::new(),
            raw: Raw::default(),
            external: None,
        }
    }
}

impl ProxyConfig {
    /// Server names of every TLS listener, deduplicated, in order: what the per-run certificate
    /// must cover (`localhost` when the TLS listeners name none).
    pub fn tls_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for l in self.listeners.iter().filter(|l| l.tls) {
            for n in &l.server_names {
                if !names.contains(n) {
                    names.push(n.clone());
                }
            }
        }
        if names.is_empty() && self.listeners.iter().any(|l| l.tls) {
            names.push("localhost".to_string());
        }
        names
    }

    /// True when some listener serves TLS (the run must then generate a certificate).
    pub fn has_tls(&self) -> bool {
        self.listeners.iter().any(|l| l.tls)
    }

    /// The listener called `name`.
    pub fn listener(&self, name: &str) -> Option<&Listener> {
        self.listeners.iter().find(|l| l.name == name)
    }

    /// The upstream called `name`.
    pub fn upstream(&self, name: &str) -> Option<&Upstream> {
        self.upstreams.iter().find(|u| u.name == name)
    }

    /// The rate limit called `name`.
    pub fn rate_limit(&self, name: &str) -> Option<&RateLimit> {
        self.rate_limits.iter().find(|r| r.name == name)
    }
}

/// nginx error-log levels, least to most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Everything but debug.
    Info,
    /// Adds process starts, signals and reloads.
    Notice,
    /// Warnings and worse (the default).
    #[default]
    Warn,
    /// Errors and worse.
    Error,
    /// Critical conditions only.
    Crit,
}

impl LogLevel {
    /// The level as nginx spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
            LogLevel::Crit => "crit",
        }
    }
}

/// A place clients connect to: one port on 127.0.0.1, HTTP or HTTPS, with its server names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Listener {
    /// Name routes refer to.
    pub name: String,
    /// Serve HTTPS with the certificate generated for the run.
    #[serde(default)]
    pub tls: bool,
    /// Host names served (`server_name`); each gets its own server block. Empty: any host.
    #[serde(default)]
    pub server_names: Vec<String>,
    /// A fixed port; normally the run assigns one.
    #[serde(default)]
    pub port: Option<u16>,
    /// Serve HTTP/2 as well: by ALPN (h2 and http/1.1) on a TLS listener, with prior knowledge
    /// (h2c) on a plain one. nginx 1.22's plain `listen ... http2` then speaks h2c only.
    #[serde(default)]
    pub http2: bool,
}

/// A named pool of backends and how nginx balances, retries and times out against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upstream {
    /// Name routes refer to.
    pub name: String,
    /// The backend group whose addresses fill the pool (resolved by the run).
    pub backends: String,
    /// Load-balancing method.
    #[serde(default)]
    pub lb: Lb,
    /// Idle keep-alive connections cached per worker (0: a new connection per request). Non-zero
    /// also renders `proxy_http_version 1.1` and an empty `Connection` header, without which
    /// nginx would not reuse them.
    #[serde(default)]
    pub keepalive: u32,
    /// Requests per upstream keep-alive connection (nginx default 1000).
    #[serde(default)]
    pub keepalive_requests: Option<u32>,
    /// Idle time of an upstream keep-alive connection (nginx default 60s).
    #[serde(default)]
    pub keepalive_timeout: Option<Dur>,
    /// Failed attempts within `fail_timeout` that mark a server unavailable (nginx default 1).
    #[serde(default)]
    pub max_fails: Option<u32>,
    /// Window for `max_fails` and how long a failed server stays out (nginx default 10s).
    #[serde(default)]
    pub fail_timeout: Option<Dur>,
    /// Conditions that pass a request to the next server (`proxy_next_upstream`, default
    /// `error timeout`).
    #[serde(default)]
    pub next_upstream: Option<Vec<NextUpstream>>,
    /// Attempts in all, including the first (`proxy_next_upstream_tries`, default unlimited).
    #[serde(default)]
    pub next_upstream_tries: Option<u32>,
    /// Time budget for passing a request on (`proxy_next_upstream_timeout`, default unlimited).
    #[serde(default)]
    pub next_upstream_timeout: Option<Dur>,
    /// `proxy_connect_timeout` (nginx default 60s).
    #[serde(default)]
    pub connect_timeout: Option<Dur>,
    /// `proxy_read_timeout` (nginx default 60s).
    #[serde(default)]
    pub read_timeout: Option<Dur>,
    /// `proxy_send_timeout` (nginx default 60s).
    #[serde(default)]
    pub send_timeout: Option<Dur>,
    /// Shared-memory zone size: failure state and least_conn counts are then shared by all
    /// workers instead of kept per worker.
    #[serde(default)]
    pub zone: Option<Size>,
    /// Speak HTTP/2 to the backends: h2c with prior knowledge, as they are plain HTTP
    /// (HAProxy `proto h2`, Caddy's transport `versions: ["h2c"]`; nginx 1.22 cannot).
    #[serde(default)]
    pub http2: bool,
}

impl Upstream {
    /// An upstream with nginx's defaults over backend group `backends`.
    pub fn new(name: &str, backends: &str) -> Upstream {
        Upstream {
            name: name.to_string(),
            backends: backends.to_string(),
            lb: Lb::RoundRobin,
            keepalive: 0,
            keepalive_requests: None,
            keepalive_timeout: None,
            max_fails: None,
            fail_timeout: None,
            next_upstream: None,
            next_upstream_tries: None,
            next_upstream_timeout: None,
            connect_timeout: None,
            read_timeout: None,
            send_timeout: None,
            zone: None,
            http2: false,
        }
    }
}

/// A `proxy_next_upstream` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // the variants are nginx's own words
pub enum NextUpstream {
    #[serde(rename = "error")]
    Error,
    #[serde(rename = "timeout")]
    Timeout,
    #[serde(rename = "invalid_header")]
    InvalidHeader,
    #[serde(rename = "http_500")]
    Http500,
    #[serde(rename = "http_502")]
    Http502,
    #[serde(rename = "http_503")]
    Http503,
    #[serde(rename = "http_504")]
    Http504,
    #[serde(rename = "http_403")]
    Http403,
    #[serde(rename = "http_404")]
    Http404,
    #[serde(rename = "http_429")]
    Http429,
    #[serde(rename = "non_idempotent")]
    NonIdempotent,
    #[serde(rename = "off")]
    Off,
}

impl NextUpstream {
    /// The condition as nginx spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            NextUpstream::Error => "error",
            NextUpstream::Timeout => "timeout",
            NextUpstream::InvalidHeader => "invalid_header",
            NextUpstream::Http500 => "http_500",
            NextUpstream::Http502 => "http_502",
            NextUpstream::Http503 => "http_503",
            NextUpstream::Http504 => "http_504",
            NextUpstream::Http403 => "http_403",
            NextUpstream::Http404 => "http_404",
            NextUpstream::Http429 => "http_429",
            NextUpstream::NonIdempotent => "non_idempotent",
            NextUpstream::Off => "off",
        }
    }
}

/// How a route's path is compared with the request path.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum PathMatch {
    /// The request path starts with the route path (nginx prefix location: `/coffee` also
    /// matches `/coffeehouse`).
    #[default]
    Prefix,
    /// The request path equals the route path.
    Exact,
}

/// Which requests go where. Routes on the same listener, host and path are tried in order; a
/// route with no header/query/method conditions is the fallback for its path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// Optional name, used in messages and for merging scenario layers.
    #[serde(default)]
    pub name: Option<String>,
    /// The listener it applies to; unset: every listener.
    #[serde(default)]
    pub listener: Option<String>,
    /// The host it applies to (one of the listener's server names); unset: every host.
    #[serde(default)]
    pub host: Option<String>,
    /// Path prefix or exact path, starting with `/`.
    pub path: String,
    /// How `path` is compared.
    #[serde(rename = "match", default)]
    pub path_match: PathMatch,
    /// Request headers that must have exactly these values (names are case-insensitive).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Query arguments that must have exactly these (raw, undecoded) values.
    #[serde(default)]
    pub query: BTreeMap<String, String>,
    /// The request method it applies to (`GET`, `POST`...).
    #[serde(default)]
    pub method: Option<String>,
    /// The upstream that serves it.
    #[serde(default)]
    pub upstream: Option<String>,
    /// A status nginx answers itself instead of proxying.
    #[serde(rename = "return", default)]
    pub return_status: Option<u16>,
    /// Body (or, for 3xx, the URL) sent with `return`; nginx variables expand in it.
    #[serde(default)]
    pub body: Option<String>,
    /// The rate limit applied to it.
    #[serde(default)]
    pub rate_limit: Option<String>,
    /// It carries WebSocket upgrades: the proxy passes `Upgrade` and `Connection: upgrade` on
    /// and then tunnels the connection (nginx needs it said; HAProxy and Caddy do it for any
    /// route). Plain requests on it are proxied as ever.
    #[serde(default, skip_serializing_if = "is_false")]
    pub websocket: bool,
    /// It carries gRPC: HTTP/2 from the client (its listener sets `http2`) to its upstream,
    /// which must set `http2` (nginx `grpc_pass`, HAProxy `proto h2`, Caddy's h2c transport),
    /// with the trailers passed through.
    #[serde(default, skip_serializing_if = "is_false")]
    pub grpc: bool,
}

impl Route {
    /// A prefix route from `path` to upstream `upstream` on every listener and host.
    pub fn to_upstream(path: &str, upstream: &str) -> Route {
        Route {
            path: path.to_string(),
            upstream: Some(upstream.to_string()),
            ..Route::default()
        }
    }

    /// True when the route has header, query or method conditions.
    pub fn has_conditions(&self) -> bool {
        !self.headers.is_empty() || !self.query.is_empty() || self.method.is_some()
    }

    /// How messages name the route: `route #3 "coffee-v2" (/coffee)`; `index` is 0-based.
    pub fn label(&self, index: usize) -> String {
        match &self.name {
            Some(n) => format!("route #{} \"{}\" ({})", index + 1, n, self.path),
            None => format!("route #{} ({})", index + 1, self.path),
        }
    }
}

/// A request-rate limit (nginx `limit_req`): a leaky bucket kept in milliseconds per key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Name routes refer to (also the shared-memory zone's name).
    pub name: String,
    /// Sustained rate; nginx accepts whole requests per second or per minute.
    pub rate: Rate,
    /// Requests that may queue beyond the rate (0: any request sooner than 1/rate after the last
    /// accepted one is rejected).
    #[serde(default)]
    pub burst: u32,
    /// Serve queued requests at once instead of pacing them.
    #[serde(default)]
    pub nodelay: bool,
    /// Two-stage limiting: the first `delay` excess requests pass at once, the rest are paced
    /// (`delay=N`; exclusive with `nodelay`).
    #[serde(default)]
    pub delay: Option<u32>,
    /// Status for rejected requests (`limit_req_status`, 400-599).
    #[serde(default = "default_limit_status")]
    pub status: u16,
    /// What is counted separately (an nginx variable expression).
    #[serde(default = "default_limit_key")]
    pub key: String,
    /// Shared-memory zone size.
    #[serde(default = "default_zone_size")]
    pub zone_size: Size,
}

impl RateLimit {
    /// A limit of `rate` requests per second per client address, nginx defaults otherwise.
    pub fn new(name: &str, rate: f64) -> RateLimit {
        RateLimit {
            name: name.to_string(),
            rate: Rate(rate),
            burst: 0,
            nodelay: false,
            delay: None,
            status: default_limit_status(),
            key: default_limit_key(),
            zone_size: default_zone_size(),
        }
    }
}

/// Verbatim nginx snippets, inserted where their name says, for what the model cannot express.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Raw {
    /// Main (top-level) context.
    #[serde(default)]
    pub main: String,
    /// `events {}` block.
    #[serde(default)]
    pub events: String,
    /// `http {}` block.
    #[serde(default)]
    pub http: String,
    /// Every listener's `server {}` block.
    #[serde(default)]
    pub server: String,
    /// Every location that serves a route.
    #[serde(default)]
    pub location: String,
}

/// `[proxy.external]`: a proxy the user already runs, configured by hand to listen where the
/// loads' URLs say and to forward to the backends' fixed `listen` ports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct External {
    /// Where the loads' host names resolve (like curl's `--resolve`); unset: the system's
    /// resolver. Either way the address must be in 127.0.0.0/8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve: Option<std::net::IpAddr>,
    /// The command (no shell) a `reload = true` action runs; the reload is timed to its exit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reload: Vec<String>,
    /// The proxy's access log and its format; read from its size at the run's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_log: Option<ExternalLog>,
    /// The proxy's error log; read from its size at the run's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_log: Option<ExternalLog>,
    /// Process name (`/proc/PID/comm`) whose processes, with their descendants, are sampled
    /// for CPU and memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<String>,
}

/// A log file of an external proxy: its path and, for an access log, its format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalLog {
    /// The file (absolute).
    pub path: std::path::PathBuf,
    /// How its lines are written (`nginx-json`, `combined`...).
    #[serde(default)]
    pub format: LogFormat,
}

/// The level under which a proxy's own start, reload and stop lines (`proxy::logs::ErrorRecord`'s
/// `lifecycle`) are counted.
pub const LIFECYCLE: &str = "lifecycle";

/// A config the model cannot stand for: unknown names, duplicates, values a proxy cannot
/// express. The message names the item (`route #4 (/tea): unknown upstream 'tea'`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

fn one() -> u32 {
    1
}
fn is_false(b: &bool) -> bool {
    !*b
}
fn yes() -> bool {
    true
}
fn default_worker_connections() -> u32 {
    4096
}
fn default_keepalive_requests() -> u64 {
    1000
}
fn default_keepalive_timeout() -> Dur {
    Dur(Duration::from_secs(75))
}
fn default_limit_status() -> u16 {
    503
}
fn default_limit_key() -> String {
    "$binary_remote_addr".to_string()
}
fn default_zone_size() -> Size {
    Size(10 * 1024 * 1024)
}
