//! One client connection: read, frame requests, decide each response, wait its latency on the
//! loop's timers, write. HTTP/1.1 requests on a connection are answered in order, one at a time,
//! so pipelining is safe: each request's latency starts when it has been received in full and
//! the response before it has been produced. A connection that opens with the HTTP/2 preface
//! speaks h2c from then on (`h2`): its streams are decided alike and answered independently.

mod h2;
mod long;

use crate::compiled::{Compiled, H200, H400, H431, H503};
use crate::counters::Slot;
use crate::http::{self, Decoder, Feed, HeadError, LongLived};
use crate::response::{body_chunk, write_head, ConnHeader};
use crate::sys::{mono_ns, read_stamped, spin_cpu};
use crate::timer::Timers;
use mio::net::TcpStream;
use rand::rngs::SmallRng;
use std::io::{self, ErrorKind, Read, Write};
use std::net::Shutdown;

/// Read buffer per connection; a request head must fit (else 431).
pub(crate) const RBUF: usize = 8192;
/// Stop producing responses while this much output is unsent (a client that does not read).
const WBUF_HIGH: usize = 64 * 1024;
/// Bodies up to this size are copied into the write buffer; larger ones stream from the pattern.
const SMALL_BODY: u64 = 16 * 1024;
/// After the last response, wait this long for the client to close before closing ourselves.
const LINGER_NS: u64 = 2_000_000_000;
/// While draining, an idle keep-alive connection is closed after this long without a request.
pub(crate) const DRAIN_IDLE_NS: u64 = 500_000_000;
/// Arrival stamps older than this are not trusted (the loop never lags that much).
const MAX_AGE_NS: u64 = 1_000_000_000;

/// What a connection needs from its loop and instance while it runs.
pub(crate) struct Cx<'a> {
    pub prof: &'a Compiled,
    pub ctr: &'a Slot,
    pub rng: &'a mut SmallRng,
    pub timers: &'a mut Timers,
    /// Not ready before this instant (0: ready).
    pub ready_at: u64,
    /// The instance is draining.
    pub draining: bool,
    /// This connection's slot, for its timers.
    pub slot: usize,
}

/// What the loop should do with the connection afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Keep,
    Close,
}

#[derive(Clone, Copy)]
enum Kind {
    /// An ordinary request, with the index of its rules.
    Normal(usize),
    Healthz,
    Readyz,
}

#[derive(Clone, Copy)]
struct Req {
    kind: Kind,
    head_only: bool,
    keep_alive: bool,
    ka_header: bool,
    debug: bool,
    /// A WebSocket upgrade or an event stream (HTTP/1.1).
    long: LongLived,
    /// A gRPC unary call (HTTP/2): answered with a message and a `grpc-status`.
    grpc: bool,
}

#[derive(Clone, Copy)]
enum Body {
    /// The instance's name and a newline.
    Name,
    /// This many bytes of the body pattern.
    Pattern(u64),
    Static(&'static [u8]),
}

/// A decided response (waiting for its latency, or about to be written).
#[derive(Clone, Copy)]
struct Pending {
    head: u16,
    body: Body,
    req: Req,
    /// Counted in the instance's counters (probes are not).
    counted: bool,
    /// The emulated latency it was given, in nanoseconds.
    delay: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    /// The last response is queued; shut down writing once it is out.
    Closing,
    /// Written and shut down; discarding input until the client closes.
    Lingering,
}

/// The buffers a connection owns; kept in a pool when it closes so accepting allocates nothing.
pub(crate) struct Buffers {
    r: Box<[u8]>,
    w: Vec<u8>,
}

impl Buffers {
    /// Fresh buffers.
    pub(crate) fn new() -> Buffers {
        Buffers {
            r: vec![0u8; RBUF].into_boxed_slice(),
            w: Vec::with_capacity(4096),
        }
    }
}

/// One accepted connection.
pub(crate) struct Conn {
    pub sock: TcpStream,
    /// The instance it belongs to.
    pub inst: usize,
    /// Id of its armed timer (0: none).
    pub timer_id: u64,
    rbuf: Box<[u8]>,
    rpos: usize,
    rlen: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    body_left: u64,
    body_off: u64,
    cur: Option<Req>,
    dec: Decoder,
    waiting: Option<Pending>,
    served: u64,
    read_ready: bool,
    rdhup: bool,
    peer_eof: bool,
    write_blocked: bool,
    phase: Phase,
    draining: bool,
    /// When the bytes of the latest read arrived (kernel stamp, CLOCK_MONOTONIC; 0: unknown).
    arrival: u64,
    /// When the previous response was produced (0: none, or the profile is not timed).
    last_done: u64,
    /// The HTTP/2 state, once the connection opened with the h2c preface.
    h2: Option<Box<h2::H2>>,
    /// A WebSocket or an event stream, once a request opened one.
    long: Option<Box<long::Long>>,
}

impl Conn {
    /// A new connection of instance `inst`.
    pub(crate) fn new(sock: TcpStream, inst: usize, bufs: Buffers) -> Conn {
        Conn {
            sock,
            inst,
            timer_id: 0,
            rbuf: bufs.r,
            rpos: 0,
            rlen: 0,
            wbuf: bufs.w,
            wpos: 0,
            body_left: 0,
            body_off: 0,
            cur: None,
            dec: Decoder::Done,
            waiting: None,
            served: 0,
            read_ready: true,
            rdhup: false,
            peer_eof: false,
            write_blocked: false,
            phase: Phase::Open,
            draining: false,
            arrival: 0,
            last_done: 0,
            h2: None,
            long: None,
        }
    }

    /// Takes the connection apart: its socket, its buffers, and how many counted requests were
    /// still waiting for their response. `ctr` hears of the HTTP/2 streams left open.
    pub(crate) fn into_parts(mut self, ctr: &Slot) -> (TcpStream, Buffers, u64) {
        self.long_dropped(ctr);
        let (mut w, abandoned) = match self.h2 {
            Some(h) => h.into_parts(ctr),
            None => (
                self.wbuf,
                u64::from(self.waiting.is_some_and(|p| p.counted)),
            ),
        };
        w.clear();
        (self.sock, Buffers { r: self.rbuf, w }, abandoned)
    }

    /// The poller reported readiness.
    pub(crate) fn on_event(
        &mut self,
        readable: bool,
        writable: bool,
        rdhup: bool,
        cx: &mut Cx,
    ) -> Step {
        if readable {
            self.read_ready = true;
        }
        if rdhup {
            self.rdhup = true;
            self.read_ready = true;
        }
        if writable {
            self.write_blocked = false;
        }
        self.run(cx)
    }

    /// This connection's timer came due.
    pub(crate) fn on_timer(&mut self, cx: &mut Cx) -> Step {
        self.timer_id = 0;
        if self.long.is_some() {
            return self.long_timer(cx);
        }
        if self.h2.is_some() {
            if self.phase == Phase::Lingering {
                return Step::Close;
            }
            self.h2_timer(cx);
            return self.run(cx);
        }
        if let Some(p) = self.waiting.take() {
            self.respond(p, cx);
            return self.run(cx);
        }
        match self.phase {
            Phase::Lingering => Step::Close,
            _ if self.draining && self.idle() => Step::Close,
            _ => Step::Keep,
        }
    }

    /// The instance started draining: the next responses say `Connection: close` (over
    /// HTTP/2: a GOAWAY, and the connection closes once its open streams are answered).
    pub(crate) fn start_drain(&mut self, cx: &mut Cx) -> Step {
        self.draining = true;
        self.h2_goaway(cx);
        self.close_long(long::GOING_AWAY, cx);
        self.h2_grpc_end_all(long::UNAVAILABLE, cx);
        self.run(cx)
    }

    /// Ends the connection's long-lived parts on an operator's order: a WebSocket with a close
    /// frame of `code`, an event stream with its end, gRPC streams with `grpc_status`.
    /// Ordinary HTTP is left alone.
    pub(crate) fn close_streams(&mut self, code: u16, grpc_status: u16, cx: &mut Cx) -> Step {
        self.close_long(code, cx);
        self.h2_grpc_end_all(grpc_status, cx);
        self.run(cx)
    }

    fn idle(&self) -> bool {
        self.phase == Phase::Open
            && self.cur.is_none()
            && self.waiting.is_none()
            && self.rpos == self.rlen
            && self.output_done()
    }

    fn output_done(&self) -> bool {
        self.wpos == self.out().len() && self.body_left == 0
    }

    /// The output buffer: ours, or the HTTP/2 connection's.
    fn out(&self) -> &Vec<u8> {
        match &self.h2 {
            Some(h) => &h.conn.out,
            None => &self.wbuf,
        }
    }

    fn can_read(&self) -> bool {
        self.phase != Phase::Closing
            && !self.peer_eof
            && (self.rlen < RBUF || self.rpos > 0)
            // HTTP/2 frames are taken as they come, while the output is not backing up.
            && (self.h2.is_none() || self.out().len() - self.wpos < WBUF_HIGH)
    }

    fn arm(&mut self, cx: &mut Cx, deadline: u64) {
        self.timer_id = cx.timers.add(deadline, cx.slot);
    }

    /// Reads, answers and writes until nothing more can happen without the poller or a timer.
    fn run(&mut self, cx: &mut Cx) -> Step {
        if self.long.is_some() {
            return self.run_long(cx);
        }
        if self.h2.is_some() {
            return self.run_h2(cx);
        }
        loop {
            if self.fill(cx.prof.timed).is_err() {
                return Step::Close;
            }
            if self.phase == Phase::Lingering {
                self.rpos = 0;
                self.rlen = 0;
                if self.peer_eof {
                    return Step::Close;
                }
                if self.read_ready {
                    continue;
                }
                return Step::Keep;
            }
            self.process(cx);
            if self.h2.is_some() {
                // The connection opened with the HTTP/2 preface.
                return self.run_h2(cx);
            }
            if self.long.is_some() {
                // A request opened a WebSocket or an event stream.
                return self.run_long(cx);
            }
            if self.flush(cx).is_err() {
                return Step::Close;
            }
            if self.phase == Phase::Closing && self.output_done() {
                let _ = self.sock.shutdown(Shutdown::Write);
                self.phase = Phase::Lingering;
                self.arm(cx, mono_ns() + LINGER_NS);
                continue;
            }
            if !(self.read_ready && self.can_read()) {
                break;
            }
        }
        if self.phase == Phase::Open && self.waiting.is_none() && self.output_done() {
            if self.peer_eof {
                // Whatever is left is a request that can no longer complete.
                return Step::Close;
            }
            if self.draining && self.idle() && self.timer_id == 0 {
                self.arm(cx, mono_ns() + DRAIN_IDLE_NS);
            }
        }
        Step::Keep
    }

    /// Reads while the socket has data and the buffer room. With `timed`, each read also notes
    /// when its bytes arrived, so a request's latency can start at its arrival.
    fn fill(&mut self, timed: bool) -> io::Result<()> {
        while self.read_ready && self.can_read() {
            if self.rpos == self.rlen {
                self.rpos = 0;
                self.rlen = 0;
            } else if self.rpos > 0 && RBUF - self.rlen < RBUF / 4 {
                self.rbuf.copy_within(self.rpos..self.rlen, 0);
                self.rlen -= self.rpos;
                self.rpos = 0;
            }
            let space = RBUF - self.rlen;
            let r = if timed {
                read_stamped(&self.sock, &mut self.rbuf[self.rlen..]).map(|(n, age)| {
                    self.arrival = match age {
                        Some(a) if a < MAX_AGE_NS => mono_ns().saturating_sub(a),
                        _ => 0,
                    };
                    n
                })
            } else {
                self.arrival = 0;
                (&self.sock).read(&mut self.rbuf[self.rlen..])
            };
            match r {
                Ok(0) => {
                    self.peer_eof = true;
                    self.read_ready = false;
                }
                Ok(n) => {
                    self.rlen += n;
                    // A short read emptied the socket; the next arrival raises a new edge.
                    if n < space && !self.rdhup {
                        self.read_ready = false;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => self.read_ready = false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Frames and answers requests from the read buffer while the connection may answer.
    fn process(&mut self, cx: &mut Cx) {
        while self.phase == Phase::Open
            && self.waiting.is_none()
            && self.long.is_none()
            && self.body_left == 0
            && self.wbuf.len() - self.wpos < WBUF_HIGH
        {
            if let Some(req) = self.cur {
                match self.dec.feed(&self.rbuf[self.rpos..self.rlen]) {
                    Feed::More(n) => {
                        self.rpos += n;
                        return;
                    }
                    Feed::Done(n) => {
                        self.rpos += n;
                        self.cur = None;
                        self.serve(req, cx);
                    }
                    Feed::Invalid => {
                        self.cur = None;
                        self.reject(H400, cx);
                        return;
                    }
                }
                continue;
            }
            if self.rpos == self.rlen {
                return;
            }
            if self.served == 0 && self.rpos == 0 && self.rbuf[0] == h2::PREFACE[0] {
                let n = self.rlen.min(h2::PREFACE.len());
                if self.rbuf[..n] == h2::PREFACE[..n] {
                    if n == h2::PREFACE.len() {
                        self.start_h2(cx);
                    }
                    // Else wait for the rest of what may be the preface.
                    return;
                }
            }
            match http::parse_head_long(&self.rbuf[self.rpos..self.rlen]) {
                Ok(Some((h, long))) => {
                    let path = &self.rbuf[self.rpos + h.path.0..self.rpos + h.path.1];
                    let kind = classify(path, cx.prof);
                    self.rpos += h.len;
                    self.dec.start(h.body);
                    if h.expect_continue {
                        self.wbuf
                            .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                    }
                    self.cur = Some(Req {
                        kind,
                        head_only: h.head_only,
                        keep_alive: h.keep_alive,
                        ka_header: h.ka_header,
                        debug: h.debug,
                        long,
                        grpc: false,
                    });
                }
                Ok(None) => {
                    if self.rpos == 0 && self.rlen == RBUF {
                        self.reject(H431, cx);
                    }
                    return;
                }
                Err(HeadError::TooLarge) => {
                    self.reject(H431, cx);
                    return;
                }
                Err(HeadError::Bad) => {
                    self.reject(H400, cx);
                    return;
                }
            }
        }
    }

    /// A request has arrived in full: decide its response now, send it now or at its deadline.
    fn serve(&mut self, req: Req, cx: &mut Cx) {
        let refuse = self.draining || cx.draining || (cx.ready_at != 0 && mono_ns() < cx.ready_at);
        match req.long {
            LongLived::WebSocket(key) if !refuse => {
                self.served += 1;
                self.start_ws(&key, cx);
                return;
            }
            LongLived::EventStream if !refuse => {
                self.served += 1;
                self.start_sse(cx);
                return;
            }
            LongLived::BadUpgrade => {
                self.served += 1;
                self.reject(H400, cx);
                return;
            }
            LongLived::WebSocket(_) | LongLived::EventStream => {
                // Draining or not ready yet: no new long-lived connection.
                self.served += 1;
                self.reject(H503, cx);
                return;
            }
            LongLived::No => {}
        }
        self.served += 1;
        let (p, at) = self.decide(req, self.last_done, cx);
        if at == 0 {
            self.respond(p, cx);
        } else {
            self.waiting = Some(p);
            self.arm(cx, at);
        }
    }

    /// Decides the response to a request that has arrived in full (and counts it started):
    /// the response, and when to send it (0: at once). The latency runs from the request's
    /// arrival, or from `after` if that is later (the previous response on an HTTP/1.1
    /// connection), or from the end of the CPU burn.
    fn decide(&self, req: Req, after: u64, cx: &mut Cx) -> (Pending, u64) {
        let not_ready = || cx.ready_at != 0 && mono_ns() < cx.ready_at;
        let p = match req.kind {
            Kind::Healthz => Pending {
                head: H200,
                body: Body::Static(b"ok\n"),
                req,
                counted: false,
                delay: 0,
            },
            Kind::Readyz => {
                let (head, body): (u16, &'static [u8]) = if cx.draining {
                    (H503, b"draining\n")
                } else if not_ready() {
                    (H503, b"not ready\n")
                } else {
                    (H200, b"ready\n")
                };
                Pending {
                    head,
                    body: Body::Static(body),
                    req,
                    counted: false,
                    delay: 0,
                }
            }
            Kind::Normal(_) if not_ready() => {
                cx.ctr.started();
                Pending {
                    head: H503,
                    body: Body::Static(b"not ready\n"),
                    req,
                    counted: true,
                    delay: 0,
                }
            }
            Kind::Normal(rule) => {
                cx.ctr.started();
                let r = &cx.prof.rules[rule];
                let cpu = r.cpu(cx.rng);
                if cpu > 0 {
                    spin_cpu(cpu);
                }
                let latency = r.latency(cx.rng);
                let head = r.status(cx.rng);
                let body = match r.size(cx.rng) {
                    Some(n) => Body::Pattern(n),
                    None => Body::Name,
                };
                let p = Pending {
                    head,
                    body,
                    req,
                    counted: true,
                    delay: latency,
                };
                if latency > 0 {
                    let now = mono_ns();
                    let start = if cpu == 0 && self.arrival != 0 {
                        self.arrival.max(after).min(now)
                    } else {
                        now
                    };
                    return (p, start + latency);
                }
                p
            }
        };
        (p, 0)
    }

    /// Answers an unusable request and closes the connection after it.
    fn reject(&mut self, head: u16, cx: &mut Cx) {
        cx.ctr.started();
        let req = Req {
            kind: Kind::Normal(0),
            head_only: false,
            keep_alive: false,
            ka_header: false,
            debug: false,
            long: LongLived::No,
            grpc: false,
        };
        let body = Body::Static(match head {
            H431 => b"request head too large\n",
            H503 => b"not ready\n",
            _ => b"bad request\n",
        });
        self.respond(
            Pending {
                head,
                body,
                req,
                counted: true,
                delay: 0,
            },
            cx,
        );
        self.rpos = self.rlen;
    }

    /// Queues the response's bytes and counts it.
    fn respond(&mut self, p: Pending, cx: &mut Cx) {
        let prof = cx.prof;
        let head = &prof.heads[p.head as usize];
        let close = !p.req.keep_alive
            || self.draining
            || cx.draining
            || (prof.close_after > 0 && self.served >= prof.close_after);
        let conn = if close {
            ConnHeader::Close
        } else if p.req.ka_header {
            ConnHeader::KeepAlive
        } else {
            ConnHeader::None
        };
        let len = if head.bodyless {
            0
        } else {
            match p.body {
                Body::Name => prof.name_body.len() as u64,
                Body::Pattern(n) => n,
                Body::Static(b) => b.len() as u64,
            }
        };
        write_head(
            &mut self.wbuf,
            head,
            len,
            conn,
            p.req.debug.then_some(p.delay),
        );
        if !p.req.head_only && len > 0 {
            match p.body {
                Body::Name => self.wbuf.extend_from_slice(&prof.name_body),
                Body::Static(b) => self.wbuf.extend_from_slice(b),
                Body::Pattern(n) if n <= SMALL_BODY => {
                    self.wbuf.extend_from_slice(body_chunk(0, n))
                }
                Body::Pattern(n) => {
                    self.body_left = n;
                    self.body_off = 0;
                }
            }
        }
        if p.counted {
            cx.ctr.answered(head.code);
        }
        if prof.timed {
            self.last_done = mono_ns();
        }
        if close {
            self.phase = Phase::Closing;
        }
    }

    fn flush(&mut self, cx: &Cx) -> io::Result<()> {
        if self.write_blocked {
            return Ok(());
        }
        let out = match &mut self.h2 {
            Some(h) => &mut h.conn.out,
            None => &mut self.wbuf,
        };
        while self.wpos < out.len() {
            match (&self.sock).write(&out[self.wpos..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.wpos += n;
                    cx.ctr.wrote(n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.write_blocked = true;
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos > 0 {
            out.clear();
            self.wpos = 0;
        }
        while self.body_left > 0 {
            match (&self.sock).write(body_chunk(self.body_off, self.body_left)) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.body_left -= n as u64;
                    self.body_off += n as u64;
                    cx.ctr.wrote(n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.write_blocked = true;
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

fn classify(target: &[u8], prof: &Compiled) -> Kind {
    let end = target
        .iter()
        .position(|&c| c == b'?')
        .unwrap_or(target.len());
    match &target[..end] {
        b"/healthz" => Kind::Healthz,
        b"/readyz" => Kind::Readyz,
        _ => Kind::Normal(prof.route(target)),
    }
}
