//! One event-loop thread (`pb-backend-N`): every instance's listener, the connections this thread
//! accepted, and the timers that emulate latency. The fleet talks to it through commands.

use crate::compiled::Compiled;
use crate::conn::{Buffers, Conn, Cx, Step};
use crate::counters::InstCounters;
use crate::sys::{mono_ns, set_linger_zero};
use crate::timer::Timers;
use mio::net::TcpListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::io::{self, ErrorKind};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const WAKER: Token = Token(usize::MAX);
const TIMER: Token = Token(usize::MAX - 1);
const LISTEN: usize = 1 << 40;

/// Orders from the fleet to one event loop.
pub(crate) enum Cmd {
    /// Start serving a new instance on this (cloned) listener.
    Add {
        idx: usize,
        listener: std::net::TcpListener,
        prof: Arc<Compiled>,
        ctr: Arc<InstCounters>,
        ready_at: u64,
        ack: Sender<()>,
    },
    /// Use this profile from the next request on.
    SetProfile {
        idx: usize,
        prof: Arc<Compiled>,
        ready_at: u64,
        ack: Sender<()>,
    },
    /// Stop accepting, finish in-flight requests, close; signal when no connection is left.
    Drain { idx: usize, sig: Arc<DrainSignal> },
    /// Close the listener and reset every connection.
    Kill { idx: usize, ack: Sender<()> },
    /// End every long-lived connection of an instance: WebSockets with a close frame of
    /// `code`, event streams with their end, gRPC streams with `grpc_status`.
    CloseStreams {
        idx: usize,
        code: u16,
        grpc_status: u16,
        ack: Sender<()>,
    },
    /// Serve again on a fresh listener.
    Restart {
        idx: usize,
        listener: std::net::TcpListener,
        ready_at: u64,
        ack: Sender<()>,
    },
    /// Leave the loop (connections close).
    Stop,
}

/// Counts down as each event loop finishes draining an instance.
pub(crate) struct DrainSignal {
    left: Mutex<usize>,
    cv: Condvar,
}

impl DrainSignal {
    /// A signal that fires after `n` loops report.
    pub(crate) fn new(n: usize) -> Arc<DrainSignal> {
        Arc::new(DrainSignal {
            left: Mutex::new(n),
            cv: Condvar::new(),
        })
    }

    fn done(&self) {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        *left = left.saturating_sub(1);
        if *left == 0 {
            self.cv.notify_all();
        }
    }

    /// True once every loop has drained.
    pub(crate) fn is_done(&self) -> bool {
        *self.left.lock().unwrap_or_else(|e| e.into_inner()) == 0
    }

    /// Waits until drained or `timeout` passes; true if drained.
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        while *left > 0 {
            match deadline {
                None => left = self.cv.wait(left).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    left = self
                        .cv
                        .wait_timeout(left, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        true
    }
}

/// What one loop knows of one instance.
struct Local {
    listener: Option<TcpListener>,
    prof: Arc<Compiled>,
    ctr: Arc<InstCounters>,
    ready_at: u64,
    draining: bool,
    drain: Option<Arc<DrainSignal>>,
    conns: usize,
}

impl Drop for Local {
    fn drop(&mut self) {
        if let Some(sig) = self.drain.take() {
            sig.done();
        }
    }
}

/// The fleet's handle on one loop.
pub(crate) struct Handle {
    pub tx: Sender<Cmd>,
    pub waker: Arc<Waker>,
}

impl Handle {
    /// Sends a command and wakes the loop; false if the loop is gone.
    pub(crate) fn send(&self, cmd: Cmd) -> bool {
        self.tx.send(cmd).is_ok() && self.waker.wake().is_ok()
    }
}

struct Worker {
    id: usize,
    poll: Poll,
    rx: Receiver<Cmd>,
    insts: Vec<Option<Local>>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    pool: Vec<Buffers>,
    timers: Timers,
    rng: SmallRng,
    stop: bool,
}

/// Starts loop `id` on its own thread named `pb-backend-{id}`.
pub(crate) fn spawn(id: usize, seed: u64) -> io::Result<(Handle, JoinHandle<()>)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let timers = Timers::new()?;
    poll.registry()
        .register(&mut SourceFd(&timers.raw_fd()), TIMER, Interest::READABLE)?;
    let (tx, rx) = std::sync::mpsc::channel();
    let mut w = Worker {
        id,
        poll,
        rx,
        insts: Vec::new(),
        conns: Vec::new(),
        free: Vec::new(),
        pool: Vec::new(),
        timers,
        rng: SmallRng::seed_from_u64(seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        stop: false,
    };
    let join = std::thread::Builder::new()
        .name(format!("pb-backend-{id}"))
        .spawn(move || w.run())?;
    Ok((Handle { tx, waker }, join))
}

impl Worker {
    fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        while !self.stop {
            if let Err(e) = self.poll.poll(&mut events, None) {
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                break;
            }
            for ev in events.iter() {
                match ev.token() {
                    WAKER => self.commands(),
                    TIMER => self.timers.fired(),
                    Token(t) if t >= LISTEN => self.accept(t - LISTEN),
                    Token(slot) => {
                        let (r, w, hup) = (
                            ev.is_readable() || ev.is_error(),
                            ev.is_writable(),
                            ev.is_read_closed() || ev.is_error(),
                        );
                        self.drive(slot, |c, cx| c.on_event(r, w, hup, cx));
                    }
                }
            }
            self.fire_timers();
        }
    }

    /// Runs `f` on the connection in `slot` with its context, and closes it if asked.
    fn drive(&mut self, slot: usize, f: impl FnOnce(&mut Conn, &mut Cx) -> Step) {
        let step = {
            let Some(Some(conn)) = self.conns.get_mut(slot) else {
                return;
            };
            let Some(Some(local)) = self.insts.get_mut(conn.inst) else {
                return;
            };
            if local.ready_at != 0 && mono_ns() >= local.ready_at {
                local.ready_at = 0;
            }
            let mut cx = Cx {
                prof: &local.prof,
                ctr: local.ctr.slot(self.id),
                rng: &mut self.rng,
                timers: &mut self.timers,
                ready_at: local.ready_at,
                draining: local.draining,
                slot,
            };
            f(conn, &mut cx)
        };
        if step == Step::Close {
            self.close(slot, false);
        }
    }

    fn fire_timers(&mut self) {
        let now = mono_ns();
        while let Some((slot, id)) = self.timers.pop_due(now) {
            if matches!(self.conns.get(slot), Some(Some(c)) if c.timer_id == id) {
                self.drive(slot, |c, cx| c.on_timer(cx));
            }
        }
        self.timers.rearm(now);
    }

    fn close(&mut self, slot: usize, reset: bool) {
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::take) else {
            return;
        };
        self.free.push(slot);
        if reset {
            set_linger_zero(&conn.sock);
        }
        // Instances are never removed from a loop: the connection's is there.
        let Some(Some(local)) = self.insts.get_mut(conn.inst) else {
            return;
        };
        let ctr = local.ctr.slot(self.id);
        let (sock, bufs, abandoned) = conn.into_parts(ctr);
        drop(sock);
        self.pool.push(bufs);
        for _ in 0..abandoned {
            ctr.abandoned();
        }
        local.conns -= 1;
        if local.conns == 0 {
            if let Some(sig) = local.drain.take() {
                sig.done();
            }
        }
    }

    fn accept(&mut self, idx: usize) {
        loop {
            let Some(Some(local)) = self.insts.get_mut(idx) else {
                return;
            };
            let Some(listener) = local.listener.as_ref() else {
                return;
            };
            match listener.accept() {
                Ok((mut sock, _)) => {
                    let _ = sock.set_nodelay(true);
                    let slot = self.free.pop().unwrap_or_else(|| {
                        self.conns.push(None);
                        self.conns.len() - 1
                    });
                    if self
                        .poll
                        .registry()
                        .register(
                            &mut sock,
                            Token(slot),
                            Interest::READABLE | Interest::WRITABLE,
                        )
                        .is_err()
                    {
                        self.free.push(slot);
                        continue;
                    }
                    local.conns += 1;
                    local.ctr.slot(self.id).accepted();
                    let draining = local.draining;
                    let bufs = self.pool.pop().unwrap_or_else(Buffers::new);
                    self.conns[slot] = Some(Conn::new(sock, idx, bufs));
                    if draining {
                        self.drive(slot, |c, cx| c.start_drain(cx));
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e)
                    if e.kind() == ErrorKind::Interrupted
                        || e.kind() == ErrorKind::ConnectionAborted =>
                {
                    continue
                }
                // Out of file descriptors or similar: the backlog keeps the rest.
                Err(_) => return,
            }
        }
    }

    fn listen(&mut self, idx: usize, l: std::net::TcpListener) -> Option<TcpListener> {
        // Accepted sockets inherit the option; reads use the stamps only for timed profiles.
        let _ = crate::sys::enable_rx_timestamps(&l);
        let mut l = TcpListener::from_std(l);
        self.poll
            .registry()
            .register(&mut l, Token(LISTEN + idx), Interest::READABLE)
            .ok()?;
        Some(l)
    }

    fn unlisten(&mut self, idx: usize) {
        if let Some(Some(local)) = self.insts.get_mut(idx) {
            if let Some(mut l) = local.listener.take() {
                // The listener is shared with the other loops (dup'd fds): deregister explicitly.
                let _ = self.poll.registry().deregister(&mut l);
            }
        }
    }

    fn slots_of(&self, idx: usize) -> Vec<usize> {
        self.conns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.as_ref().is_some_and(|c| c.inst == idx))
            .map(|(i, _)| i)
            .collect()
    }

    fn commands(&mut self) {
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Cmd::Add {
                    idx,
                    listener,
                    prof,
                    ctr,
                    ready_at,
                    ack,
                } => {
                    let listener = self.listen(idx, listener);
                    if self.insts.len() <= idx {
                        self.insts.resize_with(idx + 1, || None);
                    }
                    self.insts[idx] = Some(Local {
                        listener,
                        prof,
                        ctr,
                        ready_at,
                        draining: false,
                        drain: None,
                        conns: 0,
                    });
                    let _ = ack.send(());
                }
                Cmd::SetProfile {
                    idx,
                    prof,
                    ready_at,
                    ack,
                } => {
                    if let Some(Some(local)) = self.insts.get_mut(idx) {
                        local.prof = prof;
                        local.ready_at = ready_at;
                    }
                    let _ = ack.send(());
                }
                Cmd::Drain { idx, sig } => self.drain(idx, sig),
                Cmd::Kill { idx, ack } => {
                    self.unlisten(idx);
                    for slot in self.slots_of(idx) {
                        self.close(slot, true);
                    }
                    let _ = ack.send(());
                }
                Cmd::CloseStreams {
                    idx,
                    code,
                    grpc_status,
                    ack,
                } => {
                    for slot in self.slots_of(idx) {
                        self.drive(slot, |c, cx| c.close_streams(code, grpc_status, cx));
                    }
                    let _ = ack.send(());
                }
                Cmd::Restart {
                    idx,
                    listener,
                    ready_at,
                    ack,
                } => {
                    let listener = self.listen(idx, listener);
                    if let Some(Some(local)) = self.insts.get_mut(idx) {
                        local.listener = listener;
                        local.ready_at = ready_at;
                        local.draining = false;
                        if let Some(sig) = local.drain.take() {
                            sig.done();
                        }
                    }
                    let _ = ack.send(());
                }
                Cmd::Stop => self.stop = true,
            }
        }
    }

    fn drain(&mut self, idx: usize, sig: Arc<DrainSignal>) {
        // Take what is already queued on the listener, then stop listening.
        self.accept(idx);
        self.unlisten(idx);
        let Some(Some(local)) = self.insts.get_mut(idx) else {
            sig.done();
            return;
        };
        local.draining = true;
        if let Some(old) = local.drain.replace(sig) {
            old.done();
        }
        for slot in self.slots_of(idx) {
            self.drive(slot, |c, cx| c.start_drain(cx));
        }
        if let Some(Some(local)) = self.insts.get_mut(idx) {
            if local.conns == 0 {
                if let Some(sig) = local.drain.take() {
                    sig.done();
                }
            }
        }
    }
}
