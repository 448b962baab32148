//! One nginx replica: a master in the foreground (`daemon off`) in its own directory, run as a
//! [`Supervised`] process group (never left behind), started after `nginx -t`, reloaded with
//! SIGHUP and timed, stopped by signal.

use super::{admin, binary, test_file};
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

/// nginx's signal for a stop mode, and its name for messages.
fn signal_of(mode: StopMode) -> (i32, &'static str) {
    match mode {
        StopMode::Graceful => (libc::SIGQUIT, "SIGQUIT"),
        StopMode::Fast => (libc::SIGTERM, "SIGTERM"),
        StopMode::Kill => (libc::SIGKILL, "SIGKILL"),
    }
}

/// A running nginx master with its workers, in `dir` (nginx.conf, nginx.pid, error.log,
/// access.log, temp dirs). The config must have been rendered with `RenderContext.prefix = dir`.
#[derive(Debug)]
pub struct Replica {
    core: Core,
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
        let pid_file = dir.join("nginx.pid");
        replica::prepare_dir(name, dir, conf_text, &pid_file.to_string_lossy(), &[])?;
        let conf = replica::write_config(dir, "nginx.conf", conf_text)?;
        test_file(dir, &conf)?;
        let mut cmd = Command::new(binary());
        cmd.arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-g")
            .arg("daemon off;");
        let master = Supervised::spawn(name, cmd, &dir.join("nginx.stderr"))?;
        let mut r = Replica {
            core: Core::new(name, dir, admin_port, generation, master, signal_of),
        };
        let error_log = r.error_log_path();
        let master = &mut r.core.process;
        let started = await_start(
            name,
            admin_port,
            generation,
            Duration::from_secs(15),
            &mut || {
                let status = master.exited()?;
                let mut msg = master.stderr_text();
                if msg.trim().is_empty() {
                    msg = emerg_lines(&error_log, 0).join("\n");
                }
                Some(format!("nginx exited ({status}): {}", msg.trim_end()))
            },
        );
        if let Err(e) = started {
            r.core.process.kill_group();
            return Err(e);
        }
        Ok(r)
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
        let mut rec = match self.core.begin_reload(generation, origin) {
            Ok(rec) => rec,
            Err(refused) => return refused,
        };
        let next = self.core.dir.join("nginx.conf.next");
        if let Err(e) = fs::write(&next, conf_text) {
            rec.error = Some(format!("cannot write {}: {e}", next.display()));
            return rec;
        }
        let t0 = Instant::now();
        let checked = test_file(&self.core.dir, &next);
        rec.validate_ms = t0.elapsed().as_secs_f64() * 1e3;
        if let Err(e) = checked {
            rec.error = Some(e.to_string());
            return rec;
        }
        let current = self.core.dir.join("nginx.conf");
        let previous = fs::read(&current).ok();
        if let Err(e) = fs::rename(&next, &current) {
            rec.error = Some(format!("cannot replace nginx.conf: {e}"));
            return rec;
        }
        let old = process::children(self.core.process.pid());
        let log_offset = fs::metadata(self.error_log_path())
            .map(|m| m.len())
            .unwrap_or(0);
        let t_sig = Instant::now();
        rec.t_s = t_sig.saturating_duration_since(origin).as_secs_f64();
        if !self.core.process.signal(libc::SIGHUP, false) {
            rec.error = Some(format!(
                "{}: SIGHUP failed: the master is gone",
                self.core.name
            ));
            return rec;
        }
        let error_log = self.error_log_path();
        let core = &mut self.core;
        let master = &mut core.process;
        let served = await_reload(
            &mut rec,
            &core.name,
            t_sig,
            core.admin_port,
            Some(&old),
            core.wait_bound,
            // A reload the master could not apply (a port in use...) is logged as emerg; the old
            // config keeps running.
            &mut || {
                let emerg = emerg_lines(&error_log, log_offset);
                (!emerg.is_empty()).then(|| emerg.join("\n"))
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
        self.core.stop_within(mode, bound)
    }

    /// The master and its current workers, for CPU and memory collectors.
    pub fn pids(&self) -> Vec<u32> {
        self.core.handle(None).pids()
    }

    /// One stub_status sample from the admin server.
    pub fn stub_status(&self, origin: Instant) -> Result<model::StubSample, Error> {
        admin::stub_status(&self.core.handle(Self::STATUS), origin)
    }

    /// The master's pid (also the process group id).
    pub fn master_pid(&self) -> u32 {
        self.core.process.pid()
    }

    /// The JSON access log.
    pub fn access_log_path(&self) -> PathBuf {
        self.core.dir.join("access.log")
    }

    /// The error log.
    pub fn error_log_path(&self) -> PathBuf {
        self.core.dir.join("error.log")
    }
}

impl Proxied for Replica {
    const STATUS: Option<StatusReader> = Some(admin::stub_status);
    fn core(&self) -> &Core {
        &self.core
    }
    fn core_mut(&mut self) -> &mut Core {
        &mut self.core
    }
    fn reload_text(&mut self, text: &str, generation: u64, origin: Instant) -> model::ReloadRecord {
        Replica::reload(self, text, generation, origin)
    }
    fn log_files(&self) -> LogFiles {
        LogFiles {
            access: Some(self.access_log_path()),
            error: Some(self.error_log_path()),
            format: LogFormat::NginxJson,
            ..LogFiles::default()
        }
    }
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
