//! Replicas under load: how many requests each served (its status page), and readiness flaps that
//! the load caused, as opposed to failed probes of a replica the case was stopping anyway.

use super::plan::Plan;
use super::text::text;
use crate::analysis::common::{all_measured, over_items};
use crate::analysis::zero_downtime::READINESS_TIMEOUT_S;
use model::{
    Absent, CaseResult, Cell, Collector, Measured, MissingItem, Partial, Shortfall, Table,
};
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
/// status pages and readiness probes were sampled. A replica whose status page never answered
/// has no request count (not a zero), and one whose page answered only some of the time has
/// its count with that replica's shortfall.
pub fn lives(plan: &Plan, r: &CaseResult) -> Vec<ReplicaLife> {
    let served = r.measured(Collector::StatusPages, |_| ());
    let probed = r.measured(Collector::Readiness, |_| ());
    // What one replica's status page gave: nothing yet, until its first sample.
    let unsampled = |name: &str| -> Measured<u64> {
        match &served {
            Measured::Absent(a) => Measured::Absent(a.clone()),
            _ => Measured::Absent(Absent {
                collector: Collector::StatusPages,
                why: own_why(&served, name)
                    .unwrap_or_else(|| format!("no status-page sample of {name} was recorded")),
            }),
        }
    };
    let new = |name: &str| ReplicaLife {
        name: name.to_string(),
        started: None,
        stopped: None,
        requests: unsampled(name),
        probes: probed.as_ref().map(|_| Probes::default()),
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
    if served.is_sampled() {
        for s in &r.stub_samples {
            let l = by
                .entry(s.replica.clone())
                .or_insert_with(|| new(&s.replica));
            let n = l
                .requests
                .value()
                .map_or(s.requests, |n| (*n).max(s.requests));
            l.requests = match own_why(&served, &s.replica) {
                // Some of its samples failed: its count is what the others showed.
                Some(why) => Measured::Partial(
                    n,
                    Partial {
                        collector: Collector::StatusPages,
                        shortfall: Shortfall::new(
                            "replicas",
                            1,
                            vec![MissingItem {
                                item: s.replica.clone(),
                                why,
                            }],
                        ),
                    },
                ),
                None => Measured::Complete(n),
            };
        }
    }
    if probed.is_sampled() {
        let mut last_ok: BTreeMap<&str, bool> = BTreeMap::new();
        for p in &r.readiness {
            let l = by
                .entry(p.replica.clone())
                .or_insert_with(|| new(&p.replica));
            let (Measured::Complete(probes) | Measured::Partial(probes, _)) = &mut l.probes else {
                continue;
            };
            probes.made += 1;
            if let (true, Some(ms)) = (p.ok, p.answered_ms()) {
                probes.slowest_ms = Some(probes.slowest_ms.map_or(ms, |s| s.max(ms)));
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

/// Why the status pages missed replica `name`, wholly or in part, as the run recorded it.
fn own_why(served: &Measured<()>, name: &str) -> Option<String> {
    match served {
        Measured::Partial((), p) => p
            .shortfall
            .missing
            .iter()
            .find(|m| m.item == name)
            .map(|m| m.why.clone()),
        _ => None,
    }
}

/// Requests served by every replica, with the replicas whose status pages gave no count (or
/// part of one) as the shortfall, or why the status pages were not sampled.
pub fn served(lives: &[ReplicaLife]) -> Measured<u64> {
    over_items(
        "replicas",
        lives.iter().map(|l| (l.name.clone(), l.requests.clone())),
    )
    .map(|v| v.iter().sum())
}

/// Readiness flaps under load over every replica, and the slowest answered probe, or why the
/// probes were not sampled. `None` inside when no probe was made.
pub fn flaps(lives: &[ReplicaLife]) -> Measured<Option<(u64, Option<f64>)>> {
    all_measured(lives.iter().map(|l| l.probes.clone())).map(|probes| {
        let made: u64 = probes.iter().map(|p| p.made).sum();
        (made > 0).then(|| {
            (
                probes.iter().map(|p| p.flaps).sum(),
                probes
                    .iter()
                    .filter_map(|p| p.slowest_ms)
                    .fold(None, |a: Option<f64>, s| Some(a.map_or(s, |x| x.max(s)))),
            )
        })
    })
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
                    // A replica without a count has no share; one with a count has its share of
                    // what the pages counted, with that total's coverage.
                    Cell::measured(&l.requests.as_ref().zip(total.clone()), |(n, total)| {
                        if *total > 0 {
                            Cell::Pct {
                                value: **n as f64 / *total as f64,
                                decimals: 1,
                            }
                        } else {
                            Cell::dash()
                        }
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
