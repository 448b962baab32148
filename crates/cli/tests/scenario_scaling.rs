//! End-to-end test of the built-in `zero-downtime-scaling` scenario in its quick form: real nginx
//! replicas sharing a port, real backends, the `scaling` analysis. Asserts the structure the
//! report promises and the mechanism (counts that must agree, losses that must be zero or
//! bounded), never exact failure counts or speeds.

use model::{CaseResult, ErrorKind, LoadMode};
mod common;

use common::{case, run_quick, run_quick_as, Quick};
use std::fs;

const CASES: [&str; 9] = [
    "gradual-up",
    "gradual-down",
    "abrupt-up",
    "abrupt-down",
    "abrupt-down-kill",
    "backends-drain",
    "backends-kill",
    "reload-keepalive",
    "h2-reload-down",
];

fn has_table(c: &CaseResult, suffix: &str) -> bool {
    c.tables.iter().any(|t| t.title.ends_with(suffix))
}

/// Attempts that failed below HTTP other than timeouts, over every load of the case.
fn broken(c: &CaseResult) -> u64 {
    c.loads
        .iter()
        .flat_map(|l| l.errors.iter())
        .filter(|(k, _)| **k != ErrorKind::Timeout)
        .map(|(_, n)| n)
        .sum()
}

fn responses(c: &CaseResult) -> u64 {
    c.loads.iter().map(|l| l.requests).sum()
}

fn answered_by_nginx(c: &CaseResult) -> u64 {
    c.logs.access_lines - c.logs.access_status.get(&499).copied().unwrap_or(0)
}

fn timeouts(c: &CaseResult) -> u64 {
    c.loads
        .iter()
        .map(|l| l.errors.get(&ErrorKind::Timeout).copied().unwrap_or(0))
        .sum()
}

/// How many checks each case of the quick form makes: the scenario's own and the analysis's
/// mechanism checks for the case's actions (a check that silently stopped being made fails here).
const CHECKS_PER_CASE: &[(&str, usize)] = &[
    ("gradual-up", 4),
    ("gradual-down", 5),
    ("abrupt-up", 4),
    ("abrupt-down", 5),
    ("abrupt-down-kill", 5),
    ("backends-drain", 8),
    ("backends-kill", 7),
    ("reload-keepalive", 10),
    ("h2-reload-down", 10),
];

#[test]
fn zero_downtime_scaling_quick() {
    let tmp = tempfile::tempdir().unwrap();
    let Quick { r, dir, code, text } = run_quick("zero-downtime-scaling", tmp.path());
    assert_eq!(code, Some(0), "every check must pass\n{text}");
    assert!(r.quick && !r.partial, "{:?}", r.abort_reason);
    let names: Vec<&str> = r.cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, CASES);
    assert!(r.checks.iter().all(|c| c.pass));

    for c in &r.cases {
        // Two closed-loop loads, HTTP and HTTPS, as the write-ups ran wrk.
        for (name, scheme) in [("coffee", "http://"), ("tea", "https://")] {
            let l = c.loads.iter().find(|l| l.name == name).unwrap();
            assert!(l.url.starts_with(scheme), "{}: {}", c.name, l.url);
            assert_eq!(l.mode, LoadMode::Closed);
            assert!(l.requests > 0, "{}/{name} got no answer", c.name);
        }
        for t in [
            "what each action cost",
            "every request counted three ways",
            "replicas under load",
        ] {
            assert!(has_table(c, t), "{}: no table '{t}'", c.name);
        }
        // The books balance: one access-log line per answer a client received (a kill may
        // tear up to one per connection per killed replica).
        let slack = timeouts(c)
            + if c.name.ends_with("-kill") && c.name.starts_with("abrupt") {
                8
            } else {
                0
            };
        let (a, b) = (answered_by_nginx(c), responses(c));
        assert!(
            a.abs_diff(b) <= slack,
            "{}: nginx {a} vs clients {b}",
            c.name
        );
        // Every case has disruption windows for both loads, one per action.
        assert_eq!(
            c.disruptions.len(),
            c.events.len() * c.loads.len(),
            "{}",
            c.name
        );
        let own: Vec<_> = r
            .checks
            .iter()
            .filter(|k| k.case.as_deref() == Some(&c.name))
            .collect();
        let want = CHECKS_PER_CASE
            .iter()
            .find(|(n, _)| *n == c.name)
            .map(|(_, k)| *k);
        assert_eq!(
            Some(own.len()),
            want,
            "{}: {:#?}",
            c.name,
            own.iter().map(|k| &k.name).collect::<Vec<_>>()
        );
    }

    // Scaling up: the events fired as planned and no connection broke.
    for (name, events) in [("gradual-up", 2), ("abrupt-up", 1)] {
        let c = case(&r, name);
        assert_eq!(c.events.len(), events, "{name}");
        assert!(c
            .events
            .iter()
            .all(|e| e.action == "scale_replicas" && e.error.is_none()));
        assert_eq!(broken(c), 0, "{name}: a replica joining broke a connection");
        assert!(c.series.iter().any(|s| s.name == "replicas serving"));
    }
    // Graceful scale-down: nothing dies inside nginx, so backends and access log agree exactly.
    for name in ["gradual-down", "abrupt-down"] {
        let c = case(&r, name);
        let backends: u64 = c.backends.iter().map(|b| b.requests).sum();
        assert_eq!(backends, c.logs.access_lines, "{name}");
        assert!(broken(c) <= 2 * 4 * 2, "{name}: {} losses", broken(c));
    }
    // SIGKILL: losses are bounded by 2 per connection per killed replica.
    let kill = case(&r, "abrupt-down-kill");
    assert!(kill.events[0].detail.contains("kill"), "{:?}", kill.events);
    assert!(broken(kill) <= 2 * 4 * 2);

    // Backends: drained ones leave no trace in nginx's error log; killed ones do, and nginx
    // passes those GETs to a live backend.
    let drain = case(&r, "backends-drain");
    let killb = case(&r, "backends-kill");
    assert_eq!(drain.logs.error_levels.values().sum::<u64>(), 0);
    assert!(killb.logs.error_levels.values().sum::<u64>() >= 1);
    for c in [drain, killb] {
        assert!(c
            .series
            .iter()
            .any(|s| s.name == "backends in the upstream"));
        assert!(!c.reloads.is_empty() && c.reloads.iter().all(|x| x.error.is_none()));
        let five: u64 = c
            .loads
            .iter()
            .flat_map(|l| l.status.iter())
            .filter(|(s, _)| **s >= 500)
            .map(|(_, n)| n)
            .sum();
        assert_eq!(five, 0, "{}", c.name);
    }

    // NGF issue 1147: busy keep-alive connections lose requests at reloads, idle ones do not.
    let rk = case(&r, "reload-keepalive");
    assert!(has_table(rk, "reloads and keep-alive connections"));
    assert_eq!(rk.reloads.len(), 5);
    let idle_closed = |name: &str| {
        let l = rk.loads.iter().find(|l| l.name == name).unwrap();
        l.errors
            .get(&ErrorKind::ReadIdleClosed)
            .copied()
            .unwrap_or(0)
    };
    assert!(idle_closed("coffee") + idle_closed("tea") >= 1);
    assert!(idle_closed("coffee") <= 20 * 5 && idle_closed("tea") <= 10 * 5);
    let idle = rk.loads.iter().find(|l| l.name == "idle").unwrap();
    assert!(matches!(idle.mode, LoadMode::Open { .. }));
    // Per connection and reload, an idle connection loses no more than a busy one.
    let busy_rate = (idle_closed("coffee") + idle_closed("tea")) as f64 / (30.0 * 5.0);
    let idle_rate = idle.error_total() as f64 / (100.0 * 5.0);
    assert!(
        idle_rate <= busy_rate,
        "idle {idle_rate} vs busy {busy_rate}"
    );
    // Busy-connection losses left when the old workers quit, not at SIGHUP.
    let check = r
        .checks
        .iter()
        .find(|k| k.case.as_deref() == Some("reload-keepalive") && k.name.contains("told to quit"))
        .expect("the reload timing check");
    assert!(check.pass, "{check:?}");

    // HTTP/2: reloads and a graceful scale-down under h2c load send GOAWAYs; the streams they
    // refused are the load's only failures, and no request is lost or counted twice (the books
    // balance above, over the h2 load too).
    let h2c = case(&r, "h2-reload-down");
    let l = h2c.loads.iter().find(|l| l.name == "h2").unwrap();
    assert!(l.url.starts_with("http://"), "{}", l.url);
    let h = l.http2.as_ref().expect("the h2 load's HTTP/2 stats");
    assert_eq!(h.streams_per_connection, 10);
    assert!(h.goaways_graceful >= 1, "{h:?}");
    assert_eq!(h.goaways_error, 0, "{h:?}");
    assert_eq!(l.failures(), h.refused, "{:?} / {h:?}", l.errors);
    assert_eq!(h2c.reloads.len(), 9, "three reloads of three replicas");
    assert!(h2c.findings.iter().any(|f| f.contains("GOAWAY")));
    let check = r
        .checks
        .iter()
        .find(|k| k.case.as_deref() == Some("h2-reload-down") && k.name.starts_with("h2 (HTTP/2)"))
        .expect("the h2 refused-streams check");
    assert!(check.pass, "{check:?}");

    // The cross-case summary sits on the last case, one row per case.
    let last = r.cases.last().unwrap();
    let summary = last
        .tables
        .iter()
        .find(|t| t.title.starts_with("All cases"))
        .expect("summary table");
    assert_eq!(summary.rows.len(), CASES.len());
    assert_eq!(summary.columns.len(), 7);
    assert!(!r.findings.is_empty());
    let report = fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("zero-downtime scaling at a glance"));
    // wrk's block per protocol, as the write-ups show it.
    assert!(report.contains("2 threads and 2 connections"));

    // The mutation smoke: checks that held on this run fail once their subject is broken.
    // A reset that no action caused, 10 ms into the reload case, before its first reload.
    let m = common::mutated(&dir, |(rec, reqs)| {
        let c = rec
            .run
            .cases
            .iter_mut()
            .find(|c| c.name == "reload-keepalive")
            .unwrap();
        // Times count from the case's start; its first reload comes at 1 s.
        assert!(c.events[0].t_s > 0.5, "{:?}", c.events[0]);
        let load = &mut c.loads[0];
        *load.errors.entry(ErrorKind::ReadReset).or_default() += 1;
        let recs = reqs
            .get_mut("reload-keepalive")
            .unwrap()
            .get_mut(&load.name)
            .unwrap();
        recs.push(model::RequestRecord {
            t_us: 10_000,
            latency_us: 100,
            conn: u32::MAX,
            bytes: 0,
            status: 0,
            error: Some(ErrorKind::ReadReset),
        });
        recs.sort_by_key(|r| r.t_us);
    });
    let k = common::check(&m, "reload-keepalive", "every failure falls inside");
    assert!(!k.pass && k.actual.starts_with("1 of"), "{k:?}");
    // A backend answer that died inside the proxy with no client left unanswered for it.
    let m = common::mutated(&dir, |(rec, _)| {
        let c = rec
            .run
            .cases
            .iter_mut()
            .find(|c| c.name == "abrupt-down-kill")
            .unwrap();
        let broken: u64 = c.loads.iter().map(|l| l.error_total()).sum();
        // Far more than every client attempt that went unanswered.
        c.backends[0].requests += broken + 1_000_000;
    });
    let k = common::check(&m, "abrupt-down-kill", "every backend answer that died");
    assert!(!k.pass, "{k:?}");
    // Without the proxy's logs, the checks that count them are not measurable, never passed.
    let m = common::mutated(&dir, |(rec, _)| {
        for c in &mut rec.run.cases {
            c.logs.missing = Some("deleted for the test".into());
        }
    });
    let k = common::check(&m, "gradual-up", "every answer is counted twice");
    assert!(!k.pass && k.actual.starts_with("not measurable"), "{k:?}");
}

/// The same scenario on HAProxy and Caddy (`--proxy KIND`): every case runs end to end with its
/// report, the replicas are the kind's, every reload is timed to the new generation serving, and
/// a replica joining breaks nothing. HAProxy loses nothing anywhere, so every check passes. Caddy
/// loses a few answers at each reload (Go's server shutdown closes connections whose next
/// request was already read: the access log counts answers clients never got), and only the
/// checks that count answers may say so.
#[test]
fn zero_downtime_scaling_quick_on_other_proxies() {
    for kind in ["haproxy", "caddy"] {
        let tmp = tempfile::tempdir().unwrap();
        let Quick { r, dir, code, text } = run_quick_as("zero-downtime-scaling", kind, tmp.path());
        assert!(
            r.quick && !r.partial,
            "{kind}: {:?}\n{text}",
            r.abort_reason
        );
        assert_eq!(r.env.proxy_kind.as_deref(), Some(kind));
        let names: Vec<&str> = r.cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, CASES, "{kind}");
        assert!(dir.join("report.md").is_file() && dir.join("data.json").is_file());
        for c in &r.cases {
            assert!(
                c.proc_samples
                    .iter()
                    .any(|p| p.group.starts_with(&format!("{kind}-"))),
                "{kind}/{}: no sample of the kind's replicas",
                c.name
            );
            assert!(c.logs.missing.is_none(), "{kind}/{}", c.name);
            for x in &c.reloads {
                assert!(
                    x.error.is_none() && x.served_ms.is_some(),
                    "{kind}/{}: {x:?}",
                    c.name
                );
            }
        }
        for name in ["gradual-up", "abrupt-up"] {
            assert_eq!(broken(case(&r, name)), 0, "{kind}/{name}");
        }
        let failed: Vec<_> = r.checks.iter().filter(|c| !c.pass).collect();
        if kind == "haproxy" {
            assert_eq!(code, Some(0), "{kind}: every check must pass\n{text}");
        } else {
            // Only the two log-counting checks may fail on Caddy, and the exit status says
            // whether any did.
            assert!(
                failed
                    .iter()
                    .all(|c| c.name.starts_with("every answer is counted twice")
                        || c.name.starts_with("nothing dies inside the proxy")),
                "{kind}: {failed:#?}"
            );
            let want = if failed.is_empty() { 0 } else { 1 };
            assert_eq!(code, Some(want), "{kind}: {} failed\n{text}", failed.len());
        }
    }
}
