//! The `burst` analysis (scenario `burst-handling`): nginx's `limit_req` under an open-loop
//! attack, measured against the leaky-bucket model of [`crate::theory::limit_req`].
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

use super::Records;
use crate::scenario::{ArrivalsSpec, Case, Scenario};
use crate::theory::limit_req::{self, Limit};
use analysis::Analysis;
use model::{CaseResult, CheckResult, RunResults, Table};
use proxy::config::RateLimit;
use published::published;
use text::fmt_rate;

/// Tick phases the prediction is simulated at (a quarter millisecond apart on a 4 ms clock).
const PHASES: u32 = 16;
/// Points in each queue-depth series.
const SERIES_POINTS: u64 = 300;
/// Title suffix of the vegeta-style table (the cross-case summary reads its cells back).
const REPORT: &str = "report (vegeta's block)";
/// Title suffix of the predicted-vs-measured table.
const MODEL: &str = "limit_req model vs measured";
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
/// Standard deviations of the binomial spread allowed between a Poisson case's success ratio
/// and the closed form.
const SIGMAS: f64 = 3.0;

/// Runs the analysis on one case: tables, series, findings and checks for its attack load.
fn case(
    _scn: &Scenario,
    case: &Case,
    result: &mut CaseResult,
    records: &Records,
) -> Vec<CheckResult> {
    let Some(rl) = limited(case) else {
        result.findings.push(
            "burst analysis: no route of this case has a rate limit; nothing to model.".into(),
        );
        return Vec::new();
    };
    let Some(spec) = case.loads.iter().find(|l| l.rate.is_some()) else {
        result
            .findings
            .push("burst analysis: no open-loop load in this case; nothing to model.".into());
        return Vec::new();
    };
    if case.loads.len() > 1 {
        result.findings.push(format!(
            "burst analysis: only load '{}' is modelled; other loads share the limiter and \
             make the prediction approximate.",
            spec.name
        ));
    }
    let (Some(recs), Some(summary)) = (
        records.get(&spec.name),
        result.loads.iter().find(|l| l.name == spec.name).cloned(),
    ) else {
        result.findings.push(format!(
            "burst analysis: load '{}' left no per-request records.",
            spec.name
        ));
        return Vec::new();
    };
    let a = Analysis::new(
        spec,
        &summary,
        rl,
        recs,
        &result.logs,
        limit_req::nginx_clock_tick_us(),
    );
    result.tables.push(a.report_table(&case.name));
    result.tables.push(a.model_table(&case.name, &result.logs));
    result.tables.push(a.drift_table(&case.name));
    result.series.extend(a.series());
    result.findings.extend(a.findings());
    a.checks(&case.name, &result.logs)
}

/// Adds the cross-case summary (one row per case, the write-up's numbers beside ours) to the
/// last case, and the run's findings.
fn finish(scn: &Scenario, results: &mut RunResults) {
    let mut t = Table {
        title: "All cases: burst handling at a glance".into(),
        columns: [
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
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
        notes: Vec::new(),
    };
    for c in &results.cases {
        let Some(spec) = scn.cases.iter().find(|s| s.name == c.name) else {
            continue;
        };
        let (Some(rl), Some(load)) = (limited(spec), spec.loads.iter().find(|l| l.rate.is_some()))
        else {
            continue;
        };
        let report = |row: &str| cell(c, REPORT, row, 1);
        let model = |row: &str| cell(c, MODEL, row, 1);
        let measured = |row: &str| cell(c, MODEL, row, 2);
        t.rows.push(vec![
            c.name.clone(),
            match load.arrivals {
                ArrivalsSpec::Even => "even".into(),
                ArrivalsSpec::Poisson => "Poisson".into(),
            },
            format!("{} r/s", fmt_rate(rl.rate.0)),
            rl.burst.to_string(),
            report("Requests [total, rate, throughput]")
                .split(", ")
                .next()
                .unwrap_or("-")
                .to_string(),
            format!("{:.2}", load.rate.map(|r| r.0).unwrap_or(0.0)),
            measured("Throughput (2xx per second of total)"),
            report("Success [ratio]"),
            report("Status Codes [code:count]"),
            {
                let d = report("Duration [total, attack, wait]");
                let mut p = d.split(", ");
                format!("{} / {}", p.next().unwrap_or("-"), p.next().unwrap_or("-"))
            },
            report("Latencies [mean, 50, 95, 99, max]").replace(", ", " / "),
            model("Accepted (2xx)"),
            cell(c, DRIFT, "Accepted (2xx)", 1),
            measured("Accepted (2xx)"),
            published(rl, load)
                .map(|p| format!("{} of {}", p.accepted, p.requests))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    if t.rows.is_empty() {
        return;
    }
    t.notes.push(
        "Model: the limit_req algorithm replayed over the arrival times nginx logged for each \
         case ($msec - $request_time) at every phase of limit_req's millisecond clock against the \
         log's and with the log's millisecond of jitter (a range when the phase matters); the checks judge by it. Model at \
         send times: the same over the intended send times with a tick of jitter and the late \
         sends; the two differ by what the generator and the machine drifted. \
         Published run: the counts of \
         the vegeta write-up this scenario follows, for the case with the same rate multiple, burst \
         and length in limit-periods (the quick form keeps them)."
            .into(),
    );
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
            // The published runs were at 3 r/s against 9 r/s for 60 s.
            t.notes.push(format!(
                "The published burst-{} run accepted {ok} of {n} in {:.1} s: the model gives that \
                 for burst {eff} ({periods} limit periods + {eff}), whose queue also drains in \
                 {:.1} s after a 60 s attack ({:.1} s in all). That run behaved as if its queue held \
                 {eff}, not {}.",
                rl.burst,
                p.total_s,
                eff as f64 / 3.0,
                60.0 + eff as f64 / 3.0,
                rl.burst
            ));
        }
        if rl.burst == 0 && load.rate.is_some_and(|r| r.0 > rl.rate.0) {
            t.notes.push(format!(
                "The published burst-0 run at {}x the limit accepted {ok} of {n} ({:.2} r/s over \
                 its {:.1} s) but shows answers for only {} of its {n} requests; its acceptance \
                 rate is the jittered model's (every 3rd or 4th arrival, one boundary in three \
                 going the early way: 9/3.67 = 2.45 r/s).",
                (load.rate.map_or(0.0, |r| r.0) / rl.rate.0).round(),
                ok as f64 / p.total_s,
                p.total_s,
                p.answered
            ));
        }
    }
    t.notes.push(
        "How to read it: below the limit every request passes. At and above it with burst 0 the \
         limiter judges each gap, not the mean rate: a request is refused when it comes sooner than \
         ceil(1000/rate) ms after the last accepted one, so even spacing at the limit passes 2 in 3 \
         (3 in 5 when jitter scrambles the phase against nginx's 4 ms clock) and Poisson spacing \
         about half. A burst queue turns refusals into waits: the queue fills at \
         (attack - limit) per second, drains at the limit, and overflows once the excess of the whole \
         attack exceeds the burst; the queue must be sized for the peak's excess times its duration."
            .into(),
    );
    if let Some(last) = results.cases.last_mut() {
        last.tables.push(t);
    }
    results.findings.push(
        "burst-handling: the cross-case table is at the end of the last case's section.".into(),
    );
    let by_name = |n: &str| results.cases.iter().find(|c| c.name == n);
    let ok = |c: &CaseResult| {
        format!(
            "{} of {}",
            cell(c, MODEL, "Accepted (2xx)", 2),
            cell(c, MODEL, "Requests", 2)
        )
    };
    let ratio = |c: &CaseResult| cell(c, REPORT, "Success [ratio]", 1);
    if let (Some(a), Some(b)) = (by_name("3rps-even"), by_name("3rps-poisson")) {
        results.findings.push(format!(
            "At the limit's own mean rate, evenly paced arrivals passed {} ({}) and Poisson arrivals \
             {} ({}): limit_req judges the gap between requests, not their mean rate.",
            ratio(a),
            ok(a),
            ratio(b),
            ok(b)
        ));
    }
    if let (Some(a), Some(b)) = (by_name("9rps-burst400"), by_name("9rps-burst400-120s")) {
        results.findings.push(format!(
            "Burst 400 absorbed 60 s of a 3x overload ({} accepted) but not 120 s ({}): the queue must \
             hold the overload's excess for its whole duration.",
            ok(a),
            ok(b)
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

/// A cell of a table whose title ends with `suffix`, in the row whose first cell is `row`.
fn cell(c: &CaseResult, suffix: &str, row: &str, col: usize) -> String {
    c.tables
        .iter()
        .find(|t| t.title.ends_with(suffix))
        .and_then(|t| t.rows.iter().find(|r| r.first().is_some_and(|f| f == row)))
        .and_then(|r| r.get(col).cloned())
        .unwrap_or_else(|| "-".into())
}

/// The `burst` analysis, registered in [`super::ALL`].
pub struct Burst;

impl super::Analysis for Burst {
    fn name(&self) -> &'static str {
        "burst"
    }

    fn case(&self, input: &super::CaseInput<'_>, result: &mut CaseResult) -> Vec<CheckResult> {
        case(input.scenario, input.case, result, input.records)
    }

    fn finish(&self, scenario: &Scenario, results: &mut RunResults) {
        finish(scenario, results)
    }
}
