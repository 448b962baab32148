//! The `churn` analysis (scenario `long-lived-under-churn`): long-lived connections (WebSocket,
//! gRPC streams, server-sent events) held through a reload every few seconds. Every case's
//! ledger (`crate::streams`) already places each drop on its cause; this analysis answers the
//! scenario's question in the report's first lines, one sentence per case: how long did a
//! long-lived connection survive through this proxy under this churn, and what did the proxy
//! pay to keep it (old generations draining, their memory)? Then a table of the same across the
//! cases.

use super::common::{self, Texts};
use model::{CaseResult, Cell, CheckResult, RunResults, Table};
use scenario::Scenario;
use std::fmt::Display;
use std::sync::LazyLock;

/// The analysis' data file.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Data {
    text: Texts,
}

static DATA: LazyLock<Data> =
    LazyLock::new(|| common::parse("churn", include_str!("../../data/churn.toml")));

fn text(key: &str) -> &'static str {
    DATA.text.get(key)
}

fn fill(key: &str, args: &[(&str, &dyn Display)]) -> String {
    DATA.text.fill(key, args)
}

/// Seconds with one decimal, `-` when absent.
fn secs(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |s| format!("{s:.1} s"))
}

/// The reload moments of a case (the ledger's actions that reloaded), and their median spacing.
fn reload_times(c: &CaseResult) -> Vec<f64> {
    let mut t: Vec<f64> = c
        .events
        .iter()
        .filter(|e| e.error.is_none())
        .filter(|e| {
            let to = e.t_s + e.duration_ms / 1e3 + 1e-3;
            c.reloads
                .iter()
                .any(|r| r.error.is_none() && r.t_s >= e.t_s - 1e-3 && r.t_s <= to)
        })
        .map(|e| e.t_s)
        .collect();
    t.sort_by(f64::total_cmp);
    t
}

fn cadence(t: &[f64]) -> String {
    let mut gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_by(f64::total_cmp);
    match gaps.get(gaps.len().saturating_sub(1) / 2) {
        Some(g) if !gaps.is_empty() => fill("cadence", &[("every", &format!("{g:.1}"))]),
        _ => text("cadence_once").to_string(),
    }
}

/// What the proxy paid: old generations draining and their memory, or why it is not known.
fn cost(c: &CaseResult) -> String {
    let Some(l) = &c.stream_ledger else {
        return String::new();
    };
    if c.reloads.is_empty() {
        return text("cost_no_reload").to_string();
    }
    if let Some(why) = c.gap(model::Collector::Generations) {
        return fill("cost_unsampled", &[("why", &why)]);
    }
    if !l.in_place.is_empty() {
        return fill("cost_in_place", &[("replicas", &l.in_place.join(", "))]);
    }
    fill(
        "cost_measured",
        &[
            ("generations", &l.draining_generations_max()),
            (
                "processes",
                &l.draining.iter().map(|d| d.processes).max().unwrap_or(0),
            ),
            ("rss", &units::fmt_bytes(l.draining_rss_max() as f64)),
        ],
    )
}

/// The case's answer in one sentence (or none without long-lived loads).
fn answer(c: &CaseResult) -> Option<String> {
    let l = c.stream_ledger.as_ref()?;
    let sum = |f: &dyn Fn(&model::ledger::LoadLedger) -> u64| l.loads.iter().map(f).sum::<u64>();
    let (opened, dropped, lasted) = (
        sum(&|b| b.opened),
        sum(&|b| b.dropped),
        sum(&|b| b.survived),
    );
    let times = reload_times(c);
    let mut lived = Vec::new();
    let mut after = Vec::new();
    // The medians across loads are recomputed from each load's spread only roughly; the
    // per-load values are in the ledger's table. Here: the median of the loads' medians and the
    // longest of their longest.
    for b in &l.loads {
        lived.extend(b.lifetime.p50_s);
        after.extend(b.reload_to_drop.p50_s);
    }
    let after_max = l
        .loads
        .iter()
        .filter_map(|b| b.reload_to_drop.max_s)
        .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len().saturating_sub(1) / 2).copied()
    };
    let length = c
        .streams
        .iter()
        .filter_map(|s| s.planned_s)
        .fold(0.0, f64::max);
    let mut s = if dropped == 0 {
        fill(
            "answer_kept",
            &[
                ("case", &c.name),
                ("reloads", &times.len()),
                ("cadence", &cadence(&times)),
                ("opened", &opened),
                ("lasted_n", &lasted),
                ("length", &secs(Some(length))),
            ],
        )
    } else {
        fill(
            "answer_dropped",
            &[
                ("case", &c.name),
                ("reloads", &times.len()),
                ("cadence", &cadence(&times)),
                ("dropped", &dropped),
                ("opened", &opened),
                ("by_reload", &sum(&|b| b.by_reload)),
                ("after", &secs(med(after))),
                ("after_max", &secs(after_max)),
                ("without", &sum(&|b| b.without_close)),
                ("lived", &secs(med(lived))),
                ("lasted", &fill("answer_lasted", &[("lasted_n", &lasted)])),
            ],
        )
    };
    s.push_str(&cost(c));
    Some(s)
}

/// The cross-case table: one row per case.
fn table(results: &RunResults) -> Table {
    let mut t = Table::new(
        text("table_title"),
        &[
            "Case",
            "Reloads",
            "Opened",
            "Dropped",
            "By reload",
            "Without close",
            "Lived (p50, s)",
            "Reload to drop (p50, s)",
            "Longest (s)",
            "Lasted",
            "Old generations (max)",
            "Their RSS (max)",
        ],
    );
    for c in &results.cases {
        let Some(l) = &c.stream_ledger else { continue };
        let sum = |f: &dyn Fn(&model::ledger::LoadLedger) -> u64| {
            Cell::Count(l.loads.iter().map(f).sum::<u64>())
        };
        let first = |f: &dyn Fn(&model::ledger::LoadLedger) -> Option<f64>| {
            let mut v: Vec<f64> = l.loads.iter().filter_map(f).collect();
            v.sort_by(f64::total_cmp);
            v.get(v.len().saturating_sub(1) / 2)
                .map_or_else(Cell::dash, |x| Cell::num(*x, 2))
        };
        let gens = c.gap(model::Collector::Generations).is_none() && l.in_place.is_empty();
        t.rows.push(vec![
            Cell::text(&c.name),
            Cell::Count(reload_times(c).len() as u64),
            sum(&|b| b.opened),
            sum(&|b| b.dropped),
            sum(&|b| b.by_reload),
            sum(&|b| b.without_close),
            first(&|b| b.lifetime.p50_s),
            first(&|b| b.reload_to_drop.p50_s),
            l.loads
                .iter()
                .filter_map(|b| b.reload_to_drop.max_s)
                .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))))
                .map_or_else(Cell::dash, |x| Cell::num(x, 2)),
            sum(&|b| b.survived),
            if gens {
                Cell::Count(u64::from(l.draining_generations_max()))
            } else {
                Cell::Missing("not sampled".into())
            },
            if gens {
                Cell::text(units::fmt_bytes(l.draining_rss_max() as f64))
            } else {
                Cell::Missing("not sampled".into())
            },
        ]);
    }
    t.notes.push(text("table_note").to_string());
    t
}

/// The `churn` analysis, registered in [`super::ALL`].
pub struct Churn;

impl super::Analysis for Churn {
    fn name(&self) -> &'static str {
        "churn"
    }

    fn case(&self, _input: &super::CaseInput<'_>, _result: &mut CaseResult) -> Vec<CheckResult> {
        // Each case's ledger, its findings and its checks are every case's (crate::streams and
        // the scenario's checks); the answer across the cases comes at the end.
        Vec::new()
    }

    fn finish(&self, _scenario: &Scenario, results: &mut RunResults) {
        let answers: Vec<String> = results.cases.iter().filter_map(answer).collect();
        if answers.is_empty() {
            return;
        }
        let t = table(results);
        // The answers are the report's first lines: before any other finding of the run.
        let rest = std::mem::take(&mut results.findings);
        results.findings = answers;
        results.findings.extend(rest);
        if let Some(last) = results.cases.last_mut() {
            last.tables.push(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_file_parses_and_has_every_text_the_code_uses() {
        common::assert_keys("churn", &DATA.text, &[include_str!("churn.rs")]);
    }

    #[test]
    fn the_cadence_is_the_median_spacing() {
        assert_eq!(cadence(&[1.0, 5.0, 9.0, 13.5]), "every 4.0 s");
        assert_eq!(cadence(&[1.0]), "once");
    }
}
