//! A blocking one-shot gRPC unary call: how the bench asks whether a gRPC route serves (a
//! GRPCRoute's time to ready at every gateway replica), as a gRPC client would see it. The call
//! goes over h2c with prior knowledge, or over TLS with ALPN `h2`, on a new connection, on the
//! engine's own HTTP/2 client ([`http2::client::ClientConn`] in gRPC mode) and with the load's
//! request ([`crate::stream::grpc_call`]).
//!
//! Its outcome is a gRPC status code: the response's `grpc-status` (in its trailers, or in a
//! Trailers-Only head), or, for a response with no `grpc-status` and an HTTP status other than
//! 200 (a proxy's own 404 or 503), the code gRPC's clients derive from that status
//! ([`model::stream::grpc_code_of_http`]). A route that is not there yet reads as
//! UNIMPLEMENTED (12) through nginx's 404, as it does for any gRPC client.

use super::{connect, handshake, is_timeout, set_deadline, ProbeError};
use crate::config::{Config, Error};
use crate::target::Target;
use http2::client::{ClientConn, Event};
use http2::hpack::RequestHeaders;
use model::ErrorKind;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// gRPC's OK.
pub const OK: u16 = 0;
/// gRPC's UNIMPLEMENTED: no such method, or (from HTTP 404) no route to it.
pub const UNIMPLEMENTED: u16 = 12;
/// gRPC's INTERNAL: what the engine counts for a 200 without `grpc-status`, as here.
const INTERNAL: u16 = 13;

/// What one gRPC call got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcAnswer {
    /// The response's HTTP status.
    pub http_status: u16,
    /// Its `grpc-status`, when it carried one.
    pub grpc_status: Option<u16>,
    /// The call's gRPC code: `grpc_status`, else the code of `http_status`
    /// ([`model::stream::grpc_code_of_http`]; INTERNAL for a 200 without one).
    pub code: u16,
    /// Whole response messages.
    pub messages: u32,
    /// From starting the connect to the end of the response.
    pub elapsed: Duration,
}

/// A prepared gRPC call (address resolved, request encoded, TLS config loaded) for repeated
/// use; each [`GrpcProbe::call`] opens a fresh connection.
pub struct GrpcProbe {
    target: Target,
    tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    timeout: Duration,
    request: Arc<RequestHeaders>,
    body: Arc<[u8]>,
}

impl GrpcProbe {
    /// A unary call to the method at `cfg`'s URL path (`http://` for h2c, `https://` for TLS),
    /// with `cfg`'s Host (as `:authority`), headers, `--resolve`, TLS options and timeout, and
    /// one empty message.
    pub fn new(cfg: &Config) -> Result<GrpcProbe, Error> {
        let mut cfg = cfg.clone();
        cfg.http2 = true;
        cfg.validate()?;
        let target = Target::new(&cfg)?;
        let tls = match &target.server_name {
            Some(name) => Some((
                crate::tls::client_config(&cfg)?,
                crate::tls::server_name(name)?,
            )),
            None => None,
        };
        let authority = cfg.host.clone().unwrap_or_else(|| target.url.authority());
        let (request, body) = crate::stream::grpc_call(
            &authority,
            target.url.tls,
            &target.url.path,
            Some(cfg.timeout),
            &cfg.headers,
            0,
        );
        Ok(GrpcProbe {
            target,
            tls,
            timeout: cfg.timeout,
            request,
            body,
        })
    }

    /// Makes the call on a new connection and reads its whole response, within the timeout.
    /// A response (any HTTP status, any gRPC code) is an answer; a connection that fails, a
    /// stream reset or refused, or no response in time is an error.
    pub fn call(&self) -> Result<GrpcAnswer, ProbeError> {
        let start = Instant::now();
        let deadline = start + self.timeout;
        let tcp = connect(self.target.addr, self.timeout)?;
        let mut conn = ClientConn::new(self.request.clone(), Some(self.body.clone()));
        conn.set_grpc();
        conn.open(0);
        let (http_status, grpc_status, messages) = match &self.tls {
            None => {
                set_deadline(&tcp, deadline)?;
                exchange(tcp, &mut conn, deadline)?
            }
            Some((cfg, name)) => {
                let s = handshake(tcp, cfg, name, deadline)?;
                if s.conn.alpn_protocol() != Some(b"h2") {
                    return Err((
                        ErrorKind::Tls,
                        "the server did not agree to HTTP/2 (ALPN h2), which gRPC needs".into(),
                    ));
                }
                exchange(s, &mut conn, deadline)?
            }
        };
        let code = grpc_status.unwrap_or(if http_status == 200 {
            INTERNAL
        } else {
            model::stream::grpc_code_of_http(http_status)
        });
        Ok(GrpcAnswer {
            http_status,
            grpc_status,
            code,
            messages,
            elapsed: start.elapsed(),
        })
    }
}

/// A stream whose socket takes read and write deadlines.
trait Timed: Read + Write {
    fn set_deadline(&self, deadline: Instant) -> Result<(), ProbeError>;
}

impl Timed for std::net::TcpStream {
    fn set_deadline(&self, deadline: Instant) -> Result<(), ProbeError> {
        set_deadline(self, deadline)
    }
}

impl Timed for rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
    fn set_deadline(&self, deadline: Instant) -> Result<(), ProbeError> {
        set_deadline(&self.sock, deadline)
    }
}

/// Sends what `conn` queued and feeds it what comes back until the call's response ends:
/// (HTTP status, `grpc-status`, messages).
fn exchange<S: Timed>(
    mut s: S,
    conn: &mut ClientConn,
    deadline: Instant,
) -> Result<(u16, Option<u16>, u32), ProbeError> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut grpc_status = None;
    let mut messages = 0;
    loop {
        s.set_deadline(deadline)?;
        if !conn.out.is_empty() {
            s.write_all(&conn.out)
                .and_then(|()| s.flush())
                .map_err(|e| {
                    if is_timeout(&e) {
                        (ErrorKind::Timeout, "call not sent in time".to_string())
                    } else {
                        (ErrorKind::Write, format!("write: {e}"))
                    }
                })?;
            conn.out.clear();
        }
        let n = match s.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_timeout(&e) => {
                return Err((ErrorKind::Timeout, "no complete response in time".into()))
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return Err((ErrorKind::Tls, format!("TLS: {e}")))
            }
            Err(e) => return Err((ErrorKind::ReadReset, format!("read: {e}"))),
        };
        if n == 0 {
            return Err((
                ErrorKind::ReadReset,
                "connection closed before the call's response ended".into(),
            ));
        }
        if let Err(e) = conn.feed(&buf[..n]) {
            return Err((ErrorKind::Malformed, format!("HTTP/2: {e:?}")));
        }
        for e in std::mem::take(&mut conn.events) {
            match e {
                Event::GrpcStatus { code, .. } => grpc_status = Some(code),
                Event::Message { .. } => messages += 1,
                Event::Response { status, .. } => return Ok((status, grpc_status, messages)),
                Event::Reset { code, .. } => {
                    return Err((ErrorKind::ReadReset, format!("stream reset (code {code})")))
                }
                Event::Refused { .. } => {
                    return Err((
                        ErrorKind::ReadReset,
                        "the server's GOAWAY refused the call".into(),
                    ))
                }
                Event::Malformed { reason, .. } => {
                    return Err((ErrorKind::Malformed, reason.to_string()))
                }
                Event::GoAway { .. } | Event::Stalled { .. } | Event::SettingsAcked => {}
            }
        }
    }
}
