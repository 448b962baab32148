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

use super::{binary, status, test_file, Haproxy};
use crate::driver::{StatusReader, StopMode};
use crate::logs::LogFormat;
use crate::process::{self, Supervised};
use crate::replica::{self, Core, FileStart, Proxied, Running, SignalReload, Stops, ACCESS_LOG};
use crate::Error;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A running HAProxy master with its worker, in `dir` (haproxy.cfg, access.log,
/// haproxy.stderr). The config must have been rendered with `RenderContext.prefix = dir`.
pub type Replica = Running<Haproxy>;

impl Running<Haproxy> {
    /// Writes `dir/haproxy.cfg`, checks it with `haproxy -c` (HAProxy's message on failure),
    /// starts the master and waits until the admin port answers `generation`.
    pub fn start(
        name: &str,
        dir: &Path,
        conf_text: &str,
        admin_port: u16,
        generation: u64,
    ) -> Result<Replica, Error> {
        let how = FileStart {
            file: "haproxy.cfg",
            marker: dir.join("haproxy.pid"),
            check: &|conf| test_file(conf),
            spawn: &|conf| {
                let mut cmd = Command::new(binary());
                cmd.arg("-W")
                    .arg("-db")
                    .arg("-f")
                    .arg(conf)
                    .current_dir(dir);
                Supervised::spawn_with_stdout(name, cmd, &dir.join(ACCESS_LOG), &dir.join(STDERR))
            },
            exited: &mut |master| {
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
        };
        let mut core =
            replica::start_by_file::<Haproxy>(name, dir, conf_text, admin_port, generation, how)?;
        // The worker serves before the master takes signals (see `master_ready`).
        let ready = wait_master_ready(core.process.pid(), Duration::from_secs(15));
        core.or_kill(ready.then_some(()).ok_or_else(|| {
            Error::Timeout(format!(
                "{name}: the master did not enter its wait mode within 15s"
            ))
        }))?;
        Ok(Running::new(core))
    }
}

/// HAProxy's diagnostics (the master's and workers' stderr) in a replica directory.
const STDERR: &str = "haproxy.stderr";

impl Proxied for Haproxy {
    const STATUS: Option<StatusReader> = Some(status::read);
    /// Sent to the master, which passes them on to its workers.
    const STOPS: Stops = Stops {
        graceful: (libc::SIGUSR1, "SIGUSR1"),
        fast: (libc::SIGTERM, "SIGTERM"),
    };
    const ERROR_LOG: &'static str = STDERR;
    const LOG_FORMAT: LogFormat = LogFormat::Haproxy;

    /// `haproxy -c` first (a refusal leaves the running config and the file on disk untouched
    /// and is recorded with HAProxy's message), then the file is replaced and SIGUSR2 sent to the
    /// master. Records milliseconds from the signal until the admin listener answers the new
    /// generation and until the worker(s) that existed before the signal have exited. A config
    /// the master fails to load (`Loading failure!`) is recorded with its `[ALERT]` lines; the
    /// old worker keeps serving.
    fn reload(
        core: &mut Core,
        conf_text: &str,
        generation: u64,
        origin: Instant,
    ) -> model::ReloadRecord {
        let how = SignalReload {
            file: "haproxy.cfg",
            check: &|conf| test_file(conf),
            // A signal sent while the master is still re-executing itself would be lost.
            ready: Some(&|core| {
                wait_master_ready(core.process.pid(), core.wait_bound);
            }),
            signal: (libc::SIGUSR2, "SIGUSR2"),
            diagnostics: core.dir.join(STDERR),
            failed: &|text| {
                text.contains("Loading failure!").then(|| {
                    let alerts = alert_lines(text);
                    if alerts.is_empty() {
                        "haproxy: Loading failure!".to_string()
                    } else {
                        alerts.join("\n")
                    }
                })
            },
        };
        core.reload_by_signal(conf_text, generation, origin, &how)
    }

    fn stop_within(core: &mut Core, mode: StopMode, bound: Duration) -> Result<(), Error> {
        if mode != StopMode::Kill && core.process.is_running() {
            // The master passes the signal on to its workers once it takes signals. (Signalling
            // the workers directly as well would race with that: a worker finishing its soft
            // stop has dropped its handler, dies of the second SIGUSR1, and the master then
            // kills everything as after a crash.)
            wait_master_ready(core.process.pid(), bound.min(Duration::from_secs(15)));
        }
        core.stop_within(mode, bound)
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

/// `[ALERT]` lines of HAProxy's diagnostics, verbatim.
fn alert_lines(text: &str) -> Vec<String> {
    replica::error_lines(text, |l| l.starts_with("[ALERT]"))
}
