//! The in-process fleet: instances (each a listener and a profile), served by a few event-loop
//! threads, operated live (profile changes, add, drain, kill, restart) and counted.

use crate::compiled::Compiled;
use crate::counters::InstCounters;
use crate::error::Error;
use crate::sys::{bind_listener, mono_ns};
use crate::worker::{self, Cmd, DrainSignal, Handle};
use setup::profile::Profile;
use setup::profile::SpecError;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One instance to start: its name (`X-Backend`), address (port 0 picks one) and behaviour.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InstanceConfig {
    /// Name, unique in the fleet, sent in every response's `X-Backend` header.
    pub name: String,
    /// Listen address; port 0 lets the OS choose (see [`Fleet::addrs`]).
    pub addr: SocketAddr,
    /// Behaviour profile.
    #[serde(default)]
    pub profile: Profile,
}

/// A whole fleet to start.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetConfig {
    /// Instances, started in order.
    pub instances: Vec<InstanceConfig>,
    /// Event-loop threads shared by all instances (at least 1).
    pub threads: usize,
    /// Seed of the loops' random generators (latency, status and size draws).
    pub seed: u64,
}

impl Default for FleetConfig {
    fn default() -> FleetConfig {
        FleetConfig {
            instances: Vec::new(),
            threads: 1,
            seed: 1,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    Draining,
    Stopped,
    Killed,
}

struct Entry {
    name: String,
    addr: SocketAddr,
    profile: Profile,
    compiled: Arc<Compiled>,
    ctr: Arc<InstCounters>,
    state: State,
    started: u64,
    drain: Option<Arc<DrainSignal>>,
}

impl Entry {
    /// The state with a finished drain folded in.
    fn state(&mut self) -> State {
        if self.state == State::Draining && self.drain.as_ref().is_none_or(|d| d.is_done()) {
            self.state = State::Stopped;
            self.drain = None;
        }
        self.state
    }

    fn state_name(&mut self) -> &'static str {
        match self.state() {
            State::Running => {
                let slow = self.compiled.slow_start_ns;
                if slow > 0 && mono_ns() < self.started + slow {
                    "starting"
                } else {
                    "running"
                }
            }
            State::Draining => "draining",
            State::Stopped => "stopped",
            State::Killed => "killed",
        }
    }

    fn ready_at(&self) -> u64 {
        match self.compiled.slow_start_ns {
            0 => 0,
            s => self.started + s,
        }
    }
}

/// A drain under way; wait on it to know when the instance has stopped.
pub struct DrainHandle {
    sig: Arc<DrainSignal>,
}

impl DrainHandle {
    /// Blocks until every connection of the instance has closed.
    pub fn wait(&self) {
        self.sig.wait(None);
    }

    /// Blocks at most `timeout`; true if the drain finished.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.sig.wait(Some(timeout))
    }

    /// True once the drain has finished.
    pub fn is_done(&self) -> bool {
        self.sig.is_done()
    }
}

/// An in-process fleet of emulated backends, served by event-loop threads named
/// `pb-backend-N` (so a bench can attribute their CPU from `/proc/self/task`).
pub struct Fleet {
    loops: Vec<Handle>,
    joins: Mutex<Vec<JoinHandle<()>>>,
    reg: Mutex<Vec<Entry>>,
    stopped: AtomicBool,
}

impl Fleet {
    /// Starts the event loops and every instance of `cfg`.
    pub fn start(cfg: FleetConfig) -> std::io::Result<Fleet> {
        let threads = cfg.threads.max(1);
        let mut loops = Vec::with_capacity(threads);
        let mut joins = Vec::with_capacity(threads);
        for i in 0..threads {
            let (h, j) = worker::spawn(i, cfg.seed)?;
            loops.push(h);
            joins.push(j);
        }
        let fleet = Fleet {
            loops,
            joins: Mutex::new(joins),
            reg: Mutex::new(Vec::new()),
            stopped: AtomicBool::new(false),
        };
        for inst in cfg.instances {
            fleet.add(inst)?;
        }
        Ok(fleet)
    }

    fn reg(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.reg.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_running(&self) -> Result<(), Error> {
        if self.stopped.load(Ordering::SeqCst) {
            Err(Error::Stopped)
        } else {
            Ok(())
        }
    }

    /// Sends one command to each loop and waits until all have carried it out.
    fn broadcast(&self, mut mk: impl FnMut(Sender<()>) -> Cmd) -> Result<(), Error> {
        let (tx, rx) = channel();
        for h in &self.loops {
            if !h.send(mk(tx.clone())) {
                return Err(Error::Stopped);
            }
        }
        drop(tx);
        for _ in &self.loops {
            rx.recv().map_err(|_| Error::Stopped)?;
        }
        Ok(())
    }

    fn find<'a>(reg: &'a mut [Entry], name: &str) -> Result<(usize, &'a mut Entry), Error> {
        reg.iter_mut()
            .enumerate()
            .find(|(_, e)| e.name == name)
            .ok_or_else(|| Error::UnknownInstance(name.to_string()))
    }

    /// Bound addresses by instance name, in the order instances were added (port 0 resolved).
    pub fn addrs(&self) -> Vec<(String, SocketAddr)> {
        self.reg()
            .iter()
            .map(|e| (e.name.clone(), e.addr))
            .collect()
    }

    /// Every instance's current configuration (name, bound address, profile).
    pub fn instances(&self) -> Vec<InstanceConfig> {
        self.reg()
            .iter()
            .map(|e| InstanceConfig {
                name: e.name.clone(),
                addr: e.addr,
                profile: e.profile.clone(),
            })
            .collect()
    }

    /// Adds and starts an instance; returns its bound address.
    pub fn add(&self, inst: InstanceConfig) -> std::io::Result<SocketAddr> {
        self.try_add(inst).map_err(Into::into)
    }

    /// [`Fleet::add`] with the fleet's own error type.
    pub fn try_add(&self, inst: InstanceConfig) -> Result<SocketAddr, Error> {
        self.check_running()?;
        let name = inst.name;
        if name.is_empty() || name.len() > 200 || !name.bytes().all(|c| c.is_ascii_graphic()) {
            return Err(Error::Spec(SpecError(format!(
                "instance name '{name}' must be 1-200 visible ASCII characters"
            ))));
        }
        let mut reg = self.reg();
        if reg.iter().any(|e| e.name == name) {
            return Err(Error::Duplicate(name));
        }
        let listener = bind_listener(inst.addr)
            .map_err(|e| Error::io(format!("{name}: cannot listen on {}", inst.addr), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io(format!("{name}: local address"), e))?;
        let mut listeners = clones(listener, self.loops.len(), &name)?;
        let compiled = Arc::new(Compiled::new(&name, &inst.profile, None));
        let ctr = Arc::new(InstCounters::new(self.loops.len()));
        let entry = Entry {
            name,
            addr,
            profile: inst.profile,
            compiled: compiled.clone(),
            ctr: ctr.clone(),
            state: State::Running,
            started: mono_ns(),
            drain: None,
        };
        let idx = reg.len();
        let ready_at = entry.ready_at();
        reg.push(entry);
        self.broadcast(|ack| Cmd::Add {
            idx,
            listener: listeners.pop().expect("one listener per loop"),
            prof: compiled.clone(),
            ctr: ctr.clone(),
            ready_at,
            ack,
        })?;
        Ok(addr)
    }

    /// Replaces an instance's profile; requests received from now on follow it (responses
    /// already decided keep their latency, status and size).
    pub fn set_profile(&self, name: &str, p: Profile) -> Result<(), Error> {
        self.check_running()?;
        let mut reg = self.reg();
        let (idx, e) = Self::find(&mut reg, name)?;
        let compiled = Arc::new(Compiled::new(&e.name, &p, Some(&e.compiled)));
        e.compiled = compiled.clone();
        e.profile = p;
        let ready_at = e.ready_at();
        self.broadcast(|ack| Cmd::SetProfile {
            idx,
            prof: compiled.clone(),
            ready_at,
            ack,
        })
    }

    /// Drains an instance and returns when it has stopped: it stops accepting (connects are
    /// refused), finishes every request in flight, answers further requests on open connections
    /// with `Connection: close`, closes idle keep-alive connections after 500 ms, then stops.
    pub fn drain(&self, name: &str) -> Result<(), Error> {
        self.drain_async(name)?.wait();
        Ok(())
    }

    /// Starts a drain and returns at once; the handle tells when it is done.
    pub fn drain_async(&self, name: &str) -> Result<DrainHandle, Error> {
        self.check_running()?;
        self.start_drain(name)
    }

    fn start_drain(&self, name: &str) -> Result<DrainHandle, Error> {
        let mut reg = self.reg();
        let (idx, e) = Self::find(&mut reg, name)?;
        if e.state() != State::Running {
            return Err(Error::State {
                name: e.name.clone(),
                state: e.state_name().into(),
                op: "drain",
            });
        }
        let sig = DrainSignal::new(self.loops.len());
        e.state = State::Draining;
        e.drain = Some(sig.clone());
        for h in &self.loops {
            if !h.send(Cmd::Drain {
                idx,
                sig: sig.clone(),
            }) {
                return Err(Error::Stopped);
            }
        }
        Ok(DrainHandle { sig })
    }

    /// Stops an instance abruptly: closes its listener (connects are refused) and resets every
    /// connection (SO_LINGER 0), whatever it was doing.
    pub fn kill(&self, name: &str) -> Result<(), Error> {
        self.check_running()?;
        self.kill_inner(name)
    }

    fn kill_inner(&self, name: &str) -> Result<(), Error> {
        let mut reg = self.reg();
        let (idx, e) = Self::find(&mut reg, name)?;
        match e.state() {
            State::Running | State::Draining => {}
            _ => {
                return Err(Error::State {
                    name: e.name.clone(),
                    state: e.state_name().into(),
                    op: "kill",
                })
            }
        }
        e.state = State::Killed;
        e.drain = None;
        self.broadcast(|ack| Cmd::Kill { idx, ack })
    }

    /// Ends every long-lived connection of an instance at once, the way a server going away
    /// would: each WebSocket with a close frame of `code` (1000 to 4999, not one of the codes
    /// RFC 6455 reserves for the absence of a frame: 1004, 1005, 1006, 1015), each event stream
    /// with the end of its response, each gRPC server stream with `grpc_status` (0 to 16).
    /// Ordinary HTTP and the listener are left alone.
    pub fn close_streams(&self, name: &str, code: u16, grpc_status: u16) -> Result<(), Error> {
        self.check_running()?;
        if !(1000..=4999).contains(&code) || matches!(code, 1004 | 1005 | 1006 | 1015) {
            return Err(Error::Spec(SpecError(format!(
                "close code {code} cannot be sent: use 1000-4999 except 1004, 1005, 1006 and 1015"
            ))));
        }
        if grpc_status > 16 {
            return Err(Error::Spec(SpecError(format!(
                "grpc-status {grpc_status} is not a gRPC status code (0-16)"
            ))));
        }
        let mut reg = self.reg();
        let (idx, _) = Self::find(&mut reg, name)?;
        self.broadcast(|ack| Cmd::CloseStreams {
            idx,
            code,
            grpc_status,
            ack,
        })
    }

    /// Brings a drained or killed instance back on the same address (slow start begins again).
    pub fn restart(&self, name: &str) -> Result<(), Error> {
        self.check_running()?;
        let mut reg = self.reg();
        let (idx, e) = Self::find(&mut reg, name)?;
        match e.state() {
            State::Stopped | State::Killed => {}
            _ => {
                return Err(Error::State {
                    name: e.name.clone(),
                    state: e.state_name().into(),
                    op: "restart",
                })
            }
        }
        let listener = rebind(e.addr)
            .map_err(|err| Error::io(format!("{}: cannot listen on {}", e.name, e.addr), err))?;
        let mut listeners = clones(listener, self.loops.len(), &e.name)?;
        e.started = mono_ns();
        e.state = State::Running;
        let ready_at = e.ready_at();
        self.broadcast(|ack| Cmd::Restart {
            idx,
            listener: listeners.pop().expect("one listener per loop"),
            ready_at,
            ack,
        })
    }

    /// Every instance's counters: responses by status, in flight, bytes, connections, state.
    pub fn counters(&self) -> Vec<model::BackendCounters> {
        self.reg()
            .iter_mut()
            .map(|e| {
                let state = e.state_name();
                e.ctr.snapshot(&e.name, &e.addr.to_string(), state)
            })
            .collect()
    }

    /// Graceful stop of everything: drains every running instance (up to 10 s), resets what is
    /// left, and joins the event loops.
    pub fn shutdown(self) {
        self.close(Duration::from_secs(10));
    }

    /// [`Fleet::shutdown`] through a shared reference (for a fleet behind an `Arc`), with its
    /// own grace period. Later operations fail with [`Error::Stopped`].
    pub fn close(&self, grace: Duration) {
        if self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        let deadline = Instant::now() + grace;
        let names: Vec<String> = self.reg().iter().map(|e| e.name.clone()).collect();
        let drains: Vec<(String, DrainHandle)> = names
            .iter()
            .filter_map(|n| self.start_drain(n).ok().map(|h| (n.clone(), h)))
            .collect();
        for (name, h) in drains {
            let left = deadline.saturating_duration_since(Instant::now());
            if !h.wait_timeout(left) {
                let _ = self.kill_inner(&name);
            }
        }
        // Instances still draining from an earlier call have had their chance too.
        let draining: Vec<String> = self
            .reg()
            .iter_mut()
            .filter_map(|e| (e.state() == State::Draining).then(|| e.name.clone()))
            .collect();
        for name in draining {
            let _ = self.kill_inner(&name);
        }
        self.stop_loops();
    }

    fn stop_loops(&self) {
        for h in &self.loops {
            h.send(Cmd::Stop);
        }
        let joins = std::mem::take(&mut *self.joins.lock().unwrap_or_else(|e| e.into_inner()));
        for j in joins {
            let _ = j.join();
        }
    }
}

impl Drop for Fleet {
    /// Dropping without [`Fleet::shutdown`] stops the loops at once (connections close).
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.stop_loops();
    }
}

/// One listener per loop: the original and dups of it.
fn clones(
    l: std::net::TcpListener,
    n: usize,
    name: &str,
) -> Result<Vec<std::net::TcpListener>, Error> {
    let mut v = Vec::with_capacity(n);
    for _ in 1..n {
        v.push(
            l.try_clone()
                .map_err(|e| Error::io(format!("{name}: cannot share the listener"), e))?,
        );
    }
    v.push(l);
    Ok(v)
}

/// Binds `addr` again, retrying briefly while the old socket is still going away.
fn rebind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match bind_listener(addr) {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            r => return r,
        }
    }
}
