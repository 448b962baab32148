//! The guard against reports that speak without data: every built-in scenario with an
//! analysis is recorded in a Kubernetes shape (proxy pods, loads on agents, every cluster
//! collector failed) and in an external shape (a proxy we attach to, no logs), each with every
//! collector absent, and analysed and rendered through the real stages. The absent collectors'
//! raw fields are then filled twice with different data: a report that reads any of them
//! changes between the two, so the two reports must be byte for byte the same. Each report
//! must also say which collectors were not sampled, and no check may pass on what they would
//! have given.

use analysis::{analyse, record};
use model::{
    BackendCounters, CaseRecord, ClusterEvent, ClusterRecord, Collector, DistributedLoad, Env,
    ErrorKind, Event, Latency, LoadMode, LoadSummary, MeasuredRun, Percentile, PlatformInfo,
    PodChange, PodMetric, RateStats, ReadinessSample, RestartRecord, RunRecord, RunResults,
    ScrapeSample, StubSample,
};
use scenario::catalogue;
use scenario::{Case, ParseOptions, PlatformKind, Scenario};
use std::collections::BTreeMap;

/// The two shapes a run takes when this machine cannot see inside the proxy.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Shape {
    /// Proxy pods on a cluster, loads on agents, every cluster collector failed.
    Kubernetes,
    /// A proxy proxybench attached to and did not start, with no access to its logs.
    External,
}

fn load(spec: &scenario::LoadSpec, elapsed_s: f64) -> LoadSummary {
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
        requests: 997,
        bytes_read: 0,
        bytes_written: 0,
        status: BTreeMap::from([(200, 995), (503, 2)]),
        errors: BTreeMap::from([(ErrorKind::ReadIdleClosed, 3)]),
        error_messages: BTreeMap::new(),
        connects: u64::from(spec.connections) + 3,
        retried: 0,
        latency: Latency {
            percentiles: vec![
                Percentile { p: 50.0, us: 800 },
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

/// What the absent collectors would have held: different for each `seed`, so that a report
/// reading any of it differs between seeds.
fn fill_absent(c: &mut CaseRecord, seed: u64, shape: Shape) {
    let replicas = ["nginx-0", "nginx-1", "nginx-2"];
    c.readiness = (0..4 * seed)
        .map(|i| ReadinessSample {
            t_s: i as f64 * 0.5,
            replica: replicas[i as usize % 3].into(),
            ok: (i + seed) % 3 != 0,
            ms: Some(13.7 * seed as f64 + i as f64),
        })
        .collect();
    c.stub_samples = replicas
        .iter()
        .enumerate()
        .map(|(i, r)| StubSample {
            t_s: 1.0,
            replica: (*r).into(),
            active: seed * 7 + i as u64,
            accepts: seed * 13,
            handled: seed * 13,
            requests: seed * 1009 + i as u64 * 31,
            reading: seed,
            writing: seed,
            waiting: seed * 2,
        })
        .collect();
    let logs = &mut c.logs;
    logs.access_lines = 5000 + seed;
    logs.access_status = BTreeMap::from([(200, 4000 + seed), (499, seed * 3), (502, seed)]);
    logs.upstream_status = BTreeMap::from([("200".into(), 3000 + seed), ("502, 200".into(), seed)]);
    logs.upstream_addr = BTreeMap::from([
        ("198.18.0.10:8080".into(), 1500 + seed),
        ("198.18.0.11:8080".into(), 1400 + 2 * seed),
        ("-".into(), seed),
    ]);
    logs.error_levels = BTreeMap::from([("warn".into(), seed * 2), ("error".into(), seed)]);
    logs.status_origin = BTreeMap::from([("proxy".into(), seed), ("backend".into(), seed + 1)]);
    logs.limit_req_status =
        BTreeMap::from([("PASSED".into(), 900 + seed), ("REJECTED".into(), seed)]);
    c.backends = ["app-0", "app-1"]
        .iter()
        .enumerate()
        .map(|(i, n)| BackendCounters {
            name: (*n).into(),
            addr: format!("198.18.0.1{i}:8080"),
            requests: 480 + seed * 11 + i as u64 * 7,
            connections: seed * 5 + i as u64,
            by_status: BTreeMap::from([(200, 480 + seed * 11)]),
            ..Default::default()
        })
        .collect();
    if let (Shape::Kubernetes, Some(k)) = (shape, &mut c.cluster) {
        k.pods = (0..seed + 2)
            .map(|i| PodChange {
                t_s: i as f64,
                pod: format!("proxy-{}", i % 3),
                role: "proxy".into(),
                phase: if i == seed { "Deleted" } else { "Running" }.into(),
                ready: i % 2 == 0,
                terminating: false,
            })
            .collect();
        k.restarts = (0..seed)
            .map(|i| RestartRecord {
                t_s: i as f64,
                pod: "proxy-0".into(),
                container: "proxy".into(),
                count: i as u32 + 1,
                reason: "Error".into(),
                added: Some(1),
            })
            .collect();
        k.warnings = vec![ClusterEvent {
            t_s: 2.0,
            object: "Pod/proxy-1".into(),
            reason: "Unhealthy".into(),
            message: format!("probe failed {seed} times"),
            count: seed as u32,
            added: Some(seed as u32),
        }];
        k.metrics = vec![PodMetric {
            t_s: 1.0,
            pod: "proxy-0".into(),
            cpu_millicores: 100.0 * seed as f64,
            memory_bytes: seed << 20,
        }];
        k.scrapes = vec![ScrapeSample {
            t_s: 1.0,
            namespace: String::new(),
            pod: "proxy-0".into(),
            metric: "nginx_reloads_total".into(),
            labels: String::new(),
            value: seed as f64,
            kind: "gauge".into(),
        }];
    }
}

/// One case as the runner would record it in `shape`, every collector absent with why.
fn case_result(case: &Case, shape: Shape, seed: u64) -> CaseRecord {
    let elapsed_s = case.steps.last().map_or(10.0, |s| s.at.as_secs_f64() + 5.0);
    let mut c = CaseRecord {
        name: case.name.clone(),
        elapsed_s,
        loads: case.loads.iter().map(|l| load(l, elapsed_s)).collect(),
        events: case
            .steps
            .iter()
            .map(|s| Event {
                t_s: s.at.as_secs_f64(),
                action: "action".into(),
                detail: String::new(),
                duration_ms: 250.0,
                error: None,
                limit: false,
            })
            .collect(),
        ..Default::default()
    };
    let why = match shape {
        Shape::Kubernetes => "the proxy runs in pods",
        Shape::External => "an external target has no admin listener and no status page",
    };
    c.absent = BTreeMap::from([
        (Collector::Readiness, why.to_string()),
        (Collector::StatusPages, why.to_string()),
        (
            Collector::BackendCounters,
            "the backends' final counters were not read".to_string(),
        ),
    ]);
    c.logs.missing = Some(match shape {
        Shape::Kubernetes => "the log API refused the proxy pods' logs".into(),
        Shape::External => "the external target gives no access log".into(),
    });
    if shape == Shape::Kubernetes {
        c.cluster = Some(ClusterRecord {
            namespace: "proxybench-test".into(),
            server_version: "v1.34.4".into(),
            absent: vec![
                "pod watch: forbidden".into(),
                "events: forbidden".into(),
                "metrics API: not served by this cluster".into(),
                "Prometheus scrape: no pod matched".into(),
            ],
            ..Default::default()
        });
        c.distributed = case
            .loads
            .iter()
            .map(|l| DistributedLoad {
                load: l.name.clone(),
                place: "2 pods of Job agents-test".into(),
                files: format!("agents/{}/{}", case.name, l.name),
                agents: vec![],
                clock_uncertainty_us: vec![],
                lost: vec![],
            })
            .collect();
    }
    fill_absent(&mut c, seed, shape);
    c
}

fn env(shape: Shape) -> Env {
    let mut env = proxybench_bench::env::capture(Some("nginx"), "nginx 1.22.1".into());
    env.sysctls.clear();
    if shape == Shape::Kubernetes {
        env.platform = Some(PlatformInfo {
            kind: "kubernetes".into(),
            context: "test".into(),
            namespace: "proxybench-test".into(),
            kept: false,
            ..Default::default()
        });
    }
    env
}

/// Records `scenario` in `shape` with absent collectors filled from `seed`, analyses the
/// results directory, and returns the report and the analysed results.
fn report(name: &str, shape: Shape, seed: u64) -> (String, RunResults) {
    let src = catalogue::builtin(name).unwrap();
    let mut opts = ParseOptions {
        skip_file_checks: true,
        ..analysis::parse_options()
    };
    if shape == Shape::Kubernetes {
        opts.platform.kind = Some(PlatformKind::Kubernetes);
    }
    let scn = Scenario::parse_with(&src, true, &opts).unwrap();
    let cases: Vec<CaseRecord> = scn
        .cases
        .iter()
        .map(|c| case_result(c, shape, seed))
        .collect();
    let env = env(shape);
    let dir = tempfile::tempdir().unwrap();
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
            started_at: "2026-11-27T10:00:00Z".into(),
            quick: true,
            partial: false,
            abort_reason: None,
            env,
            cases: cases.clone(),
            findings: vec![],
        },
    };
    record::write_scenario(dir.path(), &scn).unwrap();
    for c in &cases {
        // The agents keep no per-request records; an external shape's loads ran here.
        let records = c
            .loads
            .iter()
            .filter(|l| !c.distributed.iter().any(|d| d.load == l.name))
            .map(|l| (l.name.clone(), Vec::new()))
            .collect();
        record::write_requests(dir.path(), c, &records).unwrap();
    }
    record::write_record(dir.path(), &rec).unwrap();
    let results = analyse::analyse(dir.path()).unwrap();
    (report::render_markdown(&results), results)
}

/// The scenarios whose analyses read collectors.
const SCENARIOS: &[&str] = &[
    "zero-downtime-scaling",
    "proxy-overhead",
    "load-balancing",
    "burst-handling",
    "scale",
];

#[test]
fn no_report_number_depends_on_an_absent_collector() {
    for name in SCENARIOS {
        for shape in [Shape::Kubernetes, Shape::External] {
            let (a, results) = report(name, shape, 1);
            let (b, _) = report(name, shape, 2);
            if a != b {
                let first = a
                    .lines()
                    .zip(b.lines())
                    .find(|(x, y)| x != y)
                    .map(|(x, y)| format!("\n  seed 1: {x}\n  seed 2: {y}"))
                    .unwrap_or_else(|| "(the reports differ in length)".into());
                panic!("{name} ({shape:?}): the report read an absent collector:{first}");
            }
            assert!(
                a.contains("not sampled"),
                "{name} ({shape:?}): the report never says what was not sampled"
            );
            assert!(
                !a.contains("No replica failed a readiness probe"),
                "{name} ({shape:?}): a readiness finding without probes"
            );
            // A check that passes here passed on data the run never had, unless it reads only
            // the loads: their summaries, and their per-request records where they ran here.
            let mut absent = vec!["access log", "backend", "readiness", "status page"];
            if shape == Shape::Kubernetes {
                absent.push("inside an action");
            }
            for c in results.checks.iter().filter(|c| c.pass) {
                assert!(
                    !absent.iter().any(|a| c.name.contains(a)),
                    "{name} ({shape:?}): {c:?} passed without its collector"
                );
            }
        }
    }
}
