//! The built-in `load-balancing` scenario in its quick form, through the binary, against a real
//! nginx: every check (including the balance analysis' theory checks) passes, and data.json
//! holds the six cases, their tables, and shares that must hold by construction.

use model::CaseResult;
mod common;

use common::{case, run_quick, Quick};
use std::fs;

/// Share of the backend counters' responses served by backend `name`.
fn share(c: &CaseResult, name: &str) -> f64 {
    let total: u64 = c.backends.iter().map(|b| b.requests).sum();
    let mine = c
        .backends
        .iter()
        .find(|b| b.name == name)
        .unwrap_or_else(|| panic!("{}: no backend {name}", c.name))
        .requests;
    mine as f64 / total as f64
}

#[test]
fn load_balancing_quick_passes_its_theory() {
    let tmp = tempfile::tempdir().unwrap();
    let Quick { r, dir, code, text } = run_quick("load-balancing", tmp.path());
    assert_eq!(code, Some(0), "every check must pass\n{text}");
    assert!(r.quick && !r.partial, "{:?}", r.abort_reason);
    assert!(r.checks_passed());
    let names: Vec<&str> = r.cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fast-slow-round-robin",
            "fast-slow-least-conn",
            "fast-slow-random-two",
            "costs-round-robin",
            "costs-least-conn",
            "costs-random-two"
        ]
    );
    for c in &r.cases {
        assert!(
            c.tables
                .iter()
                .any(|t| t.title.contains("per-backend share")),
            "{}: no share table",
            c.name
        );
        assert_eq!(c.backends.len(), 2, "{}", c.name);
        // nginx's view of the split ($upstream_addr) matches the backends' own counters.
        for b in &c.backends {
            let logged = c.logs.upstream_addr.get(&b.addr).copied().unwrap_or(0);
            assert!(
                logged.abs_diff(b.requests) <= 64,
                "{}: {} logged {logged}, counted {}",
                c.name,
                b.name,
                b.requests
            );
        }
    }

    // Round robin alternates: even within 1% whatever the backends cost.
    for name in ["fast-slow-round-robin", "costs-round-robin"] {
        let s = share(case(&r, name), "app-0");
        assert!((s - 0.5).abs() <= 0.005, "{name}: app-0 share {s}");
    }
    // In-flight counting moves traffic off the 20 ms backend: clearly less than half of round
    // robin's share, and no more than Little's law allows ((32 + 1) / 2 in flight for 20 ms).
    for name in ["fast-slow-least-conn", "fast-slow-random-two"] {
        let c = case(&r, name);
        let s = share(c, "app-1");
        assert!(s <= 0.25, "{name}: slow share {s}");
        let slow = c.backends.iter().find(|b| b.name == "app-1").unwrap();
        let rate = slow.requests as f64 / c.loads[0].elapsed_s;
        assert!(
            rate <= 16.5 / 0.020 * 1.1,
            "{name}: slow backend at {rate} req/s"
        );
        assert!(
            c.series.iter().any(|s| s.name.contains("slow backend")),
            "{name}: no series"
        );
    }
    // Different costs: identical backends stay evenly used under every method, and both paths
    // were loaded at once.
    for name in ["costs-round-robin", "costs-least-conn", "costs-random-two"] {
        let c = case(&r, name);
        let s = share(c, "app-0");
        assert!((s - 0.5).abs() <= 0.05, "{name}: app-0 share {s}");
        let loads: Vec<&str> = c.loads.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(loads, ["api", "heavy"], "{name}");
        assert!(c.loads.iter().all(|l| l.requests > 0), "{name}");
        assert!(
            c.tables
                .iter()
                .any(|t| t.title.contains("latency per path")),
            "{name}: no per-path table"
        );
    }
    let last = r.cases.last().unwrap();
    assert!(last
        .tables
        .iter()
        .any(|t| t.title == "Fast and slow backend: methods side by side"));
    assert!(last
        .tables
        .iter()
        .any(|t| t.title == "One service, different costs: methods side by side"));
    assert_eq!(
        r.checks
            .iter()
            .filter(|k| k.name.contains("clearly less to the slow backend"))
            .count(),
        2
    );
    let report = fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("Slow share (backend counters)"));

    // The mutation smoke: round robin over backends of different costs that split 3 to 1 is
    // not round robin, and the check that held must say so.
    let m = common::mutated(&dir, |(rec, _)| {
        let c = rec
            .run
            .cases
            .iter_mut()
            .find(|c| c.name == "costs-round-robin")
            .unwrap();
        let total: u64 = c.backends.iter().map(|b| b.requests).sum();
        let n = c.backends.len() as u64;
        for (i, b) in c.backends.iter_mut().enumerate() {
            b.requests = if i == 0 {
                total * 3 / 4
            } else {
                total / 4 / (n - 1)
            };
        }
    });
    let k = common::check(&m, "costs-round-robin", "round robin splits evenly");
    assert!(!k.pass, "{k:?}");
}
