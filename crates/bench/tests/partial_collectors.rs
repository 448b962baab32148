//! The fault matrix of partial evidence: every built-in scenario with an analysis is recorded
//! with every collector complete, then once per collector with that collector short of one item
//! out of several (one replica's status page of three, one pod's log, one backend's counters,
//! one load's per-request records of two, one watched container's log levels). Each is analysed
//! and rendered through the real stages, beside the same run with that collector wholly absent.
//! Three things must hold:
//! - no check passes on the partial run that fails on the absent one: a check that reads the
//!   collector never passes on part of what it claims;
//! - every table cell that reads the collector (it differs from the absent run's) shows its
//!   coverage (`12 (2 of 3 replicas)`) or says it was not sampled;
//! - no finding that reads the collector speaks as if it were whole: it says what it is drawn
//!   from, or that it is not measurable; the missing item is named only as missing.

use analysis::{analyse, record, Records};
use model::{
    BackendCounters, CaseRecord, Cell, ClusterRecord, Collector, Env, ErrorKind, Event, Latency,
    LoadMode, LoadSummary, LogLevels, MeasuredRun, Percentile, RateStats, ReadinessSample,
    ReloadRecord, RequestRecord, RunRecord, RunResults, StubSample,
};
use scenario::catalogue;
use scenario::{Case, ParseOptions, PlatformKind, Scenario};
use std::collections::BTreeMap;

/// The scenarios whose analyses read collectors.
const SCENARIOS: &[&str] = &[
    "zero-downtime-scaling",
    "proxy-overhead",
    "load-balancing",
    "burst-handling",
    "scale",
];

const REPLICAS: [&str; 3] = ["nginx-0", "nginx-1", "nginx-2"];

fn load(spec: &scenario::LoadSpec, elapsed_s: f64, n: u64) -> LoadSummary {
    LoadSummary {
        schema: model::SCHEMA_VERSION,
        name: spec.name.clone(),
        url: spec.url.clone(),
        method: "GET".into(),
        mode: if spec.rate.is_some() {
            LoadMode::Open {
                rate: 100.0,
                arrivals: model::Arrivals::Even,
                seed: 1,
            }
        } else {
            LoadMode::Closed
        },
        threads: 1,
        connections: spec.connections,
        start_s: 0.0,
        planned_s: Some(elapsed_s),
        elapsed_s,
        timeout_ms: 2000,
        requests: n,
        bytes_read: 0,
        bytes_written: 0,
        status: BTreeMap::from([(200, n - 2), (503, 2)]),
        errors: BTreeMap::from([(ErrorKind::ReadIdleClosed, 1)]),
        error_messages: BTreeMap::new(),
        connects: u64::from(spec.connections) + 1,
        retried: 0,
        latency: Latency {
            percentiles: vec![
                Percentile { p: 50.0, us: 800 },
                Percentile { p: 90.0, us: 1500 },
                Percentile { p: 99.0, us: 2500 },
            ],
            mean_us: 900.0,
            max_us: 4000,
            ..Default::default()
        },
        latency_uncorrected: None,
        req_per_sec: RateStats::default(),
        schedule: None,
        timeline: vec![],
        http2: None,
    }
}

/// A load's per-request records: one every 5 ms, the last two 503s.
fn requests(n: u64) -> Vec<RequestRecord> {
    (0..n)
        .map(|i| RequestRecord {
            t_us: 5000 * (i + 1),
            latency_us: 800,
            conn: (i % 4) as u32,
            bytes: 100,
            status: if i + 2 >= n { 503 } else { 200 },
            error: None,
        })
        .collect()
}

/// One case as a local run records it, every collector whole.
fn complete(case: &Case, cluster: bool) -> (CaseRecord, Records) {
    let elapsed_s = case.steps.last().map_or(10.0, |s| s.at.as_secs_f64() + 5.0);
    let n = 400;
    let mut c = CaseRecord {
        name: case.name.clone(),
        elapsed_s,
        loads: case.loads.iter().map(|l| load(l, elapsed_s, n)).collect(),
        ..Default::default()
    };
    for s in &case.steps {
        let t_s = s.at.as_secs_f64();
        c.events.push(Event {
            t_s,
            action: "reload".into(),
            detail: String::new(),
            duration_ms: 50.0,
            error: None,
            limit: false,
        });
        c.reloads.push(ReloadRecord {
            replica: "nginx-0".into(),
            generation: c.reloads.len() as u64 + 2,
            t_s: t_s + 0.01,
            served_ms: Some(40.0),
            command_ms: None,
            old_workers_exited_ms: Some(150.0),
            validate_ms: 5.0,
            error: None,
        });
    }
    for t in 0..(elapsed_s as u64) {
        for (i, r) in REPLICAS.iter().enumerate() {
            c.stub_samples.push(StubSample {
                t_s: t as f64,
                replica: (*r).into(),
                active: 4 + i as u64,
                accepts: 10 * t,
                handled: 10 * t,
                requests: 40 * t + i as u64,
                reading: 0,
                writing: 1,
                waiting: 3,
            });
            c.readiness.push(ReadinessSample {
                t_s: t as f64,
                replica: (*r).into(),
                ok: true,
                ms: Some(0.7),
            });
        }
    }
    let total: u64 = c.loads.iter().map(|l| l.requests).sum();
    let logs = &mut c.logs;
    logs.access_lines = total;
    logs.access_status = BTreeMap::from([(200, total - 4), (503, 4)]);
    logs.upstream_status = BTreeMap::from([("200".into(), total - 4), ("503".into(), 4)]);
    logs.upstream_addr = BTreeMap::from([
        ("127.0.0.1:9001".into(), total / 2),
        ("127.0.0.1:9002".into(), total - total / 2),
    ]);
    logs.error_levels = BTreeMap::from([("warn".into(), 1)]);
    logs.status_origin = BTreeMap::from([("503 upstream".into(), 4)]);
    logs.limit_req_status = BTreeMap::from([("PASSED".into(), total)]);
    c.backends = ["app-0", "app-1"]
        .iter()
        .enumerate()
        .map(|(i, n)| BackendCounters {
            name: (*n).into(),
            addr: format!("127.0.0.1:900{}", i + 1),
            requests: total / 2 + (total % 2) * i as u64,
            connections: 8,
            by_status: BTreeMap::from([(200, total / 2)]),
            ..Default::default()
        })
        .collect();
    if cluster {
        c.cluster = Some(ClusterRecord {
            namespace: "proxybench-test".into(),
            server_version: "v1.34.4".into(),
            log_levels: ["ctl-0", "ctl-1", "ctl-2"]
                .iter()
                .map(|p| LogLevels {
                    pod: format!("gw/{p}"),
                    container: "ctl".into(),
                    lines: 20,
                    leveled: 20,
                    levels: BTreeMap::from([("info".into(), 20)]),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
    }
    let records = c
        .loads
        .iter()
        .map(|l| (l.name.clone(), requests(l.requests)))
        .collect();
    (c, records)
}

/// A collector short of one item, and the same collector wholly absent.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// The status page of one replica of three never answered.
    StatusPage,
    /// One replica's log of three was read in part.
    Log,
    /// One backend's final counters of two were not read.
    Counters,
    /// One load's per-request records are missing (of two or more loads).
    Records,
    /// One watched container's log of three was read in part.
    LogLevels,
}

impl Fault {
    const ALL: [Fault; 5] = [
        Fault::StatusPage,
        Fault::Log,
        Fault::Counters,
        Fault::Records,
        Fault::LogLevels,
    ];

    /// The name of the item the fault takes away (`loads`: the case's).
    fn item(self, loads: &[LoadSummary]) -> String {
        match self {
            Fault::StatusPage | Fault::Log => "nginx-2".into(),
            Fault::Counters => "app-1".into(),
            Fault::Records => loads.last().map(|l| l.name.clone()).unwrap_or_default(),
            Fault::LogLevels => "gw/ctl-2/ctl".into(),
        }
    }

    /// Every item of the kind the fault takes one of (`loads`: the case's).
    fn items(self, loads: &[LoadSummary]) -> Vec<String> {
        match self {
            Fault::StatusPage | Fault::Log => REPLICAS.map(String::from).to_vec(),
            Fault::Counters => vec!["app-0".into(), "app-1".into()],
            Fault::Records => loads.iter().map(|l| l.name.clone()).collect(),
            Fault::LogLevels => ["ctl-0", "ctl-1", "ctl-2"]
                .map(|p| format!("gw/{p}/ctl"))
                .to_vec(),
        }
    }

    /// `c` with the fault, partial (`whole == false`) or wholly absent.
    fn apply(self, c: &mut CaseRecord, records: &mut Records, whole: bool) {
        let why = "connection refused";
        match (self, whole) {
            (Fault::StatusPage, false) => {
                c.stub_samples.retain(|s| s.replica != "nginx-2");
                c.add_missing(
                    Collector::StatusPages,
                    "replicas",
                    3,
                    "nginx-2",
                    "its status page never answered (9 reads; connection refused)",
                );
            }
            (Fault::Log, false) => {
                // What nginx-2's third of the lines held is gone.
                let logs = &mut c.logs;
                logs.access_lines -= logs.access_lines / 3;
                for n in logs
                    .access_status
                    .values_mut()
                    .chain(logs.upstream_addr.values_mut())
                {
                    *n -= *n / 3;
                }
                c.add_missing(
                    Collector::Logs,
                    "logs",
                    3,
                    "nginx-2",
                    "its log follower failed",
                )
            }
            (Fault::Counters, false) => {
                c.backends.retain(|b| b.name != "app-1");
                c.add_missing(Collector::BackendCounters, "backends", 2, "app-1", why);
            }
            (Fault::Records, false) => {
                let last = self.item(&c.loads);
                records.remove(&last);
            }
            (Fault::LogLevels, false) => {
                let k = c.cluster.as_mut().expect("a cluster case");
                k.log_levels[2].incomplete = Some("the log stream was reset".into());
                k.log_levels[2].lines = 7;
                k.log_levels[2].leveled = 7;
                k.log_levels[2].levels = BTreeMap::from([("info".into(), 7)]);
            }
            (Fault::StatusPage, true) => {
                c.stub_samples.clear();
                c.absent.insert(Collector::StatusPages, why.into());
            }
            (Fault::Log, true) => c.logs.missing = Some(why.into()),
            (Fault::Counters, true) => {
                c.backends.clear();
                c.absent.insert(Collector::BackendCounters, why.into());
            }
            (Fault::Records, true) => records.clear(),
            (Fault::LogLevels, true) => {
                let k = c.cluster.as_mut().expect("a cluster case");
                k.log_levels.clear();
                k.absent.push(format!("log levels: {why}"));
            }
        }
    }
}

/// Records `name` with `fault` (partial or whole) and returns the analysed results and their
/// report; `None` when the fault does not apply (one load only, for records).
fn run(name: &str, fault: Fault, whole: Option<bool>) -> Option<(RunResults, String)> {
    let src = catalogue::builtin(name).unwrap();
    let cluster = fault == Fault::LogLevels;
    let mut opts = ParseOptions {
        skip_file_checks: true,
        ..analysis::parse_options()
    };
    if cluster {
        opts.platform.kind = Some(PlatformKind::Kubernetes);
    }
    let scn = Scenario::parse_with(&src, true, &opts).unwrap();
    if fault == Fault::Records && scn.cases.iter().all(|c| c.loads.len() < 2) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    record::write_scenario(dir.path(), &scn).unwrap();
    let mut cases = Vec::new();
    for case in &scn.cases {
        let (mut c, mut records) = complete(case, cluster);
        if let Some(whole) = whole {
            fault.apply(&mut c, &mut records, whole);
        }
        record::write_requests(dir.path(), &c, &records).unwrap();
        cases.push(c);
    }
    let mut env: Env = proxybench_bench::env::capture(Some("nginx"), "nginx 1.22.1".into());
    env.sysctls.clear();
    if cluster {
        env.platform = Some(model::PlatformInfo {
            kind: "kubernetes".into(),
            context: "test".into(),
            namespace: "proxybench-test".into(),
            ..Default::default()
        });
    }
    let rec = RunRecord {
        record_version: model::RECORD_VERSION,
        scenario_file: src.file.clone(),
        selected_cases: cases.iter().map(|c| c.name.clone()).collect(),
        aborted_case: None,
        proxy: None,
        run: MeasuredRun {
            schema: model::SCHEMA_VERSION,
            scenario: scn.name.clone(),
            description: String::new(),
            started_at: "2026-12-05T10:00:00Z".into(),
            quick: true,
            partial: false,
            abort_reason: None,
            env,
            cases,
            findings: vec![],
        },
    };
    record::write_record(dir.path(), &rec).unwrap();
    let results = analyse::analyse(dir.path()).unwrap();
    let md = report::render_markdown(&results);
    Some((results, md))
}

/// Words that say a value is not whole.
fn says_coverage(s: &str) -> bool {
    [
        "not sampled",
        "not measurable",
        "drawn from",
        " of 3 ",
        " of 2 ",
        "missing",
    ]
    .iter()
    .any(|w| s.contains(w))
}

/// Every (case, table title, row label, column header) of a run's tables with the cell.
fn cells(r: &RunResults) -> BTreeMap<(String, String, String, String), Cell> {
    let mut out = BTreeMap::new();
    for c in &r.cases {
        for t in &c.tables {
            for row in &t.rows {
                let label = row.first().map(|c| c.to_string()).unwrap_or_default();
                for (i, cell) in row.iter().enumerate().skip(1) {
                    let col = t.columns.get(i).cloned().unwrap_or_else(|| i.to_string());
                    out.insert(
                        (c.name.clone(), t.title.clone(), label.clone(), col),
                        cell.clone(),
                    );
                }
            }
        }
    }
    out
}

#[test]
fn partial_evidence_never_passes_and_always_says_its_coverage() {
    let mut tried = 0;
    for name in SCENARIOS {
        for fault in Fault::ALL {
            let Some((partial, md)) = run(name, fault, Some(false)) else {
                continue;
            };
            let (absent, _) = run(name, fault, Some(true)).unwrap();
            let (whole, _) = run(name, fault, None).unwrap();
            tried += 1;
            let at = format!("{name}, {fault:?}");
            // 1. No check passes on part of the evidence that fails without it. A check of
            // one other item (`coffee: ...` when tea's records are missing) has that item's
            // whole evidence.
            let failed_absent: Vec<(&Option<String>, &String)> = absent
                .checks
                .iter()
                .filter(|c| !c.pass)
                .map(|c| (&c.case, &c.name))
                .collect();
            let case_of = |name: &Option<String>| {
                partial
                    .cases
                    .iter()
                    .find(|c| Some(&c.name) == name.as_ref())
                    .unwrap_or(&partial.cases[0])
            };
            let of_another = |c: &model::CheckResult| {
                let case = case_of(&c.case);
                let item = fault.item(&case.loads);
                !c.name.contains(&item)
                    && fault
                        .items(&case.loads)
                        .iter()
                        .any(|i| c.name.starts_with(&format!("{i}:")))
            };
            for c in partial.checks.iter().filter(|c| c.pass && !of_another(c)) {
                assert!(
                    !failed_absent.contains(&(&c.case, &c.name)),
                    "{at}: {c:?} passed on partial evidence"
                );
            }
            // 2. A cell that reads the missing item (it differs from the whole run's) shows its
            // coverage; a row of another item of the same kind (a replica whose page answered)
            // is that item's whole evidence.
            let without = cells(&whole);
            for (k, cell) in cells(&partial) {
                let Some(other) = without.get(&k) else {
                    continue;
                };
                let case = case_of(&Some(k.0.clone()));
                let item = fault.item(&case.loads);
                // A row or a column of another item of the same kind (a replica whose page
                // answered, a load whose records were read) is that item's whole evidence.
                let other_item = |s: &str| {
                    s != item
                        && fault
                            .items(&case.loads)
                            .iter()
                            .any(|i| s == i || s.starts_with(&format!("{i} ")))
                };
                if other_item(&k.2) || other_item(&k.3) {
                    continue;
                }
                if other.to_string() != cell.to_string() {
                    assert!(
                        matches!(cell, Cell::Partial { .. } | Cell::Missing(_))
                            || says_coverage(&cell.to_string()),
                        "{at}: {k:?} reads {cell} with no coverage (whole: {other})"
                    );
                }
            }
            // 3. A finding that reads the missing item (the whole run does not say it) says
            // it is not whole.
            let said_absent: Vec<&String> = whole.cases.iter().flat_map(|c| &c.findings).collect();
            for c in &partial.cases {
                let item = fault.item(&c.loads);
                for f in &c.findings {
                    // A finding of one other item (`coffee: ...`) has its whole evidence.
                    let another = fault
                        .items(&c.loads)
                        .iter()
                        .any(|i| *i != item && f.starts_with(&format!("{i}:")));
                    if said_absent.contains(&f) || another {
                        continue;
                    }
                    assert!(
                        says_coverage(f),
                        "{at}: the finding speaks as if whole: {f}"
                    );
                    if f.contains(&item) {
                        assert!(
                            [
                                "missing",
                                "not measurable",
                                "not sampled",
                                "never answered",
                                "Partial:",
                                "Sampled in part",
                            ]
                            .iter()
                            .any(|w| f.contains(w)),
                            "{at}: the finding speaks of {item}: {f}"
                        );
                    }
                }
            }
            // The report says what is missing, once at least.
            assert!(
                md.contains(&fault.item(&partial.cases[0].loads)) || md.contains("not sampled"),
                "{at}: the report never names what is missing"
            );
        }
    }
    assert!(tried >= 20, "only {tried} scenario and fault pairs ran");
}
