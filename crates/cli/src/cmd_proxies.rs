//! `proxybench run SCENARIO --proxy a,b,c`: the scenario once per proxy kind into
//! `<results>/<scenario>/<stamp>/<kind>/`, then comparison.md and comparison.json beside them; and
//! `proxybench capabilities`, the capability table of every kind.

use crate::CliError;
use bench::runner::{RunOptions, Target};
use proxy::{Feature, ProxyKind, Support};
use report::comparison::{self, FeatureRow, Outcome, ProxyInput, SupportCell};
use scenario::Scenario;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

/// What `--proxy` asks for: the kinds, and whether to compare them (several kinds, or `all`).
pub struct ProxyChoice {
    /// The kinds, in the order given.
    pub kinds: Vec<ProxyKind>,
    /// Run once per kind and write comparison.md (true for several kinds and for `all`).
    pub compare: bool,
}

/// Parses `--proxy a,b,c` (each a known kind, none twice, `external` only alone) or `--proxy
/// all` (every kind but `external`, compared even when there is only one).
pub fn parse_kinds(arg: &str) -> Result<ProxyChoice, CliError> {
    if arg.trim() == "all" {
        return Ok(ProxyChoice {
            kinds: ProxyKind::ALL
                .iter()
                .copied()
                .filter(|k| *k != ProxyKind::External)
                .collect(),
            compare: true,
        });
    }
    let mut kinds: Vec<ProxyKind> = Vec::new();
    for item in arg.split(',').map(str::trim) {
        let kind = ProxyKind::parse(item).ok_or_else(|| {
            let known: Vec<&str> = ProxyKind::ALL.iter().map(|k| k.name()).collect();
            CliError::usage(format!(
                "--proxy {arg}: unknown proxy kind '{item}' (known: {}, or all)",
                known.join(", ")
            ))
        })?;
        if kinds.contains(&kind) {
            return Err(CliError::usage(format!(
                "--proxy {arg}: {kind} is named twice"
            )));
        }
        kinds.push(kind);
    }
    if kinds.len() > 1 && kinds.contains(&ProxyKind::External) {
        return Err(CliError::usage(format!(
            "--proxy {arg}: external cannot be compared: it is a proxy you run yourself, not a \
             variant of the scenario"
        )));
    }
    Ok(ProxyChoice {
        compare: kinds.len() > 1,
        kinds,
    })
}

/// Refuses `--proxy` on a scenario none of whose cases runs a proxy: there is nothing to
/// override.
pub fn has_proxy(scn: &Scenario, arg: &str) -> Result<(), CliError> {
    if scn.cases.iter().any(|c| c.proxy.is_some()) {
        Ok(())
    } else {
        Err(CliError::usage(format!(
            "--proxy {arg}: scenario '{}' runs no proxy in the cases chosen",
            scn.name
        )))
    }
}

/// Runs `scn` once per kind, in order, and writes the comparison. Every kind's config is checked
/// before the first run starts. A stop request ends the current run (its partial results are
/// kept) and starts no other; the comparison is still written, marked partial. The exit code is
/// the worst of the runs'.
pub fn run_each(
    scn: &Scenario,
    kinds: &[ProxyKind],
    opts: &RunOptions,
    platform: Option<&scenario::PlatformSpec>,
    junit: Option<&std::path::Path>,
) -> Result<ExitCode, CliError> {
    for &k in kinds {
        bench::runner::check(&scn.with_proxy_kind(k))?;
    }
    let root = bench::runner::results_dir(scn, opts)?;
    let mut outcomes: Vec<(ProxyKind, Result<model::RunResults, String>, u8)> = Vec::new();
    let mut not_run: Vec<ProxyKind> = Vec::new();
    for (i, &kind) in kinds.iter().enumerate() {
        if opts.stop.load(Ordering::SeqCst) {
            not_run.extend(&kinds[i..]);
            break;
        }
        if opts.progress {
            eprintln!("proxybench: proxy {}/{}: {kind}", i + 1, kinds.len());
        }
        let target = Target {
            dir: Some(root.join(kind.name())),
            proxy: Some(kind),
            platform: platform.cloned(),
        };
        println!("== {kind} ==");
        match bench::runner::run_as(scn, opts, &target) {
            Ok(out) => {
                print!("{}", report::summary_text(&out.results));
                println!("results: {}", out.dir.display());
                let code = crate::outcome::exit_code(&out.results);
                if code != 0 {
                    eprintln!("proxybench: {kind}: its run's exit code is {code}");
                }
                outcomes.push((kind, Ok(out.results), code));
            }
            Err(e) => {
                let code = if e.is_refusal() { 2 } else { 1 };
                eprintln!("proxybench: {kind}: {e}");
                outcomes.push((kind, Err(e.to_string()), code));
            }
        }
    }
    let mut inputs: Vec<ProxyInput<'_>> = outcomes
        .iter()
        .map(|(k, r, code)| ProxyInput {
            kind: k.name().to_string(),
            dir: k.name().to_string(),
            outcome: match r {
                Ok(results) => Outcome::Ran {
                    results,
                    exit_code: *code,
                },
                Err(m) => Outcome::Failed(m.clone()),
            },
        })
        .collect();
    inputs.extend(not_run.iter().map(|k| ProxyInput {
        kind: k.name().to_string(),
        dir: k.name().to_string(),
        outcome: Outcome::NotRun("interrupted before it started".into()),
    }));
    let c = comparison::build(&scn.name, scn.quick, &inputs, feature_rows(scn, kinds));
    report::write_comparison(&root, &c).map_err(|e| CliError::runtime(e.to_string()))?;
    println!(
        "comparison: {}",
        root.join(model::results_dir::COMPARISON_MD).display()
    );
    if let Some(path) = junit {
        // Every kind is in the file: those that ran with their checks, those that could not run
        // or were never started as errors, so the file agrees with the exit code.
        let stopped = "interrupted before it started";
        let mut runs: Vec<(&str, report::junit::Labelled<'_>)> = outcomes
            .iter()
            .map(|(k, r, _)| {
                let l = match r {
                    Ok(r) => report::junit::Labelled::Ran(r),
                    Err(m) => report::junit::Labelled::Failed(m),
                };
                (k.name(), l)
            })
            .collect();
        runs.extend(
            not_run
                .iter()
                .map(|k| (k.name(), report::junit::Labelled::NotRun(stopped))),
        );
        crate::outcome::write_junit(path, &report::junit::checks_by_label(&scn.name, &runs))?;
    }
    let mut worst = outcomes.iter().map(|o| o.2).max().unwrap_or(0);
    if !not_run.is_empty() {
        worst = worst.max(130);
    }
    Ok(ExitCode::from(worst))
}

/// Every feature the scenario's proxy configs use (each case's `[proxy]` and `[configs.*]`), in
/// capability-table order, with the items using it and each kind's support.
pub fn feature_rows(scn: &Scenario, kinds: &[ProxyKind]) -> Vec<FeatureRow> {
    let mut used: BTreeMap<Feature, Vec<String>> = BTreeMap::new();
    for case in &scn.cases {
        let named = case.proxy.iter().map(|c| (String::new(), c));
        let alts = case
            .configs
            .iter()
            .map(|(n, c)| (format!(" [configs.{n}]"), c));
        for (what, cfg) in named.chain(alts) {
            for u in cfg.features() {
                let by = format!("{}{what}: {}", case.name, u.item);
                let list = used.entry(u.feature).or_default();
                if !list.contains(&by) {
                    list.push(by);
                }
            }
        }
    }
    used.into_iter()
        .map(|(f, used_by)| FeatureRow {
            feature: f.key().to_string(),
            used_by,
            support: kinds.iter().map(|&k| support_cell(k, f)).collect(),
        })
        .collect()
}

fn support_cell(kind: ProxyKind, f: Feature) -> SupportCell {
    let (level, note) = match proxy::driver(kind).support(f) {
        Support::Yes => ("yes", None),
        Support::Differs(n) => ("differs", Some(n.to_string())),
        Support::No(n) => ("no", Some(n.to_string())),
    };
    SupportCell {
        kind: kind.name().to_string(),
        level: level.into(),
        note,
    }
}

/// Flags of `proxybench capabilities`.
#[derive(clap::Args)]
pub struct CapabilitiesArgs {}

/// Runs `proxybench capabilities`: the capability table, one row per model feature and one
/// column per proxy kind, then every note (how a behaviour differs, why a feature cannot be
/// expressed).
pub fn capabilities(_a: CapabilitiesArgs) -> Result<ExitCode, CliError> {
    print!("{}", capability_table());
    Ok(ExitCode::SUCCESS)
}

/// The table [`capabilities`] prints, as markdown.
pub fn capability_table() -> String {
    let kinds = ProxyKind::ALL;
    let mut out = String::from("| Feature |");
    for k in kinds {
        out.push_str(&format!(" {k} |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(kinds.len()));
    out.push('\n');
    let mut notes = Vec::new();
    for f in Feature::ALL {
        out.push_str(&format!("| `{}` |", f.key()));
        for &k in kinds {
            let c = support_cell(k, f);
            match &c.note {
                Some(n) => {
                    notes.push(format!("- {k}, `{}`: {} ({})", f.key(), c.level, n));
                    out.push_str(&format!(" {} [{}] |", c.level, notes.len()));
                }
                None => out.push_str(&format!(" {} |", c.level)),
            }
        }
        out.push('\n');
    }
    if !notes.is_empty() {
        out.push('\n');
        for (i, n) in notes.iter().enumerate() {
            out.push_str(&format!("[{}] {}\n", i + 1, n.trim_start_matches("- ")));
        }
    }
    out
}
