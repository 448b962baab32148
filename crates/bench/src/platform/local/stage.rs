//! Everything one case stands up, and the actions that change it while the loads run: the backend
//! fleet, the proxy replicas sharing the listener ports (through the kind's [`proxy::Driver`],
//! never a proxy's own module), and the config they serve. Dropping a stack stops every process
//! it started.

use crate::error::StackError;
use crate::platform::{Applied, Down, Served, StackSpec, Stage};
use backend::{DrainHandle, Fleet, FleetConfig, InstanceConfig, Profile};
use model::{Event, ReloadRecord};
use proxy::config::ProxyConfig;
use proxy::{Driver, RenderContext, Rendered, Replica, ReplicaHandle, StopMode};
use scenario::{Action, RemoveMode, StopSpec};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod act;

/// `n` distinct ports on 127.0.0.1 the OS just handed out, all held open until every one is
/// chosen: ports picked one after another, each released before the next, can repeat, and two
/// listeners of one proxy then share a port.
pub fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let held = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    held.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

/// `n` distinct free ports none of which is in `taken`, then added to it. A port handed out to
/// one listener is free again until its proxy binds it, so the next pick (a replica's admin
/// port, a grown listener) can return it: seen in CI as "listener 'https' and the admin listener
/// both use port 37279". A stack keeps every port it gave out in `taken` and never repeats one.
fn fresh_ports(taken: &mut BTreeSet<u16>, n: usize) -> Result<Vec<u16>, StackError> {
    for _ in 0..100 {
        let ports = free_ports(n).map_err(StackError::NoFreePort)?;
        if ports.iter().all(|p| !taken.contains(p)) {
            taken.extend(ports.iter().copied());
            return Ok(ports);
        }
    }
    Err(StackError::NoFreePort(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!("100 tries at {n} free port(s) all returned one this stack already uses"),
    )))
}

/// The running stack of one case.
pub struct Stack {
    /// The backend fleet.
    pub fleet: Fleet,
    /// Backend instances each group currently contributes to the proxy's upstreams, by name.
    members: BTreeMap<String, Vec<String>>,
    /// The profile new instances of each group start with.
    group_profiles: BTreeMap<String, Profile>,
    /// Next instance index per group (names are never reused).
    next_index: BTreeMap<String, u32>,
    /// Fixed first address of the groups that have one (`listen`): instance i is on port + i.
    group_listen: BTreeMap<String, SocketAddr>,
    /// The config, generation, listener ports, certificate and time origin served.
    served: Served,
    /// The driver of the proxy kind under test.
    driver: &'static dyn Driver,
    /// Alternatives for `swap_config`.
    configs: BTreeMap<String, ProxyConfig>,
    /// Every port this stack gave out (listeners, and each replica's admin and control ports,
    /// stopped replicas' too): none is handed out twice.
    taken: BTreeSet<u16>,
    /// Running replicas, oldest first.
    replicas: Vec<Box<dyn Replica>>,
    /// Replicas that were stopped (their logs still count).
    stopped: Vec<Box<dyn Replica>>,
    next_replica: u32,
    /// Where replica prefixes live.
    work: PathBuf,
    /// Where each rendered config is copied (`configs/<case>/`).
    configs_out: PathBuf,
    /// Where `exec` actions' output goes (`exec/<case>/`).
    exec_out: PathBuf,
    /// `exec` actions run so far (numbers their output files).
    execs: u32,
    /// Handles for collectors on other threads, kept in step with `replicas`.
    handles: Arc<Mutex<Vec<ReplicaHandle>>>,
    drains: Vec<(String, DrainHandle)>,
}

impl Stack {
    /// Starts the fleet, then the proxy replicas (each config checked by the proxy's own checker
    /// first).
    pub fn up(spec: StackSpec<'_>) -> Result<Stack, StackError> {
        let mut instances = Vec::new();
        let mut members = BTreeMap::new();
        let mut next_index = BTreeMap::new();
        let mut group_profiles = BTreeMap::new();
        let mut group_listen = BTreeMap::new();
        for g in spec.backends {
            let names: Vec<String> = (0..g.count).map(|i| format!("{}-{i}", g.name)).collect();
            if let Some(a) = g.listen {
                group_listen.insert(g.name.clone(), a);
            }
            for (i, n) in names.iter().enumerate() {
                instances.push(InstanceConfig {
                    name: n.clone(),
                    addr: member_addr(g.listen, i as u32),
                    profile: g.profile.clone(),
                });
            }
            members.insert(g.name.clone(), names);
            next_index.insert(g.name.clone(), g.count);
            group_profiles.insert(g.name.clone(), g.profile.clone());
        }
        let fleet = Fleet::start(FleetConfig {
            instances,
            threads: spec.backend_threads,
            seed: spec.seed,
        })
        .map_err(StackError::Backends)?;
        for dir in [&spec.work, &spec.configs_out] {
            fs::create_dir_all(dir).map_err(|source| StackError::Io {
                path: dir.clone(),
                source,
            })?;
        }
        let mut ports = BTreeMap::new();
        let mut taken = BTreeSet::new();
        if let Some(p) = spec.proxy {
            taken.extend(p.listeners.iter().filter_map(|l| l.port));
            let unset = p.listeners.iter().filter(|l| l.port.is_none()).count();
            let mut free = fresh_ports(&mut taken, unset)?.into_iter();
            for l in &p.listeners {
                let port = match l.port {
                    Some(p) => p,
                    None => free.next().expect("one free port per listener without one"),
                };
                ports.insert(l.name.clone(), port);
            }
        }
        let mut stack = Stack {
            fleet,
            members,
            group_profiles,
            next_index,
            group_listen,
            served: Served {
                config: spec.proxy.cloned(),
                generation: 1,
                ports,
                tls: spec.tls,
                origin: spec.origin,
            },
            driver: proxy::driver(spec.proxy.map(|p| p.kind).unwrap_or_default()),
            configs: spec.configs.clone(),
            taken,
            replicas: Vec::new(),
            stopped: Vec::new(),
            next_replica: 0,
            work: spec.work,
            configs_out: spec.configs_out,
            exec_out: spec.exec_out,
            execs: 0,
            handles: Arc::new(Mutex::new(Vec::new())),
            drains: Vec::new(),
        };
        if let Some(p) = spec.proxy {
            for _ in 0..p.replicas {
                stack.start_replica()?;
            }
        }
        Ok(stack)
    }

    /// Listener name to port.
    pub fn ports(&self) -> &BTreeMap<String, u16> {
        &self.served.ports
    }

    /// The port of the first listener that is (or is not) TLS.
    pub fn listener_port(&self, tls: bool) -> Option<u16> {
        let cfg = self.served.config.as_ref()?;
        let l = cfg.listeners.iter().find(|l| l.tls == tls)?;
        self.served.ports.get(&l.name).copied()
    }

    /// The address of a group's first current member (for loads that bypass the proxy).
    pub fn first_backend(&self, group: &str) -> Option<SocketAddr> {
        let name = self.members.get(group)?.first()?;
        self.addr_of(name)
    }

    fn addr_of(&self, name: &str) -> Option<SocketAddr> {
        self.fleet
            .addrs()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a)
    }

    /// The external target's attach settings, when the case's proxy is one the user runs.
    pub fn external(&self) -> Option<&proxy::config::External> {
        self.served
            .config
            .as_ref()
            .and_then(|c| c.external.as_ref())
    }

    /// Collector handles, updated as replicas come and go.
    pub fn handles(&self) -> Arc<Mutex<Vec<ReplicaHandle>>> {
        self.handles.clone()
    }

    /// Names of the running replicas.
    pub fn replica_names(&self) -> Vec<String> {
        self.replicas.iter().map(|r| r.name().to_string()).collect()
    }

    fn publish_handles(&self) {
        let hs = self.replicas.iter().map(|r| r.handle()).collect();
        *self.handles.lock().unwrap_or_else(|e| e.into_inner()) = hs;
    }

    fn render_for(
        &self,
        cfg: &ProxyConfig,
        dir: &Path,
        (admin_port, control_port): (u16, u16),
    ) -> Result<Rendered, StackError> {
        let addrs = self.fleet.addrs();
        let groups = self
            .members
            .iter()
            .map(|(g, names)| {
                let a = names
                    .iter()
                    .filter_map(|n| addrs.iter().find(|(x, _)| x == n).map(|(_, a)| *a))
                    .collect();
                (g.clone(), a)
            })
            .collect();
        let ctx = RenderContext {
            prefix: dir.to_path_buf(),
            generation: self.served.generation,
            groups,
            ports: self.served.ports.clone(),
            admin_port,
            control_port,
            tls: self.served.tls.clone(),
            ..RenderContext::default()
        };
        let rendered = self.driver.render(cfg, &ctx)?;
        let name = dir
            .file_name()
            .and_then(|s| s.to_str())
            .unwrap_or(self.driver.name());
        let ext = rendered.file.rsplit('.').next().unwrap_or("conf");
        let _ = fs::write(
            self.configs_out
                .join(format!("{name}.gen{}.{ext}", self.served.generation)),
            &rendered.text,
        );
        Ok(rendered)
    }

    fn start_replica(&mut self) -> Result<String, StackError> {
        let cfg = self.served.config.clone().ok_or(StackError::NoProxy)?;
        let name = format!("{}-{}", self.driver.name(), self.next_replica);
        self.next_replica += 1;
        let dir = self.work.join(&name);
        let [admin, control] = fresh_ports(&mut self.taken, 2)?
            .try_into()
            .expect("two ports");
        let rendered = self.render_for(&cfg, &dir, (admin, control))?;
        let ctx = RenderContext {
            prefix: dir.clone(),
            generation: self.served.generation,
            admin_port: admin,
            control_port: control,
            ..RenderContext::default()
        };
        // Every process the replica starts (a master and the workers it forks) runs on the CPUs
        // the scenario pins the proxy to.
        let r = {
            let _pinned = proxy::PinSpawns::new(cfg.cpus.as_ref());
            self.driver.start(&name, &ctx, &rendered)?
        };
        self.replicas.push(r);
        self.publish_handles();
        Ok(name)
    }

    /// Re-renders the current config as a new generation and reloads every running replica.
    fn reload_all(&mut self) -> (Vec<ReloadRecord>, Option<StackError>) {
        let Some(cfg) = self.served.config.clone() else {
            return (Vec::new(), Some(StackError::NoProxy));
        };
        if cfg.external.as_ref().is_some_and(|e| e.reload.is_empty()) {
            // An external target without a reload command: the user's proxy config already
            // names every backend port it may use; there is nothing to reload.
            return (Vec::new(), None);
        }
        self.served.generation += 1;
        let mut records = Vec::new();
        let mut err = None;
        for i in 0..self.replicas.len() {
            let dir = self.replicas[i].dir().to_path_buf();
            let ports = (
                self.replicas[i].admin_port(),
                self.replicas[i].control_port(),
            );
            match self.render_for(&cfg, &dir, ports) {
                Ok(rendered) => {
                    let rec = self.replicas[i].reload(
                        &rendered,
                        self.served.generation,
                        self.served.origin,
                    );
                    if let Some(e) = &rec.error {
                        err.get_or_insert_with(|| StackError::Reload(e.clone()));
                    }
                    records.push(rec);
                }
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
        }
        (records, err)
    }

    fn add_backend(&mut self, group: &str) -> Result<String, StackError> {
        let idx = self.next_index.entry(group.to_string()).or_insert(0);
        let name = format!("{group}-{idx}");
        *idx += 1;
        let inst = InstanceConfig {
            name: name.clone(),
            addr: member_addr(self.group_listen.get(group).copied(), *idx - 1),
            profile: self.group_profiles.get(group).cloned().unwrap_or_default(),
        };
        self.fleet
            .add(inst)
            .map_err(|source| StackError::AddBackend {
                name: name.clone(),
                source,
            })?;
        self.members
            .entry(group.to_string())
            .or_default()
            .push(name.clone());
        Ok(name)
    }

    fn scale_backends(
        &mut self,
        group: &str,
        to: u32,
        remove: RemoveMode,
    ) -> (Result<(), StackError>, Vec<ReloadRecord>) {
        let current = self.members.get(group).cloned().unwrap_or_default();
        let n = current.len() as u32;
        if to > n {
            for _ in n..to {
                if let Err(e) = self.add_backend(group) {
                    return (Err(e), Vec::new());
                }
            }
            let (rel, err) = self.reload_all();
            (err.map_or(Ok(()), Err), rel)
        } else if to < n {
            let gone: Vec<String> = current[to as usize..].to_vec();
            self.members
                .insert(group.to_string(), current[..to as usize].to_vec());
            let mut first_err = None;
            if remove == RemoveMode::Kill {
                for g in &gone {
                    if let Err(e) = self.fleet.kill(g) {
                        first_err.get_or_insert(e.into());
                    }
                }
            }
            let (mut rel, err) = self.reload_all();
            if let Some(e) = err {
                first_err.get_or_insert(e);
            }
            if remove == RemoveMode::Drain {
                // A drained backend must never meet the proxy again: wait until the processes
                // of the old generation, which still route to it, have exited.
                proxy::driver::settle_reloads(&mut rel);
                for g in gone {
                    match self.fleet.drain_async(&g) {
                        Ok(h) => self.drains.push((g, h)),
                        Err(e) => {
                            first_err.get_or_insert(e.into());
                        }
                    }
                }
            }
            (first_err.map_or(Ok(()), Err), rel)
        } else {
            (Ok(()), Vec::new())
        }
    }

    fn scale_replicas(&mut self, to: u32, stop: StopSpec) -> Result<(), StackError> {
        while (self.replicas.len() as u32) < to {
            self.start_replica()?;
        }
        while (self.replicas.len() as u32) > to {
            self.stop_replica(None, stop)?;
        }
        Ok(())
    }

    fn stop_replica(&mut self, name: Option<&str>, mode: StopSpec) -> Result<String, StackError> {
        let idx = match name {
            Some(n) => self
                .replicas
                .iter()
                .position(|r| r.name() == n)
                .ok_or_else(|| StackError::NoSuchReplica(n.to_string()))?,
            None if self.replicas.is_empty() => return Err(StackError::NoReplica),
            None => self.replicas.len() - 1,
        };
        if self.replicas.len() == 1 && name.is_none() {
            // Stopping the last replica is allowed when named explicitly only.
            return Err(StackError::LastReplica);
        }
        let mut r = self.replicas.remove(idx);
        self.publish_handles();
        let mode = match mode {
            StopSpec::Graceful => StopMode::Graceful,
            StopSpec::Fast => StopMode::Fast,
            StopSpec::Kill => StopMode::Kill,
        };
        let res = r.stop(mode).map_err(StackError::from);
        let n = r.name().to_string();
        self.stopped.push(r);
        res.map(|_| n)
    }

    /// Stops every replica gracefully and waits for drains; returns the log files of every
    /// replica that ran, by replica name, and any teardown error.
    pub fn down(&mut self) -> (Vec<(String, proxy::LogFiles)>, Option<StackError>) {
        let mut err = None;
        while let Some(mut r) = self.replicas.pop() {
            // A proxy proxybench attached to (an external target) is left running.
            if r.attached() {
                self.stopped.push(r);
                continue;
            }
            if let Err(e) = r.stop(StopMode::Graceful) {
                err.get_or_insert(e.into());
            }
            self.stopped.push(r);
        }
        self.publish_handles();
        for (name, h) in self.drains.drain(..) {
            if !h.wait_timeout(std::time::Duration::from_secs(10)) {
                err.get_or_insert(StackError::Drain(name));
            }
        }
        let mut logs: Vec<(String, proxy::LogFiles)> = self
            .stopped
            .iter()
            .map(|r| (r.name().to_string(), r.logs()))
            .collect();
        logs.sort_by(|a, b| a.0.cmp(&b.0));
        (logs, err)
    }
}

/// The address of member `i` of a group: port + i of its `listen` address, or a port the OS
/// picks.
fn member_addr(listen: Option<SocketAddr>, i: u32) -> SocketAddr {
    match listen {
        Some(a) => SocketAddr::new(a.ip(), (u32::from(a.port()) + i).min(65535) as u16),
        None => SocketAddr::from(([127, 0, 0, 1], 0)),
    }
}

/// What a single-event step did: the event's detail, its outcome, and the reloads it caused.
struct Done {
    detail: String,
    result: Result<(), StackError>,
    reloads: Vec<ReloadRecord>,
}

impl Done {
    fn new(detail: String, result: Result<(), StackError>) -> Done {
        Done {
            detail,
            result,
            reloads: Vec::new(),
        }
    }

    fn with_reloads(mut self, reloads: Vec<ReloadRecord>) -> Done {
        self.reloads = reloads;
        self
    }

    /// The step's event: action `name`, begun at `t0`, on the case's clock from `origin`.
    fn event(&self, name: &str, t0: Instant, origin: Instant) -> Event {
        Event {
            t_s: t0.duration_since(origin).as_secs_f64(),
            action: name.to_string(),
            detail: self.detail.clone(),
            duration_ms: t0.elapsed().as_secs_f64() * 1e3,
            error: self.result.as_ref().err().map(|e| e.to_string()),
            limit: false,
        }
    }
}

impl crate::grow::Grower for Stack {
    fn served(&self) -> &Served {
        &self.served
    }

    fn served_mut(&mut self) -> &mut Served {
        &mut self.served
    }

    fn reload_all(&mut self) -> (Vec<ReloadRecord>, Option<StackError>) {
        Stack::reload_all(self)
    }

    fn add_listener_port(&mut self, name: &str) -> Result<u16, StackError> {
        // The proxy listens on the others, but a listener added earlier in this step may not be
        // bound yet: never hand out a port the stack already gave out.
        let port = fresh_ports(&mut self.taken, 1)?[0];
        self.served.ports.insert(name.to_string(), port);
        Ok(port)
    }

    fn group_size(&self, group: &str) -> u32 {
        self.members.get(group).map_or(0, |m| m.len() as u32)
    }

    fn add_backends(&mut self, group: &str, n: u32) -> Result<(), StackError> {
        for _ in 0..n {
            self.add_backend(group)?;
        }
        Ok(())
    }

    fn ready_poll(&self) -> Duration {
        crate::grow::LOCAL_POLL
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        for r in self.replicas.iter_mut().filter(|r| !r.attached()) {
            let _ = r.stop(StopMode::Kill);
        }
        self.fleet.close(std::time::Duration::from_secs(2));
    }
}

/// Runs an `exec` action's command (the `n`th of the case), its output saved as
/// `<exec_out>/<n>-<program>.stdout` and `.stderr`: the event's detail (the command and its exit
/// code) and its outcome. Every platform runs `exec` on this machine.
pub fn run_exec(
    exec_out: &Path,
    n: u32,
    argv: &[String],
    timeout: Duration,
    allow_fail: bool,
) -> (String, Result<(), StackError>) {
    let program = argv
        .first()
        .and_then(|p| Path::new(p).file_name())
        .and_then(|p| p.to_str())
        .unwrap_or("exec");
    let safe: String = program
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let base = exec_out.join(format!("{n}-{safe}"));
    let command = argv.join(" ");
    if let Err(source) = fs::create_dir_all(exec_out) {
        let e = StackError::Io {
            path: exec_out.to_path_buf(),
            source,
        };
        return (command, Err(e));
    }
    let out = base.with_extension("stdout");
    let err = base.with_extension("stderr");
    let (outcome, failure) = match proxy::run_bounded(argv, timeout, &out, &err) {
        Ok(ran) => match ran.status {
            Some(s) if s.success() => ("exit 0".to_string(), None),
            Some(s) => {
                let said = match s.code() {
                    Some(c) => format!("exit {c}"),
                    None => format!("{s}"),
                };
                (said.clone(), Some(said))
            }
            None => (
                format!("timed out after {timeout:?}, killed"),
                Some(format!("timed out after {timeout:?}; killed")),
            ),
        },
        Err(e) => ("not run".to_string(), Some(e.to_string())),
    };
    let allowed = if failure.is_some() && allow_fail {
        " (allow_fail)"
    } else {
        ""
    };
    let detail = format!("`{command}`: {outcome}{allowed}");
    let result = match failure {
        Some(f) if !allow_fail => Err(StackError::Exec(format!("`{command}`: {f}"))),
        _ => Ok(()),
    };
    (detail, result)
}

impl Stage for Stack {
    fn ports(&self) -> &BTreeMap<String, u16> {
        Stack::ports(self)
    }

    fn listener_port(&self, tls: bool) -> Option<u16> {
        Stack::listener_port(self, tls)
    }

    fn first_backend(&self, group: &str) -> Option<SocketAddr> {
        Stack::first_backend(self, group)
    }

    fn external(&self) -> Option<&proxy::config::External> {
        Stack::external(self)
    }

    fn serving(&mut self, origin: Instant) {
        self.served.origin = origin;
    }

    fn handles(&self) -> Arc<Mutex<Vec<ReplicaHandle>>> {
        Stack::handles(self)
    }

    fn apply(&mut self, action: &Action, keep_going: &dyn Fn() -> bool) -> Applied {
        Stack::apply(self, action, keep_going)
    }

    fn down(&mut self) -> Down {
        let (logs, err) = Stack::down(self);
        Down {
            logs,
            backends: self.fleet.counters(),
            cluster: None,
            err,
            notes: Vec::new(),
            missed: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn ports_chosen_together_are_distinct() {
        // Chosen one by one, released in between, 64 ports repeated one now and then on a busy
        // machine; held together they cannot.
        for _ in 0..20 {
            let ports = free_ports(64).unwrap();
            let distinct: BTreeSet<u16> = ports.iter().copied().collect();
            assert_eq!(distinct.len(), 64, "{ports:?}");
            assert!(ports.iter().all(|&p| p != 0));
        }
    }

    #[test]
    fn a_stack_never_hands_out_a_port_twice() {
        // Ports given to listeners are released until the proxy binds them, so the OS may offer
        // them again; the stack's own record keeps the next pick (an admin port) off them.
        let mut taken = BTreeSet::new();
        let mut given = Vec::new();
        for _ in 0..200 {
            given.extend(fresh_ports(&mut taken, 3).unwrap());
        }
        let distinct: BTreeSet<u16> = given.iter().copied().collect();
        assert_eq!(distinct.len(), 600);
        assert_eq!(distinct, taken);
    }
}
