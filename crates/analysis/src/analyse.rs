//! The analyse stage: a pure function from a results directory's record (record.json,
//! scenario.toml, requests/) to the typed results; the report stage then writes data.json, the
//! CSVs, report.md and charts from them (the bench crate's `analyse_dir` does both). The runner
//! ends every run by analysing its own directory, and `proxybench analyse DIR` does the same on
//! an old one, so both give the same bytes.
//!
//! Nothing here reads the machine: no clock, no /proc, no environment variable, no hash-map
//! order. What the analyses need of the machine was recorded when the run happened
//! ([`model::Env::sysctls`], [`model::CaseResult::time_wait`]).

use crate::analysis::{self, Analysis, Lives, Records};
use crate::record::{self, RecordError};
use model::{CaseResult, CheckResult, Env, RunResults};
use scenario::{Case, Scenario};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// Why a results directory could not be analysed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyseError {
    /// The record is missing, of another version, or damaged: bad input.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// An analysis panicked (a defect): the record is intact and can be analysed again.
    #[error("the {analysis} analysis failed on {place}: {msg}")]
    Panicked {
        /// The analysis's name.
        analysis: &'static str,
        /// `case 'NAME'` or `the whole run`.
        place: String,
        /// The panic's message.
        msg: String,
    },
}

impl AnalyseError {
    /// True when the directory given is at fault (missing, not a results directory, another
    /// version, damaged), rather than this program or the disk.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, AnalyseError::Record(_))
    }
}

/// Reads the record in `dir` and runs the scenario's analysis on it: per case the disruption
/// windows, the scenario's checks and the analysis; then the analysis's cross-case step.
pub fn analyse(dir: &Path) -> Result<RunResults, AnalyseError> {
    let rec = record::read_record(dir)?;
    let scn = record::read_scenario(dir, &rec)?;
    let aborted = rec.aborted_case.clone();
    let named = match &scn.analysis {
        None => None,
        Some(name) => Some(analysis::find(name).ok_or_else(|| RecordError::Scenario {
            path: dir.join(model::results_dir::SCENARIO_TOML),
            msg: format!("unknown analysis '{name}'"),
        })?),
    };
    // The analysis starts from the measurements alone (the record holds nothing analysed);
    // what the runner itself recorded about the run (a namespace kept or left behind) stays,
    // after the analysis's own findings.
    let mut run = rec.run;
    let recorded_cases = std::mem::take(&mut run.cases);
    let mut results = RunResults::from(run);
    let recorded = std::mem::take(&mut results.findings);
    // One case at a time, so that one case's per-request records are in memory at once.
    for mut measured in recorded_cases {
        let case = scn
            .cases
            .iter()
            .find(|c| c.name == measured.name)
            .ok_or_else(|| RecordError::Scenario {
                path: dir.join(model::results_dir::SCENARIO_TOML),
                msg: format!("no case '{}', which the record holds", measured.name),
            })?;
        let records = record::read_requests(dir, &mut measured)?;
        let lives = record::read_lives(dir, &mut measured)?;
        let mut result = CaseResult::from(measured);
        let case_checks = analyse_case(
            &scn,
            named,
            case,
            &records,
            &lives,
            &results.env,
            &mut result,
        )?;
        // A case cut short by a failure keeps its tables, but not its checks.
        if aborted.as_deref() != Some(result.name.as_str()) {
            results.checks.extend(case_checks);
        }
        results.cases.push(result);
    }
    if let Some(a) = named {
        catch_unwind(AssertUnwindSafe(|| a.finish(&scn, &mut results))).map_err(|p| {
            AnalyseError::Panicked {
                analysis: a.name(),
                place: "the whole run".into(),
                msg: panic_text(&p),
            }
        })?;
    }
    results.findings.extend(recorded);
    Ok(results)
}

/// One case: disruption windows from the records, the scenario's checks, then the analysis.
/// Findings the runner recorded (a teardown failure) stay after the analysis's own.
fn analyse_case(
    scn: &Scenario,
    named: Option<&dyn Analysis>,
    case: &Case,
    records: &Records,
    lives: &Lives,
    env: &Env,
    result: &mut CaseResult,
) -> Result<Vec<CheckResult>, AnalyseError> {
    let recorded = std::mem::take(&mut result.findings);
    // The long-lived connections' ledger, which the checks and the analyses read.
    if !result.streams.is_empty() {
        result.stream_ledger = Some(crate::streams::ledger(case, result, lives));
    }
    result.disruptions = result
        .loads
        .iter()
        .filter_map(|s| {
            let r = records.get(&s.name)?;
            Some(model::disruption_windows(
                &s.name,
                r,
                &result.events,
                result.elapsed_s,
            ))
        })
        .flatten()
        .collect();
    // The Prometheus scrape's series by type, over the case and each action's window.
    if let Some(k) = result.cluster.as_mut() {
        let le = scn
            .platform
            .prometheus
            .as_ref()
            .map(|p| p.le.clone())
            .unwrap_or_default();
        k.series = model::scrape::scrape_windows(&k.scrapes, &result.events, result.elapsed_s, &le);
    }
    let kind = env.proxy_kind.as_deref();
    let mut checks: Vec<CheckResult> = case.checks.iter().map(|c| c.eval(result, kind)).collect();
    if let Some(a) = named {
        let input = analysis::CaseInput {
            scenario: scn,
            case,
            records,
            env,
        };
        let found = catch_unwind(AssertUnwindSafe(|| a.case(&input, result))).map_err(|p| {
            AnalyseError::Panicked {
                analysis: a.name(),
                place: format!("case '{}'", case.name),
                msg: panic_text(&p),
            }
        })?;
        checks.extend(found);
    }
    // What the long-lived connections went through comes first among the case's findings: a
    // case that lost none of its short requests may still have cut its WebSockets.
    let mut stream_findings = crate::streams::findings(result);
    stream_findings.append(&mut result.findings);
    result.findings = stream_findings;
    result.series.extend(crate::streams::series(result));
    result.findings.extend(partly_sampled(result));
    result.findings.extend(recorded);
    Ok(checks)
}

/// The sentence that names every collector that gathered only part of what it was meant to in
/// the case, with what it missed: said once per case, whatever the analysis, so that the
/// report always says which numbers are drawn from part of their items (their cells show it
/// too, and no check passes on them).
fn partly_sampled(r: &CaseResult) -> Option<String> {
    let parts: Vec<String> = model::Collector::ALL
        .iter()
        .filter_map(|c| match r.incomplete(*c) {
            Some(model::Incomplete::Partial(p)) => Some(p.to_string()),
            _ => None,
        })
        .chain(match r.records_coverage() {
            model::Measured::Partial((), p) if r.shortfall(model::Collector::Records).is_none() => {
                Some(p.to_string())
            }
            _ => None,
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "Sampled in part in this case, so what is drawn from them says what it covers and no \
             check passes on them: {}.",
            parts.join("; ")
        )
    })
}

/// A panic's message: what [`AnalyseError::Panicked`] reports, and what the runner reports of a
/// panicked stage.
pub fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}
