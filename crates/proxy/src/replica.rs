//! What every replica proxybench starts shares, whatever its proxy: its name, directory, admin
//! and control ports, the generation it serves, the bound on reload waits and its supervised
//! process group, with the [`driver::Replica`] methods that only read them and the kill on drop.
//! A driver's replica is a [`Running`] over a [`Core`], and the driver implements [`Proxied`] (its
//! reload, its stop, its status page and its logs); [`driver::Replica`] then comes with it.

use crate::driver::{self, Checked, LogFiles, Rendered, ReplicaHandle, StatusReader, StopMode};
use crate::logs::LogFormat;
use crate::process::{self, Supervised};
use crate::Error;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A proxy's signals for a graceful and for a fast stop, each with its name for messages (a kill
/// is SIGKILL to the whole group, for every proxy).
#[derive(Debug, Clone, Copy)]
pub struct Stops {
    /// Finish what is in flight, then exit.
    pub(crate) graceful: (i32, &'static str),
    /// Exit now.
    pub(crate) fast: (i32, &'static str),
}

/// The state every started replica has, and its process group (killed when the core drops, so
/// a replica is never left behind).
#[derive(Debug)]
pub struct Core {
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
    stops: Stops,
}

impl Core {
    /// A started replica's core: the reload wait bound at its default, 60 s.
    pub(crate) fn new(
        name: &str,
        dir: &Path,
        admin_port: u16,
        generation: u64,
        process: Supervised,
        stops: Stops,
    ) -> Core {
        Core {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            admin_port,
            control_port: 0,
            generation,
            wait_bound: Duration::from_secs(60),
            process,
            stops,
        }
    }

    /// Sends the proxy's signal for `mode` (SIGKILL to the whole group for a kill) and waits up
    /// to `bound` for the exit; past the bound the group is killed and a Timeout error returned.
    pub(crate) fn stop_within(&mut self, mode: StopMode, bound: Duration) -> Result<(), Error> {
        let (sig, what) = match mode {
            StopMode::Graceful => self.stops.graceful,
            StopMode::Fast => self.stops.fast,
            StopMode::Kill => (libc::SIGKILL, "SIGKILL"),
        };
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
        let mut rec =
            model::ReloadRecord::begun(&self.name, generation, origin.elapsed().as_secs_f64());
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

impl Core {
    /// Waits up to `bound` for the admin listener to answer the replica's generation; `exited`
    /// gives the proxy's own words once its process has exited. On failure the process group is
    /// killed at once (a replica that did not start is never left behind).
    pub(crate) fn await_start(
        &mut self,
        bound: Duration,
        exited: &mut dyn FnMut(&mut Supervised) -> Option<String>,
    ) -> Result<(), Error> {
        let process = &mut self.process;
        let started = driver::await_start(
            &self.name,
            self.admin_port,
            self.generation,
            bound,
            &mut || exited(process),
        );
        self.or_kill(started)
    }

    /// `result`, with the process group killed first when it is an error.
    pub(crate) fn or_kill<T>(&mut self, result: Result<T, Error>) -> Result<T, Error> {
        if result.is_err() {
            self.process.kill_group();
        }
        result
    }

    /// Reloads a proxy that rereads its config file on a signal (nginx, HAProxy), as
    /// [`driver::Replica::reload`] says: the new text is written beside the running file and
    /// checked there (a refusal leaves the running config and the file alone), replaces the file,
    /// and the signal goes to the main process. Timed from the signal until the admin listener
    /// answers `generation` and until every process that existed before it has exited. When the
    /// new generation is never served and a failure was seen, the file on disk goes back to what
    /// runs.
    pub(crate) fn reload_by_signal(
        &mut self,
        text: &str,
        generation: u64,
        origin: Instant,
        how: &SignalReload<'_>,
    ) -> model::ReloadRecord {
        let mut rec = match self.begin_reload(generation, origin) {
            Ok(rec) => rec,
            Err(refused) => return refused,
        };
        let next = self.dir.join(format!("{}.next", how.file));
        if let Err(e) = fs::write(&next, text) {
            rec.error = Some(format!("cannot write {}: {e}", next.display()));
            return rec;
        }
        let t0 = Instant::now();
        let checked = (how.check)(&next);
        rec.validate_ms = t0.elapsed().as_secs_f64() * 1e3;
        if let Err(e) = checked {
            rec.error = Some(e.to_string());
            return rec;
        }
        let current = self.dir.join(how.file);
        let previous = fs::read(&current).ok();
        if let Err(e) = fs::rename(&next, &current) {
            rec.error = Some(format!("cannot replace {}: {e}", how.file));
            return rec;
        }
        if let Some(ready) = how.ready {
            ready(self);
        }
        let old = process::children(self.process.pid());
        let offset = fs::metadata(&how.diagnostics).map(|m| m.len()).unwrap_or(0);
        let t_sig = Instant::now();
        rec.t_s = t_sig.saturating_duration_since(origin).as_secs_f64();
        let (signal, signal_name) = how.signal;
        if !self.process.signal(signal, false) {
            rec.error = Some(format!(
                "{}: {signal_name} failed: the master is gone",
                self.name
            ));
            return rec;
        }
        let master = &mut self.process;
        let served = driver::await_reload(
            &mut rec,
            &self.name,
            t_sig,
            self.admin_port,
            Some(&old),
            self.wait_bound,
            &mut || (how.failed)(&read_from(&how.diagnostics, offset)),
            &mut || master.is_running(),
        );
        if rec.served_ms.is_some() {
            self.generation = generation;
        } else if !served && rec.error.is_some() {
            // Keep the file on disk equal to what runs.
            if let Some(prev) = &previous {
                let _ = fs::write(&current, prev);
            }
        }
        rec
    }
}

/// How a proxy that reads one config file starts ([`start_by_file`]): what differs between nginx
/// and HAProxy.
pub(crate) struct FileStart<'a> {
    /// The config file's name in the replica directory (`nginx.conf`).
    pub(crate) file: &'a str,
    /// A path that a config rendered for this directory names (its pid file).
    pub(crate) marker: PathBuf,
    /// The proxy's checker, on the written config file.
    pub(crate) check: &'a dyn Fn(&Path) -> Result<Checked, Error>,
    /// Starts the proxy's main process on the written config file.
    pub(crate) spawn: &'a dyn Fn(&Path) -> Result<Supervised, Error>,
    /// The proxy's own words once its main process has exited; `None` while it runs.
    pub(crate) exited: &'a mut dyn FnMut(&mut Supervised) -> Option<String>,
}

/// Starts a replica of a proxy that reads one config file: the directory made, the config written
/// and passed by the proxy's own checker, the main process started and the admin listener
/// awaited for up to 15 s (the process group is killed when it never answers).
pub(crate) fn start_by_file<P: Proxied>(
    name: &str,
    dir: &Path,
    conf_text: &str,
    admin_port: u16,
    generation: u64,
    how: FileStart<'_>,
) -> Result<Core, Error> {
    prepare_dir(name, dir, conf_text, &how.marker.to_string_lossy(), &[])?;
    let conf = write_config(dir, how.file, conf_text)?;
    (how.check)(&conf)?;
    let process = (how.spawn)(&conf)?;
    let mut core = Core::new(name, dir, admin_port, generation, process, P::STOPS);
    core.await_start(Duration::from_secs(15), how.exited)?;
    Ok(core)
}

/// The lines of a proxy's diagnostics that `is_error` picks, verbatim, one per line.
pub(crate) fn error_lines(text: &str, is_error: impl Fn(&str) -> bool) -> Vec<String> {
    text.lines()
        .filter(|l| is_error(l))
        .map(str::to_string)
        .collect()
}

/// How a proxy reloads by signal ([`Core::reload_by_signal`]): what differs between nginx and
/// HAProxy.
pub(crate) struct SignalReload<'a> {
    /// The config file's name in the replica directory (`nginx.conf`).
    pub(crate) file: &'a str,
    /// The proxy's checker, on a config file in the replica directory.
    pub(crate) check: &'a dyn Fn(&Path) -> Result<Checked, Error>,
    /// What must hold before the signal is sent (HAProxy's master taking signals again).
    pub(crate) ready: Option<&'a dyn Fn(&Core)>,
    /// The reload signal, and its name for messages.
    pub(crate) signal: (i32, &'static str),
    /// The file the proxy writes a failed reload's words to.
    pub(crate) diagnostics: PathBuf,
    /// The failure, if any, in what the proxy wrote to `diagnostics` since the signal.
    pub(crate) failed: &'a dyn Fn(&str) -> Option<String>,
}

/// A file's text from byte `offset` on (empty when it cannot be read).
pub(crate) fn read_from(path: &Path, offset: u64) -> String {
    let mut text = String::new();
    if let Ok(mut f) = fs::File::open(path) {
        if f.seek(SeekFrom::Start(offset)).is_ok() {
            let _ = f.read_to_string(&mut text);
        }
    }
    text
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

/// A started replica of the proxy whose driver is `P`: the [`Core`] every replica shares, with
/// what differs coming from `P`'s [`Proxied`]. `nginx::Replica` is `Running<Nginx>`, and so on;
/// each driver adds its own `start` and status reader.
#[derive(Debug)]
pub struct Running<P> {
    /// The shared state.
    pub(crate) core: Core,
    /// The driver whose [`Proxied`] says what differs.
    proxy: PhantomData<fn() -> P>,
}

impl<P: Proxied> Running<P> {
    /// A replica over a started core.
    pub(crate) fn new(core: Core) -> Running<P> {
        Running {
            core,
            proxy: PhantomData,
        }
    }

    /// Reloads with a rendered config's text, as [`driver::Replica::reload`] says: the proxy's
    /// checker first, then its own way of loading a config, timed. Never panics; every failure
    /// lands in `error`. `generation` must differ from the one served.
    pub fn reload(&mut self, text: &str, generation: u64, origin: Instant) -> model::ReloadRecord {
        P::reload(&mut self.core, text, generation, origin)
    }

    /// [`stop`](crate::driver::Replica::stop) with an explicit bound.
    pub fn stop_within(&mut self, mode: StopMode, bound: Duration) -> Result<(), Error> {
        P::stop_within(&mut self.core, mode, bound)
    }

    /// The main process and its current children, for CPU and memory collectors.
    pub fn pids(&self) -> Vec<u32> {
        self.core.handle(None).pids()
    }

    /// The main process's pid (also the process group id).
    pub fn master_pid(&self) -> u32 {
        self.core.process.pid()
    }

    /// The access log.
    pub fn access_log_path(&self) -> PathBuf {
        self.core.dir.join(ACCESS_LOG)
    }

    /// The proxy's own log: its error log, or the stderr it writes its diagnostics to.
    pub fn error_log_path(&self) -> PathBuf {
        self.core.dir.join(P::ERROR_LOG)
    }

    /// One sample of the proxy's status page, as a stub_status sample; an error for a proxy
    /// without one.
    pub fn status(&self, origin: Instant) -> Result<model::StubSample, Error> {
        let read = P::STATUS.ok_or_else(|| {
            Error::Invalid(format!("{}: the proxy has no status page", self.core.name))
        })?;
        read(&self.core.handle(P::STATUS), origin)
    }
}

/// The access log's name in a replica directory, for every proxy proxybench starts.
pub(crate) const ACCESS_LOG: &str = "access.log";

/// What one proxy's replicas do differently, implemented by its driver: how it reloads, how it
/// stops, its status page and its own log. [`Running`] over it is the
/// [`driver::Replica`] the run talks to. (Public in a private module: the bound of public impls,
/// not a trait anyone outside implements.)
pub trait Proxied: std::fmt::Debug {
    /// The proxy's status-page reader, if it has one.
    const STATUS: Option<StatusReader>;

    /// Its stop signals.
    const STOPS: Stops;

    /// The proxy's own log in a replica directory (`error.log`), beside [`ACCESS_LOG`].
    const ERROR_LOG: &'static str;

    /// The format its logs are written in.
    const LOG_FORMAT: LogFormat;

    /// Reloads the replica with a rendered config's text, as [`driver::Replica::reload`] says.
    fn reload(core: &mut Core, text: &str, generation: u64, origin: Instant)
        -> model::ReloadRecord;

    /// Stops within `bound`, as [`driver::Replica::stop`] says; by default the proxy's signal
    /// for `mode`.
    fn stop_within(core: &mut Core, mode: StopMode, bound: Duration) -> Result<(), Error> {
        core.stop_within(mode, bound)
    }
}

impl<P: Proxied> driver::Replica for Running<P> {
    fn name(&self) -> &str {
        &self.core.name
    }
    fn dir(&self) -> &Path {
        &self.core.dir
    }
    fn admin_port(&self) -> u16 {
        self.core.admin_port
    }
    fn control_port(&self) -> u16 {
        self.core.control_port
    }
    fn generation(&self) -> u64 {
        self.core.generation
    }
    fn handle(&self) -> ReplicaHandle {
        self.core.handle(P::STATUS)
    }
    fn set_wait_bound(&mut self, bound: Duration) {
        self.core.wait_bound = bound;
    }
    fn reload(
        &mut self,
        rendered: &Rendered,
        generation: u64,
        origin: Instant,
    ) -> model::ReloadRecord {
        P::reload(&mut self.core, &rendered.text, generation, origin)
    }
    fn stop(&mut self, mode: StopMode) -> Result<(), Error> {
        P::stop_within(&mut self.core, mode, mode.bound())
    }
    fn is_running(&mut self) -> bool {
        self.core.process.is_running()
    }
    fn logs(&self) -> LogFiles {
        LogFiles {
            access: Some(self.access_log_path()),
            error: Some(self.error_log_path()),
            format: P::LOG_FORMAT,
            ..LogFiles::default()
        }
    }
}
