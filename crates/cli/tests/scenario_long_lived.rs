//! End-to-end test of the built-in `long-lived-under-churn` scenario in its quick form on real
//! nginx and real backends: WebSocket, gRPC-stream and SSE loads beside a short HTTP load, a
//! reload every 4 s, the drain timeout unset and 10 s. Holds the loads' connection counts against
//! the backends' own per-connection lives (exact), every drop against the reload whose old
//! workers held the connection (from the recorded lives, apart from the analysis), the time from
//! the reload to the drop against the drain timeout, and the report's answer.

use model::stream::StreamProtocol;
use model::CaseResult;
use std::fs;
use std::path::Path;

mod common;
use common::{case, run_quick, Quick};

/// One recorded connection life (`streams/<case>/<load>.csv`): when it opened and ended,
/// seconds from the case origin, and how it ended.
struct Life {
    open_s: Option<f64>,
    end_s: f64,
    end: String,
}

fn lives(dir: &Path, case: &str, load: &str) -> Vec<Life> {
    let text = fs::read_to_string(dir.join(format!("streams/{case}/{load}.csv"))).unwrap();
    let mut rows = text.lines();
    let head: Vec<&str> = rows.next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let (open, end_us, end) = (col("open_us"), col("end_us"), col("end"));
    rows.map(|r| {
        let f: Vec<&str> = r.split(',').collect();
        Life {
            open_s: f[open].parse::<f64>().ok().map(|u| u / 1e6),
            end_s: f[end_us].parse::<f64>().unwrap() / 1e6,
            end: f[end].to_string(),
        }
    })
    .collect()
}

/// The connections the backends counted of protocol `p`, one per life (a gRPC call each).
fn backend_lives(c: &CaseResult, p: StreamProtocol) -> u64 {
    c.backends
        .iter()
        .filter_map(|b| b.streams.as_ref())
        .flat_map(|s| &s.lives)
        .filter(|l| l.protocol == p)
        .count() as u64
}

#[test]
fn long_lived_under_churn_quick_on_nginx() {
    let tmp = tempfile::tempdir().unwrap();
    let Quick { r, dir, code, text } = run_quick("long-lived-under-churn", tmp.path());
    assert_eq!(code, Some(0), "every check must pass\n{text}");
    assert!(r.quick && !r.partial, "{:?}", r.abort_reason);
    let names: Vec<&str> = r.cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["drain-unset", "drain-10s"]);
    assert_eq!(r.checks.len(), 14, "{:#?}", r.checks);
    assert!(r.checks.iter().all(|c| c.pass));

    for c in &r.cases {
        assert_eq!(c.reloads.len(), 3, "{}", c.name);
        assert!(c.reloads.iter().all(|x| x.error.is_none()), "{}", c.name);
        assert_eq!(c.loads.len(), 1, "{}: the short HTTP load", c.name);
        assert!(c.loads[0].requests > 0);
        let protos: Vec<(&str, StreamProtocol)> = c
            .streams
            .iter()
            .map(|s| (s.name.as_str(), s.protocol))
            .collect();
        assert_eq!(
            protos,
            [
                ("ws", StreamProtocol::WebSocket),
                ("grpc", StreamProtocol::GrpcStream),
                ("sse", StreamProtocol::Sse)
            ]
        );
        let ledger = c.stream_ledger.as_ref().expect("a ledger");
        for s in &c.streams {
            let who = format!("{}/{}", c.name, s.name);
            // Nothing refused, nothing failed to connect: every attempt opened, and the
            // backends counted each connection (each gRPC call) the load opened, exactly.
            assert_eq!(s.attempts, s.opened, "{who}: {:?}", s.end_messages);
            assert_eq!(backend_lives(c, s.protocol), s.opened, "{who}");
            // The record keeps every life, one row each.
            let ls = lives(&dir, &c.name, &s.name);
            assert_eq!(ls.len() as u64, s.attempts, "{who}");
            let dropped = ls.iter().filter(|l| l.end != "client").count() as u64;
            assert_eq!(dropped, s.dropped, "{who}");
            let b = ledger.load(&s.name).expect("the load's ledger");
            assert_eq!((b.opened, b.dropped), (s.opened, s.dropped), "{who}");
            assert_eq!(b.unattributed, 0, "{who}: {:?}", ledger.unattributed);
            assert_eq!(b.by_reload, b.dropped, "{who}: every drop is a reload's");
            assert_eq!(b.with_close + b.without_close, b.dropped, "{who}");
        }
        // The old generations were sampled, their memory with them.
        assert!(!c.generations.is_empty(), "{}", c.name);
        assert!(ledger.draining_generations_max() >= 1, "{}", c.name);
        assert!(ledger.draining_rss_max() > 0, "{}", c.name);
        assert!(
            c.series.iter().any(|s| s.name.contains("draining")),
            "{}: {:?}",
            c.name,
            c.series.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
    }

    // No drain timeout: nginx keeps each old worker while it holds a connection; none dropped.
    let unset = case(&r, "drain-unset");
    assert!(unset.streams.iter().all(|s| s.dropped == 0));

    // A drain timeout of 10 s, reloads at 1, 5 and 9 s, loads of 16 s: the connections of
    // the first two generations (opened before the second reload) are cut 10 s after the
    // reload that superseded them, without a close frame; the third's outlive the load.
    let ten = case(&r, "drain-10s");
    let t: Vec<f64> = ten.reloads.iter().map(|x| x.t_s).collect();
    let ledger = ten.stream_ledger.as_ref().unwrap();
    for s in &ten.streams {
        let who = format!("drain-10s/{}", s.name);
        assert!(s.dropped > 0, "{who}: the drain timeout cut nothing");
        let b = ledger.load(&s.name).unwrap();
        assert_eq!(
            b.without_close, b.dropped,
            "{who}: nginx cuts without a close frame"
        );
        // Each drop comes at the drain timeout after its reload, not before it (the timer
        // cannot fire early) and within 2 s after it (the scenario's own check).
        let (lo, hi) = (
            b.reload_to_drop.min_s.unwrap(),
            b.reload_to_drop.max_s.unwrap(),
        );
        assert!(lo >= 10.0 && hi <= 12.0, "{who}: {:?}", b.reload_to_drop);
        // Apart from the analysis, from the recorded lives: each dropped connection ended 10
        // to 12 s after one of the first two reloads, one that came after it opened or up to
        // half a second before (nginx's old workers accept for about 100 ms after the signal,
        // until the master tells them to quit).
        for l in lives(&dir, "drain-10s", &s.name)
            .iter()
            .filter(|l| l.end != "client")
        {
            let open = l.open_s.unwrap();
            assert!(
                t[..2]
                    .iter()
                    .any(|r| *r >= open - 0.5 && (10.0..=12.0).contains(&(l.end_s - r))),
                "{who}: opened {open} s, cut at {} s, reloads at {t:?}",
                l.end_s
            );
        }
    }

    // The report answers first: how long a connection survived, and what the proxy paid.
    let md = fs::read_to_string(dir.join("report.md")).unwrap();
    let summary = md.split("## Summary").nth(1).unwrap();
    let first: Vec<&str> = summary
        .lines()
        .filter(|l| l.starts_with("- "))
        .take(2)
        .collect();
    assert!(
        first[0].starts_with("- drain-unset: through 3 reload(s) (every 4.0 s), none of the")
            && first[0].contains("The proxy paid with up to"),
        "{first:?}"
    );
    assert!(
        first[1].starts_with("- drain-10s: through 3 reload(s) (every 4.0 s), ")
            && first[1].contains("by a reload's old generation")
            && first[1].contains("without a close frame"),
        "{first:?}"
    );
    assert!(md.contains("### Long-lived connections"));
    assert!(md.contains("| drain-10s | ws | WebSocket |"), "{md}");
    let html = fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Long-lived connections"));
}
