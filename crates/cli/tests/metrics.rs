//! `--metrics-listen` scraped by a real Prometheus (Debian's `prometheus` package, started here
//! on loopback with a scratch config and storage, scraping every 500 ms): a `load` against a
//! real backend, the same load stopped by Ctrl-C, a `run` of the default scenario against real
//! nginx, and two agents with their coordinator. Everything is asserted through Prometheus' own
//! HTTP API against the run's own numbers: the request totals exactly, the p99 of the served
//! buckets to within the bucket's width, the case's reloads and actions; and every query of the
//! shipped Grafana dashboard runs.

use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const PB: &str = env!("CARGO_BIN_EXE_proxybench");

/// A real Prometheus in its own process group and scratch directory, stopped on drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus scraping each of `targets` (ports on 127.0.0.1) every 500 ms.
    fn start(targets: &[u16]) -> Prometheus {
        let bin = which("prometheus").expect(
            "prometheus is not installed: `make test-deps` installs Debian's prometheus package",
        );
        let dir = tempfile::tempdir().unwrap();
        let list: Vec<String> = targets.iter().map(|p| format!("'127.0.0.1:{p}'")).collect();
        let config = format!(
            "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\nscrape_configs:\n  - job_name: pb\n    static_configs:\n      - targets: [{}]\n",
            list.join(", ")
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", testkit::free_port())
            .parse()
            .unwrap();
        let child = Command::new(bin)
            .arg(format!(
                "--config.file={}",
                dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .process_group(0)
            .spawn()
            .unwrap();
        let p = Prometheus {
            child,
            addr,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !matches!(testkit::http_get(addr, "/-/ready"), Ok((200, _))) {
            assert!(Instant::now() < deadline, "prometheus did not get ready");
            std::thread::sleep(Duration::from_millis(100));
        }
        // Its discovery hands the targets to the scrapers some seconds after the start: wait
        // until each has been tried (down, for now), so scrapes cover the whole run.
        while p.query("up").len() < targets.len() {
            assert!(
                Instant::now() < deadline,
                "prometheus never scraped its targets"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        p
    }

    /// An instant query: each series' labels and value.
    fn query(&self, q: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        let v = self.api(&format!("/api/v1/query?query={}", encode(q)));
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let labels = serde_json::from_value(r["metric"].clone()).unwrap();
                let value = r["value"][1].as_str().unwrap().parse().unwrap();
                (labels, value)
            })
            .collect()
    }

    /// The one value of an instant query that must give one series.
    fn one(&self, q: &str) -> f64 {
        let r = self.query(q);
        assert_eq!(r.len(), 1, "{q}: {r:?}");
        r[0].1
    }

    /// A range query over [start, end] (Unix seconds): the number of series it gives.
    fn range_series(&self, q: &str, start: f64, end: f64) -> usize {
        let v = self.api(&format!(
            "/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step=1",
            encode(q)
        ));
        v["data"]["result"].as_array().unwrap().len()
    }

    fn api(&self, path: &str) -> Value {
        let (status, body) = testkit::http_get(self.addr, path).unwrap();
        assert_eq!(status, 200, "{path}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], "success", "{path}: {body}");
        v
    }

    /// Waits until a scrape of `port` has failed after its process exited: the scrape before
    /// it (the last one that answered) is then stored, so queries see everything served.
    fn await_target_gone(&self, port: u16) {
        let q = format!("up{{instance=\"127.0.0.1:{port}\"}} == 0");
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.query(&q).is_empty() {
            assert!(Instant::now() < deadline, "prometheus never saw :{port} go");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        testkit::stop_child(&mut self.child);
    }
}

/// A `proxybench backend` with a spread of latencies, stopped on drop.
struct Backend(Child, u16);

impl Backend {
    fn start() -> Backend {
        let port = testkit::free_port();
        let child = Command::new(PB)
            .args(["backend", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--profile", "latency=lognormal(median=2ms,sigma=0.6)"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        testkit::wait_listening(
            format!("127.0.0.1:{port}").parse().unwrap(),
            Duration::from_secs(10),
        );
        Backend(child, port)
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        testkit::stop_child(&mut self.0);
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// Percent-encodes a query for a URL.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The bucket bounds (seconds) around `v`: the largest bound at or below it (0 below the
/// first) and the first above it.
fn bucket_around(v: f64) -> (f64, f64) {
    let lo = openmetrics::BUCKETS_S
        .iter()
        .rev()
        .find(|&&b| b <= v)
        .copied()
        .unwrap_or(0.0);
    let hi = openmetrics::BUCKETS_S
        .iter()
        .find(|&&b| b > v)
        .copied()
        .unwrap_or(f64::INFINITY);
    (lo, hi)
}

/// What Prometheus holds for the load served on `port` equals the load's own JSON summary:
/// requests, responses by class, failures, sends, the latency count exactly; the p99 of the
/// buckets to within the width of the bucket holding the run's p99.
fn assert_load_matches(prom: &Prometheus, port: u16, summary: &Value) {
    prom.await_target_gone(port);
    let sel = format!("instance=\"127.0.0.1:{port}\",load=\"load\"");
    let last = |m: &str| prom.one(&format!("max_over_time({m}{{{sel}}}[10m])"));
    let requests = summary["requests"].as_u64().unwrap();
    assert!(requests > 0);
    assert_eq!(last("proxybench_load_requests_total"), requests as f64);
    assert_eq!(
        last("proxybench_load_latency_seconds_count"),
        requests as f64
    );
    let mut by_class = [0u64; 5];
    for (code, n) in summary["status"].as_object().unwrap() {
        by_class[code.parse::<usize>().unwrap() / 100 - 1] += n.as_u64().unwrap();
    }
    for (i, class) in ["1xx", "2xx", "3xx", "4xx", "5xx"].iter().enumerate() {
        let q = format!(
            "max_over_time(proxybench_load_responses_total{{{sel},class=\"{class}\"}}[10m])"
        );
        assert_eq!(prom.one(&q), by_class[i] as f64, "{class}");
    }
    let errors: u64 = summary["errors"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    let failures = prom.one(&format!(
        "sum(max_over_time(proxybench_load_failures_total{{{sel}}}[10m]))"
    ));
    assert_eq!(failures, errors as f64);
    let sent = summary["schedule"]["sent"].as_u64().unwrap();
    assert_eq!(last("proxybench_load_sent_total"), sent as f64);
    let p99_s = summary["latency"]["percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["p"] == 99.0)
        .unwrap()["us"]
        .as_f64()
        .unwrap()
        / 1e6;
    let q = prom.one(&format!(
        "histogram_quantile(0.99, max_over_time(proxybench_load_latency_seconds_bucket{{{sel}}}[10m]))"
    ));
    let (lo, hi) = bucket_around(p99_s);
    // The engine's percentile is the top of its HDR bin (3 significant digits): 0.1% of slack.
    let slack = (hi - lo) + p99_s * 1e-3;
    assert!(
        (q - p99_s).abs() <= slack,
        "histogram_quantile {q} s vs the run's p99 {p99_s} s (bucket {lo}..{hi})"
    );
    assert_eq!(last("proxybench_load_running"), 1.0);
    assert_eq!(
        prom.one(&format!(
            "min_over_time(proxybench_load_running{{{sel}}}[10m])"
        )),
        0.0,
        "the final scrape saw the load ended"
    );
}

#[test]
fn a_load_and_its_ctrl_c_reach_prometheus_exactly() {
    let ports = testkit::free_ports(2);
    let prom = Prometheus::start(&ports);
    let backend = Backend::start();
    let url = format!("http://127.0.0.1:{}/", backend.1);

    // A whole run: the process ends by itself after a scrape read its final values.
    let out = Command::new(PB)
        .args([
            "load", "-R", "400", "-c", "16", "-d", "4s", "--format", "json",
        ])
        .args(["--metrics-listen", &format!("127.0.0.1:{}", ports[0])])
        .args(["--metrics-linger", "30s", &url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/metrics"), "{err}");
    assert!(!err.contains("no scrape read"), "{err}");
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_load_matches(&prom, ports[0], &summary);

    // Ctrl-C in the middle: the seconds up to the stop are served, the last one too.
    let child = Command::new(PB)
        .args([
            "load", "-R", "400", "-c", "16", "-d", "60s", "--format", "json",
        ])
        .args(["--metrics-listen", &format!("127.0.0.1:{}", ports[1])])
        .args(["--metrics-linger", "30s", &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Stop it once Prometheus has seen requests counted.
    let q = format!(
        "proxybench_load_requests_total{{instance=\"127.0.0.1:{}\"}} > 0",
        ports[1]
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while prom.query(&q).is_empty() {
        assert!(Instant::now() < deadline, "no requests counted");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(700));
    // SAFETY: kill(2) takes no pointers; the pid is our child's.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("interrupted"), "{err}");
    assert!(!err.contains("no scrape read"), "{err}");
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(summary["elapsed_s"].as_f64().unwrap() < 50.0);
    assert_load_matches(&prom, ports[1], &summary);
}

#[test]
fn a_scenario_run_reaches_prometheus_with_its_cases_and_the_dashboard_queries_run() {
    let port = testkit::free_port();
    let prom = Prometheus::start(&[port]);
    let root = tempfile::tempdir().unwrap();
    let t0 = unix_now();
    let out = Command::new(PB)
        .args(["run", "default", "--quick", "--no-progress", "--results"])
        .arg(root.path())
        .args([
            "--metrics-listen",
            &port.to_string(),
            "--metrics-linger",
            "30s",
        ])
        .output()
        .unwrap();
    let t1 = unix_now();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("no scrape read"));
    prom.await_target_gone(port);
    let scenario = std::fs::read_dir(root.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let dir = std::fs::read_dir(scenario)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let data: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("data.json")).unwrap()).unwrap();
    let inst = format!("instance=\"127.0.0.1:{port}\"");
    assert_eq!(
        prom.one(&format!(
            "max_over_time(proxybench_build_info{{{inst},command=\"run\",scenario=\"default\"}}[10m])"
        )),
        1.0
    );
    for case in data["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let cs = format!("{inst},case=\"{name}\"");
        for l in case["loads"].as_array().unwrap() {
            let load = l["name"].as_str().unwrap();
            let q = format!(
                "max_over_time(proxybench_load_requests_total{{{cs},load=\"{load}\"}}[10m])"
            );
            assert_eq!(
                prom.one(&q),
                l["requests"].as_f64().unwrap(),
                "{name}/{load}"
            );
        }
        let mut actions: BTreeMap<String, f64> = BTreeMap::new();
        for e in case["events"].as_array().unwrap() {
            let not_run = e["error"]
                .as_str()
                .is_some_and(|m| m.starts_with("not run"));
            if !not_run {
                *actions
                    .entry(e["action"].as_str().unwrap().to_string())
                    .or_default() += 1.0;
            }
        }
        assert!(!actions.is_empty(), "the default scenario acts");
        for (action, n) in &actions {
            let q = format!(
                "max_over_time(proxybench_case_actions_total{{{cs},action=\"{action}\"}}[10m])"
            );
            assert_eq!(prom.one(&q), *n, "{name}: {action}");
        }
        let reloads = case["reloads"].as_array().unwrap();
        assert!(!reloads.is_empty(), "the default scenario reloads");
        let q = format!("max_over_time(proxybench_case_reloads_total{{{cs}}}[10m])");
        assert_eq!(prom.one(&q), reloads.len() as f64);
        let served = reloads.iter().filter(|r| r["error"].is_null()).count();
        let q = format!("max_over_time(proxybench_case_reload_seconds_count{{{cs}}}[10m])");
        assert_eq!(prom.one(&q), served as f64);
    }
    // Every query of the shipped dashboard parses and runs on this Prometheus over the run, with
    // its variables at "All"; each gives series, but for the state timeline's steps at work,
    // which a 500 ms scrape may miss.
    let dash_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana/proxybench-live.json");
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(dash_path).unwrap()).unwrap();
    let mut exprs: Vec<String> = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            exprs.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    for a in dash["annotations"]["list"].as_array().unwrap() {
        if let Some(e) = a["expr"].as_str() {
            exprs.push(e.to_string());
        }
    }
    assert!(exprs.len() >= 12, "{exprs:?}");
    for e in &exprs {
        let q = e
            .replace("$__rate_interval", "2s")
            .replace("$__interval", "2s")
            .replace("$load", ".*")
            .replace("$case", ".*")
            .replace("$agent", ".*");
        let n = prom.range_series(&q, t0, t1);
        if !q.contains("== 1") {
            assert!(n > 0, "dashboard query gives nothing: {q}");
        }
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Runs the binary with `args` and returns its output.
fn pb(args: &[&str]) -> Output {
    Command::new(PB).args(args).output().unwrap()
}

/// A bad metrics address, a taken port or a lone companion flag: one line, exit 2, before
/// anything runs (the target sees no connection, no results directory is made).
#[test]
fn bad_metrics_flags_exit_2_with_one_line_before_the_run() {
    let target = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    target.set_nonblocking(true).unwrap();
    let url = format!("http://{}/", target.local_addr().unwrap());
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let root = tempfile::tempdir().unwrap();
    let results = root.path().join("results");
    let token = root.path().join("token");
    std::fs::write(&token, "0123456789abcdef0123456789abcdef").unwrap();
    let results_s = results.to_str().unwrap();
    let token_s = token.to_str().unwrap();
    let free = testkit::free_port().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["load", "--metrics-listen", &free, "--agents", "2", &url],
            "--agents needs --platform kubernetes",
        ),
        (
            vec!["load", "-d", "1s", "--metrics-listen", "0.0.0.0:9464", &url],
            "0.0.0.0 is not a loopback address; the metrics would be open to other machines: add --metrics-allow-remote",
        ),
        (
            vec!["load", "-d", "1s", "--metrics-listen", ":9464", &url],
            "--metrics-allow-remote",
        ),
        (
            vec!["load", "-d", "1s", "--metrics-listen", &taken, &url],
            "cannot listen",
        ),
        (
            vec!["load", "-d", "1s", "--metrics-listen", "metrics.example:9464", &url],
            "the host must be an IP address or localhost",
        ),
        (
            vec!["load", "-d", "1s", "--metrics-allow-remote", &url],
            "--metrics-allow-remote goes with --metrics-listen",
        ),
        (
            vec!["load", "-d", "1s", "--metrics-listen", "0", "--metrics-linger", "5", &url],
            "--metrics-linger",
        ),
        (
            vec!["run", "default", "--quick", "--no-progress", "--results", results_s, "--metrics-listen", &taken],
            "cannot listen",
        ),
        (
            vec!["run", "default", "--quick", "--no-progress", "--results", results_s, "--metrics-listen", "192.0.2.1:9464"],
            "--metrics-allow-remote",
        ),
        (
            vec!["agent", "--listen", "127.0.0.1:0", "--token-file", token_s, "--metrics-listen", &taken],
            "cannot listen",
        ),
    ];
    for (args, want) in &cases {
        let out = pb(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err:?}");
        assert!(err.starts_with("proxybench: "), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: want {want:?} in {err:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert!(
        matches!(target.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "no load reached the target"
    );
    assert!(!results.exists(), "no results directory");
}

/// Agents serve their own shares with an `agent` label, the coordinator the merge: Prometheus
/// adds the agents' counts and buckets up to the merged result's, and reads the merge from the
/// coordinator.
#[test]
fn agents_and_their_coordinator_reach_prometheus_and_add_up() {
    let ports = testkit::free_ports(3);
    let prom = Prometheus::start(&ports);
    let backend = Backend::start();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "metrics-agents-token").unwrap();
    let mut agents = Vec::new();
    let mut hosts = Vec::new();
    for port in &ports[..2] {
        let mut child = Command::new(PB)
            .args(["agent", "--listen", "127.0.0.1:0", "--token-file"])
            .arg(&token)
            .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let addr = line
            .trim()
            .strip_prefix("proxybench agent listening on ")
            .unwrap_or_else(|| panic!("{line}"))
            .to_string();
        agents.push(Agent(child));
        hosts.push(addr);
    }
    let out = Command::new(PB)
        .args([
            "load", "-R", "400", "-c", "8", "-d", "3s", "--format", "json",
        ])
        .args(["--agent-hosts", &hosts.join(","), "--token-file"])
        .arg(&token)
        .args(["--metrics-listen", &format!("127.0.0.1:{}", ports[2])])
        .args(["--metrics-linger", "30s"])
        .arg(format!("http://127.0.0.1:{}/", backend.1))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    let requests = merged["requests"].as_f64().unwrap();
    assert!(requests > 0.0);
    // Each agent has been scraped since its load ended: its values are final.
    let ended = "proxybench_load_running{agent=~\".+\"} == 0";
    let deadline = Instant::now() + Duration::from_secs(30);
    while prom.query(ended).len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the agents' final values were not scraped"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    prom.await_target_gone(ports[2]);
    let per_agent = prom.query("max_over_time(proxybench_load_requests_total{agent=~\".+\"}[10m])");
    assert_eq!(per_agent.len(), 2, "{per_agent:?}");
    for (labels, n) in &per_agent {
        assert_eq!(labels["load"], "load");
        assert!(*n > 0.0, "{labels:?}");
    }
    assert_eq!(per_agent.iter().map(|(_, n)| n).sum::<f64>(), requests);
    let coordinator = format!("instance=\"127.0.0.1:{}\"", ports[2]);
    assert_eq!(
        prom.one(&format!(
            "max_over_time(proxybench_load_requests_total{{{coordinator}}}[10m])"
        )),
        requests
    );
    let p99_s = merged["latency"]["percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["p"] == 99.0)
        .unwrap()["us"]
        .as_f64()
        .unwrap()
        / 1e6;
    let q = prom.one(
        "histogram_quantile(0.99, sum by (le) (max_over_time(proxybench_load_latency_seconds_bucket{agent=~\".+\"}[10m])))",
    );
    let (lo, hi) = bucket_around(p99_s);
    assert!(
        (q - p99_s).abs() <= (hi - lo) + p99_s * 1e-3,
        "agents' buckets added: p99 {q} s vs the merge's {p99_s} s (bucket {lo}..{hi})"
    );
}

/// An agent process, stopped on drop.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        testkit::stop_child(&mut self.0);
    }
}
