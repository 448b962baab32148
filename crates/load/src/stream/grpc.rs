//! A gRPC client connection on the HTTP/2 connection core (`http2::ClientConn` in gRPC mode):
//! unary calls at a set rate, each call's latency timed and its `grpc-status` counted; or one
//! server-streaming call held open, its messages counted and the gaps between them timed. A
//! call's outcome is its trailers' `grpc-status`; without one, what a gRPC client makes of
//! the HTTP answer ([`model::stream::grpc_code_of_http`]), a reset (CANCELLED, or UNAVAILABLE
//! for a refused stream), or DEADLINE_EXCEEDED when the client gave up after the timeout. A
//! server that answers the h2c preface in HTTP/1.x is named as such: it cannot serve gRPC.

use super::io::Transport;
use super::record::Rec;
use super::ws::end_io;
use super::{Shared, Step};
use http2::frame::code;
use http2::{ClientConn, Event};
use model::stream::{grpc_code_of_http, EndKind};
use std::collections::VecDeque;
use std::io::{self, Read, Write};

/// gRPC's DEADLINE_EXCEEDED: a call the client gave up on.
const DEADLINE_EXCEEDED: u16 = 4;
/// UNAVAILABLE: a stream the server refused (never processed).
const UNAVAILABLE: u16 = 14;
/// CANCELLED: a stream the server reset.
const CANCELLED: u16 = 1;
/// INTERNAL: a 200 without `grpc-status`, or a malformed response.
const INTERNAL: u16 = 13;

/// What the first bytes of an HTTP/1.x server's answer to the preface look like.
const HTTP1: &[u8] = b"HTTP/1.";

/// A unary call in flight.
#[derive(Debug, Clone, Copy)]
struct Call {
    tag: u32,
    /// When it was meant to leave (its latency counts from then), ns since the origin.
    due: u64,
    /// The `grpc-status` of its trailers, once they came.
    status: Option<u16>,
}

/// One gRPC connection.
pub(super) struct Grpc {
    codec: ClientConn,
    wpos: usize,
    /// No byte has come from the server yet.
    first: bool,
    /// The server's SETTINGS came: the connection is usable.
    opened: bool,
    /// Unary calls in flight.
    calls: Vec<Call>,
    /// Unary calls due that the server's stream limit holds back: their due times.
    waiting: VecDeque<u64>,
    next_tag: u32,
    /// Server streaming: the call's status from its trailers.
    status: Option<u16>,
    /// When the stream's last message arrived (0: none yet).
    last_msg: u64,
    /// A GOAWAY came.
    goaway: bool,
    unary: bool,
    /// A stream load's call got its whole response.
    answered: bool,
}

impl Grpc {
    /// A connection about to send its preface (and, for a stream load, its one call).
    pub(super) fn new(sh: &Shared, unary: bool) -> Grpc {
        let (req, body) = sh.grpc.clone().expect("a gRPC load has its request");
        let mut codec = ClientConn::new(req, Some(body));
        codec.set_grpc();
        let mut g = Grpc {
            codec,
            wpos: 0,
            first: true,
            opened: false,
            calls: Vec::new(),
            waiting: VecDeque::new(),
            next_tag: 0,
            status: None,
            last_msg: 0,
            goaway: false,
            unary,
            answered: false,
        };
        if !unary {
            g.codec.open(0);
        }
        g
    }

    /// Calls sent and not answered: unary calls in flight, or a stream load's call until its
    /// response ended.
    pub(super) fn in_flight(&self) -> u64 {
        if self.unary {
            self.calls.len() as u64
        } else {
            u64::from(!self.answered)
        }
    }

    /// The earliest time a unary call in flight runs out of `timeout`.
    pub(super) fn next_deadline(&self, timeout: u64) -> Option<u64> {
        self.calls.iter().map(|c| c.due + timeout).min()
    }

    /// Output is queued for the socket.
    pub(super) fn wants_write(&self) -> bool {
        self.wpos < self.codec.out.len()
    }

    /// Writes the codec's frames as far as the socket takes them.
    pub(super) fn flush(&mut self, io: &mut Transport) -> Step {
        let out = &self.codec.out;
        while self.wpos < out.len() {
            match io.write(&out[self.wpos..]) {
                Ok(n) => self.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Continue,
                Err(e) => return end_io(e),
            }
        }
        self.codec.out.clear();
        self.wpos = 0;
        match io.flush() {
            Ok(()) => Step::Continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Step::Continue,
            Err(e) => end_io(e),
        }
    }

    /// A unary call is due at `due`: it leaves now, or waits for a free stream.
    pub(super) fn call(
        &mut self,
        io: &mut Transport,
        due: u64,
        now: u64,
        sh: &Shared,
        rec: &mut Rec,
    ) -> Step {
        self.waiting.push_back(due);
        self.open_waiting(now, sh, rec);
        self.flush(io)
    }

    /// Opens the calls that wait while the server's stream limit allows.
    fn open_waiting(&mut self, now: u64, sh: &Shared, rec: &mut Rec) {
        while !self.waiting.is_empty() && self.codec.can_open() {
            let due = self.waiting.pop_front().expect("checked");
            let tag = self.next_tag;
            self.next_tag = self.next_tag.wrapping_add(1);
            self.codec.open(tag);
            self.calls.push(Call {
                tag,
                due,
                status: None,
            });
            rec.sent(now, sh.cfg.size as usize);
        }
    }

    /// Gives up on the unary calls older than `timeout` (RST_STREAM CANCEL): each ends as
    /// DEADLINE_EXCEEDED.
    pub(super) fn expire(
        &mut self,
        io: &mut Transport,
        now: u64,
        timeout: u64,
        sh: &Shared,
        rec: &mut Rec,
    ) -> Step {
        let mut k = 0;
        let mut any = false;
        while k < self.calls.len() {
            if now >= self.calls[k].due + timeout {
                let c = self.calls.swap_remove(k);
                self.codec.cancel(c.tag);
                rec.msgs.answered += 1;
                *rec.grpc_status.entry(DEADLINE_EXCEEDED).or_insert(0) += 1;
                rec.first.entry(EndKind::Timeout).or_insert((
                    now,
                    "a unary call not answered within the timeout (counted as DEADLINE_EXCEEDED)"
                        .into(),
                ));
                any = true;
            } else {
                k += 1;
            }
        }
        if any {
            self.open_waiting(now, sh, rec);
            return self.flush(io);
        }
        Step::Continue
    }

    /// Reads and handles what arrived until the socket is drained. `Step::Opened` when the
    /// server's SETTINGS made the connection usable (call again).
    pub(super) fn readable(
        &mut self,
        io: &mut Transport,
        now: u64,
        sh: &Shared,
        rec: &mut Rec,
        buf: &mut [u8],
    ) -> Step {
        loop {
            let n = match io.read(buf) {
                Ok(0) => return self.eof(),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return end_io(e),
            };
            let data = &buf[..n];
            if self.first {
                self.first = false;
                let k = data.len().min(HTTP1.len());
                if data[..k] == HTTP1[..k] {
                    return Step::End(
                        EndKind::Protocol,
                        Some("the server answered the HTTP/2 preface in HTTP/1.x: it does not speak HTTP/2 (h2c), which gRPC needs".into()),
                        None,
                    );
                }
            }
            let fed = self.codec.feed(data);
            let step = self.events(now, rec);
            if let Err(e) = fed {
                let _ = self.flush(io);
                return Step::End(
                    EndKind::Protocol,
                    Some(format!("HTTP/2 connection error: {}", e.reason)),
                    None,
                );
            }
            if !matches!(step, Step::Continue) {
                let _ = self.flush(io);
                return step;
            }
            if !self.opened && self.codec.got_settings() {
                self.opened = true;
                let _ = self.flush(io);
                return Step::Opened;
            }
        }
        if self.unary {
            self.open_waiting(now, sh, rec);
            if self.codec.finished() && self.calls.is_empty() {
                let _ = self.flush(io);
                return Step::End(
                    EndKind::GoAway,
                    Some("the server's GOAWAY ended the connection".into()),
                    None,
                );
            }
        }
        self.flush(io)
    }

    /// The server closed the connection.
    fn eof(&self) -> Step {
        let open = if self.unary {
            !self.calls.is_empty()
        } else {
            self.codec.active() > 0
        };
        if self.goaway && !open {
            return Step::End(
                EndKind::GoAway,
                Some("the server's GOAWAY ended the connection".into()),
                None,
            );
        }
        Step::End(
            EndKind::Fin,
            Some(if open {
                "the server closed the connection with calls open".into()
            } else {
                "the server closed the connection".into()
            }),
            None,
        )
    }

    /// Accounts the codec's events; a stream load's call ending ends the connection.
    fn events(&mut self, now: u64, rec: &mut Rec) -> Step {
        let events = std::mem::take(&mut self.codec.events);
        let mut step = Step::Continue;
        for e in &events {
            match *e {
                Event::Message { len, .. } => {
                    rec.received(now, len as usize);
                    rec.msgs.pushed += 1;
                    if !self.unary {
                        if self.last_msg != 0 {
                            rec.gap(now.saturating_sub(self.last_msg));
                        }
                        self.last_msg = now;
                    }
                }
                Event::GrpcStatus { slot, code } => {
                    if self.unary {
                        if let Some(c) = self.calls.iter_mut().find(|c| c.tag == slot) {
                            c.status = Some(code);
                        }
                    } else {
                        self.status = Some(code);
                    }
                }
                Event::Response { slot, status, .. } => {
                    if self.unary {
                        if let Some(k) = self.calls.iter().position(|c| c.tag == slot) {
                            let c = self.calls.swap_remove(k);
                            let g = c.status.unwrap_or(if status == 200 {
                                INTERNAL
                            } else {
                                grpc_code_of_http(status)
                            });
                            *rec.grpc_status.entry(g).or_insert(0) += 1;
                            rec.echo(now, c.due);
                        }
                    } else if matches!(step, Step::Continue) {
                        self.answered = true;
                        rec.msgs.answered += 1;
                        step = match self.status {
                            Some(g) => Step::End(
                                EndKind::GrpcStatus,
                                Some(format!(
                                    "the call ended with grpc-status {g} ({})",
                                    model::stream::grpc_code_name(g)
                                )),
                                Some(g),
                            ),
                            None if status != 200 => Step::Refused(
                                status,
                                format!("the call was answered {status} without a grpc-status"),
                            ),
                            None => Step::End(
                                EndKind::GrpcStatus,
                                Some("the call ended without a grpc-status (INTERNAL)".into()),
                                Some(INTERNAL),
                            ),
                        };
                    }
                }
                Event::Reset { slot, code: c } => {
                    let g = if c == code::REFUSED_STREAM {
                        UNAVAILABLE
                    } else {
                        CANCELLED
                    };
                    let why = format!(
                        "the server reset the stream: {}",
                        http2::frame::code_name(c)
                    );
                    self.stream_failed(slot, g, why, now, rec, &mut step);
                }
                Event::Refused { slot } => {
                    let why = "the stream is above the server's GOAWAY last-stream-id (refused, never processed)".to_string();
                    self.stream_failed(slot, UNAVAILABLE, why, now, rec, &mut step);
                }
                Event::Malformed { slot, reason } => {
                    if self.unary {
                        if let Some(k) = self.calls.iter().position(|c| c.tag == slot) {
                            self.calls.swap_remove(k);
                            rec.msgs.answered += 1;
                            *rec.grpc_status.entry(INTERNAL).or_insert(0) += 1;
                            rec.first
                                .entry(EndKind::Protocol)
                                .or_insert((now, reason.to_string()));
                        }
                    } else if matches!(step, Step::Continue) {
                        step = Step::End(EndKind::Protocol, Some(reason.to_string()), None);
                    }
                }
                Event::GoAway { .. } => self.goaway = true,
                Event::Stalled { .. } | Event::SettingsAcked => {}
            }
        }
        let mut events = events;
        events.clear();
        if self.codec.events.is_empty() {
            self.codec.events = events;
        }
        step
    }

    /// A stream the server reset or refused: a unary call ends with `g`; a stream load's
    /// call ends the connection.
    fn stream_failed(
        &mut self,
        slot: u32,
        g: u16,
        why: String,
        now: u64,
        rec: &mut Rec,
        step: &mut Step,
    ) {
        if self.unary {
            if let Some(k) = self.calls.iter().position(|c| c.tag == slot) {
                self.calls.swap_remove(k);
                rec.msgs.answered += 1;
                *rec.grpc_status.entry(g).or_insert(0) += 1;
                rec.first.entry(EndKind::StreamReset).or_insert((now, why));
            }
        } else if matches!(step, Step::Continue) {
            *step = Step::End(EndKind::StreamReset, Some(why), Some(g));
        }
    }

    /// The run is ending: the calls open are cancelled (RST_STREAM CANCEL) and what is queued
    /// goes out if the socket takes it.
    pub(super) fn close(&mut self, io: &mut Transport) {
        for c in std::mem::take(&mut self.calls) {
            self.codec.cancel(c.tag);
        }
        if !self.unary {
            self.codec.cancel(0);
        }
        let _ = self.flush(io);
    }

    /// Whether the connection may take a unary call now (or queue one for a free stream).
    pub(super) fn usable(&self) -> bool {
        !self.goaway && !self.codec.is_dead()
    }
}
