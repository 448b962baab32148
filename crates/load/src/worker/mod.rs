//! One generator thread (wrk's `wrk.c` loop) over its connections. In closed loop each
//! connection sends its next request the moment a response completes; in open loop requests
//! leave at their intended times on whichever connection is free, and latency counts from the
//! intended time. This file holds the scheduling and the accounting; the I/O comes from epoll
//! (`epoll.rs`, also TLS) or io_uring (`uring.rs`, plain HTTP).

mod account;
mod ends;
mod epoll;
mod h2;
mod uring;

use crate::codec::{Discard, Eof, Progress};
use crate::conn::{Conn, State, TlsFail};
use crate::pacer::Pacer;
use crate::stats::{kind_index, H2Counts, Msg, Recorder, SecondBlock, ThreadFinal, KINDS};
use crate::sys::{self, Epoll, Socket};
use crate::target::Target;
use crate::uring::{Done, Uring};
use model::{ErrorKind, RequestRecord};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Instant;

/// A send that leaves more than this after its intended time counts as late.
pub const LATE_THRESHOLD_NS: u64 = 1_000_000;
/// How often an idle loop looks at the stop flag.
const STOP_POLL_NS: u64 = 50_000_000;
/// Size of the per-thread read buffer shared by all its connections (epoll).
const READ_BUF: usize = 64 * 1024;
/// How long a busy loop polls for I/O before it goes to sleep. Going to sleep in the kernel
/// and being woken costs both ends: this thread two context switches, and the server (the
/// kernel path that delivers its bytes runs on the server's CPU) a wake-up of this thread for
/// the next response. A loop whose sleeps keep ending this soon polls instead.
const SPIN_NS: u64 = 50_000;
/// Sleeps in a row, each ended by bytes from a peer within [`SPIN_NS`], before the loop polls.
const SHORT_SLEEPS: u32 = 3;
/// How long the loop does not poll after it found itself preempted while polling: another
/// thread wants this CPU (the server under test, on a shared machine), so polling would take
/// time from it.
const SPIN_COOLDOWN_NS: u64 = 100_000_000;
/// HTTP/2, closed loop: the longest a connection's requests wait for more before they leave in
/// one write (`h2::Worker::h2_hold`); about what nginx takes to answer half of ten
/// streams at 100k requests per second.
const H2_HOLD_NS: u64 = 50_000;

/// What one wait of the I/O backend brought.
#[derive(Debug, Clone, Copy)]
struct Waited {
    /// Events (epoll) or completions (io_uring) handled.
    handled: usize,
    /// Of those, the ones that brought bytes from a peer (readable sockets, receive
    /// completions): the work that a loop sleeping between them would be woken for. A socket
    /// turning writable or a send completing right after a request went out is not.
    reads: usize,
    /// The event array came back full: more may be ready at once.
    full: bool,
    /// When the wait returned, ns since the origin (before the events were handled).
    woke: u64,
}

/// Which kernel interface a worker drives its sockets with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Readiness (epoll) with `read`/`send` per request; also the TLS path.
    Epoll,
    /// Completions (io_uring): one system call per loop turn for all sends and receives.
    Uring,
}

/// The I/O state of one worker.
enum Io {
    Epoll {
        epoll: Epoll,
        events: Vec<sys::Event>,
        buf: Vec<u8>,
    },
    Uring {
        ring: Box<Uring>,
        done: Vec<Done>,
        /// Connections whose response completed in this batch: they go on only after the
        /// whole batch is in, so a close that arrived with the response is seen first.
        deferred: Vec<usize>,
    },
}

/// Why an attempt failed, as the cheap values the system calls and libraries returned. Only a
/// thread's first failure of each kind is turned into a message, so a storm of failures costs
/// no allocation.
pub(crate) enum Why {
    /// A connect failed.
    Connect(io::Error),
    /// Another system call failed.
    Io(io::Error),
    /// The TLS layer failed.
    Tls(TlsFail),
    /// A fixed description.
    Text(&'static str),
    /// A deadline passed: what did not happen within the request timeout.
    Late(&'static str),
    /// An HTTP/2 frame with an error code.
    H2(&'static str, u32),
}

/// What every worker of one run shares (read-only).
pub struct Shared {
    /// Where and what to send.
    pub target: Target,
    /// TLS client config and server name, for https.
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    /// The time base.
    pub origin: Instant,
    /// Run start, ns since the origin.
    pub start_ns: u64,
    /// Run end (duration), ns since the origin.
    pub end_ns: Option<u64>,
    /// Request timeout in ns.
    pub timeout_ns: u64,
    /// Closed loop: wait this long before reconnecting after a failed connect.
    pub backoff_ns: u64,
    /// Open loop: rate, arrivals and seed.
    pub open: Option<(f64, model::Arrivals, u64)>,
    /// Open loop: the send window ([`crate::Config::send_window`]), ns.
    pub send_window_ns: u64,
    /// Total request limit (`-n`).
    pub limit: Option<u64>,
    /// Number of threads.
    pub threads: usize,
    /// Connections across all threads (thread `i` holds a contiguous range of them).
    pub connections: usize,
    /// Keep per-request records.
    pub record: bool,
    /// Set by the caller to end the run early.
    pub stop: Arc<AtomicBool>,
    /// The I/O backend.
    pub backend: Backend,
    /// HTTP/2: concurrent streams per connection (`None` for HTTP/1.1).
    pub streams: Option<u32>,
    /// Resend a request the server's idle close cut off ([`crate::Config::retry_idle_closed`]).
    pub retry_idle_closed: bool,
}

/// Channels between a worker and the aggregator.
pub struct Links {
    /// Blocks and the final totals go here.
    pub tx: Sender<Msg>,
    /// Cleared blocks come back here.
    pub recycled: Receiver<Box<SecondBlock>>,
}

struct Worker<'a> {
    id: usize,
    sh: &'a Shared,
    links: Links,
    io: Io,
    conns: Vec<Conn>,
    pacer: Option<Pacer>,
    free: VecDeque<usize>,
    retry: VecDeque<usize>,
    /// Connections whose request an idle close cut off, to connect again and resend it from
    /// the main loop ([`Shared::retry_idle_closed`]).
    resend: VecDeque<usize>,
    quota: Option<u64>,
    issued: u64,
    /// `issued` when the last second was sealed: the next second's sends are counted from it.
    issued_sealed: u64,
    in_flight: usize,
    draining: bool,
    drain_at: u64,
    /// Open loop, once the duration has ended: arrivals intended before the end that were
    /// still waiting for a connection leave until this time (late, their latency counted from
    /// their intended times), so the end of a run never drops them unmeasured. A stop ends
    /// them at once (0).
    backlog_until: u64,
    next_scan: u64,
    cur: Box<SecondBlock>,
    next_boundary: u64,
    status: Vec<u64>,
    connects: u64,
    bytes_written: u64,
    late: u64,
    lateness: Option<Recorder>,
    records: Vec<RequestRecord>,
    /// The load-wide index of this thread's first connection (records name connections by it).
    conn_base: u32,
    /// The first failure of each kind on this thread: when (ns since the origin) and why.
    first_errors: [Option<(u64, String)>; KINDS],
    /// io_uring: when the current batch of completions was reaped. Every completion in it was
    /// posted before then, so it is their arrival time (and reading the clock once per batch
    /// instead of per response keeps later completions from being stamped late).
    batch_now: Option<u64>,
    /// HTTP/2 counts.
    h2c: H2Counts,
    /// HTTP/2 connections with frames to write at the end of the loop turn.
    h2_dirty: Vec<usize>,
    /// Poll before sleeping ([`SPIN_NS`]): I/O keeps the loop busy.
    spin: bool,
    /// Sleeps in a row that bytes from a peer ended within [`SPIN_NS`].
    short_sleeps: u32,
    /// No polling before this time, ns since the origin ([`SPIN_COOLDOWN_NS`]).
    spin_after: u64,
}

/// The load-wide index of thread `id`'s first connection when `connections` are dealt out to
/// `threads` as `load::run` does (the first `connections % threads` threads get one more).
pub(crate) fn first_conn(id: usize, threads: usize, connections: usize) -> usize {
    let t = threads.max(1);
    id * (connections / t) + id.min(connections % t)
}

/// A worker's I/O, set up before the run starts: a ring takes a millisecond or two to set up
/// and register its buffers, which would otherwise make the first sends of an open-loop
/// schedule late by as much.
/// (An epoll set takes microseconds, and is made on the worker's thread.)
pub struct Prepared(Option<Box<Uring>>);

/// Sets up the I/O of a worker that will hold `conns` connections.
pub fn prepare(backend: Backend, conns: usize) -> io::Result<Prepared> {
    Ok(Prepared(match backend {
        Backend::Epoll => None,
        Backend::Uring => Some(Box::new(Uring::new(conns)?)),
    }))
}

/// Runs one worker thread with `conns` connections and, in closed loop, `quota` requests, on
/// the I/O [`prepare`] set up for it.
pub fn run(
    id: usize,
    conns: usize,
    quota: Option<u64>,
    sh: &Shared,
    links: Links,
    prepared: Prepared,
) -> io::Result<()> {
    let open = sh.open.is_some();
    if open {
        sys::tight_timer_slack();
    }
    let pacer = sh.open.map(|(rate, arrivals, seed)| {
        Pacer::new(sh.start_ns, rate, arrivals, seed, id, sh.threads, sh.limit)
    });
    let io = match prepared.0 {
        None => Io::Epoll {
            epoll: Epoll::new()?,
            events: sys::events(256.min(conns.max(1) * 2)),
            buf: vec![0; READ_BUF],
        },
        Some(mut ring) => Io::Uring {
            ring: {
                ring.enable()?;
                ring
            },
            done: Vec::with_capacity(256),
            deferred: Vec::with_capacity(conns),
        },
    };
    let uring = sh.backend == Backend::Uring;
    let mut w = Worker {
        id,
        sh,
        links,
        io,
        conns: (0..conns)
            .map(|_| {
                let mut c = Conn::new();
                // A multishot receive holds its own reference to the socket: only a shutdown
                // ends it, so closing the descriptor alone would leave the connection open.
                c.shutdown_on_close = uring;
                c
            })
            .collect(),
        pacer,
        free: if open {
            // One entry per free stream, spread over the connections.
            let per = sh.streams.unwrap_or(1) as usize;
            (0..conns * per).map(|k| k % conns.max(1)).collect()
        } else {
            VecDeque::new()
        },
        retry: VecDeque::new(),
        resend: VecDeque::new(),
        quota,
        issued: 0,
        issued_sealed: 0,
        in_flight: 0,
        draining: false,
        drain_at: 0,
        backlog_until: 0,
        next_scan: 0,
        cur: Box::new(SecondBlock::new(id, open)),
        next_boundary: 0,
        status: vec![0; 600],
        connects: 0,
        bytes_written: 0,
        late: 0,
        lateness: open.then(Recorder::default),
        records: Vec::new(),
        conn_base: first_conn(id, sh.threads, sh.connections) as u32,
        first_errors: std::array::from_fn(|_| None),
        batch_now: None,
        h2c: H2Counts::default(),
        h2_dirty: Vec::new(),
        spin: false,
        short_sleeps: 0,
        spin_after: 0,
    };
    w.main_loop()
}

impl Worker<'_> {
    fn main_loop(&mut self) -> io::Result<()> {
        let mut now = now_ns(&self.sh.origin);
        // Every thread's seconds start at the run's first second, so the aggregator can line
        // them up without guessing.
        self.cur.t = (self.sh.start_ns / 1_000_000_000) as u32;
        self.next_boundary = (self.cur.t as u64 + 1) * 1_000_000_000;
        if now >= self.next_boundary {
            self.rotate(now);
        }
        self.next_scan = now + self.sh.timeout_ns;
        if self.pacer.is_none() {
            'rounds: for _ in 0..self.sh.streams.unwrap_or(1) {
                for i in 0..self.conns.len() {
                    if !self.may_issue() {
                        break 'rounds;
                    }
                    self.issue(i, now, now);
                }
            }
        }
        loop {
            now = now_ns(&self.sh.origin);
            if now >= self.next_boundary {
                self.rotate(now);
            }
            let stopped = self.sh.stop.load(Ordering::Relaxed);
            if stopped {
                self.backlog_until = 0;
            }
            if self.pacer.is_some() && self.may_send(now) {
                // Before deciding the run is over: requests intended before the end leave
                // even if the loop woke late.
                self.send_due(now);
            }
            if !self.draining && (stopped || self.sh.end_ns.is_some_and(|e| now >= e)) {
                self.draining = true;
                self.drain_at = now;
                if !stopped {
                    // The duration ended: what is still waiting for a connection may leave
                    // for one request timeout more.
                    self.backlog_until = self.sh.end_ns.unwrap_or(now) + self.sh.timeout_ns;
                }
            }
            while let Some(i) = self.resend.pop_front() {
                self.connect(i, now);
            }
            for _ in 0..self.retry.len() {
                let i = self.retry.pop_front().expect("counted");
                if self.may_issue() {
                    self.issue(i, now, now);
                }
            }
            let mut held_until = u64::MAX;
            if !self.h2_dirty.is_empty() {
                held_until = self.h2_flush_dirty(now);
            }
            if self.in_flight == 0 && (self.draining || !self.may_issue()) {
                break;
            }
            let mut wake = self
                .next_boundary
                .min(self.next_scan)
                .min(now + STOP_POLL_NS);
            if !self.retry.is_empty() || !self.resend.is_empty() {
                wake = now;
            }
            wake = wake.min(held_until);
            if !self.draining {
                if let Some(end) = self.sh.end_ns {
                    wake = wake.min(end);
                }
                if !self.free.is_empty() {
                    if let Some(t) = self.pacer.as_ref().and_then(|p| p.next()) {
                        wake = wake.min(t + send_wake_after(self.sh.send_window_ns));
                    }
                }
            }
            let full = self.wait(wake.saturating_sub(now))?;
            if now_ns(&self.sh.origin) >= self.next_scan {
                // Take in everything that already arrived before calling anything late: a
                // loop that fell behind must not turn its own delay into timeouts.
                let mut more = full;
                while more {
                    more = self.wait(0)?;
                }
                self.scan(now_ns(&self.sh.origin));
            }
        }
        self.finish(now);
        Ok(())
    }

    /// Waits up to `timeout_ns` for I/O and handles all of it. Returns true when there may be
    /// more ready right away (the event array was full).
    ///
    /// While I/O keeps the loop busy ([`SHORT_SLEEPS`] sleeps in a row ended by bytes from a
    /// peer in less than [`SPIN_NS`]), it polls for up to [`SPIN_NS`] before sleeping; a
    /// window that passes without I/O, or a sleep that lasts, puts it back to sleeping, and a
    /// poll that finds the thread was preempted stops polling for [`SPIN_COOLDOWN_NS`]. A loop
    /// paced by its own timer (open loop) or waiting on a slow server never polls.
    fn wait(&mut self, mut timeout_ns: u64) -> io::Result<bool> {
        if self.spin && timeout_ns > 0 {
            let t0 = now_ns(&self.sh.origin);
            let window = SPIN_NS.min(timeout_ns);
            let mut last = t0;
            loop {
                let w = self.poll_io(0)?;
                if w.handled > 0 {
                    return Ok(w.full);
                }
                let now = now_ns(&self.sh.origin);
                if now - last >= SPIN_NS {
                    // One poll took a whole window: the thread was off its CPU.
                    self.spin_after = now + SPIN_COOLDOWN_NS;
                }
                last = now;
                if now - t0 >= window {
                    timeout_ns -= (now - t0).min(timeout_ns);
                    break;
                }
            }
            self.spin = false;
            self.short_sleeps = 0;
            if timeout_ns == 0 {
                return Ok(false);
            }
        }
        let t0 = now_ns(&self.sh.origin);
        let w = self.poll_io(timeout_ns)?;
        if timeout_ns > 0 {
            if w.reads > 0 && w.woke.saturating_sub(t0) < SPIN_NS {
                self.short_sleeps += 1;
            } else if w.reads > 0 || w.handled == 0 {
                // A long sleep, or one the timeout ended: the loop is not that busy.
                self.short_sleeps = 0;
            }
            // Open loop never polls (as documented above): its sends wait for their times
            // anyway, and a loop that keeps its core full under SCHED_RR meets the kernel's
            // real-time throttle, which stops it for the rest of the second.
            self.spin = self.pacer.is_none()
                && self.short_sleeps >= SHORT_SLEEPS
                && w.woke >= self.spin_after;
        }
        Ok(w.full)
    }

    /// One wait of the I/O backend, up to `timeout_ns` (0 polls), with everything it brought
    /// handled.
    fn poll_io(&mut self, timeout_ns: u64) -> io::Result<Waited> {
        match self.io {
            Io::Epoll { .. } => self.epoll_wait(timeout_ns),
            Io::Uring { .. } => self.uring_wait(timeout_ns),
        }
    }

    /// True while the request budget (closed-loop quota or open-loop schedule) allows more.
    fn may_issue(&self) -> bool {
        if self.draining {
            return false;
        }
        match &self.pacer {
            Some(p) => p.next().is_some(),
            None => self.quota.is_none_or(|q| self.issued < q),
        }
    }

    /// Open loop: whether requests whose time has come may leave now (before the end, or as
    /// the end's backlog).
    #[inline]
    fn may_send(&self, now: u64) -> bool {
        !self.draining || now < self.backlog_until
    }

    /// Open loop: hands every request whose time has come to a free connection.
    fn send_due(&mut self, now: u64) {
        let end = self.sh.end_ns.unwrap_or(u64::MAX);
        while let Some(t) = self.pacer.as_ref().and_then(|p| p.next()) {
            if t > now || t >= end {
                break;
            }
            let Some(i) = self.free.pop_front() else {
                break;
            };
            self.pacer.as_mut().expect("open loop").advance();
            let late = now.saturating_sub(t);
            if late > LATE_THRESHOLD_NS {
                self.late += 1;
            }
            if let Some(l) = &mut self.lateness {
                l.record(late / 1000);
            }
            self.issue(i, t, now);
        }
    }

    /// Starts a request on connection `i`: `intended` is when it should have left, `now` when
    /// it does.
    fn issue(&mut self, i: usize, intended: u64, now: u64) {
        if self.sh.streams.is_some() {
            self.h2_issue(i, intended, now);
            return;
        }
        self.issued += 1;
        self.in_flight += 1;
        let c = &mut self.conns[i];
        c.busy = true;
        c.intended = intended;
        c.issued = now;
        c.read_bytes = 0;
        c.deadline = now + self.sh.timeout_ns;
        match c.state {
            State::Idle => self.write_request(i, now),
            State::Closed | State::Backoff => self.connect(i, now),
            _ => {}
        }
    }

    fn connect(&mut self, i: usize, now: u64) {
        self.conns[i].close();
        match Socket::connect(&self.sh.target.addr) {
            Ok((sock, established)) => {
                let c = &mut self.conns[i];
                let fd = sock.fd();
                c.sock = Some(sock);
                c.state = State::Connecting;
                let watched = match self.io {
                    Io::Epoll { .. } => self.epoll_watch(i),
                    Io::Uring { .. } if established => Ok(()),
                    Io::Uring { .. } => self.uring_watch_connect(i, fd),
                };
                match watched {
                    Err(e) => self.fail(i, now, connect_kind(&e), Why::Connect(e)),
                    Ok(()) if established => self.connected(i, now),
                    Ok(()) => {}
                }
            }
            Err(e) => self.fail(i, now, connect_kind(&e), Why::Connect(e)),
        }
    }

    fn connected(&mut self, i: usize, now: u64) {
        self.connects += 1;
        match &self.sh.tls {
            Some((cfg, name)) => match rustls::ClientConnection::new(cfg.clone(), name.clone()) {
                Ok(tls) => {
                    let c = &mut self.conns[i];
                    c.tls = Some(Box::new(tls));
                    c.state = State::Handshake;
                    self.handshake(i, now);
                }
                Err(e) => self.fail(i, now, ErrorKind::Tls, Why::Tls(TlsFail::Rustls(e))),
            },
            None => {
                if let Io::Uring { .. } = self.io {
                    if let Err(e) = self.uring_arm_recv(i) {
                        self.fail(i, now, ErrorKind::ConnectOther, Why::Io(e));
                        return;
                    }
                }
                self.ready(i, now)
            }
        }
    }

    /// The connection is usable: send the waiting request, or wait for one.
    fn ready(&mut self, i: usize, now: u64) {
        if self.sh.streams.is_some() {
            self.h2_ready(i, now);
        } else if self.conns[i].busy {
            self.write_request(i, now);
        } else {
            self.conns[i].state = State::Idle;
        }
    }

    #[inline]
    fn write_request(&mut self, i: usize, now: u64) {
        let req = &self.sh.target.request;
        let c = &mut self.conns[i];
        c.state = State::Writing;
        c.wpos = 0;
        c.parser.reset(self.sh.target.head);
        self.bytes_written += req.len() as u64;
        match self.io {
            Io::Epoll { .. } => self.epoll_write(i, now),
            Io::Uring { .. } => self.uring_write(i, now),
        }
    }

    /// Response bytes arrived on connection `i`. `hup` says the peer's close arrived with them.
    /// Returns false when the connection was closed or replaced (stop reading it).
    #[inline]
    fn on_data(&mut self, i: usize, data: &[u8], hup: bool) -> bool {
        if self.sh.streams.is_some() {
            return self.h2_on_data(i, data);
        }
        self.cur.bytes += data.len() as u64;
        let c = &mut self.conns[i];
        c.read_bytes = c.read_bytes.saturating_add(data.len() as u32);
        if !c.busy {
            // Bytes nobody asked for: the connection is out of step; drop it.
            self.drop_idle(i);
            return false;
        }
        match c.parser.feed(data, &mut Discard) {
            Ok((_, Progress::More)) => true,
            Ok((used, Progress::Done(resp))) => {
                // Reuse the connection only if it is in step (no stray bytes, the request
                // fully sent) and the server has not already closed it: a careful client does
                // not send on a connection it saw close.
                let reusable =
                    resp.keep_alive && used == data.len() && c.state == State::Reading && !hup;
                let gen = c.gen;
                let now = self.arrival();
                self.complete(i, now, resp.status, reusable);
                self.conns[i].gen == gen
            }
            Err(m) => {
                let now = self.arrival();
                self.fail(i, now, ErrorKind::Malformed, Why::Text(m.0));
                false
            }
        }
    }

    /// When the bytes being handled arrived (at the latest).
    #[inline]
    fn arrival(&self) -> u64 {
        self.batch_now.unwrap_or_else(|| now_ns(&self.sh.origin))
    }

    /// The connection is free: closed loop sends again at once, open loop waits for the schedule.
    #[inline]
    fn next(&mut self, i: usize, now: u64) {
        if let Io::Uring { deferred, .. } = &mut self.io {
            deferred.push(i);
            return;
        }
        self.proceed(i, now);
    }

    #[inline]
    fn proceed(&mut self, i: usize, now: u64) {
        if self.pacer.is_some() {
            self.free.push_back(i);
            if self.may_send(now) {
                self.send_due(now);
            }
        } else if self.may_issue() {
            self.issue(i, now, now);
        }
    }

    /// Fails requests past their deadline and restarts connections whose backoff is over; sets
    /// the next scan to the earliest deadline left.
    fn scan(&mut self, now: u64) {
        let mut next = now + self.sh.timeout_ns;
        // Scans cost O(connections): with many deadlines spread over time, look at most once
        // per granule (10 ms, or a tenth of the timeout) rather than once per deadline.
        let granule = (self.sh.timeout_ns / 10).min(10_000_000);
        if self.sh.streams.is_some() {
            let next = self.h2_scan(now);
            self.next_scan = next.max(now + granule);
            return;
        }
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if c.busy && now >= c.deadline {
                let (kind, what) = match c.state {
                    State::Connecting | State::Closed => {
                        (ErrorKind::ConnectTimeout, "no TCP connection")
                    }
                    State::Handshake => (ErrorKind::Tls, "TLS handshake not finished"),
                    _ => (ErrorKind::Timeout, "no complete response"),
                };
                self.fail(i, now, kind, Why::Late(what));
            } else if c.state == State::Backoff && now >= c.deadline {
                self.conns[i].state = State::Closed;
                if self.may_issue() {
                    self.issue(i, now, now);
                }
            }
            let c = &self.conns[i];
            if c.busy || c.state == State::Backoff {
                next = next.min(c.deadline);
            }
        }
        self.next_scan = next.max(now + granule);
    }
}

/// Open loop: how long after the next send fell due the loop wakes to send it with every
/// other one due by then, for a send window of `window_ns`. Half the window: the other half is
/// left for the wake-up itself (a timer's expiry, a context switch, which on a shared VM takes
/// hundreds of microseconds now and then), so that on a machine that keeps up no send leaves
/// more than the window after its intended time. The loop also sends whatever is due each time
/// I/O wakes it sooner.
#[inline]
fn send_wake_after(window_ns: u64) -> u64 {
    window_ns / 2
}

/// Nanoseconds since `origin` (monotonic).
#[inline]
fn now_ns(origin: &Instant) -> u64 {
    origin.elapsed().as_nanos() as u64
}

pub(crate) fn connect_kind(e: &io::Error) -> ErrorKind {
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => ErrorKind::ConnectRefused,
        Some(libc::ETIMEDOUT) => ErrorKind::ConnectTimeout,
        _ => ErrorKind::ConnectOther,
    }
}

#[cfg(test)]
mod tests {
    use super::first_conn;

    #[test]
    fn connection_ranges_tile_the_load() {
        // 10 connections over 3 threads: 4, 3, 3.
        assert_eq!(
            (0..3).map(|i| first_conn(i, 3, 10)).collect::<Vec<_>>(),
            [0, 4, 7]
        );
        assert_eq!(first_conn(0, 1, 5), 0);
        assert_eq!(first_conn(3, 4, 4), 3);
    }
}
