//! The built-in `scale` scenario in its quick form, through the binary, against a real nginx:
//! every check (including the scale analysis' own) passes, and data.json holds the six growths
//! with the counts that hold by construction (one reload per step, one probe per reachable item,
//! the steps' item counts), times to ready that never precede the reload that made the item, new
//! upstream servers that all received requests, and the tables the report promises. A second run
//! grows header matches on a header name too long for nginx's config parser, so that a refused
//! config stops the growth and its limit is reported with nginx's own message.

use model::{CaseResult, Table};
mod common;

use common::{case, run, run_quick, Quick};
use std::fs;

fn table<'a>(c: &'a CaseResult, suffix: &str) -> &'a Table {
    c.tables
        .iter()
        .find(|t| t.title == format!("{}: {suffix}", c.name))
        .unwrap_or_else(|| panic!("{}: no table '{suffix}'", c.name))
}

/// Item counts after each step of a growth from `from` to `to` by `by`.
fn counts(from: u32, to: u32, by: u32) -> Vec<u32> {
    let mut v = Vec::new();
    let mut n = from;
    while n < to {
        n = (n + by).min(to);
        v.push(n);
    }
    v
}

#[test]
fn scale_quick_grows_every_case_and_passes_its_theory() {
    let tmp = tempfile::tempdir().unwrap();
    let Quick {
        r, code, text, dir, ..
    } = run_quick("scale", tmp.path());
    assert_eq!(code, Some(0), "{text}");
    assert!(r.quick && !r.partial, "{:?}", r.abort_reason);
    assert!(r.checks_passed());
    let names: Vec<&str> = r.cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "listeners",
            "https-listeners",
            "routes-2s",
            "routes-no-delay",
            "upstream-servers",
            "matches"
        ]
    );
    // (case, what the probes report, the steps' item counts) as the quick form grows them.
    let plan = [
        ("listeners", "listeners", counts(1, 8, 1)),
        ("https-listeners", "https_listeners", counts(0, 8, 1)),
        ("routes-2s", "routes", counts(1, 600, 30)),
        ("routes-no-delay", "routes", counts(1, 600, 30)),
        ("upstream-servers", "upstream_servers", counts(1, 17, 8)),
        ("matches", "matches", counts(0, 10000, 625)),
    ];
    for (name, what, steps) in &plan {
        let c = case(&r, name);
        // One reload per step (one replica), none failed.
        assert_eq!(c.reloads.len(), steps.len(), "{name}: reloads");
        assert!(c.reloads.iter().all(|x| x.error.is_none()), "{name}");
        let grows: Vec<_> = c.events.iter().filter(|e| e.action == "grow").collect();
        assert_eq!(grows.len(), steps.len(), "{name}: grow events");
        for s in ["reload time against config size", "nginx CPU and memory"] {
            table(c, s);
        }
        let light = table(c, "the light load during the growth");
        assert_eq!(light.rows.len(), 1);
        let chart: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
        assert!(chart.contains(&"config check"), "{name}: {chart:?}");
        if *what == "upstream_servers" {
            // Nothing a client addresses: no probes, and no time-to-ready table.
            assert!(c.ready.is_empty());
            assert!(!c.tables.iter().any(|t| t.title.ends_with("time to ready")));
            continue;
        }
        // One probe per step, on the newest item, and every one answered.
        let got: Vec<u32> = c.ready.iter().map(|x| x.count).collect();
        assert_eq!(&got, steps, "{name}: probed counts");
        for (x, rel) in c.ready.iter().zip(&c.reloads) {
            assert_eq!(x.what, *what);
            let ttr = x.ready_ms.unwrap_or_else(|| panic!("{name}: {x:?}"));
            // The item cannot answer before nginx was told about it.
            let signal_ms = (rel.t_s - x.t_s) * 1e3;
            assert!(
                ttr >= signal_ms - 0.001,
                "{name}: ready {ttr} ms before the SIGHUP at {signal_ms} ms"
            );
        }
        let ttr = table(c, "time to ready");
        assert_eq!(
            ttr.rows[0][1].to_string(),
            steps.len().to_string(),
            "{name}: probed"
        );
        assert_eq!(ttr.rows[0][2].to_string(), "0", "{name}: never ready");
        let series = c.series.iter().find(|s| s.name == "time to ready").unwrap();
        assert_eq!(series.points.len(), steps.len());
        // Charted against what grew, one point per step: x is the count each step reached.
        assert!(
            matches!(series.x, model::SeriesX::Count(_)),
            "{name}: {:?}",
            series.x
        );
        let counts: Vec<f64> = c.ready.iter().map(|r| f64::from(r.count)).collect();
        let xs: Vec<f64> = series.points.iter().map(|p| p.0).collect();
        assert_eq!(xs, counts, "{name}: x is the count of each ready probe");
    }

    // Every server added to the upstream got its round-robin share of the light load.
    let up = case(&r, "upstream-servers");
    assert_eq!(up.backends.len(), 17);
    assert!(
        up.backends.iter().all(|b| b.requests > 0),
        "{:?}",
        up.backends
            .iter()
            .map(|b| (&b.name, b.requests))
            .collect::<Vec<_>>()
    );

    // Matches: no limit up to 10000, and the last match costs nginx more than the first.
    let m = case(&r, "matches");
    let limits = table(m, "limits");
    assert!(
        limits.rows[0][3].to_string().starts_with("none"),
        "{:?}",
        limits.rows
    );
    let fl = table(m, "first match vs last match");
    assert_eq!(fl.rows[0][1].to_string(), "v0 (entry 1)");
    assert_eq!(fl.rows[1][1].to_string(), "v9999 (entry 10000)");
    for l in ["first-match", "last-match"] {
        let s = m.loads.iter().find(|x| x.name == l).unwrap();
        assert!(s.requests > 0 && s.failures() == 0, "{l}: {:?}", s.status);
        assert_eq!(s.status.get(&200), Some(&s.requests), "{l}");
    }

    // The cross-case summary sits on the last case, a row per case.
    let summary = m
        .tables
        .iter()
        .find(|t| t.title == "All cases: scale at a glance")
        .unwrap();
    assert_eq!(summary.rows.len(), 6);
    assert_eq!(r.findings.len(), 6, "{:?}", r.findings);

    // The mutation smoke: a light-load request answered 502 during the growth is more than
    // reloads can cost, and the check that held must fail.
    let m = common::mutated(&dir, |(rec, _)| {
        let c = rec
            .run
            .cases
            .iter_mut()
            .find(|c| c.name == "listeners")
            .unwrap();
        let light = c.loads.iter_mut().find(|l| l.name == "light").unwrap();
        *light.status.entry(502).or_default() += 1;
        light.requests += 1;
    });
    let k = common::check(&m, "listeners", "the light load lost only idle keep-alive");
    assert!(!k.pass, "{k:?}");
}

#[test]
fn a_config_nginx_refuses_stops_the_growth_with_nginx_message() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("limit.toml");
    // A header name longer than nginx's ~4 KB limit on one config parameter: the first match
    // renders `map "$http_x_aaa..."`, which `nginx -t` refuses.
    let header = format!("x-{}", "a".repeat(5000));
    fs::write(
        &file,
        format!(
            r#"name = "scale-limit"
description = "a growth nginx refuses"
analysis = "scale"

[[backends]]
name = "cafe"

[proxy]
[[proxy.listeners]]
name = "http"
server_names = ["cafe.example.com"]
[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
[[proxy.routes]]
name = "coffee"
path = "/coffee"
upstream = "cafe"

[[loads]]
name = "light"
url = "http://cafe.example.com/coffee"
rate = 50
connections = 2
duration = "2s"

[[actions]]
at = "300ms"
grow = {{ what = "matches", to = 3, header = "{header}" }}
"#
        ),
    )
    .unwrap();
    let root = tmp.path().join("results");
    let Quick { r, code, text, .. } = run(file.to_str().unwrap(), false, &root);
    assert_eq!(code, Some(0), "{text}");
    assert!(r.checks_passed(), "{:?}", r.checks);
    let c = &r.cases[0];
    // One step, one refused reload, and the growth stopped there.
    assert_eq!(c.reloads.len(), 1);
    let err = c.reloads[0].error.as_deref().unwrap();
    assert!(err.contains("too long parameter"), "{err}");
    assert_eq!(c.events.iter().filter(|e| e.action == "grow").count(), 1);
    // The refused config is the limit the growth was sent to find: a finding, so exit 0.
    assert!(c
        .events
        .iter()
        .any(|e| e.action == "grow" && e.limit && e.error.is_some()));
    let limits = table(c, "limits");
    assert_eq!(limits.rows[0][0].to_string(), "0 header matches");
    assert_eq!(limits.rows[0][2].to_string(), "1 header matches");
    assert!(limits.rows[0][3].to_string().contains("too long parameter"));
    let step = r
        .checks
        .iter()
        .find(|k| k.name.starts_with("every step of the growth"))
        .unwrap();
    assert!(step.pass && step.actual.contains("too long parameter"));
}
