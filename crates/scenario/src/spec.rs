//! The scenario's types, as the parser resolves a file into them: a [`Scenario`] of [`Case`]s,
//! each with its backends, proxy config, loads, timed [`Step`]s and checks. Nothing here reads a
//! file; [`crate::parse`] builds these, and the runner and the analyses read them.

mod steps;

use crate::checks::Check;
use crate::platform::PlatformSpec;
use model::stream::{Reconnect, StreamProtocol};
use serde::Deserialize;
use setup::profile::Profile;
use setup::proxy::ProxyConfig;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
pub use steps::{
    Action, DeletePods, GrowSpec, GrowWhat, ProbeSpec, RemoveMode, ScaleBackends, ScaleReplicas,
    ScaleWorkload, SetProfile, Step, StopReplica, StopSpec, Workload, GRPC_PROBE_METHOD,
};
use toml::Spanned;
use units::{Dur, Rate, Size};

/// A scenario resolved into runnable cases.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file it was read from, as errors name it.
    pub file: String,
    /// Scenario name (results go under `results/<name>/`).
    pub name: String,
    /// One-line description.
    pub description: String,
    /// The built-in analysis that turns measurements into theory checks (catalogue scenarios),
    /// by name: one of [`crate::ParseOptions::analyses`], checked when the file was parsed.
    pub analysis: Option<String>,
    /// The cases, in the order they run.
    pub cases: Vec<Case>,
    /// Whether the quick layers were applied.
    pub quick: bool,
    /// The file's text as parsed: the run writes it to scenario.toml, so `proxybench analyse`
    /// parses exactly what ran.
    pub source: String,
    /// Where the cases run (`[platform]`): processes on this machine unless it says otherwise.
    pub platform: PlatformSpec,
}

/// One case: a complete stack and what happens to it.
#[derive(Debug, Clone)]
pub struct Case {
    /// Case name (`main` when the scenario has no `[[cases]]`).
    pub name: String,
    /// One-line description of the case.
    pub description: String,
    /// Backend groups.
    pub backends: Vec<BackendGroup>,
    /// The proxy under test; `None` sends loads straight to the backends.
    pub proxy: Option<ProxyConfig>,
    /// Alternative proxy configs for `swap_config`.
    pub configs: BTreeMap<String, ProxyConfig>,
    /// Where the proxy config's items were written, for errors the proxy finds later.
    pub proxy_lines: ItemLines,
    /// Where each alternative config's items were written.
    pub config_lines: BTreeMap<String, ItemLines>,
    /// Loads, which run concurrently (each from its own `start`).
    pub loads: Vec<LoadSpec>,
    /// The scenario line of each load, by name, for errors found before the run starts.
    pub load_lines: BTreeMap<String, usize>,
    /// Actions, expanded into single steps and sorted by time.
    pub steps: Vec<Step>,
    /// Checks evaluated after the case.
    pub checks: Vec<Check>,
    /// Backend event-loop threads.
    pub backend_threads: usize,
    /// Pause after the loads end before the stack is torn down (lets logs settle).
    pub settle: Duration,
}

/// The scenario lines of a proxy config's items (`listener.NAME`, `route.N`, `upstream.NAME`,
/// `rate_limit.NAME`, `raw.http`, `external.access_log`...), so that a config the proxy refuses
/// is reported at the line that wrote the offending item.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItemLines {
    /// The line of the config's own table (`[proxy]` or `[configs.NAME]`).
    pub table: usize,
    /// The line of each item, by key.
    pub items: BTreeMap<String, usize>,
}

impl ItemLines {
    /// The line of item `key`, or of the config's table when the item is unknown.
    pub fn line_of(&self, key: Option<&str>) -> usize {
        key.and_then(|k| self.items.get(k))
            .copied()
            .unwrap_or(self.table)
    }
}

impl Case {
    /// When the last load is planned to end.
    pub fn planned_length(&self) -> Duration {
        self.loads
            .iter()
            .map(|l| l.start.0 + l.duration.map(|d| d.0).unwrap_or_default())
            .max()
            .unwrap_or_default()
    }
}

/// A group of identical backends, named `<group>-0`, `<group>-1`...
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendGroup {
    /// Group name, referred to by upstreams and actions.
    pub name: String,
    /// Instances at the start.
    #[serde(default = "one")]
    pub count: u32,
    /// Behaviour profile (the backend spec syntax); empty answers 200 at once.
    #[serde(default)]
    pub profile: Profile,
    /// Fixed addresses: member i listens on this port + i (127.0.0.0/8 only), so that a proxy
    /// configured by hand (an external target) can point at them; unset: ports the OS picks.
    #[serde(default)]
    pub listen: Option<std::net::SocketAddr>,
}

/// Arrival spacing as written in a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrivalsSpec {
    /// Evenly spaced.
    #[default]
    Even,
    /// Poisson (exponential gaps, seeded).
    Poisson,
}

/// One load as written in a scenario.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSpec {
    /// Name, used in reports and checks.
    pub name: String,
    /// URL as clients see it, e.g. `https://cafe.example.com/tea`; the port is the listener's.
    pub url: String,
    /// Where to aim: a listener name (default: the first listener of the URL's scheme), or
    /// `backend:GROUP` to go straight to a group's first backend.
    #[serde(default)]
    pub via: Option<Via>,
    /// Connections.
    #[serde(default = "ten")]
    pub connections: u32,
    /// Generator threads.
    #[serde(default = "one")]
    pub threads: u32,
    /// When to start, from the case's start.
    #[serde(default)]
    pub start: Dur,
    /// How long to run.
    #[serde(default)]
    pub duration: Option<Dur>,
    /// Stop after this many requests.
    #[serde(default)]
    pub requests: Option<u64>,
    /// Open loop at this rate; closed loop when absent.
    #[serde(default)]
    pub rate: Option<Rate>,
    /// Arrival spacing for open loop.
    #[serde(default)]
    pub arrivals: ArrivalsSpec,
    /// Seed of Poisson arrivals.
    #[serde(default = "one64")]
    pub seed: u64,
    /// Request timeout.
    #[serde(default = "two_seconds")]
    pub timeout: Dur,
    /// Request method.
    #[serde(default = "get")]
    pub method: String,
    /// Extra request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Request body.
    #[serde(default)]
    pub body: Option<String>,
    /// HTTP version: `"1.1"` (the default) or `"2"` (h2 by ALPN over https, h2c with prior
    /// knowledge over http).
    #[serde(default)]
    pub http: Option<String>,
    /// HTTP/2: concurrent streams on each connection (h2load's `-m`); needs `http = "2"`.
    #[serde(default)]
    pub streams: Option<u32>,
    /// Run this load from N agents, each an exact share started at one instant, their results
    /// merged exactly: `proxybench agent` processes on this machine (local platform), the pods
    /// of an Indexed Job (Kubernetes). Absent: the load runs in proxybench itself.
    #[serde(default)]
    pub agents: Option<Spanned<u32>>,
    /// Send a request once more on a new connection when the server closed the reused
    /// keep-alive connection under it before answering (the race of a graceful stop), as Go's
    /// net/http does; counted as retried, not as an error. HTTP/1.1 GET, HEAD, OPTIONS, TRACE.
    #[serde(default)]
    pub retry_idle_closed: bool,
    /// With `via = "url"`: connect the url's host to this address instead of looking it up
    /// (`proxybench load --resolve`), keeping Host and SNI.
    #[serde(default)]
    pub resolve: Option<std::net::IpAddr>,
    /// Trust the certificates in this PEM file (relative to the scenario file) instead of the
    /// run's own CA: for a target whose certificate the run did not make.
    #[serde(default)]
    pub cacert: Option<PathBuf>,
    /// Skip TLS certificate verification (`proxybench load --insecure`).
    #[serde(default)]
    pub insecure: bool,
    /// The TLS server name to send, when it is not the url's host (`proxybench load --sni`).
    #[serde(default)]
    pub sni: Option<String>,
    /// A long-lived load: `ws` (also what a `ws://` or `wss://` url means), `grpc-unary`,
    /// `grpc-stream` or `sse` (`proxybench load --protocol`). Absent with an http(s) url: short
    /// HTTP requests.
    #[serde(default)]
    pub protocol: Option<StreamProtocol>,
    /// Long-lived: messages each connection sends per second (WebSocket messages, gRPC unary
    /// calls; 0 sends none). SSE and gRPC streams only listen.
    #[serde(default)]
    pub message_rate: Option<MessageRate>,
    /// Long-lived: the payload size of each message sent (WebSocket at least 16 bytes).
    #[serde(default)]
    pub message_size: Option<Size>,
    /// Long-lived: the connections open evenly over this time (absent: all at once).
    #[serde(default)]
    pub ramp: Option<Dur>,
    /// Long-lived: what a connection slot does when its connection ends before the load does
    /// (`none`, `immediate`, `backoff`; default `backoff`).
    #[serde(default)]
    pub reconnect: Option<Reconnect>,
    /// Long-lived: the first wait of `reconnect = "backoff"` (default 100ms).
    #[serde(default)]
    pub backoff: Option<Dur>,
    /// Long-lived: the longest wait of `reconnect = "backoff"` (default 5s).
    #[serde(default)]
    pub backoff_max: Option<Dur>,
    /// Long-lived: end a connection that received nothing for this long.
    #[serde(default)]
    pub idle_timeout: Option<Dur>,
    /// WebSocket: send a ping this often.
    #[serde(default)]
    pub ping: Option<Dur>,
    /// gRPC: the deadline each call carries (`grpc-timeout`).
    #[serde(default)]
    pub grpc_deadline: Option<Dur>,
    /// gRPC: the method's path (default: the backend's `/proxybench.Bench/Unary` or `/Stream`).
    #[serde(default)]
    pub grpc_path: Option<String>,
}

/// A long-lived load's message rate as written: `0` (send nothing), a number of messages per
/// second, or a rate string (`"5/s"`, `"30r/m"`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MessageRate(pub f64);

impl<'de> Deserialize<'de> for MessageRate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<MessageRate, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(f64),
            S(String),
        }
        let v = match Raw::deserialize(d)? {
            Raw::N(n) => n,
            Raw::S(s) if s.trim() == "0" => 0.0,
            Raw::S(s) => units::parse_rate(&s).map_err(serde::de::Error::custom)?,
        };
        if !v.is_finite() || v < 0.0 {
            return Err(serde::de::Error::custom(
                "message_rate must be 0 or a number of messages per second",
            ));
        }
        Ok(MessageRate(v))
    }
}

impl LoadSpec {
    /// The protocol of a long-lived load (its `protocol`, or WebSocket for a `ws://` or
    /// `wss://` url); `None` for a load of short HTTP requests.
    pub fn stream_protocol(&self) -> Option<StreamProtocol> {
        self.protocol.or_else(|| {
            let scheme = self.url.split_once("://")?.0.to_ascii_lowercase();
            (scheme == "ws" || scheme == "wss").then_some(StreamProtocol::WebSocket)
        })
    }

    /// The url with a WebSocket scheme spelled as HTTP's (`ws://` as `http://`, `wss://` as
    /// `https://`): where the load connects is read from it as from any load's.
    pub fn target_url(&self) -> String {
        match self.url.split_once("://") {
            Some((s, rest)) if s.eq_ignore_ascii_case("ws") => format!("http://{rest}"),
            Some((s, rest)) if s.eq_ignore_ascii_case("wss") => format!("https://{rest}"),
            _ => self.url.clone(),
        }
    }

    /// Whether this load speaks HTTP/2 (`http = "2"`).
    pub fn http2(&self) -> bool {
        self.http.as_deref() == Some("2")
    }

    /// How many agents run this load (`agents = N`); `None` when it runs in proxybench itself.
    pub fn agent_count(&self) -> Option<u32> {
        self.agents.as_ref().map(|a| *a.get_ref())
    }
}

/// What an `apply` or `delete` waits for on each object of its manifest, and for how long: the
/// apply-to-ready time of a Gateway (`condition=Programmed`), a Deployment
/// (`condition=Available`) or an object's deletion, as `kubectl wait` would see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// The state waited for.
    pub until: WaitFor,
    /// How long it may take before the action fails (`timeout`, 60 s by default).
    pub timeout: Duration,
}

/// The state a [`Wait`] waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitFor {
    /// `condition=TYPE[=STATUS]`: the object's status condition TYPE has STATUS (`True` by
    /// default) for its current generation (a condition that reports an older
    /// `observedGeneration` does not count).
    Condition {
        /// The condition's type (`Available`, `Programmed`, `Accepted`...).
        kind: String,
        /// The status it must have.
        status: String,
    },
    /// `delete`: the object is gone from the API.
    Deleted,
}

impl std::fmt::Display for WaitFor {
    /// As written in the scenario file.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitFor::Condition { kind, status } if status == "True" => {
                write!(f, "condition={kind}")
            }
            WaitFor::Condition { kind, status } => write!(f, "condition={kind}={status}"),
            WaitFor::Deleted => f.write_str("delete"),
        }
    }
}

/// A load's `via`: `"LISTENER"` aims at a proxy listener, `"backend:GROUP"` straight at a
/// group's first backend. On Kubernetes a load can also go where users' traffic goes, to an
/// address the run discovers through the API: `"service:NAME[:PORT]"` (a Service's ClusterIP),
/// `"node-port:PORT"` (the proxy's Service on a node's InternalIP and its nodePort) or
/// `"load-balancer:PORT"` (the proxy's Service at its load balancer's status address) or
/// `"gateway:[NAMESPACE/]NAME[:PORT]"` (a Gateway's status address); PORT is a listener name or
/// a port number (for another Service: its port's name or number). On any
/// platform `"url"` connects where the url itself points (a host named in the scenario's
/// `reach` list, or loopback).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub enum Via {
    /// A listener of the proxy, by name.
    Listener(String),
    /// A backend group, by name (its first current instance).
    Backend(String),
    /// A Service of the run's namespace, by name, at its ClusterIP; the port by name or number
    /// (`None`: the first listener of the url's scheme, for the proxy's Service).
    Service(String, Option<String>),
    /// The proxy's Service at a node's InternalIP and the nodePort of a port (by name or number).
    NodePort(String),
    /// The proxy's Service at its load balancer's address and a port (by name or number).
    LoadBalancer(String),
    /// A Gateway API Gateway (`gateway:[NAMESPACE/]NAME[:PORT]`) at the first address its
    /// controller wrote in its status, and a listener's port (by listener name or number; the
    /// first listener of the url's protocol when absent); the run's namespace unless named.
    Gateway {
        /// The Gateway's namespace, when not the run's.
        namespace: Option<String>,
        /// The Gateway's name.
        name: String,
        /// A listener name or a port number.
        port: Option<String>,
    },
    /// The url's own host and port (`"url"`), as a client outside the run would connect: for a
    /// gateway or load balancer the run did not start. The host must be loopback or named in
    /// the scenario's `reach` list.
    Url,
}

impl Via {
    /// Whether it aims at an address found through the Kubernetes API (a Service's ClusterIP,
    /// a node's, a load balancer's), which only the Kubernetes platform can give.
    pub fn is_cluster_address(&self) -> bool {
        matches!(
            self,
            Via::Service(..) | Via::NodePort(_) | Via::LoadBalancer(_) | Via::Gateway { .. }
        )
    }
}

impl From<String> for Via {
    fn from(s: String) -> Via {
        if let Some(group) = s.strip_prefix("backend:") {
            return Via::Backend(group.to_string());
        }
        if let Some(rest) = s.strip_prefix("service:") {
            return match rest.split_once(':') {
                Some((name, port)) => Via::Service(name.to_string(), Some(port.to_string())),
                None => Via::Service(rest.to_string(), None),
            };
        }
        if let Some(port) = s.strip_prefix("node-port:") {
            return Via::NodePort(port.to_string());
        }
        if let Some(port) = s.strip_prefix("load-balancer:") {
            return Via::LoadBalancer(port.to_string());
        }
        if s == "url" {
            return Via::Url;
        }
        if let Some(rest) = s.strip_prefix("gateway:") {
            let (gw, port) = match rest.split_once(':') {
                Some((g, p)) => (g, Some(p.to_string())),
                None => (rest, None),
            };
            let (namespace, name) = match gw.split_once('/') {
                Some((n, g)) => (Some(n.to_string()), g.to_string()),
                None => (None, gw.to_string()),
            };
            return Via::Gateway {
                namespace,
                name,
                port,
            };
        }
        Via::Listener(s)
    }
}

impl std::fmt::Display for Via {
    /// As written in the scenario file.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Via::Listener(l) => f.write_str(l),
            Via::Backend(g) => write!(f, "backend:{g}"),
            Via::Service(n, None) => write!(f, "service:{n}"),
            Via::Service(n, Some(p)) => write!(f, "service:{n}:{p}"),
            Via::NodePort(p) => write!(f, "node-port:{p}"),
            Via::LoadBalancer(p) => write!(f, "load-balancer:{p}"),
            Via::Url => f.write_str("url"),
            Via::Gateway {
                namespace,
                name,
                port,
            } => {
                f.write_str("gateway:")?;
                if let Some(n) = namespace {
                    write!(f, "{n}/")?;
                }
                f.write_str(name)?;
                if let Some(p) = port {
                    write!(f, ":{p}")?;
                }
                Ok(())
            }
        }
    }
}

/// The kinds of workload `rollout_restart` and `scale` act on: the kinds that parse are the
/// kinds the Kubernetes platform runs them on (one type with the Kubernetes client's).
pub use model::WorkloadKind;

impl Scenario {
    /// This scenario with every proxy config (each case's `[proxy]` and its `[configs.*]`
    /// alternatives) set to `kind`: what `--proxy KIND` runs, and what `analyse` re-parses a
    /// record of such a run into.
    pub fn with_proxy_kind(&self, kind: setup::proxy::ProxyKind) -> Scenario {
        let mut out = self.clone();
        for case in &mut out.cases {
            for cfg in case.proxy.iter_mut().chain(case.configs.values_mut()) {
                cfg.kind = kind;
            }
        }
        out
    }
}

fn one() -> u32 {
    1
}
fn one64() -> u64 {
    1
}
fn ten() -> u32 {
    10
}
fn two_seconds() -> Dur {
    Dur(Duration::from_secs(2))
}
fn get() -> String {
    "GET".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn via_reads_a_listener_or_a_backend_group() {
        assert_eq!(Via::from("http".to_string()), Via::Listener("http".into()));
        assert_eq!(
            Via::from("backend:cafe".to_string()),
            Via::Backend("cafe".into())
        );
        assert_eq!(
            Via::from("gateway:gw-system/cafe:https".to_string()),
            Via::Gateway {
                namespace: Some("gw-system".into()),
                name: "cafe".into(),
                port: Some("https".into())
            }
        );
        assert_eq!(
            Via::from("gateway:cafe".to_string()),
            Via::Gateway {
                namespace: None,
                name: "cafe".into(),
                port: None
            }
        );
        assert_eq!(Via::from("url".to_string()), Via::Url);
        for text in [
            "http",
            "backend:cafe",
            "backend:",
            "url",
            "gateway:cafe",
            "gateway:ns/cafe:8443",
            "service:proxy:http",
            "node-port:http",
            "load-balancer:80",
        ] {
            assert_eq!(Via::from(text.to_string()).to_string(), text);
        }
    }
}
