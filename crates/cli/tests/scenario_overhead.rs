//! The built-in `proxy-overhead` scenario in its quick form, through the binary, against a real
//! nginx: every check (including the overhead analysis' theory checks) passes, and data.json
//! holds the eight cases, their tables, and counts that must hold by construction.

use model::CaseResult;
mod common;

use common::{case, run_quick, Quick};
use std::fs;

fn backend_requests(c: &CaseResult) -> u64 {
    c.backends.iter().map(|b| b.requests).sum()
}

fn backend_connections(c: &CaseResult) -> u64 {
    c.backends.iter().map(|b| b.connections).sum()
}

/// Upstream attempts: one per address nginx logged in `$upstream_addr`.
fn attempts(c: &CaseResult) -> u64 {
    c.logs
        .upstream_addr
        .iter()
        .filter(|(a, _)| a.as_str() != "-")
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn proxy_overhead_quick_passes_its_theory() {
    let tmp = tempfile::tempdir().unwrap();
    let Quick { r, dir, code, text } = run_quick("proxy-overhead", tmp.path());
    assert_eq!(code, Some(0), "every check must pass\n{text}");
    assert!(r.quick && !r.partial, "{:?}", r.abort_reason);
    assert!(r.checks_passed());

    let names: Vec<&str> = r.cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "direct-cheap",
            "dumb-cheap",
            "keepalive-cheap",
            "retry-cheap",
            "direct-spiky",
            "dumb-spiky",
            "keepalive-spiky",
            "retry-spiky"
        ]
    );
    for c in &r.cases {
        assert!(
            c.tables
                .iter()
                .any(|t| t.title.ends_with("where the requests went")),
            "{}: no flow table",
            c.name
        );
        let l = &c.loads[0];
        assert_eq!(l.connections, 200, "{}", c.name);
        assert!(l.requests > 0, "{}: no responses", c.name);
    }
    // Each case's theory checks are in the run: Little's law everywhere, the mechanism checks
    // where they apply, and the cross-case keepalive comparison.
    let checked = |case: &str, what: &str| {
        r.checks
            .iter()
            .any(|k| k.case.as_deref() == Some(case) && k.name.contains(what) && k.pass)
    };
    for c in &r.cases {
        assert!(checked(&c.name, "Little's law"), "{}", c.name);
    }
    assert!(checked("dumb-cheap", "its own upstream connection"));
    assert!(checked("keepalive-spiky", "the spike shows in p99"));
    assert!(checked("retry-spiky", "retries cut the tail"));
    assert!(checked("retry-spiky", "extra responses are the retries"));
    assert_eq!(
        r.checks
            .iter()
            .filter(|k| k.case.is_none() && k.name.contains("far fewer upstream connections"))
            .count(),
        4
    );

    // Direct: no nginx in the path, only the first backend serves.
    let direct = case(&r, "direct-cheap");
    assert_eq!(direct.logs.access_lines, 0);
    assert_eq!(backend_requests(direct), direct.loads[0].requests);
    assert_eq!(direct.backends[0].requests, direct.loads[0].requests);

    for style in ["cheap", "spiky"] {
        // Without keepalive: one upstream connection per request.
        let dumb = case(&r, &format!("dumb-{style}"));
        let (req, conns) = (backend_requests(dumb), backend_connections(dumb));
        assert!(
            conns >= req && conns <= req + 200,
            "{style}: {conns} for {req}"
        );
        // With keepalive: far fewer connections than requests.
        let ka = case(&r, &format!("keepalive-{style}"));
        assert!(
            backend_connections(ka) * 10 <= backend_requests(ka),
            "{style}: keepalive opened {} connections for {} requests",
            backend_connections(ka),
            backend_requests(ka)
        );
    }

    // Retries: the backends answered every attempt nginx logged; the client lost nothing.
    let retry = case(&r, "retry-spiky");
    let client = retry.loads[0].requests;
    let extra = attempts(retry) - retry.logs.access_lines;
    assert!(extra > 0, "the spiky backend was never retried");
    assert!(backend_requests(retry) >= client);
    assert!(backend_requests(retry).abs_diff(client + extra) <= 200 + client / 1000);
    // Without retries the spike shows in p99 (the profile's spikes take at least 200 ms and
    // are 2% of requests).
    let p99 = |c: &CaseResult| c.loads[0].latency.percentile(99.0).unwrap();
    assert!(p99(case(&r, "keepalive-spiky")) >= 200_000);

    // The cross-case tables are at the end of the last case; the run's findings point to them.
    let last = r.cases.last().unwrap();
    let titles: Vec<&str> = last.tables.iter().map(|t| t.title.as_str()).collect();
    assert!(titles
        .iter()
        .any(|t| t.starts_with("All cases: setups side by side")));
    assert!(titles
        .iter()
        .any(|t| t.starts_with("All cases: non-2xx by origin")));
    assert!(titles
        .iter()
        .any(|t| t.starts_with("All cases: requests, attempts")));
    let side = last
        .tables
        .iter()
        .find(|t| t.title.starts_with("All cases: setups side by side"))
        .unwrap();
    assert_eq!(side.rows.len(), 8);
    assert!(r.findings.iter().any(|f| f.starts_with("cheap backend:")));
    let report = fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("Req/s vs direct"));

    // The mutation smoke: a check that held fails once its subject is broken.
    // Without keepalive, the backends accepting no connection at all is impossible.
    let m = common::mutated(&dir, |(rec, _)| {
        let c = rec
            .run
            .cases
            .iter_mut()
            .find(|c| c.name == "dumb-cheap")
            .unwrap();
        for b in &mut c.backends {
            b.connections = 0;
        }
    });
    let k = common::check(&m, "dumb-cheap", "without upstream keepalive");
    assert!(!k.pass, "{k:?}");
    // Retries that lost requests: fewer backend responses than client responses.
    let m = common::mutated(&dir, |(rec, _)| {
        let c = rec
            .run
            .cases
            .iter_mut()
            .find(|c| c.name == "retry-cheap")
            .unwrap();
        let client = c.loads[0].requests;
        let n = c.backends.len() as u64;
        for b in &mut c.backends {
            b.requests = client / n / 2;
        }
    });
    let k = common::check(&m, "retry-cheap", "retries lose no request");
    assert!(!k.pass, "{k:?}");
    // No backend counters: not measurable, never 0 - 0.
    let m = common::mutated(&dir, |(rec, _)| {
        for c in &mut rec.run.cases {
            c.backends.clear();
        }
    });
    let k = common::check(&m, "dumb-cheap", "without upstream keepalive");
    assert!(!k.pass && k.actual.starts_with("not measurable"), "{k:?}");
}
