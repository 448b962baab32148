//! One event-loop thread of a stream load: its share of the connection slots, each opened at
//! its time on the ramp, driven by edge-triggered epoll (the HTTP engine's `sys`), its sends,
//! pings and deadlines on a timer heap, and its end recorded once. A slot whose connection
//! ends reconnects as the policy says. When the run ends (its duration, or a stop), every open
//! connection is closed by the client (a WebSocket close handshake, bounded by the timeout),
//! so no socket outlives the thread.

use super::grpc::Grpc;
use super::io::{Handshake, Transport};
use super::record::Rec;
use super::sse::Sse;
use super::ws::{Ws, CLIENT_CLOSE};
use super::{Shared, Step};
use crate::sys::{self, Epoll, Socket};
use model::stream::{ConnLife, EndKind, Reconnect, StreamProtocol};
use model::ErrorKind;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::atomic::Ordering;

mod end;

/// How often an idle loop looks at the stop flag.
const STOP_POLL_NS: u64 = 50_000_000;
/// The read buffer shared by the thread's connections.
const READ_BUF: usize = 64 * 1024;
/// At the run's end, how long a WebSocket close handshake may take at most (or the timeout,
/// if shorter).
const CLOSE_WAIT_NS: u64 = 1_000_000_000;
/// The most sends a late loop makes up at once on one connection.
const CATCH_UP: u32 = 1000;

/// Where a slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for its time on the ramp, or for its reconnect.
    Waiting(u64),
    /// TCP connect under way.
    Connecting,
    /// TLS handshake under way.
    Tls,
    /// The protocol's handshake (the upgrade, the response head, the server's SETTINGS).
    Handshake,
    /// Open.
    Open,
    /// The run's duration is over: no more sends; the connection waits (up to the timeout)
    /// for the answers to what it has in flight, then closes.
    Draining,
    /// The client's close handshake at the run's end.
    Closing,
    /// Nothing more to do.
    Done,
}

/// The protocol's state of a connection.
enum Proto {
    None,
    Ws(Box<Ws>),
    Sse(Box<Sse>),
    Grpc(Box<Grpc>),
}

/// One connection slot.
struct Slot {
    gen: u32,
    phase: Phase,
    io: Option<Transport>,
    proto: Proto,
    life: ConnLife,
    /// The index in the thread's lives of this slot's previous connection.
    last_life: Option<usize>,
    /// The connect and handshake deadline, or the close handshake's (0: none).
    deadline: u64,
    next_send: u64,
    next_ping: u64,
    last_rx: u64,
    /// The reconnect wait after the next failure.
    backoff: u64,
    /// The timer entry that counts (entries with another sequence are stale).
    timer_seq: u32,
    timer_at: u64,
    /// SSE: the last event id, sent again on a reconnect.
    last_event_id: Option<Vec<u8>>,
    /// Connections started on the slot so far.
    attempts: u32,
}

/// What one thread hands back.
pub(crate) struct ThreadOut {
    pub rec: Rec,
    pub end_ns: u64,
    pub cpu_ns: u64,
}

struct Worker<'a> {
    sh: &'a Shared,
    epoll: Epoll,
    events: Vec<sys::Event>,
    buf: Vec<u8>,
    slots: Vec<Slot>,
    /// The load-wide index of this thread's first slot.
    base: u32,
    timers: BinaryHeap<Reverse<(u64, u32, u32)>>,
    rec: Rec,
    closing: bool,
}

/// Runs thread `id` with slots `first..first + n` of the load.
pub(crate) fn run(sh: &Shared, first: usize, n: usize) -> io::Result<ThreadOut> {
    let total = sh.cfg.connections as u64;
    let ramp = sh.cfg.ramp.as_nanos() as u64;
    let mut w = Worker {
        sh,
        epoll: Epoll::new()?,
        events: sys::events(256.min(n.max(1) * 2)),
        buf: vec![0; READ_BUF],
        slots: Vec::with_capacity(n),
        base: first as u32,
        timers: BinaryHeap::with_capacity(n * 2),
        rec: Rec::new((sh.start_ns / 1_000_000_000) as u32, sh.cfg.lives),
        closing: false,
    };
    for k in 0..n {
        let global = (first + k) as u64;
        let at = sh.start_ns + (ramp as u128 * global as u128 / total.max(1) as u128) as u64;
        w.slots.push(Slot {
            gen: 0,
            phase: Phase::Waiting(at),
            io: None,
            proto: Proto::None,
            life: ConnLife::default(),
            last_life: None,
            deadline: 0,
            next_send: 0,
            next_ping: 0,
            last_rx: 0,
            backoff: sh.cfg.backoff.as_nanos() as u64,
            timer_seq: 0,
            timer_at: 0,
            last_event_id: None,
            attempts: 0,
        });
        w.rearm(k);
    }
    let end_ns = w.main_loop()?;
    let cpu_ns = thread_cpu_ns();
    Ok(ThreadOut {
        rec: w.rec,
        end_ns,
        cpu_ns,
    })
}

/// The CPU time this thread has used, ns.
fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl Worker<'_> {
    fn now(&self) -> u64 {
        self.sh.origin.elapsed().as_nanos() as u64
    }

    fn main_loop(&mut self) -> io::Result<u64> {
        loop {
            let now = self.now();
            let stopped = self.sh.stop.load(Ordering::Relaxed);
            if !self.closing && (stopped || self.sh.end_ns.is_some_and(|e| now >= e)) {
                self.close_all(now, stopped);
            } else if self.closing && stopped {
                // A stop while answers were awaited: close at once.
                for i in 0..self.slots.len() {
                    if self.slots[i].phase == Phase::Draining {
                        self.client_close(i, now);
                    }
                }
            }
            self.fire(now);
            if self.slots.iter().all(|s| s.phase == Phase::Done) {
                return Ok(self.now());
            }
            let mut wake = now + STOP_POLL_NS;
            if let Some(Reverse((at, _, _))) = self.timers.peek() {
                wake = wake.min(*at);
            }
            if !self.closing {
                if let Some(e) = self.sh.end_ns {
                    wake = wake.min(e);
                }
            }
            let n = self
                .epoll
                .wait(&mut self.events, wake.saturating_sub(now))?;
            for k in 0..n {
                let ev = self.events[k];
                let (token, flags) = ({ ev.data }.u64(), { ev.flags }.bits());
                self.event((token & 0xffff_ffff) as usize, (token >> 32) as u32, flags);
            }
        }
    }

    /// Handles every timer that is due.
    fn fire(&mut self, now: u64) {
        while let Some(&Reverse((at, i, seq))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let i = i as usize;
            if self.slots[i].timer_seq != seq {
                continue;
            }
            self.slots[i].timer_at = 0;
            self.on_timer(i, now);
            self.rearm(i);
        }
    }

    /// Puts slot `i`'s earliest deadline on the heap (if it changed).
    fn rearm(&mut self, i: usize) {
        let timeout = self.sh.cfg.timeout.as_nanos() as u64;
        let idle = self.sh.cfg.idle_timeout.map(|d| d.as_nanos() as u64);
        let s = &self.slots[i];
        let mut at = u64::MAX;
        let mut take = |t: u64| {
            if t != 0 {
                at = at.min(t);
            }
        };
        match s.phase {
            Phase::Waiting(t) => take(t.max(1)),
            Phase::Connecting
            | Phase::Tls
            | Phase::Handshake
            | Phase::Closing
            | Phase::Draining => take(s.deadline),
            Phase::Open => {
                take(s.next_send);
                take(s.next_ping);
                if let Some(idle) = idle {
                    take(s.last_rx + idle);
                }
                if let Proto::Grpc(g) = &s.proto {
                    if let Some(t) = g.next_deadline(timeout) {
                        take(t);
                    }
                }
            }
            Phase::Done => {}
        }
        if at == u64::MAX || at == s.timer_at {
            return;
        }
        let s = &mut self.slots[i];
        s.timer_seq = s.timer_seq.wrapping_add(1);
        s.timer_at = at;
        self.timers.push(Reverse((at, i as u32, s.timer_seq)));
    }

    /// Slot `i`'s timer came due.
    fn on_timer(&mut self, i: usize, now: u64) {
        let timeout = self.sh.cfg.timeout.as_nanos() as u64;
        match self.slots[i].phase {
            Phase::Waiting(t) if now >= t && !self.closing => self.start(i, now),
            Phase::Connecting if now >= self.slots[i].deadline => self.end_connect(
                i,
                now,
                ErrorKind::ConnectTimeout,
                "no TCP connection within the timeout".into(),
            ),
            Phase::Tls if now >= self.slots[i].deadline => self.end_connect(
                i,
                now,
                ErrorKind::Tls,
                "TLS handshake not finished within the timeout".into(),
            ),
            Phase::Handshake if now >= self.slots[i].deadline => self.end(
                i,
                now,
                EndKind::Timeout,
                Some("no answer to the handshake within the timeout".into()),
                None,
            ),
            Phase::Closing if now >= self.slots[i].deadline => {
                self.end(i, now, EndKind::Client, None, Some(CLIENT_CLOSE))
            }
            Phase::Draining if now >= self.slots[i].deadline => self.client_close(i, now),
            Phase::Open => self.open_timer(i, now, timeout),
            _ => {}
        }
    }

    /// An open connection's timers: its sends, pings, idle timeout, calls' deadlines.
    fn open_timer(&mut self, i: usize, now: u64, timeout: u64) {
        if let Some(idle) = self.sh.cfg.idle_timeout {
            let idle = idle.as_nanos() as u64;
            if now >= self.slots[i].last_rx + idle {
                self.end(
                    i,
                    now,
                    EndKind::Timeout,
                    Some(format!(
                        "nothing received for {:?}",
                        self.sh.cfg.idle_timeout.unwrap_or_default()
                    )),
                    None,
                );
                return;
            }
        }
        let rate = self.sh.cfg.rate;
        let mut step = Step::Continue;
        let mut sends = 0;
        while rate > 0.0
            && self.slots[i].next_send != 0
            && now >= self.slots[i].next_send
            && sends < CATCH_UP
        {
            let due = self.slots[i].next_send;
            self.slots[i].next_send = due + (1e9 / rate) as u64;
            sends += 1;
            step = self.send(i, due, now);
            if !matches!(step, Step::Continue) {
                break;
            }
        }
        if sends == CATCH_UP && now >= self.slots[i].next_send {
            // The loop fell far behind: the schedule starts again from now.
            self.slots[i].next_send = now + (1e9 / rate) as u64;
        }
        if matches!(step, Step::Continue) {
            if let Some(p) = self.sh.cfg.ping {
                let s = &mut self.slots[i];
                if s.next_ping != 0 && now >= s.next_ping {
                    s.next_ping = now + p.as_nanos() as u64;
                    if let (Proto::Ws(ws), Some(io)) = (&mut s.proto, s.io.as_mut()) {
                        step = ws.ping(io, now);
                        if matches!(step, Step::Continue) {
                            self.rec.msgs.pings_sent += 1;
                        }
                    }
                }
            }
        }
        if matches!(step, Step::Continue) {
            let s = &mut self.slots[i];
            if let (Proto::Grpc(g), Some(io)) = (&mut s.proto, s.io.as_mut()) {
                step = g.expire(io, now, timeout, self.sh, &mut self.rec);
            }
        }
        self.apply(i, now, step);
    }

    /// One message (a unary call) due at `due` leaves on slot `i`.
    fn send(&mut self, i: usize, due: u64, now: u64) -> Step {
        let size = self.sh.cfg.size;
        let s = &mut self.slots[i];
        let Some(io) = s.io.as_mut() else {
            return Step::Continue;
        };
        match &mut s.proto {
            Proto::Ws(ws) => {
                let step = ws.send(io, now, size);
                if matches!(step, Step::Continue) {
                    s.life.sent += 1;
                    self.rec.sent(now, size as usize);
                }
                step
            }
            Proto::Grpc(g) if g.usable() => {
                let before = self.rec.msgs.sent;
                let step = g.call(io, due, now, self.sh, &mut self.rec);
                s.life.sent += self.rec.msgs.sent - before;
                step
            }
            _ => Step::Continue,
        }
    }

    /// Starts slot `i`'s next connection.
    fn start(&mut self, i: usize, now: u64) {
        let timeout = self.sh.cfg.timeout.as_nanos() as u64;
        self.rec.attempts += 1;
        let s = &mut self.slots[i];
        let attempt = s.attempts;
        s.attempts += 1;
        if attempt > 0 {
            self.rec.reconnects += 1;
            if let Some(l) = s.last_life.and_then(|k| self.rec.lives.get_mut(k)) {
                l.next_us = Some(now / 1000);
            }
        }
        s.life = ConnLife {
            conn: self.base + i as u32,
            attempt,
            start_us: now / 1000,
            ..ConnLife::default()
        };
        s.deadline = now + timeout;
        s.gen = s.gen.wrapping_add(1);
        match Socket::connect(&self.sh.addr) {
            Ok((sock, established)) => {
                let token = ((s.gen as u64) << 32) | i as u64;
                if let Err(e) = self.epoll.add(&sock, token) {
                    self.end_connect(
                        i,
                        now,
                        crate::worker::connect_kind(&e),
                        format!("cannot watch the socket: {e}"),
                    );
                    return;
                }
                let s = &mut self.slots[i];
                s.io = Some(Transport::plain(sock));
                s.phase = Phase::Connecting;
                if established {
                    self.connected(i, now);
                }
            }
            Err(e) => self.end_connect(
                i,
                now,
                crate::worker::connect_kind(&e),
                format!("connect to {}: {e}", self.sh.addr),
            ),
        }
    }

    /// The TCP connection is up: TLS, or the protocol's handshake.
    fn connected(&mut self, i: usize, now: u64) {
        match &self.sh.tls {
            Some((cfg, name)) => match rustls::ClientConnection::new(cfg.clone(), name.clone()) {
                Ok(tls) => {
                    let s = &mut self.slots[i];
                    if let Some(io) = s.io.as_mut() {
                        io.tls = Some(Box::new(tls));
                    }
                    s.phase = Phase::Tls;
                    self.tls_step(i, now);
                }
                Err(e) => self.end_connect(i, now, ErrorKind::Tls, e.to_string()),
            },
            None => self.begin(i, now),
        }
    }

    /// Drives slot `i`'s TLS handshake.
    fn tls_step(&mut self, i: usize, now: u64) {
        let Some(io) = self.slots[i].io.as_mut() else {
            return;
        };
        match io.handshake() {
            Handshake::Done => {
                if self.sh.cfg.protocol.is_grpc() && io.alpn() != Some(b"h2") {
                    self.end(
                        i,
                        now,
                        EndKind::Protocol,
                        Some("the server did not offer h2 in ALPN: it does not speak HTTP/2, which gRPC needs".into()),
                        None,
                    );
                    return;
                }
                self.begin(i, now);
            }
            Handshake::Again => {}
            Handshake::Failed(f) => self.end_connect(i, now, ErrorKind::Tls, f.to_string()),
        }
    }

    /// The transport is ready: the protocol's handshake starts.
    fn begin(&mut self, i: usize, now: u64) {
        let sh = self.sh;
        let s = &mut self.slots[i];
        s.phase = Phase::Handshake;
        s.proto = match sh.cfg.protocol {
            StreamProtocol::WebSocket => Proto::Ws(Box::new(Ws::new(sh))),
            StreamProtocol::Sse => Proto::Sse(Box::new(Sse::new(sh, s.last_event_id.as_deref()))),
            StreamProtocol::GrpcUnary => Proto::Grpc(Box::new(Grpc::new(sh, true))),
            StreamProtocol::GrpcStream => Proto::Grpc(Box::new(Grpc::new(sh, false))),
        };
        if sh.cfg.protocol == StreamProtocol::GrpcStream {
            // The call's one request message.
            self.slots[i].life.sent = 1;
            self.rec.sent(now, sh.cfg.size as usize);
        }
        let step = self.flush(i);
        self.apply(i, now, step);
        // Bytes may have come with the readiness that finished the connect or the handshake
        // (the server's SETTINGS): no new edge will announce them.
        if self.slots[i].phase == Phase::Handshake {
            self.readable(i, now);
        }
    }

    /// Writes slot `i`'s queued output.
    fn flush(&mut self, i: usize) -> Step {
        let s = &mut self.slots[i];
        let Some(io) = s.io.as_mut() else {
            return Step::Continue;
        };
        match &mut s.proto {
            Proto::Ws(ws) => ws.flush(io),
            Proto::Sse(sse) => sse.flush(io),
            Proto::Grpc(g) => g.flush(io),
            Proto::None => Step::Continue,
        }
    }

    /// Reads slot `i` until its socket is drained.
    fn readable(&mut self, i: usize, now: u64) {
        loop {
            let sh = self.sh;
            let s = &mut self.slots[i];
            let Some(io) = s.io.as_mut() else {
                return;
            };
            let received = self.rec.msgs.bytes_received;
            let before = self.rec.msgs.answered + self.rec.msgs.pushed;
            let step = match &mut s.proto {
                Proto::Ws(ws) => ws.readable(io, now, &mut self.rec, &mut self.buf),
                Proto::Sse(sse) => sse.readable(io, now, &mut self.rec, &mut self.buf),
                Proto::Grpc(g) => g.readable(io, now, sh, &mut self.rec, &mut self.buf),
                Proto::None => return,
            };
            let got = self.rec.msgs.answered + self.rec.msgs.pushed - before;
            s.life.received += got;
            if got > 0 || self.rec.msgs.bytes_received != received {
                s.last_rx = now;
            }
            let opened = matches!(step, Step::Opened);
            self.apply(i, now, step);
            if self.slots[i].phase == Phase::Draining && self.in_flight(i) == 0 {
                // Every answer is in: the connection closes.
                self.client_close(i, now);
                return;
            }
            if !opened || self.slots[i].phase != Phase::Open {
                return;
            }
        }
    }

    /// Messages (calls) slot `i` has in flight.
    fn in_flight(&self, i: usize) -> u64 {
        match &self.slots[i].proto {
            Proto::Ws(ws) => ws.in_flight(),
            Proto::Grpc(g) => g.in_flight(),
            _ => 0,
        }
    }

    /// Acts on what a protocol step said.
    fn apply(&mut self, i: usize, now: u64, step: Step) {
        match step {
            Step::Continue => {}
            Step::Opened => self.opened(i, now),
            Step::Refused(status, why) => {
                *self.rec.refused_status.entry(status).or_insert(0) += 1;
                self.slots[i].life.status = Some(status);
                if self.sh.cfg.protocol.is_grpc() {
                    self.slots[i].life.grpc_status = Some(model::stream::grpc_code_of_http(status));
                }
                self.end(i, now, EndKind::Refused, Some(why), None)
            }
            Step::End(kind, why, code) => self.end(i, now, kind, why, code),
        }
    }

    /// Slot `i`'s connection is usable.
    fn opened(&mut self, i: usize, now: u64) {
        let rate = self.sh.cfg.rate;
        let ping = self.sh.cfg.ping;
        let s = &mut self.slots[i];
        if s.phase != Phase::Handshake {
            return;
        }
        s.phase = Phase::Open;
        s.deadline = 0;
        s.last_rx = now;
        s.life.open_us = Some(now / 1000);
        s.backoff = self.sh.cfg.backoff.as_nanos() as u64;
        if s.life.status.is_none() {
            s.life.status = Some(match self.sh.cfg.protocol {
                StreamProtocol::WebSocket => 101,
                _ => 200,
            });
            if self.sh.cfg.protocol.is_grpc() {
                // HTTP/2's SETTINGS, not a status, open a gRPC connection.
                s.life.status = None;
            }
        }
        let took = now.saturating_sub(s.life.start_us * 1000);
        if rate > 0.0 {
            // Each slot's sends start at its own phase of the period, so that connections
            // opened together do not send together.
            let period = 1e9 / rate;
            let phase = ((self.base as u64 + i as u64) as f64 * 0.618_033_988_75).fract();
            s.next_send = now + (period * phase) as u64 + 1;
        }
        if let Some(p) = ping {
            s.next_ping = now + p.as_nanos() as u64;
        }
        self.rec.opened(now, took);
        let open = self.sh.open_now.fetch_add(1, Ordering::Relaxed) + 1;
        self.sh.open_max.fetch_max(open, Ordering::Relaxed);
        self.rearm(i);
    }

    /// A readiness event for slot `i` (generation `gen`).
    fn event(&mut self, i: usize, gen: u32, flags: u32) {
        let Some(s) = self.slots.get(i) else {
            return;
        };
        if s.gen != gen || s.io.is_none() {
            return;
        }
        let now = self.now();
        match s.phase {
            Phase::Connecting => {
                if flags & (sys::OUT | sys::IN) != 0 {
                    match s.io.as_ref().map(|io| io.sock.take_error()) {
                        Some(Ok(())) => self.connected(i, now),
                        Some(Err(e)) => self.end_connect(
                            i,
                            now,
                            crate::worker::connect_kind(&e),
                            format!("connect to {}: {e}", self.sh.addr),
                        ),
                        None => {}
                    }
                }
            }
            Phase::Tls => self.tls_step(i, now),
            Phase::Handshake | Phase::Open | Phase::Draining | Phase::Closing => {
                if flags & sys::OUT != 0 && self.wants_write(i) {
                    let step = self.flush(i);
                    self.apply(i, now, step);
                }
                if flags & sys::IN != 0 && self.slots[i].gen == gen {
                    self.readable(i, now);
                }
            }
            Phase::Waiting(_) | Phase::Done => {}
        }
        if self.slots[i].gen == gen {
            self.rearm(i);
        }
    }

    /// Slot `i` has output waiting for the socket.
    fn wants_write(&self, i: usize) -> bool {
        let s = &self.slots[i];
        let tls =
            s.io.as_ref()
                .is_some_and(|io| io.tls.as_ref().is_some_and(|t| t.wants_write()));
        tls || match &s.proto {
            Proto::Ws(ws) => ws.wants_write(),
            Proto::Sse(sse) => sse.wants_write(),
            Proto::Grpc(g) => g.wants_write(),
            Proto::None => false,
        }
    }
}
