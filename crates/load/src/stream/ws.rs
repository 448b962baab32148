//! A WebSocket client connection (RFC 6455) in the stream worker: the upgrade request and its
//! answer (parsed here, so that a refusal is counted by its status), then tungstenite's
//! [`WebSocketContext`] for the frames: client masking, ping and pong, fragments, the close
//! handshake. The context holds no socket, so the worker's own non-blocking transport is handed
//! to each call. Every data message the client sends carries its sequence number and send time
//! (16 bytes, little-endian) at its start, so the echo's round trip is timed from the echo
//! alone; text messages the server sends on its own are counted as pushes.

use super::io::Transport;
use super::record::Rec;
use super::{Shared, Step};
use model::stream::EndKind;
use std::io::{self, Write};
use tungstenite::error::{Error as WsError, ProtocolError};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::frame::CloseFrame;
use tungstenite::protocol::{Role, WebSocketConfig, WebSocketContext};
use tungstenite::Message;

/// The close code the client ends its connections with at the run's end (1000, normal).
pub const CLIENT_CLOSE: u16 = 1000;

/// One WebSocket connection.
pub(super) struct Ws {
    /// The upgrade request (and what of it is sent).
    out: Vec<u8>,
    out_pos: usize,
    /// The answer's bytes until its head is whole.
    head: Vec<u8>,
    /// The `Sec-WebSocket-Accept` the server must answer.
    accept: String,
    /// The session once upgraded.
    ctx: Option<WebSocketContext>,
    /// Data messages sent and echoed on this connection.
    seq: u64,
    echoed: u64,
    /// When the server's last push arrived (0: none yet), for the gaps between them.
    last_push: u64,
    /// We sent the close frame (the run is ending).
    closing: bool,
    /// Output waits for the socket.
    pending: bool,
    /// The frame layer's settings.
    cfg: WebSocketConfig,
}

/// What the upgrade's answer said, as far as the handshake cares.
#[derive(Default)]
struct Answer {
    upgrade: bool,
    connection_upgrade: bool,
    accept: Option<Vec<u8>>,
}

impl http1::Sink for Answer {
    fn header(&mut self, name: &[u8], value: &[u8]) {
        if name.eq_ignore_ascii_case(b"upgrade") {
            self.upgrade = value.eq_ignore_ascii_case(b"websocket");
        } else if name.eq_ignore_ascii_case(b"connection") {
            self.connection_upgrade |= value
                .split(|&b| b == b',')
                .any(|t| http1::head::trim(t).eq_ignore_ascii_case(b"upgrade"));
        } else if name.eq_ignore_ascii_case(b"sec-websocket-accept") {
            self.accept = Some(value.to_vec());
        }
    }
}

/// The frame layer's settings: messages written at once (no write buffering), and a read
/// buffer sized to the messages, so an idle connection holds little.
pub(super) fn config(size: u32) -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size((size as usize + 14).clamp(256, 16 * 1024))
        .write_buffer_size(0)
}

impl Ws {
    /// A connection about to send its upgrade request (with a fresh key) to `sh`'s target.
    pub(super) fn new(sh: &Shared) -> Ws {
        let key = tungstenite::handshake::client::generate_key();
        let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
        let mut out = Vec::with_capacity(sh.head_template.len() + 64);
        out.extend_from_slice(&sh.head_template);
        let _ = write!(
            out,
            "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        Ws {
            out,
            out_pos: 0,
            head: Vec::new(),
            accept,
            ctx: None,
            seq: 0,
            echoed: 0,
            last_push: 0,
            closing: false,
            pending: false,
            cfg: sh.ws_config,
        }
    }

    /// Messages sent and not yet echoed.
    pub(super) fn in_flight(&self) -> u64 {
        self.seq - self.echoed
    }

    /// Writes what is waiting: the upgrade request, or the session's queued frames.
    pub(super) fn flush(&mut self, io: &mut Transport) -> Step {
        match &mut self.ctx {
            None => {
                while self.out_pos < self.out.len() {
                    match io.write(&self.out[self.out_pos..]) {
                        Ok(n) => self.out_pos += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Continue,
                        Err(e) => return end_io(e),
                    }
                }
                match io.flush() {
                    Ok(()) => Step::Continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Step::Continue,
                    Err(e) => end_io(e),
                }
            }
            Some(ctx) => match ctx.flush(io) {
                Ok(()) => {
                    self.pending = false;
                    Step::Continue
                }
                Err(e) => self.failed(e),
            },
        }
    }

    /// Reads what arrived: the upgrade's answer, then messages, until the socket is drained.
    /// `Step::Opened` when the upgrade completed (call again: messages may have come with it).
    pub(super) fn readable(
        &mut self,
        io: &mut Transport,
        now: u64,
        rec: &mut Rec,
        buf: &mut [u8],
    ) -> Step {
        if self.ctx.is_none() {
            return self.answer(io, buf);
        }
        let mut answered_ping = false;
        let step = loop {
            let Some(ctx) = self.ctx.as_mut() else {
                break Step::Continue;
            };
            match ctx.read(io) {
                Ok(Message::Binary(b)) => {
                    rec.received(now, b.len());
                    if let Some(t) = stamp(&b)
                        .filter(|&(seq, t)| seq < self.seq && t <= now)
                        .map(|(_, t)| t)
                    {
                        self.echoed += 1;
                        rec.echo(now, t);
                    } else {
                        self.push(now, rec);
                    }
                }
                Ok(Message::Text(t)) => {
                    rec.received(now, t.len());
                    self.push(now, rec);
                }
                Ok(Message::Ping(_)) => {
                    rec.msgs.server_pings += 1;
                    answered_ping = true;
                }
                Ok(Message::Pong(_)) => rec.msgs.pongs += 1,
                Ok(Message::Close(frame)) => {
                    let code = frame.map(|f| u16::from(f.code));
                    // The reply was queued by the context; send it if the socket takes it.
                    let _ = ctx.flush(io);
                    break if self.closing {
                        Step::End(EndKind::Client, None, code)
                    } else {
                        Step::End(
                            EndKind::CloseFrame,
                            Some(format!(
                                "the server sent a close frame ({})",
                                code.map_or("no code".to_string(), |c| c.to_string())
                            )),
                            code,
                        )
                    };
                }
                Ok(Message::Frame(_)) => {}
                Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                    break Step::Continue
                }
                Err(e) => break self.failed(e),
            }
        };
        if answered_ping && matches!(step, Step::Continue) {
            return self.flush(io);
        }
        step
    }

    /// A message the server sent on its own.
    fn push(&mut self, now: u64, rec: &mut Rec) {
        rec.msgs.pushed += 1;
        if self.last_push != 0 {
            rec.gap(now.saturating_sub(self.last_push));
        }
        self.last_push = now;
    }

    /// Reads the upgrade's answer; on 101 with the right accept key the session starts with
    /// the bytes that followed the head.
    fn answer(&mut self, io: &mut Transport, buf: &mut [u8]) -> Step {
        loop {
            match std::io::Read::read(io, buf) {
                Ok(0) => {
                    return Step::End(
                        EndKind::Fin,
                        Some(
                            "the server closed the connection before answering the upgrade".into(),
                        ),
                        None,
                    )
                }
                Ok(n) => self.head.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return end_io(e),
            }
            if self.head.len() > http1::MAX_HEAD {
                break;
            }
        }
        let mut answer = Answer::default();
        let head = match http1::parse_response(&self.head, &mut answer) {
            Ok(Some(h)) => h,
            Ok(None) if self.head.len() > http1::MAX_HEAD => {
                return Step::End(
                    EndKind::Protocol,
                    Some("the upgrade's answer has a head over 64 KiB".into()),
                    None,
                )
            }
            Ok(None) => return Step::Continue,
            Err(m) => {
                return Step::End(
                    EndKind::Protocol,
                    Some(format!("the upgrade's answer is not HTTP/1.1: {m}")),
                    None,
                )
            }
        };
        if head.status != 101 {
            return Step::Refused(
                head.status,
                format!(
                    "the upgrade was answered {} instead of 101 Switching Protocols",
                    head.status
                ),
            );
        }
        if !answer.upgrade || !answer.connection_upgrade {
            return Step::End(
                EndKind::Protocol,
                Some("a 101 without Upgrade: websocket and Connection: upgrade".into()),
                None,
            );
        }
        if answer.accept.as_deref() != Some(self.accept.as_bytes()) {
            return Step::End(
                EndKind::Protocol,
                Some("a 101 whose Sec-WebSocket-Accept does not match the key".into()),
                None,
            );
        }
        let rest = self.head.split_off(head.len);
        self.head = Vec::new();
        self.out = Vec::new();
        self.ctx = Some(WebSocketContext::from_partially_read(
            rest,
            Role::Client,
            Some(self.cfg),
        ));
        Step::Opened
    }

    /// Sends one data message of `size` bytes stamped with its sequence number and `now`.
    pub(super) fn send(&mut self, io: &mut Transport, now: u64, size: u32) -> Step {
        let Some(ctx) = self.ctx.as_mut() else {
            return Step::Continue;
        };
        let mut payload = Vec::with_capacity(size as usize);
        payload.extend_from_slice(&self.seq.to_le_bytes());
        payload.extend_from_slice(&now.to_le_bytes());
        payload.resize(size as usize, b'x');
        self.seq += 1;
        match ctx.write(io, Message::Binary(payload.into())) {
            Ok(()) => Step::Continue,
            Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                self.pending = true;
                Step::Continue
            }
            Err(e) => self.failed(e),
        }
    }

    /// Sends a ping (its payload the send time).
    pub(super) fn ping(&mut self, io: &mut Transport, now: u64) -> Step {
        let Some(ctx) = self.ctx.as_mut() else {
            return Step::Continue;
        };
        match ctx.write(io, Message::Ping(now.to_le_bytes().to_vec().into())) {
            Ok(()) => match ctx.flush(io) {
                Ok(()) => Step::Continue,
                Err(e) => self.failed(e),
            },
            Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                self.pending = true;
                Step::Continue
            }
            Err(e) => self.failed(e),
        }
    }

    /// The run is ending: our close frame (1000) goes out; the connection ends when the
    /// server's answers it (or the worker's close deadline passes). False when there is no
    /// session to close (the worker then just closes the socket).
    pub(super) fn close(&mut self, io: &mut Transport) -> bool {
        let Some(ctx) = self.ctx.as_mut() else {
            return false;
        };
        self.closing = true;
        let frame = CloseFrame {
            code: CloseCode::from(CLIENT_CLOSE),
            reason: "".into(),
        };
        match ctx.close(io, Some(frame)) {
            Ok(()) => true,
            Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => true,
            Err(_) => false,
        }
    }

    /// Output is queued for the socket.
    pub(super) fn wants_write(&self) -> bool {
        self.pending || (self.ctx.is_none() && self.out_pos < self.out.len())
    }

    /// What a failure of the session means for the connection.
    fn failed(&mut self, e: WsError) -> Step {
        match e {
            WsError::ConnectionClosed | WsError::AlreadyClosed => {
                if self.closing {
                    Step::End(EndKind::Client, None, Some(CLIENT_CLOSE))
                } else {
                    Step::End(
                        EndKind::CloseFrame,
                        Some("the server completed a close handshake".into()),
                        None,
                    )
                }
            }
            WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {
                if self.closing {
                    Step::End(EndKind::Client, None, Some(CLIENT_CLOSE))
                } else {
                    Step::End(
                        EndKind::Fin,
                        Some("the server closed the connection without a close frame".into()),
                        None,
                    )
                }
            }
            WsError::Io(e) => end_io(e),
            e => Step::End(
                EndKind::Protocol,
                Some(format!("WebSocket protocol error: {e}")),
                None,
            ),
        }
    }
}

/// The stamp of one of our own messages: its sequence number and send time, when the
/// payload carries them.
fn stamp(b: &[u8]) -> Option<(u64, u64)> {
    let seq = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
    let t = u64::from_le_bytes(b.get(8..16)?.try_into().ok()?);
    Some((seq, t))
}

/// What a socket error means: a reset, or a failure under TLS.
pub(super) fn end_io(e: io::Error) -> Step {
    let kind = EndKind::Reset;
    let msg = match e.kind() {
        io::ErrorKind::ConnectionReset => "the connection was reset".to_string(),
        io::ErrorKind::BrokenPipe => "the connection was closed under a write".to_string(),
        _ => e.to_string(),
    };
    Step::End(kind, Some(msg), None)
}
