//! What a load of long-lived connections is asked to do, checked before it starts.

use crate::config::{Config, Error, Resolve};
use model::stream::{Reconnect, StreamProtocol};
use std::path::PathBuf;
use std::time::Duration;

/// The smallest WebSocket message: it carries its sequence number and its send time (8 bytes
/// each), so that its echo can be timed.
pub const WS_STAMP: u32 = 16;

/// A load of long-lived connections: WebSocket, gRPC (unary or server-streaming) or SSE.
/// Build with [`StreamConfig::new`], then set fields.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StreamConfig {
    /// Target URL: `ws://` or `wss://` for WebSocket, `http://` or `https://` for gRPC (h2c or
    /// h2 by ALPN) and SSE.
    pub url: String,
    /// The protocol.
    pub protocol: StreamProtocol,
    /// Connections to hold open, across all threads.
    pub connections: u32,
    /// Event-loop threads (capped at `connections`).
    pub threads: u32,
    /// How long to run; `None` runs until stopped.
    pub duration: Option<Duration>,
    /// The connections open evenly over this time (zero: all at once).
    pub ramp: Duration,
    /// Messages each connection sends per second (WebSocket messages, gRPC unary calls); zero
    /// sends none (idle connections, or SSE and gRPC streams, where the server talks).
    pub rate: f64,
    /// Payload bytes of each message sent.
    pub size: u32,
    /// The connect and handshake timeout; for gRPC unary also each call's.
    pub timeout: Duration,
    /// End a connection that received nothing for this long (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// WebSocket: send a ping this often (`None`: never; the server's pings are answered
    /// whatever this says).
    pub ping: Option<Duration>,
    /// gRPC: the deadline each call carries in `grpc-timeout` (`None`: none).
    pub deadline: Option<Duration>,
    /// gRPC: the method's path.
    pub grpc_path: Option<String>,
    /// What a slot does when its connection ends before the run does.
    pub reconnect: Reconnect,
    /// The first wait of [`Reconnect::Backoff`].
    pub backoff: Duration,
    /// The longest wait of [`Reconnect::Backoff`].
    pub backoff_max: Duration,
    /// Extra request headers, in order.
    pub headers: Vec<(String, String)>,
    /// Host header (also the TLS name when the URL's host is an IP address).
    pub host: Option<String>,
    /// `--resolve` entries.
    pub resolve: Vec<Resolve>,
    /// Skip TLS certificate verification.
    pub insecure: bool,
    /// The TLS server name to send instead of the URL's host.
    pub sni: Option<String>,
    /// Trust the certificates in this PEM file.
    pub cacert: Option<PathBuf>,
    /// Keep every connection's life ([`model::stream::ConnLife`]).
    pub lives: bool,
    /// The load's name in reports.
    pub name: String,
}

/// The gRPC method a unary load calls unless told otherwise (the backend's unary method).
pub const GRPC_UNARY_PATH: &str = "/proxybench.Bench/Unary";
/// The gRPC method a streaming load calls unless told otherwise (the backend's
/// server-streaming method).
pub const GRPC_STREAM_PATH: &str = "/proxybench.Bench/Stream";

impl StreamConfig {
    /// A load of `protocol` against `url`: 10 connections opened at once, one thread per core
    /// (at most the connections), 10 s, one message a second of 64 bytes for WebSocket and
    /// gRPC unary (none for the streaming protocols), 2 s timeout, reconnects with a backoff
    /// from 100 ms to 5 s.
    pub fn new(url: &str, protocol: StreamProtocol) -> Result<StreamConfig, Error> {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        let c = StreamConfig {
            url: url.to_string(),
            protocol,
            connections: 10,
            threads: cores,
            duration: Some(Duration::from_secs(10)),
            ramp: Duration::ZERO,
            rate: match protocol {
                StreamProtocol::WebSocket | StreamProtocol::GrpcUnary => 1.0,
                StreamProtocol::GrpcStream | StreamProtocol::Sse => 0.0,
            },
            size: 64,
            timeout: Duration::from_secs(2),
            idle_timeout: None,
            ping: None,
            deadline: None,
            grpc_path: None,
            reconnect: Reconnect::Backoff,
            backoff: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            headers: Vec::new(),
            host: None,
            resolve: Vec::new(),
            insecure: false,
            sni: None,
            cacert: None,
            lives: true,
            name: "load".to_string(),
        };
        c.http_view()?;
        Ok(c)
    }

    /// The URL with its scheme as the HTTP engine spells it (`ws` is `http`, `wss` is
    /// `https`), so that the target, its resolution and TLS are set up as for any load.
    pub(crate) fn http_url(&self) -> Result<String, Error> {
        let bad = |why: &str| Error::Url(self.url.clone(), why.to_string());
        let (scheme, rest) = self
            .url
            .split_once("://")
            .ok_or_else(|| bad("expected SCHEME://host[:port]/path"))?;
        let scheme = scheme.to_ascii_lowercase();
        let http = match (self.protocol, scheme.as_str()) {
            (StreamProtocol::WebSocket, "ws") => "http",
            (StreamProtocol::WebSocket, "wss") => "https",
            (StreamProtocol::WebSocket, _) => {
                return Err(bad("a WebSocket load needs a ws:// or wss:// URL"))
            }
            (_, "http") => "http",
            (_, "https") => "https",
            (p, _) => {
                return Err(bad(&format!(
                    "a {} load needs an http:// or https:// URL",
                    p.name()
                )))
            }
        };
        Ok(format!("{http}://{rest}"))
    }

    /// The same load as the HTTP engine's config: what the target, `--resolve` and TLS
    /// (ALPN h2 for gRPC) are built from.
    pub(crate) fn http_view(&self) -> Result<Config, Error> {
        let mut c = Config::new(&self.http_url()?)?;
        c.connections = self.connections.max(1);
        c.headers = self.headers.clone();
        c.host = self.host.clone();
        c.resolve = self.resolve.clone();
        c.insecure = self.insecure;
        c.sni = self.sni.clone();
        c.cacert = self.cacert.clone();
        c.timeout = self.timeout;
        c.http2 = self.protocol.is_grpc();
        c.name = self.name.clone();
        Ok(c)
    }

    /// Checks what must be positive or consistent; called by [`crate::run_streams`].
    pub fn validate(&self) -> Result<(), Error> {
        let inv = |m: &str| Err(Error::Invalid(m.to_string()));
        if self.connections == 0 {
            return inv("connections must be at least 1");
        }
        if self.threads == 0 {
            return inv("threads must be at least 1");
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return inv("duration must be positive");
        }
        if !(self.rate.is_finite() && self.rate >= 0.0) {
            return inv("the message rate must be a number of messages per second, 0 or more");
        }
        if self.rate > 100_000.0 {
            return inv("the message rate must be at most 100000 per second per connection");
        }
        if self.rate > 0.0
            && matches!(
                self.protocol,
                StreamProtocol::Sse | StreamProtocol::GrpcStream
            )
        {
            return Err(Error::Invalid(format!(
                "a {} load only listens: the server sets the message rate (the backend's push= profile key); leave --message-rate unset",
                self.protocol.name()
            )));
        }
        if self.protocol == StreamProtocol::WebSocket && self.size < WS_STAMP {
            return Err(Error::Invalid(format!(
                "a WebSocket message carries a {WS_STAMP}-byte stamp to time its echo: the size must be at least {WS_STAMP} bytes"
            )));
        }
        if self.size > 16 << 20 {
            return inv("the message size must be at most 16 MiB");
        }
        if self.timeout.is_zero() {
            return inv("timeout must be positive");
        }
        if self.idle_timeout.is_some_and(|d| d.is_zero()) {
            return inv("the idle timeout must be positive");
        }
        if self.ping.is_some_and(|d| d.is_zero()) {
            return inv("the ping interval must be positive");
        }
        if self.ping.is_some() && self.protocol != StreamProtocol::WebSocket {
            return inv("pings are WebSocket's; this load is not one");
        }
        if self.deadline.is_some() && !self.protocol.is_grpc() {
            return inv("a deadline (grpc-timeout) is for gRPC loads");
        }
        if self.deadline.is_some_and(|d| d.is_zero()) {
            return inv("the gRPC deadline must be positive");
        }
        if let Some(p) = &self.grpc_path {
            if !self.protocol.is_grpc() {
                return inv("a gRPC method path is for gRPC loads");
            }
            if !p.starts_with('/') || p.bytes().any(|b| b <= b' ' || b == 0x7f) {
                return Err(Error::Invalid(format!(
                    "the gRPC method path '{p}' must start with '/' and hold no spaces"
                )));
            }
        }
        if self.backoff.is_zero() || self.backoff_max < self.backoff {
            return inv(
                "the reconnect backoff must be positive, and its maximum at least its start",
            );
        }
        self.http_view()?.validate()
    }

    /// The gRPC method path the load calls.
    pub fn method_path(&self) -> &str {
        match (&self.grpc_path, self.protocol) {
            (Some(p), _) => p,
            (None, StreamProtocol::GrpcStream) => GRPC_STREAM_PATH,
            (None, _) => GRPC_UNARY_PATH,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_the_protocol() {
        let c = StreamConfig::new("ws://127.0.0.1:9/chat", StreamProtocol::WebSocket).unwrap();
        assert_eq!(c.http_url().unwrap(), "http://127.0.0.1:9/chat");
        assert!(c.validate().is_ok());
        let c = StreamConfig::new("WSS://h:9/", StreamProtocol::WebSocket).unwrap();
        assert_eq!(c.http_url().unwrap(), "https://h:9/");
        let e = StreamConfig::new("http://h/", StreamProtocol::WebSocket).unwrap_err();
        assert!(e.to_string().contains("ws:// or wss://"), "{e}");
        let e = StreamConfig::new("ws://h/", StreamProtocol::Sse).unwrap_err();
        assert!(e.to_string().contains("http:// or https://"), "{e}");
        let c = StreamConfig::new("https://h/", StreamProtocol::GrpcUnary).unwrap();
        assert!(c.http_view().unwrap().http2);
        assert_eq!(c.method_path(), GRPC_UNARY_PATH);
    }

    #[test]
    fn bad_values_are_refused_with_a_reason() {
        let base = StreamConfig::new("ws://127.0.0.1:9/", StreamProtocol::WebSocket).unwrap();
        let check = |f: &dyn Fn(&mut StreamConfig), want: &str| {
            let mut c = base.clone();
            f(&mut c);
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(want), "{e} lacks {want}");
        };
        check(&|c| c.connections = 0, "connections");
        check(&|c| c.size = 8, "16-byte stamp");
        check(&|c| c.rate = -1.0, "message rate");
        check(&|c| c.deadline = Some(Duration::from_secs(1)), "gRPC");
        check(&|c| c.backoff_max = Duration::from_millis(1), "backoff");
        let mut sse = StreamConfig::new("http://127.0.0.1:9/", StreamProtocol::Sse).unwrap();
        sse.rate = 5.0;
        assert!(sse.validate().unwrap_err().to_string().contains("push="));
        sse.rate = 0.0;
        sse.ping = Some(Duration::from_secs(1));
        assert!(sse.validate().is_err());
    }
}
