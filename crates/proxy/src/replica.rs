//! What every replica proxybench starts shares, whatever its proxy: its name, directory, admin
//! and control ports, the generation it serves, the bound on reload waits and its supervised
//! process group, with the [`driver::Replica`] methods that only read them and the kill on drop.
//! A driver's replica holds a [`Core`] and implements [`Proxied`] (its reload, its stop, its
//! status page and its logs); [`driver::Replica`] then comes with it.

use crate::driver::{self, LogFiles, Rendered, ReplicaHandle, StatusReader, StopMode};
use crate::process::Supervised;
use crate::Error;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A proxy's signal for each stop mode, and its name for messages.
pub(crate) type Signals = fn(StopMode) -> (i32, &'static str);

/// The state every started replica has, and its process group (killed when the core drops, so
/// a replica is never left behind).
#[derive(Debug)]
pub(crate) struct Core {
    /// Replica name (`nginx-0`...).
    pub(crate) name: String,
    /// Its directory (the `prefix` it was rendered for).
    pub(crate) dir: PathBuf,
    /// Its admin listener's port.
    pub(crate) admin_port: u16,
    /// Its control API's port (Caddy's admin API); 0 when unused.
    pub(crate) control_port: u16,
    /// The generation it serves.
    pub(crate) generation: u64,
    /// How long a reload waits for the new generation and for old processes to exit.
    pub(crate) wait_bound: Duration,
    /// The proxy's main process (a master, or the only process) and its group.
    pub(crate) process: Supervised,
    /// The proxy's stop signals.
    signals: Signals,
}

impl Core {
    /// A started replica's core: the reload wait bound at its default, 60 s.
    pub(crate) fn new(
        name: &str,
        dir: &Path,
        admin_port: u16,
        generation: u64,
        process: Supervised,
        signals: Signals,
    ) -> Core {
        Core {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            admin_port,
            control_port: 0,
            generation,
            wait_bound: Duration::from_secs(60),
            process,
            signals,
        }
    }

    /// Sends the proxy's signal for `mode` (SIGKILL to the whole group for a kill) and waits up
    /// to `bound` for the exit; past the bound the group is killed and a Timeout error returned.
    pub(crate) fn stop_within(&mut self, mode: StopMode, bound: Duration) -> Result<(), Error> {
        let (sig, what) = (self.signals)(mode);
        self.process.stop(sig, mode == StopMode::Kill, bound, what)
    }

    /// A detached handle for collectors, with the proxy's status-page reader.
    pub(crate) fn handle(&self, status: Option<StatusReader>) -> ReplicaHandle {
        ReplicaHandle {
            name: self.name.clone(),
            pid: self.process.pid(),
            admin_port: self.admin_port,
            status,
            processes: None,
        }
    }

    /// The record a reload to `generation` starts from, or, as `Err`, the record of a reload
    /// refused before anything happened: the replica is not running, or already serves
    /// `generation` (its old processes would answer it too, and the timing would mean nothing).
    pub(crate) fn begin_reload(
        &mut self,
        generation: u64,
        origin: Instant,
    ) -> Result<model::ReloadRecord, model::ReloadRecord> {
        let mut rec = model::ReloadRecord {
            replica: self.name.clone(),
            generation,
            t_s: origin.elapsed().as_secs_f64(),
            served_ms: None,
            command_ms: None,
            old_workers_exited_ms: None,
            validate_ms: 0.0,
            error: None,
        };
        if !self.process.is_running() {
            rec.error = Some(format!("{} is not running", self.name));
            return Err(rec);
        }
        if generation == self.generation {
            rec.error = Some(format!(
                "{}: generation {generation} is already served; reload with a new generation",
                self.name
            ));
            return Err(rec);
        }
        Ok(rec)
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        if self.process.is_running() {
            let _ = self.stop_within(StopMode::Kill, StopMode::Kill.bound());
        }
    }
}

/// The first step of every driver's start: `dir` must be absolute, `conf_text` must have been
/// rendered for it (it holds `marker`, a path under `dir` as the renderer writes it), and `dir`
/// is created with its `subdirs`. A config rendered for another directory would write its pid
/// file and logs there, where nothing reads them.
pub(crate) fn prepare_dir(
    name: &str,
    dir: &Path,
    conf_text: &str,
    marker: &str,
    subdirs: &[&str],
) -> Result<(), Error> {
    if !dir.is_absolute() {
        return Err(Error::Invalid(format!(
            "{name}: {} is relative; the replica directory must be absolute",
            dir.display()
        )));
    }
    if !conf_text.contains(marker) {
        return Err(Error::Invalid(format!(
            "{name}: the config was not rendered for {} (RenderContext.prefix must be the replica directory)",
            dir.display()
        )));
    }
    for p in std::iter::once(dir.to_path_buf()).chain(subdirs.iter().map(|d| dir.join(d))) {
        std::fs::create_dir_all(&p)
            .map_err(|e| Error::io(format!("cannot create {}", p.display()), e))?;
    }
    Ok(())
}

/// Writes a replica's config as `dir/file` and returns its path.
pub(crate) fn write_config(dir: &Path, file: &str, text: &str) -> Result<PathBuf, Error> {
    let conf = dir.join(file);
    std::fs::write(&conf, text)
        .map_err(|e| Error::io(format!("cannot write {}", conf.display()), e))?;
    Ok(conf)
}

/// One proxy's replica on top of its [`Core`]: what differs between proxies. Implementing it
/// gives the [`driver::Replica`] the run talks to.
pub(crate) trait Proxied: Send + std::fmt::Debug {
    /// The proxy's status-page reader, if it has one.
    const STATUS: Option<StatusReader>;

    /// The shared state.
    fn core(&self) -> &Core;

    /// The shared state, to change.
    fn core_mut(&mut self) -> &mut Core;

    /// Reloads with a rendered config's text, as [`driver::Replica::reload`] says.
    fn reload_text(&mut self, text: &str, generation: u64, origin: Instant) -> model::ReloadRecord;

    /// Stops within `bound`, as [`driver::Replica::stop`] says; by default the proxy's signal
    /// for `mode`.
    fn stop_within(&mut self, mode: StopMode, bound: Duration) -> Result<(), Error> {
        self.core_mut().stop_within(mode, bound)
    }

    /// Where its logs are.
    fn log_files(&self) -> LogFiles;
}

impl<T: Proxied> driver::Replica for T {
    fn name(&self) -> &str {
        &self.core().name
    }
    fn dir(&self) -> &Path {
        &self.core().dir
    }
    fn admin_port(&self) -> u16 {
        self.core().admin_port
    }
    fn control_port(&self) -> u16 {
        self.core().control_port
    }
    fn generation(&self) -> u64 {
        self.core().generation
    }
    fn handle(&self) -> ReplicaHandle {
        self.core().handle(T::STATUS)
    }
    fn set_wait_bound(&mut self, bound: Duration) {
        self.core_mut().wait_bound = bound;
    }
    fn reload(
        &mut self,
        rendered: &Rendered,
        generation: u64,
        origin: Instant,
    ) -> model::ReloadRecord {
        self.reload_text(&rendered.text, generation, origin)
    }
    fn stop(&mut self, mode: StopMode) -> Result<(), Error> {
        Proxied::stop_within(self, mode, mode.bound())
    }
    fn is_running(&mut self) -> bool {
        self.core_mut().process.is_running()
    }
    fn logs(&self) -> LogFiles {
        self.log_files()
    }
}
