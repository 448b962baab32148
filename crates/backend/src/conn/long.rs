//! Long-lived HTTP/1.1 connections: a WebSocket (an upgrade request answered 101, then
//! tungstenite's frame layer in the server role: unmasking, ping and pong, the close
//! handshake) that echoes every data message it receives, and a server-sent event stream (a
//! chunked `text/event-stream` response). Both push messages at the profile's `push` rate
//! (`push_size` bytes, ending after `push_count`), and a WebSocket is pinged every `ping`.
//! Each connection's counts (messages each way, who ended it, with which close code) go to the
//! instance's counters when it ends; a connection cut without a goodbye (a FIN without a close
//! frame, a reset, a kill) is counted as dropped.

use super::{Conn, Cx, Phase, Step};
use crate::counters::{Life, Slot, StreamEnd};
use crate::sys::mono_ns;
use model::stream::{ClosedBy, StreamProtocol};
use std::io::{self, Read, Write};
use tungstenite::error::{Error as WsError, ProtocolError};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::frame::CloseFrame;
use tungstenite::protocol::{Role, WebSocketConfig, WebSocketContext};
use tungstenite::Message;

/// How long a close we started may wait for the client's answer before the socket closes.
const CLOSE_WAIT_NS: u64 = 2_000_000_000;
/// Pushes wait while this much output is unsent (a client that does not read).
const PUSH_BACKLOG: usize = 1 << 20;
/// The most pushes a late timer makes up at once.
const CATCH_UP: u32 = 100;

/// The close code of a drain (1001, going away).
pub(crate) const GOING_AWAY: u16 = 1001;
/// The `grpc-status` that ends gRPC streams on a drain (UNAVAILABLE).
pub(crate) const UNAVAILABLE: u16 = 14;

/// What kind of long-lived connection.
pub(crate) enum Kind {
    /// A WebSocket's session.
    Ws(Box<WebSocketContext>),
    /// An event stream: the next event's id.
    Sse(u64),
}

/// A long-lived connection's state.
pub(crate) struct Long {
    kind: Kind,
    life: Life,
    next_push: u64,
    next_ping: u64,
    pushed: u64,
    /// We started the end: the close code we sent (SSE: 0), and when we give up waiting.
    closing: Option<(u16, u64)>,
    /// The client's close frame's code.
    client_close: Option<u16>,
    /// Its end is counted.
    ended: bool,
}

/// The socket as `Read + Write` for tungstenite, counting what the kernel accepts.
struct Io<'a> {
    sock: &'a mio::net::TcpStream,
    ctr: &'a Slot,
}

impl Read for Io<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self.sock).read(buf)
    }
}

impl Write for Io<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = (&*self.sock).write(buf)?;
        self.ctr.wrote(n);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The frame layer's settings for a server connection: frames written at once.
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0)
}

/// A pushed message's payload: `n` bytes of `x`.
fn payload(n: u64) -> String {
    "x".repeat(n as usize)
}

impl Conn {
    /// Answers a valid upgrade with 101 and becomes a WebSocket; bytes the client sent after
    /// the request are the session's first.
    pub(super) fn start_ws(&mut self, key: &[u8; 24], cx: &mut Cx) {
        let accept = tungstenite::handshake::derive_accept_key(key);
        let head = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nServer: proxybench\r\nX-Backend: {}\r\n\r\n",
            cx.prof.name
        );
        self.wbuf.extend_from_slice(head.as_bytes());
        cx.ctr.started();
        cx.ctr.answered(101);
        let rest = self.rbuf[self.rpos..self.rlen].to_vec();
        self.rpos = 0;
        self.rlen = 0;
        let ctx = WebSocketContext::from_partially_read(rest, Role::Server, Some(ws_config()));
        self.start_long(Kind::Ws(Box::new(ctx)), cx);
    }

    /// Answers an event-stream request with a chunked `text/event-stream` and keeps it open.
    pub(super) fn start_sse(&mut self, cx: &mut Cx) {
        let head = format!(
            "HTTP/1.1 200 OK\r\nServer: proxybench\r\nX-Backend: {}\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\nTransfer-Encoding: chunked\r\n\r\n",
            cx.prof.name
        );
        self.wbuf.extend_from_slice(head.as_bytes());
        cx.ctr.started();
        cx.ctr.answered(200);
        // The request's remaining bytes (there should be none) are discarded.
        self.rpos = self.rlen;
        self.start_long(Kind::Sse(1), cx);
    }

    fn start_long(&mut self, kind: Kind, cx: &mut Cx) {
        let now = mono_ns();
        let ws = matches!(kind, Kind::Ws(_));
        let protocol = if ws {
            StreamProtocol::WebSocket
        } else {
            StreamProtocol::Sse
        };
        let rate = if ws {
            cx.prof.push_ws
        } else {
            cx.prof.push_stream
        };
        let mut long = Long {
            kind,
            life: cx.ctr.stream_opened(protocol, now),
            next_push: 0,
            next_ping: 0,
            pushed: 0,
            closing: None,
            client_close: None,
            ended: false,
        };
        if rate > 0.0 {
            long.next_push = now + (1e9 / rate) as u64;
        }
        if ws && cx.prof.ping_ns > 0 {
            long.next_ping = now + cx.prof.ping_ns;
        }
        self.long = Some(Box::new(long));
        if self.draining || cx.draining {
            self.close_long(GOING_AWAY, cx);
        }
        self.arm_long(cx);
    }

    /// Arms the connection's timer for its next push, ping or close deadline.
    fn arm_long(&mut self, cx: &mut Cx) {
        let Some(l) = &self.long else {
            return;
        };
        let at = [l.next_push, l.next_ping, l.closing.map_or(0, |(_, d)| d)]
            .into_iter()
            .filter(|&t| t != 0)
            .min();
        if let Some(at) = at {
            self.arm(cx, at);
        }
    }

    /// Records the end of the long-lived connection once, `by` whom.
    fn end_long(&mut self, by: ClosedBy, ctr: &Slot) {
        let Some(l) = self.long.as_mut() else {
            return;
        };
        if l.ended {
            return;
        }
        l.ended = true;
        let close_sent = l.closing.map(|(c, _)| c).filter(|&c| c != 0);
        ctr.stream_closed(
            l.life,
            mono_ns(),
            by,
            StreamEnd {
                close_sent,
                close_received: l.client_close,
                grpc_status: None,
            },
        );
    }

    /// The connection is closing while its end was not counted (a kill, a stop): dropped.
    pub(super) fn long_dropped(&mut self, ctr: &Slot) {
        self.end_long(ClosedBy::Dropped, ctr);
    }

    /// Starts the end of a long-lived connection: a close frame with `code` (WebSocket), or
    /// the end of the event stream.
    pub(super) fn close_long(&mut self, code: u16, cx: &mut Cx) {
        let Some(l) = self.long.as_mut() else {
            return;
        };
        if l.closing.is_some() || l.ended {
            return;
        }
        let deadline = mono_ns() + CLOSE_WAIT_NS;
        let sse = match &mut l.kind {
            Kind::Ws(ctx) => {
                l.closing = Some((code, deadline));
                let frame = CloseFrame {
                    code: CloseCode::from(code),
                    reason: "".into(),
                };
                let mut io = Io {
                    sock: &self.sock,
                    ctr: cx.ctr,
                };
                let _ = ctx.close(&mut io, Some(frame));
                false
            }
            Kind::Sse(_) => {
                l.closing = Some((0, deadline));
                http1::chunked::encode_end(&[], &mut self.wbuf);
                true
            }
        };
        if sse {
            self.phase = Phase::Closing;
            self.end_long(ClosedBy::Server, cx.ctr);
        }
        self.arm_long(cx);
    }

    /// The connection's timer: pushes and pings that are due, or a close that waited long
    /// enough.
    pub(super) fn long_timer(&mut self, cx: &mut Cx) -> Step {
        let now = mono_ns();
        let Some((closing, ended)) = self.long.as_ref().map(|l| (l.closing, l.ended)) else {
            return Step::Close;
        };
        if let Some((_, deadline)) = closing {
            if ended && self.phase == Phase::Lingering {
                return Step::Close;
            }
            if !ended && now >= deadline {
                // The client never answered our close: we end it.
                self.end_long(ClosedBy::Server, cx.ctr);
                return Step::Close;
            }
        }
        let mut done = false;
        if let Some(l) = self.long.as_mut() {
            let rate = match l.kind {
                Kind::Ws(_) => cx.prof.push_ws,
                Kind::Sse(_) => cx.prof.push_stream,
            };
            let mut n = 0;
            while l.closing.is_none()
                && l.next_push != 0
                && now >= l.next_push
                && n < CATCH_UP
                && self.wbuf.len() - self.wpos < PUSH_BACKLOG
            {
                n += 1;
                l.next_push += (1e9 / rate) as u64;
                push(l, &self.sock, &mut self.wbuf, cx);
                if cx.prof.push_count > 0 && l.pushed >= cx.prof.push_count {
                    break;
                }
            }
            if l.next_push != 0 && now >= l.next_push {
                l.next_push = now + (1e9 / rate) as u64;
            }
            if l.next_ping != 0 && now >= l.next_ping {
                l.next_ping = now + cx.prof.ping_ns;
                if let (Kind::Ws(ctx), None) = (&mut l.kind, l.closing) {
                    let mut io = Io {
                        sock: &self.sock,
                        ctr: cx.ctr,
                    };
                    match ctx.write(&mut io, Message::Ping(Vec::new().into())) {
                        Ok(()) => cx.ctr.ws_ping(),
                        Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                            cx.ctr.ws_ping()
                        }
                        Err(_) => {}
                    }
                }
            }
            done = cx.prof.push_count > 0 && l.pushed >= cx.prof.push_count && l.closing.is_none();
        }
        if done {
            self.close_long(1000, cx);
        }
        self.arm_long(cx);
        self.run_long(cx)
    }

    /// Reads, echoes and writes until nothing more can happen without the poller or a timer.
    pub(super) fn run_long(&mut self, cx: &mut Cx) -> Step {
        // The 101 or the response head goes first, then the frames or events behind it.
        if self.flush(cx).is_err() {
            self.end_long(ClosedBy::Dropped, cx.ctr);
            return Step::Close;
        }
        if self.wpos < self.wbuf.len() {
            return Step::Keep;
        }
        let Some(l) = self.long.as_mut() else {
            return Step::Close;
        };
        let by = match &mut l.kind {
            Kind::Ws(ctx) => ws_io(
                ctx,
                &mut l.life,
                &mut l.client_close,
                l.closing,
                &self.sock,
                cx.ctr,
            ),
            Kind::Sse(_) => sse_io(&self.sock, self.phase),
        };
        match by {
            None => {
                if self.phase == Phase::Closing && self.wpos == self.wbuf.len() {
                    // The event stream's end is out: the server closes first.
                    let _ = self.sock.shutdown(std::net::Shutdown::Write);
                    self.phase = Phase::Lingering;
                    self.arm(cx, mono_ns() + super::LINGER_NS);
                }
                Step::Keep
            }
            Some(by) => {
                self.end_long(by, cx.ctr);
                Step::Close
            }
        }
    }
}

/// Sends one pushed message: a WebSocket text message, or an SSE event in a chunk.
fn push(l: &mut Long, sock: &mio::net::TcpStream, wbuf: &mut Vec<u8>, cx: &mut Cx) {
    let n = cx.prof.push_size;
    match &mut l.kind {
        Kind::Ws(ctx) => {
            let mut io = Io { sock, ctr: cx.ctr };
            match ctx.write(&mut io, Message::text(payload(n))) {
                Ok(()) => {}
                Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
        Kind::Sse(id) => {
            let mut ev = format!("id: {id}\ndata: ").into_bytes();
            ev.resize(ev.len() + n as usize, b'x');
            ev.extend_from_slice(b"\n\n");
            http1::chunked::encode_chunk(&ev, wbuf);
            *id += 1;
        }
    }
    l.pushed += 1;
    cx.ctr.stream_out(&mut l.life, false);
}

/// A WebSocket's reads (every data message echoed) and writes; who ended it, if it ended.
fn ws_io(
    ctx: &mut WebSocketContext,
    life: &mut Life,
    client_close: &mut Option<u16>,
    closing: Option<(u16, u64)>,
    sock: &mio::net::TcpStream,
    ctr: &Slot,
) -> Option<ClosedBy> {
    let mut io = Io { sock, ctr };
    loop {
        match ctx.read(&mut io) {
            Ok(m @ (Message::Binary(_) | Message::Text(_))) => {
                ctr.stream_in(life);
                match ctx.write(&mut io, m) {
                    Ok(()) => ctr.stream_out(life, true),
                    Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                        ctr.stream_out(life, true)
                    }
                    // Writing after our close frame: the echo is not sent.
                    Err(WsError::Protocol(ProtocolError::SendAfterClosing)) => {}
                    Err(_) => return Some(ClosedBy::Dropped),
                }
            }
            Ok(Message::Pong(_)) => ctr.ws_pong(),
            Ok(Message::Ping(_)) | Ok(Message::Frame(_)) => {}
            Ok(Message::Close(f)) => {
                *client_close = Some(f.map_or(1005, |f| u16::from(f.code)));
            }
            Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(WsError::ConnectionClosed) | Err(WsError::AlreadyClosed) => {
                // The close handshake completed; whoever sent the first close frame ended it.
                return Some(if closing.is_some() {
                    ClosedBy::Server
                } else {
                    ClosedBy::Client
                });
            }
            Err(_) => return Some(ClosedBy::Dropped),
        }
    }
    match ctx.flush(&mut io) {
        Ok(()) => None,
        Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => None,
        Err(WsError::ConnectionClosed) => Some(if closing.is_some() {
            ClosedBy::Server
        } else {
            ClosedBy::Client
        }),
        Err(_) => Some(ClosedBy::Dropped),
    }
}

/// An event stream's reads: anything the client sends is discarded; its FIN ends the stream
/// (the way an EventSource closes), a reset drops it.
fn sse_io(sock: &mio::net::TcpStream, phase: Phase) -> Option<ClosedBy> {
    let mut buf = [0u8; 1024];
    loop {
        match (&*sock).read(&mut buf) {
            Ok(0) => {
                return Some(if phase == Phase::Open {
                    ClosedBy::Client
                } else {
                    ClosedBy::Server
                })
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Some(ClosedBy::Dropped),
        }
    }
}
