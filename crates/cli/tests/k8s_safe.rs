//! Safe on a shared cluster, on the real test cluster (`make test-k8s`): every pod a run makes
//! (backends, the config check, the proxy, for each proxy kind) runs as a non-root user without
//! privilege, so a namespace that enforces Pod Security `restricted` admits them all, while it
//! refuses a plain root pod; and the namespace a run makes enforces `baseline`, which refuses a
//! host-network pod.

use std::time::Duration;

#[path = "common/k8s.rs"]
mod kube;
use kube::{
    access_count, assert_not_forbidden, backend_requests, bound_cluster_kubeconfig, cluster,
    coffee, data, failed, kubectl, kubectl_ok, namespace, ok_answers, on_cluster, run_command,
    run_k8s_as_role, test_namespace, unbind, var, with_flag,
};

/// The Pod Security label a namespace enforces by.
const ENFORCE: &str = "pod-security.kubernetes.io/enforce";

/// A pod of the pause image with `spec` (YAML lines under `spec:`, indented 2), applied with
/// kubectl in `ns`: its output, and whether the API server took it.
fn try_pod(ns: &str, name: &str, spec: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("pod.yaml");
    std::fs::write(
        &f,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{spec}\n  \
             containers:\n  - name: pause\n    image: localhost/pause:1\n    \
             imagePullPolicy: Never\n"
        ),
    )
    .unwrap();
    let out = kubectl()
        .args(["apply", "-n", ns, "-f"])
        .arg(&f)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// 50 r/s for 4 s, and a reload at 2 s (the reload runs in the pod, as its user). A keep-alive
/// connection the reload closes under a request is retried once (Caddy closes idle ones at a
/// reload; seen once in 200 requests), as the zero-downtime tests do.
fn scenario() -> String {
    on_cluster(
        "k8s-safe",
        "",
        &format!(
            "{}\n[[cases]]\nname = \"main\"\nactions = [{{ at = \"2s\", reload = true }}]\n",
            coffee(50, 2, "4s", "retry_idle_closed = true")
        ),
    )
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_every_pod_of_a_run_is_admitted_under_the_restricted_pod_security_standard() {
    let c = cluster();
    for (kind, image) in [
        ("nginx", var("PROXYBENCH_TEST_NGINX_IMAGE")),
        ("haproxy", var("PROXYBENCH_TEST_HAPROXY_IMAGE")),
        ("caddy", var("PROXYBENCH_TEST_CADDY_IMAGE")),
    ] {
        let ns = namespace(&format!("restricted-{kind}"));
        c.create_namespace(&ns, &[(ENFORCE, "restricted")]).unwrap();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // The namespace does enforce: a pod as the image has it (root, the runtime's
            // defaults) is refused.
            let (taken, text) = try_pod(&ns, "root", "  automountServiceAccountToken: false");
            assert!(!taken, "{kind}: a root pod was admitted: {text}");
            assert!(
                text.contains("violates PodSecurity \"restricted"),
                "{kind}: {text}"
            );
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("safe.toml");
            std::fs::write(&file, scenario()).unwrap();
            let root = dir.path().join("results");
            // As the ServiceAccount bound to what `k8s rbac --namespace` prints.
            let out = run_k8s_as_role(
                &root,
                &file,
                &ns,
                &["--proxy", kind, "--proxy-image", &image],
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{kind}: the run failed: {stderr}");
            let d = data(&root, &out);
            let case = &d["cases"][0];
            let events = case["events"].as_array().unwrap();
            assert!(
                !events.is_empty() && events.iter().all(|e| e["error"].is_null()),
                "{kind}: the reload failed: {events:?}\n{stderr}"
            );
            assert_eq!(case["reloads"][0]["generation"], 2, "{kind}: {case}");
            // 50 r/s for 4 s: exactly 200, none failed; every answer a line of the proxy pod's
            // access log, every 2xx counted by a backend.
            let load = &case["loads"][0];
            let requests = load["requests"].as_u64().unwrap();
            let retried = load["retried"].as_u64().unwrap_or(0);
            assert_eq!(requests, 200, "{kind}: {load}");
            assert_eq!(failed(load), 0, "{kind}: {load}");
            let (lines, _) = access_count(&root);
            assert!(
                (requests..=requests + retried).contains(&lines),
                "{kind}: {lines} access-log lines for {requests} answers"
            );
            let ok = ok_answers(load);
            let served = backend_requests(case, "cafe");
            assert!(
                (ok..=ok + retried).contains(&served),
                "{kind}: the backends counted {served} for {ok}"
            );
            // What the pods used (the metrics API), beside the requests they asked for.
            let mut peak: std::collections::BTreeMap<String, (f64, u64)> = Default::default();
            for m in case["cluster"]["metrics"].as_array().unwrap() {
                let pod = m["pod"].as_str().unwrap();
                let role = if pod.starts_with("proxy") {
                    "proxy"
                } else {
                    "backend"
                };
                let e = peak.entry(role.to_string()).or_default();
                e.0 = e.0.max(m["cpu_millicores"].as_f64().unwrap());
                e.1 = e.1.max(m["memory_bytes"].as_u64().unwrap());
            }
            for (role, (cpu, mem)) in &peak {
                eprintln!(
                    "{kind}: {role} pods peaked at {cpu:.0}m cpu, {:.1} MiB at 50 r/s",
                    *mem as f64 / 1048576.0
                );
            }
            eprintln!(
                "{kind}: {requests} requests, 0 failed, {lines} access lines, backends {served}"
            );
        }));
        let _ = c.delete_namespace(&ns, Duration::from_secs(120));
        if let Err(p) = result {
            std::panic::resume_unwind(p);
        }
    }
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_the_namespace_a_run_makes_enforces_baseline() {
    let c = cluster();
    let before = c.managed_namespaces(Some("proxybench-")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("safe.toml");
    std::fs::write(&file, scenario()).unwrap();
    let root = dir.path().join("results");
    // run_command's line without its `--namespace`: the run makes its own, kept here; as a
    // ServiceAccount bound to the ClusterRole `k8s rbac` prints for such runs.
    let account = test_namespace("baseline-account");
    let kc = bound_cluster_kubeconfig(&account, dir.path(), Some(&file));
    let out = with_flag(
        with_flag(
            run_command(&root, "unused", &["--keep"]),
            "--namespace",
            None,
        ),
        "--kubeconfig",
        Some(kc.to_str().unwrap()),
    )
    .arg(&file)
    .output()
    .unwrap();
    unbind(&account);
    assert_not_forbidden(&root, &out);
    let made: Vec<String> = c
        .managed_namespaces(Some("proxybench-"))
        .unwrap()
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "the run failed: {stderr}");
        assert_eq!(made.len(), 1, "the run's kept namespace: {made:?}");
        let ns = &made[0];
        let label = kubectl()
            .args(["get", "namespace", ns, "-o"])
            .arg(format!(
                "jsonpath={{.metadata.labels.{}}}",
                ENFORCE.replace('.', "\\.")
            ))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&label.stdout), "baseline");
        // The run's pods were admitted and served.
        let d = data(&root, &out);
        let load = &d["cases"][0]["loads"][0];
        assert_eq!(load["requests"].as_u64(), Some(200), "{load}");
        assert_eq!(failed(load), 0, "{load}");
        // A pod on the node's network is refused there.
        let (taken, text) = try_pod(
            ns,
            "hostnet",
            "  hostNetwork: true\n  automountServiceAccountToken: false",
        );
        assert!(!taken, "a host-network pod was admitted: {text}");
        assert!(text.contains("violates PodSecurity \"baseline"), "{text}");
        eprintln!(
            "namespace {ns}: enforce=baseline; a host-network pod: {}",
            text.trim()
        );
    }));
    for ns in &made {
        let _ = c.delete_namespace(ns, Duration::from_secs(120));
    }
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_a_run_as_a_service_account_bound_to_what_k8s_rbac_prints_passes() {
    let c = cluster();
    let ns = namespace("rbac");
    c.create_namespace(&ns, &[k8s::POD_SECURITY]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let kc = kube::bound_kubeconfig(&ns, dir.path());
        // The token is no admin's: outside its namespace it may read nothing.
        let other = kubectl()
            .args(["--kubeconfig"])
            .arg(&kc)
            .args(["get", "pods", "-n", "default"])
            .output()
            .unwrap();
        assert!(
            !other.status.success() && String::from_utf8_lossy(&other.stderr).contains("forbidden"),
            "{other:?}"
        );
        // metrics-server's API is served some seconds after the cluster starts: waited for,
        // so that the run reads the metrics API as the ServiceAccount too.
        let t0 = std::time::Instant::now();
        while !cluster().serves_group("metrics.k8s.io").unwrap_or(false)
            && t0.elapsed() < Duration::from_secs(90)
        {
            std::thread::sleep(Duration::from_secs(1));
        }
        // A user's own Deployments and Services of the names a run once used (`proxy`,
        // `backend-cafe`), made by the admin: the run makes its own beside them, named with its
        // run id, and its teardown deletes by its labels, so these stay untouched.
        let mut theirs = String::new();
        for name in ["proxy", "backend-cafe"] {
            theirs.push_str(&format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  \
                 labels: {{app: users-{name}}}\nspec:\n  replicas: 0\n  selector:\n    \
                 matchLabels: {{app: users-{name}}}\n  template:\n    metadata:\n      \
                 labels: {{app: users-{name}}}\n    spec:\n      containers:\n      - name: \
                 c\n        image: {}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  \
                 name: {name}\nspec:\n  selector: {{app: users-{name}}}\n  ports:\n  - \
                 port: 80\n---\n",
                var("PROXYBENCH_TEST_NGINX_IMAGE")
            ));
        }
        let users = dir.path().join("users.yaml");
        std::fs::write(&users, theirs).unwrap();
        kubectl_ok(&["-n", &ns, "apply", "-f", users.to_str().unwrap()]);
        let versions = || {
            kubectl_ok(&[
                "-n",
                &ns,
                "get",
                "deployment/proxy",
                "service/proxy",
                "deployment/backend-cafe",
                "service/backend-cafe",
                "-o",
                "jsonpath={range .items[*]}{.kind}/{.metadata.name} {.metadata.uid} \
                 {.metadata.resourceVersion} {.metadata.labels}{\"\\n\"}{end}",
            ])
        };
        let before = versions();
        let file = dir.path().join("safe.toml");
        std::fs::write(&file, scenario()).unwrap();
        let root = dir.path().join("results");
        let out = with_flag(
            run_command(&root, &ns, &[]),
            "--kubeconfig",
            Some(kc.to_str().unwrap()),
        )
        .arg(&file)
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "the run as the ServiceAccount failed: {stderr}"
        );
        let d = data(&root, &out);
        let case = &d["cases"][0];
        let events = case["events"].as_array().unwrap();
        assert!(
            !events.is_empty() && events.iter().all(|e| e["error"].is_null()),
            "{events:?}"
        );
        let load = &case["loads"][0];
        assert_eq!(load["requests"].as_u64(), Some(200), "{load}");
        assert_eq!(failed(load), 0, "{load}");
        // No collector went without for want of a permission.
        let absent = case["cluster"]["absent"].to_string();
        let findings = case["findings"].to_string();
        eprintln!("absent as the ServiceAccount: {absent}");
        for text in [&absent, &findings, &stderr.to_string()] {
            assert!(
                !text.to_lowercase().contains("forbidden"),
                "a permission was missing: {text}"
            );
        }
        // The run's proxy Service was its own, named with its run id.
        assert!(
            findings.contains("the proxy's Service `proxy-pb-"),
            "{findings}"
        );
        // The user's objects are as they were (same uid, same resourceVersion), and nothing
        // of the run (labelled with an instance) is left.
        let after = versions();
        assert_eq!(after.lines().count(), 4, "{after}");
        assert_eq!(before, after, "the user's objects changed");
        let left = kubectl_ok(&[
            "-n",
            &ns,
            "get",
            "deployments,services,configmaps,secrets,pods,jobs",
            "-l",
            "app.kubernetes.io/instance",
            "-o",
            "name",
        ]);
        assert_eq!(left.trim(), "", "the run's objects left behind");
        eprintln!("the user's objects survived the run untouched:\n{after}");
    }));
    let _ = c.delete_namespace(&ns, Duration::from_secs(120));
    kube::unbind(&ns);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}
