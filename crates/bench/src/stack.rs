//! Everything one case stands up, and the actions that change it while the loads run: the backend
//! fleet, the nginx replicas sharing the listener ports, and the config they serve. Dropping a
//! stack stops every process it started.

use crate::scenario::{Action, BackendGroup, RemoveMode, StopSpec};
use backend::{DrainHandle, Fleet, FleetConfig, InstanceConfig, Profile};
use model::{Event, ReloadRecord};
use proxy::config::ProxyConfig;
use proxy::nginx::{self, RenderContext, Replica, ReplicaHandle, StopMode, TlsFiles};
use std::collections::BTreeMap;
use std::fs;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A port on 127.0.0.1 that the OS just handed out (held open for a moment, then released).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The running stack of one case.
pub struct Stack {
    /// The backend fleet.
    pub fleet: Fleet,
    /// Backend instances each group currently contributes to nginx's upstreams, by name.
    members: BTreeMap<String, Vec<String>>,
    /// The profile new instances of each group start with.
    group_profiles: BTreeMap<String, Profile>,
    /// Next instance index per group (names are never reused).
    next_index: BTreeMap<String, u32>,
    /// The config being served, if there is a proxy.
    config: Option<ProxyConfig>,
    /// Alternatives for `swap_config`.
    configs: BTreeMap<String, ProxyConfig>,
    generation: u64,
    ports: BTreeMap<String, u16>,
    tls: Option<TlsFiles>,
    /// Running replicas, oldest first.
    replicas: Vec<Replica>,
    /// Replicas that were stopped (their logs still count).
    stopped: Vec<Replica>,
    next_replica: u32,
    /// Where replica prefixes live.
    work: PathBuf,
    /// Where each rendered config is copied (`configs/<case>/`).
    configs_out: PathBuf,
    /// Handles for collectors on other threads, kept in step with `replicas`.
    handles: Arc<Mutex<Vec<ReplicaHandle>>>,
    drains: Vec<(String, DrainHandle)>,
    origin: Instant,
}

/// Inputs to [`Stack::up`].
pub struct StackSpec<'a> {
    /// Backend groups.
    pub backends: &'a [BackendGroup],
    /// Backend event-loop threads.
    pub backend_threads: usize,
    /// The proxy config, if any.
    pub proxy: Option<&'a ProxyConfig>,
    /// Alternatives for `swap_config`.
    pub configs: &'a BTreeMap<String, ProxyConfig>,
    /// Certificate for TLS listeners (generated once per run).
    pub tls: Option<TlsFiles>,
    /// Scratch directory for replica prefixes.
    pub work: PathBuf,
    /// Directory that receives every rendered config.
    pub configs_out: PathBuf,
    /// The case's time origin.
    pub origin: Instant,
    /// Seed for the fleet's random draws.
    pub seed: u64,
}

impl Stack {
    /// Starts the fleet, then the proxy replicas (each config checked by `nginx -t` first).
    pub fn up(spec: StackSpec<'_>) -> Result<Stack, String> {
        let mut instances = Vec::new();
        let mut members = BTreeMap::new();
        let mut next_index = BTreeMap::new();
        let mut group_profiles = BTreeMap::new();
        for g in spec.backends {
            let names: Vec<String> = (0..g.count).map(|i| format!("{}-{i}", g.name)).collect();
            for n in &names {
                instances.push(InstanceConfig {
                    name: n.clone(),
                    addr: SocketAddr::from(([127, 0, 0, 1], 0)),
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
        .map_err(|e| format!("cannot start the backends: {e}"))?;
        fs::create_dir_all(&spec.work).map_err(|e| format!("{}: {e}", spec.work.display()))?;
        fs::create_dir_all(&spec.configs_out)
            .map_err(|e| format!("{}: {e}", spec.configs_out.display()))?;
        let mut ports = BTreeMap::new();
        if let Some(p) = spec.proxy {
            for l in &p.listeners {
                let port = match l.port {
                    Some(p) => p,
                    None => free_port().map_err(|e| format!("no free port: {e}"))?,
                };
                ports.insert(l.name.clone(), port);
            }
        }
        let mut stack = Stack {
            fleet,
            members,
            group_profiles,
            next_index,
            config: spec.proxy.cloned(),
            configs: spec.configs.clone(),
            generation: 1,
            ports,
            tls: spec.tls,
            replicas: Vec::new(),
            stopped: Vec::new(),
            next_replica: 0,
            work: spec.work,
            configs_out: spec.configs_out,
            handles: Arc::new(Mutex::new(Vec::new())),
            drains: Vec::new(),
            origin: spec.origin,
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
        &self.ports
    }

    /// The port of the first listener that is (or is not) TLS.
    pub fn listener_port(&self, tls: bool) -> Option<u16> {
        let cfg = self.config.as_ref()?;
        let l = cfg.listeners.iter().find(|l| l.tls == tls)?;
        self.ports.get(&l.name).copied()
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

    fn render_for(&self, cfg: &ProxyConfig, dir: &Path, admin_port: u16) -> Result<String, String> {
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
            generation: self.generation,
            groups,
            ports: self.ports.clone(),
            admin_port,
            tls: self.tls.clone(),
        };
        let text = nginx::render(cfg, &ctx).map_err(|e| e.to_string())?;
        let name = dir.file_name().and_then(|s| s.to_str()).unwrap_or("nginx");
        let _ = fs::write(
            self.configs_out
                .join(format!("{name}.gen{}.conf", self.generation)),
            &text,
        );
        Ok(text)
    }

    fn start_replica(&mut self) -> Result<String, String> {
        let cfg = self.config.clone().ok_or("no proxy in this case")?;
        let name = format!("nginx-{}", self.next_replica);
        self.next_replica += 1;
        let dir = self.work.join(&name);
        let admin = free_port().map_err(|e| format!("no free port: {e}"))?;
        let text = self.render_for(&cfg, &dir, admin)?;
        let r = Replica::start(&name, &dir, &text, admin, self.generation)
            .map_err(|e| e.to_string())?;
        self.replicas.push(r);
        self.publish_handles();
        Ok(name)
    }

    /// Re-renders the current config as a new generation and reloads every running replica.
    fn reload_all(&mut self) -> (Vec<ReloadRecord>, Option<String>) {
        let Some(cfg) = self.config.clone() else {
            return (Vec::new(), Some("no proxy in this case".into()));
        };
        self.generation += 1;
        let mut records = Vec::new();
        let mut err = None;
        for i in 0..self.replicas.len() {
            let dir = self.replicas[i].dir().to_path_buf();
            let admin = self.replicas[i].admin_port();
            match self.render_for(&cfg, &dir, admin) {
                Ok(text) => {
                    let rec = self.replicas[i].reload(&text, self.generation, self.origin);
                    if let Some(e) = &rec.error {
                        err.get_or_insert_with(|| e.clone());
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

    /// Performs one step and reports it as an event (plus any reloads it caused).
    pub fn apply(&mut self, action: &Action) -> (Event, Vec<ReloadRecord>) {
        let t0 = Instant::now();
        let t_s = t0.duration_since(self.origin).as_secs_f64();
        let (name, detail, result, reloads) = match action {
            Action::ScaleBackends { group, to, remove } => {
                let from = self.members.get(group).map_or(0, |m| m.len() as u32);
                let (r, rel) = self.scale_backends(group, *to, *remove);
                (
                    "scale_backends",
                    format!(
                        "{group}: {from} -> {to}{}",
                        if *to < from {
                            format!(" ({remove:?})").to_lowercase()
                        } else {
                            String::new()
                        }
                    ),
                    r,
                    rel,
                )
            }
            Action::ScaleReplicas { to, stop } => {
                let from = self.replicas.len() as u32;
                let r = self.scale_replicas(*to, *stop);
                (
                    "scale_replicas",
                    format!(
                        "{from} -> {to}{}",
                        if *to < from {
                            format!(" ({stop:?})").to_lowercase()
                        } else {
                            String::new()
                        }
                    ),
                    r,
                    Vec::new(),
                )
            }
            Action::Reload => {
                let (rel, err) = self.reload_all();
                (
                    "reload",
                    format!("generation {}", self.generation),
                    err.map_or(Ok(()), Err),
                    rel,
                )
            }
            Action::SwapConfig(c) => match self.configs.get(c).cloned() {
                Some(cfg) => {
                    self.config = Some(cfg);
                    let (rel, err) = self.reload_all();
                    (
                        "swap_config",
                        format!("{c} (generation {})", self.generation),
                        err.map_or(Ok(()), Err),
                        rel,
                    )
                }
                None => (
                    "swap_config",
                    c.clone(),
                    Err(format!("no config '{c}'")),
                    Vec::new(),
                ),
            },
            Action::SetProfile {
                group,
                backend,
                profile,
            } => {
                let targets = match (group, backend) {
                    (Some(g), _) => {
                        self.group_profiles.insert(g.clone(), profile.clone());
                        self.members.get(g).cloned().unwrap_or_default()
                    }
                    (None, Some(b)) => vec![b.clone()],
                    (None, None) => Vec::new(),
                };
                let mut r = Ok(());
                for t in &targets {
                    if let Err(e) = self.fleet.set_profile(t, profile.clone()) {
                        r = Err(e.to_string());
                    }
                }
                let who = group.clone().or(backend.clone()).unwrap_or_default();
                ("set_profile", format!("{who}: {profile}"), r, Vec::new())
            }
            Action::DrainBackend(b) => {
                let r = self
                    .fleet
                    .drain_async(b)
                    .map(|h| self.drains.push((b.clone(), h)));
                (
                    "drain_backend",
                    b.clone(),
                    r.map_err(|e| e.to_string()),
                    Vec::new(),
                )
            }
            Action::KillBackend(b) => (
                "kill_backend",
                b.clone(),
                self.fleet.kill(b).map_err(|e| e.to_string()),
                Vec::new(),
            ),
            Action::RestartBackend(b) => (
                "restart_backend",
                b.clone(),
                self.fleet.restart(b).map_err(|e| e.to_string()),
                Vec::new(),
            ),
            Action::StopReplica { replica, mode } => {
                let r = self.stop_replica(replica.as_deref(), *mode);
                let detail = match (&r, replica) {
                    (Ok(n), _) => format!("{n} ({mode:?})").to_lowercase(),
                    (Err(_), Some(n)) => n.clone(),
                    (Err(_), None) => "newest".into(),
                };
                ("stop_replica", detail, r.map(|_| ()), Vec::new())
            }
        };
        let event = Event {
            t_s,
            action: name.to_string(),
            detail,
            duration_ms: t0.elapsed().as_secs_f64() * 1e3,
            error: result.err(),
        };
        (event, reloads)
    }

    fn scale_backends(
        &mut self,
        group: &str,
        to: u32,
        remove: RemoveMode,
    ) -> (Result<(), String>, Vec<ReloadRecord>) {
        let current = self.members.get(group).cloned().unwrap_or_default();
        let n = current.len() as u32;
        if to > n {
            for _ in n..to {
                let idx = self.next_index.entry(group.to_string()).or_insert(0);
                let name = format!("{group}-{idx}");
                *idx += 1;
                let inst = InstanceConfig {
                    name: name.clone(),
                    addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                    profile: self.group_profiles.get(group).cloned().unwrap_or_default(),
                };
                if let Err(e) = self.fleet.add(inst) {
                    return (Err(format!("cannot add {name}: {e}")), Vec::new());
                }
                self.members
                    .entry(group.to_string())
                    .or_default()
                    .push(name);
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
                        first_err.get_or_insert(e.to_string());
                    }
                }
            }
            let (rel, err) = self.reload_all();
            if let Some(e) = err {
                first_err.get_or_insert(e);
            }
            if remove == RemoveMode::Drain {
                for g in gone {
                    match self.fleet.drain_async(&g) {
                        Ok(h) => self.drains.push((g, h)),
                        Err(e) => {
                            first_err.get_or_insert(e.to_string());
                        }
                    }
                }
            }
            (first_err.map_or(Ok(()), Err), rel)
        } else {
            (Ok(()), Vec::new())
        }
    }

    fn scale_replicas(&mut self, to: u32, stop: StopSpec) -> Result<(), String> {
        while (self.replicas.len() as u32) < to {
            self.start_replica()?;
        }
        while (self.replicas.len() as u32) > to {
            self.stop_replica(None, stop)?;
        }
        Ok(())
    }

    fn stop_replica(&mut self, name: Option<&str>, mode: StopSpec) -> Result<String, String> {
        let idx = match name {
            Some(n) => self
                .replicas
                .iter()
                .position(|r| r.name() == n)
                .ok_or_else(|| format!("no running replica '{n}'"))?,
            None if self.replicas.is_empty() => return Err("no running replica".into()),
            None => self.replicas.len() - 1,
        };
        if self.replicas.len() == 1 && name.is_none() {
            // Stopping the last replica is allowed when named explicitly only.
            return Err("refusing to stop the last replica (name it to do so)".into());
        }
        let mut r = self.replicas.remove(idx);
        self.publish_handles();
        let mode = match mode {
            StopSpec::Graceful => StopMode::Graceful,
            StopSpec::Fast => StopMode::Fast,
            StopSpec::Kill => StopMode::Kill,
        };
        let res = r.stop(mode).map_err(|e| e.to_string());
        let n = r.name().to_string();
        self.stopped.push(r);
        res.map(|_| n)
    }

    /// Stops every replica gracefully and waits for drains; returns the log files of every
    /// replica that ran (access logs, error logs) and any teardown error.
    pub fn down(&mut self) -> (Vec<(String, PathBuf, PathBuf)>, Option<String>) {
        let mut err = None;
        while let Some(mut r) = self.replicas.pop() {
            if let Err(e) = r.stop(StopMode::Graceful) {
                err.get_or_insert(e.to_string());
            }
            self.stopped.push(r);
        }
        self.publish_handles();
        for (name, h) in self.drains.drain(..) {
            if !h.wait_timeout(std::time::Duration::from_secs(10)) {
                err.get_or_insert(format!("{name} did not finish draining within 10 s"));
            }
        }
        let mut logs: Vec<(String, PathBuf, PathBuf)> = self
            .stopped
            .iter()
            .map(|r| {
                (
                    r.name().to_string(),
                    r.access_log_path(),
                    r.error_log_path(),
                )
            })
            .collect();
        logs.sort();
        (logs, err)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        for r in self.replicas.iter_mut() {
            let _ = r.stop(StopMode::Kill);
        }
        self.fleet.close(std::time::Duration::from_secs(2));
    }
}
