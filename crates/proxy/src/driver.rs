//! The one seam between a run and the proxy under test. Every proxy kind implements [`Driver`]
//! (render the neutral model, check it with the proxy's own checker, start replicas that share
//! the listener ports, say what it can express) and its replicas implement [`Replica`] (reload
//! timed to the moment the new generation serves, stop gracefully or abruptly, say where their
//! logs are). The runner, the stack, the collectors and the analyses talk only to these two
//! traits, through [`crate::driver`](crate::driver()) for a [`ProxyKind`](crate::config::ProxyKind).

use crate::config::{LogFormat, ProxyConfig, ProxyKind};
use crate::features::Support;
use crate::records::{AccessRecord, ErrorRecord};
use crate::tls::TlsFiles;
use crate::{admin, process, Error, Feature};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What a render needs from the run: where the replica lives, its generation, the addresses of
/// each backend group, the port of each listener, the replica's own ports and the TLS files.
#[derive(Debug, Clone, Default)]
pub struct RenderContext {
    /// The replica's directory (pid file, logs, sockets, temp dirs); absolute paths are rendered.
    pub prefix: PathBuf,
    /// Config generation stamped into responses and answered by the admin listener.
    pub generation: u64,
    /// Backend group name to addresses (127.0.0.0/8 only); an empty group renders so that the
    /// proxy answers 502/503 as a Service without endpoints would.
    pub groups: BTreeMap<String, Vec<SocketAddr>>,
    /// Listener name to port (overrides a listener's fixed `port`).
    pub ports: BTreeMap<String, u16>,
    /// The replica's own admin listener port (127.0.0.1, not shared): `GET /generation`.
    pub admin_port: u16,
    /// A second port of the replica's own for a proxy's control API (Caddy's admin API); 0 when
    /// the run gives none.
    pub control_port: u16,
    /// Certificate and key for TLS listeners.
    pub tls: Option<TlsFiles>,
    /// Logs go to stdout (access) and stderr (errors) instead of files in `prefix`: on
    /// Kubernetes they are read through the log API, so they outlive a deleted pod.
    pub stdio_logs: bool,
    /// The admin listener's address as written into the config instead of
    /// `127.0.0.1:admin_port`: on Kubernetes a placeholder the pod replaces with its own address
    /// (hostNetwork pods share every port).
    pub admin_listen: Option<String>,
    /// The control API's address (Caddy's admin API) as written into the config instead of
    /// `127.0.0.1:control_port`: on Kubernetes a placeholder the pod replaces with its own
    /// address, as [`RenderContext::admin_listen`].
    pub control_listen: Option<String>,
    /// The upstream addresses come from the cluster (EndpointSlices), so they need not be on
    /// loopback; locally every backend is on 127.0.0.0/8.
    pub cluster_upstreams: bool,
    /// The address the listeners and the admin listener bind (127.0.0.1 when `None`): a pod on
    /// the pod network binds every address of its own network namespace (`0.0.0.0`), so that its
    /// Service, its kubelet's probes and this machine reach it at its pod IP.
    pub bind: Option<IpAddr>,
    /// The config runs on another machine (a pod): its paths are that machine's, and the render
    /// writes nothing here; the driver's container commands make the files the config names
    /// (HAProxy's certificate PEM) from the platform's files.
    pub remote: bool,
}

impl RenderContext {
    /// Refuses an upstream address the run may not send to: loopback always, any other address
    /// only when the platform found it in the cluster.
    pub fn check_upstream(&self, upstream: &str, a: &SocketAddr) -> Result<(), Error> {
        if a.ip().is_loopback() || self.cluster_upstreams {
            return Ok(());
        }
        Err(Error::Invalid(format!(
            "upstream '{upstream}': backend {a} is not on loopback (127.0.0.0/8 only)"
        )))
    }

    /// The admin listener's address: the platform's placeholder, or the replica's own port on
    /// the bind address.
    pub fn admin_address(&self) -> Result<String, Error> {
        if let Some(a) = &self.admin_listen {
            return Ok(a.clone());
        }
        if self.admin_port == 0 {
            return Err(Error::Invalid("the run assigned no admin port".into()));
        }
        Ok(SocketAddr::new(self.bind_ip(), self.admin_port).to_string())
    }

    /// The address listeners bind: [`RenderContext::bind`], else 127.0.0.1.
    pub fn bind_ip(&self) -> IpAddr {
        self.bind
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
    }

    /// A listener's port: the one the run assigned, else the one the listener fixes.
    pub fn port_of(&self, l: &crate::config::Listener) -> Result<u16, Error> {
        self.ports.get(&l.name).copied().or(l.port).ok_or_else(|| {
            Error::Invalid(format!(
                "listener '{}' has no port: none fixed and none assigned by the run",
                l.name
            ))
        })
    }

    /// `ADDRESS:port` of a listener on the bind address.
    pub fn listen_on(&self, port: u16) -> String {
        SocketAddr::new(self.bind_ip(), port).to_string()
    }
}

/// The model item whose rendered lines hold line `line` (1-based) of `conf_text`: the nearest
/// item comment (`mark` then the item) at or above it, so a checker's message is traced back to
/// the scenario line that made it. `digits` is the message from the line number on (`12]...`).
pub(crate) fn item_of_line(conf_text: &str, digits: &str, mark: &str) -> Option<String> {
    let n: String = digits.chars().take_while(char::is_ascii_digit).collect();
    let line: usize = n.parse().ok()?;
    conf_text
        .lines()
        .take(line)
        .collect::<Vec<_>>()
        .iter()
        .rev()
        .find_map(|l| l.trim_start().strip_prefix(mark))
        .map(|k| k.trim().to_string())
}

/// A rendered config: the text and the file name the proxy reads it under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The config file's text.
    pub text: String,
    /// Its file name in the replica directory (`nginx.conf`, `haproxy.cfg`, `caddy.json`).
    pub file: &'static str,
}

/// What a passing check said: how long it took and any warnings the proxy printed.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// Time the proxy's checker took.
    pub took: Duration,
    /// Warning lines, verbatim.
    pub warnings: Vec<String>,
}

/// A config the proxy's own checker refused: its message, verbatim, and the model item
/// (`listener.NAME`, `route.N`, `upstream.NAME`, `rate_limit.NAME`, `raw.BLOCK`) whose rendered
/// lines it names, so the run can point at the scenario line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The proxy's own message, verbatim (several lines possible).
    pub message: String,
    /// The model item the message leads back to, when it names a rendered line.
    pub item: Option<String>,
}

impl Refusal {
    /// Sorts a driver's validation into `Driver::check`'s answer: a refusal, traced by `item_at`
    /// from the proxy's message to the rendered line's model item, is the proxy's verdict on the
    /// config; any other error is a setup error of the run.
    pub fn sort(
        validated: Result<Checked, Error>,
        item_at: impl FnOnce(&str) -> Option<String>,
    ) -> Result<Result<Checked, Refusal>, Error> {
        match validated {
            Ok(c) => Ok(Ok(c)),
            Err(Error::Refused(message)) => Ok(Err(Refusal {
                item: item_at(&message),
                message,
            })),
            Err(e) => Err(e),
        }
    }
}

/// How to stop a replica; each driver maps it to its proxy's signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// Stop accepting, finish in-flight requests, then exit.
    Graceful,
    /// Exit at once, dropping in-flight requests.
    Fast,
    /// SIGKILL to the whole process group: a crash, as a pod killed without notice.
    Kill,
}

impl StopMode {
    /// The default bound on waiting for the exit.
    pub fn bound(self) -> Duration {
        match self {
            StopMode::Graceful => Duration::from_secs(60),
            StopMode::Fast => Duration::from_secs(10),
            StopMode::Kill => Duration::from_secs(5),
        }
    }
}

/// Reads one status sample (connections, requests) from a replica's admin port; drivers whose
/// proxy has no such page give none.
pub type StatusReader = fn(&ReplicaHandle, Instant) -> Result<model::StubSample, Error>;

/// What a collector needs of a replica, detached from the `Replica` that owns the process: its
/// name, root pid and admin port. Cloning it is cheap and it can move across threads.
#[derive(Debug, Clone, Default)]
pub struct ReplicaHandle {
    /// Replica name (`nginx-0`, `haproxy-1`...).
    pub name: String,
    /// The replica's root process (a master, or the only process).
    pub pid: u32,
    /// The admin listener's port on 127.0.0.1; 0 when the replica has none (an external
    /// target): no readiness probe, no generation.
    pub admin_port: u16,
    /// The driver's status-page reader, if its proxy has one.
    pub status: Option<StatusReader>,
    /// For a proxy proxybench did not start: the process name (`/proc/PID/comm`) whose
    /// processes, with their descendants, are the replica's (`pid` is then unused).
    pub processes: Option<String>,
}

impl ReplicaHandle {
    /// The root process and every live descendant (workers, old workers still finishing), for
    /// CPU and memory collectors. Empty once the root is gone.
    pub fn pids(&self) -> Vec<u32> {
        if let Some(comm) = &self.processes {
            return process::by_comm(comm);
        }
        if !process::alive(self.pid) {
            return Vec::new();
        }
        let mut v = vec![self.pid];
        v.extend(process::descendants(self.pid));
        v
    }

    /// One status sample stamped with seconds since `origin`, or `None` when the proxy has no
    /// status page.
    pub fn status(&self, origin: Instant) -> Option<Result<model::StubSample, Error>> {
        self.status.map(|f| f(self, origin))
    }

    /// True when the replica has an admin listener to probe for readiness and generations.
    pub fn has_admin(&self) -> bool {
        self.admin_port != 0
    }

    /// A readiness probe: how long the admin listener took to answer `/generation`, or the error
    /// when it did not answer within `timeout` (a Kubernetes probe's `timeoutSeconds`).
    pub fn probe(&self, timeout: Duration) -> Result<Duration, Error> {
        let t0 = Instant::now();
        admin::generation(self.admin_port, timeout)
            .map(|_| t0.elapsed())
            .map_err(|e| Error::io(format!("{}: readiness", self.name), e))
    }

    /// The config generation the admin listener answers now.
    pub fn generation(&self) -> Result<u64, Error> {
        admin::generation(self.admin_port, Duration::from_secs(2))
            .map_err(|e| Error::io(format!("{}: generation", self.name), e))
    }
}

/// Where a replica's logs are, and how they are written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogFiles {
    /// The access log, if the replica writes one.
    pub access: Option<PathBuf>,
    /// The error log (or the process's diagnostic stream), if any.
    pub error: Option<PathBuf>,
    /// The access log's format.
    pub format: LogFormat,
    /// Byte offset in the access log where this run's lines begin (0 for a log of its own).
    pub access_offset: u64,
    /// Byte offset in the error log where this run's lines begin.
    pub error_offset: u64,
    /// True when the files are not proxybench's (an external target's): the run copies the part
    /// from the offsets instead of moving them.
    pub borrowed: bool,
}

/// How a proxy runs in a container that a platform (Kubernetes) starts instead of proxybench:
/// the shell commands its image runs. The platform sets `$CONF` (the config file, rendered with
/// `stdio_logs` and `remote`, so the access and error lines come out of the container's own
/// streams), `$PREFIX` (the replica directory the config was rendered for) and, when the case
/// has TLS listeners, `$TLS_CERT` and `$TLS_KEY` (the certificate chain and key files the
/// render context named).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerCommands {
    /// Starts the proxy in the foreground (it is the container's main process, so it gets the
    /// image's stop signal), e.g. `exec nginx -c "$CONF" -g 'daemon off;'`.
    pub start: String,
    /// Checks `$CONF` with the proxy's own checker, then makes the running proxy serve it;
    /// exits non-zero with the checker's message when the config is refused.
    pub reload: String,
    /// Checks `$CONF` with the proxy's own checker and nothing else: exits 0 when it passes,
    /// else non-zero with the checker's message (a pod of the proxy's image runs it before any
    /// replica gets the config).
    pub check: String,
    /// Run before the container gets its stop signal, after the platform's own preStop wait
    /// (Caddy drains keep-alive connections this way); `None` when the proxy needs nothing.
    pub pre_stop: Option<String>,
    /// The access lines' format among the container's output (the other lines are its errors).
    pub log_format: LogFormat,
    /// The image a platform runs when the scenario names none: the one `make image` builds for
    /// this proxy (k8s/image.sh, from the Debian package's binary).
    pub image: &'static str,
}

/// One proxy kind: everything the run asks of it before and while replicas run.
pub trait Driver: Send + Sync {
    /// The kind this driver runs.
    fn kind(&self) -> ProxyKind;

    /// The kind as scenarios spell it (`nginx`, `haproxy`, `caddy`, `external`).
    fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// The proxy's version as it reports it, verbatim, for env.json.
    fn version(&self) -> Result<String, Error>;

    /// The proxy's own checker as a person would run it (`nginx -t`), for `proxybench check`'s
    /// summary of what checked the scenario's configs.
    fn checker(&self) -> &'static str;

    /// What a replica runs on for `worker_processes = n`, in the proxy's words (`2 worker
    /// processes`, `1 process of 2 threads (nbthread)`), for env.json and the comparison; `None`
    /// when proxybench does not start the proxy.
    fn workers(&self, n: u32) -> Option<String>;

    /// How far this proxy can express one feature of the model.
    fn support(&self, feature: Feature) -> Support;

    /// Renders the model for one replica. Fails when the model is inconsistent or the context
    /// lacks a port, a backend group or a certificate the model needs.
    fn render(&self, cfg: &ProxyConfig, ctx: &RenderContext) -> Result<Rendered, Error>;

    /// Runs the proxy's own checker on a config text in scratch directory `dir`:
    /// [`Error::Refused`] with the proxy's words when it refuses the config. A driver with a
    /// checker of its own gets [`Driver::check`] and [`Driver::trace`] from this and
    /// [`Driver::item_at`].
    fn validate(&self, _text: &str, _dir: &Path) -> Result<Checked, Error> {
        Err(Error::Invalid(format!(
            "{} has no checker of its own",
            self.name()
        )))
    }

    /// The model item (`route.2`, `upstream.api`...) whose rendered lines the checker's
    /// `message` about `text` names; `None` when it names none.
    fn item_at(&self, _text: &str, _message: &str) -> Option<String> {
        None
    }

    /// Checks a rendered config with the proxy's own checker, in scratch directory `dir`.
    /// `Ok(Err(refusal))` when the proxy refuses it; `Err` when the checker could not run.
    fn check(&self, rendered: &Rendered, dir: &Path) -> Result<Result<Checked, Refusal>, Error> {
        Refusal::sort(self.validate(&rendered.text, dir), |m| {
            self.item_at(&rendered.text, m)
        })
    }

    /// Starts one replica in `ctx.prefix` serving `rendered` (checked first) and returns once
    /// its admin listener answers `ctx.generation`.
    fn start(
        &self,
        name: &str,
        ctx: &RenderContext,
        rendered: &Rendered,
    ) -> Result<Box<dyn Replica>, Error>;

    /// The commands a container image of this proxy runs, for platforms that start replicas as
    /// pods; `None` when the proxy has no container form yet.
    fn container(&self) -> Option<ContainerCommands> {
        None
    }

    /// The model item a checker's message about `rendered` leads to (the same tracing as
    /// [`Driver::check`]), for a check that ran elsewhere (in a pod of the proxy's image).
    fn trace(&self, rendered: &Rendered, message: &str) -> Option<String> {
        self.item_at(&rendered.text, message)
    }

    /// The log formats this driver's proxy writes and this driver parses: its kind's, as the
    /// registry lists them ([`Parse`] finds their parser here).
    fn log_formats(&self) -> &'static [LogFormat] {
        self.kind().log_formats()
    }

    /// Parses one access-log line written in `format` (one of [`Driver::log_formats`]); `None`
    /// when it is not in that format.
    fn access_line<'a>(&self, _format: LogFormat, _line: &'a str) -> Option<AccessRecord<'a>> {
        None
    }

    /// Parses one error-log line written beside an access log in `format`; `None` when it has no
    /// level the proxy writes.
    fn error_line<'a>(&self, _format: LogFormat, _line: &'a str) -> Option<ErrorRecord<'a>> {
        None
    }

    /// True for a line of an access stream in `format` that is no request at all (a proxy that
    /// writes notices to the stream its access log goes to).
    fn not_a_request(&self, _format: LogFormat, _line: &str) -> bool {
        false
    }
}

/// The parsing of a [`LogFormat`], through the driver that writes it: a trait because the
/// format itself is data of the sys-free setup crate, which knows no driver.
pub trait Parse {
    /// The driver that parses this format: its kind's (the registry line that lists it).
    fn driver(self) -> &'static dyn Driver;
    /// True for a line of an access stream that is no request at all (see
    /// [`Driver::not_a_request`]): not counted as an access-log line.
    fn not_a_request(self, line: &str) -> bool;
    /// Parses one access-log line, through the format's driver; `None` when it is not in this
    /// format.
    fn access(self, line: &str) -> Option<AccessRecord<'_>>;
    /// Parses one error-log line, through the format's driver; `None` when it has no level this
    /// format knows.
    fn error(self, line: &str) -> Option<ErrorRecord<'_>>;
}

impl Parse for LogFormat {
    fn driver(self) -> &'static dyn Driver {
        crate::driver(self.kind())
    }

    fn not_a_request(self, line: &str) -> bool {
        self.driver().not_a_request(self, line)
    }

    fn access(self, line: &str) -> Option<AccessRecord<'_>> {
        self.driver().access_line(self, line)
    }

    fn error(self, line: &str) -> Option<ErrorRecord<'_>> {
        self.driver().error_line(self, line)
    }
}

/// A running replica of some proxy.
pub trait Replica: Send + std::fmt::Debug {
    /// The replica's name.
    fn name(&self) -> &str;

    /// Its directory (the `prefix` it was rendered for).
    fn dir(&self) -> &Path;

    /// Its admin listener's port (render the next generation with it).
    fn admin_port(&self) -> u16;

    /// Its control port (render the next generation with it; 0 when unused).
    fn control_port(&self) -> u16 {
        0
    }

    /// The generation it serves.
    fn generation(&self) -> u64;

    /// A detached handle for collectors on other threads.
    fn handle(&self) -> ReplicaHandle;

    /// Bounds how long a reload waits for the new generation and for old processes to exit.
    fn set_wait_bound(&mut self, bound: Duration);

    /// Reloads with `rendered` (checked first: a refusal leaves the running config alone and is
    /// recorded with the proxy's message). Records milliseconds from the reload's trigger until
    /// the admin listener answers the new generation, and until every process that served the
    /// old one has exited. Never panics; every failure lands in `error`.
    fn reload(
        &mut self,
        rendered: &Rendered,
        generation: u64,
        origin: Instant,
    ) -> model::ReloadRecord;

    /// Stops the replica and waits (60 s graceful, 10 s fast, 5 s kill); past the bound the
    /// group is killed and a Timeout error returned.
    fn stop(&mut self, mode: StopMode) -> Result<(), Error>;

    /// True while the replica's root process runs.
    fn is_running(&mut self) -> bool;

    /// Where its logs are.
    fn logs(&self) -> LogFiles;

    /// True when proxybench attached to a proxy it did not start (an external target): the
    /// stack never stops it, only detaches.
    fn attached(&self) -> bool {
        false
    }
}

/// Polls after a reload was triggered at `t_sig` until the admin port answers `generation`,
/// filling `rec`. `failed` is asked every 50 ms while the generation is not served and returns
/// the proxy's own complaint when the reload was refused; `running` says whether the replica is
/// still up. Returns true when the new generation served.
///
/// The processes of the old generation (`old`; `None`: the proxy reloads in place) may take long
/// to exit (HAProxy's old worker waits for each idle keep-alive client to send again), and the
/// reload is done for the scenario once the new generation serves: the next action must not wait
/// for them. So when they are still running then, a watcher thread times their exit on the same
/// clock (bounded by `bound` from the trigger), and [`settle_reloads`] writes that time into the
/// record at the case's end.
#[allow(clippy::too_many_arguments)]
pub(crate) fn await_reload(
    rec: &mut model::ReloadRecord,
    name: &str,
    t_sig: Instant,
    admin_port: u16,
    old: Option<&[u32]>,
    bound: Duration,
    failed: &mut dyn FnMut() -> Option<String>,
    running: &mut dyn FnMut() -> bool,
) -> bool {
    let generation = rec.generation;
    let deadline = t_sig + bound;
    let mut next_log_check = t_sig;
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    loop {
        let now = Instant::now();
        if let Some(old) = old {
            if rec.old_workers_exited_ms.is_none() && old.iter().all(|&p| !process::alive(p)) {
                rec.old_workers_exited_ms = Some(ms(t_sig));
            }
        }
        if admin::generation(admin_port, Duration::from_millis(500)).ok() == Some(generation) {
            rec.served_ms = Some(ms(t_sig));
            if let (Some(old), None) = (old, rec.old_workers_exited_ms) {
                let key = (name.to_string(), generation, rec.t_s.to_bits());
                watch_old(key, t_sig, old.to_vec(), deadline);
            }
            return true;
        }
        if now >= next_log_check {
            if let Some(e) = failed() {
                rec.error = Some(e);
                return false;
            }
            next_log_check = now + Duration::from_millis(50);
        }
        if !running() {
            rec.error = Some(format!("{name}: the proxy exited during the reload"));
            return false;
        }
        if now >= deadline {
            rec.error = Some(format!(
                "{name}: generation {generation} not served within {bound:?}"
            ));
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The exit time of an old generation's processes, as a watcher thread measures it: `Ok(ms
/// since the reload's trigger)` or `Err(why not)`.
type Exit = Arc<OnceLock<Result<f64, Error>>>;

/// Which reload a watcher belongs to: its record's replica, generation and start time (bits).
type ReloadKey = (String, u64, u64);

/// Old generations still being watched, with the watcher's verdict.
static WATCHED: Mutex<Vec<(ReloadKey, Exit)>> = Mutex::new(Vec::new());

/// Starts a thread that times the exit of `old` from `t_sig`, giving up at `deadline`.
fn watch_old(key: ReloadKey, t_sig: Instant, old: Vec<u32>, deadline: Instant) {
    let exit: Exit = Arc::new(OnceLock::new());
    let slot = exit.clone();
    let who = key.0.clone();
    let spawned = std::thread::Builder::new()
        .name("pb-reload-watch".into())
        .spawn(move || loop {
            if old.iter().all(|&p| !process::alive(p)) {
                let _ = slot.set(Ok(t_sig.elapsed().as_secs_f64() * 1e3));
                return;
            }
            if Instant::now() >= deadline {
                let _ = slot.set(Err(Error::Timeout(format!(
                    "{who}: old processes still running {:?} after the reload",
                    deadline - t_sig
                ))));
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        });
    if let Err(e) = spawned {
        let _ = exit.set(Err(Error::io(
            format!("{}: cannot watch the old processes", key.0),
            e,
        )));
    }
    WATCHED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((key, exit));
}

/// Writes the exit times of old generations that were still running when their reload served
/// into `records` (matched by replica and generation), waiting for each watcher's verdict: call
/// it once the case's replicas are down, before the reloads are recorded. A generation whose
/// processes outlived the bound gets the error instead.
pub fn settle_reloads(records: &mut [model::ReloadRecord]) {
    for rec in records.iter_mut() {
        let key = (rec.replica.clone(), rec.generation, rec.t_s.to_bits());
        let exit = {
            let mut w = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
            match w.iter().position(|(k, _)| *k == key) {
                Some(i) => w.swap_remove(i).1,
                None => continue,
            }
        };
        let verdict = loop {
            if let Some(v) = exit.get() {
                break v.as_ref().map(|ms| *ms).map_err(Error::to_string);
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        {
            match verdict {
                Ok(ms) => rec.old_workers_exited_ms = Some(ms),
                Err(e) => {
                    rec.error.get_or_insert(e);
                }
            }
        }
    }
}

/// Waits until the admin port answers `generation`, or the process exits (`exited` returns its
/// complaint), or `bound` passes.
pub(crate) fn await_start(
    name: &str,
    admin_port: u16,
    generation: u64,
    bound: Duration,
    exited: &mut dyn FnMut() -> Option<String>,
) -> Result<(), Error> {
    let deadline = Instant::now() + bound;
    let mut last;
    loop {
        if let Some(msg) = exited() {
            return Err(Error::Refused(format!("{name}: exited at start: {msg}")));
        }
        match admin::generation(admin_port, Duration::from_millis(500)) {
            Ok(g) if g == generation => return Ok(()),
            Ok(g) => last = format!("generation {g}"),
            Err(e) => last = e.to_string(),
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout(format!(
                "{name}: admin port {admin_port} did not answer generation {generation} within \
                 {bound:?} (last: {last})"
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
