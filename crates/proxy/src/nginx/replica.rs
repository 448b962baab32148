//! One nginx replica: a master in the foreground (`daemon off`) in its own directory, run as a
//! [`Supervised`] process group (never left behind), started after `nginx -t`, reloaded with
//! SIGHUP and timed, stopped by signal.

use super::{admin, binary, test_file, Nginx};
use crate::driver::StatusReader;
use crate::logs::LogFormat;
use crate::process::Supervised;
use crate::replica::{self, read_from, Core, FileStart, Proxied, Running, SignalReload, Stops};
use crate::Error;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// A running nginx master with its workers, in `dir` (nginx.conf, nginx.pid, error.log,
/// access.log, temp dirs). The config must have been rendered with `RenderContext.prefix = dir`.
pub type Replica = Running<Nginx>;

impl Running<Nginx> {
    /// Writes `dir/nginx.conf`, checks it with `nginx -t` (nginx's message on failure), starts
    /// the master and waits until the admin port answers `generation`.
    pub fn start(
        name: &str,
        dir: &Path,
        conf_text: &str,
        admin_port: u16,
        generation: u64,
    ) -> Result<Replica, Error> {
        let error_log = dir.join(ERROR_LOG);
        let how = FileStart {
            file: "nginx.conf",
            marker: dir.join("nginx.pid"),
            check: &|conf| test_file(dir, conf),
            spawn: &|conf| {
                let mut cmd = Command::new(binary());
                cmd.arg("-p").arg(dir).arg("-c").arg(conf);
                cmd.arg("-e").arg(&error_log).arg("-g").arg("daemon off;");
                Supervised::spawn(name, cmd, &dir.join("nginx.stderr"))
            },
            exited: &mut |master| {
                let status = master.exited()?;
                let mut msg = master.stderr_text();
                if msg.trim().is_empty() {
                    msg = emerg_lines(&read_from(&error_log, 0)).join("\n");
                }
                Some(format!("nginx exited ({status}): {}", msg.trim_end()))
            },
        };
        let core =
            replica::start_by_file::<Nginx>(name, dir, conf_text, admin_port, generation, how)?;
        Ok(Running::new(core))
    }
}

/// nginx's error log in a replica directory.
const ERROR_LOG: &str = "error.log";

impl Proxied for Nginx {
    const STATUS: Option<StatusReader> = Some(admin::stub_status);
    const STOPS: Stops = Stops {
        graceful: (libc::SIGQUIT, "SIGQUIT"),
        fast: (libc::SIGTERM, "SIGTERM"),
    };
    const ERROR_LOG: &'static str = ERROR_LOG;
    const LOG_FORMAT: LogFormat = LogFormat::NginxJson;

    /// `nginx -t` first (a failure leaves the running config and the file on disk untouched and
    /// is recorded with nginx's message), then the file is replaced and SIGHUP sent. Records
    /// milliseconds from the signal until the admin server answers the new generation and until
    /// every worker that existed before the signal has exited.
    fn reload(
        core: &mut Core,
        conf_text: &str,
        generation: u64,
        origin: Instant,
    ) -> model::ReloadRecord {
        let dir = core.dir.clone();
        let how = SignalReload {
            file: "nginx.conf",
            check: &|conf| test_file(&dir, conf),
            ready: None,
            signal: (libc::SIGHUP, "SIGHUP"),
            diagnostics: dir.join(ERROR_LOG),
            // A reload the master could not apply (a port in use...) is logged as emerg; the old
            // config keeps running.
            failed: &|text| {
                let emerg = emerg_lines(text);
                (!emerg.is_empty()).then(|| emerg.join("\n"))
            },
        };
        core.reload_by_signal(conf_text, generation, origin, &how)
    }
}

/// `[emerg]` lines of an error log's text, verbatim.
fn emerg_lines(text: &str) -> Vec<String> {
    replica::error_lines(text, |l| l.contains("[emerg]"))
}
