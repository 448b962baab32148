//! What every Kubernetes test (`k8s_*.rs`, run by `make test-k8s`) does before and after its
//! run: the test cluster's settings from the environment, a namespace of its own, the CLI's
//! `run --platform kubernetes` command line, and reading back data.json, the access logs and
//! what the run left on the cluster. Included with `#[path = "common/k8s.rs"] mod kube;`.
#![allow(dead_code)] // not every test binary uses every helper

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The cafe stack most cluster tests run: two `cafe` backends behind one nginx replica (one
/// worker) with an HTTP listener for cafe.example.com and `/coffee` routed to them; a test adds
/// its `[platform]`, loads and actions around it.
pub const SCENARIO_HEAD: &str = r#"
[[backends]]
name = "cafe"
count = 2

[proxy]
replicas = 1
worker_processes = 1

[[proxy.listeners]]
name = "http"
server_names = ["cafe.example.com"]

[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
keepalive = 16

[[proxy.routes]]
path = "/coffee"
upstream = "cafe"
"#;

/// A scenario named `name` on the Kubernetes platform: `[platform]` with `platform` (more keys,
/// or nothing), the cafe stack ([`SCENARIO_HEAD`]), then `rest` (loads, actions).
pub fn on_cluster(name: &str, platform: &str, rest: &str) -> String {
    format!(
        "name = \"{name}\"\n[platform]\nkind = \"kubernetes\"\n{platform}\n{SCENARIO_HEAD}\n{rest}"
    )
}

/// The open-loop load `coffee` at `rate` a second for `duration` over `connections`, to
/// cafe.example.com/coffee, with `more` keys (a `via`, or nothing).
pub fn coffee(rate: u32, connections: u32, duration: &str, more: &str) -> String {
    format!(
        "[[loads]]\nname = \"coffee\"\nurl = \"http://cafe.example.com/coffee\"\n{more}\n\
         rate = {rate}\nconnections = {connections}\nduration = \"{duration}\"\n"
    )
}

/// A required environment variable, or a panic naming it.
pub fn var(name: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{name} is unset: these tests need the test cluster (make test-k8s sets it)"),
    }
}

/// A fresh namespace name for one test, prefixed `ktests-`.
pub fn namespace(test: &str) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    format!(
        "ktests-{test}-{}-{}",
        t.as_secs() % 100_000,
        std::process::id() % 10_000
    )
}

/// A namespace a test makes for its run with the admin's kubeconfig, as a user makes their own
/// (no proxybench label, no Pod Security label): a run given it (`--namespace`) neither
/// creates nor deletes it. Deleted when dropped, at the end of the test.
pub struct TestNamespace(String);

impl std::ops::Deref for TestNamespace {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let _ = cluster().delete_namespace(&self.0, std::time::Duration::from_secs(120));
    }
}

/// Makes a fresh namespace for one test ([`namespace`]'s name) and waits for its `default`
/// ServiceAccount (pods are admitted once it exists).
pub fn test_namespace(test: &str) -> TestNamespace {
    let ns = namespace(test);
    let out = kubectl()
        .args(["create", "namespace", &ns])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl create namespace {ns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let made = TestNamespace(ns);
    let t0 = std::time::Instant::now();
    while !kubectl()
        .args(["-n", &made, "get", "serviceaccount", "default"])
        .output()
        .unwrap()
        .status
        .success()
    {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "no default ServiceAccount in {made}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    made
}

/// The namespaces named `proxybench-...` that proxybench made and that are not in `before`:
/// the one a run without `--namespace` made, once it exists.
pub fn made_namespaces(before: &[String]) -> Vec<String> {
    cluster()
        .managed_namespaces(Some("proxybench-"))
        .unwrap()
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect()
}

/// A client of the test cluster.
pub fn cluster() -> k8s::Cluster {
    let kc = PathBuf::from(var("PROXYBENCH_TEST_KUBECONFIG"));
    k8s::Cluster::connect(Some(&kc), None).unwrap()
}

/// The test cluster's kubectl (`make test-k8s` names it), with its kubeconfig: for what a test
/// does in the part of a controller (a Gateway's status), which proxybench never writes.
pub fn kubectl() -> Command {
    let mut c = Command::new(var("PROXYBENCH_TEST_KUBECTL"));
    c.arg("--kubeconfig").arg(var("PROXYBENCH_TEST_KUBECONFIG"));
    c
}

/// kubectl's output for `args` (the admin's kubeconfig), which must succeed.
pub fn kubectl_ok(args: &[&str]) -> String {
    let out = kubectl().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `cmd` (a [`run_command`]) with flag `flag`'s value replaced by `value`, or without the flag.
pub fn with_flag(cmd: Command, flag: &str, value: Option<&str>) -> Command {
    let mut out = Command::new(cmd.get_program());
    let mut args = cmd.get_args();
    while let Some(a) = args.next() {
        if a == flag {
            let _ = args.next();
            if let Some(v) = value {
                out.arg(flag).arg(v);
            }
            continue;
        }
        out.arg(a);
    }
    out
}

/// Makes ServiceAccount `bench` in `ns` (which exists), bound to exactly what `proxybench k8s
/// rbac --namespace ns --service-account bench` prints (applied with the admin's kubeconfig),
/// and writes a kubeconfig of a token of it (`kubectl create token`, 1 h) as
/// `dir/bench.kubeconfig`: a `proxybench` command given it (`with_flag(cmd, "--kubeconfig",
/// ...)`) has no more rights than the shipped Role, so a missing rule fails the test. The
/// admin still does the test's own setup. [`unbind`] deletes the cluster-wide part.
pub fn bound_kubeconfig(ns: &str, dir: &Path) -> PathBuf {
    bound_kubeconfig_for(ns, dir, None)
}

/// Where [`bound_kubeconfig_for`] keeps what it applied for namespace `ns`, for [`unbind`].
fn applied_rbac(ns: &str) -> PathBuf {
    std::env::temp_dir().join(format!("pb-rbac-{ns}.yaml"))
}

/// [`bound_kubeconfig`] with what a scenario needs besides (`k8s rbac --scenario SCENARIO`):
/// its Roles in other namespaces (which must exist) and its cluster-scoped kinds' ClusterRole,
/// all bound to `bench`; [`unbind`] deletes every one of them made outside `ns`.
pub fn bound_kubeconfig_for(ns: &str, dir: &Path, scenario: Option<&Path>) -> PathBuf {
    bind(ns, Some(ns), dir, scenario)
}

/// [`bound_kubeconfig_for`] for a run that makes its own namespace (no `--namespace`): the
/// ServiceAccount `bench` lives in `account_ns` (which exists) and is bound to the ClusterRole
/// `proxybench k8s rbac --service-account account_ns/bench [--scenario SCENARIO]` prints;
/// [`unbind`]`(account_ns)` deletes the ClusterRole and its binding.
pub fn bound_cluster_kubeconfig(account_ns: &str, dir: &Path, scenario: Option<&Path>) -> PathBuf {
    bind(account_ns, None, dir, scenario)
}

/// ServiceAccount `bench` in `account_ns`, bound to what `k8s rbac` prints for a run in
/// `run_ns` (`None`: a run that makes its own namespace), and a kubeconfig of its token.
fn bind(account_ns: &str, run_ns: Option<&str>, dir: &Path, scenario: Option<&Path>) -> PathBuf {
    let ns = account_ns;
    // A second binding of the same account (a test's runs one after another) keeps it.
    if !kubectl()
        .args(["get", "serviceaccount", "bench", "-n", ns])
        .output()
        .unwrap()
        .status
        .success()
    {
        kubectl_ok(&["create", "serviceaccount", "bench", "-n", ns]);
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxybench"));
    cmd.args(["k8s", "rbac", "--service-account", &format!("{ns}/bench")]);
    if let Some(r) = run_ns {
        cmd.args(["--namespace", r]);
    }
    if let Some(s) = scenario {
        cmd.arg("--scenario").arg(s);
    }
    let rbac = cmd.output().unwrap();
    assert!(rbac.status.success(), "{rbac:?}");
    std::fs::write(applied_rbac(ns), &rbac.stdout).unwrap();
    let mut apply = kubectl()
        .args(["apply", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut apply.stdin.take().unwrap(), &rbac.stdout).unwrap();
    let applied = apply.wait_with_output().unwrap();
    assert!(applied.status.success(), "{applied:?}");
    eprintln!("{}", String::from_utf8_lossy(&applied.stdout).trim());
    // A kubeconfig of the ServiceAccount's token, for the admin's cluster.
    let token = kubectl_ok(&["create", "token", "bench", "-n", ns, "--duration", "1h"]);
    let view = |path: &str| {
        kubectl_ok(&[
            "config",
            "view",
            "--raw",
            "--minify",
            "-o",
            &format!("jsonpath={{.clusters[0].cluster.{path}}}"),
        ])
    };
    let server = view("server");
    let ca = match view("certificate-authority-data") {
        d if !d.is_empty() => format!("certificate-authority-data: {d}"),
        _ => format!("certificate-authority: {}", view("certificate-authority")),
    };
    let kc = dir.join("bench.kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    \
             server: {server}\n    {ca}\nusers:\n- name: bench\n  user:\n    \
             token: {}\ncontexts:\n- name: bench\n  context:\n    cluster: c\n    \
             user: bench\n    namespace: {ns}\ncurrent-context: bench\n",
            token.trim()
        ),
    )
    .unwrap();
    kc
}

/// Deletes what [`bound_kubeconfig`] or [`bound_kubeconfig_for`] made outside namespace `ns`
/// (every object of the printed RBAC that is cluster-wide or in another namespace); what it made
/// in `ns` goes with the namespace.
pub fn unbind(ns: &str) {
    let path = applied_rbac(ns);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    let docs = k8s::manifest::parse_text(&path, &text).unwrap_or_default();
    let mut gone: Vec<(String, String, Option<String>)> = docs
        .iter()
        .map(|d| {
            let o = &d.object;
            (
                o["kind"].as_str().unwrap_or_default().to_lowercase(),
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                o["metadata"]["namespace"].as_str().map(str::to_string),
            )
        })
        .filter(|(_, _, n)| n.as_deref() != Some(ns))
        .collect();
    if gone.is_empty() {
        gone = vec![
            (
                "clusterrolebinding".into(),
                format!("proxybench-nodes-{ns}-bench"),
                None,
            ),
            ("clusterrole".into(), "proxybench-nodes".into(), None),
        ];
    }
    for (kind, name, n) in gone {
        let mut c = kubectl();
        c.args(["delete", &kind, &name, "--ignore-not-found"]);
        if let Some(n) = n {
            c.args(["-n", &n]);
        }
        let _ = c.output();
    }
}

/// `proxybench run --platform kubernetes` with the test cluster's settings into `root`, in
/// namespace `ns` (which must exist: [`test_namespace`]; empty: none, the run makes its own),
/// then `extra` (nginx's test image unless `extra` names a `--proxy-image` or a `--proxy`);
/// the caller adds the scenario (a file or a built-in name) and its own flags.
pub fn run_command(root: &Path, ns: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxybench"));
    cmd.args(["run", "--no-progress", "--results"])
        .arg(root)
        .args(["--platform", "kubernetes", "--kubeconfig"])
        .arg(var("PROXYBENCH_TEST_KUBECONFIG"))
        .args(["--image", &var("PROXYBENCH_TEST_IMAGE")]);
    if !ns.is_empty() {
        cmd.args(["--namespace", ns]);
    }
    // Without `--proxy` nginx runs; a list of kinds runs each in its default image.
    if !extra.contains(&"--proxy-image") && !extra.contains(&"--proxy") {
        cmd.args(["--proxy-image", &var("PROXYBENCH_TEST_NGINX_IMAGE")]);
    }
    cmd.args(extra);
    cmd
}

/// Runs `proxybench run SCENARIO --platform kubernetes` ([`run_command`]) to its end.
pub fn run_k8s(root: &Path, scenario: &Path, ns: &str, extra: &[&str]) -> Output {
    run_command(root, ns, extra).arg(scenario).output().unwrap()
}

/// [`run_k8s`] as a ServiceAccount bound to what `proxybench k8s rbac --scenario SCENARIO
/// --namespace ns` prints ([`bound_kubeconfig_for`], its kubeconfig beside `root`): the run has no more rights than the
/// shipped Role, and "forbidden" may appear neither on its stderr nor in its data.json; the
/// binding's cluster-wide part is deleted after it ([`unbind`]).
pub fn run_k8s_as_role(root: &Path, scenario: &Path, ns: &str, extra: &[&str]) -> Output {
    run_as_role(run_command(root, ns, extra), root, scenario, ns, &[])
}

/// [`run_k8s_as_role`] of a [`run_command`] a test made (`cmd`, without the scenario), with
/// environment variables `envs` set on it.
pub fn run_as_role(
    cmd: Command,
    root: &Path,
    scenario: &Path,
    ns: &str,
    envs: &[(&str, &str)],
) -> Output {
    let kc = bound_kubeconfig_for(ns, root.parent().unwrap(), Some(scenario));
    let out = with_flag(cmd, "--kubeconfig", Some(kc.to_str().unwrap()))
        .envs(envs.iter().copied())
        .arg(scenario)
        .output()
        .unwrap();
    unbind(ns);
    assert_not_forbidden(root, &out);
    out
}

/// No collector or step of the run whose output is `out` (results under `root`) went short of
/// a permission: "forbidden" is neither on its stderr nor in a data.json.
pub fn assert_not_forbidden(root: &Path, out: &Output) {
    let mut said = String::from_utf8_lossy(&out.stderr).into_owned();
    for f in find(root, "data.json") {
        said.push_str(&std::fs::read_to_string(f).unwrap_or_default());
    }
    assert!(
        !said.to_lowercase().contains("forbidden"),
        "a permission of the Role was missing: {said}"
    );
}

/// Every file under `dir` (recursively) whose name is `name`, sorted.
pub fn find(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(find(&p, name));
        } else if p.file_name().is_some_and(|n| n == name) {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The run's data.json (exactly one under `root`).
pub fn data(root: &Path, out: &Output) -> Value {
    let files = find(root, "data.json");
    assert_eq!(
        files.len(),
        1,
        "one data.json under {}: {files:?}\nstderr: {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap()
}

/// The run's env.json (exactly one under `root`).
pub fn env_json(root: &Path) -> Value {
    let files = find(root, "env.json");
    assert_eq!(files.len(), 1, "one env.json under {}", root.display());
    serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap()
}

/// What runs left of theirs in namespace `ns`: the namespace itself when a run made it
/// (managed by proxybench, named `ns`...), else each object labelled
/// `app.kubernetes.io/managed-by=proxybench` in it (`deployment NS/NAME`, as `k8s clean
/// --dry-run` lists them; terminating ones are gone already).
pub fn leftover(ns: &str) -> Vec<String> {
    let c = cluster();
    let mut left = c.managed_namespaces(Some(ns)).unwrap();
    let scope = k8s::CleanScope {
        namespace: Some(ns.to_string()),
        older_than: std::time::Duration::ZERO,
        dry_run: true,
    };
    left.extend(
        c.clean(&scope)
            .unwrap()
            .into_iter()
            .filter(|l| !l.starts_with("namespace/")),
    );
    left
}

/// Errors below HTTP of one load in data.json.
pub fn errors(load: &Value) -> u64 {
    load["errors"]
        .as_object()
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0)
}

/// Failed attempts of one load in data.json: errors below HTTP plus non-2xx responses.
pub fn failed(load: &Value) -> u64 {
    let bad: u64 = load["status"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(s, _)| !s.starts_with('2'))
        .filter_map(|(_, n)| n.as_u64())
        .sum();
    errors(load) + bad
}

/// 2xx answers of one load in data.json.
pub fn ok_answers(load: &Value) -> u64 {
    load["status"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(s, _)| s.starts_with('2'))
        .filter_map(|(_, n)| n.as_u64())
        .sum()
}

/// One load's p99 latency in milliseconds (0 when it recorded none).
pub fn p99_ms(load: &Value) -> f64 {
    load["latency"]["percentiles"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["p"].as_f64() == Some(99.0)))
        .and_then(|p| p["us"].as_u64())
        .unwrap_or(0) as f64
        / 1e3
}

/// Access-log lines under `dir` (every pod's `access.log`), and how many pods have one.
pub fn access_count(dir: &Path) -> (u64, usize) {
    let logs = find(dir, "access.log");
    let n = logs
        .iter()
        .map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .filter(|l| !l.trim().is_empty())
                .count() as u64
        })
        .sum();
    (n, logs.len())
}

/// The backends' completed responses in the record, summed over the instances `GROUP-*`.
pub fn backend_requests(case: &Value, group: &str) -> u64 {
    case["backends"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| {
            b["name"]
                .as_str()
                .unwrap()
                .strip_prefix(group)
                .is_some_and(|r| r.starts_with('-'))
        })
        .map(|b| b["requests"].as_u64().unwrap())
        .sum()
}

/// A graceful scale-down of the run's proxy Deployment loses nothing of ours: each replica
/// scaled away keeps serving through its preStop sleep until no node routes a new connection to
/// it, so no connect is refused or times out (before the sleep outlasted kube-proxy's sync, 2 to
/// 10 per case were). What is left is the proxy's own, with its exact shape: a keep-alive
/// connection the proxy closes at its stop signal under a request just sent cuts that request
/// (`read_idle_closed`; HTTP/1.1 has no way to announce the close, and the scenario's loads do
/// not retry), at most once per connection per replica stopped, and never in a second before the
/// first stop signal (the first deletion plus the sleep) or the one before it.
fn check_graceful_scale_down(kind: &str, name: &str, case: &Value, loads: &[Value]) {
    let pre_stop = case["cluster"]["proxy_pre_stop_s"].as_f64().unwrap();
    let deleted: Vec<f64> = {
        let mut pods: Vec<(&str, f64)> = Vec::new();
        for c in case["cluster"]["pods"].as_array().unwrap() {
            let pod = c["pod"].as_str().unwrap();
            if c["role"] == "proxy"
                && c["terminating"] == true
                && !pod.contains("-check-")
                && c["t_s"].as_f64().unwrap() > 0.0
                && !pods.iter().any(|(p, _)| *p == pod)
            {
                pods.push((pod, c["t_s"].as_f64().unwrap()));
            }
        }
        pods.into_iter().map(|(_, t)| t).collect()
    };
    let stopped = case["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["detail"].as_str())
        .filter_map(|d| {
            let (from, rest) = d.split_once(" -> ")?;
            let to = rest.split_whitespace().next()?;
            Some(from.parse::<u64>().ok()? - to.parse::<u64>().ok()?)
        })
        .sum::<u64>();
    assert!(
        stopped >= 1,
        "{kind} {name}: no replica scaled away: {}",
        case["events"]
    );
    let first_stop = deleted.iter().copied().fold(f64::INFINITY, f64::min) + pre_stop;
    assert!(
        first_stop.is_finite(),
        "{kind} {name}: no proxy pod deleted"
    );
    for l in loads {
        let errs = l["errors"].as_object().unwrap();
        let other: Vec<&String> = errs.keys().filter(|k| *k != "read_idle_closed").collect();
        assert!(
            other.is_empty(),
            "{kind} {name}: lost to the scale-down: {other:?} in {l}"
        );
        assert_eq!(failed(l), errors(l), "{kind} {name}: non-2xx answers: {l}");
        let conns = l["connections"].as_u64().unwrap();
        assert!(
            errors(l) <= conns * stopped,
            "{kind} {name}: more than one per connection per stopped replica: {l}"
        );
        for s in l["timeline"].as_array().unwrap() {
            let n = s["errors"].as_object().map_or(0, |m| m.len());
            assert!(
                n == 0 || s["t"].as_f64().unwrap() + 1.0 >= first_stop.floor(),
                "{kind} {name}: a failure in second {} before the first stop signal at {first_stop:.2} s: {l}",
                s["t"]
            );
        }
    }
}

/// Checks one case of zero-downtime-scaling `--quick` that ran proxy `kind` on the cluster
/// (`run_dir` holds its data.json and logs/) and prints its counts, latency and timeline: no
/// failed action, the loads through the Service's ClusterIP, every second of each 100 r/s load
/// sent, every answer a line of some proxy pod's access log and every 2xx counted by a backend
/// (a cut-off first attempt the proxy had logged is there too: at most the retries more), and
/// the EndpointSlice changes on the record (a removed replica leaving the endpoints).
pub fn check_zds_case(kind: &str, name: &str, case: &Value, run_dir: &Path, stderr: &str) {
    assert_eq!(case["name"], name, "{kind}");
    let events = case["events"].as_array().unwrap();
    assert!(
        events.iter().all(|e| e["error"].is_null()),
        "{kind} {name}: failed action: {events:?}\n{stderr}"
    );
    let findings = case["findings"].to_string();
    assert!(
        findings.contains("at its ClusterIP 198.18.128."),
        "{kind} {name}: the loads went through the Service: {findings}"
    );
    let loads = case["loads"].as_array().unwrap();
    let (mut requests, mut ok, mut retried, mut lost) = (0, 0, 0, 0);
    for l in loads {
        let (n, f, r) = (
            l["requests"].as_u64().unwrap(),
            failed(l),
            l["retried"].as_u64().unwrap_or(0),
        );
        eprintln!(
            "zds {kind} {name}/{}: {n} requests, {f} failed {} {}, {r} retried, p99 {:.2} ms",
            l["name"].as_str().unwrap(),
            l["errors"],
            l["status"],
            p99_ms(l)
        );
        // 100 r/s, evenly paced: every second of the load is sent, and each attempt is an
        // answer (`requests`, any status) or an error below HTTP (a closed loop, such as
        // h2-reload-down's HTTP/2 load, has no schedule to count against).
        if let (Some(planned), Some(rate)) = (l["planned_s"].as_f64(), l["mode"]["rate"].as_f64()) {
            assert_eq!(
                n + errors(l),
                (planned * rate).round() as u64,
                "{kind} {name}: {l}"
            );
        }
        requests += n;
        ok += ok_answers(l);
        retried += r;
        lost += f;
    }
    // Exact: every answer is one line of some proxy pod's access log (a cut-off first
    // attempt nginx had logged is there too: at most the retries more), and every 2xx was
    // answered by a backend, which counted it.
    let (lines, _) = access_count(&run_dir.join("logs").join(name));
    // Every answer, whatever its status, is a line of the pod that gave it.
    let answered = requests;
    eprintln!("zds {kind} {name}: {lost} failed in all");
    if findings.contains("The proxy's logs were read whole for") {
        // A pod went before the end of its log was read, and the case says so (with which
        // log and why): the count covers only what was read, so it can fall short but never
        // exceed what was answered.
        eprintln!("zds {kind} {name}: logs read in part: {lines} lines for {answered} answers");
        assert!(
            lines <= answered + retried,
            "{kind} {name}: {lines} access-log lines for {answered} answers ({retried} retried)"
        );
    } else {
        assert!(
            (answered..=answered + retried).contains(&lines),
            "{kind} {name}: {lines} access-log lines for {answered} answers ({retried} retried), \
             with every log said to be read whole; findings: {findings}"
        );
    }
    let served = backend_requests(case, "cafe");
    assert!(
        (ok..=ok + retried).contains(&served),
        "{kind} {name}: the backends counted {served} for {ok} 2xx answers ({retried} retried)"
    );
    let changes = case["cluster"]["pods"].as_array().unwrap();
    let steps: Vec<String> = changes
        .iter()
        .filter(|c| c["role"] == "endpoint" || c["role"] == "proxy")
        .map(|c| {
            format!(
                "{:.2} {} {} {} ready={}",
                c["t_s"].as_f64().unwrap(),
                c["role"].as_str().unwrap(),
                c["pod"].as_str().unwrap(),
                c["phase"].as_str().unwrap(),
                c["ready"]
            )
        })
        .collect();
    eprintln!(
        "zds {kind} {name}: {lines} access-log lines, backends {served}\n  {}",
        steps.join("\n  ")
    );
    assert!(
        changes.iter().any(|c| c["role"] == "endpoint"),
        "{kind} {name}: EndpointSlice changes on the record"
    );
    if name == "gradual-down" || name == "abrupt-down" {
        check_graceful_scale_down(kind, name, case, loads);
    }
    if name.ends_with("-down") {
        // A removed replica left the Service's endpoints.
        assert!(
            changes
                .iter()
                .any(|c| c["role"] == "endpoint" && c["phase"] == "Deleted"),
            "{kind} {name}: an endpoint left: {steps:?}"
        );
    }
}
