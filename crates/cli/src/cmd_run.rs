//! `proxybench run`, `scenarios`, `report`, `analyse` and `compare`: flags and dispatch.

mod compare;

use crate::outcome::{exit_code, write_junit};
use crate::CliError;
use bench::runner::RunOptions;
pub use compare::{compare, CompareArgs};
use model::results_dir::{COMPARISON_HTML, DATA_JSON, REPORT_HTML, REPORT_MD};
use scenario::layers::Source;
use scenario::{ParseOptions, PlatformKind, PlatformOverride, Scenario};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Flags of `proxybench run`.
#[derive(clap::Args)]
#[command(after_help = crate::outcome::EXIT_CODES)]
pub struct RunArgs {
    /// A built-in scenario name (see `proxybench scenarios`) or a scenario file.
    #[arg(default_value = "default")]
    scenario: String,
    /// Run the scaled-down form (short durations), as the test suite does.
    #[arg(long)]
    quick: bool,
    /// Where results go: DIR/<scenario>/<UTC timestamp>/.
    #[arg(long, default_value = "results")]
    results: PathBuf,
    /// Never print the live progress line.
    #[arg(long)]
    no_progress: bool,
    /// Run only this case of the scenario (repeatable; cases keep the scenario's order).
    #[arg(long = "case", value_name = "NAME")]
    cases: Vec<String>,
    /// Run the scenario's proxy configs as this kind instead of their own; several kinds
    /// (`nginx,haproxy`), or `all`, run the scenario once per kind and write comparison.md over
    /// them (see `proxybench capabilities` for what each kind expresses).
    #[arg(long, value_name = "KIND[,KIND...]")]
    proxy: Option<String>,
    #[command(flatten)]
    platform: PlatformFlags,
    /// Kubernetes: the image the proxy pods run.
    #[arg(long = "proxy-image", alias = "nginx-image", value_name = "IMAGE")]
    proxy_image: Option<String>,
    #[command(flatten)]
    metrics: crate::metrics::MetricsFlags,
    #[command(flatten)]
    linger: crate::metrics::LingerFlag,
    /// Also write the checks as JUnit XML to FILE (one testcase per check and one for the run's
    /// outcome: a failed check is a failure, a check the run could not measure an error, and so
    /// is a run cut short; the file counts a failure or an error whenever the exit code is not 0).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Run the scenario N times, one after the other, into sibling directories of one set
    /// (`<results>/<scenario>/<stamp>/a-1`, `a-2`... with runs.json), which `compare` takes as
    /// it is: `compare --calibrate SET`, `compare SET1 -- SET2`.
    #[arg(long, value_name = "N")]
    repeat: Option<u32>,
    /// Alternate each run with a run of OTHER (A B A B ...), so that the machine's drift falls
    /// evenly on both sides: a scenario (a built-in name or a file; for gates, a variant of the
    /// same scenario) or a proxy kind to run this scenario as. B's runs are `b-1`, `b-2`... of
    /// the same set, and `compare SET` compares them with A's. Without --repeat, one of each.
    #[arg(long, value_name = "OTHER")]
    interleave: Option<String>,
}

impl RunArgs {
    /// The platform flags, each value checked: one line naming the flag when one is wrong.
    fn platform_flags(&self) -> Result<PlatformOverride, CliError> {
        self.platform.to_override(self.proxy_image.clone())
    }
}

/// Where a command runs and how it reaches the cluster: the flags `run` and `load --agents`
/// share, parsed and checked here for both.
#[derive(clap::Args)]
pub(crate) struct PlatformFlags {
    /// Where it runs: `local` (processes on this machine) or `kubernetes` (a cluster: `run`'s
    /// Deployments, overriding the scenario's `[platform]`; `load --agents`' pods).
    #[arg(long, value_name = "local|kubernetes")]
    platform: Option<String>,
    /// Kubernetes: the kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Kubernetes: the kubeconfig context (default: its current context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// Kubernetes: run in this existing namespace (default: a new proxybench-<time> namespace,
    /// deleted at the end).
    #[arg(long, value_name = "NAME")]
    namespace: Option<String>,
    /// Kubernetes: keep the run's namespace after the run (`run` keeps its objects too).
    #[arg(long)]
    keep: bool,
    /// Kubernetes: the proxybench image (`run`'s backend pods, `load --agents`' agent pods).
    #[arg(long, value_name = "IMAGE")]
    image: Option<String>,
    /// Kubernetes: every container's imagePullPolicy (Always, IfNotPresent, Never; default:
    /// Never for localhost/ images, IfNotPresent for the rest).
    #[arg(long = "image-pull-policy", value_name = "POLICY")]
    image_pull_policy: Option<String>,
}

impl PlatformFlags {
    /// The flags as overrides of a `[platform]` (with `run`'s `--proxy-image`), each value
    /// checked: one line naming the flag when one is wrong.
    pub(crate) fn to_override(
        &self,
        proxy_image: Option<String>,
    ) -> Result<PlatformOverride, CliError> {
        let kind = match &self.platform {
            None => None,
            Some(p) => Some(PlatformKind::parse(p).ok_or_else(|| {
                CliError::usage(format!("--platform {p}: not one of local, kubernetes"))
            })?),
        };
        let o = PlatformOverride {
            kind,
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            namespace: self.namespace.clone(),
            keep: self.keep,
            image: self.image.clone(),
            proxy_image,
            image_pull_policy: self.image_pull_policy.clone(),
        };
        o.validate().map_err(|e| CliError::Usage(e.to_string()))?;
        Ok(o)
    }
}

/// Flags of `proxybench check`.
#[derive(clap::Args)]
#[command(after_help = CHECK_EXIT_CODES)]
pub struct CheckArgs {
    /// A built-in scenario name (see `proxybench scenarios`) or a scenario file.
    scenario: String,
    /// Check it for this platform instead of its `[platform]`'s: `local` or `kubernetes` (the
    /// cluster is not contacted).
    #[arg(long, value_name = "local|kubernetes")]
    platform: Option<String>,
    /// Check it with these proxy kinds instead of its own, as `run --proxy` would run it: a
    /// kind, several (`nginx,haproxy`) or `all`.
    #[arg(long, value_name = "KIND[,KIND...]|all")]
    proxy: Option<String>,
}

/// Flags of `proxybench scenarios`.
#[derive(clap::Args)]
pub struct ScenariosArgs {}

/// Flags of `proxybench report`.
#[derive(clap::Args)]
pub struct ReportArgs {
    /// A results directory (holding data.json), or a comparison directory of `run --proxy a,b`
    /// (holding comparison.json).
    dir: PathBuf,
}

/// Flags of `proxybench analyse`.
#[derive(clap::Args)]
#[command(after_help = ANALYSE_EXIT_CODES)]
pub struct AnalyseArgs {
    /// A results directory (holding record.json, scenario.toml and requests/).
    dir: PathBuf,
}

pub(crate) fn load_scenario(
    arg: &str,
    quick: bool,
    opts: &ParseOptions,
) -> Result<Scenario, CliError> {
    let src = match scenario::catalogue::builtin(arg) {
        Some(s) => s,
        None => {
            let path = PathBuf::from(arg);
            if !path.exists() {
                let names: Vec<String> = scenario::catalogue::list(&analysis::parse_options())
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect();
                return Err(CliError::usage(format!(
                    "'{arg}' is neither a built-in scenario ({}) nor a file",
                    names.join(", ")
                )));
            }
            let text = std::fs::read_to_string(&path)
                .map_err(|e| CliError::usage(format!("{arg}: {e}")))?;
            Source {
                file: arg.to_string(),
                text,
            }
        }
    };
    Ok(Scenario::parse_with(&src, quick, opts)?)
}

/// Runs `proxybench run`; the exit code says how it went ([`crate::outcome::EXIT_CODES`]). With
/// `--junit`, a run that stops before it has results (bad input, a run that cannot begin) still
/// writes the file, as one error.
pub fn run(a: RunArgs) -> Result<ExitCode, CliError> {
    let junit = a.junit.clone();
    crate::outcome::junit_on_stop("run", junit.as_deref(), run_checked(a))
}

fn run_checked(a: RunArgs) -> Result<ExitCode, CliError> {
    let choice = match &a.proxy {
        Some(arg) => Some(crate::cmd_proxies::parse_kinds(arg)?),
        None => None,
    };
    let repeat = match (a.repeat, &a.interleave) {
        (Some(0), _) => return Err(CliError::usage("--repeat 0: at least 1 run")),
        (Some(n), _) if n > MAX_REPEAT => {
            return Err(CliError::usage(format!(
                "--repeat {n}: at most {MAX_REPEAT} runs"
            )))
        }
        (Some(n), _) => Some(n),
        (None, Some(_)) => Some(1),
        (None, None) => None,
    };
    if repeat.is_some() && choice.as_ref().is_some_and(|c| c.compare) {
        return Err(CliError::usage(
            "--repeat with several proxy kinds: repeat one kind, or interleave two with \
             --proxy A --interleave B",
        ));
    }
    let flags = a.platform_flags()?;
    let parse_opts = ParseOptions {
        platform: flags.clone(),
        skip_file_checks: false,
        templates: Some(&manifests::CHECK),
        ..analysis::parse_options()
    };
    let mut scn = load_scenario(&a.scenario, a.quick, &parse_opts)?;
    if scn.platform.kind == PlatformKind::Local {
        if let Some(flag) = flags.cluster_flag() {
            return Err(CliError::usage(format!(
                "{flag} needs --platform kubernetes (scenario '{}' runs on local)",
                scn.name
            )));
        }
    }
    // The flags are applied to the scenario's [platform] already; the runner is told so the
    // record says the platform came from the command line.
    let platform = (!flags.is_empty()).then(|| scn.platform.clone());
    select_cases(&mut scn, &a.cases)?;
    if let Some(arg) = &a.proxy {
        crate::cmd_proxies::has_proxy(&scn, arg)?;
    }
    let other = match &a.interleave {
        None => None,
        Some(o) => Some(other_side(o, &a, &parse_opts, &scn)?),
    };
    // Bound before anything starts: a taken port is bad input, not a failed run.
    let live = a.metrics.start(
        openmetrics::Info {
            command: "run".to_string(),
            scenario: Some(scn.name.clone()),
            agent: None,
        },
        Some(&a.linger),
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal exits at once; the first asks the run to wind down and write results.
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .and_then(|_| signal_hook::flag::register(sig, stop.clone()))
            .map_err(|e| CliError::runtime(format!("cannot install signal handlers: {e}")))?;
    }
    let linger_stop = match &live {
        Some(_) => Some(crate::metrics::linger_flag()?),
        None => None,
    };
    let opts = RunOptions {
        results_root: a.results.clone(),
        stop,
        progress: !a.no_progress && std::io::stderr().is_terminal(),
        metrics: live.as_ref().map(|l| l.registry.clone()),
    };
    let code = match repeat {
        Some(n) => {
            let side_a = Side {
                label: match choice.as_ref().and_then(|c| c.kinds.first()) {
                    Some(k) => format!("{} ({k})", a.scenario),
                    None => a.scenario.clone(),
                },
                scenario: scn.clone(),
                proxy: choice.as_ref().and_then(|c| c.kinds.first().copied()),
            };
            play_set(
                &side_a,
                other.as_ref(),
                n,
                &opts,
                platform,
                a.junit.as_deref(),
            )
        }
        None => play(&scn, &opts, choice, platform, a.junit.as_deref()),
    };
    if let (Some(l), Some(stop), Ok(_)) = (&live, &linger_stop, &code) {
        l.finish(stop);
    }
    code
}

/// The most runs `--repeat` makes (a typo guard: 1000 runs of the default scenario take over 4 hours).
const MAX_REPEAT: u32 = 1000;

/// One side of a set of runs: what runs, as what proxy kind, and how runs.json names it.
struct Side {
    label: String,
    scenario: Scenario,
    proxy: Option<proxy::ProxyKind>,
}

/// What `--interleave OTHER` names: a proxy kind to run this scenario as, or a scenario (a
/// built-in name or a file), parsed as `run` parses its own (same form, platform and cases).
fn other_side(
    other: &str,
    a: &RunArgs,
    parse_opts: &ParseOptions,
    scn: &Scenario,
) -> Result<Side, CliError> {
    if let Some(kind) = proxy::ProxyKind::parse(other) {
        crate::cmd_proxies::has_proxy(scn, other)?;
        return Ok(Side {
            label: format!("{} ({kind})", a.scenario),
            scenario: scn.clone(),
            proxy: Some(kind),
        });
    }
    let mut b = load_scenario(other, a.quick, parse_opts)
        .map_err(|e| CliError::usage(format!("--interleave {other}: {}", one_line(&e))))?;
    select_cases(&mut b, &a.cases)
        .map_err(|e| CliError::usage(format!("--interleave {other}: {}", one_line(&e))))?;
    if b.name != scn.name {
        eprintln!(
            "proxybench: note: --interleave {other} is scenario '{}', not '{}': compare sets \
             the sides side by side but gates only runs of one scenario",
            b.name, scn.name
        );
    }
    Ok(Side {
        label: other.to_string(),
        scenario: b,
        proxy: None,
    })
}

/// A CLI error's message.
fn one_line(e: &CliError) -> String {
    match e {
        CliError::Usage(m) | CliError::Runtime(m) => m.clone(),
    }
}

/// Plays `a` `n` times (alternating with `b` when given: a-1, b-1, a-2, b-2...) into one set
/// directory, writes runs.json, and writes the runs' checks to `junit` when asked. Every run's
/// scenario is checked before the first starts. A stop request ends the current run (its
/// partial results are kept) and starts no other. The exit code is the worst of the runs'.
fn play_set(
    a: &Side,
    b: Option<&Side>,
    n: u32,
    opts: &RunOptions,
    platform: Option<scenario::PlatformSpec>,
    junit: Option<&std::path::Path>,
) -> Result<ExitCode, CliError> {
    let sides: Vec<(&str, &Side)> = std::iter::once(("a", a))
        .chain(b.map(|b| ("b", b)))
        .collect();
    for (_, s) in &sides {
        let scn = match s.proxy {
            Some(k) => s.scenario.with_proxy_kind(k),
            None => s.scenario.clone(),
        };
        bench::runner::check(&scn)?;
    }
    let root = bench::runner::results_dir(&a.scenario, opts)?;
    let total = n as usize * sides.len();
    let mut done: Vec<(String, Result<model::RunResults, String>, u8)> = Vec::new();
    let mut not_run: Vec<String> = Vec::new();
    let mut made: Vec<Vec<String>> = vec![Vec::new(); sides.len()];
    let mut order = Vec::new();
    for i in 1..=n {
        for (si, (tag, side)) in sides.iter().enumerate() {
            let name = format!("{tag}-{i}");
            if opts.stop.load(std::sync::atomic::Ordering::SeqCst) {
                not_run.push(name);
                continue;
            }
            if opts.progress {
                eprintln!(
                    "proxybench: run {}/{total}: {name} ({})",
                    done.len() + 1,
                    side.label
                );
            }
            println!("== {name} ({}) ==", side.label);
            let target = bench::runner::Target {
                dir: Some(root.join(&name)),
                proxy: side.proxy,
                platform: platform.clone(),
            };
            match bench::runner::run_as(&side.scenario, opts, &target) {
                Ok(out) => {
                    print!("{}", report::summary_text(&out.results));
                    println!("results: {}", out.dir.display());
                    let code = exit_code(&out.results);
                    if code != 0 {
                        eprintln!("proxybench: {name}: its run's exit code is {code}");
                    }
                    made[si].push(name.clone());
                    order.push(name.clone());
                    done.push((name, Ok(out.results), code));
                }
                Err(e) => {
                    let code = if e.is_refusal() { 2 } else { 1 };
                    eprintln!("proxybench: {name}: {e}");
                    done.push((name, Err(e.to_string()), code));
                }
            }
        }
    }
    let side = |i: usize| report::gate::set::SetSide {
        label: sides[i].1.label.clone(),
        runs: made[i].clone(),
    };
    let set = report::gate::set::RunSet {
        schema: report::gate::set::SET_SCHEMA,
        scenario: a.scenario.name.clone(),
        a: side(0),
        b: (sides.len() > 1).then(|| side(1)),
        order,
    };
    report::gate::set::write(&root, &set).map_err(|e| CliError::runtime(e.to_string()))?;
    println!("runs: {}", root.display());
    if b.is_some() {
        println!("compare: proxybench compare {} --gate ...", root.display());
    } else {
        println!(
            "calibrate: proxybench compare --calibrate {}",
            root.display()
        );
    }
    if let Some(path) = junit {
        let stopped = "interrupted before it started";
        let mut runs: Vec<(&str, report::junit::Labelled<'_>)> = done
            .iter()
            .map(|(name, r, _)| {
                let l = match r {
                    Ok(r) => report::junit::Labelled::Ran(r),
                    Err(m) => report::junit::Labelled::Failed(m),
                };
                (name.as_str(), l)
            })
            .collect();
        runs.extend(
            not_run
                .iter()
                .map(|n| (n.as_str(), report::junit::Labelled::NotRun(stopped))),
        );
        write_junit(
            path,
            &report::junit::checks_by_label(&a.scenario.name, &runs),
        )?;
    }
    let mut worst = done.iter().map(|d| d.2).max().unwrap_or(0);
    if !not_run.is_empty() {
        worst = worst.max(130);
    }
    Ok(ExitCode::from(worst))
}

/// Plays the scenario (once, or once per proxy kind of a comparison), prints the outcome and
/// writes the checks to `junit` when asked.
fn play(
    scn: &Scenario,
    opts: &RunOptions,
    choice: Option<crate::cmd_proxies::ProxyChoice>,
    platform: Option<scenario::PlatformSpec>,
    junit: Option<&std::path::Path>,
) -> Result<ExitCode, CliError> {
    if opts.progress {
        eprintln!(
            "proxybench: running {}{} ({} case{})",
            scn.name,
            if scn.quick { " --quick" } else { "" },
            scn.cases.len(),
            if scn.cases.len() == 1 { "" } else { "s" }
        );
    }
    if let Some(c) = choice.as_ref().filter(|c| c.compare) {
        return crate::cmd_proxies::run_each(scn, &c.kinds, opts, platform.as_ref(), junit);
    }
    let target = bench::runner::Target {
        dir: None,
        proxy: choice.and_then(|c| c.kinds.first().copied()),
        platform,
    };
    let out = bench::runner::run_as(scn, opts, &target)?;
    print!("{}", report::summary_text(&out.results));
    println!("results: {}", out.dir.display());
    if let Some(path) = junit {
        write_junit(path, &report::junit::checks(&out.results))?;
    }
    Ok(ExitCode::from(exit_code(&out.results)))
}

/// Keeps only the cases named by `--case` (all of them when none is named).
fn select_cases(scn: &mut Scenario, names: &[String]) -> Result<(), CliError> {
    if names.is_empty() {
        return Ok(());
    }
    if let Some(bad) = names
        .iter()
        .find(|n| !scn.cases.iter().any(|c| &c.name == *n))
    {
        let known: Vec<&str> = scn.cases.iter().map(|c| c.name.as_str()).collect();
        return Err(CliError::usage(format!(
            "--case {bad}: scenario '{}' has no such case ({})",
            scn.name,
            known.join(", ")
        )));
    }
    scn.cases.retain(|c| names.contains(&c.name));
    Ok(())
}

/// Runs `proxybench check`: everything `run` checks before it starts anything, for both forms
/// (full and `--quick`), every case and every config, and nothing else: no backend, proxy, load
/// or cluster call. One `ok` line when the scenario would start, else the first problem
/// (`file:line`, exit 2).
pub fn check(a: CheckArgs) -> Result<ExitCode, CliError> {
    let kind = match &a.platform {
        None => None,
        Some(p) => Some(PlatformKind::parse(p).ok_or_else(|| {
            CliError::usage(format!("--platform {p}: not one of local, kubernetes"))
        })?),
    };
    let opts = ParseOptions {
        platform: PlatformOverride {
            kind,
            ..PlatformOverride::default()
        },
        skip_file_checks: false,
        templates: Some(&manifests::CHECK),
        ..analysis::parse_options()
    };
    // Each form parses the other too; both are checked by their proxies, as `run` checks the
    // form it plays.
    let full = load_scenario(&a.scenario, false, &opts)?;
    let quick = load_scenario(&a.scenario, true, &opts)?;
    // With --proxy, each form once per kind named, as `run --proxy` runs it.
    let forms: Vec<scenario::Scenario> = match &a.proxy {
        None => vec![full.clone(), quick],
        Some(arg) => {
            let choice = crate::cmd_proxies::parse_kinds(arg)?;
            crate::cmd_proxies::has_proxy(&full, arg)?;
            choice
                .kinds
                .iter()
                .flat_map(|&k| [full.with_proxy_kind(k), quick.with_proxy_kind(k)])
                .collect()
        }
    };
    let mut configs = 0;
    let mut kinds: Vec<&str> = Vec::new();
    for scn in &forms {
        bench::runner::check(scn)?;
        for case in &scn.cases {
            for cfg in case.proxy.iter().chain(case.configs.values()) {
                configs += 1;
                let checker = proxy::driver(cfg.kind).checker();
                if !kinds.contains(&checker) {
                    kinds.push(checker);
                }
            }
        }
    }
    let n = full.cases.len();
    let checked = if configs == 0 {
        "no proxy config".to_string()
    } else {
        format!(
            "{configs} proxy config{} checked by {}",
            if configs == 1 { "" } else { "s" },
            kinds.join(", ")
        )
    };
    println!(
        "ok: {}: scenario '{}', {n} case{} (full and --quick forms), platform {}; {checked}",
        full.file,
        full.name,
        if n == 1 { "" } else { "s" },
        full.platform.kind.name(),
    );
    Ok(ExitCode::SUCCESS)
}

/// The exit codes of `proxybench check`, for `--help` and the docs.
pub const CHECK_EXIT_CODES: &str =
    "Checks what `proxybench run` checks before it starts anything: both forms (full and \
    --quick), every case, the [platform] and its layers, every action, check and config, each \
    config rendered and checked by its proxy (nginx -t, haproxy -c, caddy validate). Nothing is \
    started and no cluster is contacted.\n\n\
    Exit codes:\n  \
    0    valid: one line, `ok: FILE: ...`\n  \
    1    the check itself could not run (a proxy's checker could not be started)\n  \
    2    bad input: the first problem, one line, file:line for the scenario file";

/// Runs `proxybench scenarios`: one line per built-in scenario.
pub fn scenarios(_a: ScenariosArgs) -> Result<ExitCode, CliError> {
    let list = scenario::catalogue::list(&analysis::parse_options());
    let width = list.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    for (name, desc) in list {
        println!("{name:width$}  {desc}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `proxybench report DIR`.
pub fn report(a: ReportArgs) -> Result<ExitCode, CliError> {
    report::rebuild(&a.dir)?;
    if a.dir.join(DATA_JSON).is_file() {
        println!("{}", a.dir.join(REPORT_MD).display());
        println!("{}", a.dir.join(REPORT_HTML).display());
    } else {
        println!("{}", a.dir.join(COMPARISON_HTML).display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `proxybench analyse DIR`: the analysis of a recorded run, again, into the same files.
pub fn analyse(a: AnalyseArgs) -> Result<ExitCode, CliError> {
    let r = bench::analyse::analyse_dir(&a.dir).map_err(|e| {
        if e.is_bad_input() {
            CliError::usage(e.to_string())
        } else {
            CliError::runtime(e.to_string())
        }
    })?;
    print!("{}", report::summary_text(&r));
    println!("report: {}", a.dir.join(REPORT_MD).display());
    // An interrupted run's record is partial, which analysing it again does not change: 1.
    Ok(ExitCode::from(match exit_code(&r) {
        130 => 1,
        c => c,
    }))
}

/// The exit codes of `proxybench analyse`, for `--help` and the README.
pub const ANALYSE_EXIT_CODES: &str =
    "Reads DIR/record.json, DIR/scenario.toml and DIR/requests/ (what the run measured), \
    runs the scenario's analysis again and rewrites data.json, the CSVs, report.md and charts/. \
    Nothing is read from this machine, so the output is the run's own, byte for byte.\n\n\
    Exit codes:\n  \
    0    every check passed and every action succeeded\n  \
    1    a check failed, an action failed, the record is partial (the run stopped early), or \
    the outputs could not be written\n  \
    2    bad input: no such directory, no record.json (not a results directory, or one older \
    than this command: `proxybench report` rebuilds those), a record of another version, or a \
    damaged record\n  \
    3    the target was unusable: every request of some load failed";
