//! A blocking one-shot request that reuses the engine's target handling, codec and TLS setup:
//! the bench times reloads with it and polls "time to ready" (until a response carries a new
//! header value). Each fetch opens a fresh connection, so it sees what a new client would.

pub mod grpc;

pub use grpc::{GrpcAnswer, GrpcProbe};

use crate::codec::{Eof, Progress, ResponseParser};
use crate::config::{Config, Error};
use crate::target::Target;
use http1::client::Keep;
use model::ErrorKind;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one probe got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeResponse {
    /// The final status code.
    pub status: u16,
    /// Header lines of the final response (and trailers), in order.
    pub headers: Vec<(String, String)>,
    /// The decoded body.
    pub body: Vec<u8>,
    /// From starting the connect to the end of the response.
    pub elapsed: Duration,
}

impl ProbeResponse {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a probe failed: the kind the engine would count, and a message.
pub type ProbeError = (ErrorKind, String);

/// A prepared probe (address resolved, request serialized, TLS config loaded) for repeated use.
pub struct Probe {
    target: Target,
    tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    timeout: Duration,
}

/// One request with `cfg`'s URL, method, headers, body, `--resolve`, TLS options and timeout.
/// Setup problems (bad URL, unreadable CA file) come back as [`ErrorKind::ConnectOther`].
pub fn fetch(cfg: &Config) -> Result<ProbeResponse, ProbeError> {
    Probe::new(cfg)
        .map_err(|e| (ErrorKind::ConnectOther, e.to_string()))?
        .fetch()
}

impl Probe {
    /// Prepares a probe for `cfg` (which is validated first).
    pub fn new(cfg: &Config) -> Result<Probe, Error> {
        cfg.validate()?;
        let target = Target::new(cfg)?;
        let tls = match &target.server_name {
            Some(name) => Some((
                crate::tls::client_config(cfg)?,
                crate::tls::server_name(name)?,
            )),
            None => None,
        };
        Ok(Probe {
            target,
            tls,
            timeout: cfg.timeout,
        })
    }

    /// Sends the request on a new connection and reads the whole response, within the timeout.
    pub fn fetch(&self) -> Result<ProbeResponse, ProbeError> {
        let start = Instant::now();
        let deadline = start + self.timeout;
        let tcp = connect(self.target.addr, self.timeout)?;
        let mut parser = ResponseParser::new();
        parser.reset(self.target.head);
        let mut sink = Keep::default();
        let status = match &self.tls {
            None => exchange(tcp, &self.target.request, deadline, &mut parser, &mut sink)?,
            Some((cfg, name)) => {
                let stream = handshake(tcp, cfg, name, deadline)?;
                exchange(
                    stream,
                    &self.target.request,
                    deadline,
                    &mut parser,
                    &mut sink,
                )?
            }
        };
        Ok(ProbeResponse {
            status,
            headers: sink.headers,
            body: sink.body,
            elapsed: start.elapsed(),
        })
    }

    /// Fetches every `interval` until `accept` says yes or `within` has passed. Returns the
    /// accepted response and how long the wait took; errors and refusals along the way are
    /// retried, and the last one is returned if time runs out.
    pub fn poll_until(
        &self,
        within: Duration,
        interval: Duration,
        mut accept: impl FnMut(&ProbeResponse) -> bool,
    ) -> Result<(ProbeResponse, Duration), ProbeError> {
        let start = Instant::now();
        loop {
            let last = match self.fetch() {
                Ok(r) if accept(&r) => return Ok((r, start.elapsed())),
                Ok(r) => (
                    ErrorKind::Timeout,
                    format!(
                        "no accepted response within {within:?} (last status {})",
                        r.status
                    ),
                ),
                Err(e) => e,
            };
            if start.elapsed() + interval > within {
                return Err(last);
            }
            std::thread::sleep(interval);
        }
    }
}

/// A new TCP connection to `addr` within `timeout`, Nagle off; a failure as the engine counts it.
fn connect(addr: std::net::SocketAddr, timeout: Duration) -> Result<TcpStream, ProbeError> {
    let tcp = TcpStream::connect_timeout(&addr, timeout).map_err(|e| {
        let kind = match e.kind() {
            io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => ErrorKind::ConnectTimeout,
            _ => ErrorKind::ConnectOther,
        };
        (kind, format!("connect {addr}: {e}"))
    })?;
    let _ = tcp.set_nodelay(true);
    Ok(tcp)
}

/// The TLS handshake on `tcp`, done by `deadline`.
fn handshake(
    mut tcp: TcpStream,
    cfg: &Arc<ClientConfig>,
    name: &ServerName<'static>,
    deadline: Instant,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, ProbeError> {
    let mut conn = rustls::ClientConnection::new(cfg.clone(), name.clone())
        .map_err(|e| (ErrorKind::Tls, e.to_string()))?;
    set_deadline(&tcp, deadline)?;
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).map_err(|e| {
            if is_timeout(&e) {
                (ErrorKind::Tls, "TLS handshake timed out".to_string())
            } else {
                (ErrorKind::Tls, format!("TLS handshake: {e}"))
            }
        })?;
    }
    Ok(rustls::StreamOwned::new(conn, tcp))
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn set_deadline(tcp: &TcpStream, deadline: Instant) -> Result<(), ProbeError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err((
            ErrorKind::Timeout,
            "no complete response in time".to_string(),
        ));
    }
    let _ = tcp.set_read_timeout(Some(left));
    let _ = tcp.set_write_timeout(Some(left));
    Ok(())
}

trait HasTcp {
    fn tcp(&self) -> &TcpStream;
}
impl HasTcp for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}
impl HasTcp for rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    fn tcp(&self) -> &TcpStream {
        &self.sock
    }
}

/// Writes the request and reads until the parser says the response is complete.
fn exchange<S: Read + Write + HasTcp>(
    mut s: S,
    request: &[u8],
    deadline: Instant,
    parser: &mut ResponseParser,
    sink: &mut Keep,
) -> Result<u16, ProbeError> {
    set_deadline(s.tcp(), deadline)?;
    s.write_all(request).and_then(|_| s.flush()).map_err(|e| {
        if is_timeout(&e) {
            (ErrorKind::Timeout, "request not sent in time".to_string())
        } else {
            (ErrorKind::Write, format!("write: {e}"))
        }
    })?;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        set_deadline(s.tcp(), deadline)?;
        let n = match s.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_timeout(&e) => {
                return Err((
                    ErrorKind::Timeout,
                    "no complete response in time".to_string(),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return Err((ErrorKind::Tls, format!("TLS: {e}")))
            }
            Err(e) => return Err((ErrorKind::ReadReset, format!("read: {e}"))),
        };
        if n == 0 {
            return match parser.eof() {
                Eof::Done(r) => Ok(r.status),
                Eof::Empty => Err((
                    ErrorKind::ReadReset,
                    "connection closed before a response".to_string(),
                )),
                Eof::Truncated => Err((ErrorKind::ReadReset, "response cut short".to_string())),
            };
        }
        match parser.feed(&buf[..n], sink) {
            Ok((_, Progress::Done(r))) => return Ok(r.status),
            Ok((_, Progress::More)) => {}
            Err(m) => return Err((ErrorKind::Malformed, m.0.to_string())),
        }
    }
}
