//! Distributed load on the real test cluster (`make test-k8s`): `proxybench load --agents N
//! --platform kubernetes` runs the load from the pods of an Indexed Job, reached through
//! port-forwards, against an nginx this test starts on loopback (the agents share the node's
//! network, as the platform's proxy pods do). The merged count is checked against nginx's
//! access log; a killed agent pod is reported lost; agents that cannot start fail with their
//! pods' state. Every run makes its own namespace, and every test checks that the Job, its
//! pods and the namespace are gone afterwards.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "common/k8s.rs"]
mod kube;
use kube::{cluster, find, run_command, test_namespace, var};

/// `proxybench load --agents N --platform kubernetes` in namespace `ns` (the test's), with the
/// test image, then `args`, as ServiceAccount `bench` bound to what `proxybench k8s rbac
/// --namespace ns` prints (`kube::bound_kubeconfig`; the test calls [`done`] after it).
fn load(ns: &str, agents: u32, args: &[&str]) -> Command {
    let dir = std::env::temp_dir().join(format!("pb-{ns}"));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = kube::bound_kubeconfig(ns, &dir);
    let mut c = Command::new(env!("CARGO_BIN_EXE_proxybench"));
    c.args(["load", "--agents", &agents.to_string()])
        .args(["--platform", "kubernetes", "--kubeconfig"])
        .arg(kc)
        .args(["--namespace", ns])
        .args(args);
    if !args.contains(&"--image") {
        c.args(["--image", &var("PROXYBENCH_TEST_IMAGE")]);
    }
    c
}

/// After a [`load`] in `ns`: its cluster-wide binding deleted, and no call of it was refused
/// (`stderr` says no "forbidden").
fn done(ns: &str, stderr: &str) {
    kube::unbind(ns);
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!("pb-{ns}")));
    assert!(
        !stderr.to_lowercase().contains("forbidden"),
        "a permission of the Role was missing: {stderr}"
    );
}

/// Waits (at most a minute) until namespace `ns` is gone: the run deletes it, with the Job.
fn assert_cleaned_up(ns: &str) {
    let c = cluster();
    let t0 = Instant::now();
    while !c.managed_namespaces(Some(ns)).unwrap().is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "namespace {ns} left behind: {:?}",
            c.pods(ns, None)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_three_agent_pods_send_exactly_what_nginx_logged() {
    let ng = testkit::Nginx::return_200(1);
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("saved");
    let ns = test_namespace("agents");
    let t0 = Instant::now();
    let out = load(
        &ns,
        3,
        &["-R", "3000", "-d", "10s", "-c", "12", "--format", "json"],
    )
    .arg("--save-agents")
    .arg(&saved)
    .arg(ng.url("/"))
    .output()
    .unwrap();
    let took = t0.elapsed();
    let stderr = text(&out.stderr);
    done(&ns, &stderr);
    assert!(out.status.success(), "{stderr}");
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // nginx writes a request's log line after its response: give the last ones a moment.
    let t = Instant::now();
    while ng.access_log_lines() < 30_000 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(merged["schedule"]["intended"].as_u64().unwrap(), 30_000);
    assert_eq!(merged["requests"].as_u64().unwrap(), 30_000, "{stderr}");
    assert_eq!(ng.access_log_lines(), 30_000, "nginx's access log");
    assert_eq!(merged["status"]["200"].as_u64().unwrap(), 30_000);
    // Three pods of one Job, each an exact share, each with its clock offset and start skew.
    let rows = merged["agents"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let job = rows[0]["agent"]
        .as_str()
        .unwrap()
        .rsplitn(3, '-')
        .nth(2)
        .unwrap();
    assert!(job.starts_with("agents-"), "{rows:?}");
    for (i, r) in rows.iter().enumerate() {
        let pod = r["agent"].as_str().unwrap();
        assert!(pod.starts_with(&format!("{job}-{i}-")), "{pod}");
        assert_eq!(r["requests"].as_u64().unwrap(), 10_000, "{pod}");
        assert!(!r["lost"].as_bool().unwrap());
        assert!(
            stderr.contains(&format!("proxybench: agent {pod} clock offset ")),
            "{stderr}"
        );
    }
    assert!(
        stderr.contains("proxybench: 3 agents ready: 3 pods of Job agents-"),
        "{stderr}"
    );
    // `proxybench merge` of the saved parts is the run's own merged result, byte for byte.
    let files: Vec<PathBuf> = (0..3)
        .map(|i| saved.join(format!("agent-{i}.json")))
        .collect();
    let again = dir.path().join("merged.json");
    let m = Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .arg("merge")
        .args(&files)
        .arg("-o")
        .arg(&again)
        .output()
        .unwrap();
    assert!(m.status.success(), "{}", text(&m.stderr));
    assert_eq!(std::fs::read(&again).unwrap(), out.stdout);
    assert_cleaned_up(&ns);
    let skews: Vec<i64> = rows
        .iter()
        .map(|r| r["start_skew_us"].as_i64().unwrap())
        .collect();
    let offsets: Vec<i64> = rows
        .iter()
        .map(|r| r["clock_offset_us"].as_i64().unwrap())
        .collect();
    eprintln!(
        "3 agent pods: 30000 requests = 30000 access-log lines; offsets {offsets:?} us, skews \
         {skews:?} us; the command took {:.1}s",
        took.as_secs_f64()
    );
}

/// Output of a child that is already done.
fn output(mut c: Child) -> Output {
    let status = c.wait().unwrap();
    let mut o = Output {
        status,
        stdout: Vec::new(),
        stderr: Vec::new(),
    };
    use std::io::Read;
    c.stdout.take().unwrap().read_to_end(&mut o.stdout).unwrap();
    c.stderr.take().unwrap().read_to_end(&mut o.stderr).unwrap();
    o
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_a_killed_agent_pod_is_reported_lost_and_the_job_is_deleted() {
    let ng = testkit::Nginx::return_200(1);
    let ns = test_namespace("agentlost");
    let child = load(
        &ns,
        3,
        &["-R", "300", "-d", "8s", "-c", "3", "--format", "json"],
    )
    .arg(ng.url("/"))
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Once the agents run (their Job's pods are up and the load has begun), kill index 1.
    let c = cluster();
    let t0 = Instant::now();
    let victim = loop {
        assert!(t0.elapsed() < Duration::from_secs(90), "no agent pod ran");
        let pods = c
            .pods(&ns, Some("proxybench/role=agent"))
            .unwrap_or_default();
        if let Some(p) = pods
            .iter()
            .find(|p| p.name.contains("-1-") && p.phase == "Running")
        {
            if ng.access_log_lines() > 300 {
                break p.name.clone();
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    c.delete_pod(&ns, &victim, Some(Duration::ZERO)).unwrap();
    let out = output(child);
    let stderr = text(&out.stderr);
    done(&ns, &stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("proxybench: agent {victim} lost: ")),
        "{stderr}"
    );
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = merged["agents"].as_array().unwrap();
    assert!(rows[1]["lost"].as_bool().unwrap(), "{rows:?}");
    assert!(!rows[0]["lost"].as_bool().unwrap() && !rows[2]["lost"].as_bool().unwrap());
    // Its partial counts are in the total, never dropped; the others ran to the end.
    let partial = rows[1]["requests"].as_u64().unwrap();
    assert!(partial > 0 && partial < 800, "{rows:?}");
    let sum: u64 = rows.iter().map(|r| r["requests"].as_u64().unwrap()).sum();
    assert_eq!(merged["requests"].as_u64().unwrap(), sum);
    assert_eq!(rows[0]["requests"].as_u64().unwrap(), 800);
    assert_eq!(rows[2]["requests"].as_u64().unwrap(), 800);
    assert_cleaned_up(&ns);
    eprintln!("killed {victim}: lost with {partial} of its 800 requests");
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_agents_that_cannot_start_fail_with_their_pods_state_and_are_deleted() {
    let ns = test_namespace("agentimg");
    let t0 = Instant::now();
    let out = load(
        &ns,
        2,
        &[
            "--image",
            "localhost/proxybench:no-such-tag",
            "--agents-timeout",
            "4s",
            "-R",
            "100",
            "-d",
            "2s",
            "-c",
            "2",
            "http://127.0.0.1:9/",
        ],
    )
    .output()
    .unwrap();
    let stderr = text(&out.stderr);
    done(&ns, &stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("proxybench: 2 agent pods of Job agents-"),
        "{stderr}"
    );
    assert!(stderr.contains(" not ready after 4s: agents-"), "{stderr}");
    // Each pod is named with the kubelet's reason: the image is not on the node.
    assert_eq!(stderr.matches("ErrImageNeverPull").count(), 2, "{stderr}");
    assert!(
        stderr.contains("localhost/proxybench:no-such-tag"),
        "{stderr}"
    );
    assert_cleaned_up(&ns);
    eprintln!(
        "bad image: refused with the pods' state after {:.1}s",
        t0.elapsed().as_secs_f64()
    );
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_ctrl_c_stops_the_agents_keeps_their_results_and_deletes_the_job() {
    let ng = testkit::Nginx::return_200(1);
    let ns = test_namespace("agentint");
    let child = load(
        &ns,
        2,
        &["-R", "200", "-d", "60s", "-c", "2", "--format", "json"],
    )
    .arg(ng.url("/"))
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let t0 = Instant::now();
    while ng.access_log_lines() < 400 {
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "the agents never ran"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: kill(2) takes no pointers; the pid is our own child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = output(child);
    let stderr = text(&out.stderr);
    done(&ns, &stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("proxybench: interrupted; results so far"),
        "{stderr}"
    );
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let requests = merged["requests"].as_u64().unwrap();
    // Every request the agents sent was answered and counted, and the Job went with the run.
    let t = Instant::now();
    while ng.access_log_lines() < requests && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ng.access_log_lines(), requests);
    assert!((400..12_000).contains(&requests), "{requests}");
    let rows = merged["agents"].as_array().unwrap();
    assert!(
        rows.iter().all(|r| !r["lost"].as_bool().unwrap()),
        "{rows:?}"
    );
    assert_cleaned_up(&ns);
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_a_scenario_load_on_agent_pods_counts_what_the_proxy_pods_logged() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("agents.toml");
    std::fs::write(
        &scenario,
        r#"name = "k8s-agents"
description = "one load on two agent pods through the proxy Deployment"
checks = ["coffee.failures == 0", "proxy.requests == coffee.requests"]

[[backends]]
name = "cafe"
count = 1

[proxy]
[[proxy.listeners]]
name = "http"
server_names = ["cafe.example.com"]
[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
keepalive = 8
[[proxy.routes]]
path = "/coffee"
upstream = "cafe"

[[loads]]
name = "coffee"
url = "http://cafe.example.com/coffee"
rate = 300
connections = 4
duration = "3s"
agents = 2
"#,
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("agentscn");
    let out = kube::run_as_role(run_command(&root, &ns, &[]), &root, &scenario, &ns, &[]);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stderr}\n{}",
        text(&out.stdout)
    );
    let data = find(&root, "data.json");
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&data[0]).unwrap()).unwrap();
    let case = &d["cases"][0];
    let load = &case["loads"][0];
    assert_eq!(load["requests"].as_u64().unwrap(), 900, "{load}");
    assert_eq!(case["logs"]["access_lines"].as_u64().unwrap(), 900);
    let dist = &case["distributed"][0];
    let place = dist["place"].as_str().unwrap();
    assert!(place.starts_with("2 pods of Job agents-"), "{place}");
    // The load aims at the proxy's Service (its ClusterIP), which the agents reach from the pod
    // network of either node: not on a node's network.
    assert!(
        place.ends_with(&format!("in namespace {ns}")) && !place.contains("host network"),
        "{place}"
    );
    assert!(
        case["findings"]
            .to_string()
            .contains("at its ClusterIP 198.18.128."),
        "{}",
        case["findings"]
    );
    let shares: Vec<u64> = dist["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["requests"].as_u64().unwrap())
        .collect();
    assert_eq!(shares, vec![450, 450]);
    assert_eq!(find(&root, "agent-1.json").len(), 1);
    assert_cleaned_up(&ns);
}

/// A rule in this machine's OUTPUT chain that refuses every connection it opens to a
/// ClusterIP (198.18.128.0/24, matched on conntrack's original destination, since kube-proxy
/// has already DNATed the packet to a pod by then) at the proxy listener's port 8080: the bench
/// host of a cluster whose Service network it does not route. Only that port, so that the API
/// server on this machine still reaches metrics-server's Service (a namespace cannot be deleted
/// while an aggregated API fails discovery). Pod traffic is forwarded, not sent from here, so
/// agents still reach the Services. Removed on drop, even when the test fails.
struct NoServiceRouteFromHere;

impl NoServiceRouteFromHere {
    const RULE: [&'static str; 16] = [
        "OUTPUT",
        "-p",
        "tcp",
        "-m",
        "conntrack",
        "--ctorigdst",
        "198.18.128.0/24",
        "--ctorigdstport",
        "8080",
        "-m",
        "comment",
        "--comment",
        "proxybench-test-remote-cluster",
        "-j",
        "REJECT",
        "--reject-with=tcp-reset",
    ];

    fn add() -> NoServiceRouteFromHere {
        let st = Command::new("iptables")
            .arg("-I")
            .args(Self::RULE)
            .status()
            .unwrap();
        assert!(st.success(), "iptables -I failed");
        NoServiceRouteFromHere
    }
}

impl Drop for NoServiceRouteFromHere {
    fn drop(&mut self) {
        let _ = Command::new("iptables").arg("-D").args(Self::RULE).status();
    }
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_a_load_whose_service_does_not_answer_here_runs_from_an_agent_pod() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("remote.toml");
    std::fs::write(
        &scenario,
        kube::on_cluster("k8s-remote", "", &kube::coffee(100, 4, "4s", "")),
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("remote");
    let out = {
        let _rule = NoServiceRouteFromHere::add();
        kube::run_k8s_as_role(&root, &scenario, &ns, &[])
    };
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let d = kube::data(&root, &out);
    let case = &d["cases"][0];
    let load = &case["loads"][0];
    // Exact, from one agent pod: 100 r/s for 4 s, every answer in the proxy pod's log and
    // counted by the backends.
    assert_eq!(load["requests"].as_u64().unwrap(), 400, "{load}");
    assert_eq!(kube::failed(load), 0, "{load}");
    let (lines, _) = kube::access_count(&root);
    assert_eq!(lines, 400, "access-log lines");
    assert_eq!(
        kube::backend_requests(case, "cafe"),
        400,
        "backend counters"
    );
    let place = case["distributed"][0]["place"].as_str().unwrap();
    assert!(place.starts_with("1 pod of Job agents-"), "{place}");
    let findings = case["findings"].to_string();
    assert!(
        findings.contains("Load 'coffee' ran from 1 agent in the cluster: its target 198.18.128.")
            && findings.contains(":8080 did not answer from this machine"),
        "{findings}"
    );
    let env = kube::env_json(&root);
    assert_eq!(env["platform"]["load_paths"][0]["from"], place, "{env}");
    eprintln!("remote: 400 requests from {place}, {lines} access-log lines");
    assert_cleaned_up(&ns);
}
