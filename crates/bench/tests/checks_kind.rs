//! A scenario's checks through the analyse stage, on a results directory written with the real
//! record types: `nginx.*` reads what `proxy.*` reads, and a check on data the run's proxy kind
//! cannot give (here: no status page, so no status-page samples) fails with "not measurable for
//! KIND", never passing on a zero.

use analysis::Records;
use analysis::{analyse, record};
use model::{
    CaseRecord, ErrorKind, Latency, LoadMode, LoadSummary, MeasuredRun, Percentile, RateStats,
    RequestRecord, RunRecord,
};
use scenario::layers::Source;
use scenario::Scenario;
use std::collections::BTreeMap;

const SCENARIO: &str = r#"name = "kinds"
checks = [
  "proxy.errors == 0",
  "nginx.errors == 0",
  "nginx.requests == all.requests",
  "proxy.requests == all.requests",
  "proxy.served == all.requests",
  "nginx.active_max <= 0",
]

[[backends]]
name = "cafe"
count = 2

[proxy]
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
[[proxy.routes]]
path = "/"
upstream = "cafe"

[[loads]]
name = "coffee"
url = "http://cafe.example.com/"
duration = "2s"
"#;

fn load(requests: u64) -> LoadSummary {
    LoadSummary {
        schema: model::SCHEMA_VERSION,
        name: "coffee".into(),
        url: "http://cafe.example.com/".into(),
        method: "GET".into(),
        mode: LoadMode::Closed,
        threads: 1,
        connections: 1,
        start_s: 0.0,
        planned_s: Some(2.0),
        elapsed_s: 2.0,
        timeout_ms: 2000,
        requests,
        bytes_read: 0,
        bytes_written: 0,
        status: BTreeMap::from([(200, requests)]),
        errors: BTreeMap::from([(ErrorKind::ReadReset, 0)]),
        error_messages: BTreeMap::new(),
        connects: 1,
        retried: 0,
        latency: Latency {
            percentiles: vec![Percentile { p: 99.0, us: 900 }],
            ..Default::default()
        },
        latency_uncorrected: None,
        req_per_sec: RateStats::default(),
        schedule: None,
        timeline: vec![],
        http2: None,
    }
}

/// Writes a results directory of one case whose proxy, of kind `kind`, logged every request
/// and had no status page; returns the analysed checks by name.
fn analysed(kind: &str) -> BTreeMap<String, model::CheckResult> {
    let dir = tempfile::tempdir().unwrap();
    let src = Source {
        file: "kinds.toml".into(),
        text: SCENARIO.into(),
    };
    let scn = Scenario::parse_with(&src, false, &analysis::parse_options()).unwrap();
    let mut case = CaseRecord {
        name: scn.cases[0].name.clone(),
        elapsed_s: 2.0,
        loads: vec![load(40)],
        ..Default::default()
    };
    case.logs.access_lines = 40;
    case.logs.access_status = BTreeMap::from([(200, 40)]);
    case.logs.error_levels = BTreeMap::from([("notice".into(), 3)]);
    assert!(case.stub_samples.is_empty());
    let records: Records = BTreeMap::from([("coffee".to_string(), Vec::<RequestRecord>::new())]);
    let mut env = proxybench_bench::env::capture(Some(kind), format!("{kind} 1.0"));
    env.sysctls.clear();
    let rec = RunRecord {
        record_version: model::RECORD_VERSION,
        scenario_file: src.file.clone(),
        selected_cases: vec![case.name.clone()],
        aborted_case: None,
        proxy: None,
        run: MeasuredRun {
            schema: model::SCHEMA_VERSION,
            scenario: scn.name.clone(),
            description: String::new(),
            started_at: "2026-11-25T10:00:00Z".into(),
            quick: false,
            partial: false,
            abort_reason: None,
            env,
            cases: vec![case.clone()],
            findings: vec![],
        },
    };
    record::write_scenario(dir.path(), &scn).unwrap();
    record::write_requests(dir.path(), &case, &records).unwrap();
    record::write_record(dir.path(), &rec).unwrap();
    let results = analyse::analyse(dir.path()).unwrap();
    assert_eq!(results.env.proxy_kind.as_deref(), Some(kind));
    results
        .checks
        .into_iter()
        .map(|c| (c.name.clone(), c))
        .collect()
}

#[test]
fn nginx_checks_are_proxy_checks_for_every_kind() {
    for kind in ["nginx", "caddy"] {
        let checks = analysed(kind);
        for (alias, proxy) in [
            ("nginx.errors == 0", "proxy.errors == 0"),
            (
                "nginx.requests == all.requests",
                "proxy.requests == all.requests",
            ),
        ] {
            let (a, p) = (&checks[alias], &checks[proxy]);
            assert!(p.pass, "{kind}: {p:?}");
            assert_eq!((a.pass, &a.actual), (p.pass, &p.actual), "{kind}");
        }
    }
}

#[test]
fn a_status_page_check_without_a_status_page_is_not_measurable() {
    let checks = analysed("caddy");
    for name in ["proxy.served == all.requests", "nginx.active_max <= 0"] {
        let c = &checks[name];
        assert!(!c.pass, "{c:?}");
        assert!(
            c.actual
                .starts_with("not measurable for caddy: no status-page sample"),
            "{c:?}"
        );
    }
}
