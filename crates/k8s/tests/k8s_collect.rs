//! The collectors against the shared test cluster: pod phase/readiness changes with their
//! times while a Deployment scales, a deleted pod's log kept whole, restarts and Warning
//! events, and the metrics API saying when it is absent.

mod common;

use common::{shell_deployment, write, Ns, NGINX_IMAGE};
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(120);

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_scale_and_readiness_transitions_are_recorded_with_times() {
    let ns = Ns::new("scale");
    let dir = tempfile::tempdir().unwrap();
    let origin = Instant::now();
    let watch = ns.cluster.watch_pods(&ns.name, "app=web", origin);
    // Ready one second after start: Running-but-not-Ready is a state of its own.
    let file = write(
        dir.path(),
        "web.yaml",
        &shell_deployment(
            "web",
            1,
            "sleep 1\ntouch /tmp/ready\nexec sleep 3600",
            "test -f /tmp/ready",
            1,
        ),
    );
    ns.cluster
        .apply(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));
    ns.cluster
        .wait_deployment_ready(&ns.name, "web", 1, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    let t_up = origin.elapsed().as_secs_f64();
    ns.cluster
        .scale_deployment(&ns.name, "web", 3)
        .unwrap_or_else(|e| panic!("{e}"));
    ns.cluster
        .wait_deployment_ready(&ns.name, "web", 3, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    let t3 = origin.elapsed().as_secs_f64();
    ns.cluster
        .scale_deployment(&ns.name, "web", 1)
        .unwrap_or_else(|e| panic!("{e}"));
    ns.cluster
        .wait_deployment_ready(&ns.name, "web", 1, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    let t = Instant::now();
    while ns.cluster.pods(&ns.name, Some("app=web")).unwrap().len() > 1 {
        assert!(t.elapsed() < BOUND, "terminating pods stay");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The watch may deliver the last deletion a moment after the list no longer shows it.
    let t = Instant::now();
    while !watch.snapshot().data.changes.last().is_some_and(|c| c.gone) {
        assert!(t.elapsed() < BOUND);
        std::thread::sleep(Duration::from_millis(50));
    }
    let got = watch.stop();
    assert_eq!(got.absent, None);
    let changes = &got.data.changes;
    for c in changes {
        eprintln!(
            "{:7.3} {} {} ready={} deleting={} gone={} ready_pods={} pods={}",
            c.t_s, c.pod, c.phase, c.ready, c.deleting, c.gone, c.ready_pods, c.pods
        );
    }
    assert!(
        changes.windows(2).all(|w| w[0].t_s <= w[1].t_s),
        "times are in order"
    );
    assert!(
        changes.iter().all(|c| !c.initial),
        "the watch started before any pod"
    );
    // Every pod went Pending → Running (not Ready) → Ready, and each step has its own time.
    let pods: std::collections::BTreeSet<&str> = changes.iter().map(|c| c.pod.as_str()).collect();
    assert_eq!(pods.len(), 3, "{pods:?}");
    for p in &pods {
        let mine: Vec<_> = changes.iter().filter(|c| c.pod == *p).collect();
        assert_eq!(mine[0].phase, "Pending", "{p}: first seen Pending");
        let running = mine
            .iter()
            .position(|c| c.phase == "Running" && !c.ready)
            .expect("Running, not Ready");
        let ready = mine.iter().position(|c| c.ready).expect("Ready");
        assert!(
            running < ready && mine[running].t_s < mine[ready].t_s,
            "{p}"
        );
    }
    // The Ready count climbed to 3 after the first was up, and came back to 1.
    let first_three = changes.iter().find(|c| c.ready_pods == 3).expect("3 Ready");
    assert!(first_three.t_s > t_up && first_three.t_s <= t3);
    let gone: Vec<_> = changes.iter().filter(|c| c.gone).collect();
    assert_eq!(gone.len(), 2, "two pods were deleted");
    let last = changes.last().unwrap();
    assert_eq!((last.ready_pods, last.pods), (1, 1));
    // Scale-down: the two went not-Ready (terminating) before they were gone.
    for g in &gone {
        let term = changes
            .iter()
            .find(|c| c.pod == g.pod && c.deleting)
            .expect("terminating seen");
        assert!(term.t_s <= g.t_s && term.t_s > t3);
    }
    assert!(got.data.restarts.is_empty(), "{:?}", got.data.restarts);
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_the_log_of_a_deleted_pod_is_all_kept() {
    let ns = Ns::new("logs");
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let origin = Instant::now();
    let followers = ns
        .cluster
        .follow_logs(&ns.name, "app=chatty", &logs, origin)
        .unwrap_or_else(|e| panic!("{e}"));
    // 3000 lines at start, 2000 more at the stop signal (while the pod is terminating), then
    // exit. The image stops with SIGQUIT (nginx's graceful stop).
    let script =
        "trap 'i=0; while [ $i -lt 2000 ]; do echo \"term $i\"; i=$((i+1)); done; exit 0' TERM QUIT\n\
                  i=0; while [ $i -lt 3000 ]; do echo \"line $i\"; i=$((i+1)); done\n\
                  touch /tmp/ready\n\
                  while true; do sleep 1 & wait $!; done";
    let file = write(
        dir.path(),
        "chatty.yaml",
        &shell_deployment("chatty", 1, script, "test -f /tmp/ready", 30),
    );
    ns.cluster
        .apply(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));
    ns.cluster
        .wait_deployment_ready(&ns.name, "chatty", 1, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    let pod = ns
        .cluster
        .pods(&ns.name, Some("app=chatty"))
        .unwrap()
        .remove(0);
    // Deleted with the pod's own grace period; the Deployment replaces it.
    ns.cluster
        .delete_pod(&ns.name, &pod.name, None)
        .unwrap_or_else(|e| panic!("{e}"));
    ns.cluster
        .wait_pod_gone(&ns.name, &pod.name, Some(&pod.uid), BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    ns.cluster
        .wait_deployment_ready(&ns.name, "chatty", 1, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    let got = followers.stop(Duration::from_secs(30));
    assert_eq!(got.len(), 2, "the deleted pod and its replacement: {got:?}");
    let deleted = got
        .iter()
        .find(|l| l.uid == pod.uid)
        .expect("the deleted pod's log");
    assert_eq!(deleted.container, "main");
    assert!(deleted.complete && deleted.error.is_none(), "{deleted:?}");
    let text = std::fs::read_to_string(&deleted.path).unwrap();
    let start: String = (0..3000).map(|i| format!("line {i}\n")).collect();
    let stop: String = (0..2000).map(|i| format!("term {i}\n")).collect();
    assert_eq!(text.lines().count(), 5000);
    assert!(
        text == format!("{start}{stop}"),
        "every line, in order, once"
    );
    assert_eq!(deleted.lines, 5000);
    // The replacement still runs: the stop's final read caught up with it.
    let running = got.iter().find(|l| l.uid != pod.uid).unwrap();
    assert!(running.complete && running.error.is_none(), "{running:?}");
    assert!(std::fs::read_to_string(&running.path).unwrap() == start);
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_a_running_pods_log_is_read_up_to_the_stop() {
    let ns = Ns::new("logstop");
    let dir = tempfile::tempdir().unwrap();
    let origin = Instant::now();
    // Writes lines continuously: the stop's final read must catch up with what was written.
    let script = "i=0; while [ $i -lt 500 ]; do echo \"line $i\"; i=$((i+1)); done\n\
                  touch /tmp/ready\n\
                  exec sleep 3600";
    let file = write(
        dir.path(),
        "d.yaml",
        &shell_deployment("quiet", 2, script, "test -f /tmp/ready", 0),
    );
    let followers = ns
        .cluster
        .follow_logs(&ns.name, "app=quiet", dir.path(), origin)
        .unwrap();
    ns.cluster
        .apply(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));
    ns.cluster
        .wait_deployment_ready(&ns.name, "quiet", 2, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    let got = followers.stop(Duration::from_secs(30));
    assert_eq!(got.len(), 2, "{got:?}");
    for l in &got {
        assert!(l.complete && l.error.is_none(), "{l:?}");
        let text = std::fs::read_to_string(&l.path).unwrap();
        let expect: String = (0..500).map(|i| format!("line {i}\n")).collect();
        assert!(text == expect, "{}: {} lines", l.pod, text.lines().count());
    }
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_restarts_and_warning_events_are_recorded() {
    let ns = Ns::new("restarts");
    let dir = tempfile::tempdir().unwrap();
    let origin = Instant::now();
    let pods = ns.cluster.watch_pods(&ns.name, "", origin);
    let warnings = ns.cluster.watch_warnings(&ns.name, origin);
    // Exits 3 after 2 s, and is never Ready: restarts and "Unhealthy" warnings.
    let file = write(
        dir.path(),
        "crash.yaml",
        &shell_deployment("crash", 1, "sleep 2\nexit 3", "false", 0),
    );
    ns.cluster
        .apply(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));
    let t = Instant::now();
    loop {
        let r = pods.snapshot().data.restarts.len();
        let w = warnings.snapshot().data.len();
        if r >= 1 && w >= 1 {
            break;
        }
        assert!(t.elapsed() < BOUND, "restarts {r}, warnings {w}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let p = pods.stop();
    let w = warnings.stop();
    let r = &p.data.restarts[0];
    assert_eq!(
        (
            r.container.as_str(),
            r.restarts,
            r.exit_code,
            r.reason.as_deref()
        ),
        ("main", 1, Some(3), Some("Error"))
    );
    assert!(r.t_s > 0.0);
    // Counted as the API counts them: each change adds its jump in restartCount, and the pod
    // came during the watch, so the jumps add up to its last count.
    assert_eq!(r.added, 1, "{r:?}");
    let last = p.data.restarts.iter().map(|r| r.restarts).max().unwrap();
    assert_eq!(p.data.restarts.iter().map(|r| r.added).sum::<i32>(), last);
    assert_eq!(w.absent, None);
    // Each event's rows add up to its count's increase: the events began during the watch, so
    // to its last count (an event seen at 1, 2, 3 is 3, not 6).
    let mut by: std::collections::BTreeMap<&str, (i32, i32)> = Default::default();
    for e in &w.data {
        let (added, max) = by.entry(&e.uid).or_default();
        *added += e.added;
        *max = (*max).max(e.count);
    }
    for (uid, (added, max)) in &by {
        assert_eq!(added, max, "event {uid}: {:?}", w.data);
    }
    for e in &w.data {
        eprintln!(
            "{:7.3} {} {} {} x{}",
            e.t_s, e.object, e.reason, e.message, e.count
        );
    }
    assert!(
        w.data.iter().all(|e| e.object.starts_with("Pod/crash-")),
        "{:?}",
        w.data
    );
    assert!(
        w.data
            .iter()
            .any(|e| e.reason == "Unhealthy" || e.reason == "BackOff"),
        "{:?}",
        w.data
    );
}

/// `deployment` with each container limited to `cpu` and its replicas spread over the nodes.
fn limited(deployment: String, cpu: &str, app: &str) -> String {
    deployment.replacen(
        "        imagePullPolicy: Never\n",
        &format!(
            "        imagePullPolicy: Never\n        resources: {{limits: {{cpu: {cpu}}}, requests: {{cpu: 10m}}}}\n"
        ),
        1,
    )
    .replacen(
        "      automountServiceAccountToken: false\n",
        &format!(
            "      automountServiceAccountToken: false\n      topologySpreadConstraints:\n      - {{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: {app}}}}}}}\n"
        ),
        1,
    )
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_the_metrics_api_gives_each_pods_cpu_and_memory() {
    let ns = Ns::new("metrics");
    let dir = tempfile::tempdir().unwrap();
    assert!(
        ns.cluster.serves_group("metrics.k8s.io").unwrap(),
        "the test cluster serves the metrics API (metrics-server)"
    );
    // Two pods that spin under a CPU limit of half a core, one on each node, and one that sleeps.
    let busy = limited(
        shell_deployment(
            "busy",
            2,
            "touch /tmp/ready\nwhile :; do :; done",
            "test -f /tmp/ready",
            0,
        ),
        "500m",
        "busy",
    );
    let idle = shell_deployment(
        "idle",
        1,
        "touch /tmp/ready\nexec sleep 3600",
        "test -f /tmp/ready",
        0,
    );
    let file = write(dir.path(), "d.yaml", &format!("{busy}---\n{idle}"));
    ns.cluster
        .apply(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));
    for d in ["busy", "idle"] {
        ns.cluster
            .wait_deployment_ready(&ns.name, d, if d == "busy" { 2 } else { 1 }, BOUND)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let pods = ns.cluster.pods(&ns.name, None).unwrap();
    let nodes: std::collections::BTreeSet<_> = pods
        .iter()
        .filter(|p| p.name.starts_with("busy-"))
        .map(|p| p.node.clone())
        .collect();
    assert_eq!(nodes.len(), 2, "one busy pod on each node: {pods:?}");
    let origin = Instant::now();
    let m = ns
        .cluster
        .sample_metrics(&ns.name, "", origin, Duration::from_secs(1));
    // metrics-server scrapes the kubelets every 10 s and needs two scrapes of a pod for its CPU
    // rate: wait until the newest sample of each of the three pods is one taken over a window
    // in which every pod ran all along (a busy pod above 0.1 core).
    let latest = |data: &[proxybench_k8s::PodUsage]| {
        let mut last = std::collections::BTreeMap::new();
        for u in data {
            last.insert(u.pod.clone(), u.clone());
        }
        last
    };
    loop {
        let got = latest(&m.snapshot().data);
        let busy_ok = got
            .values()
            .filter(|u| u.pod.starts_with("busy-"))
            .filter(|u| u.cpu_cores > 0.1)
            .count();
        if busy_ok == 2 && got.keys().any(|p| p.starts_with("idle-")) {
            break;
        }
        assert!(
            origin.elapsed() < BOUND,
            "no CPU samples of all three pods in {BOUND:?}: {got:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let got = m.stop();
    assert_eq!(got.absent, None, "{got:?}");
    let last = latest(&got.data);
    for u in last.values() {
        eprintln!(
            "{:7.3} {} cpu {:.3} cores, memory {:.1} MiB",
            u.t_s,
            u.pod,
            u.cpu_cores,
            u.memory_bytes / 1048576.0
        );
        // a shell and its loop: some hundreds of KiB of working set at least, well under the
        // machine's memory
        assert!(u.memory_bytes > 100e3 && u.memory_bytes < 1e9, "{u:?}");
        if u.pod.starts_with("busy-") {
            // spinning, capped at half a core by its CFS quota (less when the machine is busy)
            assert!(u.cpu_cores > 0.1 && u.cpu_cores < 0.6, "{u:?}");
        } else {
            // asleep
            assert!(u.cpu_cores < 0.02, "{u:?}");
        }
    }
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_the_metrics_collector_says_when_it_has_no_sample() {
    // The metrics API is served, but no pod matches: the collector says it got nothing, and why,
    // rather than reporting zeros.
    let ns = Ns::new("nometrics");
    let origin = Instant::now();
    let m = ns
        .cluster
        .sample_metrics(&ns.name, "app=none", origin, Duration::from_millis(300));
    std::thread::sleep(Duration::from_millis(1200));
    let got = m.stop();
    assert!(got.data.is_empty(), "{got:?}");
    assert_eq!(
        got.absent.as_deref(),
        Some("metrics API gave no sample before the collector stopped"),
        "{got:?}"
    );
    let _ = NGINX_IMAGE;
}
