//! The few lines `proxybench run` prints when it finishes: per load the headline numbers, then
//! every check with its verdict. The full story is in report.md.

use crate::{fmt, hdr};
use model::RunResults;
use std::fmt::Write as _;

/// Plain-text summary of a run for the terminal.
pub fn summary_text(r: &RunResults) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}{}: {} case{}{}",
        r.scenario,
        if r.quick { " (quick)" } else { "" },
        r.cases.len(),
        if r.cases.len() == 1 { "" } else { "s" },
        if r.partial { ", PARTIAL" } else { "" }
    );
    for c in &r.cases {
        let _ = writeln!(out, "  case {}", c.name);
        let width = c.loads.iter().map(|l| l.name.len()).max().unwrap_or(0);
        for l in &c.loads {
            let p99 = hdr::percentile_us(&l.latency, 99.0)
                .map(fmt::lat)
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "    {:width$}  {} requests  {} req/s  failed {} ({})  p99 {}",
                l.name,
                fmt::count(l.requests),
                fmt::f2(l.req_per_sec_total()),
                fmt::count(l.failures()),
                units::fmt_ppm(l.failures(), l.attempts()),
                p99,
            );
        }
    }
    let failed_actions = r.failed_actions();
    if !failed_actions.is_empty() {
        let _ = writeln!(out, "  actions: {} failed", failed_actions.len());
        for (case, e) in failed_actions {
            let _ = writeln!(
                out,
                "    FAIL [{case}] {} {} at {:.2}s: {}",
                e.action,
                e.detail,
                e.t_s,
                e.error.as_deref().unwrap_or_default()
            );
        }
    }
    let passed = r.checks.iter().filter(|c| c.pass).count();
    if !r.checks.is_empty() {
        let _ = writeln!(out, "  checks: {passed}/{} passed", r.checks.len());
        for c in &r.checks {
            let _ = writeln!(
                out,
                "    {} {}{}  (actual {}, expected {})",
                if c.pass { "PASS" } else { "FAIL" },
                c.case
                    .as_deref()
                    .map(|n| format!("[{n}] "))
                    .unwrap_or_default(),
                c.name,
                c.actual,
                c.expected
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{CheckResult, Env};

    #[test]
    fn lists_checks_with_verdicts() {
        let r = RunResults {
            schema: 1,
            scenario: "s".into(),
            description: String::new(),
            started_at: String::new(),
            quick: true,
            partial: false,
            abort_reason: None,
            env: Env::default(),
            cases: vec![],
            findings: vec![],
            checks: vec![CheckResult {
                name: "a.p99 <= 1ms".into(),
                case: Some("main".into()),
                expected: "<= 1.00ms".into(),
                actual: "2.00ms".into(),
                pass: false,
            }],
        };
        let t = summary_text(&r);
        assert!(t.starts_with("s (quick): 0 cases\n"), "{t}");
        assert!(t.contains("checks: 0/1 passed"));
        assert!(
            t.contains("FAIL [main] a.p99 <= 1ms  (actual 2.00ms, expected <= 1.00ms)"),
            "{t}"
        );
    }
}
