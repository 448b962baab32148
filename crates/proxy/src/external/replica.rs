//! An attached external proxy: nothing started, nothing stopped. It remembers where the run's
//! part of the user's logs begins (all of a log that does not exist yet) and runs the user's
//! reload command, timed to its exit.

use crate::config::External;
use crate::driver::{self, LogFiles, ReplicaHandle, StopMode};
use crate::process::{self, run_bounded};
use crate::Error;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A proxy the user runs, attached to (not started) by proxybench.
#[derive(Debug)]
pub struct Replica {
    name: String,
    dir: PathBuf,
    ext: External,
    generation: u64,
    access_offset: u64,
    error_offset: u64,
    wait_bound: Duration,
}

/// The size of a log file now (where this run's lines will begin): 0 for a file not there yet
/// in a directory that is (the proxy creates it at its first line, which is then this run's).
fn size_of(what: &str, path: &Path) -> Result<u64, Error> {
    match fs::metadata(path) {
        Ok(m) => Ok(m.len()),
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && path.parent().is_some_and(Path::is_dir) =>
        {
            Ok(0)
        }
        Err(e) => Err(Error::io(format!("{what} {}", path.display()), e)),
    }
}

impl Replica {
    /// Attaches: notes the log files' sizes now and checks that the named processes run.
    /// `dir` receives the reload command's output.
    pub fn attach(
        name: &str,
        dir: &Path,
        ext: External,
        generation: u64,
    ) -> Result<Replica, Error> {
        fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        let access_offset = match &ext.access_log {
            Some(l) => size_of("access_log", &l.path)?,
            None => 0,
        };
        let error_offset = match &ext.error_log {
            Some(l) => size_of("error_log", &l.path)?,
            None => 0,
        };
        if let Some(p) = &ext.processes {
            if process::by_comm(p).is_empty() {
                return Err(Error::Refused(format!(
                    "{name}: no running process is named '{p}' (proxy.external.processes)"
                )));
            }
        }
        Ok(Replica {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            ext,
            generation,
            access_offset,
            error_offset,
            wait_bound: Duration::from_secs(60),
        })
    }

    /// Runs the reload command: the record's `command_ms` is its exit, measured from its start.
    /// Its `served_ms` stays `None`: an external target has no admin listener to show the new
    /// generation serving, and a command's exit is not that (nginx's returns once the signal is
    /// sent).
    fn run_reload(&mut self, generation: u64, origin: Instant) -> model::ReloadRecord {
        let mut rec =
            model::ReloadRecord::begun(&self.name, generation, origin.elapsed().as_secs_f64());
        if self.ext.reload.is_empty() {
            rec.error = Some(format!(
                "{}: no reload command (proxy.external.reload)",
                self.name
            ));
            return rec;
        }
        let out = self.dir.join(format!("reload-gen{generation}.stdout"));
        let err = self.dir.join(format!("reload-gen{generation}.stderr"));
        let t0 = Instant::now();
        rec.t_s = t0.saturating_duration_since(origin).as_secs_f64();
        let cmd = self.ext.reload.join(" ");
        match run_bounded(&self.ext.reload, self.wait_bound, &out, &err) {
            Ok(ran) => match ran.status {
                Some(s) if s.success() => {
                    rec.command_ms = Some(ran.took.as_secs_f64() * 1e3);
                    self.generation = generation;
                }
                Some(s) => {
                    let said = fs::read_to_string(&err).unwrap_or_default();
                    let last = said.lines().rev().find(|l| !l.trim().is_empty());
                    rec.error = Some(format!(
                        "{}: reload command `{cmd}` failed ({s}){}",
                        self.name,
                        last.map(|l| format!(": {}", l.trim())).unwrap_or_default()
                    ));
                }
                None => {
                    rec.error = Some(format!(
                        "{}: reload command `{cmd}` ran past {:?}; killed",
                        self.name, self.wait_bound
                    ))
                }
            },
            Err(e) => rec.error = Some(format!("{}: {e}", self.name)),
        }
        rec
    }
}

impl driver::Replica for Replica {
    fn name(&self) -> &str {
        &self.name
    }
    fn dir(&self) -> &Path {
        &self.dir
    }
    fn admin_port(&self) -> u16 {
        0
    }
    fn generation(&self) -> u64 {
        self.generation
    }
    fn handle(&self) -> ReplicaHandle {
        ReplicaHandle {
            name: self.name.clone(),
            pid: 0,
            admin_port: 0,
            status: None,
            processes: self.ext.processes.clone(),
        }
    }
    fn set_wait_bound(&mut self, bound: Duration) {
        self.wait_bound = bound;
    }
    fn reload(
        &mut self,
        _rendered: &driver::Rendered,
        generation: u64,
        origin: Instant,
    ) -> model::ReloadRecord {
        self.run_reload(generation, origin)
    }
    fn stop(&mut self, _mode: StopMode) -> Result<(), Error> {
        Err(Error::Refused(format!(
            "{}: proxybench does not stop a proxy it did not start",
            self.name
        )))
    }
    fn is_running(&mut self) -> bool {
        match &self.ext.processes {
            Some(p) => !process::by_comm(p).is_empty(),
            None => true,
        }
    }
    fn logs(&self) -> LogFiles {
        let format = self
            .ext
            .access_log
            .as_ref()
            .or(self.ext.error_log.as_ref())
            .map(|l| l.format)
            .unwrap_or_default();
        LogFiles {
            access: self.ext.access_log.as_ref().map(|l| l.path.clone()),
            error: self.ext.error_log.as_ref().map(|l| l.path.clone()),
            format,
            access_offset: self.access_offset,
            error_offset: self.error_offset,
            borrowed: true,
        }
    }
    fn attached(&self) -> bool {
        true
    }
}
