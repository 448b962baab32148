//! Replicas under load: how many requests each served (its status page), and readiness flaps that
//! the load caused, as opposed to failed probes of a replica the case was stopping anyway.

use super::plan::Plan;
use super::text::text;
use crate::analysis::zero_downtime::READINESS_TIMEOUT_S;
use model::{CaseResult, Cell, Table};
use std::collections::BTreeMap;

/// One replica's life in a case.
#[derive(Debug, Clone, Default)]
pub struct ReplicaLife {
    /// Replica name.
    pub name: String,
    /// Started by an action at this time (seconds), or there from the start.
    pub started: Option<f64>,
    /// Stopped by an action at this time, or ran to the end.
    pub stopped: Option<f64>,
    /// Requests served by the last status-page sample (0 when the kind has no status page).
    pub requests: u64,
    /// Probes made.
    pub probes: u64,
    /// Probes that failed while the replica was meant to serve.
    pub failed: u64,
    /// Ready to not-ready transitions while it was meant to serve.
    pub flaps: u64,
    /// Slowest probe answer in milliseconds.
    pub slowest_ms: f64,
}

/// Every replica that ran in the case, oldest first.
pub fn lives(plan: &Plan, r: &CaseResult) -> Vec<ReplicaLife> {
    let mut by: BTreeMap<String, ReplicaLife> = BTreeMap::new();
    for (name, (start, stop)) in &plan.lifetimes {
        by.insert(
            name.clone(),
            ReplicaLife {
                name: name.clone(),
                started: *start,
                stopped: *stop,
                ..ReplicaLife::default()
            },
        );
    }
    for s in &r.stub_samples {
        let l = by.entry(s.replica.clone()).or_insert_with(|| ReplicaLife {
            name: s.replica.clone(),
            ..ReplicaLife::default()
        });
        l.requests = l.requests.max(s.requests);
    }
    let mut last_ok: BTreeMap<&str, bool> = BTreeMap::new();
    for p in &r.readiness {
        let l = by.entry(p.replica.clone()).or_insert_with(|| ReplicaLife {
            name: p.replica.clone(),
            ..ReplicaLife::default()
        });
        l.probes += 1;
        l.slowest_ms = l.slowest_ms.max(if p.ok { p.ms } else { 0.0 });
        // A probe that overlapped the replica's stop says nothing about load.
        let stopping = plan
            .stopped_at(&p.replica)
            .is_some_and(|s| s <= p.t_s + READINESS_TIMEOUT_S + 0.1);
        if stopping {
            continue;
        }
        let was_ok = last_ok.insert(&p.replica, p.ok).unwrap_or(true);
        if !p.ok {
            l.failed += 1;
            if was_ok {
                l.flaps += 1;
            }
        }
    }
    let mut v: Vec<ReplicaLife> = by.into_values().collect();
    v.sort_by_key(|l| {
        l.name
            .rsplit('-')
            .next()
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(u32::MAX)
    });
    v
}

/// The replicas table of a case.
pub fn table(case: &str, lives: &[ReplicaLife]) -> Table {
    let total: u64 = lives.iter().map(|l| l.requests).sum();
    let at = |t: Option<f64>, none: &str| t.map_or(Cell::Missing(none.into()), |t| Cell::num(t, 2));
    Table {
        title: format!("{case}: replicas under load"),
        columns: [
            "Replica",
            "Started (s)",
            "Stopped (s)",
            "Requests served",
            "Share",
            "Probes",
            "Failed under load",
            "Flaps",
            "Slowest ok probe (ms)",
        ]
        .map(String::from)
        .to_vec(),
        rows: lives
            .iter()
            .map(|l| {
                vec![
                    Cell::text(&l.name),
                    at(l.started, "at start"),
                    at(l.stopped, "-"),
                    Cell::Int(l.requests as i64),
                    if total > 0 {
                        Cell::Pct {
                            value: l.requests as f64 / total as f64,
                            decimals: 1,
                        }
                    } else {
                        Cell::dash()
                    },
                    Cell::Int(l.probes as i64),
                    Cell::Int(l.failed as i64),
                    Cell::Int(l.flaps as i64),
                    Cell::num(l.slowest_ms, 2),
                ]
            })
            .collect(),
        notes: vec![
            text("replicas_served").into(),
            text("replicas_probes").into(),
        ],
    }
}
