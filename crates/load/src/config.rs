//! What one load is asked to do, and the setup errors that stop it before it starts.

use model::url::Url;
use model::Arrivals;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// A problem found before the run starts (bad URL, unresolvable host, unreadable CA file...).
/// Everything that goes wrong during the run is counted instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The URL cannot be used.
    #[error("bad URL '{0}': {1}")]
    Url(String, String),
    /// The host name did not resolve to an address.
    #[error("cannot resolve '{0}': {1}")]
    Resolve(String, String),
    /// A `--resolve` entry is not `HOST:PORT:ADDR`.
    #[error("bad --resolve '{0}': {1}")]
    ResolveEntry(String, String),
    /// A header is not `Name: value`.
    #[error("bad header '{0}': {1}")]
    Header(String, String),
    /// The TLS setup failed (CA file unreadable or empty).
    #[error("TLS setup: {0}")]
    Tls(String),
    /// A value is out of range (zero connections, a negative rate...).
    #[error("{0}")]
    Invalid(String),
    /// The engine could not start (threads, epoll, the hdr log file).
    #[error("{0}")]
    Io(String),
}

/// A URL the model's parser refused, in the engine's words.
impl From<model::url::UrlError> for Error {
    fn from(e: model::url::UrlError) -> Error {
        Error::Url(e.url, e.why)
    }
}

/// Which kernel interface drives the sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoMode {
    /// io_uring for plain HTTP when the kernel allows it, epoll otherwise (and for https).
    #[default]
    Auto,
    /// Readiness with epoll: a `read` and a `send` per request.
    Epoll,
    /// Completions with io_uring: one system call per loop turn (plain HTTP only).
    Uring,
}

/// A `--resolve HOST:PORT:ADDR` entry: connections for HOST:PORT go to ADDR, while the Host
/// header and TLS SNI stay HOST (curl's meaning).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Resolve {
    /// Host name as written in URLs.
    pub host: String,
    /// Port the entry applies to.
    pub port: u16,
    /// Address to connect to instead.
    pub addr: IpAddr,
}

impl Resolve {
    /// Parses `HOST:PORT:ADDR` (ADDR may be an IPv6 address, with or without brackets).
    pub fn parse(s: &str) -> Result<Resolve, Error> {
        let bad = |why: &str| Error::ResolveEntry(s.to_string(), why.to_string());
        let (host, rest) = s
            .split_once(':')
            .ok_or_else(|| bad("expected HOST:PORT:ADDR"))?;
        let (port, addr) = rest
            .split_once(':')
            .ok_or_else(|| bad("expected HOST:PORT:ADDR"))?;
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        let port: u16 = port
            .parse()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| bad("port must be 1-65535"))?;
        let addr = addr.trim_start_matches('[').trim_end_matches(']');
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| bad("ADDR must be an IP address"))?;
        Ok(Resolve {
            host: host.to_ascii_lowercase(),
            port,
            addr,
        })
    }
}

/// The open loop's send window unless set ([`Config::send_window`]), as measured by
/// bench/open-loop-rate.sh (docs/load.md).
pub const DEFAULT_SEND_WINDOW: Duration = Duration::from_micros(DEFAULT_SEND_WINDOW_US);
const DEFAULT_SEND_WINDOW_US: u64 = 200;

fn default_send_window() -> Duration {
    DEFAULT_SEND_WINDOW
}

/// The callback behind a [`SecondHdrSink`].
pub type SecondHdrFn = dyn Fn(&model::Second, &model::SecondHdr) + Send + Sync;

/// A listener for each second's row with its histograms ([`Config::on_second_hdr`]).
#[derive(Clone)]
pub struct SecondHdrSink(pub std::sync::Arc<SecondHdrFn>);

impl std::fmt::Debug for SecondHdrSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecondHdrSink")
    }
}

/// Everything one load is asked to do. Build with [`Config::new`], then set fields.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Config {
    /// Target URL (`http://` or `https://`), checked by [`Config::new`].
    pub url: String,
    /// Connections across all threads (wrk's `-c`).
    pub connections: u32,
    /// Generator threads, each with its own event loop (wrk's `-t`); capped at `connections`.
    pub threads: u32,
    /// How long to run. With `requests` too, the run ends at whichever comes first.
    pub duration: Option<Duration>,
    /// Send exactly this many requests across all connections, then stop (`-n`).
    pub requests: Option<u64>,
    /// Open loop: requests per second across all connections (`-R`). `None` is closed loop.
    pub rate: Option<f64>,
    /// Spacing of open-loop arrivals.
    pub arrivals: Arrivals,
    /// Seed of the Poisson arrival process, so runs repeat exactly.
    pub seed: u64,
    /// Open loop: sends that fall due within this window leave together, in one submission
    /// (io_uring) or one wake of the loop (epoll), none more than this after its intended
    /// time when the machine keeps up; each request's latency still counts from its own
    /// intended time. Zero sends each at its own time. Waking once per window instead of once
    /// per send is what lets the open loop keep up with a server near its closed-loop rate.
    #[serde(default = "default_send_window")]
    pub send_window: Duration,
    /// Request method.
    pub method: String,
    /// Extra request headers, in order (`-H`).
    pub headers: Vec<(String, String)>,
    /// Request body, sent with a Content-Length.
    pub body: Option<Vec<u8>>,
    /// Host header override. When the URL's host is an IP address this also becomes the TLS
    /// server name.
    pub host: Option<String>,
    /// `--resolve` entries.
    pub resolve: Vec<Resolve>,
    /// Skip TLS certificate verification.
    pub insecure: bool,
    /// The TLS server name to send instead of the url's host (`--sni`): a gateway reached at
    /// an address whose certificate names another host.
    #[serde(default)]
    pub sni: Option<String>,
    /// Trust the CA certificates in this PEM file instead of the built-in web roots.
    pub cacert: Option<PathBuf>,
    /// No complete response within this long counts as a timeout (also the connect timeout).
    pub timeout: Duration,
    /// Keep one [`model::RequestRecord`] per attempt (24 bytes each).
    pub record_requests: bool,
    /// Write per-second histograms to this file in the HdrHistogram interval-log format.
    pub hdr_log: Option<PathBuf>,
    /// When the run begins, measured from [`crate::Control::origin`]; `None` starts it at once.
    /// Distributed agents share one origin and start at phase offsets from it, so that their
    /// open-loop schedules interleave evenly.
    pub start_at: Option<Duration>,
    /// Called once per completed second with that second's row and serialized histograms (an
    /// agent streams them to its coordinator, so a lost agent's seconds still merge exactly).
    /// A callback of this process: never sent to an agent (each agent sets its own).
    #[serde(skip)]
    pub on_second_hdr: Option<SecondHdrSink>,
    /// The load's name in reports.
    pub name: String,
    /// Closed loop only: how long a connection waits before reconnecting after a failed
    /// connect, so a refused port is counted without spinning a core. Zero is wrk's behaviour.
    pub reconnect_backoff: Duration,
    /// The kernel interface for the sockets.
    pub io: IoMode,
    /// Speak HTTP/2: negotiated by ALPN over TLS (`https`), with prior knowledge (h2c) over
    /// cleartext.
    pub http2: bool,
    /// HTTP/2: concurrent streams on each connection (h2load's `-m`); 1 for HTTP/1.1.
    pub streams: u32,
    /// Send a request once more, on a new connection, when the server closed the reused
    /// keep-alive connection it went out on before any byte of an answer: the race of an idle
    /// close (a proxy's graceful stop or keep-alive timeout), which Go's net/http retries for
    /// requests safe to repeat. Counted apart as `retried`; off by default, so the race shows
    /// as `read_idle_closed` errors. HTTP/1.1, and GET, HEAD, OPTIONS or TRACE without a body.
    pub retry_idle_closed: bool,
}

impl Config {
    /// A closed-loop config for `url` with wrk's defaults: 10 connections, one thread per core,
    /// 10 s, GET, 2 s timeout.
    pub fn new(url: &str) -> Result<Config, Error> {
        Url::parse(url)?;
        let cores = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        Ok(Config {
            url: url.to_string(),
            connections: 10,
            threads: cores,
            duration: Some(Duration::from_secs(10)),
            requests: None,
            rate: None,
            arrivals: Arrivals::Even,
            seed: 1,
            send_window: DEFAULT_SEND_WINDOW,
            method: "GET".to_string(),
            headers: Vec::new(),
            body: None,
            host: None,
            resolve: Vec::new(),
            insecure: false,
            sni: None,
            cacert: None,
            timeout: Duration::from_secs(2),
            record_requests: false,
            hdr_log: None,
            start_at: None,
            on_second_hdr: None,
            name: "load".to_string(),
            reconnect_backoff: Duration::from_millis(10),
            io: IoMode::Auto,
            http2: false,
            streams: 1,
            retry_idle_closed: false,
        })
    }

    /// Adds a header given as `Name: value` (curl's and wrk's `-H` syntax).
    pub fn add_header_line(&mut self, line: &str) -> Result<(), Error> {
        let (name, value) = parse_header_line(line)?;
        self.headers.push((name, value));
        Ok(())
    }

    /// Checks the values that must be positive or consistent; called by [`crate::run`].
    pub fn validate(&self) -> Result<(), Error> {
        let inv = |m: &str| Err(Error::Invalid(m.to_string()));
        if self.connections == 0 {
            return inv("connections must be at least 1");
        }
        if self.threads == 0 {
            return inv("threads must be at least 1");
        }
        if self.duration.is_none() && self.requests.is_none() {
            return inv("give a duration or a number of requests");
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return inv("duration must be positive");
        }
        if self.requests == Some(0) {
            return inv("requests must be at least 1");
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return inv("rate must be a positive number");
            }
            if r > 1e8 {
                return inv("rate must be at most 100000000 per second");
            }
        }
        if self.send_window > Duration::from_millis(100) {
            return inv("the send window must be at most 100ms");
        }
        if self.streams == 0 {
            return inv("streams per connection must be at least 1");
        }
        if self.streams > 1 && !self.http2 {
            return inv("concurrent streams (-m) need HTTP/2 (--http2)");
        }
        if self.streams > 65_536 {
            return inv("streams per connection must be at most 65536");
        }
        if self.http2 && self.io == IoMode::Uring {
            return inv("HTTP/2 runs on epoll; io_uring drives HTTP/1.1 only");
        }
        if self.timeout.is_zero() {
            return inv("timeout must be positive");
        }
        if self.method.is_empty() || !self.method.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(Error::Invalid(format!(
                "method '{}' must be upper-case letters",
                self.method
            )));
        }
        for (n, v) in &self.headers {
            check_header(n, v)?;
        }
        if let Some(h) = &self.host {
            if h.is_empty() || h.bytes().any(|b| b <= b' ' || b == 0x7f) {
                return Err(Error::Invalid(format!("bad host override '{h}'")));
            }
        }
        if self.retry_idle_closed {
            if self.http2 {
                return inv("retrying idle-closed requests is for HTTP/1.1; HTTP/2 counts the streams a GOAWAY refused instead");
            }
            if !replayable(&self.method) || self.body.is_some() {
                return Err(Error::Invalid(format!(
                    "retrying idle-closed requests sends them twice, which only GET, HEAD, OPTIONS and TRACE without a body are safe for; this load sends {}{}",
                    self.method,
                    if self.body.is_some() { " with a body" } else { "" }
                )));
            }
        }
        Ok(())
    }
}

/// Whether a request with `method` (and no body) is safe to send twice, so that
/// [`Config::retry_idle_closed`] may resend it (defined in the model, which the scenario
/// language shares with the engine).
pub use model::schedule::replayable;

/// Splits `Name: value`, checking the name is an HTTP token and the value has no line breaks.
pub fn parse_header_line(line: &str) -> Result<(String, String), Error> {
    let (name, value) = line
        .split_once(':')
        .ok_or_else(|| Error::Header(line.to_string(), "expected 'Name: value'".to_string()))?;
    let (name, value) = (name.trim().to_string(), value.trim().to_string());
    check_header(&name, &value)?;
    Ok((name, value))
}

fn check_header(name: &str, value: &str) -> Result<(), Error> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(Error::Header(
            format!("{name}: {value}"),
            "the name must be a token (letters, digits, -)".to_string(),
        ));
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(Error::Header(
            format!("{name}: {value}"),
            "the value must not contain line breaks".to_string(),
        ));
    }
    Ok(())
}

/// Where a URL's host:port connects, after `--resolve` entries and DNS.
pub(crate) fn resolve_addr(url: &Url, entries: &[Resolve]) -> Result<SocketAddr, Error> {
    if let Ok(ip) = url.host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, url.port));
    }
    let host = url.host.to_ascii_lowercase();
    if let Some(r) = entries
        .iter()
        .find(|r| r.host == host && r.port == url.port)
    {
        return Ok(SocketAddr::new(r.addr, url.port));
    }
    use std::net::ToSocketAddrs;
    let mut addrs = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| Error::Resolve(url.host.clone(), e.to_string()))?;
    addrs
        .next()
        .ok_or_else(|| Error::Resolve(url.host.clone(), "no addresses".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_entries() {
        let r = Resolve::parse("cafe.example.com:8443:127.0.0.1").unwrap();
        assert_eq!(r.port, 8443);
        assert_eq!(r.addr, "127.0.0.1".parse::<IpAddr>().unwrap());
        let r = Resolve::parse("h:80:[::1]").unwrap();
        assert_eq!(r.addr, "::1".parse::<IpAddr>().unwrap());
        assert!(Resolve::parse("h:80").is_err());
        assert!(Resolve::parse("h:0:127.0.0.1").is_err());
        assert!(Resolve::parse("h:80:localhost").is_err());
        let url = Url::parse("https://Cafe.Example.com:8443/tea").unwrap();
        let a = resolve_addr(
            &url,
            &[Resolve::parse("cafe.example.com:8443:127.0.0.2").unwrap()],
        );
        assert_eq!(a.unwrap(), "127.0.0.2:8443".parse().unwrap());
    }

    #[test]
    fn headers_and_validation() {
        let mut c = Config::new("http://127.0.0.1:1/").unwrap();
        c.add_header_line("X-A:  b c ").unwrap();
        assert_eq!(c.headers, vec![("X-A".to_string(), "b c".to_string())]);
        assert!(c.add_header_line("no colon").is_err());
        assert!(c.add_header_line("bad name: x").is_err());
        assert!(c.validate().is_ok());
        c.connections = 0;
        assert!(c.validate().is_err());
        c.connections = 1;
        c.rate = Some(-1.0);
        assert!(c.validate().is_err());
        c.rate = None;
        c.method = "get".into();
        assert!(c.validate().is_err());
    }

    #[test]
    fn only_requests_safe_to_send_twice_may_be_retried() {
        let mut c = Config::new("http://127.0.0.1:1/").unwrap();
        c.retry_idle_closed = true;
        for m in ["GET", "HEAD", "OPTIONS", "TRACE"] {
            c.method = m.into();
            assert!(c.validate().is_ok(), "{m}");
        }
        c.method = "POST".into();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("only GET, HEAD, OPTIONS and TRACE"), "{e}");
        c.method = "GET".into();
        c.body = Some(b"x".to_vec());
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sends GET with a body"));
        c.body = None;
        c.http2 = true;
        assert!(c.validate().unwrap_err().to_string().contains("HTTP/1.1"));
    }
}
