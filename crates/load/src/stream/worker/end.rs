//! How a long-lived connection ends: its end attributed to what caused it and recorded, and
//! every connection closed when the load stops.

use super::*;

impl Worker<'_> {
    /// A connect failed: the life ends as [`EndKind::ConnectFailed`] with its kind.
    pub(super) fn end_connect(&mut self, i: usize, now: u64, kind: ErrorKind, why: String) {
        *self.rec.connect_errors.entry(kind).or_insert(0) += 1;
        self.slots[i].life.error = Some(kind);
        self.end(i, now, EndKind::ConnectFailed, Some(why), None);
    }

    /// Slot `i`'s connection ended as `kind`: recorded once, the socket closed, and the slot
    /// reconnects as the policy says.
    pub(super) fn end(
        &mut self,
        i: usize,
        now: u64,
        kind: EndKind,
        why: Option<String>,
        code: Option<u16>,
    ) {
        let grpc = self.sh.cfg.protocol.is_grpc();
        let s = &mut self.slots[i];
        if matches!(s.phase, Phase::Done | Phase::Waiting(_)) {
            return;
        }
        let in_flight = match &s.proto {
            Proto::Ws(ws) => ws.in_flight(),
            Proto::Grpc(g) => g.in_flight(),
            _ => 0,
        };
        let s = &mut self.slots[i];
        if let Proto::Sse(sse) = &s.proto {
            if let Some(id) = sse.last_id() {
                s.last_event_id = Some(id.to_vec());
            }
        }
        s.io = None;
        s.proto = Proto::None;
        s.gen = s.gen.wrapping_add(1);
        s.next_send = 0;
        s.next_ping = 0;
        s.deadline = 0;
        let was_open = s.life.open_us.is_some();
        s.life.end_us = now / 1000;
        s.life.end = kind;
        s.life.in_flight = in_flight;
        if let Some(c) = code {
            if grpc {
                s.life.grpc_status = Some(c);
            } else {
                s.life.close_code = Some(c);
            }
        }
        if kind == EndKind::Client {
            self.rec.msgs.unanswered_at_end += in_flight;
            if was_open {
                self.rec.open_at_end += 1;
            }
        } else {
            self.rec.msgs.lost += in_flight;
        }
        if let Some(c) = s.life.close_code.filter(|_| kind == EndKind::CloseFrame) {
            *self.rec.close_codes.entry(c).or_insert(0) += 1;
        }
        if let Some(g) = s.life.grpc_status.filter(|_| {
            kind != EndKind::Client && !matches!(self.sh.cfg.protocol, StreamProtocol::GrpcUnary)
        }) {
            *self.rec.grpc_status.entry(g).or_insert(0) += 1;
        }
        if was_open {
            self.sh.open_now.fetch_sub(1, Ordering::Relaxed);
        }
        let dropped = s.life.dropped();
        self.rec.ended(now, kind, was_open, dropped, why);
        // Each thread keeps its share of the bound.
        let bound = model::stream::StreamSummary::LIVES_MAX / self.sh.threads.max(1);
        if self.rec.keep_lives && self.rec.lives.len() < bound {
            s.last_life = Some(self.rec.lives.len());
            self.rec.lives.push(s.life.clone());
        } else {
            s.last_life = None;
            self.rec.lives_left_out += u64::from(self.rec.keep_lives);
        }
        // What the slot does next.
        let stopping = self.closing
            || self.sh.stop.load(Ordering::Relaxed)
            || self.sh.end_ns.is_some_and(|e| now >= e);
        s.phase = if stopping {
            Phase::Done
        } else {
            match self.sh.cfg.reconnect {
                Reconnect::None => Phase::Done,
                Reconnect::Immediate if was_open => Phase::Waiting(now),
                Reconnect::Immediate | Reconnect::Backoff => {
                    let wait = if was_open {
                        self.sh.cfg.backoff.as_nanos() as u64
                    } else {
                        s.backoff
                    };
                    let max = self.sh.cfg.backoff_max.as_nanos() as u64;
                    s.backoff = if was_open {
                        (self.sh.cfg.backoff.as_nanos() as u64 * 2).min(max)
                    } else {
                        (s.backoff * 2).min(max)
                    };
                    Phase::Waiting(now + wait)
                }
            }
        };
        self.rearm(i);
    }

    /// The run is over. At its duration's end, open connections stop sending and wait (up
    /// to the timeout) for the answers to what they have in flight, then close; on a stop they
    /// close at once. The client's close is a close handshake for WebSockets (bounded by the
    /// timeout), RST_STREAM for gRPC calls, the socket's close for SSE. Connections not open
    /// yet are given up.
    pub(super) fn close_all(&mut self, now: u64, stopped: bool) {
        self.closing = true;
        let timeout = self.sh.cfg.timeout.as_nanos() as u64;
        for i in 0..self.slots.len() {
            match self.slots[i].phase {
                Phase::Waiting(_) => self.slots[i].phase = Phase::Done,
                Phase::Done | Phase::Closing | Phase::Draining => {}
                Phase::Connecting | Phase::Tls | Phase::Handshake => {
                    self.end(i, now, EndKind::Client, None, None)
                }
                // A stream load's call is cancelled at the end, not waited for.
                Phase::Open
                    if !stopped
                        && self.sh.cfg.protocol != StreamProtocol::GrpcStream
                        && self.in_flight(i) > 0 =>
                {
                    let s = &mut self.slots[i];
                    s.phase = Phase::Draining;
                    s.deadline = now + timeout;
                    s.next_send = 0;
                    s.next_ping = 0;
                    self.rearm(i);
                }
                Phase::Open => self.client_close(i, now),
            }
        }
    }

    /// The client ends slot `i`'s open connection (the run is over).
    pub(super) fn client_close(&mut self, i: usize, now: u64) {
        let wait = (self.sh.cfg.timeout.as_nanos() as u64).min(CLOSE_WAIT_NS);
        let s = &mut self.slots[i];
        let Some(io) = s.io.as_mut() else {
            return;
        };
        let waits = match &mut s.proto {
            Proto::Ws(ws) => ws.close(io),
            Proto::Grpc(g) => {
                g.close(io);
                false
            }
            _ => false,
        };
        if waits {
            s.phase = Phase::Closing;
            s.deadline = now + wait;
            s.next_send = 0;
            s.next_ping = 0;
            self.rearm(i);
        } else {
            let code = matches!(s.proto, Proto::Ws(_)).then_some(CLIENT_CLOSE);
            self.end(i, now, EndKind::Client, None, code);
        }
    }
}
