//! One HAProxy replica: a master-worker HAProxy in the foreground (`-W -db`) in its own
//! directory, run as a [`Supervised`] process group (never left behind), started after
//! `haproxy -c`, reloaded with SIGUSR2 and timed, stopped by signal. Its workers write the access
//! log on stdout, captured into `access.log`; the master's and workers' diagnostics go to stderr,
//! captured into `haproxy.stderr`.
//!
//! On SIGUSR2 the master re-executes itself on the new haproxy.cfg with `-x sockpair@<fd>`: the
//! new worker receives the listening sockets from the old one over the master's socket pair, so
//! the ports never close, and the old worker soft-stops (it finishes its connections; idle ones
//! get `Connection: close` on their next response, `option idle-close-on-response`). A config
//! the master cannot load (`Loading failure!`) leaves the old worker serving.

use super::{binary, status, test_file};
use crate::driver::{await_reload, await_start, LogFiles, StatusReader, StopMode};
use crate::logs::LogFormat;
use crate::process::{self, Supervised};
use crate::replica::{self, Core, Proxied};
use crate::Error;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// HAProxy's signal for a stop mode (sent to the master, which passes it to its workers), and
/// its name for messages.
fn signal_of(mode: StopMode) -> (i32, &'static str) {
    match mode {
        StopMode::Graceful => (libc::SIGUSR1, "SIGUSR1"),
        StopMode::Fast => (libc::SIGTERM, "SIGTERM"),
        StopMode::Kill => (libc::SIGKILL, "SIGKILL"),
    }
}

/// A running HAProxy master with its worker, in `dir` (haproxy.cfg, access.log,
/// haproxy.stderr). The config must have been rendered with `RenderContext.prefix = dir`.
#[derive(Debug)]
pub struct Replica {
    core: Core,
}

impl Replica {
    /// Writes `dir/haproxy.cfg`, checks it with `haproxy -c` (HAProxy's message on failure),
    /// starts the master and waits until the admin port answers `generation`.
    pub fn start(
        name: &str,
        dir: &Path,
        conf_text: &str,
        admin_port: u16,
        generation: u64,
    ) -> Result<Replica, Error> {
        let pid_file = dir.join("haproxy.pid");
        replica::prepare_dir(name, dir, conf_text, &pid_file.to_string_lossy(), &[])?;
        let conf = replica::write_config(dir, "haproxy.cfg", conf_text)?;
        test_file(&conf)?;
        let mut cmd = Command::new(binary());
        cmd.arg("-W")
            .arg("-db")
            .arg("-f")
            .arg(&conf)
            .current_dir(dir);
        let stderr = dir.join("haproxy.stderr");
        let master = Supervised::spawn_with_stdout(name, cmd, &dir.join("access.log"), &stderr)?;
        let mut r = Replica {
            core: Core::new(name, dir, admin_port, generation, master, signal_of),
        };
        let master = &mut r.core.process;
        let started = await_start(
            name,
            admin_port,
            generation,
            Duration::from_secs(15),
            &mut || {
                let status = master.exited()?;
                let text = master.stderr_text();
                let alerts = alert_lines(&text);
                let msg = if alerts.is_empty() {
                    text.trim_end().to_string()
                } else {
                    alerts.join("\n")
                };
                Some(format!("haproxy exited ({status}): {msg}"))
            },
        );
        if let Err(e) = started {
            r.core.process.kill_group();
            return Err(e);
        }
        // The worker serves before the master takes signals (see `master_ready`).
        if !wait_master_ready(r.core.process.pid(), Duration::from_secs(15)) {
            r.core.process.kill_group();
            return Err(Error::Timeout(format!(
                "{name}: the master did not enter its wait mode within 15s"
            )));
        }
        Ok(r)
    }

    /// Reloads with `conf_text`: `haproxy -c` first (a refusal leaves the running config and the
    /// file on disk untouched and is recorded with HAProxy's message), then the file is replaced
    /// and SIGUSR2 sent to the master. Records milliseconds from the signal until the admin
    /// listener answers the new generation and until the worker(s) that existed before the
    /// signal have exited. A config the master fails to load (`Loading failure!`) is recorded
    /// with its `[ALERT]` lines; the old worker keeps serving. Never panics.
    pub fn reload(
        &mut self,
        conf_text: &str,
        generation: u64,
        origin: Instant,
    ) -> model::ReloadRecord {
        let mut rec = match self.core.begin_reload(generation, origin) {
            Ok(rec) => rec,
            Err(refused) => return refused,
        };
        let next = self.core.dir.join("haproxy.cfg.next");
        if let Err(e) = fs::write(&next, conf_text) {
            rec.error = Some(format!("cannot write {}: {e}", next.display()));
            return rec;
        }
        let t0 = Instant::now();
        let checked = test_file(&next);
        rec.validate_ms = t0.elapsed().as_secs_f64() * 1e3;
        if let Err(e) = checked {
            rec.error = Some(e.to_string());
            return rec;
        }
        let current = self.core.dir.join("haproxy.cfg");
        let previous = fs::read(&current).ok();
        if let Err(e) = fs::rename(&next, &current) {
            rec.error = Some(format!("cannot replace haproxy.cfg: {e}"));
            return rec;
        }
        // A signal sent while the master is still re-executing itself would be lost.
        wait_master_ready(self.core.process.pid(), self.core.wait_bound);
        let old = process::children(self.core.process.pid());
        let stderr = self.stderr_path();
        let offset = fs::metadata(&stderr).map(|m| m.len()).unwrap_or(0);
        let t_sig = Instant::now();
        rec.t_s = t_sig.saturating_duration_since(origin).as_secs_f64();
        if !self.core.process.signal(libc::SIGUSR2, false) {
            rec.error = Some(format!(
                "{}: SIGUSR2 failed: the master is gone",
                self.core.name
            ));
            return rec;
        }
        let core = &mut self.core;
        let master = &mut core.process;
        let served = await_reload(
            &mut rec,
            &core.name,
            t_sig,
            core.admin_port,
            Some(&old),
            core.wait_bound,
            &mut || {
                let text = read_from(&stderr, offset);
                text.contains("Loading failure!").then(|| {
                    let alerts = alert_lines(&text);
                    if alerts.is_empty() {
                        "haproxy: Loading failure!".to_string()
                    } else {
                        alerts.join("\n")
                    }
                })
            },
            &mut || master.is_running(),
        );
        if rec.served_ms.is_some() {
            self.core.generation = generation;
        } else if !served && rec.error.is_some() {
            // Keep the file on disk equal to what runs.
            if let Some(prev) = &previous {
                let _ = fs::write(&current, prev);
            }
        }
        rec
    }

    /// [`stop`](crate::driver::Replica::stop) with an explicit bound.
    pub fn stop_within(&mut self, mode: StopMode, bound: Duration) -> Result<(), Error> {
        if mode != StopMode::Kill && self.core.process.is_running() {
            // The master passes the signal on to its workers once it takes signals. (Signalling
            // the workers directly as well would race with that: a worker finishing its soft
            // stop has dropped its handler, dies of the second SIGUSR1, and the master then
            // kills everything as after a crash.)
            wait_master_ready(self.core.process.pid(), bound.min(Duration::from_secs(15)));
        }
        self.core.stop_within(mode, bound)
    }

    /// The master and its current workers, for CPU and memory collectors.
    pub fn pids(&self) -> Vec<u32> {
        self.core.handle(None).pids()
    }

    /// One stats sample from the admin listener, as a stub_status sample.
    pub fn status(&self, origin: Instant) -> Result<model::StubSample, Error> {
        status::read(&self.core.handle(Self::STATUS), origin)
    }

    /// The master's pid (also the process group id).
    pub fn master_pid(&self) -> u32 {
        self.core.process.pid()
    }

    /// The access log (the workers' stdout).
    pub fn access_log_path(&self) -> PathBuf {
        self.core.dir.join("access.log")
    }

    /// HAProxy's diagnostics (the master's and workers' stderr).
    pub fn stderr_path(&self) -> PathBuf {
        self.core.dir.join("haproxy.stderr")
    }
}

impl Proxied for Replica {
    const STATUS: Option<StatusReader> = Some(status::read);
    fn core(&self) -> &Core {
        &self.core
    }
    fn core_mut(&mut self) -> &mut Core {
        &mut self.core
    }
    fn reload_text(&mut self, text: &str, generation: u64, origin: Instant) -> model::ReloadRecord {
        Replica::reload(self, text, generation, origin)
    }
    fn stop_within(&mut self, mode: StopMode, bound: Duration) -> Result<(), Error> {
        Replica::stop_within(self, mode, bound)
    }
    fn log_files(&self) -> LogFiles {
        LogFiles {
            access: Some(self.access_log_path()),
            error: Some(self.stderr_path()),
            format: LogFormat::Haproxy,
            ..LogFiles::default()
        }
    }
}

/// True once the master takes SIGUSR1 and SIGUSR2. After loading a config (at start and after
/// each reload) HAProxy 2.6's master re-executes itself in "wait mode" to free the config's
/// memory, with those signals blocked and then reset by the exec: a signal sent before the new
/// image has installed its handlers is lost (or fatal). Ready means: the wait-mode image
/// (`HAPROXY_MWORKER_WAIT_ONLY=1` in its environment) with both signals caught, not blocked.
fn master_ready(pid: u32) -> bool {
    let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let wait_mode = env
        .split(|&b| b == 0)
        .any(|v| v == b"HAPROXY_MWORKER_WAIT_ONLY=1");
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    let usr = (1u64 << (libc::SIGUSR1 - 1)) | (1u64 << (libc::SIGUSR2 - 1));
    wait_mode && mask("SigCgt:") & usr == usr && mask("SigBlk:") & usr == 0
}

/// Waits up to `bound` for [`master_ready`]; false when it never was.
fn wait_master_ready(pid: u32, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        if master_ready(pid) {
            return true;
        }
        if Instant::now() >= deadline || !process::alive(pid) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A file's text from byte `offset` on.
fn read_from(path: &Path, offset: u64) -> String {
    let mut text = String::new();
    if let Ok(mut f) = fs::File::open(path) {
        if f.seek(SeekFrom::Start(offset)).is_ok() {
            let _ = f.read_to_string(&mut text);
        }
    }
    text
}

/// `[ALERT]` lines of HAProxy's diagnostics, verbatim.
fn alert_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("[ALERT]"))
        .map(str::to_string)
        .collect()
}
