//! HAProxy and Caddy on the real test cluster (`make test-k8s`): their images (k8s/image.sh),
//! their container forms (HAProxy master-worker reloaded by SIGUSR2, Caddy reloaded through its
//! admin API), the config check in a pod of the proxy's image, and a registry image refused on
//! a cluster whose nodes pull from no registry. Each run has its own namespace `ktests-*`.

#[path = "common/k8s.rs"]
mod kube;
use kube::{
    access_count, data, failed, find, leftover, run_command, test_namespace, var, SCENARIO_HEAD,
};

/// 100 r/s for 20 s through one replica, a reload at 2 s, a second replica at 3 s and back to
/// one, gracefully, at 14 s. A case's clock starts once the stack serves, so the actions come
/// at those times of the load; a second replica can take about 12 s to be Ready on a busy
/// two-core machine, so the step down is placed well after it.
fn proxies_scenario() -> String {
    format!(
        r#"
name = "k8s-proxies"
description = "a reload and 1 -> 2 -> 1 replicas under open-loop load"
{SCENARIO_HEAD}
[[loads]]
name = "coffee"
url = "http://cafe.example.com/coffee"
rate = 100
connections = 8
duration = "20s"
retry_idle_closed = true

[[cases]]
name = "main"
actions = [
  {{ at = "2s", reload = true }},
  {{ at = "3s", scale_replicas = {{ to = 2, step = "1s" }} }},
  {{ at = "14s", scale_replicas = {{ to = 1, step = "1s" }} }},
]
"#
    )
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_haproxy_and_caddy_run_reload_and_scale_on_the_cluster() {
    for (kind, image) in [
        ("haproxy", var("PROXYBENCH_TEST_HAPROXY_IMAGE")),
        ("caddy", var("PROXYBENCH_TEST_CADDY_IMAGE")),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let scenario = dir.path().join("proxies.toml");
        std::fs::write(&scenario, proxies_scenario()).unwrap();
        let root = dir.path().join("results");
        let ns = test_namespace(kind);
        let out = kube::run_k8s_as_role(
            &root,
            &scenario,
            &ns,
            &["--proxy", kind, "--proxy-image", &image],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{kind}: the run failed: {stderr}");
        let d = data(&root, &out);
        let case = &d["cases"][0];
        let events = case["events"].as_array().unwrap();
        assert_eq!(events.len(), 3, "{kind}: {events:?}");
        assert!(
            events.iter().all(|e| e["error"].is_null()),
            "{kind}: failed action: {events:?}\n{stderr}"
        );
        // The reload reached the one replica and was timed to its admin listener answering
        // generation 2.
        let reloads = case["reloads"].as_array().unwrap();
        assert_eq!(reloads.len(), 1, "{kind}: {reloads:?}");
        assert!(
            reloads[0]["error"].is_null() && reloads[0]["served_ms"].as_f64().is_some(),
            "{kind}: {reloads:?}"
        );
        assert_eq!(reloads[0]["generation"], 2, "{kind}: {reloads:?}");
        // An open loop of 100 r/s for 20 s sends exactly 2,000, none lost.
        let load = &case["loads"][0];
        let requests = load["requests"].as_u64().unwrap();
        assert_eq!(requests, 2000, "{kind}: {load}");
        assert_eq!(failed(load), 0, "{kind}: failed requests: {load}");
        let retried = load["retried"].as_u64().unwrap_or(0);
        // Every answer is in an access log of the kind's format, read from the pods' output.
        let (lines, logs) = access_count(&root);
        assert_eq!(logs, 2, "{kind}: the access logs of both pods");
        assert!(
            (requests..=requests + retried).contains(&lines),
            "{kind}: access-log lines {lines}: {requests} answers, {retried} retried"
        );
        // The checker ran in a pod of the proxy's image and passed the config.
        let checks = find(&root, "proxy-check-gen1.log");
        assert_eq!(checks.len(), 1, "{kind}: the check pod's log: {checks:?}");
        eprintln!(
            "{kind}: {requests} requests, 0 failed ({retried} retried), {lines} access-log \
             lines, reload served in {:.1} ms",
            reloads[0]["served_ms"].as_f64().unwrap()
        );
        assert_eq!(
            leftover(&ns),
            Vec::<String>::new(),
            "{kind}: namespace left behind"
        );
    }
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_registry_image_is_refused_before_any_pod() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("proxies.toml");
    std::fs::write(&scenario, proxies_scenario()).unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("registry");
    let t0 = std::time::Instant::now();
    let out = kube::run_k8s_as_role(
        &root,
        &scenario,
        &ns,
        &[
            "--proxy",
            "nginx",
            "--proxy-image",
            "registry.example/proxybench-nginx:1.22.1",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("registry.example/proxybench-nginx:1.22.1"))
        .unwrap_or_else(|| panic!("no line names the image: {stderr}"));
    assert!(
        line.contains("imagePullPolicy IfNotPresent")
            && line.contains("pull from no registry")
            && line.contains("localhost/"),
        "{line}"
    );
    // Refused before the backends were made: no case ran, nothing waited on a pull.
    let d = data(&root, &out);
    assert_eq!(d["cases"].as_array().map(Vec::len), Some(0), "{d}");
    eprintln!("registry image refused in {:?}: {line}", t0.elapsed());
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_zero_downtime_scaling_quick_compares_nginx_haproxy_and_caddy_through_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("zdsall");
    let kinds = ["nginx", "haproxy", "caddy"];
    let cases = ["gradual-up", "abrupt-down"];
    // Each kind in its default image (the ones `make image` builds), one after the other in
    // the same namespace.
    // As the ServiceAccount bound to what `k8s rbac --namespace` prints (a built-in scenario
    // needs no more than the run's own Role).
    let kc = kube::bound_kubeconfig(&ns, dir.path());
    let mut cmd = kube::with_flag(
        run_command(&root, &ns, &["--proxy", &kinds.join(",")]),
        "--kubeconfig",
        Some(kc.to_str().unwrap()),
    );
    cmd.args(["zero-downtime-scaling", "--quick"]);
    for c in cases {
        cmd.args(["--case", c]);
    }
    let out = cmd.output().unwrap();
    kube::unbind(&ns);
    kube::assert_not_forbidden(&root, &out);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // The comparison over the three runs, each in its own directory.
    let cmp = find(&root, "comparison.json");
    assert_eq!(cmp.len(), 1, "one comparison: {stderr}");
    let top = cmp[0].parent().unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cmp[0]).unwrap()).unwrap();
    let listed: Vec<&str> = json["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(listed, kinds, "{json}");
    let md = std::fs::read_to_string(top.join("comparison.md")).unwrap();
    for (i, kind) in kinds.iter().enumerate() {
        assert_eq!(json["proxies"][i]["status"], "complete", "{kind}: {stderr}");
        assert!(
            md.contains(&format!("[{kind}/report.md]({kind}/report.md)")),
            "{md}"
        );
        let run_dir = top.join(kind);
        let d: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run_dir.join("data.json")).unwrap())
                .unwrap();
        assert_eq!(d["partial"], false, "{kind}: {}", d["abort_reason"]);
        for (ci, name) in cases.iter().enumerate() {
            kube::check_zds_case(kind, name, &d["cases"][ci], &run_dir, &stderr);
        }
    }
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}
