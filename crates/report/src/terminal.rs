//! The few lines `proxybench run` prints when it finishes: per load the headline numbers (for a
//! long-lived load, its connections, what dropped them and its messages), then every check with
//! its verdict. The full story is in report.md.

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
        let width = c
            .loads
            .iter()
            .map(|l| l.name.len())
            .chain(c.streams.iter().map(|s| s.name.len()))
            .max()
            .unwrap_or(0);
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
        for s in &c.streams {
            let _ = writeln!(out, "    {:width$}  {}", s.name, stream_line(c, s));
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

/// A long-lived load in one line: its connections, drops (with each cause the ledger found),
/// messages, and the p99 of its round trips (or, for a load that only receives, of the gaps
/// between messages).
fn stream_line(c: &model::CaseResult, s: &model::stream::StreamSummary) -> String {
    let ledger = c.stream_ledger.as_ref().and_then(|l| l.load(&s.name));
    let why = match ledger {
        Some(l) if l.dropped > 0 => {
            let causes: Vec<String> = [
                (l.by_reload, "by reload"),
                (l.by_backend_action, "by backend action"),
                (l.by_backend, "by the backend"),
                (l.unattributed, "unattributed"),
            ]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{} {what}", fmt::count(*n)))
            .collect();
            format!(" ({})", causes.join(", "))
        }
        _ => String::new(),
    };
    let (what, lat) = if s.rtt.count > 0 {
        ("rtt", &s.rtt)
    } else {
        ("gap", &s.gap)
    };
    let p99 = hdr::percentile_us(lat, 99.0)
        .map(fmt::lat)
        .unwrap_or_else(|| "-".into());
    let m = &s.messages;
    format!(
        "{} {} opened  dropped {}{why}  messages {} sent, {} received, {} lost  {what} p99 {p99}",
        s.protocol.name(),
        fmt::count(s.opened),
        fmt::count(s.dropped),
        fmt::count(m.sent),
        fmt::count(m.answered + m.pushed),
        fmt::count(m.lost),
    )
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

    /// A long-lived load gets its own line beside the short loads: protocol, connections,
    /// drops with what the ledger attributed them to, and messages.
    #[test]
    fn a_stream_load_has_its_line() {
        let lat = serde_json::json!({"count":0,"mean_us":0,"stdev_us":0,"min_us":0,"max_us":0,
            "within_stdev_pct":0,"percentiles":[],"hdr":""});
        let ws: model::stream::StreamSummary = serde_json::from_value(serde_json::json!({
            "schema": model::SCHEMA_VERSION, "name": "sockets", "url": "ws://x/",
            "protocol": "ws", "threads": 1, "connections": 10, "start_s": 0.0,
            "elapsed_s": 16.0, "ramp_s": 0.0, "rate": 1.0, "size": 64, "timeout_ms": 2000,
            "reconnect": "backoff", "attempts": 13, "opened": 13, "reconnects": 3,
            "dropped": 3, "open_max": 10, "open_at_end": 10, "ended": {},
            "messages": {"sent":150,"answered":147,"pushed":0,"lost":3,"unanswered_at_end":0,
            "pings_sent":0,"pongs":0,"server_pings":0,"bytes_sent":0,"bytes_received":0},
            "rtt": {"count":147,"mean_us":900,"stdev_us":200,"min_us":400,"max_us":2000,
                "within_stdev_pct":70,"percentiles":[{"p":99.0,"us":1500}],"hdr":""},
            "gap": lat, "handshake": lat,
            "cost": {"rss_before_kib":0,"rss_open_kib":0,"open_at_sample":0,"cpu_s":0.0},
            "timeline": []
        }))
        .unwrap();
        let mut case = model::CaseResult {
            name: "main".into(),
            streams: vec![ws],
            ..Default::default()
        };
        case.stream_ledger = Some(model::ledger::StreamLedger {
            loads: vec![model::ledger::LoadLedger {
                name: "sockets".into(),
                dropped: 3,
                by_reload: 2,
                unattributed: 1,
                ..Default::default()
            }],
            ..Default::default()
        });
        let r = RunResults {
            schema: 1,
            scenario: "s".into(),
            description: String::new(),
            started_at: String::new(),
            quick: false,
            partial: false,
            abort_reason: None,
            env: Env::default(),
            cases: vec![case],
            findings: vec![],
            checks: vec![],
        };
        let t = summary_text(&r);
        assert!(
            t.contains(
                "    sockets  ws 13 opened  dropped 3 (2 by reload, 1 unattributed)  \
                 messages 150 sent, 147 received, 3 lost  rtt p99 1.50ms"
            ),
            "{t}"
        );
    }
}
