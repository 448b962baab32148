//! One nginx replica: a master in the foreground (`daemon off`) in its own directory and process
//! group, started after `nginx -t`, reloaded with SIGHUP and timed, stopped by signal, and never
//! left behind: PR_SET_PDEATHSIG takes the master down with proxybench, a watchdog shell in the
//! same process group takes the workers down too (it reads a pipe whose writer is proxybench and
//! kills the group at end of file), and Drop kills the group.

use super::admin::{self, ReplicaHandle};
use super::{binary, procs, test_file};
use crate::Error;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How to stop a replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// SIGQUIT: stop accepting, finish in-flight requests, then exit.
    Graceful,
    /// SIGTERM: exit at once, dropping in-flight requests.
    Fast,
    /// SIGKILL to the whole process group: a crash, as a pod killed without notice.
    Kill,
}

impl StopMode {
    /// The default bound on waiting for the exit.
    fn bound(self) -> Duration {
        match self {
            StopMode::Graceful => Duration::from_secs(60),
            StopMode::Fast => Duration::from_secs(10),
            StopMode::Kill => Duration::from_secs(5),
        }
    }

    fn signal_name(self) -> &'static str {
        match self {
            StopMode::Graceful => "SIGQUIT",
            StopMode::Fast => "SIGTERM",
            StopMode::Kill => "SIGKILL",
        }
    }
}

/// A running nginx master with its workers, in `dir` (nginx.conf, nginx.pid, error.log,
/// access.log, temp dirs). The config must have been rendered with `RenderContext.prefix = dir`.
#[derive(Debug)]
pub struct Replica {
    name: String,
    dir: PathBuf,
    admin_port: u16,
    generation: u64,
    master: Child,
    watchdog: Option<Child>,
    running: bool,
    wait_bound: Duration,
}

impl Replica {
    /// Writes `dir/nginx.conf`, checks it with `nginx -t` (nginx's message on failure), starts
    /// the master and waits until the admin port answers `generation`.
    pub fn start(
        name: &str,
        dir: &Path,
        conf_text: &str,
        admin_port: u16,
        generation: u64,
    ) -> Result<Replica, Error> {
        if !dir.is_absolute() {
            return Err(Error::Invalid(format!(
                "{name}: {} is relative; nginx would resolve it against its prefix",
                dir.display()
            )));
        }
        fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        let pid_file = dir.join("nginx.pid");
        if !conf_text.contains(&*pid_file.to_string_lossy()) {
            return Err(Error::Invalid(format!(
                "{name}: the config was not rendered for {} (RenderContext.prefix must be the replica directory)",
                dir.display()
            )));
        }
        let conf = dir.join("nginx.conf");
        fs::write(&conf, conf_text)
            .map_err(|e| Error::io(format!("cannot write {}", conf.display()), e))?;
        test_file(dir, &conf)?;
        let stderr_path = dir.join("nginx.stderr");
        let stderr = fs::File::create(&stderr_path)
            .map_err(|e| Error::io(format!("cannot create {}", stderr_path.display()), e))?;
        let mut cmd = Command::new(binary());
        cmd.arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-g")
            .arg("daemon off;")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .process_group(0);
        // SAFETY: the closure runs in the forked child before exec, where only
        // async-signal-safe calls are allowed; it makes one raw prctl(2) system call, which
        // neither allocates nor takes a lock (it only sets this child's parent-death signal).
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let master = procs::spawn(cmd)
            .map_err(|e| Error::io(format!("{name}: cannot start {}", binary().display()), e))?;
        let pgid = master.id();
        let mut r = Replica {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            admin_port,
            generation,
            master,
            watchdog: None,
            running: true,
            wait_bound: Duration::from_secs(60),
        };
        // Joins nginx's process group and waits for proxybench to go; then kills the group.
        let mut wd = Command::new("/bin/sh");
        wd.arg("-c")
            .arg("read x; kill -9 -$1")
            .arg("pb-nginx-watchdog")
            .arg(pgid.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(pgid as i32);
        r.watchdog = Some(
            procs::spawn(wd)
                .map_err(|e| Error::io(format!("{name}: cannot start the watchdog"), e))?,
        );
        r.wait_ready(Duration::from_secs(15))?;
        Ok(r)
    }

    fn wait_ready(&mut self, bound: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + bound;
        let mut last;
        loop {
            if let Ok(Some(status)) = self.master.try_wait() {
                self.running = false;
                self.kill_group();
                let mut msg = fs::read_to_string(self.dir.join("nginx.stderr")).unwrap_or_default();
                if msg.trim().is_empty() {
                    msg = emerg_lines(&self.error_log_path(), 0).join("\n");
                }
                return Err(Error::Nginx(format!(
                    "{}: nginx exited at start ({status}): {}",
                    self.name,
                    msg.trim_end()
                )));
            }
            match admin::generation(self.admin_port, Duration::from_millis(500)) {
                Ok(g) if g == self.generation => return Ok(()),
                Ok(g) => last = format!("generation {g}"),
                Err(e) => last = e.to_string(),
            }
            if Instant::now() >= deadline {
                self.kill_group();
                self.running = false;
                return Err(Error::Timeout(format!(
                    "{}: admin port {} did not answer generation {} within {:?} (last: {last})",
                    self.name, self.admin_port, self.generation, bound
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Bounds how long [`reload`](Self::reload) waits for the new config to serve and for the
    /// old workers to exit (60 s by default; set it above `worker_shutdown_timeout`).
    pub fn set_wait_bound(&mut self, bound: Duration) {
        self.wait_bound = bound;
    }

    /// Reloads with `conf_text`: `nginx -t` first (a failure leaves the running config and the
    /// file on disk untouched and is recorded with nginx's message), then the file is replaced
    /// and SIGHUP sent. Records milliseconds from the signal until the admin server answers the
    /// new generation and until every worker that existed before the signal has exited. Never
    /// panics; every failure lands in `error`. `generation` must differ from the one served.
    pub fn reload(
        &mut self,
        conf_text: &str,
        generation: u64,
        origin: Instant,
    ) -> model::ReloadRecord {
        let mut rec = model::ReloadRecord {
            replica: self.name.clone(),
            generation,
            t_s: origin.elapsed().as_secs_f64(),
            served_ms: None,
            old_workers_exited_ms: None,
            validate_ms: 0.0,
            error: None,
        };
        if !self.is_running() {
            rec.error = Some(format!("{} is not running", self.name));
            return rec;
        }
        if generation == self.generation {
            // The old workers would answer it too, and the timing would mean nothing.
            rec.error = Some(format!(
                "{}: generation {generation} is already served; reload with a new generation",
                self.name
            ));
            return rec;
        }
        let next = self.dir.join("nginx.conf.next");
        if let Err(e) = fs::write(&next, conf_text) {
            rec.error = Some(format!("cannot write {}: {e}", next.display()));
            return rec;
        }
        let t0 = Instant::now();
        let checked = test_file(&self.dir, &next);
        rec.validate_ms = t0.elapsed().as_secs_f64() * 1e3;
        if let Err(e) = checked {
            rec.error = Some(e.to_string());
            return rec;
        }
        let current = self.dir.join("nginx.conf");
        let previous = fs::read(&current).ok();
        if let Err(e) = fs::rename(&next, &current) {
            rec.error = Some(format!("cannot replace nginx.conf: {e}"));
            return rec;
        }
        let old = procs::children(self.master.id());
        let log_offset = fs::metadata(self.error_log_path())
            .map(|m| m.len())
            .unwrap_or(0);
        let t_sig = Instant::now();
        rec.t_s = t_sig.saturating_duration_since(origin).as_secs_f64();
        if !procs::signal(self.master.id(), libc::SIGHUP) {
            rec.error = Some(format!("{}: SIGHUP failed: the master is gone", self.name));
            return rec;
        }
        let deadline = t_sig + self.wait_bound;
        let mut next_log_check = t_sig;
        loop {
            let now = Instant::now();
            if rec.served_ms.is_none()
                && admin::generation(self.admin_port, Duration::from_millis(500)).ok()
                    == Some(generation)
            {
                rec.served_ms = Some(ms_since(t_sig));
                self.generation = generation;
            }
            if rec.old_workers_exited_ms.is_none() && old.iter().all(|&p| !procs::alive(p)) {
                rec.old_workers_exited_ms = Some(ms_since(t_sig));
            }
            if rec.served_ms.is_some() && rec.old_workers_exited_ms.is_some() {
                break;
            }
            if rec.served_ms.is_none() && now >= next_log_check {
                // A reload the master could not apply (a port in use...) is logged as emerg;
                // the old config keeps running.
                let emerg = emerg_lines(&self.error_log_path(), log_offset);
                if !emerg.is_empty() {
                    rec.error = Some(emerg.join("\n"));
                    // Keep the file on disk equal to what runs.
                    if let Some(prev) = &previous {
                        let _ = fs::write(&current, prev);
                    }
                    break;
                }
                next_log_check = now + Duration::from_millis(50);
            }
            if !self.is_running() {
                rec.error = Some(format!(
                    "{}: the master exited during the reload",
                    self.name
                ));
                break;
            }
            if now >= deadline {
                rec.error = Some(if rec.served_ms.is_none() {
                    format!(
                        "{}: generation {generation} not served within {:?}",
                        self.name, self.wait_bound
                    )
                } else {
                    format!(
                        "{}: old workers still running after {:?}",
                        self.name, self.wait_bound
                    )
                });
                break;
            }
            // Poll the admin port tightly until served; /proc reads after that are cheap.
            let pause = if rec.served_ms.is_none() { 2 } else { 5 };
            std::thread::sleep(Duration::from_millis(pause));
        }
        rec
    }

    /// Stops the replica and waits (60 s for Graceful, 10 s for Fast, 5 s for Kill); past the
    /// bound the group is killed and a Timeout error returned.
    pub fn stop(&mut self, mode: StopMode) -> Result<(), Error> {
        self.stop_within(mode, mode.bound())
    }

    /// [`stop`](Self::stop) with an explicit bound.
    pub fn stop_within(&mut self, mode: StopMode, bound: Duration) -> Result<(), Error> {
        if !self.running {
            return Ok(());
        }
        let pid = self.master.id();
        match mode {
            StopMode::Graceful => procs::signal(pid, libc::SIGQUIT),
            StopMode::Fast => procs::signal(pid, libc::SIGTERM),
            StopMode::Kill => procs::signal_group(pid, libc::SIGKILL),
        };
        let deadline = Instant::now() + bound;
        let mut result = Ok(());
        loop {
            match self.master.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    procs::signal_group(pid, libc::SIGKILL);
                    let _ = self.master.wait();
                    result = Err(Error::Timeout(format!(
                        "{}: nginx did not exit within {bound:?} after {}; killed",
                        self.name,
                        mode.signal_name()
                    )));
                    break;
                }
            }
        }
        self.running = false;
        self.kill_group();
        result
    }

    /// Kills whatever is left in the process group (workers orphaned by a killed master, the
    /// watchdog) and reaps the watchdog.
    fn kill_group(&mut self) {
        // The group id is ours only while a member is unreaped; the watchdog is reaped last.
        if self.watchdog.is_some() {
            procs::signal_group(self.master.id(), libc::SIGKILL);
        }
        if let Ok(None) = self.master.try_wait() {
            let _ = self.master.wait();
        }
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }

    /// True while the master runs.
    pub fn is_running(&mut self) -> bool {
        if self.running {
            if let Ok(Some(_)) = self.master.try_wait() {
                self.running = false;
            }
        }
        self.running
    }

    /// The master and its current workers, for CPU and memory collectors.
    pub fn pids(&self) -> Vec<u32> {
        if !self.running {
            return Vec::new();
        }
        self.handle().pids()
    }

    /// One stub_status sample from the admin server.
    pub fn stub_status(&self, origin: Instant) -> Result<model::StubSample, Error> {
        self.handle().stub_status(origin)
    }

    /// A detached handle for collectors on other threads.
    pub fn handle(&self) -> ReplicaHandle {
        ReplicaHandle {
            name: self.name.clone(),
            master_pid: self.master.id(),
            admin_port: self.admin_port,
        }
    }

    /// The replica's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The generation the replica serves (updated when a reload is seen serving).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The admin server's port.
    pub fn admin_port(&self) -> u16 {
        self.admin_port
    }

    /// The master's pid (also the process group id).
    pub fn master_pid(&self) -> u32 {
        self.master.id()
    }

    /// The JSON access log.
    pub fn access_log_path(&self) -> PathBuf {
        self.dir.join("access.log")
    }

    /// The error log.
    pub fn error_log_path(&self) -> PathBuf {
        self.dir.join("error.log")
    }

    /// The replica's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if self.running {
            let _ = self.stop_within(StopMode::Kill, StopMode::Kill.bound());
        } else {
            self.kill_group();
        }
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// `[emerg]` lines of an error log from byte `offset` on, verbatim.
fn emerg_lines(path: &Path, offset: u64) -> Vec<String> {
    let mut text = String::new();
    if let Ok(mut f) = fs::File::open(path) {
        if f.seek(SeekFrom::Start(offset)).is_ok() {
            let _ = f.read_to_string(&mut text);
        }
    }
    text.lines()
        .filter(|l| l.contains("[emerg]"))
        .map(str::to_string)
        .collect()
}
