//! The Kubernetes platform against the real test cluster (`make test-k8s`): the real CLI runs a
//! small scenario with `--platform kubernetes`, and the results directory's data.json and logs
//! are checked. Each test runs in its own namespace `ktests-*`, which the run deletes.

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

#[path = "common/k8s.rs"]
mod kube;
use kube::{
    access_count, backend_requests, cluster, data, errors, failed, find, leftover, namespace,
    run_command, test_namespace, var, SCENARIO_HEAD,
};

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_gradual_scale_counts_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("gradual.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"k8s-gradual\"
description = \"proxy replicas 1 -> 3 -> 1, gradual and graceful, under open-loop load\"
{SCENARIO_HEAD}
[[loads]]
name = \"coffee\"
url = \"http://cafe.example.com/coffee\"
rate = 200
connections = 16
duration = \"20s\"
retry_idle_closed = true

[[cases]]
name = \"main\"
actions = [
  {{ at = \"1s\", scale_replicas = {{ to = 3, step = \"2s\" }} }},
  {{ at = \"7s\", scale_replicas = {{ to = 1, step = \"1s\" }} }},
]
"
        ),
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("gradual");
    let out = kube::run_k8s_as_role(&root, &scenario, &ns, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the run failed: {stderr}");
    let d = data(&root, &out);
    let case = &d["cases"][0];
    let events = case["events"].as_array().unwrap();
    assert!(
        events.iter().all(|e| e["error"].is_null()),
        "failed action: {events:?}\n{stderr}"
    );
    let load = &case["loads"][0];
    let requests = load["requests"].as_u64().unwrap();
    // An open loop of 200 r/s for 20 s sends exactly 4,000, and none is lost (below). Each step
    // down lasts the pod's preStop sleep (5 s) and its stop, so the second one's SIGQUIT comes
    // about 17 s into the load.
    assert_eq!(requests, 4000, "{load}");
    // Zero failed requests. HTTP/1.1 keep-alive has one race in a graceful stop: nginx closes
    // its idle keep-alive connections at SIGQUIT, and a request the client sent on one at that
    // instant is cut off unanswered. The load sends such a request again on a new connection
    // (`retry_idle_closed`, as Go's net/http under vegeta in NGF's tests does) and counts it
    // as retried: only while a step down runs, at most once per connection per stopped replica.
    let lost = failed(load);
    assert_eq!(lost, 0, "failed requests: {load}");
    let retried = load["retried"].as_u64().unwrap_or(0);
    assert!(
        retried <= 16 * 2,
        "more than one retry per connection per stopped replica: {load}"
    );
    let downs: Vec<(f64, f64)> = events
        .iter()
        .filter(|e| {
            let d = e["detail"].as_str().unwrap_or("");
            let n: Vec<u32> = d
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|x| x.parse().ok())
                .collect();
            n.len() >= 2 && n[1] < n[0]
        })
        .map(|e| {
            let t = e["t_s"].as_f64().unwrap();
            (t, t + e["duration_ms"].as_f64().unwrap() / 1e3)
        })
        .collect();
    assert_eq!(downs.len(), 2, "two steps down: {events:?}");
    for sec in load["timeline"].as_array().unwrap() {
        let n = sec["retried"].as_u64().unwrap_or(0);
        // A one-second bucket [t, t + 1) that meets a step's span (plus 2 s, the analysis's
        // own window).
        let t = sec["t"].as_f64().unwrap();
        assert!(
            n == 0 || downs.iter().any(|(a, b)| t + 1.0 > *a && t < b + 2.0),
            "{n} retries in second {t}, outside the steps down {downs:?}: {load}"
        );
    }
    // Every request is in one proxy pod's access log, deleted pods' logs included.
    let (lines, pods) = access_count(&root);
    assert!(pods >= 3, "access logs of 3 pods: {pods}");
    // A cut-off first attempt nginx had read and logged would be in the log twice: the lines
    // lie between the answers and the answers plus the retries.
    assert!(
        (requests..=requests + retried).contains(&lines),
        "access-log lines {lines} over {pods} pods: {requests} answers, {retried} retried"
    );
    eprintln!(
        "gradual: {requests} requests, 0 failed ({retried} retried after the close race), \
         {lines} access-log lines over {pods} pods"
    );
    // Readiness: each new proxy pod was seen not ready, then ready, at times in order.
    let changes = case["cluster"]["pods"].as_array().unwrap();
    let proxy_pods: BTreeSet<&str> = changes
        .iter()
        .filter(|c| c["role"] == "proxy")
        .filter_map(|c| c["pod"].as_str())
        .collect();
    assert!(proxy_pods.len() >= 3, "proxy pods: {proxy_pods:?}");
    let mut turned_ready = 0;
    for pod in &proxy_pods {
        let seq: Vec<(f64, bool)> = changes
            .iter()
            .filter(|c| c["pod"].as_str() == Some(*pod))
            .map(|c| (c["t_s"].as_f64().unwrap(), c["ready"].as_bool().unwrap()))
            .collect();
        assert!(
            seq.windows(2).all(|w| w[0].0 <= w[1].0),
            "{pod}: times in order: {seq:?}"
        );
        if let Some(i) = seq.iter().position(|(_, r)| !r) {
            if seq[i..].iter().any(|(_, r)| *r) {
                turned_ready += 1;
            }
        }
    }
    eprintln!("gradual: {turned_ready} proxy pods went not ready -> ready");
    assert!(
        turned_ready >= 2,
        "the 2 new proxy pods went from not ready to ready: {changes:?}"
    );
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}

/// Access-log lines of every proxy pod of the run, parsed.
fn access_lines(root: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for p in find(root, "access.log") {
        for l in std::fs::read_to_string(&p).unwrap().lines() {
            if !l.trim().is_empty() {
                out.push(serde_json::from_str(l).unwrap_or_else(|e| panic!("{p:?}: {e}: {l}")));
            }
        }
    }
    out
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_grow_routes_and_set_profile() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("grow.toml");
    // The grown routes go to a group of their own, so the cafe group's counters are the
    // load's alone and the probe group's are the time-to-ready probe's alone. Action times
    // count from when the stack serves (as the load's start does): set_profile at 11 s leaves
    // seconds of load on both sides of it, after the growth's reloads.
    std::fs::write(
        &scenario,
        format!(
            "name = \"k8s-grow\"
description = \"routes 1 -> 9, 2 per step, on 2 proxy pods beside a load on /coffee; cafe's latency 1 ms -> 30 ms\"
{}
[[backends]]
name = \"probe\"
count = 1

[[proxy.upstreams]]
name = \"probe\"
backends = \"probe\"

[[loads]]
name = \"coffee\"
url = \"http://cafe.example.com/coffee\"
rate = 100
connections = 8
duration = \"16s\"

[[cases]]
name = \"main\"
proxy = {{ replicas = 2 }}
actions = [
  {{ at = \"1s\", grow = {{ what = \"routes\", to = 9, by = 2, upstream = \"probe\" }} }},
  {{ at = \"11s\", set_profile = {{ group = \"cafe\", profile = \"latency=fixed(30ms)\" }} }},
]
",
            SCENARIO_HEAD.replace(
                "count = 2\n",
                "count = 2\nprofile = \"latency=fixed(1ms)\"\n"
            )
        ),
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("grow");
    let out = kube::run_k8s_as_role(&root, &scenario, &ns, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the run failed: {stderr}");
    let d = data(&root, &out);
    let case = &d["cases"][0];
    let events = case["events"].as_array().unwrap();
    assert!(
        events.iter().all(|e| e["error"].is_null()),
        "failed action: {events:?}\n{stderr}"
    );
    // Four steps (1 -> 3 -> 5 -> 7 -> 9), each a generation, each reloading both pods.
    let steps: Vec<&Value> = events.iter().filter(|e| e["action"] == "grow").collect();
    assert_eq!(steps.len(), 4, "{events:?}");
    let reloads = case["reloads"].as_array().unwrap();
    assert_eq!(reloads.len(), 8, "{reloads:?}");
    let generations: BTreeSet<u64> = reloads
        .iter()
        .map(|r| r["generation"].as_u64().unwrap())
        .collect();
    assert_eq!(generations, (2..=5).collect(), "{reloads:?}");
    let lines = access_lines(&root);
    let served = lines
        .iter()
        .map(|l| l["generation"].as_u64().unwrap())
        .max();
    assert_eq!(
        served,
        Some(steps.len() as u64 + 1),
        "generations = steps + 1"
    );
    // Every step's newest route was ready (3 answers of 200 in a row) and, in the access logs
    // of both pods, answered 200 only from its own generation on, 404 only before it.
    let ready = case["ready"].as_array().unwrap();
    assert_eq!(ready.len(), 4, "{ready:?}");
    for (i, r) in ready.iter().enumerate() {
        let generation = i as u64 + 2;
        let route = format!("/route-{}", 2 * i + 2);
        assert!(r["error"].is_null(), "{r}");
        let ttr = r["ready_ms"].as_f64().unwrap_or_else(|| panic!("{r}"));
        assert!(r["item"].as_str().unwrap().ends_with(&route), "{r}");
        assert_eq!(r["generation"].as_u64(), Some(generation), "{r}");
        let of: Vec<(u64, u64)> = lines
            .iter()
            .filter(|l| l["uri"] == route.as_str())
            .map(|l| {
                (
                    l["status"].as_u64().unwrap(),
                    l["generation"].as_u64().unwrap(),
                )
            })
            .collect();
        let ok = of.iter().filter(|(s, _)| *s == 200).count();
        assert!(ok >= 3, "{route}: {of:?}");
        assert!(
            of.iter()
                .all(|(s, g)| (*s == 200 && *g >= generation) || (*s == 404 && *g < generation)),
            "{route} (generation {generation}): {of:?}"
        );
        eprintln!("grow: {route} ready after {ttr:.0} ms; access log (status, generation): {of:?}");
    }
    // Counted three ways: clients, access-log lines of all proxy pods, backends.
    let load = &case["loads"][0];
    let requests = load["requests"].as_u64().unwrap();
    let coffee = lines.iter().filter(|l| l["uri"] == "/coffee").count() as u64;
    assert_eq!(
        coffee, requests,
        "access-log lines of /coffee = client count"
    );
    assert_eq!(load["status"]["200"].as_u64(), Some(requests), "{load}");
    assert_eq!(
        backend_requests(case, "cafe"),
        requests,
        "the cafe pods' final counters = client count: {}",
        case["backends"]
    );
    let probe_200 = lines
        .iter()
        .filter(|l| l["uri"] != "/coffee" && l["status"] == 200)
        .count() as u64;
    assert_eq!(
        backend_requests(case, "probe"),
        probe_200,
        "{}",
        case["backends"]
    );
    let names: Vec<&str> = case["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cafe-0", "cafe-1", "probe-0"]);
    assert_eq!(
        case["cluster"]["counters_missing"],
        serde_json::json!([]),
        "{}",
        case["cluster"]
    );
    // set_profile: the per-second median moves from ~1 ms to ~30 ms.
    let sp = events
        .iter()
        .find(|e| e["action"] == "set_profile")
        .unwrap();
    let at = sp["t_s"].as_f64().unwrap();
    let done = at + sp["duration_ms"].as_f64().unwrap() / 1e3;
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for s in load["timeline"].as_array().unwrap() {
        let t = s["t"].as_f64().unwrap();
        let p50 = s["p50_us"].as_u64().unwrap();
        if s["requests"].as_u64().unwrap() < 20 {
            continue;
        }
        if t + 1.0 <= at {
            before.push(p50);
        } else if t >= done {
            after.push(p50);
        }
    }
    eprintln!("set_profile at {at:.2}s: p50 per second before {before:?} us, after {after:?} us");
    assert!(
        before.len() >= 2 && after.len() >= 3,
        "{before:?} {after:?}"
    );
    assert!(before.iter().all(|p| *p < 15_000), "{before:?}");
    assert!(
        after.iter().all(|p| (30_000..60_000).contains(p)),
        "{after:?}"
    );
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}

/// The case's clock starts when the stack serves, not when the stage begins: on Kubernetes the
/// stage takes seconds (pods Ready, the Service answering), and an action at 1 s must still come
/// a second into the load. Checked against the record: the load's seconds before the reload's
/// event hold about a second of its fixed rate, the stage's length is a finding, and the pod
/// changes of the stage are before the origin (negative), on the same clock as the load.
#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_an_action_at_1s_comes_a_second_into_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("origin.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"k8s-origin\"
description = \"a reload at 1 s of a 4 s load at 100 requests per second\"
{SCENARIO_HEAD}
[[loads]]
name = \"coffee\"
url = \"http://cafe.example.com/coffee\"
rate = 100
connections = 4
duration = \"4s\"

[[cases]]
name = \"main\"
actions = [{{ at = \"1s\", reload = true }}]
"
        ),
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("origin");
    let out = kube::run_k8s_as_role(&root, &scenario, &ns, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the run failed: {stderr}");
    let d = data(&root, &out);
    let case = &d["cases"][0];
    let ev = case["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "reload")
        .unwrap_or_else(|| panic!("no reload event: {}", case["events"]));
    assert!(ev["error"].is_null(), "{ev}");
    let at = ev["t_s"].as_f64().unwrap();
    let load = case["loads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "coffee")
        .unwrap();
    let timeline = load["timeline"].as_array().unwrap();
    let first = timeline
        .iter()
        .find(|s| s["requests"].as_u64().unwrap() > 0)
        .unwrap_or_else(|| panic!("no request in {timeline:?}"));
    let first_t = first["t"].as_f64().unwrap();
    // The requests of the seconds that ended before the reload began.
    let before: u64 = timeline
        .iter()
        .filter(|s| s["t"].as_f64().unwrap() + 1.0 <= at)
        .map(|s| s["requests"].as_u64().unwrap())
        .sum();
    let stage = case["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .find(|f| f.starts_with("The stage took "))
        .unwrap_or_else(|| panic!("no stage finding: {}", case["findings"]))
        .to_string();
    let stage_s: f64 = stage["The stage took ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let proxy_ready: Vec<f64> = case["cluster"]["pods"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == "proxy" && p["ready"] == true)
        .map(|p| p["t_s"].as_f64().unwrap())
        .collect();
    eprintln!(
        "stage {stage_s:.2} s; first load second at {first_t}, reload at {at:.2} s, \
         {before} requests before it; proxy pods Ready at {proxy_ready:?}"
    );
    // The load starts at 0 on the case's clock; the reload a second later, not at once.
    assert_eq!(first_t, 0.0, "{timeline:?}");
    assert!((1.0..2.0).contains(&at), "reload at {at} s");
    // 100 requests per second: the second before the reload holds about 100 of them.
    assert!(
        (90..=110).contains(&before),
        "{before} requests before the reload"
    );
    // The stage took seconds on the cluster, and its pods were Ready before the case's clock
    // started: the same clock, moved to when the stack served.
    assert!(stage_s > 1.0, "{stage}");
    assert!(
        !proxy_ready.is_empty() && proxy_ready[0] < 0.0 && proxy_ready[0] > -stage_s,
        "{proxy_ready:?} (stage {stage_s} s)"
    );
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_killed_and_drained_backends_keep_their_counts() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("backends.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"k8s-backends\"
description = \"cafe-1 killed, restarted (its replacement joins after a reload), cafe-0 drained\"
{}
[[loads]]
name = \"coffee\"
url = \"http://cafe.example.com/coffee\"
rate = 100
connections = 8
duration = \"13s\"

# Action times count from the case's start, stand-up included (about 4 s on the test cluster).
[[cases]]
name = \"main\"
actions = [
  {{ at = \"8s\", kill_backend = \"cafe-1\" }},
  {{ at = \"9s\", restart_backend = \"cafe-1\" }},
  {{ at = \"11s\", drain_backend = \"cafe-0\" }},
]
",
            SCENARIO_HEAD.replace(
                "count = 2\n",
                "count = 2\nprofile = \"latency=fixed(20ms)\"\n"
            )
        ),
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("backends");
    let out = kube::run_k8s_as_role(&root, &scenario, &ns, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the run failed: {stderr}");
    let d = data(&root, &out);
    let case = &d["cases"][0];
    let events = case["events"].as_array().unwrap();
    assert!(
        events.iter().all(|e| e["error"].is_null()),
        "failed action: {events:?}\n{stderr}"
    );
    for e in events {
        eprintln!("backends: {} {}", e["action"], e["detail"]);
    }
    // restart_backend reloaded the proxy with the replacement's address.
    assert_eq!(case["reloads"].as_array().unwrap().len(), 1);
    // Every pod that ran has its final counts, the two deleted mid-run included, named in
    // order of creation as locally: cafe-0, cafe-1, then the two replacements.
    assert_eq!(
        case["cluster"]["counters_missing"],
        serde_json::json!([]),
        "{}",
        case["cluster"]
    );
    let backends = case["backends"].as_array().unwrap();
    let names: Vec<&str> = backends
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["cafe-0", "cafe-1", "cafe-2", "cafe-3"],
        "{backends:?}"
    );
    for b in &backends[..2] {
        assert!(b["requests"].as_u64().unwrap() > 0, "{b}");
    }
    let load = &case["loads"][0];
    let ok = load["status"]["200"].as_u64().unwrap_or(0);
    eprintln!(
        "backends: {ok} answered 200 of {} requests; backends {:?}",
        load["requests"],
        backends
            .iter()
            .map(|b| (b["name"].as_str().unwrap(), b["requests"].as_u64().unwrap()))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        backend_requests(case, "cafe"),
        ok,
        "every 200 the clients got is one response a backend pod completed"
    );
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_bad_manifest_names_file_and_api_message() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("bad-deployment.yaml");
    // The selector does not match the template's labels: the API server refuses it.
    std::fs::write(
        &manifest,
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: mismatched
spec:
  replicas: 1
  selector:
    matchLabels:
      app: one
  template:
    metadata:
      labels:
        app: two
    spec:
      containers:
        - name: c
          image: localhost/pause:1
",
    )
    .unwrap();
    let scenario = dir.path().join("bad.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"k8s-bad-manifest\"
description = \"an apply the API server refuses\"
{SCENARIO_HEAD}
[[loads]]
name = \"coffee\"
url = \"http://cafe.example.com/coffee\"
rate = 20
connections = 2
duration = \"3s\"

[[cases]]
name = \"main\"
actions = [{{ at = \"1s\", apply = {:?} }}]
",
            manifest.display().to_string()
        ),
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("bad");
    let out = kube::run_k8s_as_role(&root, &scenario, &ns, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a failed action fails the run: {stderr}"
    );
    let d = data(&root, &out);
    let events = d["cases"][0]["events"].as_array().unwrap();
    let apply = events
        .iter()
        .find(|e| e["action"] == "apply")
        .unwrap_or_else(|| panic!("no apply event: {events:?}\n{stderr}"));
    let error = apply["error"].as_str().expect("the apply failed");
    let detail = apply["detail"].as_str().unwrap_or("");
    assert!(
        error.contains("bad-deployment.yaml") || detail.contains("bad-deployment.yaml"),
        "names the file: {apply}"
    );
    eprintln!("bad manifest: {error}");
    assert!(
        error.contains("selector") && error.contains("does not match"),
        "the API server's message: {apply}"
    );
    assert_eq!(
        d["env"]["platform"]["namespace"].as_str(),
        Some(&*ns),
        "{}",
        d["env"]
    );
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_force_delete_is_graceful_and_attributed() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("kill.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"k8s-kill\"
description = \"one of 2 proxy replicas killed (grace 0) under open-loop load\"
{}
[[loads]]
name = \"coffee\"
url = \"http://cafe.example.com/coffee\"
rate = 200
connections = 16
duration = \"8s\"

[[cases]]
name = \"main\"
proxy = {{ replicas = 2 }}
actions = [{{ at = \"3s\", stop_replica = {{ mode = \"kill\" }} }}]
",
            // Requests of 50 ms keep about 10 in flight, so the kill can catch some.
            SCENARIO_HEAD.replace(
                "count = 2\n",
                "count = 2\nprofile = \"latency=fixed(50ms)\"\n"
            )
        ),
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("kill");
    let out = kube::run_k8s_as_role(&root, &scenario, &ns, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the run failed: {stderr}");
    let d = data(&root, &out);
    let case = &d["cases"][0];
    let events = case["events"].as_array().unwrap();
    let stop = events
        .iter()
        .position(|e| e["action"] == "stop_replica")
        .unwrap_or_else(|| panic!("no stop_replica event: {events:?}\n{stderr}"));
    assert!(events[stop]["error"].is_null(), "{}", events[stop]);
    let load = &case["loads"][0];
    let total = failed(load);
    let windows: Vec<&Value> = case["disruptions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["load"] == "coffee" && w["event"].as_u64() == Some(stop as u64))
        .collect();
    assert_eq!(
        windows.len(),
        1,
        "one window for the kill: {}",
        case["disruptions"]
    );
    let attributed = windows[0]["failed"].as_u64().unwrap();
    eprintln!(
        "kill: {} requests, {total} failed, {attributed} attributed to {}: {}",
        load["requests"], events[stop]["detail"], windows[0]["by_cause"]
    );
    assert!(
        windows[0]["attempts"].as_u64().unwrap() > 0,
        "{}",
        windows[0]
    );
    // A force delete is not a SIGKILL on Kubernetes: the kubelet still stops the container with
    // its image's stop signal (nginx's graceful SIGQUIT) and a grace of at least 2 s, so the
    // 50 ms requests in flight are answered. What is left to lose is the close race of a
    // kept-alive connection: at most one request on each of the 16, and each inside the kill's
    // window. (Attribution of real losses is tested by the local kill cases, where a kill is
    // SIGKILL.)
    assert!(
        total <= 16,
        "a graceful stop costs at most one request per connection: {load}"
    );
    assert_eq!(
        attributed, total,
        "every failure falls after the kill: {load}"
    );
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}

/// Starts `proxybench run SCENARIO --platform kubernetes` in the background without
/// `--namespace` (the run makes its own), as ServiceAccount `bench` of `account` bound to the
/// ClusterRole `k8s rbac --scenario` prints for such runs, waits until its proxy pod serves,
/// lets the load run `after`, interrupts it (SIGINT, as Ctrl-C) and returns its output, how
/// long it took to exit and the namespace the run made.
fn interrupt_k8s_run(
    root: &Path,
    scenario: &Path,
    extra: &[&str],
    after: std::time::Duration,
    account: &str,
) -> (Output, std::time::Duration, String) {
    use std::time::{Duration, Instant};
    let before = kube::made_namespaces(&[]);
    let kc = kube::bound_cluster_kubeconfig(account, root.parent().unwrap(), Some(scenario));
    let child = kube::with_flag(
        run_command(root, "", extra),
        "--kubeconfig",
        Some(kc.to_str().unwrap()),
    )
    .arg(scenario)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let cluster = cluster();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut made = Vec::new();
    loop {
        if made.is_empty() {
            made = kube::made_namespaces(&before);
        }
        assert!(made.len() <= 1, "one namespace made by the run: {made:?}");
        let pods = made
            .first()
            .and_then(|ns| cluster.pods(ns, Some("proxybench/role=proxy")).ok())
            .unwrap_or_default();
        if pods.iter().any(|p| p.ready) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no proxy pod became ready in {made:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(after);
    let t0 = Instant::now();
    // SAFETY: kill(2) takes no pointers; the pid is our child's, not yet waited for.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let took = t0.elapsed();
    kube::unbind(account);
    kube::assert_not_forbidden(root, &out);
    (out, took, made.remove(0))
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_ctrl_c_deletes_the_namespace_unless_kept_and_keeps_partial_results() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("long.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"k8s-interrupted\"
description = \"a long open-loop load, interrupted\"
{SCENARIO_HEAD}
[[loads]]
name = \"coffee\"
url = \"http://cafe.example.com/coffee\"
rate = 100
connections = 4
duration = \"120s\"
"
        ),
    )
    .unwrap();
    let account = kube::test_namespace("ctrl-c-account");
    for keep in [false, true] {
        let root = dir.path().join(format!("results-{keep}"));
        let extra: &[&str] = if keep { &["--keep"] } else { &[] };
        let (out, took, ns) = interrupt_k8s_run(
            &root,
            &scenario,
            extra,
            std::time::Duration::from_secs(5),
            &account,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!(
            "ctrl-c (keep {keep}): exited {:?} {took:?} after SIGINT",
            out.status.code()
        );
        assert_eq!(out.status.code(), Some(130), "{stderr}");
        // The partial results: the record says interrupted, and the requests made so far are
        // counted, each in the proxy pod's access log, read before the pod went.
        let d = data(&root, &out);
        assert_eq!(d["partial"], true, "{}", d["abort_reason"]);
        assert_eq!(d["abort_reason"], "interrupted");
        let load = &d["cases"][0]["loads"][0];
        let requests = load["requests"].as_u64().unwrap();
        // The load starts once the proxy's Service serves (after its pods are Ready), so the
        // interrupt comes some seconds into it: an open loop at 100/s has sent one request per
        // 10 ms of its elapsed time, give or take the one in flight at each end.
        let elapsed = load["elapsed_s"].as_f64().unwrap();
        assert!(
            elapsed >= 1.0,
            "the load ran {elapsed} s before the interrupt: {load}"
        );
        let expected = (elapsed * 100.0).round() as u64;
        assert!(
            requests.abs_diff(expected) <= 3,
            "{requests} requests in {elapsed} s at 100/s (expected {expected} ± 3): {load}"
        );
        let (lines, _) = access_count(&root);
        assert_eq!(lines, requests, "the interrupted run's access-log lines");
        let left = leftover(&ns);
        if keep {
            assert_eq!(left, vec![ns.clone()], "--keep keeps the namespace");
            let md = std::fs::read_to_string(&find(&root, "report.md")[0]).unwrap();
            assert!(
                md.contains(&format!(
                    "namespace `{ns}`, kept, proxy pods reached by pod IP)"
                )) && md.contains(&format!("namespace {ns} was kept (--keep)")),
                "the report says the namespace was kept: {md}"
            );
            let cluster = cluster();
            cluster
                .delete_namespace(&ns, std::time::Duration::from_secs(120))
                .unwrap();
        } else {
            assert_eq!(left, Vec::<String>::new(), "namespace left behind");
        }
    }
}

/// A "user's gateway" for the external test: a hostNetwork nginx Deployment (`app=gw`) that
/// answers 200 itself on 127.0.0.1:`port` (reuseport, so replicas share it) and logs each
/// request in the combined format to its stdout, beside a sidecar container with a log of its
/// own. Its pods run on `node` (the node that is this machine, whose loopback the test reaches).
fn gateway_manifest(port: u16, image: &str, node: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: gw
data:
  nginx.conf: |
    worker_processes 1;
    pid /tmp/nginx.pid;
    error_log stderr warn;
    events {{ worker_connections 1024; }}
    http {{
      access_log /dev/stdout combined;
      client_body_temp_path /tmp/cb; proxy_temp_path /tmp/pt; fastcgi_temp_path /tmp/ft;
      uwsgi_temp_path /tmp/ut; scgi_temp_path /tmp/st;
      server {{
        listen 127.0.0.1:{port} reuseport;
        location / {{ return 200 "gw\n"; }}
      }}
    }}
  side.conf: |
    worker_processes 1;
    pid /tmp/side.pid;
    error_log stderr notice;
    events {{ worker_connections 64; }}
    http {{
      access_log off;
      client_body_temp_path /tmp/cb; proxy_temp_path /tmp/pt; fastcgi_temp_path /tmp/ft;
      uwsgi_temp_path /tmp/ut; scgi_temp_path /tmp/st;
      server {{ listen unix:/tmp/side.sock; }}
    }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: gw
spec:
  replicas: 1
  selector:
    matchLabels:
      app: gw
  template:
    metadata:
      labels:
        app: gw
    spec:
      hostNetwork: true
      nodeSelector:
        kubernetes.io/hostname: {node}
      automountServiceAccountToken: false
      enableServiceLinks: false
      dnsPolicy: Default
      terminationGracePeriodSeconds: 10
      volumes:
        - name: conf
          configMap:
            name: gw
      containers:
        - name: nginx
          image: {image}
          imagePullPolicy: Never
          command: ["/usr/sbin/nginx", "-c", "/conf/nginx.conf", "-g", "daemon off;"]
          volumeMounts:
            - name: conf
              mountPath: /conf
          readinessProbe:
            # the pod IP of a hostNetwork pod is its node's address, where nginx does not listen
            tcpSocket:
              host: 127.0.0.1
              port: {port}
            periodSeconds: 1
        # A sidecar with a log of its own (nginx's start-up notices on stderr, on a unix socket
        # so that it takes no port): its lines must not overwrite the gateway container's.
        - name: sidecar
          image: {image}
          imagePullPolicy: Never
          command: ["/usr/sbin/nginx", "-c", "/conf/side.conf", "-g", "daemon off;"]
          volumeMounts:
            - name: conf
              mountPath: /conf
"#
    )
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_external_gateway_is_loaded_acted_on_and_its_pods_logs_counted() {
    use std::time::Duration;
    let cluster = cluster();
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The user's namespace and gateway, made before the run (and left by it).
    let ns = namespace("external");
    cluster.create_namespace(&ns, &[]).unwrap();
    let manifest = dir.path().join("gw.yaml");
    std::fs::write(
        &manifest,
        gateway_manifest(
            port,
            &var("PROXYBENCH_TEST_NGINX_IMAGE"),
            &cluster
                .local_node_selector()
                .and_then(|s| s.get(k8s::HOSTNAME_LABEL).cloned())
                .expect("one node of the test cluster is this machine"),
        ),
    )
    .unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cluster.apply(&manifest, &ns).unwrap();
        cluster
            .wait_deployment_ready(&ns, "gw", 1, Duration::from_secs(120))
            .unwrap();
        let scenario = dir.path().join("external.toml");
        std::fs::write(
            &scenario,
            format!(
                "name = \"k8s-external\"
description = \"the user's gateway: scaled up, one pod deleted, under open-loop load\"

[platform]
kind = \"kubernetes\"
watch = {{ selectors = [\"app=gw\"], log_format = \"combined\" }}

[proxy]
kind = \"external\"

[proxy.external]
resolve = \"127.0.0.1\"

[[loads]]
name = \"gw\"
url = \"http://gw.example.com:{port}/\"
rate = 100
connections = 4
duration = \"8s\"

[[actions]]
at = \"1s\"
scale = {{ target = \"deployment/gw\", to = 2 }}

[[actions]]
at = \"5s\"
delete_pod = {{ selector = \"app=gw\", count = 1, grace = \"2s\" }}
"
            ),
        )
        .unwrap();
        let root = dir.path().join("results");
        let out = kube::run_k8s_as_role(&root, &scenario, &ns, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "the run failed: {stderr}");
        let d = data(&root, &out);
        let case = &d["cases"][0];
        let events = case["events"].as_array().unwrap();
        for want in ["scale", "delete_pod"] {
            let e = events
                .iter()
                .find(|e| e["action"] == want)
                .unwrap_or_else(|| panic!("no {want} event: {events:?}\n{stderr}"));
            assert!(e["error"].is_null(), "{e}");
        }
        // The gateway's own pods: watched, each change recorded, the deleted one included.
        let watched: BTreeSet<&str> = case["cluster"]["pods"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["role"] == "watched")
            .filter_map(|c| c["pod"].as_str())
            .collect();
        assert!(
            watched.len() >= 3,
            "the first pod, the scaled-up one and the replacement: {watched:?}"
        );
        // Every response the clients got is a line of some gateway pod's access log, read
        // through the log API (the deleted pod's too).
        let load = &case["loads"][0];
        let requests = load["requests"].as_u64().unwrap();
        let below_http = errors(load);
        let (lines, logs) = access_count(&root);
        eprintln!(
            "external: {requests} requests ({below_http} without a response: {}), {lines} \
             access-log lines over {logs} logs, watched pods {watched:?}",
            load["errors"]
        );
        assert!(requests >= 700, "8 s at 100/s: {load}");
        // Each response is a line; a failed request may be one too (nginx logs a request it
        // answered on a connection it was closing, and the client saw the close first), but
        // nothing else is: no answer is missing from the logs.
        assert!(
            (requests..=requests + below_http).contains(&lines),
            "{lines} lines for {requests} requests ({below_http} failed) over {logs} logs"
        );
        // Each container's log is kept apart: the sidecar's start-up notices are in its own
        // files, the gateway's answers in the nginx container's.
        let dirs: Vec<String> = find(&root, "error.log")
            .iter()
            .map(|p| {
                p.parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        let side: Vec<_> = find(&root, "error.log")
            .into_iter()
            .filter(|p| p.parent().unwrap().to_string_lossy().ends_with(".sidecar"))
            .collect();
        assert!(
            !side.is_empty() && dirs.iter().any(|d| d.ends_with(".nginx")),
            "a log set per container: {dirs:?}"
        );
        for f in &side {
            let text = std::fs::read_to_string(f).unwrap();
            assert!(
                text.contains("start worker process"),
                "{}: {text}",
                f.display()
            );
            let access = f.with_file_name("access.log");
            assert_eq!(std::fs::read_to_string(access).unwrap_or_default(), "");
        }
        // The user's namespace is theirs: the run leaves it (and their gateway) in place.
        assert_eq!(leftover(&ns), vec![ns.clone()]);
        let left = cluster.pods(&ns, Some("app=gw")).unwrap();
        assert!(
            left.iter().any(|p| p.ready),
            "the gateway still runs: {left:?}"
        );
    }));
    let _ = cluster.delete_namespace(&ns, Duration::from_secs(120));
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

/// The nodes the proxy pods of namespace `ns` run on, watched while `run` runs: a thread lists
/// them every 100 ms until it returns.
fn proxy_nodes_while<T>(ns: &str, run: impl FnOnce() -> T) -> (T, BTreeSet<String>) {
    let cluster = cluster();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (d, ns2) = (done.clone(), ns.to_string());
    let watcher = std::thread::spawn(move || {
        let mut nodes = BTreeSet::new();
        while !d.load(std::sync::atomic::Ordering::SeqCst) {
            if let Ok(pods) = cluster.pods(&ns2, Some("proxybench/role=proxy")) {
                nodes.extend(pods.into_iter().filter_map(|p| p.node));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        nodes
    });
    let out = run();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    (out, watcher.join().unwrap())
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_proxy_pods_spread_over_both_nodes_behind_their_service() {
    let nodes = {
        let cluster = cluster();
        cluster.nodes_ready().unwrap()
    };
    assert!(
        nodes.len() >= 2 && nodes.iter().all(|(_, r)| *r),
        "two Ready nodes: {nodes:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("spread.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"k8s-spread\"
[platform]
kind = \"kubernetes\"
service_type = \"NodePort\"
{}
[[loads]]
name = \"coffee\"
url = \"http://cafe.example.com/coffee\"
rate = 100
connections = 8
duration = \"4s\"
",
            SCENARIO_HEAD.replace("replicas = 1", "replicas = 2")
        ),
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("spread");
    let (out, ran_on) =
        proxy_nodes_while(&ns, || kube::run_k8s_as_role(&root, &scenario, &ns, &[]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the run failed: {stderr}");
    // One proxy pod per node: the topology spread constraint.
    assert!(
        ran_on.len() >= 2,
        "the 2 proxy pods ran on both nodes: {ran_on:?}"
    );
    let d = data(&root, &out);
    let case = &d["cases"][0];
    let findings: Vec<&str> = case["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // The loads went to the Service's ClusterIP (the test cluster's Service range), and the
    // replicas were reached at their pod IPs (this machine routes the pod network).
    assert!(
        findings.iter().any(|f| f.contains("Service `proxy-pb-")
            && f.contains("` (NodePort) at its ClusterIP 198.18.128.")),
        "{findings:?}"
    );
    assert!(
        findings.iter().any(|f| f.contains("at its pod IP")),
        "{findings:?}"
    );
    let load = &case["loads"][0];
    let requests = load["requests"].as_u64().unwrap();
    assert_eq!(requests, 400, "100 r/s for 4 s: {load}");
    assert_eq!(failed(load), 0, "{load}");
    // Exact against the proxy pods' access logs and the backends' counters.
    let (lines, pods) = access_count(&root);
    assert_eq!(pods, 2, "two proxy pods' logs");
    assert_eq!(lines, requests, "access-log lines");
    assert_eq!(backend_requests(case, "cafe"), requests, "backend counters");
    // Both endpoints were ready in the Service at once, on the record beside the pods.
    let changes = case["cluster"]["pods"].as_array().unwrap();
    let endpoints: BTreeSet<&str> = changes
        .iter()
        .filter(|c| c["role"] == "endpoint" && c["ready"] == true)
        .filter_map(|c| c["pod"].as_str())
        .collect();
    assert_eq!(endpoints.len(), 2, "two ready endpoints: {changes:?}");
    assert!(
        endpoints.iter().all(|e| e.starts_with("proxy-")),
        "endpoints named by their pods: {endpoints:?}"
    );
    eprintln!(
        "spread: proxy pods on {ran_on:?}; {requests} requests through the Service, \
         {lines} access-log lines"
    );
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_zero_downtime_scaling_quick_goes_through_the_cluster_ip() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("zds");
    let cases = [
        "gradual-up",
        "gradual-down",
        "abrupt-up",
        "abrupt-down",
        "h2-reload-down",
    ];
    // The run as a ServiceAccount bound to what `k8s rbac` prints: the shipped Role suffices
    // for the whole zero-downtime stack (scaling, reloads, the collectors).
    let kc = kube::bound_kubeconfig(&ns, dir.path());
    let mut cmd = kube::with_flag(
        run_command(&root, &ns, &[]),
        "--kubeconfig",
        Some(kc.to_str().unwrap()),
    );
    cmd.args(["zero-downtime-scaling", "--quick"]);
    for c in cases {
        cmd.args(["--case", c]);
    }
    let (out, ran_on) = proxy_nodes_while(&ns, || cmd.output().unwrap());
    kube::unbind(&ns);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let d = data(&root, &out);
    assert!(ran_on.len() >= 2, "proxy pods on both nodes: {ran_on:?}");
    let run_dir = find(&root, "data.json")[0].parent().unwrap().to_path_buf();
    for (i, name) in cases.iter().enumerate() {
        kube::check_zds_case("nginx", name, &d["cases"][i], &run_dir, &stderr);
        let absent = d["cases"][i]["cluster"]["absent"].to_string();
        assert!(
            !absent.to_lowercase().contains("forbidden") && !stderr.contains("forbidden"),
            "{name}: a permission was missing: {absent}"
        );
    }
    check_h2_reload_down(&d["cases"][4]);
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}

/// h2-reload-down on the cluster: three reloads, then 3 -> 1 replicas, under two HTTP/1.1 loads
/// and an HTTP/2 one. What it loses is nginx's own, and nothing else:
/// - HTTP/1.1: a reload's old workers close idle keep-alive connections, and a request sent on
///   one at that instant is cut (`read_idle_closed`, NGF issue 1147); never a refused or
///   timed-out connect, which is what a scaled-away replica's closed listener behind a live
///   DNAT rule gave before its preStop sleep outlasted kube-proxy's sync;
/// - HTTP/2: nginx ends a connection with GOAWAY (NO_ERROR) at a reload, at SIGQUIT and after
///   `keepalive_requests` (1,000) streams, and refuses the streams above its last-stream-id:
///   every failed stream is such a refusal (never processed, safe to retry).
fn check_h2_reload_down(case: &Value) {
    assert_eq!(case["name"], "h2-reload-down");
    for l in case["loads"].as_array().unwrap() {
        let name = l["name"].as_str().unwrap();
        let errs = l["errors"].as_object().unwrap();
        let other: Vec<&String> = errs.keys().filter(|k| *k != "read_idle_closed").collect();
        assert!(other.is_empty(), "h2-reload-down/{name}: {other:?} in {l}");
        assert_eq!(failed(l), errors(l), "h2-reload-down/{name}: non-2xx: {l}");
        if name == "h2" {
            let refused = l["http2"]["refused"].as_u64().unwrap();
            assert_eq!(
                errors(l),
                refused,
                "h2-reload-down/h2: every failed stream refused by a GOAWAY: {l}"
            );
            assert!(l["http2"]["goaways_graceful"].as_u64().unwrap() >= 1, "{l}");
            assert_eq!(l["http2"]["goaways_error"], 0, "{l}");
        }
        eprintln!(
            "h2-reload-down/{name}: {} failed {}",
            failed(l),
            l["errors"]
        );
    }
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_loads_through_the_node_port_and_the_load_balancer_are_counted_exactly() {
    // The test cluster's LoadBalancer addresses come from k8s/lb-controller.sh (198.18.129.0/24),
    // routed to the Service by kube-proxy as a cloud's are.
    for (service_type, via, want) in [
        ("NodePort", "node-port:http", "` (NodePort) at node "),
        (
            "LoadBalancer",
            "load-balancer:http",
            "` (LoadBalancer) at its load balancer's address 198.18.129.",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let scenario = dir.path().join("service-type.toml");
        std::fs::write(
            &scenario,
            kube::on_cluster(
                "k8s-service-type",
                &format!("service_type = \"{service_type}\""),
                &kube::coffee(100, 8, "4s", &format!("via = \"{via}\"")),
            ),
        )
        .unwrap();
        let root = dir.path().join("results");
        let ns = test_namespace(&service_type.to_ascii_lowercase());
        let out = kube::run_k8s_as_role(&root, &scenario, &ns, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{service_type}: the run failed: {stderr}"
        );
        let d = data(&root, &out);
        let case = &d["cases"][0];
        let load = &case["loads"][0];
        let requests = load["requests"].as_u64().unwrap();
        assert_eq!(requests, 400, "{service_type}: 100 r/s for 4 s: {load}");
        assert_eq!(failed(load), 0, "{service_type}: {load}");
        // Exact against the proxy pod's access log and the backends' counters.
        let (lines, pods) = access_count(&root);
        assert_eq!(pods, 1, "{service_type}: one proxy pod's log");
        assert_eq!(lines, requests, "{service_type}: access-log lines");
        assert_eq!(
            backend_requests(case, "cafe"),
            requests,
            "{service_type}: backend counters"
        );
        // env.json says which path the load took, from this machine, and how the proxy pods
        // were reached.
        let env = kube::env_json(&root);
        let p = &env["platform"];
        assert_eq!(p["pod_path"], "pod IP", "{p}");
        let path = &p["load_paths"][0];
        assert_eq!(path["load"], "coffee", "{p}");
        assert_eq!(path["from"], "this machine", "{p}");
        let target = path["target"].as_str().unwrap();
        // The run's own Service, named with its run id.
        assert!(
            target.starts_with("Service `proxy-pb-") && target.contains(want),
            "{service_type}: {target}"
        );
        if service_type == "NodePort" {
            assert!(
                target.contains("InternalIP 198.18.0.") && target.contains("nodePort 3"),
                "{target}"
            );
        }
        eprintln!("{service_type}: {requests} requests via {target}, {lines} access-log lines");
        assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
    }
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_a_load_through_a_gateways_status_address_is_counted_exactly() {
    // The Gateway API's CRDs are on the test cluster (cluster.sh up). This test plays the
    // Gateway's controller: once the run's proxy Service has its ClusterIP, it makes Gateway
    // `cafe-gw` with an `http` listener and writes that address into its status, as NGF writes
    // its data plane's Service address. The load finds it there and goes through kube-proxy to
    // the proxy pod.
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("gateway.toml");
    std::fs::write(
        &scenario,
        kube::on_cluster(
            "k8s-gateway",
            "",
            &kube::coffee(100, 8, "4s", "via = \"gateway:cafe-gw:http\""),
        ),
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("gateway");
    // As the ServiceAccount bound to the Role `k8s rbac --scenario` prints (it reads the
    // Gateway the test makes).
    let kc = kube::bound_kubeconfig_for(&ns, dir.path(), Some(&scenario));
    let child = kube::with_flag(
        run_command(&root, &ns, &[]),
        "--kubeconfig",
        Some(kc.to_str().unwrap()),
    )
    .arg(&scenario)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let c = cluster();
    let t0 = std::time::Instant::now();
    let ip = loop {
        // The run's proxy Service, `proxy-<run id>`, by its labels.
        let names = c
            .names_labelled::<k8s::k8s_openapi::api::core::v1::Service>(
                &ns,
                "proxybench/role=proxy",
            )
            .unwrap_or_default();
        if let Some(a) = names.first().and_then(|n| c.service_address(&ns, n).ok()) {
            if let Some(ip) = a.cluster_ip {
                break ip;
            }
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(120),
            "no proxy Service"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let gw = dir.path().join("gateway.yaml");
    std::fs::write(
        &gw,
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: cafe-gw
spec:
  gatewayClassName: proxybench-test
  listeners:
    - name: http
      port: 8080
      protocol: HTTP
",
    )
    .unwrap();
    let ok = |c: &mut std::process::Command| {
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    ok(kubectl_in(&ns).args(["apply", "-f"]).arg(&gw));
    ok(kubectl_in(&ns).args([
        "patch",
        "gateway",
        "cafe-gw",
        "--subresource=status",
        "--type=merge",
        "-p",
        &format!(
            "{{\"status\":{{\"addresses\":[{{\"type\":\"IPAddress\",\"value\":\"{ip}\"}}]}}}}"
        ),
    ]));
    let out = child.wait_with_output().unwrap();
    kube::unbind(&ns);
    kube::assert_not_forbidden(&root, &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the run failed: {stderr}");
    let d = data(&root, &out);
    let case = &d["cases"][0];
    let load = &case["loads"][0];
    let requests = load["requests"].as_u64().unwrap();
    assert_eq!(requests, 400, "100 r/s for 4 s: {load}");
    assert_eq!(failed(load), 0, "{load}");
    let (lines, _) = access_count(&root);
    assert_eq!(lines, requests, "access-log lines");
    assert_eq!(backend_requests(case, "cafe"), requests, "backend counters");
    let env = kube::env_json(&root);
    let target = env["platform"]["load_paths"][0]["target"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        target,
        format!("Gateway `{ns}/cafe-gw` at its status address {ip}:8080, listener http"),
    );
    eprintln!("gateway: {requests} requests via {target}, {lines} access-log lines");
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}

/// The test cluster's kubectl in namespace `ns`.
fn kubectl_in(ns: &str) -> std::process::Command {
    let mut c = kube::kubectl();
    c.args(["-n", ns]);
    c
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_a_pod_that_never_gets_ready_stops_the_case_at_its_timeout_and_is_deleted() {
    // The namespace exists before the run, and the scenario asks for backend pods with a CPU
    // request no node has (`[platform] requests`): every backend pod stays Pending
    // (FailedScheduling), never Ready.
    let dir = tempfile::tempdir().unwrap();
    let ns = namespace("neverready");
    let cluster = cluster();
    cluster.create_namespace(&ns, &[]).unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let scenario = dir.path().join("never.toml");
        std::fs::write(
            &scenario,
            format!(
                "name = \"k8s-never-ready\"
[platform]
kind = \"kubernetes\"
ready_timeout = \"8s\"
requests = {{ backend = {{ cpu = \"64\" }} }}
{SCENARIO_HEAD}
[[loads]]
name = \"coffee\"
url = \"http://cafe.example.com/coffee\"
rate = 10
duration = \"2s\"
"
            ),
        )
        .unwrap();
        let root = dir.path().join("results");
        let t0 = std::time::Instant::now();
        let out = kube::run_k8s_as_role(&root, &scenario, &ns, &[]);
        let took = t0.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let d = data(&root, &out);
        let why = d["abort_reason"].as_str().unwrap_or_default().to_string();
        // Stopped at its timeout (8 s), not the default 3 min, saying why: the pod's state
        // and its events (a Pending pod has written no log lines).
        assert!(
            why.contains("8s") && why.contains("Pending") && why.contains("FailedScheduling"),
            "{why}"
        );
        assert!(why.contains("Insufficient cpu"), "{why}");
        assert!(took < std::time::Duration::from_secs(100), "took {took:?}");
        let md = std::fs::read_to_string(&find(&root, "report.md")[0]).unwrap();
        assert!(md.contains("FailedScheduling"), "{md}");
        // The run's objects are deleted from the namespace it did not make.
        let left = cluster.pods(&ns, None).unwrap();
        assert!(
            left.iter().all(|p| p.deleting),
            "pods left: {:?}",
            left.iter().map(|p| &p.name).collect::<Vec<_>>()
        );
        eprintln!("never ready: exit 1 after {took:?}: {why}");
    }));
    let _ = cluster.delete_namespace(&ns, std::time::Duration::from_secs(120));
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_a_running_proxy_that_never_passes_its_probe_is_reported_with_its_log_and_deleted() {
    // A config `nginx -t` accepts but nginx cannot serve: a working directory that does not
    // exist. The master starts and holds the listeners; each worker fails its chdir and exits
    // with nginx's fatal code 2, which the master never respawns. The pod runs, the kubelet's
    // readiness probe on the admin listener times out, and the pod is never Ready.
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("unready.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"k8s-never-passes-its-probe\"
[platform]
kind = \"kubernetes\"
ready_timeout = \"10s\"
{SCENARIO_HEAD}
[proxy.raw]
main = \"working_directory /nonexistent/pb;\"

[[loads]]
name = \"coffee\"
url = \"http://cafe.example.com/coffee\"
rate = 10
duration = \"2s\"
"
        ),
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("unready");
    let t0 = std::time::Instant::now();
    let out = kube::run_k8s_as_role(&root, &scenario, &ns, &[]);
    let took = t0.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let d = data(&root, &out);
    let why = d["abort_reason"].as_str().unwrap_or_default().to_string();
    // Stopped at its ready timeout, the pod Running but not Ready, saying why: the kubelet's
    // failed probes (events) and what nginx wrote (its container's last log lines).
    assert!(
        why.contains("deployment/proxy-pb-")
            && why.contains("not done after 10s")
            && why.contains("(Running"),
        "{why}"
    );
    assert!(
        why.contains("Unhealthy: Readiness probe failed"),
        "the kubelet's events: {why}"
    );
    assert!(
        why.contains("last log lines of proxy: ")
            && why.contains("chdir(\"/nonexistent/pb\") failed (2: No such file or directory)")
            && why.contains("exited with fatal code 2 and cannot be respawned"),
        "the container's log: {why}"
    );
    assert!(took < std::time::Duration::from_secs(120), "took {took:?}");
    let md = std::fs::read_to_string(&find(&root, "report.md")[0]).unwrap();
    for said in [
        "Unhealthy: Readiness probe failed",
        "cannot be respawned",
        "chdir(",
    ] {
        assert!(md.contains(said), "report.md lacks {said:?}: {md}");
    }
    // The run made the namespace and deleted it, with everything in it.
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
    eprintln!("never passes its probe: exit 1 after {took:?}: {why}");
}

/// `k8s/cluster.sh node2 lose|restore`: node 2 cut off the network with its kubelet stopped, and
/// back (Ready, untainted).
fn node2(what: &str) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../k8s/cluster.sh");
    std::process::Command::new("bash")
        .arg(script)
        .args(["node2", what])
        .output()
        .unwrap()
}

/// Restores node 2 when dropped, whatever the test did: the next test needs both nodes.
struct NodeBack;

impl Drop for NodeBack {
    fn drop(&mut self) {
        let out = node2("restore");
        eprintln!(
            "node 2 restored ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_a_node_lost_mid_run_counts_its_failures_and_the_run_ends_with_its_report() {
    // Its timing checks (kube-proxy's rule against the API, the failures' end against the rule)
    // pass in one of three runs; every other check holds in each.
    for attempt in 1..=3 {
        match node_lost_once() {
            Ok(()) => return,
            Err(why) if attempt < 3 => eprintln!("node lost, run {attempt}: {why}; once more"),
            Err(why) => panic!("node lost, in 3 runs; the last: {why}"),
        }
    }
}

/// One run of the node-lost test: panics on any check but its timing ones, whose verdict it
/// returns after its cleanup.
fn node_lost_once() -> Result<(), String> {
    // Two proxy pods, one per node (the spread constraint), an open-loop load through the
    // ClusterIP; at 3 s an `exec` action loses node 2 (its link cut, its kubelet stopped). The
    // control plane marks the node NotReady after kube-controller-manager's
    // node-monitor-grace-period (50 s by default; measured 45 s after the loss), its pods
    // NotReady and the EndpointSlices drop them: until then about half the new connections go
    // to the lost pod and fail. The load runs 80 s, so that failures stop well before its end.
    let back = NodeBack;
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../k8s/cluster.sh")
        .canonicalize()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lost_at_file = dir.path().join("lost-at");
    let scenario = dir.path().join("lost.toml");
    std::fs::write(
        &scenario,
        format!(
            r#"name = "k8s-node-lost"
checks = ["coffee.failure_rate <= 0%", "proxy.access_lines >= 1"]
[platform]
kind = "kubernetes"

[[backends]]
name = "cafe"
count = 2

[proxy]
replicas = 2
worker_processes = 1

[[proxy.listeners]]
name = "http"
server_names = ["cafe.example.com"]

[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
connect_timeout = "250ms"

[[proxy.routes]]
path = "/coffee"
upstream = "cafe"

[[loads]]
name = "coffee"
url = "http://cafe.example.com/coffee"
rate = 50
connections = 200
duration = "80s"
timeout = "1s"

[[cases]]
name = "main"
actions = [
  {{ at = "3s", exec = ["sh", "-c", "date +%s.%N > {lost}; exec bash {script} node2 lose"], timeout = "30s" }},
  {{ at = "8s", reload = true }},
]
"#,
            lost = lost_at_file.display(),
            script = script.display(),
        ),
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("nodelost");
    // When node 2 is NotReady, on the wall clock.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let c = cluster();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(nodes) = c.nodes_ready() {
                    if nodes.iter().any(|(n, ready)| n == "proxybench-2" && !ready) {
                        return Some(std::time::SystemTime::now());
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            None
        })
    };
    // When this machine's kube-proxy stopped sending Service traffic to the proxy pod on node 2:
    // its IP as a DNAT destination in the nat table, asked every 100 ms. A sample is a moment
    // within its `iptables-save`, so the rule went between the end of the last sample that had
    // it (`last_seen`) and the end of the first one after that did not (`gone_by`, the bound
    // the checks use). The Service's failures end when that rule goes, which is after the
    // EndpointSlice change by kube-proxy's sync (seconds on a loaded machine).
    let rules = {
        let (stop, ns) = (stop.clone(), ns.to_string());
        std::thread::spawn(move || {
            let c = cluster();
            let (mut lost_ip, mut last_seen, mut gone_by) = (None, None, None);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if lost_ip.is_none() {
                    if let Ok(pods) = c.pods(&ns, Some("proxybench/role=proxy")) {
                        lost_ip = pods
                            .into_iter()
                            .find(|p| p.node.as_deref() == Some("proxybench-2"))
                            .and_then(|p| p.ip);
                    }
                }
                if let Some(ip) = lost_ip {
                    let nat = std::process::Command::new("iptables-save")
                        .args(["-t", "nat"])
                        .output();
                    if let Ok(o) = nat {
                        let text = String::from_utf8_lossy(&o.stdout);
                        let now = std::time::SystemTime::now();
                        if text.contains(&format!("--to-destination {ip}:")) {
                            (last_seen, gone_by) = (Some(now), None);
                        } else if last_seen.is_some() && gone_by.is_none() {
                            gone_by = Some(now);
                        }
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            (last_seen, gone_by)
        })
    };
    let t0 = std::time::Instant::now();
    // Reload timing through port-forwards (forced): the reload at 8 s, with node 2 lost, must
    // not hang on its pod there.
    let (out, nodes) = proxy_nodes_while(&ns, || {
        kube::run_as_role(
            run_command(&root, &ns, &[]),
            &root,
            &scenario,
            &ns,
            &[("PROXYBENCH_K8S_POD_PATH", "port-forward")],
        )
    });
    let took = t0.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let not_ready_wall = watcher.join().unwrap();
    let (rule_last_wall, rule_gone_wall) = rules.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        nodes.len(),
        2,
        "proxy pods on both nodes: {nodes:?}\n{stderr}"
    );
    eprintln!("node lost: the run took {took:?}; its stderr:\n{stderr}");
    let d = data(&root, &out);
    // The run ends normally: exit 1 (its check that nothing fails fails), its report written.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let md = std::fs::read_to_string(&find(&root, "report.md")[0]).unwrap();
    assert!(find(&root, "timeline.csv").len() == 1, "timeline.csv");
    let case = &d["cases"][0];
    // The fault matrix of issue 35, for two collectors that lose one item of two with the node:
    // the lost pod's log (its follower cannot read its end) and node 2's kubelet (its probe
    // counters cannot be read). No check on the proxy's logs passes; the case's coverage names
    // the lost pod; no finding gives the kubelets' counts as the proxy pods' totals.
    // The proxy pod on node 2, as the teardown's finding names it (a backend pod may be there
    // too).
    let lost_pod = case["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str()?.strip_prefix("pod "))
        .find_map(|f| {
            let (pod, rest) = f.split_once(' ')?;
            (pod.starts_with("proxy-") && rest.starts_with("ran on node proxybench-2"))
                .then(|| pod.to_string())
        })
        .unwrap_or_else(|| panic!("the lost node's pod: {}", case["findings"]));
    let findings = case["findings"].to_string();
    let checks = d["checks"].as_array().unwrap();
    let lines = checks
        .iter()
        .find(|c| {
            c["name"]
                .as_str()
                .unwrap_or("")
                .contains("proxy.access_lines")
        })
        .unwrap_or_else(|| panic!("{checks:?}"));
    eprintln!("node lost: {lines}");
    assert_eq!(lines["pass"], false, "{lines}");
    let actual = lines["actual"].as_str().unwrap();
    assert!(
        actual.starts_with("not measurable: the proxy's logs covered 1 of 2 logs (")
            && actual.contains(&lost_pod),
        "{actual}"
    );
    let partial = &case["partial"]["logs"];
    assert_eq!(partial["of"], 2, "{partial}");
    assert_eq!(
        partial["missing"][0]["item"],
        lost_pod.as_str(),
        "{partial}"
    );
    assert!(
        findings.contains("The proxy's logs were read whole for 1 of 2 logs"),
        "{findings}"
    );
    assert!(
        findings.contains("readiness probes were counted in part: on 1 of 2 nodes; proxybench-2:"),
        "{findings}"
    );
    assert!(
        !findings.contains("The kubelets counted the proxy pods' readiness probes"),
        "{findings}"
    );
    assert!(md.contains("counted in part: on 1 of 2 nodes"), "{md}");
    let events = case["events"].as_array().unwrap();
    let lost = events
        .iter()
        .find(|e| e["detail"].as_str().unwrap_or("").contains("node2 lose"))
        .unwrap_or_else(|| panic!("the exec event: {events:?}"));
    assert!(lost["error"].is_null(), "the loss failed: {lost}");
    let lost_at = lost["t_s"].as_f64().unwrap();
    // Exactly: every planned request is an answer or an error.
    let load = &case["loads"][0];
    let requests = load["requests"].as_u64().unwrap();
    let errs = errors(load);
    assert_eq!(requests + errs, 50 * 80, "rate x duration: {load}");
    assert!(errs > 0, "requests to the lost pod failed: {load}");
    // The failures are on the timeline, after the loss, and sum to the load's.
    let timeline = load["timeline"].as_array().unwrap();
    let per_second: Vec<(f64, u64)> = timeline
        .iter()
        .map(|s| {
            let e: u64 = s["errors"]
                .as_object()
                .map(|m| m.values().filter_map(Value::as_u64).sum())
                .unwrap_or(0);
            (s["t"].as_f64().unwrap(), e)
        })
        .collect();
    assert_eq!(per_second.iter().map(|s| s.1).sum::<u64>(), errs, "{load}");
    let first = per_second.iter().find(|s| s.1 > 0).unwrap().0;
    let last = per_second.iter().rev().find(|s| s.1 > 0).unwrap().0;
    assert!(
        first + 1.0 >= lost_at,
        "failures from {first} s, lost at {lost_at} s"
    );
    // The pod on the lost node leaves the Service's endpoints, and the failures stop with it.
    let changes = case["cluster"]["pods"].as_array().unwrap();
    let removed = changes
        .iter()
        .filter(|c| {
            c["role"] == "endpoint" && c["ready"] == false && c["t_s"].as_f64() > Some(lost_at)
        })
        .map(|c| c["t_s"].as_f64().unwrap())
        .next();
    let end = per_second.last().unwrap().0;
    // NotReady on the case's clock: the loss's wall-clock time is the exec action's.
    let lost_wall: f64 = std::fs::read_to_string(&lost_at_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let on_case_clock = |w: std::time::SystemTime| {
        lost_at
            + w.duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
            - lost_wall
    };
    let not_ready = not_ready_wall.map(on_case_clock);
    let rule_last = rule_last_wall.map(on_case_clock);
    let rule_gone = rule_gone_wall.map(on_case_clock);
    let at = |t: Option<f64>| t.map_or("never".into(), |t| format!("{t:.2} s"));
    eprintln!(
        "node lost: lost at {lost_at:.2} s, NotReady at {}, endpoint removed at {}, kube-proxy's \
         rule to the lost pod last seen here at {} and gone by {}, failures from {first} s to \
         {last} s (second buckets), load end {end} s; {requests} answers, {errs} errors {}; run \
         took {took:?}",
        at(not_ready),
        at(removed),
        at(rule_last),
        at(rule_gone),
        load["errors"],
    );
    let removed = removed.unwrap_or_else(|| panic!("no endpoint removed: {changes:?}"));
    assert!(not_ready.is_some(), "node 2 never NotReady");
    rule_last.expect("the lost pod was never a DNAT destination here");
    let rule_gone = rule_gone.expect("kube-proxy's rule to the lost pod never went");
    // The data plane follows the API: the rule goes after the endpoint does (up to 0.2 s: this
    // test's watch and kube-proxy's see the change each on its own connection), and the
    // failures end with the rule (a second bucket, plus the 1 s connect timeout of a request
    // sent just before it went).
    let timing = if rule_gone + 0.2 < removed {
        Err(format!(
            "the rule went ({rule_gone} s) before the endpoint ({removed} s)"
        ))
    } else if last > rule_gone + 2.0 || last + 5.0 >= end {
        Err(format!(
            "failures stop when kube-proxy's rule to the lost pod goes ({rule_gone} s; endpoint \
             removed at {removed} s), before the end ({end} s): last {last} s"
        ))
    } else {
        Ok(())
    };
    // The reload at 8 s: the live pod's through its port-forward, timed; the lost pod's exec
    // fails at its bound (30 s) with the reason, and the run goes on.
    let reloads = case["reloads"].as_array().unwrap();
    assert_eq!(reloads.len(), 2, "{reloads:?}");
    let served: Vec<&Value> = reloads.iter().filter(|r| r["served_ms"].is_f64()).collect();
    let failed_reloads: Vec<&Value> = reloads.iter().filter(|r| !r["error"].is_null()).collect();
    assert_eq!(
        served.len(),
        1,
        "the live pod's reload was served: {reloads:?}"
    );
    assert_eq!(failed_reloads.len(), 1, "{reloads:?}");
    // Side by side: the live pod's reload began with the action, not after the lost pod's 30 s.
    assert!(
        served[0]["t_s"].as_f64().unwrap() < 9.0 && served[0]["served_ms"].as_f64() < Some(20e3),
        "the live pod's reload waited for the lost one: {reloads:?}"
    );
    let why = failed_reloads[0]["error"].as_str().unwrap();
    assert!(
        why.contains(failed_reloads[0]["replica"].as_str().unwrap())
            && why.contains("not done after 30s"),
        "{why}"
    );
    assert!(
        case["findings"]
            .to_string()
            .contains("through a port-forward of its own"),
        "the port-forward path: {}",
        case["findings"]
    );
    // The report: the loss, the failed check, and the lost node's pods as what they are
    // (force-deleted at teardown: nothing waited for the lost node).
    assert!(md.contains("node2 lose"), "{md}");
    assert!(md.contains("failure_rate"), "{md}");
    let findings = case["findings"].to_string();
    assert!(
        findings.contains("which is not Ready (lost)") && findings.contains("force-deleted"),
        "{findings}"
    );
    assert!(md.contains("force-deleted"), "{md}");
    // After the test: both nodes Ready (the guard), the namespace gone.
    drop(back);
    let ready = cluster().nodes_ready().unwrap();
    assert!(ready.iter().all(|(_, r)| *r), "{ready:?}");
    let c = cluster();
    let _ = c.delete_namespace(&ns, std::time::Duration::from_secs(120));
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
    timing
}

/// The catalogue's long-lived-under-churn in `--quick` on the cluster, under the Role `k8s rbac`
/// prints for it: WebSocket, gRPC-stream and SSE loads beside a short HTTP load through the
/// run's own proxy pods, while the backends scale 2 -> 3 -> 2 every 4 s (each change reloads the
/// pods with the new server list; a removed backend drains). Known truth:
/// - every scale step runs on its cadence and none fails: an old generation held by long-lived
///   connections does not stall a drained scale-down (the drain ends what it holds);
/// - the short load is exact (50/s for 24 s is 1,200 requests), and loses only nginx's own
///   keep-alive race at a reload (`read_idle_closed`);
/// - every message a client sent reached a backend unless the client counted it lost or
///   unanswered, by the backends' own counters;
/// - every drop is attributed, none unexplained; without a drain timeout no reload cuts a
///   connection (drops come only from drained backends, each with a close), and with 10 s the
///   old generations cut theirs 10 s after their reload, without a close.
#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_long_lived_under_churn_quick_attributes_every_drop() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("llc");
    let scenario =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/long-lived-under-churn.toml");
    let out = kube::run_k8s_as_role(&root, &scenario, &ns, &["--quick"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the run failed: {stdout}\n{stderr}");
    let d = data(&root, &out);
    for case in d["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let events = case["events"].as_array().unwrap();
        let scales: Vec<&Value> = events
            .iter()
            .filter(|e| e["action"] == "scale_backends")
            .collect();
        assert_eq!(scales.len(), 6, "{name}: six scale steps: {events:?}");
        for e in &scales {
            assert!(e["error"].is_null(), "{name}: a step failed: {e}");
        }
        let reloads = case["reloads"].as_array().unwrap();
        assert_eq!(reloads.len(), 6, "{name}: a reload per step: {reloads:?}");
        assert!(reloads.iter().all(|r| r["error"].is_null()), "{reloads:?}");

        let http = &case["loads"][0];
        assert_eq!(
            http["requests"].as_u64().unwrap() + errors(http),
            1200,
            "{http}"
        );
        let errs = http["errors"].as_object().unwrap();
        assert!(
            errs.keys().all(|k| k == "read_idle_closed"),
            "{name}: the short load lost more than nginx's keep-alive race: {http}"
        );
        assert_eq!(
            failed(http),
            errors(http),
            "{name}: non-2xx answers: {http}"
        );

        let streams = case["streams"].as_array().unwrap();
        let (mut sent, mut unsure) = (0, 0);
        for s in streams.iter().filter(|s| s["name"] != "sse") {
            let m = &s["messages"];
            sent += m["sent"].as_u64().unwrap();
            unsure += m["lost"].as_u64().unwrap() + m["unanswered_at_end"].as_u64().unwrap();
        }
        // Every backend pod's counters were read (a pod that held no long-lived connection
        // has no `streams`).
        assert!(case["partial"].is_null(), "{name}: {}", case["partial"]);
        let received: u64 = case["backends"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["streams"]["messages_in"].as_u64().unwrap_or(0))
            .sum();
        assert!(
            received <= sent && received + unsure >= sent,
            "{name}: the clients sent {sent} messages ({unsure} lost or unanswered), the \
             backends received {received}"
        );

        let ledger = case["stream_ledger"]["loads"].as_array().unwrap();
        assert_eq!(ledger.len(), 3, "{ledger:?}");
        for (l, s) in ledger.iter().zip(streams) {
            let n = |k: &str| l[k].as_u64().unwrap();
            let load = l["name"].as_str().unwrap();
            let asked = s["connections"].as_u64().unwrap();
            assert_eq!(n("survived"), asked, "{name}/{load}: {l}");
            assert_eq!(
                n("dropped"),
                s["dropped"].as_u64().unwrap(),
                "{name}/{load}"
            );
            assert_eq!(n("unattributed"), 0, "{name}/{load}: {l}");
            assert_eq!(
                n("by_reload") + n("by_backend_action") + n("by_backend"),
                n("dropped"),
                "{name}/{load}: {l}"
            );
            assert_eq!(n("with_close") + n("without_close"), n("dropped"), "{l}");
            // A drained backend ends its connections in the protocol; nginx's old generation
            // cuts its own without a word.
            assert_eq!(
                n("by_backend_action"),
                n("with_close"),
                "{name}/{load}: {l}"
            );
            assert_eq!(n("by_reload"), n("without_close"), "{name}/{load}: {l}");
            if name == "drain-unset" {
                assert_eq!(n("by_reload"), 0, "{name}/{load}: a reload cut: {l}");
                assert_eq!(
                    n("without_close"),
                    0,
                    "{name}/{load}: a drop without close: {l}"
                );
            }
            eprintln!(
                "long-lived-under-churn/{name}/{load}: {} opened, {} dropped ({} by reload, \
                 {} by backend action), reload to drop p50 {}",
                s["opened"],
                l["dropped"],
                l["by_reload"],
                l["by_backend_action"],
                l["reload_to_drop"]["p50_s"]
            );
        }
        if name == "drain-10s" {
            let ws = &ledger[0];
            assert!(ws["by_reload"].as_u64().unwrap() >= 1, "{ws}");
            let p50 = ws["reload_to_drop"]["p50_s"].as_f64().unwrap();
            assert!(
                (10.0..11.0).contains(&p50),
                "the old generations cut their WebSockets 10 s after the reload: {ws}"
            );
        }
    }
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}
