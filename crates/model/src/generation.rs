//! A proxy replica's processes by config generation, sampled over a case: which generation was
//! alive when. A reload starts a new generation (nginx's new workers, HAProxy's new worker
//! process) and tells the old one to drain; the old one lives on as long as it holds
//! connections, up to the drain timeout. Long-lived connections are what keep it alive, so the
//! number of old generations still draining, and the memory they hold, is what a proxy pays to
//! keep those connections through reloads.
//!
//! The runner records raw samples ([`GenerationSample`]: every process of a replica but its
//! root, with when it started); [`draining`] and [`lives`] derive, against the case's reloads,
//! which processes were draining at each sample and each generation's life. A proxy that
//! reloads inside one process (Caddy) has no process per generation: its samples hold none, and
//! [`in_place`] says so, so that nothing reads its zero draining processes as a measurement.

use crate::ReloadRecord;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// How much earlier than its reload's signal a new generation's process may seem to start:
/// /proc gives start times in clock ticks (10 ms), truncated, and the two clocks are read a few
/// microseconds apart.
pub const START_SLACK_S: f64 = 0.05;

/// One sample of one proxy replica's processes, taken by the runner's collector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct GenerationSample {
    /// Seconds from the case origin.
    pub t_s: f64,
    /// The replica (`nginx-0`).
    pub replica: String,
    /// Every live process of the replica but its root (the master): the workers of every
    /// generation still running.
    pub procs: Vec<ProcGen>,
}

/// One process of a replica, as one sample saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ProcGen {
    /// Its pid.
    pub pid: u32,
    /// When it started, seconds from the case origin (negative: before the case's clock
    /// started), from the start time /proc/PID/stat gives: which generation it belongs to.
    pub started_s: f64,
    /// Its resident memory, bytes (shared pages counted in each process that maps them).
    pub rss_bytes: u64,
    /// Its title says it is shutting down (nginx names an old worker `worker process is
    /// shutting down`): the proxy's own word that it drains.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shutting_down: bool,
}

/// The old generations still alive at one moment, all replicas summed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Draining {
    /// Seconds from the case origin.
    pub t_s: f64,
    /// Old generations with a process still alive.
    pub generations: u32,
    /// Their processes.
    pub processes: u32,
    /// Their processes' summed resident memory, bytes.
    pub rss_bytes: u64,
}

/// The successful reloads of `replica`, in time order: each starts a generation.
fn reload_times(reloads: &[ReloadRecord], replica: &str) -> Vec<f64> {
    let mut t: Vec<f64> = reloads
        .iter()
        .filter(|r| r.replica == replica && r.error.is_none() && r.served_ms.is_some())
        .map(|r| r.t_s)
        .collect();
    t.sort_by(f64::total_cmp);
    t
}

/// The generation a process started at `started_s` belongs to: how many reloads came before
/// it (0: the one the replica started with).
pub fn generation_of(started_s: f64, reloads: &[f64]) -> usize {
    reloads
        .iter()
        .filter(|&&t| t <= started_s + START_SLACK_S)
        .count()
}

/// The generation serving at `t_s`.
fn current_at(t_s: f64, reloads: &[f64]) -> usize {
    reloads.iter().filter(|&&t| t <= t_s).count()
}

/// True when `p`, seen at `t_s`, belongs to a generation a later reload superseded (or says
/// it is shutting down).
fn is_draining(p: &ProcGen, t_s: f64, reloads: &[f64]) -> bool {
    p.shutting_down || generation_of(p.started_s, reloads) < current_at(t_s, reloads)
}

/// The old generations alive at each sampling moment (the samples of one collector pass share
/// their `t_s`), all replicas summed.
pub fn draining(samples: &[GenerationSample], reloads: &[ReloadRecord]) -> Vec<Draining> {
    let mut times: BTreeMap<RoundedTime, Draining> = BTreeMap::new();
    let mut by_replica: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for s in samples {
        let rel = by_replica
            .entry(&s.replica)
            .or_insert_with(|| reload_times(reloads, &s.replica));
        let point = times.entry(RoundedTime::of(s.t_s)).or_insert(Draining {
            t_s: s.t_s,
            ..Draining::default()
        });
        let mut gens = BTreeSet::new();
        for p in s.procs.iter().filter(|p| is_draining(p, s.t_s, rel)) {
            gens.insert(generation_of(p.started_s, rel));
            point.processes += 1;
            point.rss_bytes += p.rss_bytes;
        }
        point.generations += gens.len() as u32;
    }
    times.into_values().collect()
}

/// A sample time to the millisecond, to group one pass's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct RoundedTime(i64);

impl RoundedTime {
    fn of(t_s: f64) -> RoundedTime {
        RoundedTime((t_s * 1e3).round() as i64)
    }
}

/// The replicas whose samples never showed a process besides the root although they reloaded:
/// they reload inside one process (Caddy), so their generations cannot be told apart in /proc.
pub fn in_place(samples: &[GenerationSample], reloads: &[ReloadRecord]) -> Vec<String> {
    let mut seen: BTreeMap<&str, bool> = BTreeMap::new();
    for s in samples {
        *seen.entry(&s.replica).or_default() |= !s.procs.is_empty();
    }
    seen.into_iter()
        .filter(|(r, any)| !any && !reload_times(reloads, r).is_empty())
        .map(|(r, _)| r.to_string())
        .collect()
}

/// One generation of one replica over the case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct GenerationLife {
    /// The replica.
    pub replica: String,
    /// Its index: 0 for the one the replica started with, then one per successful reload.
    pub generation: u32,
    /// When it started serving, seconds from the case origin (the reload that made it; the
    /// replica's first sample for generation 0).
    pub from_s: f64,
    /// When a reload superseded it and it began to drain (`None`: it served to the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draining_from_s: Option<f64>,
    /// When its last process had exited, from the reload's own watch of the old processes
    /// (exact to a few ms) or, when that has no time, the first sample without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exited_s: Option<f64>,
    /// The most of its processes seen at once.
    pub processes_max: u32,
    /// The most resident memory its processes held at once, bytes.
    pub rss_max: u64,
}

/// Every generation of every sampled replica, with its life: when it served, when it began to
/// drain, when it was gone, and the most it held.
pub fn lives(samples: &[GenerationSample], reloads: &[ReloadRecord]) -> Vec<GenerationLife> {
    let mut replicas: BTreeMap<&str, Vec<&GenerationSample>> = BTreeMap::new();
    for s in samples {
        replicas.entry(&s.replica).or_default().push(s);
    }
    let mut out = Vec::new();
    for (replica, mut ss) in replicas {
        ss.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        let rel = reload_times(reloads, replica);
        let first = ss.first().map_or(0.0, |s| s.t_s);
        for g in 0..=rel.len() {
            let mut life = GenerationLife {
                replica: replica.to_string(),
                generation: g as u32,
                from_s: if g == 0 { first } else { rel[g - 1] },
                draining_from_s: rel.get(g).copied(),
                ..GenerationLife::default()
            };
            let mut last_alive: Option<f64> = None;
            let mut gone_at: Option<f64> = None;
            for s in &ss {
                let mine: Vec<&ProcGen> = s
                    .procs
                    .iter()
                    .filter(|p| generation_of(p.started_s, &rel) == g)
                    .collect();
                if mine.is_empty() {
                    if last_alive.is_some() && gone_at.is_none() {
                        gone_at = Some(s.t_s);
                    }
                    continue;
                }
                last_alive = Some(s.t_s);
                gone_at = None;
                life.processes_max = life.processes_max.max(mine.len() as u32);
                life.rss_max = life.rss_max.max(mine.iter().map(|p| p.rss_bytes).sum());
            }
            // The reload that superseded it watched the processes it found exit: its own and
            // any older generation's still draining, so the watch's time is the last of them.
            // A sample without this generation's processes before that time is the earlier end.
            let watched = rel.get(g).and_then(|&t| {
                reloads
                    .iter()
                    .find(|r| r.replica == replica && r.t_s == t)
                    .and_then(|r| r.old_workers_exited_ms)
                    .map(|ms| t + ms / 1e3)
            });
            life.exited_s = match (life.draining_from_s, watched, gone_at) {
                (None, _, _) => None,
                (Some(_), Some(w), Some(s)) => Some(w.min(s)),
                (Some(_), Some(w), None) => Some(w),
                (Some(_), None, s) => s,
            };
            out.push(life);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reload(t_s: f64, exited_ms: Option<f64>) -> ReloadRecord {
        ReloadRecord {
            replica: "nginx-0".into(),
            generation: 2,
            t_s,
            served_ms: Some(5.0),
            command_ms: None,
            old_workers_exited_ms: exited_ms,
            validate_ms: 1.0,
            error: None,
        }
    }

    fn proc(pid: u32, started_s: f64, mib: u64) -> ProcGen {
        ProcGen {
            pid,
            started_s,
            rss_bytes: mib << 20,
            shutting_down: false,
        }
    }

    fn sample(t_s: f64, procs: Vec<ProcGen>) -> GenerationSample {
        GenerationSample {
            t_s,
            replica: "nginx-0".into(),
            procs,
        }
    }

    /// Two reloads 4 s apart; each old worker lives 3 s past the reload that superseded it.
    #[test]
    fn old_workers_are_counted_draining_until_they_exit() {
        let reloads = [reload(4.0, Some(3000.0)), reload(8.0, None)];
        let samples = vec![
            sample(1.0, vec![proc(10, -0.5, 10)]),
            sample(5.0, vec![proc(10, -0.5, 10), proc(11, 4.005, 12)]),
            sample(7.5, vec![proc(11, 4.005, 12)]),
            sample(9.0, vec![proc(11, 4.005, 12), proc(12, 8.01, 12)]),
            sample(12.0, vec![proc(12, 8.01, 12)]),
        ];
        let d = draining(&samples, &reloads);
        let got: Vec<(u32, u32, u64)> = d
            .iter()
            .map(|p| (p.generations, p.processes, p.rss_bytes >> 20))
            .collect();
        assert_eq!(
            got,
            [(0, 0, 0), (1, 1, 10), (0, 0, 0), (1, 1, 12), (0, 0, 0)]
        );
        let l = lives(&samples, &reloads);
        assert_eq!(l.len(), 3);
        assert_eq!(
            (l[0].from_s, l[0].draining_from_s, l[0].exited_s),
            (1.0, Some(4.0), Some(7.0)),
            "the reload's own watch times the exit"
        );
        assert_eq!(
            (l[1].draining_from_s, l[1].exited_s),
            (Some(8.0), Some(12.0)),
            "without it, the first sample without the process"
        );
        assert_eq!((l[2].draining_from_s, l[2].exited_s), (None, None));
        assert_eq!(l[1].rss_max >> 20, 12);
        assert!(in_place(&samples, &reloads).is_empty());
    }

    #[test]
    fn a_title_that_says_shutting_down_is_draining_and_a_failed_reload_starts_nothing() {
        let mut failed = reload(4.0, None);
        failed.error = Some("nginx -t failed".into());
        failed.served_ms = None;
        let mut p = proc(10, -1.0, 5);
        let samples = vec![sample(5.0, vec![p.clone()])];
        assert_eq!(draining(&samples, &[failed.clone()])[0].processes, 0);
        p.shutting_down = true;
        let samples = vec![sample(5.0, vec![p])];
        assert_eq!(draining(&samples, &[failed])[0].processes, 1);
    }

    #[test]
    fn a_replica_that_never_shows_a_worker_reloads_in_place() {
        let samples = vec![sample(1.0, vec![]), sample(6.0, vec![])];
        assert_eq!(in_place(&samples, &[reload(4.0, None)]), ["nginx-0"]);
        assert!(
            in_place(&samples, &[]).is_empty(),
            "no reload, nothing to say"
        );
    }
}
