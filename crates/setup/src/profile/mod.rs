//! Behaviour profiles: what a backend instance does with each request, as data (the spec syntax
//! parsed and printed, the theoretical mean and quantiles of its distributions); the backend
//! crate compiles a profile into samplers and draws from it.

mod dist;
mod spec;

pub use dist::Dist;
use std::fmt;
use std::time::Duration;

/// A profile spec that does not parse; the message names the bad part, e.g.
/// `latency: unknown distribution 'lognorml' (use fixed, uniform, normal, lognormal, exponential)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

/// How an instance behaves: latency, CPU cost, response size, status mix, connection lifetime,
/// slow start and per-path overrides. Written as a small spec, the same on the command line
/// (`--profile`) and in scenario files (`profile = "..."`).
///
/// # Spec syntax
///
/// Settings are `key=value`, separated by `;` (or newlines). Whitespace is free. The empty
/// spec is the default: no latency, no CPU cost, status 200, body `<instance name>\n`.
///
/// | key | value | example |
/// |---|---|---|
/// | `latency` | a time distribution | `latency=lognormal(median=10ms,sigma=0.5)` |
/// | `spike` | `DIST:SHARE, ...`: that share of requests takes DIST instead of `latency`, or `none` | `spike=500ms:1%` |
/// | `cpu` | a time distribution of busy-loop CPU per request | `cpu=200us` |
/// | `size` | a size distribution of the response body | `size=1k`, `size=uniform(1k,64k)` |
/// | `status` | `CODE:SHARE, ...`; the rest is 200; a lone `CODE` means all | `status=503:1%,500:0.1%` |
/// | `close_after` | close each connection after N responses | `close_after=100` |
/// | `slow_start` | answer 503 (and `/readyz` 503) for this long after each (re)start | `slow_start=5s` |
/// | `push` | messages per second sent on each long-lived connection: WebSocket text messages, SSE events, gRPC stream messages (unset: none on WebSockets, 1 a second on the others) | `push=10` |
/// | `push_size` | bytes of each pushed message (unset: 32) | `push_size=1k` |
/// | `push_count` | end each WebSocket (close 1000), SSE response or gRPC stream (grpc-status 0) after this many pushes | `push_count=100` |
/// | `ping` | send a WebSocket ping this often | `ping=5s` |
/// | `path PREFIX { ... }` | overrides for paths starting with PREFIX (longest prefix wins) | `path /slow { latency=100ms }` |
///
/// Distributions (times take `ns us ms s m h`, sizes `b k m g`; named or positional arguments):
/// `10ms` or `fixed(10ms)`, `uniform(min=5ms,max=15ms)`, `normal(mean=10ms,sd=2ms)` (clamped at
/// zero), `lognormal(median=10ms,sigma=0.5)`, `exponential(mean=10ms)`. Shares are percentages
/// (`1%`, `0.05%`) or fractions (`0.01`). Latency is waited in the event loop (timers), never by
/// blocking; CPU cost spins on the thread's CPU clock before the latency starts. Inside a `path`
/// block only `latency`, `spike`, `cpu`, `size` and `status` are allowed; each key not set there
/// is inherited from the top level.
///
/// ```
/// use proxybench_setup::profile::Profile;
/// let p: Profile = "latency=lognormal(median=10ms,sigma=0.5); cpu=200us; status=503:1%; \
///                   path /slow { latency=fixed(100ms) }".parse().unwrap();
/// assert_eq!(p.to_string().parse::<Profile>().unwrap(), p);
/// let err = "latency=lognorml(median=10ms)".parse::<Profile>().unwrap_err();
/// assert!(err.to_string().starts_with("latency: unknown distribution 'lognorml'"));
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Profile {
    /// Behaviour of every path no `path` rule matches.
    pub base: Behaviour,
    /// Per-path overrides, in the order written.
    pub paths: Vec<PathRule>,
    /// Close each connection after this many responses (the last one says `Connection: close`).
    pub close_after: Option<u64>,
    /// Not ready for this long after each (re)start: ordinary requests and `/readyz` get 503.
    pub slow_start: Option<Duration>,
    /// What the instance does on long-lived connections (WebSocket, SSE, gRPC streams); boxed,
    /// as most profiles never set it and a profile travels by value in scenario actions.
    pub streams: Box<Streams>,
}

/// How an instance talks on long-lived connections (`push`, `push_size`, `push_count`,
/// `ping`); whole-instance settings, never per path.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Streams {
    /// Messages pushed per second on each connection or stream.
    pub push: Option<f64>,
    /// Bytes of each pushed message.
    pub push_size: Option<u64>,
    /// End each connection or stream after this many pushes.
    pub push_count: Option<u64>,
    /// WebSocket ping interval.
    pub ping: Option<Duration>,
}

impl Streams {
    /// Pushes per second on a connection of this kind: the `push` key, or, unset, none on a
    /// WebSocket (it echoes) and one a second on an event stream or a gRPC stream (which
    /// exist to be pushed to).
    pub fn push_rate(&self, websocket: bool) -> f64 {
        match self.push {
            Some(r) => r,
            None if websocket => 0.0,
            None => 1.0,
        }
    }

    /// Bytes of each pushed message (32 unless set).
    pub fn push_bytes(&self) -> u64 {
        self.push_size.unwrap_or(32)
    }
}

/// The per-request settings a profile or a `path` block can set; `None` means default (top
/// level) or inherited (in a `path` block).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Behaviour {
    /// Time waited before answering, in nanoseconds.
    pub latency: Option<Dist>,
    /// Shares of requests whose latency comes from another distribution instead.
    pub spikes: Option<Vec<Spike>>,
    /// CPU burnt per request (busy loop on the thread's CPU clock), in nanoseconds.
    pub cpu: Option<Dist>,
    /// Response body size in bytes (unset: the body is the instance name and a newline).
    pub size: Option<Dist>,
    /// Shares of responses with a status other than 200.
    pub status: Option<Vec<StatusShare>>,
}

/// A share of requests that take a different latency ("1% take 500ms").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spike {
    /// The latency distribution of this share, in nanoseconds.
    pub latency: Dist,
    /// Which share of requests.
    pub share: Share,
}

/// A share of responses with a given status ("1% 503").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusShare {
    /// HTTP status code, 200..=599.
    pub code: u16,
    /// Which share of responses.
    pub share: Share,
}

/// Overrides for every request whose path starts with `prefix`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PathRule {
    /// Path prefix, starting with `/` (matched against the path without its query).
    pub prefix: String,
    /// The settings that differ from the top level.
    pub behaviour: Behaviour,
}

/// A probability in parts per billion: exact to print and re-parse, and drawn with one integer
/// comparison per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Share(pub u32);

impl Share {
    /// All requests.
    pub const ALL: Share = Share(1_000_000_000);

    /// The share as a fraction in [0, 1].
    pub fn fraction(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// A share from a fraction in [0, 1] (rounded to a part per billion).
    pub fn from_fraction(f: f64) -> Share {
        Share((f.clamp(0.0, 1.0) * 1e9).round() as u32)
    }
}

impl fmt::Display for Share {
    /// Prints a percentage with as many decimals as needed: `1%`, `0.05%`, `33.3333333%`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.0 / 10_000_000;
        let frac = self.0 % 10_000_000;
        if frac == 0 {
            write!(f, "{whole}%")
        } else {
            let digits = format!("{frac:07}");
            write!(f, "{whole}.{}%", digits.trim_end_matches('0'))
        }
    }
}

impl std::str::FromStr for Profile {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Profile, SpecError> {
        spec::parse(s)
    }
}

impl fmt::Display for Profile {
    /// Prints the canonical spec, which parses back to an equal profile.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        spec::write(self, f)
    }
}

impl serde::Serialize for Profile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Profile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Profile, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Profile {
    /// The behaviour a request to `path` gets: the longest matching `path` rule over the base.
    pub fn behaviour_for(&self, path: &str) -> Behaviour {
        let path = path.split('?').next().unwrap_or(path);
        let rule = self
            .paths
            .iter()
            .filter(|r| path_matches(path.as_bytes(), r.prefix.as_bytes()))
            .max_by_key(|r| r.prefix.len());
        match rule {
            Some(r) => self.base.overridden_by(&r.behaviour),
            None => self.base.clone(),
        }
    }
}

impl Behaviour {
    /// `self` with every setting `over` has replaced.
    pub fn overridden_by(&self, over: &Behaviour) -> Behaviour {
        Behaviour {
            latency: over.latency.or(self.latency),
            spikes: over.spikes.clone().or_else(|| self.spikes.clone()),
            cpu: over.cpu.or(self.cpu),
            size: over.size.or(self.size),
            status: over.status.clone().or_else(|| self.status.clone()),
        }
    }

    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Behaviour::default()
    }
}

/// Prefix match on path segments' bytes, shared by [`Profile::behaviour_for`] and the
/// backend's compiled profile so both pick the same rule: `/slow` matches `/slow`, `/slow/x` and `/slowly`
/// (plain prefix, as nginx's `location /slow`).
pub fn path_matches(path: &[u8], prefix: &[u8]) -> bool {
    path.starts_with(prefix)
}
