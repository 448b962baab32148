//! One case from stand-up to record: its context, the stack and loads started, the actions
//! fired on time, and the outcome handed back to the run.

use super::agents::on_agents;
use super::collect::{self, collect};
use super::collectors::{spawn_collector, Samples};
use super::loads::{load_config, stream_config};
use super::RunOptions;
use crate::error::{CaseError, LoadError, LoadProblem};
use crate::platform::StackSpec;
use crate::platform::{self, Platform, Stage};
use crate::progress::Progress;
use analysis::analysis::{Lives, Records};
use model::{results_dir, CaseRecord};
use proxy::TlsFiles;
use scenario::paths;
use scenario::{Case, LoadSpec};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

pub(super) struct CaseCtx<'a> {
    pub(super) index: usize,
    pub(super) total: usize,
    pub(super) dir: &'a Path,
    pub(super) work: PathBuf,
    pub(super) tls: Option<TlsFiles>,
    pub(super) opts: &'a RunOptions,
    pub(super) start_s: f64,
    /// Where the case's backends and proxy run.
    pub(super) platform: &'a dyn Platform,
    /// The proxy kind the command line chose (`--proxy`), for the live metrics' `proxy` label.
    pub(super) proxy: Option<&'static str>,
}

/// What one case left: its measurements (none when it could not start), every request of its
/// loads, and why it stopped early, if it did.
pub(super) struct CaseOutcome {
    pub(super) result: Option<CaseRecord>,
    pub(super) records: Records,
    /// Every connection's life of the long-lived loads, by load name.
    pub(super) lives: Lives,
    /// The distributed loads' per-agent results, by load name.
    pub(super) agent_parts: AgentParts,
    pub(super) abort: Option<String>,
}

/// Each distributed load's per-agent results (the files `proxybench merge` reads), by name.
pub(super) type AgentParts = BTreeMap<String, Vec<model::LoadResult>>;

impl CaseOutcome {
    fn failed(e: CaseError) -> CaseOutcome {
        CaseOutcome {
            result: None,
            records: Records::new(),
            lives: Lives::new(),
            agent_parts: AgentParts::new(),
            abort: Some(e.to_string()),
        }
    }
}

/// What one load's thread hands back: the engine's outcome (for a distributed load, the merge
/// of its agents' results, without per-request records) and, for a distributed load, where its
/// agents ran, their parts and what was left behind.
pub(super) struct LoadOut {
    pub(super) outcome: load::Outcome,
    pub(super) distributed: Option<Distributed>,
}

/// A distributed load's record: where and how its agents ran, their results, and what their
/// platform could not clean up.
pub(super) struct Distributed {
    pub(super) record: model::DistributedLoad,
    pub(super) parts: Vec<model::LoadResult>,
    pub(super) left: Vec<String>,
}

/// How long a load's agents may take to be ready (processes, or pods that may pull images).
const AGENTS_READY: Duration = Duration::from_secs(60);

/// Plays one case: start its stack and loads, fire its steps, collect what the loads and the
/// collectors saw, and record it. Nothing is analysed here.
pub(super) fn run_case(case: &Case, ctx: &CaseCtx<'_>) -> CaseOutcome {
    let mut running = match start(case, ctx) {
        Ok(r) => r,
        Err(e) => return CaseOutcome::failed(e),
    };
    let mut fired = fire_steps(case, ctx, &mut running);
    let collected = collect(case, ctx, running);
    // Old generations still exiting when their reload served were timed meanwhile.
    proxy::driver::settle_reloads(&mut fired.reloads);
    collect::record(case, ctx, fired, collected)
}

/// A case whose stack is up and whose loads and collector are running.
pub(super) struct Running {
    pub(super) origin: Instant,
    /// The origin on CLOCK_MONOTONIC, ns (the backends' clock for their connections' times).
    pub(super) monotonic_origin_ns: u64,
    /// Seconds the stage took, from its start to `origin` (when the stack served).
    pub(super) stage_s: f64,
    /// How the runner ran the case where the record has no field for it (a load sent from an
    /// agent because its target did not answer here), one sentence each.
    pub(super) notes: Vec<String>,
    pub(super) stack: Box<dyn Stage>,
    pub(super) logs_dir: PathBuf,
    pub(super) progress: Arc<Progress>,
    /// Loads that have ended.
    pub(super) finished: Arc<AtomicUsize>,
    pub(super) loads: Vec<thread::JoinHandle<Result<LoadRun, LoadError>>>,
    pub(super) collecting: Arc<AtomicBool>,
    pub(super) collector: thread::JoinHandle<Samples>,
    /// The case's live metrics, when served.
    pub(super) metrics: Option<openmetrics::CaseFeed>,
}

/// Stands the case's stack up and starts its loads (each waits for its start time) and the
/// once-a-second collector.
pub(super) fn start(case: &Case, ctx: &CaseCtx<'_>) -> Result<Running, CaseError> {
    let stage_origin = Instant::now();
    let spec = StackSpec {
        backends: &case.backends,
        backend_threads: case.backend_threads,
        proxy: case.proxy.as_ref(),
        configs: &case.configs,
        tls: ctx.tls.clone(),
        work: ctx.work.clone(),
        configs_out: paths::join_plain(
            &ctx.dir.join(results_dir::CONFIGS_DIR),
            "case name",
            &case.name,
        )?,
        exec_out: paths::join_plain(
            &ctx.dir.join(results_dir::EXEC_DIR),
            "case name",
            &case.name,
        )?,
        origin: stage_origin,
        seed: 1 + ctx.index as u64,
    };
    let mut stack = ctx.platform.stage(case, spec)?;
    let logs_dir = paths::join_plain(
        &ctx.dir.join(results_dir::LOGS_DIR),
        "case name",
        &case.name,
    )?;
    let configs = case
        .loads
        .iter()
        .map(|l| match l.stream_protocol() {
            Some(p) => stream_config(l, p, stack.as_ref(), ctx.tls.as_ref(), case.proxy.as_ref())
                .map(LoadPlan::Stream),
            None => load_config(l, stack.as_ref(), ctx.tls.as_ref()).map(LoadPlan::Http),
        })
        .collect::<Result<Vec<_>, LoadError>>()?;

    let (agents, notes) = start_agents(case, ctx, stack.as_ref(), &configs)?;
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
        let cfg = match plan {
            LoadPlan::Http(cfg) => cfg,
            LoadPlan::Stream(cfg) => {
                loads.push(spawn_stream(spec, cfg, origin, ctx, &finished)?);
                continue;
            }
        };
        let clock = (origin, origin_unix_ns);
        let h = spawn_http(
            spec,
            cfg,
            agents,
            clock,
            ctx,
            (&scope, &progress, &finished),
        )?;
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
pub(super) enum LoadRun {
    Http(LoadOut),
    /// A long-lived load's summary, with every connection's life.
    Stream(model::stream::StreamSummary),
}

/// A load's agents, when it runs on agents.
type LoadAgents = Option<Box<dyn platform::Agents>>;

/// The agents of the loads that run on agents, ready before any load starts, one entry a load
/// (`None` for a load that runs here), and the case's notes about them. A load whose target does
/// not answer from this machine (a remote cluster's Service) runs from one agent in the cluster,
/// and the case's findings say so. A long-lived load runs here.
fn start_agents(
    case: &Case,
    ctx: &CaseCtx<'_>,
    stack: &dyn Stage,
    configs: &[LoadPlan],
) -> Result<(Vec<LoadAgents>, Vec<String>), CaseError> {
    let mut agents = Vec::new();
    let mut notes = Vec::new();
    for (spec, plan) in case.loads.iter().zip(configs) {
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
                    .map_err(|e| {
                        LoadError::new(
                            &spec.name,
                            LoadProblem::Agents {
                                source: e.into(),
                                left: Vec::new(),
                            },
                        )
                    })?,
            ),
        });
    }
    Ok((agents, notes))
}

/// Starts an HTTP load's thread: here, it waits for the load's start and runs it on the case's
/// clock (`origin`, and on the wall clock `origin_unix_ns`) with its seconds shown and fed to the
/// live metrics; on agents, it runs it through them. Either way it counts itself finished.
fn spawn_http(
    spec: &LoadSpec,
    mut cfg: load::Config,
    agents: LoadAgents,
    (origin, origin_unix_ns): (Instant, u64),
    ctx: &CaseCtx<'_>,
    (scope, progress, finished): (&openmetrics::Scope, &Arc<Progress>, &Arc<AtomicUsize>),
) -> Result<thread::JoinHandle<Result<LoadRun, LoadError>>, CaseError> {
    let feed = ctx
        .opts
        .metrics
        .as_ref()
        .map(|m| m.load(scope, &spec.name, cfg.rate));
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
    thread::Builder::new()
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
                        .map_err(|e| LoadError::new(&name, e))
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
        .map_err(CaseError::Thread)
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
) -> Result<thread::JoinHandle<Result<LoadRun, LoadError>>, CaseError> {
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
                .map_err(|e| LoadError::new(&name, e));
            finished.fetch_add(1, Ordering::SeqCst);
            out
        })
        .map_err(CaseError::Thread)
}

/// `origin` on CLOCK_MONOTONIC, ns: the clock `Instant` reads on Linux, and the one the
/// backends stamp their connections with.
fn monotonic_ns(origin: Instant) -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let now = t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64;
    now.saturating_sub(origin.elapsed().as_nanos() as u64)
}

/// What the case's steps did.
#[derive(Default)]
pub(super) struct Fired {
    pub(super) events: Vec<model::Event>,
    pub(super) reloads: Vec<model::ReloadRecord>,
    pub(super) ready: Vec<model::ReadyRecord>,
    pub(super) probes: Vec<model::ProbeRecord>,
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
