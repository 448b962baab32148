//! Plays a scenario: for each case, stand the stack up, start the loads, fire the actions on time,
//! sample the processes every second, tear everything down, and record what was measured
//! ([`analysis::record`]); then analyse the record ([`crate::analyse`]) into the results directory.
//! A stop request (Ctrl-C) or a failure ends the run early and still records what was measured.

use crate::platform::{self, Platform};
use crate::{analyse, env};
use analysis::analyse::panic_text;
use analysis::analysis::{Lives, Records};
use analysis::record;
use model::{results_dir, Env, MeasuredRun, RunRecord, RunResults};
use proxy::ProxyKind;
use scenario::paths;
use scenario::Scenario;
use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

mod agents;
mod case;
mod collect;
mod collectors;
mod loads;
mod preflight;

use case::{run_case, AgentParts, CaseCtx, CaseOutcome};
use collect::platform_paths;
use preflight::{certificate, fd_budget, stream_preflight};

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

/// Why a run could not be done: refused as written (bad input: [`RunError::is_refusal`]) or
/// failed before it could begin, each with what caused it.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The scenario cannot run as written (the proxy rejects a config, a feature it cannot
    /// express, too few open files...); nothing was started. The message names file:line.
    #[error("{0}")]
    Invalid(String),
    /// A scenario or case name that would become a directory is not a plain name.
    #[error(transparent)]
    Name(#[from] scenario::PathError),
    /// The platform could not be opened (a cluster that cannot be reached; a namespace given
    /// that does not exist is a refusal).
    #[error(transparent)]
    Platform(#[from] crate::error::PlatformError),
    /// A directory of the run could not be made.
    #[error("{}: {source}", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The record of the run could not be written.
    #[error("cannot record the run: {0}")]
    Record(#[source] record::RecordError),
    /// The TLS certificate of the run's https listeners could not be made.
    #[error("cannot make the TLS certificate: {0}")]
    Certificate(#[source] proxy::Error),
    /// The open-files limit could not be read or raised.
    #[error("{0}")]
    Fds(#[source] load::Error),
    /// The proxy's own config checker could not be run.
    #[error("{place}: cannot check the {kind} config: {source}")]
    Checker {
        /// The case and config (`case 'main', [proxy]`).
        place: String,
        /// The proxy kind.
        kind: ProxyKind,
        /// Why.
        #[source]
        source: proxy::Error,
    },
    /// The run was recorded, but analysing it failed.
    #[error("the run is recorded in {}, but its analysis failed: {source}", dir.display())]
    Analysis {
        /// The results directory, which holds the record.
        dir: PathBuf,
        /// Why.
        #[source]
        source: analyse::AnalyseDirError,
    },
}

impl RunError {
    /// True when the scenario was refused as written (bad input, exit 2), false when the run
    /// failed (exit 1).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            RunError::Invalid(_)
                | RunError::Name(_)
                | RunError::Platform(crate::error::PlatformError::NoNamespace(_))
        )
    }

    /// A directory that could not be made.
    fn dir(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
        move |source| RunError::Dir {
            path: path.to_path_buf(),
            source,
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
    let mut platform = platform::registry::open(platform_spec)?;
    let dir = match &target.dir {
        Some(d) => {
            fs::create_dir_all(d).map_err(RunError::dir(d))?;
            std::path::absolute(d).map_err(RunError::dir(d))?
        }
        None => results_dir(scn, opts)?,
    };
    record::write_scenario(&dir, scn).map_err(RunError::Record)?;
    let work = dir.join(results_dir::WORK_DIR);
    let tls = certificate(scn, &dir.join(results_dir::TLS_DIR))?;
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
            work: paths::join_plain(&work, "case name", &case.name)?,
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
            record::write_requests(&dir, &r, &outcome.records).map_err(RunError::Record)?;
            record::write_lives(&dir, &r, &outcome.lives).map_err(RunError::Record)?;
            record::write_agents(&dir, &r, &outcome.agent_parts).map_err(RunError::Record)?;
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
    record::write_record(&dir, &rec).map_err(RunError::Record)?;
    let results = analyse::analyse_dir(&dir).map_err(|source| RunError::Analysis {
        dir: dir.clone(),
        source,
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
    paths::join_plain(Path::new(""), "scenario name", &scn.name)?;
    for case in &scn.cases {
        paths::join_plain(Path::new(""), "case name", &case.name)?;
    }
    fd_budget(scn)?;
    stream_preflight(scn)?;
    let scratch = tempdir(&std::env::temp_dir(), "pb-check")?;
    let tls = certificate(scn, &scratch.0)?;
    if let Err(e) = preflight::preflight(scn, tls.as_ref(), &scratch.0) {
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
        run: MeasuredRun {
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
        },
    }
}

/// Makes `<results_root>/<scenario>/<UTC stamp>[-n]/`, absolute (a proxy may resolve relative
/// paths in its config against its own directory).
pub fn results_dir(scn: &Scenario, opts: &RunOptions) -> Result<PathBuf, RunError> {
    let stamp = env::now_dir_stamp();
    let root =
        std::path::absolute(&opts.results_root).map_err(RunError::dir(&opts.results_root))?;
    let scn_dir = paths::join_plain(&root, "scenario name", &scn.name)?;
    let mut dir = scn_dir.join(&stamp);
    let mut n = 1;
    while dir.exists() {
        n += 1;
        dir = scn_dir.join(format!("{stamp}-{n}"));
    }
    fs::create_dir_all(&dir).map_err(RunError::dir(&dir))?;
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
    fs::create_dir_all(&p).map_err(RunError::dir(&p))?;
    Ok(ScratchDir(p))
}

/// The proxy kind the scenario runs (its first case with a proxy), if any.
pub fn proxy_kind(scn: &Scenario) -> Option<ProxyKind> {
    scn.cases
        .iter()
        .find_map(|c| c.proxy.as_ref().map(|p| p.kind))
}

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
        let collector =
            super::collectors::spawn_collector(handles, Instant::now(), running.clone());
        std::thread::sleep(Duration::from_millis(2300));
        running.store(false, std::sync::atomic::Ordering::SeqCst);
        let (_, stubs, _, pages, _) = collector.join().unwrap();
        stack.down();
        assert!(stubs.iter().all(|s| s.replica != dead.name), "{stubs:?}");
        for r in ["nginx-0", "nginx-1"] {
            assert!(stubs.iter().any(|s| s.replica == r), "{r}: {stubs:?}");
        }
        let s = super::collectors::page_shortfall(&pages).expect("a shortfall");
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
        assert!(
            matches!(e, crate::runner::RunError::Name(_)),
            "a name, refused as bad input: {e:?}"
        );
        assert!(e.is_refusal());
        assert_eq!(
            e.to_string(),
            "case name '../../../outside' must not contain '/' (it becomes a directory name under the results)"
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
