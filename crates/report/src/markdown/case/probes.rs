//! Probed actions and growth steps in a case's section: when each replica first, and then
//! steadily, answered with the new config, and the resolution of those times.

use crate::fmt::{self, count, Table};
use model::CaseResult;
use std::fmt::Write;

/// Probed actions (or growth steps) listed one per row up to this many; beyond, the first and
/// last half.
const PROBE_ROWS: usize = 60;
/// Each probed action gets a table of its replicas up to this many actions.
const PROBE_REPLICA_TABLES: usize = 8;

/// Nearest-rank percentile `p` (0..=100) of `v`; `None` when empty.
fn pct(v: &[f64], p: f64) -> Option<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v.get(rank.min(v.len()) - 1).copied()
}

/// `p50 / p99 / max` of `v` in ms, `-` when empty.
fn spread(v: &[f64]) -> String {
    match (pct(v, 50.0), pct(v, 99.0), pct(v, 100.0)) {
        (Some(a), Some(b), Some(c)) => format!("{} / {} / {}", fmt::f2(a), fmt::f2(b), fmt::f2(c)),
        _ => "-".into(),
    }
}

/// The resolution the probes had against the one asked for: a replica's requests are due
/// every `every`, each on a new connection, so where one request costs more than that (the
/// path through a port-forward, a loaded machine) requests overlap and the achieved interval
/// grows. Said in one sentence, with the request's own cost, when the mean achieved interval
/// is more than 10% over the asked one.
fn resolution(out: &mut String, c: &CaseResult) {
    let asked: Vec<&model::ProbeRecord> = c.probes.iter().filter(|r| r.every_us > 0.0).collect();
    let replicas: Vec<&model::ReplicaProbe> = asked
        .iter()
        .flat_map(|r| r.replicas.iter().filter(|x| x.requests > 1 && !x.unreached))
        .collect();
    if replicas.is_empty() {
        return;
    }
    let every = asked.iter().map(|r| r.every_us).fold(0.0, f64::max);
    let n = replicas.len() as f64;
    let interval = replicas.iter().map(|x| x.interval_us).sum::<f64>() / n;
    let request = replicas.iter().map(|x| x.request_us).sum::<f64>() / n;
    if interval > every * 1.1 {
        let _ = writeln!(
            out,
            "Resolution: asked every {:.0} µs, achieved {:.0} µs on average ({}): one request \
             (a new connection, the request, the answer) took {:.0} µs, so this path and \
             machine could not resolve finer.\n",
            every, interval, c.probes[0].path, request
        );
    } else {
        let _ = writeln!(
            out,
            "Resolution: asked every {:.0} µs, achieved {:.0} µs on average ({}).\n",
            every, interval, c.probes[0].path
        );
    }
}

/// Kubernetes: the probed actions and templated growth steps, each replica probed on its own:
/// per action the times over its replicas (p50 / p99 / max), the mixed window and the probe's
/// resolution; then each replica of the first few actions.
pub(super) fn probes(out: &mut String, c: &CaseResult) {
    if c.probes.is_empty() {
        return;
    }
    out.push_str(
        "### Data-plane probes

",
    );
    let _ = writeln!(
        out,
        "Each data-plane replica was probed on its own ({}), a new connection per request. \
         Times are in ms from the action's start: *first* is the first expected answer, \
         *stable* the last of `consecutive` expected answers in a row; the mixed window runs \
         from the first replica's first expected answer to the last one's. A replica that went \
         away before it was stable is counted as gone, not as a failure. A replica the probe \
         never reached (no request answered, or none could be sent) is counted as not reached: \
         the probe has no evidence of it, and the times of its action are of the others only.\n",
        c.probes[0].path
    );
    overall(out, c);
    let mut t = Table::new(&[
        ">Time (s)",
        "Action",
        "Detail",
        "Replicas",
        ">Condition (ms)",
        ">First p50 / p99 / max (ms)",
        ">Stable p50 / p99 / max (ms)",
        ">Mixed window (ms)",
        ">Interval (µs)",
        ">Request (µs)",
        "Error",
    ]);
    if c.probes.len() <= PROBE_ROWS {
        for r in &c.probes {
            probe_row(&mut t, r);
        }
    } else {
        let half = PROBE_ROWS / 2;
        for r in c.probes[..half]
            .iter()
            .chain(&c.probes[c.probes.len() - half..])
        {
            probe_row(&mut t, r);
        }
    }
    out.push_str(&t.render());
    out.push('\n');
    resolution(out, c);
    if c.probes.len() > PROBE_ROWS {
        let _ = writeln!(
            out,
            "{} probed actions; the first and last {} are listed (data.json has them all).\n",
            c.probes.len(),
            PROBE_ROWS / 2
        );
    }
    for r in c.probes.iter().take(PROBE_REPLICA_TABLES) {
        replica_table(out, r);
    }
    if c.probes.len() > PROBE_REPLICA_TABLES {
        let _ = writeln!(
            out,
            "The replicas of the first {PROBE_REPLICA_TABLES} probed actions are listed; \
             data.json (`probes`) has every replica of every action.\n"
        );
    }
}

/// With several probed actions, one line over all of them: first answer, stable and mixed
/// window, and how many replica probes reached nothing.
fn overall(out: &mut String, c: &CaseResult) {
    let all = |f: fn(&model::ReplicaProbe) -> Option<f64>| -> Vec<f64> {
        c.probes
            .iter()
            .flat_map(|r| r.replicas.iter().filter_map(f))
            .collect()
    };
    let mixed: Vec<f64> = c.probes.iter().filter_map(|r| r.mixed_ms).collect();
    if c.probes.len() > 1 {
        let not: usize = c
            .probes
            .iter()
            .filter_map(|r| r.shortfall())
            .map(|s| s.missing.len())
            .sum();
        let _ = writeln!(
            out,
            "Over all {} probed actions and their {} replica probes{}: first answer p50 / p99 / \
             max {} ms, stable {} ms, mixed window {} ms.\n",
            c.probes.len(),
            c.probes.iter().map(|r| r.replicas.len()).sum::<usize>(),
            if not > 0 {
                format!(" ({not} not reached: the times are of the replicas reached only)")
            } else {
                String::new()
            },
            spread(&all(|x| x.first_ms)),
            spread(&all(|x| x.stable_ms)),
            spread(&mixed)
        );
    }
}

/// One probed action's row: its times over the replicas it reached, with their coverage when
/// some were not, and the probe's own cost.
fn probe_row(t: &mut Table, r: &model::ProbeRecord) {
    let v = |f: fn(&model::ReplicaProbe) -> Option<f64>| -> Vec<f64> {
        r.replicas.iter().filter_map(f).collect()
    };
    // The probe's own cost over the replicas it reached.
    let reached: Vec<&model::ReplicaProbe> = r.replicas.iter().filter(|x| !x.unreached).collect();
    // The mean over the replicas reached, "-" when none was (not a cost of 0).
    let mean = |f: fn(&model::ReplicaProbe) -> f64| -> String {
        if reached.is_empty() {
            return "-".into();
        }
        let sum: f64 = reached.iter().map(|x| f(x)).sum();
        format!("{:.0}", sum / reached.len() as f64)
    };
    let short = r.shortfall();
    // A time over the replicas reached says so when some were not.
    let of = |cell: String| match &short {
        Some(s) if cell != "-" => format!("{cell} ({})", s.coverage()),
        _ => cell,
    };
    t.row([
        fmt::secs(r.t_s),
        r.action.clone(),
        r.detail.clone(),
        probe_replicas(r),
        r.condition_ms.map_or("-".into(), fmt::f2),
        of(spread(&v(|x| x.first_ms))),
        of(spread(&v(|x| x.stable_ms))),
        r.mixed_ms.map_or("-".into(), fmt::f2),
        of(mean(|x| x.interval_us)),
        of(mean(|x| x.request_us)),
        r.error.clone().unwrap_or_default(),
    ]);
}

/// Each replica of one probed action: its times, requests, cost and outcome.
fn replica_table(out: &mut String, r: &model::ProbeRecord) {
    let _ = writeln!(
        out,
        "{} at {} s, {} ({}):\n",
        r.action,
        fmt::secs(r.t_s),
        r.detail,
        r.request
    );
    let mut t = Table::new(&[
        "Pod",
        "Address",
        ">First (ms)",
        ">Ready (ms)",
        ">Stable (ms)",
        ">Requests",
        ">Interval (µs)",
        ">Request (µs)",
        "Outcome",
    ]);
    let opt = |v: Option<f64>| v.map_or("-".to_string(), fmt::f2);
    for x in &r.replicas {
        t.row([
            x.pod.clone(),
            x.addr.clone(),
            opt(x.first_ms),
            opt(x.ready_ms),
            opt(x.stable_ms),
            count(x.requests),
            format!("{:.0}", x.interval_us),
            format!("{:.0}", x.request_us),
            if x.gone {
                "gone".to_string()
            } else if x.unreached {
                let why = x.error.as_deref().unwrap_or("no answer");
                if why.starts_with("not reached") {
                    why.to_string()
                } else {
                    format!("not reached: {why}")
                }
            } else {
                x.error.clone().unwrap_or_else(|| "stable".into())
            },
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
}

/// One probed action's replicas in words: `3 of 3 stable`, `2 of 3 stable, 1 gone`, and the
/// replicas it never reached with why (`2 of 3 stable; 1 not reached: gw-c: connect: ...`),
/// never a count of the reached ones alone.
fn probe_replicas(r: &model::ProbeRecord) -> String {
    let stable = r.replicas.iter().filter(|x| x.stable_ms.is_some()).count();
    let gone = r.replicas.iter().filter(|x| x.gone).count();
    let mut s = format!("{stable} of {} stable", r.replicas.len());
    if gone > 0 {
        let _ = write!(s, ", {gone} gone");
    }
    if let Some(short) = r.shortfall() {
        let _ = write!(
            s,
            "; {} not reached: {}",
            short.missing.len(),
            short.detail()
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{ProbeRecord, ReplicaProbe};

    fn replica(pod: &str, first: f64, stable: f64, gone: bool) -> ReplicaProbe {
        ReplicaProbe {
            pod: pod.into(),
            addr: "198.18.0.10:8080".into(),
            first_ms: (!gone).then_some(first),
            ready_ms: (!gone).then_some(first),
            stable_ms: (!gone).then_some(stable),
            requests: 40,
            interval_us: 1000.0,
            request_us: 300.0,
            gone,
            error: None,
            unreached: false,
        }
    }

    /// A probed action's row gives p50 / p99 / max over its replicas (nearest rank), the
    /// replicas stable of all and gone, the condition and the mixed window; each replica gets
    /// its own row, a gone one said so.
    #[test]
    fn probes_are_summed_up_per_action_and_listed_per_replica() {
        let c = CaseResult {
            probes: vec![ProbeRecord {
                t_s: 2.5,
                action: "apply".into(),
                detail: "route.yaml".into(),
                request: "http://r7.example:8080/r7 -> 200".into(),
                path: "pod IP".into(),
                every_us: 1000.0,
                condition_ms: Some(12.5),
                replicas: vec![
                    replica("gw-a", 10.0, 14.0, false),
                    replica("gw-b", 30.0, 33.0, false),
                    replica("gw-c", 0.0, 0.0, true),
                ],
                mixed_ms: Some(20.0),
                error: None,
            }],
            ..CaseResult::default()
        };
        let mut out = String::new();
        probes(&mut out, &c);
        assert!(out.contains("### Data-plane probes"), "{out}");
        assert!(out.contains("(pod IP)"), "{out}");
        let row = out
            .lines()
            .find(|l| l.contains("route.yaml") && l.contains("2 of 3 stable, 1 gone"))
            .unwrap_or_else(|| panic!("{out}"));
        for want in [
            "12.50",
            "10.00 / 30.00 / 30.00",
            "14.00 / 33.00 / 33.00",
            "20.00",
        ] {
            assert!(row.contains(want), "{want}: {row}");
        }
        assert!(
            out.lines()
                .any(|l| l.contains("gw-c") && l.contains("gone")),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.contains("gw-b") && l.contains("30.00") && l.contains("stable")),
            "{out}"
        );
        assert!(
            out.contains("Resolution: asked every 1000 µs, achieved 1000 µs on average (pod IP)."),
            "{out}"
        );
        let mut none = String::new();
        probes(&mut none, &CaseResult::default());
        assert!(none.is_empty());
        assert_eq!(pct(&[3.0, 1.0, 2.0], 50.0), Some(2.0));
        assert_eq!(pct(&[], 50.0), None);
    }

    /// A replica the probe never reached: the row says "2 of 3 stable; 1 not reached" with
    /// why (never "2/2" of the two it reached), its times say what they cover, its own row says
    /// not reached, and the probe's cost is the reached replicas'.
    #[test]
    fn a_replica_not_reached_is_shown_as_such_and_the_times_as_partial() {
        let mut not = replica("gw-c", 0.0, 0.0, false);
        (not.first_ms, not.ready_ms, not.stable_ms) = (None, None, None);
        not.unreached = true;
        not.interval_us = 900_000.0;
        not.request_us = 1_000_000.0;
        not.error = Some(
            "not reached: none of 30 request(s) answered (last: connect: connection refused)"
                .into(),
        );
        let c = CaseResult {
            probes: vec![ProbeRecord {
                t_s: 2.5,
                action: "apply".into(),
                detail: "route.yaml".into(),
                request: "http://r7.example:8080/r7 -> 200".into(),
                path: "pod IP".into(),
                every_us: 1000.0,
                replicas: vec![
                    replica("gw-a", 10.0, 14.0, false),
                    replica("gw-b", 30.0, 33.0, false),
                    not,
                ],
                error: Some("not measurable: the probe reached 2 of 3 replicas (...)".into()),
                ..ProbeRecord::default()
            }],
            ..CaseResult::default()
        };
        let mut out = String::new();
        probes(&mut out, &c);
        let row = out
            .lines()
            .find(|l| l.contains("route.yaml") && l.contains("stable"))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(
            row.contains(
                "2 of 3 stable; 1 not reached: gw-c: not reached: none of 30 request(s) answered \
                 (last: connect: connection refused)"
            ),
            "{row}"
        );
        assert!(!row.contains("2/2") && !row.contains("2 of 2"), "{row}");
        assert!(
            row.contains("10.00 / 30.00 / 30.00 (2 of 3 replicas)"),
            "{row}"
        );
        // The probe's cost over the two reached: 1000 µs, 300 µs, with what it covers.
        assert!(
            row.contains("| 1000 (2 of 3 replicas) | 300 (2 of 3 replicas) |"),
            "{row}"
        );
        assert!(
            out.lines()
                .any(|l| l.contains("gw-c")
                    && l.contains("not reached: none of 30 request(s) answered")),
            "{out}"
        );
        assert!(
            out.contains("Resolution: asked every 1000 µs, achieved 1000 µs on average"),
            "{out}"
        );
    }

    /// A probe that reached no replica has no cost of its own to show: its interval and
    /// request cells read "-", not 0 µs.
    #[test]
    fn a_probe_that_reached_no_replica_shows_no_cost() {
        let mut not = replica("gw-a", 0.0, 0.0, false);
        (not.first_ms, not.ready_ms, not.stable_ms) = (None, None, None);
        not.unreached = true;
        let c = CaseResult {
            probes: vec![ProbeRecord {
                t_s: 1.0,
                action: "apply".into(),
                detail: "route.yaml".into(),
                request: "http://r7.example:8080/r7 -> 200".into(),
                path: "pod IP".into(),
                every_us: 1000.0,
                replicas: vec![not],
                error: Some("not measurable: the probe reached 0 of 1 replicas".into()),
                ..ProbeRecord::default()
            }],
            ..CaseResult::default()
        };
        let mut out = String::new();
        probes(&mut out, &c);
        let row = out
            .lines()
            .find(|l| l.contains("route.yaml") && l.contains("not reached"))
            .unwrap_or_else(|| panic!("{out}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert!(!cells.contains(&"0"), "no cost of 0 µs: {row}");
        assert!(cells.iter().filter(|c| **c == "-").count() >= 2, "{row}");
    }

    /// A resolution short of the one asked is said, with the request's own cost; a record
    /// from before `every_us` existed (0) says nothing of it.
    #[test]
    fn a_probe_resolution_short_of_the_one_asked_is_said() {
        let mut slow = replica("gw-a", 10.0, 14.0, false);
        slow.interval_us = 2400.0;
        slow.request_us = 1900.0;
        let mut r = ProbeRecord {
            t_s: 1.0,
            action: "grow".into(),
            detail: "route.yaml.j2 item 0".into(),
            request: "http://r0.example:8080/ -> 200".into(),
            path: "pod IP".into(),
            every_us: 1000.0,
            condition_ms: None,
            replicas: vec![slow],
            mixed_ms: None,
            error: None,
        };
        let mut out = String::new();
        resolution(
            &mut out,
            &CaseResult {
                probes: vec![r.clone()],
                ..CaseResult::default()
            },
        );
        assert_eq!(
            out.trim(),
            "Resolution: asked every 1000 µs, achieved 2400 µs on average (pod IP): one \
             request (a new connection, the request, the answer) took 1900 µs, so this path \
             and machine could not resolve finer."
        );
        r.every_us = 0.0;
        let mut old = String::new();
        resolution(
            &mut old,
            &CaseResult {
                probes: vec![r],
                ..CaseResult::default()
            },
        );
        assert!(old.is_empty(), "{old}");
    }
}
