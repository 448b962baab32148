//! The cross-case summary: one row per case with the write-ups' numbers (failures and ppm per
//! protocol, 499s, error/warn lines) and ours (readiness flaps, the worst disruption window),
//! and run findings that compare the ways of scaling.

use super::ledger::{Ledger, LogBooks};
use super::plan::{Plan, What};
use super::replicas;
use super::text::{fill, text};
use model::{CaseResult, Cell, Measured, RunResults, Table};
use scenario::{RemoveMode, Scenario, StopSpec};

/// One case's summary numbers.
struct Row {
    what: Vec<What>,
    failed: u64,
    /// What the proxy's logs counted (retries, error/warn lines), when they were read.
    log: Measured<LogBooks>,
    cells: Vec<Cell>,
}

fn row(case: &scenario::Case, c: &CaseResult, kind: &str) -> Row {
    let plan = Plan::new(case, c, kind);
    let ledger = Ledger::new(c);
    let lives = replicas::lives(&plan, c);
    let proto = |https: bool| {
        let ls: Vec<_> = c
            .loads
            .iter()
            .filter(|l| l.url.starts_with("https://") == https)
            .collect();
        if ls.is_empty() {
            return Cell::dash();
        }
        let (f, a) = ls
            .iter()
            .fold((0, 0), |(f, a), l| (f + l.failures(), a + l.attempts()));
        Cell::list(
            [
                Cell::Int(f as i64),
                Cell::list(
                    [
                        Cell::text("("),
                        Cell::Ppm {
                            failures: f,
                            total: a,
                        },
                        Cell::text(")"),
                    ],
                    "",
                ),
            ],
            " ",
        )
    };
    let flaps = replicas::flaps(&lives);
    Row {
        what: plan.fired.iter().map(|f| f.what).collect(),
        failed: c.loads.iter().map(|l| l.failures()).sum(),
        cells: vec![
            Cell::text(&c.name),
            proto(false),
            proto(true),
            Cell::measured(&ledger.log, |b| Cell::Int(b.proxy_499 as i64)),
            Cell::measured(&ledger.log, |b| Cell::Int(b.error_warn as i64)),
            Cell::measured(&flaps, |f| {
                f.map_or_else(Cell::dash, |(n, _)| Cell::Int(n as i64))
            }),
            // Drawn from the records of every load together: with their coverage.
            Cell::measured(&c.records_coverage(), |()| Cell::text(worst(c))),
        ],
        log: ledger.log,
    }
}

/// The disruption window (all loads together) that lost the most requests.
fn worst(c: &CaseResult) -> String {
    let mut best: Option<(u64, usize, f64, f64)> = None;
    for (i, _) in c.events.iter().enumerate() {
        let ds: Vec<_> = c.disruptions.iter().filter(|d| d.event == i).collect();
        let failed: u64 = ds.iter().map(|d| d.failed).sum();
        let first = ds
            .iter()
            .filter_map(|d| d.first_failure_s)
            .fold(f64::INFINITY, f64::min);
        let last = ds
            .iter()
            .filter_map(|d| d.last_failure_s)
            .fold(f64::NEG_INFINITY, f64::max);
        if failed > 0 && best.is_none_or(|b| failed > b.0) {
            best = Some((failed, i, first, last));
        }
    }
    match best {
        None => "none".into(),
        Some((n, i, first, last)) => {
            let e = &c.events[i];
            format!(
                "#{} {} {}: {n} lost within {:.0} ms",
                i + 1,
                e.action,
                e.detail,
                (last - first) * 1e3
            )
        }
    }
}

/// Adds the summary table to the last case and the comparisons to the run's findings.
pub fn finish(scn: &Scenario, results: &mut RunResults) {
    let kind = crate::analysis::common::replica_kind(&results.env, scn.cases.first());
    let rows: Vec<Row> = results
        .cases
        .iter()
        .filter_map(|c| {
            scn.cases
                .iter()
                .find(|k| k.name == c.name)
                .map(|k| row(k, c, &kind))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let sum = |pred: &dyn Fn(&What) -> bool, f: &dyn Fn(&Row) -> u64| -> Option<u64> {
        let hit: Vec<&Row> = rows.iter().filter(|r| r.what.iter().any(pred)).collect();
        (!hit.is_empty()).then(|| hit.iter().map(|r| f(r)).sum())
    };
    let up = sum(&|w| *w == What::ReplicasUp, &|r| r.failed);
    let graceful = sum(&|w| *w == What::ReplicasDown(StopSpec::Graceful), &|r| {
        r.failed
    });
    let kill = sum(&|w| *w == What::ReplicasDown(StopSpec::Kill), &|r| r.failed);
    let mut findings = Vec::new();
    if let (Some(u), Some(g), Some(k)) = (up, graceful, kill) {
        findings.push(fill(
            "summary_replicas",
            &[("up", &u), ("graceful", &g), ("kill", &k)],
        ));
    }
    let drain = |f: &dyn Fn(&Row) -> u64| sum(&|w| *w == What::BackendsDown(RemoveMode::Drain), f);
    let killb = |f: &dyn Fn(&Row) -> u64| sum(&|w| *w == What::BackendsDown(RemoveMode::Kill), f);
    if let (Some(dl), Some(kl)) = (drain(&|r| r.failed), killb(&|r| r.failed)) {
        // The proxy's side of it comes from its logs, in every case that removed backends.
        let logs = crate::analysis::common::all_measured(
            rows.iter()
                .filter(|r| r.what.iter().any(|w| matches!(w, What::BackendsDown(_))))
                .map(|r| r.log.clone()),
        );
        findings.push(crate::analysis::common::finding(
            "Backends: the proxy's error/warn lines and retries",
            logs,
            |_| {
                // Every row's log is there whole or in part (`logs` above): a partial row's
                // count is what was read, and the sentence says it is partial.
                let lines = |r: &Row| r.log.value().map_or(0, |b| b.error_warn);
                let retried = |r: &Row| r.log.value().map_or(0, |b| b.retried);
                fill(
                    "summary_backends",
                    &[
                        ("drain_lines", &drain(&lines).unwrap_or(0)),
                        ("drain_retried", &drain(&retried).unwrap_or(0)),
                        ("kill_lines", &killb(&lines).unwrap_or(0)),
                        ("kill_retried", &killb(&retried).unwrap_or(0)),
                        ("drain_lost", &dl),
                        ("kill_lost", &kl),
                    ],
                )
            },
        ));
    }
    let table = Table {
        title: text("summary_title").into(),
        columns: [
            "Case",
            "HTTP failed (ppm)",
            "HTTPS failed (ppm)",
            "499s",
            "Error/warn lines",
            "Flaps",
            "Worst disruption window",
        ]
        .map(String::from)
        .to_vec(),
        rows: rows.into_iter().map(|r| r.cells).collect(),
        notes: vec![text("summary_note").into()],
    };
    // The counts above are requests; a run with long-lived loads says what they lost too.
    let streams: Vec<String> = results
        .cases
        .iter()
        .filter(|c| !c.streams.is_empty())
        .map(|c| {
            format!(
                "{} {}",
                c.name,
                c.streams.iter().map(|s| s.dropped).sum::<u64>()
            )
        })
        .collect();
    if !streams.is_empty() {
        findings.push(fill("summary_streams", &[("cases", &streams.join(", "))]));
    }
    results.findings.extend(findings);
    if let Some(last) = results.cases.last_mut() {
        last.tables.push(table);
    }
}
