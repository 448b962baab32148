//! The `burst` analysis (scenario `burst-handling`): nginx's `limit_req` under an open-loop
//! attack, measured against the leaky-bucket model of [`crate::theory::limit_req`].
//!
//! The model is nginx's (and the log fields it reads are nginx's). When the run's proxy is of
//! another kind, the tables still show the model beside the measurements, but a finding says
//! that the model is nginx's and does not apply as-is, and the model's checks fail as "not
//! measurable for KIND": another proxy is never judged against nginx's leaky bucket silently.
//!
//! nginx's access log gives, for every limited request, the time nginx read it (`$msec -
//! $request_time`, whole milliseconds of its cached clock, the turn in which limit_req read its
//! own). Those arrivals go through the model at every phase of limit_req's millisecond clock
//! against the log's (the on-time range) and with the millisecond the log truncates, which gives the range of accepted
//! counts the algorithm allows; the measured 2xx count must fall in it, and the closed forms
//! (drain rate, overflow, cycles, Poisson ratio) are judged on the same arrivals. A stall of
//! the generator or of nginx is in those times, so it moves the prediction, not the verdict; with
//! no such log lines the checks fail with "no data". Every request of an open-loop load also
//! carries its intended send time (`t_us - latency_us`); the model on those, with a tick of
//! jitter and the schedule's late sends, is kept beside it as an informative table of the
//! drift. The report per case is the
//! vegeta write-up's block (requests, rate, throughput, durations, latencies, success, status
//! codes), a predicted-vs-measured table explained from the mechanism, and the queue depth over
//! time (measured: sent and not yet answered; predicted: delayed inside nginx).

mod analysis;
mod checks;
mod logged;
mod measured;
mod prediction;
mod published;
mod text;

use super::common::{self, Texts};
use super::Records;
use crate::theory::limit_req::Limit;
use analysis::{Analysis, ACCEPTED_ROW, CODES_ROW, DURATION_ROW, LATENCY_ROW, REQUESTS_ROW};
use analysis::{SUCCESS_ROW, THROUGHPUT_ROW};
use model::{CaseResult, Cell, CheckResult, Collector, RunResults, Table};
use published::{published, Published};
use scenario::{ArrivalsSpec, Case, Scenario};
use setup::proxy::RateLimit;
use std::fmt::Display;
use std::sync::LazyLock;
use text::fmt_rate;

/// Tolerances of the checks (see `crates/analysis/data/burst.toml`).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Tolerances {
    /// Standard deviations of the binomial spread allowed between a Poisson case's success
    /// ratio and the closed form.
    sigmas: f64,
}

/// The limit and attack length of the published runs.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishedRun {
    /// Limit rate, r/s.
    rate: f64,
    /// Attack length, seconds.
    attack_s: f64,
}

/// The analysis' data file: the published runs, tolerances and prose.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Data {
    tolerances: Tolerances,
    published: Vec<Published>,
    published_run: PublishedRun,
    text: Texts,
}

static DATA: LazyLock<Data> =
    LazyLock::new(|| common::parse("burst", include_str!("../../data/burst.toml")));

/// A prose template of this analysis.
fn text(key: &str) -> &'static str {
    DATA.text.get(key)
}

/// A prose template filled from the run.
fn fill(key: &str, args: &[(&str, &dyn Display)]) -> String {
    DATA.text.fill(key, args)
}

/// Standard deviations of the binomial spread allowed between a Poisson case's success ratio
/// and the closed form (from the data file).
fn sigmas() -> f64 {
    DATA.tolerances.sigmas
}

/// Tick phases the prediction is simulated at (a quarter millisecond apart on a 4 ms clock).
const PHASES: u32 = 16;
/// Points in each queue-depth series.
const SERIES_POINTS: u64 = 300;
/// Title suffix of the vegeta-style table (the cross-case summary reads its cells back).
const REPORT: &str = "report (vegeta's block)";
/// Title suffix of the predicted-vs-measured table.
const MODEL: &str = "nginx's limit_req model vs measured";
/// Resolution of the clock limit_req reads and of the access log's `$msec` (µs). nginx 1.22 on
/// Linux takes `ngx_current_msec` from CLOCK_MONOTONIC (not the coarse clock) right after
/// `gettimeofday`, in the same update, so a logged arrival and the limiter's `now` differ by a
/// constant offset and the millisecond truncation.
const LOG_CLOCK_US: u64 = 1000;
/// Title suffix of the informative table: the model on send times beside nginx's arrivals.
const DRIFT: &str = "model at send times vs nginx's arrivals";
/// Draws of arrival jitter in the prediction's envelope. At exactly the limit every decision
/// turns on a lost sub-millisecond, so the envelope needs many draws to reach its true edges
/// (48 left a measured 107 outside a drawn 108..115); a draw costs one pass over the arrivals.
const JITTER_RUNS: u32 = 512;

/// Runs the analysis on one case: tables, series, findings and checks for its attack load.
fn case(
    _scn: &Scenario,
    case: &Case,
    result: &mut CaseResult,
    records: &Records,
    env: &model::Env,
) -> Vec<CheckResult> {
    let Some(rl) = limited(case) else {
        result.findings.push(text("no_limit").into());
        return Vec::new();
    };
    let Some(spec) = case.loads.iter().find(|l| l.rate.is_some()) else {
        result.findings.push(text("no_open_loop").into());
        return Vec::new();
    };
    if case.loads.len() > 1 {
        result
            .findings
            .push(fill("other_loads", &[("load", &spec.name)]));
    }
    let (Some(recs), Some(summary)) = (
        records.get(&spec.name),
        result.loads.iter().find(|l| l.name == spec.name).cloned(),
    ) else {
        result
            .findings
            .push(fill("no_records", &[("load", &spec.name)]));
        return Vec::new();
    };
    let logs = result.measured(Collector::Logs, |r| r.logs.clone());
    let a = Analysis::new(
        spec,
        &summary,
        rl,
        recs,
        logs.as_ref(),
        super::coarse_clock_us(env),
    );
    result.tables.push(a.report_table(&case.name));
    result.tables.push(a.model_table(&case.name, logs.as_ref()));
    result.tables.push(a.drift_table(&case.name));
    result.series.extend(a.series());
    result.findings.extend(a.findings());
    let checks = a.checks(&case.name, logs.as_ref());
    result
        .findings
        .extend(common::not_sampled(result, &[Collector::Logs]));
    if common::model_applies(env) {
        return checks;
    }
    let kind = common::proxy_kind(env);
    let model = common::MODELLED_KIND;
    result
        .findings
        .insert(0, fill("other_kind", &[("kind", &kind), ("model", &model)]));
    let why = fill("other_kind_check", &[("model", &model)]);
    checks
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            if i < checks::PROXY_NEUTRAL {
                c
            } else {
                common::not_measurable(c, kind, &why)
            }
        })
        .collect()
}

/// Adds the cross-case summary (one row per case, the write-up's numbers beside ours) to the
/// last case, and the run's findings. Values come from the cases' typed cells, never parsed.
fn finish(scn: &Scenario, results: &mut RunResults) {
    let mut t = Table::new(
        text("summary_title"),
        &[
            "Case",
            "Arrivals",
            "Limit",
            "Burst",
            "Requests",
            "Rate",
            "Throughput",
            "Success",
            "Status codes",
            "Total / attack",
            "Latency mean / p50 / p95 / p99 / max",
            "Model: accepted",
            "Model at send times",
            "Measured: accepted",
            "Published run",
        ],
    );
    for c in &results.cases {
        if let Some(row) = summary_row(scn, c) {
            t.rows.push(row);
        }
    }
    if t.rows.is_empty() {
        return;
    }
    t.notes.push(text("summary_model").into());
    published_notes(scn, &mut t);
    t.notes.push(text("how_to_read").into());
    if let Some(last) = results.cases.last_mut() {
        last.tables.push(t);
    }
    findings(results);
}

/// Case `c`'s row of the summary: its arrivals, limit and burst, the report's numbers, the
/// model's, and the published run's; none for a case without a rate-limited route and load.
fn summary_row(scn: &Scenario, c: &CaseResult) -> Option<Vec<Cell>> {
    let spec = scn.cases.iter().find(|s| s.name == c.name)?;
    let (Some(rl), Some(load)) = (limited(spec), spec.loads.iter().find(|l| l.rate.is_some()))
    else {
        return None;
    };
    let report = |row: &str| cell(c, REPORT, row, 1);
    let part = |row: &str, i: usize| report(row).part(i).cloned().unwrap_or_else(Cell::dash);
    let list = |cell: Cell, sep: &str| match cell {
        Cell::List { items, .. } => Cell::list(items, sep),
        other => other,
    };
    Some(vec![
        Cell::text(&c.name),
        Cell::text(match load.arrivals {
            ArrivalsSpec::Even => "even",
            ArrivalsSpec::Poisson => "Poisson",
        }),
        Cell::text(format!("{} r/s", fmt_rate(rl.rate.0))),
        Cell::Int(i64::from(rl.burst)),
        part(REQUESTS_ROW, 0),
        Cell::num(load.rate.map(|r| r.0).unwrap_or(0.0), 2),
        cell(c, MODEL, THROUGHPUT_ROW, 2),
        report(SUCCESS_ROW),
        report(CODES_ROW),
        Cell::list([part(DURATION_ROW, 0), part(DURATION_ROW, 1)], " / "),
        list(report(LATENCY_ROW), " / "),
        cell(c, MODEL, ACCEPTED_ROW, 1),
        cell(c, DRIFT, ACCEPTED_ROW, 1),
        cell(c, MODEL, ACCEPTED_ROW, 2),
        published(rl, load).map_or_else(Cell::dash, |p| {
            Cell::text(format!("{} of {}", p.accepted, p.requests))
        }),
    ])
}

/// The summary's notes on the published runs: where the write-up's accepted count differs
/// from what a burst and the attack's periods allow, and what a burst of 0 lets through.
fn published_notes(scn: &Scenario, t: &mut Table) {
    let run = &DATA.published_run;
    for c in &scn.cases {
        let (Some(rl), Some(load)) = (limited(c), c.loads.iter().find(|l| l.rate.is_some())) else {
            continue;
        };
        let Some(p) = published(rl, load) else {
            continue;
        };
        let attack = load.duration.map_or(0.0, |d| d.0.as_secs_f64());
        let periods = (attack * rl.rate.0).round() as u64;
        let (ok, n) = (p.accepted, p.requests);
        if rl.burst > 0 && ok < n && ok != periods + u64::from(rl.burst) {
            let eff = ok.saturating_sub(periods);
            let drain = eff as f64 / run.rate;
            t.notes.push(fill(
                "published_burst",
                &[
                    ("burst", &rl.burst),
                    ("ok", &ok),
                    ("n", &n),
                    ("total", &Cell::num(p.total_s, 1)),
                    ("eff", &eff),
                    ("periods", &periods),
                    ("drain", &Cell::num(drain, 1)),
                    ("attack", &run.attack_s),
                    ("all", &Cell::num(run.attack_s + drain, 1)),
                ],
            ));
        }
        if rl.burst == 0 && load.rate.is_some_and(|r| r.0 > rl.rate.0) {
            t.notes.push(fill(
                "published_burst0",
                &[
                    (
                        "times",
                        &(load.rate.map_or(0.0, |r| r.0) / rl.rate.0).round(),
                    ),
                    ("ok", &ok),
                    ("n", &n),
                    ("rate", &Cell::num(ok as f64 / p.total_s, 2)),
                    ("total", &Cell::num(p.total_s, 1)),
                    ("answered", &p.answered),
                ],
            ));
        }
    }
}

/// The run's findings: where to read, the gap between even and Poisson arrivals, and what a
/// longer attack does to the accepted share.
fn findings(results: &mut RunResults) {
    results.findings.push(text("finding_where").into());
    let by_name = |n: &str| results.cases.iter().find(|c| c.name == n);
    let ok = |c: &CaseResult| {
        format!(
            "{} of {}",
            cell(c, MODEL, ACCEPTED_ROW, 2),
            cell(c, MODEL, "Requests", 2)
        )
    };
    let ratio = |c: &CaseResult| cell(c, REPORT, SUCCESS_ROW, 1);
    if let (Some(a), Some(b)) = (by_name("3rps-even"), by_name("3rps-poisson")) {
        results.findings.push(fill(
            "finding_gap",
            &[
                ("even_ratio", &ratio(a)),
                ("even_ok", &ok(a)),
                ("poisson_ratio", &ratio(b)),
                ("poisson_ok", &ok(b)),
            ],
        ));
    }
    if let (Some(a), Some(b)) = (by_name("9rps-burst400"), by_name("9rps-burst400-120s")) {
        results.findings.push(fill(
            "finding_duration",
            &[("short", &ok(a)), ("long", &ok(b))],
        ));
    }
}

/// The rate limit of the first rate-limited route of the case's proxy config.
fn limited(case: &Case) -> Option<&RateLimit> {
    let cfg = case.proxy.as_ref()?;
    let name = cfg.routes.iter().find_map(|r| r.rate_limit.as_deref())?;
    cfg.rate_limit(name)
}

/// The model's view of a configured limit.
fn model_limit(rl: &RateLimit) -> Limit {
    Limit {
        rate: rl.rate.0,
        burst: u64::from(rl.burst),
        delay: if rl.nodelay {
            u64::from(rl.burst)
        } else {
            u64::from(rl.delay.unwrap_or(0))
        },
    }
}

/// The typed cell of a table whose title ends with `suffix`, in the row labelled `row` (`-` when
/// there is none).
fn cell(c: &CaseResult, suffix: &str, row: &str, col: usize) -> Cell {
    c.tables
        .iter()
        .find(|t| t.title.ends_with(suffix))
        .and_then(|t| t.row(row))
        .and_then(|r| r.get(col).cloned())
        .unwrap_or_else(Cell::dash)
}

/// The `burst` analysis, registered in [`super::ALL`].
pub struct Burst;

impl super::Analysis for Burst {
    fn name(&self) -> &'static str {
        "burst"
    }

    fn case(&self, input: &super::CaseInput<'_>, result: &mut CaseResult) -> Vec<CheckResult> {
        case(input.scenario, input.case, result, input.records, input.env)
    }

    fn finish(&self, scenario: &Scenario, results: &mut RunResults) {
        finish(scenario, results)
    }
}
