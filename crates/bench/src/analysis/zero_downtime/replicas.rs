//! Replicas under load: how many requests each served (its status page), and readiness flaps that
//! the load caused, as opposed to failed probes of a replica the case was stopping anyway.

use super::plan::Plan;
use super::text::text;
use crate::analysis::common::all_measured;
use crate::analysis::zero_downtime::READINESS_TIMEOUT_S;
use model::{CaseResult, Cell, Collector, Measured, Table};
use std::collections::BTreeMap;

/// One replica's life in a case.
#[derive(Debug, Clone)]
pub struct ReplicaLife {
    /// Replica name.
    pub name: String,
    /// Started by an action at this time (seconds), or there from the start.
    pub started: Option<f64>,
    /// Stopped by an action at this time, or ran to the end.
    pub stopped: Option<f64>,
    /// Requests served by the last status-page sample.
    pub requests: Measured<u64>,
    /// Its readiness probes.
    pub probes: Measured<Probes>,
}

/// What one replica's readiness probes showed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Probes {
    /// Probes made.
    pub made: u64,
    /// Probes that failed while the replica was meant to serve.
    pub failed: u64,
    /// Ready to not-ready transitions while it was meant to serve.
    pub flaps: u64,
    /// Slowest answered probe in milliseconds (none when no probe was answered).
    pub slowest_ms: Option<f64>,
}

/// Every replica that ran in the case, oldest first; its requests and probes only where the
/// status pages and readiness probes were sampled.
pub fn lives(plan: &Plan, r: &CaseResult) -> Vec<ReplicaLife> {
    let served = r.measured(Collector::StatusPages, |_| 0u64);
    let probed = r.measured(Collector::Readiness, |_| Probes::default());
    let new = |name: &str| ReplicaLife {
        name: name.to_string(),
        started: None,
        stopped: None,
        requests: served.clone(),
        probes: probed.clone(),
    };
    let mut by: BTreeMap<String, ReplicaLife> = BTreeMap::new();
    for (name, (start, stop)) in &plan.lifetimes {
        by.insert(
            name.clone(),
            ReplicaLife {
                started: *start,
                stopped: *stop,
                ..new(name)
            },
        );
    }
    if served.is_ok() {
        for s in &r.stub_samples {
            let l = by
                .entry(s.replica.clone())
                .or_insert_with(|| new(&s.replica));
            if let Ok(n) = &mut l.requests {
                *n = (*n).max(s.requests);
            }
        }
    }
    if probed.is_ok() {
        let mut last_ok: BTreeMap<&str, bool> = BTreeMap::new();
        for p in &r.readiness {
            let l = by
                .entry(p.replica.clone())
                .or_insert_with(|| new(&p.replica));
            let Ok(probes) = &mut l.probes else { continue };
            probes.made += 1;
            if p.ok {
                probes.slowest_ms = Some(probes.slowest_ms.map_or(p.ms, |s| s.max(p.ms)));
            }
            // A probe that overlapped the replica's stop says nothing about load.
            let stopping = plan
                .stopped_at(&p.replica)
                .is_some_and(|s| s <= p.t_s + READINESS_TIMEOUT_S + 0.1);
            if stopping {
                continue;
            }
            let was_ok = last_ok.insert(&p.replica, p.ok).unwrap_or(true);
            if !p.ok {
                probes.failed += 1;
                if was_ok {
                    probes.flaps += 1;
                }
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

/// Requests served by every replica, or why the status pages were not sampled.
pub fn served(lives: &[ReplicaLife]) -> Measured<u64> {
    all_measured(lives.iter().map(|l| l.requests.clone())).map(|v| v.iter().sum())
}

/// Readiness flaps under load over every replica, and the slowest answered probe, or why the
/// probes were not sampled. `None` inside when no probe was made.
pub fn flaps(lives: &[ReplicaLife]) -> Measured<Option<(u64, Option<f64>)>> {
    let probes = all_measured(lives.iter().map(|l| l.probes.clone()))?;
    let made: u64 = probes.iter().map(|p| p.made).sum();
    Ok((made > 0).then(|| {
        (
            probes.iter().map(|p| p.flaps).sum(),
            probes
                .iter()
                .filter_map(|p| p.slowest_ms)
                .fold(None, |a: Option<f64>, s| Some(a.map_or(s, |x| x.max(s)))),
        )
    }))
}

/// The replicas table of a case.
pub fn table(case: &str, lives: &[ReplicaLife]) -> Table {
    let total = served(lives);
    let at = |t: Option<f64>, none: &str| t.map_or(Cell::Missing(none.into()), |t| Cell::num(t, 2));
    let probe = |l: &ReplicaLife, f: &dyn Fn(&Probes) -> Cell| Cell::measured(&l.probes, |p| f(p));
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
                    Cell::measured(&l.requests, |n| Cell::Int(*n as i64)),
                    Cell::measured(&total, |total| match &l.requests {
                        Ok(n) if *total > 0 => Cell::Pct {
                            value: *n as f64 / *total as f64,
                            decimals: 1,
                        },
                        _ => Cell::dash(),
                    }),
                    probe(l, &|p| Cell::Int(p.made as i64)),
                    probe(l, &|p| Cell::Int(p.failed as i64)),
                    probe(l, &|p| Cell::Int(p.flaps as i64)),
                    probe(l, &|p| {
                        p.slowest_ms.map_or_else(Cell::dash, |s| Cell::num(s, 2))
                    }),
                ]
            })
            .collect(),
        notes: vec![
            text("replicas_served").into(),
            text("replicas_probes").into(),
        ],
    }
}
