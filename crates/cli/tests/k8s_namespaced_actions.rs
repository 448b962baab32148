//! Cluster actions in another namespace, on the real test cluster (`make test-k8s`): a run's
//! `scale` and `rollout_restart` act on a StatefulSet and a Deployment (and `rollout_restart` on
//! a DaemonSet) in a second namespace (made and deleted by the test, never by the run), and what
//! the record says is checked against the API's state afterwards. The runs are under the Roles
//! `proxybench k8s rbac --scenario` prints (the other namespace's included); the tests set up as
//! admin. In the SIGKILL test, the run in a namespace the user made and its `k8s clean --namespace`
//! are under the Role; the run that makes its own namespace stays admin (a ClusterRole's case).

use std::collections::BTreeSet;
use std::time::Duration;

#[path = "common/k8s.rs"]
mod kube;
use kube::{cluster, data, leftover, namespace, run_k8s_as_role, test_namespace};

/// A Deployment `web` and a StatefulSet `db`, one pause pod each, and a DaemonSet `agent` on
/// the node `NODE` (this machine: the other node may be taken away by another test).
const WORKLOADS: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
        - name: pause
          image: localhost/pause:1
          imagePullPolicy: Never
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: 1
  serviceName: db
  selector:
    matchLabels:
      app: db
  template:
    metadata:
      labels:
        app: db
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
        - name: pause
          image: localhost/pause:1
          imagePullPolicy: Never
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels:
      app: agent
  template:
    metadata:
      labels:
        app: agent
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      nodeSelector:
        kubernetes.io/hostname: NODE
      containers:
        - name: pause
          image: localhost/pause:1
          imagePullPolicy: Never
";

/// The UIDs of the running pods matching `selector` in `ns`, and how many are Ready.
fn pods(c: &k8s::Cluster, ns: &str, selector: &str) -> (BTreeSet<String>, usize) {
    let pods: Vec<k8s::PodInfo> = c
        .pods(ns, Some(selector))
        .unwrap()
        .into_iter()
        .filter(|p| !p.deleting)
        .collect();
    let ready = pods.iter().filter(|p| p.ready).count();
    (pods.into_iter().map(|p| p.uid).collect(), ready)
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_scale_and_restart_a_statefulset_and_a_deployment_in_another_namespace() {
    let c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let other = namespace("other");
    c.create_namespace(&other, &[]).unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let manifest = dir.path().join("workloads.yaml");
        let node = c
            .local_node_selector()
            .and_then(|s| s.get(k8s::HOSTNAME_LABEL).cloned())
            .expect("one node of the test cluster is this machine");
        std::fs::write(&manifest, WORKLOADS.replace("NODE", &node)).unwrap();
        c.apply(&manifest, &other).unwrap();
        let bound = Duration::from_secs(120);
        c.wait_workload_ready(&other, k8s::WorkloadKind::Deployment, "web", 1, bound)
            .unwrap();
        c.wait_workload_ready(&other, k8s::WorkloadKind::StatefulSet, "db", 1, bound)
            .unwrap();
        c.wait_workload_rollout(&other, k8s::WorkloadKind::DaemonSet, "agent", bound)
            .unwrap();
        let (web_before, _) = pods(&c, &other, "app=web");
        let (db_before, _) = pods(&c, &other, "app=db");
        let (agent_before, _) = pods(&c, &other, "app=agent");
        assert_eq!(
            (web_before.len(), db_before.len(), agent_before.len()),
            (1, 1, 1)
        );
        let scenario = dir.path().join("actions.toml");
        std::fs::write(
            &scenario,
            format!(
                r#"name = "k8s-namespaced-actions"
description = "scale and restart a StatefulSet and a Deployment in another namespace"

[[backends]]
name = "cafe"
count = 1

[proxy]
replicas = 1
worker_processes = 1

[[proxy.listeners]]
name = "http"
server_names = ["cafe.example.com"]

[[proxy.upstreams]]
name = "cafe"
backends = "cafe"

[[proxy.routes]]
path = "/coffee"
upstream = "cafe"

[[loads]]
name = "coffee"
url = "http://cafe.example.com/coffee"
rate = 20
connections = 2
duration = "40s"

[[actions]]
at = "1s"
scale = {{ target = "statefulset/db", to = 2 }}
namespace = "{other}"

[[actions]]
at = "2s"
scale = {{ target = "deployment/web", to = 2, step = "1s" }}
namespace = "{other}"

[[actions]]
at = "3s"
rollout_restart = "statefulset/db"
namespace = "{other}"

[[actions]]
at = "4s"
rollout_restart = "deployment/web"
namespace = "{other}"

[[actions]]
at = "5s"
rollout_restart = "daemonset/agent"
namespace = "{other}"
"#
            ),
        )
        .unwrap();
        let root = dir.path().join("results");
        let ns = test_namespace("actions");
        let out = run_k8s_as_role(&root, &scenario, &ns, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "the run failed: {stderr}");
        let d = data(&root, &out);
        let events = d["cases"][0]["events"].as_array().unwrap();
        let details: Vec<(&str, &str)> = events
            .iter()
            .filter(|e| e["action"] == "scale" || e["action"] == "rollout_restart")
            .map(|e| {
                assert!(e["error"].is_null(), "{e}");
                (
                    e["action"].as_str().unwrap(),
                    e["detail"].as_str().unwrap_or(""),
                )
            })
            .collect();
        eprintln!("namespaced actions: {details:?}");
        // The four actions, in order, each naming its workload and the other namespace.
        let want = [
            ("scale", "statefulset/db: 1 -> 2, ready after "),
            ("scale", "deployment/web: 1 -> 2, ready after "),
            ("rollout_restart", "statefulset/db in "),
            ("rollout_restart", "deployment/web in "),
            ("rollout_restart", "daemonset/agent in "),
        ];
        assert_eq!(details.len(), want.len(), "{details:?}\n{stderr}");
        for ((action, detail), (want_action, want_start)) in details.iter().zip(want) {
            assert_eq!(*action, want_action);
            assert!(
                detail.starts_with(want_start) && detail.contains(&format!(" in {other}")),
                "{detail}"
            );
        }
        // The API's state agrees: two Ready replicas of each, every one a pod made after the
        // restart (the first pods are gone), and nothing of the kind in the run's namespace.
        for (kind, name, selector, before) in [
            (k8s::WorkloadKind::StatefulSet, "db", "app=db", &db_before),
            (k8s::WorkloadKind::Deployment, "web", "app=web", &web_before),
        ] {
            let r = c.workload_replicas(&other, kind, name).unwrap();
            assert!(r.ready_at(2) && r.rolled_out(), "{kind}/{name}: {r}");
            let (now, ready) = pods(&c, &other, selector);
            assert_eq!((now.len(), ready), (2, 2), "{kind}/{name}: {now:?}");
            assert!(now.is_disjoint(before), "{kind}/{name} restarted: {now:?}");
        }
        let r = c
            .workload_replicas(&other, k8s::WorkloadKind::DaemonSet, "agent")
            .unwrap();
        assert!(r.ready_at(1) && r.rolled_out(), "daemonset/agent: {r}");
        let (now, ready) = pods(&c, &other, "app=agent");
        assert_eq!((now.len(), ready), (1, 1), "daemonset/agent: {now:?}");
        assert!(now.is_disjoint(&agent_before), "daemonset/agent restarted");
        // The run made and deleted its own namespace; the test's is left to the test.
        assert_eq!(leftover(&ns), Vec::<String>::new());
    }));
    let _ = c.delete_namespace(&other, Duration::from_secs(120));
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

/// One pause pod in a Deployment `waitweb`, for the `wait` test.
const WAIT_WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: waitweb
spec:
  replicas: 1
  selector:
    matchLabels:
      app: waitweb
  template:
    metadata:
      labels:
        app: waitweb
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
        - name: pause
          image: localhost/pause:1
          imagePullPolicy: Never
";

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_apply_and_delete_wait_for_a_condition_and_for_deletion() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("web.yaml"), WAIT_WEB).unwrap();
    // The first apply is a template: the run's backend Service for group cafe, as the run
    // names it, goes into an annotation.
    std::fs::write(
        dir.path().join("web.yaml.j2"),
        WAIT_WEB.replace(
            "  name: waitweb\n",
            "  name: waitweb\n  annotations:\n    proxybench.test/backend: \"{{ backends.cafe }}\"\n",
        ),
    )
    .unwrap();
    let scenario = dir.path().join("wait.toml");
    std::fs::write(
        &scenario,
        kube::on_cluster(
            "k8s-wait",
            "",
            &(kube::coffee(50, 4, "8s", "")
                + "
[[actions]]
at = \"1s\"
apply = \"web.yaml.j2\"
wait = \"condition=Available\"

[[actions]]
at = \"2s\"
apply = \"web.yaml\"
wait = \"condition=Available=False\"
timeout = \"1s\"

[[actions]]
at = \"4s\"
delete = \"web.yaml\"
wait = \"delete\"
"),
        ),
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("wait");
    let out = run_k8s_as_role(&root, &scenario, &ns, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The second wait cannot be met: the action fails, the run goes on and exits 1.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let d = data(&root, &out);
    let events = d["cases"][0]["events"].as_array().unwrap().clone();
    assert_eq!(events.len(), 3, "{events:?}");
    let detail = |i: usize| events[i]["detail"].as_str().unwrap_or_default().to_string();
    // Applied, then Available once its pod was Ready: a time after the apply, from the API.
    let d0 = detail(0);
    assert!(events[0]["error"].is_null(), "{:?}", events[0]);
    let after = |d: &str, what: &str| -> f64 {
        let at = d.find(what).unwrap_or_else(|| panic!("{what} in {d}")) + what.len();
        d[at..].split(' ').next().unwrap().parse().unwrap()
    };
    let available = after(&d0, "Deployment/waitweb condition=Available after ");
    assert!(available > 0.0 && available < 60.0, "{d0}");
    // A condition that never comes fails at its timeout, quoting the object's conditions.
    let e1 = events[1]["error"].as_str().unwrap_or_default();
    assert!(
        e1.contains("condition Available=False of Deployment/waitweb: not done after 1s")
            && e1.contains("Available=True (MinimumReplicasAvailable"),
        "{:?}",
        events[1]
    );
    // Deleted, and gone from the API: the wait saw it go.
    let d2 = detail(2);
    assert!(events[2]["error"].is_null(), "{:?}", events[2]);
    let gone = after(&d2, "Deployment/waitweb delete after ");
    assert!(gone < 60.0, "{d2}");
    // The template as applied, kept with the case's configs: the backend Service's real name.
    let rendered = kube::find(&root, "web.yaml");
    assert_eq!(rendered.len(), 1, "{rendered:?}");
    let text = std::fs::read_to_string(&rendered[0]).unwrap();
    let service = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("proxybench.test/backend: "))
        .unwrap_or_else(|| panic!("{text}"))
        .trim_matches('"')
        .to_string();
    let counted: Vec<String> = d["cases"][0]["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap_or_default().to_string())
        .collect();
    eprintln!("the template named the backend Service {service}; backends {counted:?}");
    // `backend-cafe-<run id>`, the run id being `pb-<stamp>-<hex>`: not the parse-time stand-in.
    assert!(service.starts_with("backend-cafe-pb-"), "{text}");
    eprintln!("wait: Available after {available:.3} s, deleted after {gone:.3} s; {e1}");
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}

/// An HTTPRoute of a Gateway `gw` that no controller serves: the test writes its status.
const ROUTE: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: r
spec:
  parentRefs:
    - name: gw
  rules:
    - backendRefs:
        - name: backend-cafe
          port: 8080
";

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_apply_waits_for_a_routes_accepted_from_its_parents() {
    // A route's Accepted is written per parent (status.parents[].conditions), not in
    // status.conditions: the wait reads it there. The test plays the Gateway's controller and
    // accepts the route 1 s after it appears, so the wait must last at least that long.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("route.yaml"), ROUTE).unwrap();
    let scenario = dir.path().join("route.toml");
    std::fs::write(
        &scenario,
        kube::on_cluster(
            "k8s-route-wait",
            "",
            &(kube::coffee(50, 4, "8s", "")
                + "
[[actions]]
at = \"1s\"
apply = \"route.yaml\"
wait = \"condition=Accepted\"
timeout = \"30s\"
"),
        ),
    )
    .unwrap();
    let root = dir.path().join("results");
    let ns = test_namespace("route");
    // Under the Role `k8s rbac --scenario` prints (HTTPRoutes included); the test, as admin,
    // plays the controller.
    let kc = kube::bound_kubeconfig_for(&ns, dir.path(), Some(&scenario));
    let child = kube::with_flag(
        kube::run_command(&root, &ns, &[]),
        "--kubeconfig",
        Some(kc.to_str().unwrap()),
    )
    .arg(&scenario)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // Wait for the route to exist (the run applies it 1 s into its case), then accept it.
    let seen = std::time::Instant::now();
    loop {
        let o = kube::kubectl()
            .args(["-n", &ns, "get", "httproute", "r", "-o", "name"])
            .output()
            .unwrap();
        if o.status.success() {
            break;
        }
        assert!(
            seen.elapsed() < Duration::from_secs(240),
            "the route never appeared"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    let status = "{\"status\":{\"parents\":[{\"parentRef\":{\"name\":\"gw\"},\
        \"controllerName\":\"proxybench.test/controller\",\"conditions\":[{\"type\":\"Accepted\",\
        \"status\":\"True\",\"reason\":\"Accepted\",\"message\":\"accepted by the test\",\
        \"observedGeneration\":1,\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}]}}";
    let o = kube::kubectl()
        .args(["-n", &ns, "patch", "httproute", "r", "--subresource=status"])
        .args(["--type=merge", "-p", status])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = child.wait_with_output().unwrap();
    kube::unbind(&ns);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the run failed: {stderr}");
    assert!(!stderr.to_lowercase().contains("forbidden"), "{stderr}");
    let d = data(&root, &out);
    let events = d["cases"][0]["events"].as_array().unwrap().clone();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0]["error"].is_null(), "{:?}", events[0]);
    let detail = events[0]["detail"].as_str().unwrap_or_default();
    let what = "HTTPRoute/r condition=Accepted after ";
    let at = detail.find(what).unwrap_or_else(|| panic!("{detail}")) + what.len();
    let took: f64 = detail[at..].split(' ').next().unwrap().parse().unwrap();
    // Accepted 1 s after the route was seen, which was after the apply began.
    assert!((1.0..30.0).contains(&took), "{detail}");
    eprintln!("route accepted after {took:.3} s of the apply (the test accepted it 1 s after it appeared)");
    assert_eq!(leftover(&ns), Vec::<String>::new(), "namespace left behind");
}

/// Starts a 60 s run in `ns` and kills it with SIGKILL once its proxy pod is Running: nothing of
/// the run can clean up after that.
/// `ns` empty: the run makes its own namespace, which is returned; else `ns` itself.
/// With `account`, the run is ServiceAccount `bench` of that namespace, bound to what `k8s rbac
/// --scenario` prints for it: the Role of `ns` (then `account` is `ns`), or for a run that makes
/// its own namespace the ClusterRole (its kubeconfig is returned beside the namespace;
/// [`kube::unbind`]`(account)` after).
fn kill_a_run_midway(
    ns: &str,
    dir: &std::path::Path,
    account: Option<&str>,
) -> (String, Option<std::path::PathBuf>) {
    let scenario = dir.join("killed.toml");
    std::fs::write(
        &scenario,
        kube::on_cluster("k8s-killed", "", &kube::coffee(50, 2, "60s", "")),
    )
    .unwrap();
    let before = kube::made_namespaces(&[]);
    let kc = account.map(|a| match ns {
        "" => kube::bound_cluster_kubeconfig(a, dir, Some(&scenario)),
        _ => kube::bound_kubeconfig_for(ns, dir, Some(&scenario)),
    });
    let mut cmd = kube::run_command(&dir.join("results"), ns, &[]);
    if let Some(kc) = &kc {
        cmd = kube::with_flag(cmd, "--kubeconfig", Some(kc.to_str().unwrap()));
    }
    let mut child = cmd
        .arg(&scenario)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let c = cluster();
    let t0 = std::time::Instant::now();
    let mut at = ns.to_string();
    while at.is_empty() || pods(&c, &at, "proxybench/role=proxy").1 == 0 {
        assert!(t0.elapsed() < Duration::from_secs(120), "no proxy pod");
        if at.is_empty() {
            at = kube::made_namespaces(&before)
                .first()
                .cloned()
                .unwrap_or_default();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    (at, kc)
}

/// `proxybench k8s clean` with kubeconfig `kc`, then `args`.
fn clean_as(kc: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .args(["k8s", "clean", "--kubeconfig"])
        .arg(kc)
        .args(args)
        .output()
        .unwrap()
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_clean_removes_what_a_sigkilled_run_left_and_nothing_else() {
    let c = cluster();
    let dir = tempfile::tempdir().unwrap();
    // A run that made its namespace, killed: the namespace goes whole. The run and its
    // cleaning are a ServiceAccount bound to the ClusterRole `k8s rbac --scenario` prints
    // without --namespace (such a run makes and deletes namespaces).
    let account = kube::test_namespace("clean-account");
    let first = dir.path().join("1");
    std::fs::create_dir_all(&first).unwrap();
    let (made, kc) = kill_a_run_midway("", &first, Some(&account));
    let kc = kc.unwrap();
    let clean = |args: &[&str]| clean_as(kc.to_str().unwrap(), args);
    assert!(!c.managed_namespaces(Some(&made)).unwrap().is_empty());
    let out = clean(&["--namespace", &made, "--older-than", "0s", "--dry-run"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("would delete namespace/{made}\n")
    );
    assert!(
        !c.managed_namespaces(Some(&made)).unwrap().is_empty(),
        "dry"
    );
    let out = clean(&["--namespace", &made, "--older-than", "0s"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("deleted namespace/{made}\n")
    );
    // The deletion is not waited for by clean; the namespace controller takes its pods down.
    let t0 = std::time::Instant::now();
    while !leftover(&made).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "{made} left behind"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // A run in a namespace the user made, killed: its labelled objects go, the namespace and
    // the user's own object stay.
    let theirs = namespace("theirs");
    let k = |args: &[&str]| {
        let o = kube::kubectl().args(args).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    k(&["create", "namespace", &theirs]);
    k(&[
        "-n",
        &theirs,
        "create",
        "configmap",
        "users-own",
        "--from-literal=a=b",
    ]);
    let second = dir.path().join("2");
    std::fs::create_dir_all(&second).unwrap();
    // The run and its cleaning under the Role `k8s rbac --scenario` prints: `clean
    // --namespace` reads that one namespace, never the list of them.
    kube::unbind(&account);
    let (_, kc) = kill_a_run_midway(&theirs, &second, Some(&theirs));
    let kc = kc.unwrap();
    let kc = kc.to_str().unwrap();
    let out = clean_as(kc, &["--namespace", &theirs, "--older-than", "0s"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    // The run's objects, named with its run id.
    for want in [
        format!("deleted deployment {theirs}/proxy-pb-"),
        format!("deleted deployment {theirs}/backend-cafe-pb-"),
        format!("deleted service {theirs}/proxy-pb-"),
    ] {
        assert!(said.contains(&want), "{want}: {said}");
    }
    assert!(
        !said.contains("users-own") && !said.contains("namespace/"),
        "{said}"
    );
    // Nothing labelled is left once the deletions have run; the user's object is.
    let t0 = std::time::Instant::now();
    loop {
        let again = clean_as(
            kc,
            &["--namespace", &theirs, "--older-than", "0s", "--dry-run"],
        );
        let left = String::from_utf8_lossy(&again.stdout).into_owned();
        if left.starts_with("nothing to clean") {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "still there: {left}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    k(&["-n", &theirs, "get", "configmap", "users-own"]);
    kube::unbind(&theirs);
    k(&["delete", "namespace", &theirs, "--wait=false"]);
    eprintln!("clean: {made} deleted whole; in {theirs}: {said}");
}
