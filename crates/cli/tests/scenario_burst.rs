//! The built-in `burst-handling` scenario in its quick form, through the binary, against a real
//! nginx with `limit_req`: every check (including the burst analysis' theory checks) passes, and
//! data.json holds the nine cases with their tables, queue-depth series and counts that the
//! leaky-bucket algorithm fixes by construction.

use model::CaseResult;
mod common;

use common::{case, run_quick, Quick};
use std::fs;

/// The cases, in the order they run.
const CASES: [&str; 9] = [
    "2rps",
    "3rps-even",
    "3rps-poisson",
    "9rps-burst0-even",
    "9rps-burst0-poisson",
    "9rps-burst100",
    "9rps-burst300",
    "9rps-burst400",
    "9rps-burst400-120s",
];

/// (requests, 2xx, 503) of the case's attack load.
fn counts(c: &CaseResult) -> (u64, u64, u64) {
    let l = &c.loads[0];
    let ok = l
        .status
        .iter()
        .filter(|(s, _)| (200..300).contains(*s))
        .map(|(_, n)| n)
        .sum();
    (
        l.requests,
        ok,
        l.status.get(&503).copied().unwrap_or_default(),
    )
}

fn within(v: u64, want: u64, tol: u64) -> bool {
    v.abs_diff(want) <= tol
}

#[test]
fn burst_handling_quick_passes_its_theory() {
    let tmp = tempfile::tempdir().unwrap();
    let Quick {
        mut r,
        mut dir,
        mut code,
        mut text,
    } = run_quick("burst-handling", &tmp.path().join("first"));
    if !r.checks_passed() {
        // The quick form compresses the attacks' time tenfold to twentyfold, so a stall of this
        // shared 2-core machine weighs ten to twenty times what it would in the full form (a
        // 150 ms scheduling stall is a 1.5 s outage there). A real model or engine fault fails
        // every time; a stall does not repeat in the same place. So one rerun, with the first
        // attempt's failures on record.
        for k in r.checks.iter().filter(|k| !k.pass) {
            eprintln!(
                "first attempt failed: [{}] {} (expected {}, actual {})",
                k.case.as_deref().unwrap_or("-"),
                k.name,
                k.expected,
                k.actual
            );
        }
        Quick { r, dir, code, text } = run_quick("burst-handling", &tmp.path().join("second"));
    }
    assert_eq!(code, Some(0), "{text}");
    assert!(r.checks_passed(), "{text}");
    assert!(r.quick && !r.partial, "{:?}", r.abort_reason);
    let names: Vec<&str> = r.cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, CASES);

    for c in &r.cases {
        // Every case carries vegeta's block, the model table and two queue-depth series.
        let titles: Vec<&str> = c.tables.iter().map(|t| t.title.as_str()).collect();
        assert!(
            titles
                .iter()
                .any(|t| t.ends_with("report (vegeta's block)")),
            "{}: {titles:?}",
            c.name
        );
        assert!(
            titles
                .iter()
                .any(|t| t.ends_with("limit_req model vs measured")),
            "{}: {titles:?}",
            c.name
        );
        assert_eq!(c.series.len(), 2, "{}", c.name);
        assert!(c.series.iter().all(|s| s.points.len() > 10), "{}", c.name);
        // The theory checks ran for the case.
        let mine: Vec<&str> = r
            .checks
            .iter()
            .filter(|k| k.case.as_deref() == Some(c.name.as_str()))
            .map(|k| k.name.as_str())
            .collect();
        assert!(
            mine.iter()
                .any(|n| n.starts_with("accepted count within the limit_req model")),
            "{}: {mine:?}",
            c.name
        );
        // nginx's own view agrees with the client's, request for request.
        let (n, ok, limited) = counts(c);
        let l = &c.logs.limit_req_status;
        let nginx_ok = l.get("PASSED").unwrap_or(&0) + l.get("DELAYED").unwrap_or(&0);
        assert_eq!((nginx_ok, *l.get("REJECTED").unwrap_or(&0)), (ok, limited));
        assert_eq!(ok + limited, n, "{}: only 2xx and 503", c.name);
        assert_eq!(c.loads[0].error_total(), 0, "{}", c.name);
    }

    // Counts the algorithm fixes, identical in the quick form (rates x10 or x20, time /10 or /20).
    // A send that left late (the schedule counts them) can change one decision, and a stall of
    // nginx's worker up to 100 ms can change a few more.
    let late = |c: &CaseResult| c.loads[0].schedule.as_ref().map_or(0, |s| s.late);
    let c = case(&r, "2rps");
    let (n, ok, _) = counts(c);
    assert_eq!(n, 120);
    assert!(
        ok + late(c) + 2 >= n,
        "below the limit all pass: {ok} of {n}"
    );
    // At the limit, evenly paced: between every arrival and every other one passes; the tick
    // makes it 2 in 3 held still and 3 in 5 jittered, never the 100% of an unlimited `return`.
    let c = case(&r, "3rps-even");
    let (n, ok, _) = counts(c);
    assert_eq!(n, 180);
    assert!(
        ok + late(c) + 3 >= 90 && ok <= 120 + late(c) + 3,
        "3rps-even: {ok} of {n}"
    );
    // 3x the limit, burst 0: every 3rd or 4th arrival (135..180 of 540).
    let c = case(&r, "9rps-burst0-even");
    let (n, ok, _) = counts(c);
    assert_eq!(n, 540);
    assert!(
        ok + late(c) + 4 >= 135 && ok <= 180 + late(c) + 4,
        "9rps-burst0-even: {ok}"
    );
    // Poisson at 3x: 1/(1 + 3 x 0.334) of the arrivals' 1/3 share, about 25%.
    let (n, ok, _) = counts(case(&r, "9rps-burst0-poisson"));
    let ratio = ok as f64 / n as f64;
    assert!(
        (0.18..0.32).contains(&ratio),
        "9rps-burst0-poisson: {ok} of {n}"
    );
    // Burst queues: accepted = limit periods of the attack + burst until the burst covers it.
    for (name, want) in [("9rps-burst100", 280), ("9rps-burst300", 480)] {
        let (n, ok, _) = counts(case(&r, name));
        assert_eq!(n, 540);
        assert!(within(ok, want, 8), "{name}: {ok}");
    }
    let (n, ok, limited) = counts(case(&r, "9rps-burst400"));
    assert_eq!((n, ok, limited), (540, 540, 0));
    let (n, ok, _) = counts(case(&r, "9rps-burst400-120s"));
    assert_eq!(n, 1080);
    assert!(within(ok, 760, 12), "9rps-burst400-120s: {ok}");

    // The queue really filled: the deepest measured queue of burst 400 is the 360 the attack's
    // excess leaves, and the 120 s case tops out at the burst.
    let peak = |c: &CaseResult| {
        c.series[0]
            .points
            .iter()
            .map(|p| p.1)
            .fold(0.0_f64, f64::max)
    };
    let p = peak(case(&r, "9rps-burst400"));
    assert!((340.0..=370.0).contains(&p), "{p}");
    let p = peak(case(&r, "9rps-burst400-120s"));
    assert!((390.0..=410.0).contains(&p), "{p}");

    // The cross-case summary sits in the last case, one row per case.
    let last = r.cases.last().unwrap();
    let summary = last
        .tables
        .iter()
        .find(|t| t.title.starts_with("All cases"))
        .expect("the cross-case table");
    assert_eq!(summary.rows.len(), CASES.len());
    let report = fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("All cases: burst handling at a glance"));
    assert!(report.contains("queue depth measured"));
}
