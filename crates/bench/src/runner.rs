//! Plays a scenario: for each case, stand the stack up, start the loads, fire the actions on time,
//! sample the processes every second, tear everything down, and record what was measured
//! ([`analysis::record`]); then analyse the record ([`crate::analyse`]) into the results directory.
//! A stop request (Ctrl-C) or a failure ends the run early and still records what was measured.

use crate::error::one_line;
use crate::platform::StackSpec;
use crate::platform::{self, Platform, Stage};
use crate::procfs::{Group, Sampler};
use crate::progress::Progress;
use crate::{analyse, env};
use analysis::analysis::{Lives, Records};
use analysis::record;
use model::{CaseResult, Env, ProcSample, ReadinessSample, RunRecord, RunResults, StubSample};
use proxy::{ProxyConfig, ProxyKind, RenderContext, TlsFiles};
use scenario::paths;
use scenario::{ArrivalsSpec, Case, LoadSpec, Scenario, Via};
use std::collections::BTreeMap;
use std::fs;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How to run a scenario.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Results go to `<results_root>/<scenario>/<UTC stamp>/`.
    pub results_root: PathBuf,
    /// Set (by a signal handler) to end the run early; partial results are still written.
    pub stop: Arc<AtomicBool>,
    /// Print a live progress line on stderr.
    pub progress: bool,
    /// Feed live OpenMetrics (`--metrics-listen`): each load's seconds, each case's steps.
    pub metrics: Option<Arc<openmetrics::Registry>>,
}

/// Why a run could not be done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The scenario cannot run as written (the proxy rejects a config...); nothing was started.
    Invalid(String),
    /// The run could not even begin (results directory, certificates...).
    Failed(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Invalid(m) | RunError::Failed(m) => f.write_str(m),
        }
    }
}

/// A finished (or interrupted) run.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The results directory.
    pub dir: PathBuf,
    /// What was recorded, analysed (also in `dir/data.json`).
    pub results: RunResults,
}

/// Runs every case of `scn` and writes the results directory: first the record (what was
/// measured: record.json, scenario.toml, requests/), then, through [`analyse::analyse_dir`], the
/// analysis outputs (data.json, CSVs, report.md, charts), exactly as `proxybench analyse DIR`
/// would write them later.
pub fn run(scn: &Scenario, opts: &RunOptions) -> Result<RunOutcome, RunError> {
    run_as(scn, opts, &Target::default())
}

/// Where a run goes and which proxy kind it runs, when not the scenario's own.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// Write into exactly this directory (created) instead of a new
    /// `<results_root>/<scenario>/<stamp>/`: one proxy's directory in a comparison.
    pub dir: Option<PathBuf>,
    /// Run every proxy config of the scenario as this kind (`--proxy KIND`); recorded in
    /// record.json so `proxybench analyse` sees the scenario as it ran.
    pub proxy: Option<ProxyKind>,
    /// Run on this platform instead of the scenario's `[platform]` (`--platform` and its
    /// flags).
    pub platform: Option<scenario::PlatformSpec>,
}

/// [`run`], into `target.dir` when given, with the proxy kind `target.proxy` when given.
pub fn run_as(scn: &Scenario, opts: &RunOptions, target: &Target) -> Result<RunOutcome, RunError> {
    let overridden;
    let scn = match target.proxy {
        Some(kind) => {
            overridden = scn.with_proxy_kind(kind);
            &overridden
        }
        None => scn,
    };
    check(scn)?;
    let platform_spec = target.platform.as_ref().unwrap_or(&scn.platform);
    // The platform first: a cluster that cannot be reached leaves no empty results directory.
    let mut platform = platform::registry::open(platform_spec).map_err(|e| match e {
        crate::error::PlatformError::NoNamespace(m) => RunError::Invalid(m),
        e => RunError::Failed(e.to_string()),
    })?;
    let dir = match &target.dir {
        Some(d) => {
            fs::create_dir_all(d).map_err(|e| RunError::Failed(format!("{}: {e}", d.display())))?;
            std::path::absolute(d).map_err(|e| RunError::Failed(format!("{}: {e}", d.display())))?
        }
        None => results_dir(scn, opts)?,
    };
    let failed = |e: record::RecordError| RunError::Failed(format!("cannot record the run: {e}"));
    record::write_scenario(&dir, scn).map_err(failed)?;
    let work = dir.join(".work");
    let tls = certificate(scn, &dir.join("tls"))?;
    let mut rec = new_record(scn, platform.as_ref());
    rec.proxy = target.proxy.map(|k| k.name().to_string());
    if target.platform.is_some() || !platform.on_this_machine() {
        rec.run.env.platform = Some(model::PlatformInfo {
            kind: platform_spec.kind.name().to_string(),
            context: platform_spec.context.clone().unwrap_or_default(),
            namespace: platform_spec.namespace.clone().unwrap_or_default(),
            kept: platform_spec.keep,
            ..Default::default()
        });
    }
    let run_origin = Instant::now();
    let total = scn.cases.len();
    for (i, case) in scn.cases.iter().enumerate() {
        if opts.stop.load(Ordering::SeqCst) {
            break;
        }
        let ctx = CaseCtx {
            index: i,
            total,
            dir: &dir,
            work: paths::join_plain(&work, "case name", &case.name)
                .map_err(|e| RunError::Invalid(e.to_string()))?,
            tls: tls.clone(),
            opts,
            start_s: run_origin.elapsed().as_secs_f64(),
            platform: platform.as_ref(),
            proxy: target.proxy.map(|k| k.name()),
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| run_case(case, &ctx))).unwrap_or_else(|p| {
            CaseOutcome {
                result: None,
                records: Records::new(),
                lives: Lives::new(),
                agent_parts: AgentParts::new(),
                abort: Some(format!("internal error: {}", panic_text(&p))),
            }
        });
        if let Some(r) = outcome.result {
            if let Some(p) = rec.run.env.platform.as_mut() {
                platform_paths(p, case, &r);
            }
            record::write_requests(&dir, &r, &outcome.records).map_err(failed)?;
            record::write_lives(&dir, &r, &outcome.lives).map_err(failed)?;
            record::write_agents(&dir, &r, &outcome.agent_parts).map_err(failed)?;
            if outcome.abort.is_some() {
                rec.aborted_case = Some(r.name.clone());
            }
            rec.run.cases.push(r);
        }
        if let Some(e) = outcome.abort {
            rec.run.partial = true;
            rec.run.abort_reason = Some(format!("case '{}': {e}", case.name));
            break;
        }
    }
    // The platform cleans up after an interrupted or failed run too.
    rec.run.findings.extend(platform.close());
    // The namespace and context the platform chose (a run's own namespace, the kubeconfig's
    // current context) are known from what the cluster showed.
    if let Some(info) = rec.run.env.platform.as_mut() {
        if let Some(c) = rec.run.cases.iter().find_map(|c| c.cluster.as_ref()) {
            if info.namespace.is_empty() {
                info.namespace.clone_from(&c.namespace);
            }
            if info.context.is_empty() {
                info.context.clone_from(&c.context);
            }
        }
    }
    if opts.stop.load(Ordering::SeqCst) && !rec.run.partial {
        rec.run.partial = true;
        rec.run.abort_reason = Some("interrupted".into());
    }
    let _ = fs::remove_dir_all(&work);
    record::write_record(&dir, &rec).map_err(failed)?;
    let results = analyse::analyse_dir(&dir).map_err(|e| {
        RunError::Failed(format!(
            "the run is recorded in {}, but its analysis failed: {e}",
            dir.display()
        ))
    })?;
    Ok(RunOutcome { dir, results })
}

/// Checks, without running anything, that `scn` can run as written: names that become
/// directories, the open-files budget, the certificate, and each config rendered and checked by
/// its proxy (a feature the proxy cannot express is refused naming the proxy, the feature and the
/// scenario line).
pub fn check(scn: &Scenario) -> Result<(), RunError> {
    // Names that become directories must stay under the results directory (the parser refuses
    // them already; this holds for scenarios built in code too), checked before anything is made.
    paths::join_plain(Path::new(""), "scenario name", &scn.name)
        .map_err(|e| RunError::Invalid(e.to_string()))?;
    for case in &scn.cases {
        paths::join_plain(Path::new(""), "case name", &case.name)
            .map_err(|e| RunError::Invalid(e.to_string()))?;
    }
    fd_budget(scn)?;
    stream_preflight(scn)?;
    let scratch = tempdir(&std::env::temp_dir(), "pb-check")?;
    let tls = certificate(scn, &scratch.0)?;
    if let Err(e) = preflight(scn, tls.as_ref(), &scratch.0) {
        // Keep the rendered config the proxy refused: its message points into it.
        std::mem::forget(scratch);
        return Err(e);
    }
    Ok(())
}

/// The record of a run about to start on `platform`: the scenario, the machine, no case yet.
fn new_record(scn: &Scenario, platform: &dyn Platform) -> RunRecord {
    let first = scn.cases.iter().find_map(|c| c.proxy.as_ref());
    let proxy_v = first.map_or_else(String::new, |cfg| {
        proxy::version_of(cfg).unwrap_or_else(|e| format!("{} version failed: {e}", cfg.kind))
    });
    RunRecord {
        record_version: model::RECORD_VERSION,
        scenario_file: scn.file.clone(),
        selected_cases: scn.cases.iter().map(|c| c.name.clone()).collect(),
        aborted_case: None,
        proxy: None,
        run: RunResults {
            schema: model::SCHEMA_VERSION,
            scenario: scn.name.clone(),
            description: scn.description.clone(),
            started_at: env::now_rfc3339(),
            quick: scn.quick,
            partial: false,
            abort_reason: None,
            env: Env {
                proxy_resources: platform.proxy_resources(scn),
                ..env::capture(proxy_kind(scn).map(|k| k.name()), proxy_v)
            },
            cases: Vec::new(),
            findings: Vec::new(),
            checks: Vec::new(),
        },
    }
}

/// Makes `<results_root>/<scenario>/<UTC stamp>[-n]/`, absolute (a proxy may resolve relative
/// paths in its config against its own directory).
pub fn results_dir(scn: &Scenario, opts: &RunOptions) -> Result<PathBuf, RunError> {
    let stamp = env::now_dir_stamp();
    let root = std::path::absolute(&opts.results_root)
        .map_err(|e| RunError::Failed(format!("{}: {e}", opts.results_root.display())))?;
    let scn_dir = paths::join_plain(&root, "scenario name", &scn.name)
        .map_err(|e| RunError::Invalid(e.to_string()))?;
    let mut dir = scn_dir.join(&stamp);
    let mut n = 1;
    while dir.exists() {
        n += 1;
        dir = scn_dir.join(format!("{stamp}-{n}"));
    }
    fs::create_dir_all(&dir).map_err(|e| RunError::Failed(format!("{}: {e}", dir.display())))?;
    Ok(dir)
}

struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn tempdir(base: &Path, prefix: &str) -> Result<ScratchDir, RunError> {
    let p = base.join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        env::now_dir_stamp()
    ));
    fs::create_dir_all(&p).map_err(|e| RunError::Failed(format!("{}: {e}", p.display())))?;
    Ok(ScratchDir(p))
}

/// One certificate for every TLS listener of every case and config.
fn certificate(scn: &Scenario, dir: &Path) -> Result<Option<TlsFiles>, RunError> {
    let mut names: Vec<String> = Vec::new();
    for case in &scn.cases {
        let grows_https = case.steps.iter().any(|s| {
            matches!(&s.action, scenario::Action::Grow(g) if g.what == scenario::GrowWhat::HttpsListeners)
        });
        if grows_https {
            let first = case
                .proxy
                .as_ref()
                .and_then(|p| p.listeners.first())
                .and_then(|l| l.server_names.first().cloned())
                .unwrap_or_else(|| "localhost".into());
            if !names.contains(&first) {
                names.push(first);
            }
        }
        for cfg in case.proxy.iter().chain(case.configs.values()) {
            for n in cfg.tls_names() {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
    }
    if names.is_empty() {
        return Ok(None);
    }
    proxy::tls::self_signed(&names, dir)
        .map(Some)
        .map_err(|e| RunError::Failed(format!("cannot make the TLS certificate: {e}")))
}

/// The proxy kind the scenario runs (its first case with a proxy), if any.
pub fn proxy_kind(scn: &Scenario) -> Option<ProxyKind> {
    scn.cases
        .iter()
        .find_map(|c| c.proxy.as_ref().map(|p| p.kind))
}

/// Renders every config of every case against placeholder addresses and runs the proxy's own
/// checker on it, so a config the proxy refuses, or a feature it cannot express, stops the run
/// before anything starts, naming the scenario line.
fn preflight(scn: &Scenario, tls: Option<&TlsFiles>, scratch: &Path) -> Result<(), RunError> {
    for case in &scn.cases {
        let groups: BTreeMap<String, Vec<SocketAddr>> = case
            .backends
            .iter()
            .map(|g| {
                let addrs = (0..g.count.max(1))
                    .map(|i| SocketAddr::from(([127, 0, 0, 1], 10000 + i as u16)))
                    .collect();
                (g.name.clone(), addrs)
            })
            .collect();
        let no_lines = scenario::ItemLines::default();
        let named = case
            .proxy
            .iter()
            .map(|c| ("[proxy]".to_string(), c, &case.proxy_lines));
        let alts = case.configs.iter().map(|(n, c)| {
            let lines = case.config_lines.get(n).unwrap_or(&no_lines);
            (format!("[configs.{n}]"), c, lines)
        });
        for (what, cfg, lines) in named.chain(alts) {
            let ports = cfg
                .listeners
                .iter()
                .enumerate()
                .map(|(i, l)| (l.name.clone(), l.port.unwrap_or(20000 + i as u16)))
                .collect();
            let ctx = RenderContext {
                prefix: scratch.to_path_buf(),
                generation: 1,
                groups: groups.clone(),
                ports,
                admin_port: 30000,
                control_port: 30001,
                tls: tls.cloned(),
                ..RenderContext::default()
            };
            let where_ = format!("case '{}', {what}", case.name);
            expressible(cfg, case, &where_, lines, &scn.file)?;
            if let Some(cpus) = &cfg.cpus {
                pinnable(cpus).map_err(|m| {
                    RunError::Invalid(format!(
                        "{}:{}: {where_}: {m}",
                        scn.file,
                        lines.line_of(None)
                    ))
                })?;
            }
            let driver = proxy::driver(cfg.kind);
            let rendered = driver.render(cfg, &ctx).map_err(|e| {
                RunError::Invalid(format!(
                    "{}:{}: {where_}: {e}",
                    scn.file,
                    lines.line_of(None)
                ))
            })?;
            let checked = driver.check(&rendered, scratch).map_err(|e| {
                RunError::Failed(format!(
                    "{where_}: cannot check the {} config: {e}",
                    cfg.kind
                ))
            })?;
            if let Err(refusal) = checked {
                // The proxy names a line of the rendered file; the item that line came from
                // names the scenario line.
                let line = lines.line_of(refusal.item.as_deref());
                let item = refusal.item.map(|i| format!(" {i}")).unwrap_or_default();
                return Err(RunError::Invalid(format!(
                    "{}:{line}: {where_}{item}: {} refused the config: {}",
                    scn.file,
                    cfg.kind,
                    one_line(&refusal.message)
                )));
            }
        }
    }
    Ok(())
}

/// Refuses a `[proxy] cpus` list naming a CPU this machine does not have online: the kernel
/// would pin the proxy to the rest of the list without a word, and the comparison would not be
/// the one asked for. (The list may lie outside the CPUs proxybench itself was started on: a
/// benchmark pins the load to one core and the proxy to another.)
fn pinnable(cpus: &proxy::config::Cpus) -> Result<(), String> {
    let path = "/sys/devices/system/cpu/online";
    let online =
        fs::read_to_string(path).map_err(|e| format!("proxy.cpus: cannot read {path}: {e}"))?;
    let online = proxy::config::Cpus::parse(online.trim())
        .map_err(|e| format!("proxy.cpus: cannot read {path}: {e}"))?;
    match cpus.list().iter().find(|c| !online.list().contains(c)) {
        Some(c) => Err(format!(
            "proxy.cpus = \"{cpus}\" names CPU {c}, but this machine has CPUs {online} online"
        )),
        None => Ok(()),
    }
}

/// Refuses a config that uses a feature its proxy cannot express, or that changes the proxy
/// kind within a case (a `swap_config` cannot turn nginx into HAProxy), naming the proxy, the
/// feature and the scenario line of the item using it.
fn expressible(
    cfg: &ProxyConfig,
    case: &Case,
    where_: &str,
    lines: &scenario::ItemLines,
    file: &str,
) -> Result<(), RunError> {
    if let Some(first) = &case.proxy {
        if first.kind != cfg.kind {
            return Err(RunError::Invalid(format!(
                "{file}:{}: {where_}: kind {} differs from the case's [proxy] kind {}; one case \
                 runs one proxy",
                lines.line_of(None),
                cfg.kind,
                first.kind
            )));
        }
    }
    if let Some((u, why)) = proxy::unsupported(cfg.kind, cfg).into_iter().next() {
        return Err(RunError::Invalid(format!(
            "{file}:{}: {where_} {}: {} cannot express {}: {why}",
            lines.line_of(Some(&u.item)),
            u.item,
            cfg.kind,
            u.feature
        )));
    }
    Ok(())
}

/// Checks, before anything starts, that each case's sockets fit under the open-files limit
/// (raising the soft limit toward the hard one if needed). The loads and the backends live in
/// this process, so every connection counts twice: the load's end and, through the proxy or
/// directly, a backend's end.
fn fd_budget(scn: &Scenario) -> Result<(), RunError> {
    use load::fds;
    for case in &scn.cases {
        let conns: u64 = case.loads.iter().map(|l| u64::from(l.connections)).sum();
        let threads: u64 = case
            .loads
            .iter()
            .map(|l| u64::from(l.threads.min(l.connections)))
            .sum();
        let listeners: u64 = case.backends.iter().map(|g| u64::from(g.count)).sum();
        let open = fds::open_now();
        let need = fds::needed(2 * conns + listeners, threads, open);
        let soft = fds::raise_for(need).map_err(|e| RunError::Failed(e.to_string()))?;
        if need > soft {
            let biggest = case.loads.iter().max_by_key(|l| l.connections);
            let line = biggest
                .and_then(|l| case.load_lines.get(&l.name))
                .copied()
                .unwrap_or(1);
            return Err(RunError::Invalid(format!(
                "{}:{line}: case '{}': its loads' {conns} connections need {need} open files \
                 (2 x {conns} sockets: the loads' and the backends' ends, {listeners} backend \
                 listeners, {} for {threads} load threads, {open} already open, {} spare), but \
                 the open-files limit (ulimit -n) is {soft}",
                scn.file,
                case.name,
                threads * fds::PER_THREAD,
                fds::SLACK
            )));
        }
    }
    Ok(())
}

struct CaseCtx<'a> {
    index: usize,
    total: usize,
    dir: &'a Path,
    work: PathBuf,
    tls: Option<TlsFiles>,
    opts: &'a RunOptions,
    start_s: f64,
    /// Where the case's backends and proxy run.
    platform: &'a dyn Platform,
    /// The proxy kind the command line chose (`--proxy`), for the live metrics' `proxy` label.
    proxy: Option<&'static str>,
}

/// What one case left: its measurements (none when it could not start), every request of its
/// loads, and why it stopped early, if it did.
struct CaseOutcome {
    result: Option<CaseResult>,
    records: Records,
    /// Every connection's life of the long-lived loads, by load name.
    lives: Lives,
    /// The distributed loads' per-agent results, by load name.
    agent_parts: AgentParts,
    abort: Option<String>,
}

/// Each distributed load's per-agent results (the files `proxybench merge` reads), by name.
type AgentParts = BTreeMap<String, Vec<model::LoadResult>>;

impl CaseOutcome {
    fn failed(e: String) -> CaseOutcome {
        CaseOutcome {
            result: None,
            records: Records::new(),
            lives: Lives::new(),
            agent_parts: AgentParts::new(),
            abort: Some(e),
        }
    }
}

/// What one load's thread hands back: the engine's outcome (for a distributed load, the merge
/// of its agents' results, without per-request records) and, for a distributed load, where its
/// agents ran, their parts and what was left behind.
struct LoadOut {
    outcome: load::Outcome,
    distributed: Option<Distributed>,
}

/// A distributed load's record: where and how its agents ran, their results, and what their
/// platform could not clean up.
struct Distributed {
    record: model::DistributedLoad,
    parts: Vec<model::LoadResult>,
    left: Vec<String>,
}

/// How long a load's agents may take to be ready (processes, or pods that may pull images).
const AGENTS_READY: Duration = Duration::from_secs(60);

/// Plays one case: start its stack and loads, fire its steps, collect what the loads and the
/// collectors saw, and record it. Nothing is analysed here.
fn run_case(case: &Case, ctx: &CaseCtx<'_>) -> CaseOutcome {
    let mut running = match start(case, ctx) {
        Ok(r) => r,
        Err(e) => return CaseOutcome::failed(e),
    };
    let mut fired = fire_steps(case, ctx, &mut running);
    let collected = collect(case, ctx, running);
    // Old generations still exiting when their reload served were timed meanwhile.
    proxy::driver::settle_reloads(&mut fired.reloads);
    record(case, ctx, fired, collected)
}

/// A case whose stack is up and whose loads and collector are running.
struct Running {
    origin: Instant,
    /// The origin on CLOCK_MONOTONIC, ns (the backends' clock for their connections' times).
    monotonic_origin_ns: u64,
    /// Seconds the stage took, from its start to `origin` (when the stack served).
    stage_s: f64,
    /// How the runner ran the case where the record has no field for it (a load sent from an
    /// agent because its target did not answer here), one sentence each.
    notes: Vec<String>,
    stack: Box<dyn Stage>,
    logs_dir: PathBuf,
    progress: Arc<Progress>,
    /// Loads that have ended.
    finished: Arc<AtomicUsize>,
    loads: Vec<thread::JoinHandle<Result<LoadRun, String>>>,
    collecting: Arc<AtomicBool>,
    collector: thread::JoinHandle<Samples>,
    /// The case's live metrics, when served.
    metrics: Option<openmetrics::CaseFeed>,
}

/// Stands the case's stack up and starts its loads (each waits for its start time) and the
/// once-a-second collector.
fn start(case: &Case, ctx: &CaseCtx<'_>) -> Result<Running, String> {
    let stage_origin = Instant::now();
    let spec = StackSpec {
        backends: &case.backends,
        backend_threads: case.backend_threads,
        proxy: case.proxy.as_ref(),
        configs: &case.configs,
        tls: ctx.tls.clone(),
        work: ctx.work.clone(),
        configs_out: paths::join_plain(&ctx.dir.join("configs"), "case name", &case.name)
            .map_err(|e| e.to_string())?,
        exec_out: paths::join_plain(&ctx.dir.join("exec"), "case name", &case.name)
            .map_err(|e| e.to_string())?,
        origin: stage_origin,
        seed: 1 + ctx.index as u64,
    };
    let mut stack = ctx.platform.stage(case, spec).map_err(|e| e.to_string())?;
    let logs_dir = paths::join_plain(&ctx.dir.join("logs"), "case name", &case.name)
        .map_err(|e| e.to_string())?;
    let configs = case
        .loads
        .iter()
        .map(|l| match l.stream_protocol() {
            Some(p) => stream_config(l, p, stack.as_ref(), ctx.tls.as_ref(), case.proxy.as_ref())
                .map(LoadPlan::Stream),
            None => load_config(l, stack.as_ref(), ctx.tls.as_ref()).map(LoadPlan::Http),
        })
        .collect::<Result<Vec<_>, String>>()?;

    // The agents of the loads that run on agents, ready before any load starts. A load whose
    // target does not answer from this machine (a remote cluster's Service) runs from one
    // agent in the cluster, and the case's findings say so. A long-lived load runs here.
    let mut agents = Vec::new();
    let mut notes = Vec::new();
    for (spec, plan) in case.loads.iter().zip(&configs) {
        let LoadPlan::Http(cfg) = plan else {
            agents.push(None);
            continue;
        };
        let unreached = crate::reach::connect_addr(cfg)
            .ok()
            .flatten()
            .filter(|to| spec.agent_count().is_none() && !stack.reaches_from_here(*to));
        if let Some(to) = unreached {
            notes.push(format!(
                "Load '{}' ran from 1 agent in the cluster: its target {to} did not answer \
                 from this machine.",
                spec.name
            ));
        }
        let count = spec.agent_count().or(unreached.map(|_| 1));
        agents.push(match count {
            None => None,
            Some(count) => Some(
                ctx.platform
                    .agents(&platform::AgentsSpec {
                        count,
                        cfg,
                        ready_timeout: AGENTS_READY,
                        work: &ctx.work,
                        stop: &ctx.opts.stop,
                    })
                    .map_err(|e| format!("load '{}': {e}", spec.name))?,
            ),
        });
    }
    // The stack serves: the case's clock starts now, on every platform, so that an action at
    // "1s" comes a second after the loads could start, however long the stage took (pods and
    // a Service on Kubernetes take seconds, processes here milliseconds).
    let origin = Instant::now();
    let monotonic_origin_ns = monotonic_ns(origin);
    let stage_s = origin.duration_since(stage_origin).as_secs_f64();
    stack.serving(origin);
    // The case's origin on the wall clock: a distributed load's agents count their seconds
    // from it, as a local load does.
    let origin_unix_ns = agent::proto::now_ns() - origin.elapsed().as_nanos() as u64;

    let progress = Arc::new(Progress::new(
        format!("case {}/{} {}", ctx.index + 1, ctx.total, case.name),
        case.planned_length(),
        origin,
        ctx.opts.progress,
    ));
    let scope = openmetrics::Scope {
        proxy: ctx.proxy.map(str::to_string),
        case: Some(case.name.clone()),
    };
    let case_feed = ctx
        .opts
        .metrics
        .as_ref()
        .map(|m| m.case(&scope, case.steps.len(), origin_unix_ns as f64 / 1e9));
    let finished = Arc::new(AtomicUsize::new(0));
    let mut loads = Vec::new();
    for ((spec, plan), agents) in case.loads.iter().zip(configs).zip(agents) {
        let mut cfg = match plan {
            LoadPlan::Http(cfg) => cfg,
            LoadPlan::Stream(cfg) => {
                loads.push(spawn_stream(spec, cfg, origin, ctx, &finished)?);
                continue;
            }
        };
        let feed = ctx
            .opts
            .metrics
            .as_ref()
            .map(|m| m.load(&scope, &spec.name, cfg.rate));
        if let (Some(f), None) = (feed.clone(), &agents) {
            cfg.on_second_hdr = Some(load::SecondHdrSink(Arc::new(move |row, hdr| {
                f.second(row, hdr)
            })));
        }
        let stop = ctx.opts.stop.clone();
        let finished = finished.clone();
        let progress = progress.clone();
        let start = spec.start.0;
        let name = spec.name.clone();
        let h = thread::Builder::new()
            .name(format!("pb-run-{}", spec.name))
            .spawn(move || {
                let out = match agents {
                    None => {
                        let begin = origin + start;
                        while Instant::now() < begin && !stop.load(Ordering::SeqCst) {
                            thread::sleep((begin - Instant::now()).min(Duration::from_millis(50)));
                        }
                        let p2 = progress.clone();
                        let n2 = name.clone();
                        let control = load::Control {
                            stop,
                            origin,
                            on_second: Some(Box::new(move |s: &model::Second| p2.second(&n2, s))),
                        };
                        load::run(&cfg, &control)
                            .map(|outcome| LoadOut {
                                outcome,
                                distributed: None,
                            })
                            .map(LoadRun::Http)
                            .map_err(|e| format!("load '{name}': {e}"))
                    }
                    Some(a) => on_agents(
                        &name,
                        a,
                        &cfg,
                        (origin_unix_ns, start),
                        stop,
                        (&progress, feed.as_ref()),
                    )
                    .map(LoadRun::Http),
                };
                if let Some(f) = &feed {
                    f.end();
                }
                finished.fetch_add(1, Ordering::SeqCst);
                out
            })
            .map_err(|e| format!("cannot start a load thread: {e}"))?;
        loads.push(h);
    }

    let collecting = Arc::new(AtomicBool::new(true));
    let collector = spawn_collector(stack.handles(), origin, collecting.clone());
    Ok(Running {
        origin,
        monotonic_origin_ns,
        stage_s,
        notes,
        stack,
        logs_dir,
        progress,
        finished,
        loads,
        collecting,
        collector,
        metrics: case_feed,
    })
}

/// One load of a case, configured: short HTTP requests, or long-lived connections.
enum LoadPlan {
    Http(load::Config),
    Stream(load::StreamConfig),
}

/// What one load's thread hands back.
enum LoadRun {
    Http(LoadOut),
    /// A long-lived load's summary, with every connection's life.
    Stream(model::stream::StreamSummary),
}

/// Starts a long-lived load's thread: it waits for the load's start, runs it on the case's
/// clock until its duration or a stop (Ctrl-C closes every connection and keeps what was
/// recorded), and counts itself finished.
fn spawn_stream(
    spec: &LoadSpec,
    cfg: load::StreamConfig,
    origin: Instant,
    ctx: &CaseCtx<'_>,
    finished: &Arc<AtomicUsize>,
) -> Result<thread::JoinHandle<Result<LoadRun, String>>, String> {
    let stop = ctx.opts.stop.clone();
    let finished = finished.clone();
    let begin = origin + spec.start.0;
    let name = spec.name.clone();
    thread::Builder::new()
        .name(format!("pb-run-{}", spec.name))
        .spawn(move || {
            while Instant::now() < begin && !stop.load(Ordering::SeqCst) {
                thread::sleep((begin - Instant::now()).min(Duration::from_millis(50)));
            }
            let control = load::Control {
                stop,
                origin,
                on_second: None,
            };
            let out = load::run_streams(&cfg, &control)
                .map(LoadRun::Stream)
                .map_err(|e| format!("load '{name}': {e}"));
            finished.fetch_add(1, Ordering::SeqCst);
            out
        })
        .map_err(|e| format!("cannot start a load thread: {e}"))
}

/// `origin` on CLOCK_MONOTONIC, ns: the clock `Instant` reads on Linux, and the one the
/// backends stamp their connections with.
fn monotonic_ns(origin: Instant) -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let now = t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64;
    now.saturating_sub(origin.elapsed().as_nanos() as u64)
}

/// Runs one load on its agents through the coordinator (the start at `origin` + the load's
/// start, or as soon as the agents have their jobs), then stops the agents. The outcome is the
/// merge, as a local load's; the agents' parts and rows go to the record.
fn on_agents(
    name: &str,
    mut agents: Box<dyn platform::Agents>,
    cfg: &load::Config,
    (origin_unix_ns, start): (u64, Duration),
    stop: Arc<AtomicBool>,
    (progress, feed): (&Progress, Option<&openmetrics::LoadFeed>),
) -> Result<LoadOut, String> {
    let show = |row: &model::Second, hdr: &model::SecondHdr, _: &[Option<u64>]| {
        if let Some(f) = feed {
            f.second(row, hdr);
        }
        progress.second(name, row)
    };
    let run = platform::agents::run_load(
        agents.as_ref(),
        cfg,
        Some((origin_unix_ns, start)),
        Some(stop),
        Some(&show),
    );
    let place = agents.place().to_string();
    let left = agents.close();
    let d = run.map_err(|e| {
        let mut m = format!("load '{name}': {e}");
        for l in &left {
            m.push_str(&format!("; {l}"));
        }
        m
    })?;
    let record = model::DistributedLoad {
        load: name.to_string(),
        place,
        files: String::new(),
        agents: d.merged.ext.agents.clone(),
        clock_uncertainty_us: d
            .parts
            .iter()
            .map(|p| p.ext.agent.as_ref().map_or(0, |a| a.clock_uncertainty_us))
            .collect(),
        lost: d.lost,
    };
    let mut summary = d.merged.summary;
    summary.name = name.to_string();
    Ok(LoadOut {
        outcome: load::Outcome {
            summary,
            records: None,
            seconds_hdr: d.merged.ext.seconds_hdr,
            origin_unix_ns: d.merged.ext.origin_unix_ns,
        },
        distributed: Some(Distributed {
            record,
            parts: d.parts,
            left,
        }),
    })
}

/// What the case's steps did.
#[derive(Default)]
struct Fired {
    events: Vec<model::Event>,
    reloads: Vec<model::ReloadRecord>,
    ready: Vec<model::ReadyRecord>,
    probes: Vec<model::ProbeRecord>,
}

/// Fires each step at its time while the loads run. Steps left when every load has ended are
/// recorded as not run, never dropped.
fn fire_steps(case: &Case, ctx: &CaseCtx<'_>, run: &mut Running) -> Fired {
    let mut fired = Fired::default();
    let n_loads = case.loads.len();
    let stop = &ctx.opts.stop;
    let finished = &run.finished;
    for (i, step) in case.steps.iter().enumerate() {
        let at = run.origin + step.at;
        while Instant::now() < at
            && finished.load(Ordering::SeqCst) < n_loads
            && !stop.load(Ordering::SeqCst)
        {
            thread::sleep((at - Instant::now()).min(Duration::from_millis(20)));
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if finished.load(Ordering::SeqCst) >= n_loads {
            // Every load ended early (a `requests` load, or a failure).
            let t_s = run.origin.elapsed().as_secs_f64();
            fired
                .events
                .extend(case.steps[i..].iter().map(|s| model::Event {
                    t_s,
                    action: s.action.kind().to_string(),
                    detail: format!("planned at {:.2}s", s.at.as_secs_f64()),
                    duration_ms: 0.0,
                    error: Some("not run: every load had ended".into()),
                    limit: false,
                }));
            break;
        }
        let keep_going =
            || finished.load(Ordering::SeqCst) < n_loads && !stop.load(Ordering::SeqCst);
        if let Some(m) = &run.metrics {
            m.action_started(i + 1, step.action.kind());
        }
        let applied = run.stack.apply(&step.action, &keep_going);
        if let Some(m) = &run.metrics {
            m.action_done(&applied.events, &applied.reloads);
        }
        for ev in &applied.events {
            run.progress.action(ev);
        }
        fired.events.extend(applied.events);
        fired.reloads.extend(applied.reloads);
        fired.ready.extend(applied.ready);
        fired.probes.extend(applied.probes);
    }
    fired
}

/// Everything the case measured once its loads ended and its stack came down.
struct Collected {
    summaries: Vec<model::LoadSummary>,
    records: Records,
    /// The long-lived loads' summaries (without their lives).
    streams: Vec<model::stream::StreamSummary>,
    /// Their connection lives, by load name.
    lives: Lives,
    /// The case's origin on CLOCK_MONOTONIC, ns.
    monotonic_origin_ns: u64,
    /// The distributed loads: where and how their agents ran.
    distributed: Vec<model::DistributedLoad>,
    agent_parts: AgentParts,
    /// What the agents' platform could not clean up.
    left_behind: Vec<String>,
    /// What the stage said of how the case ran (the path its loads took).
    notes: Vec<String>,
    /// The first load failure.
    abort: Option<String>,
    samples: Samples,
    logs: model::LogSummary,
    backends: Vec<model::BackendCounters>,
    time_wait: Option<model::TimeWait>,
    elapsed_s: f64,
    /// Seconds the stage took before the case's clock started.
    stage_s: f64,
    down_err: Option<crate::error::StackError>,
    /// What the cluster showed (Kubernetes only).
    cluster: Option<model::ClusterRecord>,
    /// Items the stage's collectors covered in part (a pod's log read in part).
    missed: Vec<platform::Missed>,
}

/// Joins the loads, lets the case settle, stops the collector, takes the stack down, moves the
/// proxy's logs into the results and reads them, and counts TIME_WAIT at the backends' ports.
fn collect(case: &Case, ctx: &CaseCtx<'_>, mut run: Running) -> Collected {
    let mut summaries = Vec::new();
    let mut records = Records::new();
    let mut distributed = Vec::new();
    let mut agent_parts = AgentParts::new();
    let mut left_behind = Vec::new();
    let mut abort = None;
    let mut streams = Vec::new();
    let mut lives = Lives::new();
    for (li, h) in run.loads.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(LoadRun::Stream(mut st))) => {
                lives.insert(st.name.clone(), std::mem::take(&mut st.lives));
                streams.push(st);
            }
            Ok(Ok(LoadRun::Http(LoadOut {
                outcome: out,
                distributed: d,
            }))) => {
                if let Some(r) = out.records {
                    records.insert(out.summary.name.clone(), r);
                }
                if let Some(Distributed {
                    record: rec,
                    parts,
                    left,
                }) = d
                {
                    // A lost agent fails the run, as it fails `load`: its partial counts are
                    // kept, never dropped.
                    if let Some(first) = rec.lost.first() {
                        abort.get_or_insert(format!("load '{}': {first}", rec.load));
                    }
                    left_behind.extend(left);
                    let mut rec = rec;
                    rec.files = record::agents_dir(Path::new(""), &case.name, li, &rec.load)
                        .display()
                        .to_string();
                    agent_parts.insert(rec.load.clone(), parts);
                    distributed.push(rec);
                }
                summaries.push(out.summary);
            }
            Ok(Err(e)) => {
                abort.get_or_insert(e);
            }
            Err(p) => {
                abort.get_or_insert(format!("a load panicked: {}", panic_text(&p)));
            }
        }
    }
    run.progress.finish();
    if let Some(m) = &run.metrics {
        m.end();
    }
    if !ctx.opts.stop.load(Ordering::SeqCst) {
        thread::sleep(case.settle);
    }
    run.collecting.store(false, Ordering::SeqCst);
    let samples = run.collector.join().unwrap_or_default();
    let platform::Down {
        logs,
        backends,
        cluster,
        err: down_err,
        mut notes,
        missed,
    } = run.stack.down();
    notes.extend(run.notes);
    drop(run.stack);
    let elapsed_s = run.origin.elapsed().as_secs_f64();

    let mut access = Vec::new();
    let mut errors = Vec::new();
    let mut format = None;
    let mut borrowed_without_access = false;
    // A user's access log that was not there when the case began and never appeared.
    let mut never_appeared = None;
    for (replica, files) in &logs {
        let to = run.logs_dir.join(replica);
        let _ = fs::create_dir_all(&to);
        // The user's own files stay where they are: the run's part is copied.
        let take = |from: &Path, offset: u64, to: &Path| {
            if files.borrowed {
                copy_from(from, offset, to);
            } else {
                move_file(from, to);
            }
        };
        if let Some(a) = &files.access {
            if files.borrowed && !a.exists() {
                never_appeared.get_or_insert_with(|| a.clone());
            }
            let a2 = to.join("access.log");
            take(a, files.access_offset, &a2);
            access.push(a2);
        }
        if let Some(e) = &files.error {
            let e2 = to.join("error.log");
            take(e, files.error_offset, &e2);
            // A user's error log still not there: nothing was logged to it.
            if files.borrowed && !e.exists() {
                let _ = fs::File::create(&e2);
            }
            errors.push(e2);
        }
        borrowed_without_access |= files.borrowed && files.access.is_none();
        format = Some(files.format);
    }
    let mut logs = read_logs(format, logs.len(), &access, &errors);
    if borrowed_without_access {
        logs.missing =
            Some("the external target gives no access log (proxy.external.access_log)".to_string());
    }
    if let Some(p) = never_appeared {
        logs.missing = Some(format!(
            "proxy.external.access_log {} did not appear during the case: the proxy logged no \
             request there (is it the file the proxy writes?)",
            p.display()
        ));
    }
    let ports: Vec<u16> = backends
        .iter()
        .filter_map(|b| b.addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok()))
        .collect();
    Collected {
        summaries,
        records,
        streams,
        lives,
        monotonic_origin_ns: run.monotonic_origin_ns,
        distributed,
        agent_parts,
        left_behind,
        notes,
        abort,
        samples,
        logs,
        backends,
        time_wait: crate::procfs::time_wait(&ports),
        elapsed_s,
        stage_s: run.stage_s,
        down_err,
        cluster,
        missed,
    }
}

/// How long the stage took, as the case's finding: its clock (actions' `at`, loads' `start`,
/// every time in the record) starts when the stack serves, not when the stage began.
fn stage_note(stage_s: f64) -> String {
    format!(
        "The stage took {stage_s:.2} s (backends and proxy up, the loads' targets answering); \
         the case's times count from when it served."
    )
}

/// The case's measurements as the record holds them: the analysed fields (disruptions,
/// tables, series, checks) stay empty; a teardown failure is a finding of the run itself.
fn record(case: &Case, ctx: &CaseCtx<'_>, fired: Fired, c: Collected) -> CaseOutcome {
    let (proc_samples, stub_samples, readiness, pages, generations) = c.samples;
    let on_cluster = c.cluster.is_some();
    let mut partial = BTreeMap::new();
    if let Some(s) = page_shortfall(&pages) {
        partial.insert(model::Collector::StatusPages, s);
    }
    let mut result = CaseResult {
        name: case.name.clone(),
        description: case.description.clone(),
        start_s: ctx.start_s + c.stage_s,
        elapsed_s: c.elapsed_s,
        loads: c.summaries,
        disruptions: Vec::new(),
        events: fired.events,
        reloads: fired.reloads,
        logs: c.logs,
        proc_samples,
        stub_samples,
        readiness,
        ready: fired.ready,
        probes: fired.probes,
        backends: c.backends,
        time_wait: c.time_wait,
        tables: Vec::new(),
        series: Vec::new(),
        findings: Vec::new(),
        absent: absent(case, on_cluster),
        partial,
        cluster: c.cluster,
        distributed: c.distributed,
        streams: c.streams,
        generations,
        // The backends run in this process only off a cluster: their clock is this one.
        monotonic_origin_ns: (!on_cluster).then_some(c.monotonic_origin_ns),
        stream_ledger: None,
    };
    for m in &c.missed {
        result.add_missing(m.collector, &m.unit, m.of, &m.item, &m.why);
    }
    if c.abort.is_none() {
        if let Some(e) = c.down_err {
            result.findings.push(format!("teardown: {e}"));
        }
    }
    if let Some(ext) = case.proxy.as_ref().and_then(|p| p.external.as_ref()) {
        result.findings.extend(external_gaps(ext));
    }
    result.findings.push(stage_note(c.stage_s));
    result.findings.extend(c.notes);
    result.findings.extend(c.left_behind);
    CaseOutcome {
        result: Some(result),
        records: c.records,
        lives: c.lives,
        agent_parts: c.agent_parts,
        abort: c.abort,
    }
}

/// The collectors this machine cannot run for the case's proxy, each with why: a proxy in pods
/// (its probes are the kubelet's, its status pages are not reached from here) or an external
/// target (no admin listener, no status page). Collectors left out here are absent only when
/// they gathered nothing ([`CaseResult::gap`]).
fn absent(case: &Case, on_cluster: bool) -> BTreeMap<model::Collector, String> {
    use model::Collector;
    let mut out = BTreeMap::new();
    let external = case.proxy.as_ref().and_then(|p| p.external.as_ref());
    if case.proxy.is_none() {
        out.insert(
            Collector::Generations,
            "no proxy ran in this case".to_string(),
        );
    }
    if let Some(ext) = external {
        let why = "an external target has no admin listener and no status page";
        out.insert(Collector::Readiness, why.to_string());
        out.insert(Collector::StatusPages, why.to_string());
        if ext.processes.is_none() {
            out.insert(
                Collector::Generations,
                "an external target without `processes` names no process to sample".to_string(),
            );
        }
    } else if on_cluster {
        out.insert(
            Collector::Generations,
            "the proxy runs in pods, whose processes are not sampled from this machine".to_string(),
        );
        out.insert(
            Collector::Readiness,
            "the proxy runs in pods, whose readiness probes the kubelet runs (the Cluster \
             section has every pod's Ready changes)"
                .to_string(),
        );
        out.insert(
            Collector::StatusPages,
            "the proxy runs in pods, whose status pages are not sampled from this machine"
                .to_string(),
        );
    }
    out
}

/// What an external target cannot give, said once per case so that no absent measurement reads
/// as a zero.
fn external_gaps(ext: &proxy::config::External) -> Vec<String> {
    let mut out = vec![
        "external target: no status page and no admin listener, so no connection/request \
         samples and no readiness probes"
            .to_string(),
    ];
    if ext.reload.is_empty() {
        out.push("external target: no reload command (proxy.external.reload)".into());
    } else {
        out.push(
            "external target: a reload is timed from its command's start to the command's exit, \
             not to the new generation serving (no admin listener shows it), and old workers' \
             exit is not timed"
                .into(),
        );
    }
    if ext.access_log.is_none() {
        out.push(
            "external target: no access log (proxy.external.access_log), so no proxy-side \
             request counts, statuses or upstream spread"
                .into(),
        );
    }
    if ext.error_log.is_none() {
        out.push("external target: no error log (proxy.external.error_log)".into());
    }
    if ext.processes.is_none() {
        out.push(
            "external target: no `processes`, so the proxy's CPU and memory are not sampled".into(),
        );
    }
    out
}

/// The proxy's logs summarised, or an empty summary that says why there is none, so that checks
/// on the logs fail instead of reading zeros.
fn read_logs(
    format: Option<proxy::logs::LogFormat>,
    replicas: usize,
    access: &[PathBuf],
    errors: &[PathBuf],
) -> model::LogSummary {
    let missing = |why: String| model::LogSummary {
        missing: Some(why),
        ..Default::default()
    };
    let Some(format) = format.filter(|_| replicas > 0) else {
        return missing("no proxy replica ran in this case".into());
    };
    if access.is_empty() {
        return missing("the proxy wrote no access log in this case".into());
    }
    if let Some(p) = access.iter().chain(errors).find(|p| !p.is_file()) {
        return missing(format!("{} is missing", p.display()));
    }
    proxy::logs::summarize(format, access, errors)
        .unwrap_or_else(|e| missing(format!("cannot read the logs: {e}")))
}

/// Copies `from` beyond byte `offset` (the run's part of a log that is not proxybench's) to
/// `to`; a file that shrank meanwhile (rotated) is copied whole.
fn copy_from(from: &Path, offset: u64, to: &Path) {
    use std::io::{Seek, SeekFrom};
    let Ok(mut f) = fs::File::open(from) else {
        return;
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let at = if len < offset { 0 } else { offset };
    if f.seek(SeekFrom::Start(at)).is_err() {
        return;
    }
    if let Ok(mut out) = fs::File::create(to) {
        let _ = std::io::copy(&mut f, &mut out);
    }
}

fn move_file(from: &Path, to: &Path) {
    if fs::rename(from, to).is_err() {
        let _ = fs::copy(from, to);
    }
}

/// Adds what one case showed of the platform's paths to env.json's platform record: how the
/// proxy pods were reached (the first case that found it) and where each load aimed and ran
/// from (the cluster's record has the Service; a distributed load's record its agents' place).
fn platform_paths(p: &mut model::PlatformInfo, case: &Case, r: &CaseResult) {
    let Some(cluster) = &r.cluster else {
        return;
    };
    if p.pod_path.is_empty() {
        if let Some(path) = &cluster.pod_path {
            p.pod_path.clone_from(path);
        }
    }
    for l in &r.loads {
        let spec = case.loads.iter().find(|s| s.name == l.name);
        let target = match spec.map(|s| &s.via) {
            Some(Some(Via::Backend(g))) => format!("backend group `{g}` (its first pod)"),
            Some(Some(Via::Url)) => {
                spec.map_or_else(String::new, |s| format!("the url's own host ({})", s.url))
            }
            Some(Some(v)) if v.is_cluster_address() => cluster
                .load_targets
                .get(&v.to_string())
                .cloned()
                .unwrap_or_else(|| format!("via `{v}`")),
            _ => cluster
                .load_targets
                .get("")
                .cloned()
                .unwrap_or_else(|| "the proxy pods".to_string()),
        };
        let from = r
            .distributed
            .iter()
            .find(|d| d.load == l.name)
            .map_or_else(|| "this machine".to_string(), |d| d.place.clone());
        p.load_paths.push(model::LoadPath {
            case: r.name.clone(),
            load: l.name.clone(),
            target,
            from,
        });
    }
}

/// Where one scenario load connects: its listener (for a long-lived load, the first one of its
/// url's scheme that speaks its protocol), a backend, an address the platform gives, or the
/// url's own host. `target` is the load's url with an http(s) scheme.
fn aim_at(
    l: &LoadSpec,
    target: &str,
    stack: &dyn Stage,
    proxy: Option<&ProxyConfig>,
) -> Result<(u16, std::net::IpAddr), String> {
    let u = load::target::Url::parse(target).map_err(|e| format!("load '{}': {e}", l.name))?;
    let scheme = if u.tls { "https" } else { "http" };
    Ok(match &l.via {
        // An external target: the url as written, port included; its host resolved (to
        // `resolve`, or by the system) and held to 127.0.0.0/8.
        None if stack.external().is_some() => {
            let resolve = stack.external().and_then(|e| e.resolve);
            crate::reach::external_target(target, resolve)
                .map_err(|e| format!("load '{}': {e}", l.name))?
        }
        Some(Via::Backend(g)) => {
            let a = stack.first_backend(g).ok_or_else(|| {
                format!(
                    "load '{}': backend group backend:{g} has no instance",
                    l.name
                )
            })?;
            (a.port(), a.ip())
        }
        // The url's own host (held to loopback and the scenario's reach list at parse).
        Some(Via::Url) => crate::reach::url_target(target, l.resolve)
            .map_err(|e| format!("load '{}': {e}", l.name))?,
        Some(
            v @ (Via::Service(..) | Via::NodePort(_) | Via::LoadBalancer(_) | Via::Gateway { .. }),
        ) => {
            let a = stack
                .aim(v, scheme == "https")
                .map_err(|e| format!("load '{}': {e}", l.name))?;
            (a.port(), a.ip())
        }
        Some(Via::Listener(v)) => (
            *stack
                .ports()
                .get(v)
                .ok_or_else(|| format!("load '{}': no listener '{v}'", l.name))?,
            stack.listener_ip(),
        ),
        None => {
            // The first listener of the URL's scheme (validated at parse time); a long-lived
            // load's, the first that speaks its protocol.
            let want_tls = scheme == "https";
            let fitting = l.stream_protocol().and_then(|p| {
                proxy?
                    .listeners
                    .iter()
                    .find(|x| {
                        x.tls == want_tls
                            && (if p.is_grpc() {
                                x.http2
                            } else {
                                x.tls || !x.http2
                            })
                    })
                    .and_then(|x| stack.ports().get(&x.name).copied())
            });
            let p = fitting
                .or_else(|| stack.listener_port(want_tls))
                .ok_or_else(|| format!("load '{}': no {scheme} listener", l.name))?;
            (p, stack.listener_ip())
        }
    })
}

/// The url as the engine is given it: the scheme (`scheme`), the url's host (an IPv6 address
/// in brackets), `port` and its path; with a `--resolve` entry to `ip` when the host is a name.
fn aimed_url(
    l: &LoadSpec,
    scheme: &str,
    u: &load::target::Url,
    (port, ip): (u16, std::net::IpAddr),
) -> Result<(String, Option<load::Resolve>), String> {
    let host = if u.host.contains(':') {
        format!("[{}]", u.host)
    } else {
        u.host.clone()
    };
    let url = format!("{scheme}://{host}:{port}{}", u.path);
    let resolve = if u.host.parse::<std::net::IpAddr>().is_err() {
        Some(
            load::Resolve::parse(&format!("{host}:{port}:{ip}"))
                .map_err(|e| format!("load '{}': {e}", l.name))?,
        )
    } else {
        None
    };
    Ok((url, resolve))
}

/// Builds the engine's config for one long-lived scenario load (WebSocket, gRPC, SSE), aimed
/// as any load, with every connection's life kept.
fn stream_config(
    l: &LoadSpec,
    p: model::stream::StreamProtocol,
    stack: &dyn Stage,
    tls: Option<&TlsFiles>,
    proxy: Option<&ProxyConfig>,
) -> Result<load::StreamConfig, String> {
    let bad = |e: &dyn std::fmt::Display| format!("load '{}': {e}", l.name);
    let target = l.target_url();
    let u = load::target::Url::parse(&target).map_err(|e| bad(&e))?;
    let aim = aim_at(l, &target, stack, proxy)?;
    let scheme = match (p, u.tls) {
        (model::stream::StreamProtocol::WebSocket, false) => "ws",
        (model::stream::StreamProtocol::WebSocket, true) => "wss",
        (_, false) => "http",
        (_, true) => "https",
    };
    let (url, resolve) = aimed_url(l, scheme, &u, aim)?;
    let mut cfg = load::StreamConfig::new(&url, p).map_err(|e| bad(&e))?;
    cfg.resolve.extend(resolve);
    stream_settings(&mut cfg, l, u.tls, tls)?;
    cfg.validate().map_err(|e| bad(&e))?;
    // Where it connects is this run's own target, as for any load.
    let http = format!(
        "{}://{}",
        if u.tls { "https" } else { "http" },
        url.split_once("://").map_or("", |(_, r)| r)
    );
    let mut check = load::Config::new(&http).map_err(|e| bad(&e))?;
    check.resolve.clone_from(&cfg.resolve);
    crate::reach::own_target(&check, SocketAddr::new(aim.1, aim.0)).map_err(|e| bad(&e))?;
    Ok(cfg)
}

/// A long-lived scenario load's settings onto the engine's config (everything but where it
/// aims).
fn stream_settings(
    cfg: &mut load::StreamConfig,
    l: &LoadSpec,
    url_tls: bool,
    tls: Option<&TlsFiles>,
) -> Result<(), String> {
    let bad = |e: &dyn std::fmt::Display| format!("load '{}': {e}", l.name);
    cfg.name = l.name.clone();
    cfg.connections = l.connections;
    cfg.threads = l.threads.min(l.connections);
    cfg.duration = l.duration.map(|d| d.0);
    if let Some(r) = l.ramp {
        cfg.ramp = r.0;
    }
    if let Some(r) = l.message_rate {
        cfg.rate = r.0;
    }
    if let Some(sz) = l.message_size {
        cfg.size = u32::try_from(sz.0).map_err(|_| bad(&"message_size is too large"))?;
    }
    cfg.timeout = l.timeout.0;
    cfg.idle_timeout = l.idle_timeout.map(|d| d.0);
    cfg.ping = l.ping.map(|d| d.0);
    cfg.deadline = l.grpc_deadline.map(|d| d.0);
    cfg.grpc_path.clone_from(&l.grpc_path);
    if let Some(r) = l.reconnect {
        cfg.reconnect = r;
    }
    if let Some(b) = l.backoff {
        cfg.backoff = b.0;
    }
    if let Some(b) = l.backoff_max {
        cfg.backoff_max = b.0;
    }
    cfg.headers = l
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    cfg.lives = true;
    if url_tls {
        cfg.cacert = l.cacert.clone().or_else(|| tls.map(|t| t.ca.clone()));
        cfg.insecure = l.insecure;
        cfg.sni.clone_from(&l.sni);
    }
    Ok(())
}

/// Checks each long-lived load's settings as the engine reads them, before anything starts
/// (the parser checked what it can; this is the engine's own word), naming the scenario line.
fn stream_preflight(scn: &Scenario) -> Result<(), RunError> {
    for case in &scn.cases {
        for l in &case.loads {
            let Some(p) = l.stream_protocol() else {
                continue;
            };
            let line = case.load_lines.get(&l.name).copied().unwrap_or(1);
            let refuse = |m: String| {
                RunError::Invalid(format!("{}:{line}: case '{}': {m}", scn.file, case.name))
            };
            let target = l.target_url();
            let u = load::target::Url::parse(&target)
                .map_err(|e| refuse(format!("load '{}': {e}", l.name)))?;
            let scheme = match (p, u.tls) {
                (model::stream::StreamProtocol::WebSocket, false) => "ws",
                (model::stream::StreamProtocol::WebSocket, true) => "wss",
                (_, false) => "http",
                (_, true) => "https",
            };
            let url = format!("{scheme}://127.0.0.1:9{}", u.path);
            let mut cfg = load::StreamConfig::new(&url, p)
                .map_err(|e| refuse(format!("load '{}': {e}", l.name)))?;
            stream_settings(&mut cfg, l, false, None).map_err(refuse)?;
            cfg.validate()
                .map_err(|e| refuse(format!("load '{}': {e}", l.name)))?;
        }
    }
    Ok(())
}

/// Builds the engine's config for one scenario load, aimed at its listener or backend.
fn load_config(
    l: &LoadSpec,
    stack: &dyn Stage,
    tls: Option<&TlsFiles>,
) -> Result<load::Config, String> {
    let u = load::target::Url::parse(&l.url).map_err(|e| format!("load '{}': {e}", l.name))?;
    let scheme = if u.tls { "https" } else { "http" };
    let (port, ip) = aim_at(l, &l.url, stack, None)?;
    let (url, resolve) = aimed_url(l, scheme, &u, (port, ip))?;
    let mut cfg = load::Config::new(&url).map_err(|e| format!("load '{}': {e}", l.name))?;
    cfg.resolve.extend(resolve);
    cfg.name = l.name.clone();
    cfg.connections = l.connections;
    cfg.threads = l.threads.min(l.connections);
    cfg.duration = l.duration.map(|d| d.0);
    cfg.requests = l.requests;
    cfg.rate = l.rate.map(|r| r.0);
    cfg.arrivals = match l.arrivals {
        ArrivalsSpec::Even => model::Arrivals::Even,
        ArrivalsSpec::Poisson => model::Arrivals::Poisson,
    };
    cfg.seed = l.seed;
    cfg.timeout = l.timeout.0;
    cfg.method = l.method.clone();
    cfg.headers = l
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    cfg.body = l.body.as_ref().map(|b| b.clone().into_bytes());
    cfg.record_requests = true;
    cfg.http2 = l.http2();
    cfg.streams = l.streams.unwrap_or(1);
    cfg.retry_idle_closed = l.retry_idle_closed;
    if u.tls {
        // The run's CA signs its own listeners; a target the run did not make brings its own.
        cfg.cacert = l.cacert.clone().or_else(|| tls.map(|t| t.ca.clone()));
        cfg.insecure = l.insecure;
        cfg.sni.clone_from(&l.sni);
    }
    crate::reach::own_target(&cfg, SocketAddr::new(ip, port))
        .map_err(|e| format!("load '{}': {e}", l.name))?;
    Ok(cfg)
}

/// What the collector thread gathered: CPU and memory, status pages, readiness probes, and each
/// replica's status-page reads that failed.
type Samples = (
    Vec<ProcSample>,
    Vec<StubSample>,
    Vec<ReadinessSample>,
    BTreeMap<String, PageMisses>,
    Vec<model::generation::GenerationSample>,
);

/// One replica's status-page reads: how many were tried, how many failed, and the last error.
#[derive(Debug, Default)]
struct PageMisses {
    tried: u64,
    failed: u64,
    last: String,
}

/// The replicas whose status pages failed a read while they served, as the case's shortfall of
/// status pages: a replica that never answered has no count, one that missed some reads has a
/// count short of its last ones. A read that failed because its replica was being stopped is
/// not a miss (it is no longer in the stage's list when checked again).
fn page_shortfall(pages: &BTreeMap<String, PageMisses>) -> Option<model::Shortfall> {
    let missing: Vec<model::MissingItem> = pages
        .iter()
        .filter(|(_, m)| m.failed > 0)
        .map(|(name, m)| model::MissingItem {
            item: name.clone(),
            why: if m.failed == m.tried {
                format!(
                    "its status page never answered ({} reads; {})",
                    m.tried, m.last
                )
            } else {
                format!(
                    "{} of {} status-page reads failed ({})",
                    m.failed, m.tried, m.last
                )
            },
        })
        .collect();
    (!missing.is_empty()).then(|| model::Shortfall::new("replicas", pages.len(), missing))
}

/// A Kubernetes readiness probe's default timeout.
const READINESS_TIMEOUT: Duration = Duration::from_secs(1);

/// Samples CPU and memory of every group, and stub_status and readiness of every replica, once a
/// second.
fn spawn_collector(
    handles: Arc<Mutex<Vec<proxy::ReplicaHandle>>>,
    origin: Instant,
    running: Arc<AtomicBool>,
) -> thread::JoinHandle<Samples> {
    thread::Builder::new()
        .name("pb-collector".into())
        .spawn(move || {
            let mut sampler = Sampler::new();
            let mut procs = Vec::new();
            let mut stubs = Vec::new();
            let mut ready = Vec::new();
            let mut pages: BTreeMap<String, PageMisses> = BTreeMap::new();
            let mut generations = Vec::new();
            let clock = crate::procfs::StartClock::new(origin);
            let mut next = origin;
            while running.load(Ordering::SeqCst) {
                let hs = handles.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let t = origin.elapsed().as_secs_f64();
                let pids: Vec<(String, Vec<u32>)> =
                    hs.iter().map(|h| (h.name.clone(), h.pids())).collect();
                // Which generation each process of each replica is: its start time.
                for (name, p) in pids.iter().filter(|(_, p)| !p.is_empty()) {
                    generations.push(model::generation::GenerationSample {
                        t_s: t,
                        replica: name.clone(),
                        procs: crate::procfs::generation_procs(p, &clock),
                    });
                }
                let mut groups: Vec<Group> = pids
                    .into_iter()
                    .filter(|(_, p)| !p.is_empty())
                    .map(|(name, p)| Group::Master {
                        name,
                        master: p[0],
                        workers: p[1..].to_vec(),
                    })
                    .collect();
                groups.push(Group::Threads {
                    name: "load".into(),
                    prefix: "pb-load".into(),
                });
                groups.push(Group::Threads {
                    name: "backends".into(),
                    prefix: "pb-backend".into(),
                });
                groups.push(Group::SelfProcess {
                    name: "proxybench".into(),
                });
                procs.extend(sampler.sample(&groups, t));
                for h in &hs {
                    match h.status(origin) {
                        Some(Ok(s)) => {
                            pages.entry(h.name.clone()).or_default().tried += 1;
                            stubs.push(s);
                        }
                        Some(Err(e)) => {
                            // A replica stopped meanwhile is gone from the list: its failed
                            // read is its stop, not a gap in what it served.
                            let listed = handles
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .iter()
                                .any(|x| x.name == h.name && x.pid == h.pid);
                            if listed {
                                let m = pages.entry(h.name.clone()).or_default();
                                m.tried += 1;
                                m.failed += 1;
                                m.last = e.to_string();
                            }
                        }
                        None => {}
                    }
                    if !h.has_admin() {
                        // Nothing to probe (an external target): absent, not failed.
                        continue;
                    }
                    let t_s = origin.elapsed().as_secs_f64();
                    let probe = h.probe(READINESS_TIMEOUT);
                    ready.push(ReadinessSample {
                        t_s,
                        replica: h.name.clone(),
                        ok: probe.is_ok(),
                        ms: probe.ok().map(|d| d.as_secs_f64() * 1e3),
                    });
                }
                next += Duration::from_secs(1);
                while Instant::now() < next && running.load(Ordering::SeqCst) {
                    thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
                }
            }
            (procs, stubs, ready, pages, generations)
        })
        .expect("spawn the collector thread")
}

use analysis::analyse::panic_text;

#[cfg(test)]
mod tests {
    fn parse(text: &str) -> Result<scenario::Scenario, scenario::ScenarioError> {
        let src = scenario::layers::Source {
            file: "escape.toml".into(),
            text: text.into(),
        };
        scenario::Scenario::parse(&src, false)
    }

    /// The collector against real nginx replicas and one replica whose status page never
    /// answers (its admin port has no listener): the two that answered are sampled whole, the
    /// third is the shortfall with why, never a replica that served 0 requests.
    #[test]
    fn a_status_page_that_never_answers_is_a_shortfall_not_a_zero() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        use std::time::{Duration, Instant};
        let text = testkit::one_load_scenario("http://localhost/")
            .replace("[proxy]\n", "[proxy]\nreplicas = 2\n");
        let scn = parse(&text).unwrap();
        let case = &scn.cases[0];
        let tmp = tempfile::tempdir().unwrap();
        let spec = crate::platform::StackSpec {
            backends: &case.backends,
            backend_threads: 1,
            proxy: case.proxy.as_ref(),
            configs: &case.configs,
            tls: None,
            work: tmp.path().join("work"),
            configs_out: tmp.path().join("configs"),
            exec_out: tmp.path().join("exec"),
            origin: Instant::now(),
            seed: 1,
        };
        let mut stack = crate::platform::local::Stack::up(spec).unwrap();
        let handles = stack.handles();
        let dead = {
            let mut hs = handles.lock().unwrap();
            assert_eq!(hs.len(), 2, "{hs:?}");
            let mut h = hs[0].clone();
            h.name = "nginx-9".into();
            h.admin_port = testkit::free_port();
            hs.push(h.clone());
            h
        };
        let running = Arc::new(AtomicBool::new(true));
        let collector = super::spawn_collector(handles, Instant::now(), running.clone());
        std::thread::sleep(Duration::from_millis(2300));
        running.store(false, std::sync::atomic::Ordering::SeqCst);
        let (_, stubs, _, pages, _) = collector.join().unwrap();
        stack.down();
        assert!(stubs.iter().all(|s| s.replica != dead.name), "{stubs:?}");
        for r in ["nginx-0", "nginx-1"] {
            assert!(stubs.iter().any(|s| s.replica == r), "{r}: {stubs:?}");
        }
        let s = super::page_shortfall(&pages).expect("a shortfall");
        assert_eq!(s.coverage(), "2 of 3 replicas", "{s:?}");
        assert!(s.lacks("nginx-9") && !s.lacks("nginx-0") && !s.lacks("nginx-1"));
        assert!(
            s.detail()
                .starts_with("nginx-9: its status page never answered"),
            "{}",
            s.detail()
        );
    }

    /// Names the parser refuses (scenario::paths) are refused by the runner too, before it
    /// creates anything, for a scenario built or changed in code.
    #[test]
    fn the_runner_refuses_them_too_and_creates_nothing() {
        let mut scn = parse(&testkit::two_cases_scenario("escape", "ok")).unwrap();
        let root = std::env::temp_dir().join(format!("pb-paths-{}", std::process::id()));
        let opts = crate::runner::RunOptions {
            results_root: root.join("results"),
            stop: Default::default(),
            progress: false,
            metrics: None,
        };
        scn.cases[1].name = "../../../outside".into();
        let e = crate::runner::run(&scn, &opts).unwrap_err();
        assert_eq!(
            e,
            crate::runner::RunError::Invalid(
                "case name '../../../outside' must not contain '/' (it becomes a directory name under the results)".into()
            )
        );
        scn.cases[1].name = "ok".into();
        scn.name = "..".into();
        let e = crate::runner::run(&scn, &opts).unwrap_err();
        assert_eq!(
            e.to_string(),
            "scenario name '..' is not a name (it means this or the parent directory)"
        );
        assert!(!root.exists(), "the runner created {}", root.display());
    }
}
