//! The API client layer against the shared test cluster: connecting, manifests (applied,
//! deleted, refused with the file and the API server's message; never applied over an object a
//! run did not make), exec, a Prometheus scrape through the API server's pod proxy, and a
//! port-forward to a pod's loopback.

mod common;

use common::{shell_deployment, write, Ns, NGINX_IMAGE};
use proxybench_k8s::collect::PromTarget;
use proxybench_k8s::Cluster;
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(120);

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_connect_names_the_server_version_and_refuses_an_unknown_context() {
    let c = common::cluster();
    let info = c.info();
    assert!(info.version.starts_with("v1."), "{info:?}");
    assert!(info.server.starts_with("https://"), "{info:?}");
    let kc = common::kubeconfig();
    let e = Cluster::connect(Some(&kc), Some("no-such-context"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&kc.display().to_string()) && e.contains("no-such-context"),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_a_manifest_is_applied_and_deleted() {
    let ns = Ns::new("apply");
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "# two objects, found by discovery\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: \"1\"\n---\n{}",
        shell_deployment("web", 1, "touch /tmp/ready\nexec sleep 3600", "test -f /tmp/ready", 0)
    );
    let file = write(dir.path(), "m.yaml", &text);
    let applied = ns
        .cluster
        .apply(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<(String, String, &str)> = applied
        .iter()
        .map(|o| (o.kind.clone(), o.name.clone(), o.action))
        .collect();
    assert_eq!(
        got,
        [
            ("ConfigMap".to_string(), "settings".to_string(), "applied"),
            ("Deployment".to_string(), "web".to_string(), "applied")
        ]
    );
    assert!(applied
        .iter()
        .all(|o| o.namespace.as_deref() == Some(ns.name.as_str())));
    ns.cluster
        .wait_deployment_ready(&ns.name, "web", 1, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    // Applying again is idempotent (server-side apply).
    ns.cluster
        .apply(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));

    let deleted = ns
        .cluster
        .delete(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<(&str, &str)> = deleted
        .iter()
        .map(|o| (o.name.as_str(), o.action))
        .collect();
    assert_eq!(got, [("web", "deleted"), ("settings", "deleted")]);
    let again = ns
        .cluster
        .delete(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(again.iter().all(|o| o.action == "absent"), "{again:?}");
    let e = ns.cluster.deployment_replicas(&ns.name, "web").unwrap_err();
    assert!(e.is_not_found(), "{e}");
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_a_bad_manifest_names_the_file_the_document_and_the_api_message() {
    let ns = Ns::new("badmanifest");
    let dir = tempfile::tempdir().unwrap();
    // An unknown field: strict validation refuses it.
    let file = write(
        dir.path(),
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fine\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typo\ndatta:\n  a: b\n",
    );
    let e = ns.cluster.apply(&file, &ns.name).unwrap_err().to_string();
    eprintln!("{e}");
    let head = format!("{}: document 2 (line 6, ConfigMap/typo): ", file.display());
    assert!(e.starts_with(&head), "{e}");
    assert!(
        e.contains("datta"),
        "the API server's message names the field: {e}"
    );
    // An invalid value: the API server's validation message.
    let file = write(
        dir.path(),
        "invalid.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_A_Valid_Name\n",
    );
    let e = ns.cluster.apply(&file, &ns.name).unwrap_err().to_string();
    eprintln!("{e}");
    assert!(
        e.starts_with(&format!(
            "{}: document 1 (line 1, ConfigMap/Not_A_Valid_Name): ",
            file.display()
        )),
        "{e}"
    );
    assert!(e.contains("Invalid value") || e.contains("invalid"), "{e}");
    // A kind the server does not serve.
    let file = write(
        dir.path(),
        "kind.yaml",
        "apiVersion: example.com/v1\nkind: Nothing\nmetadata:\n  name: x\n",
    );
    let e = ns.cluster.apply(&file, &ns.name).unwrap_err().to_string();
    assert_eq!(
        e,
        format!("{}: document 1 (line 1, Nothing/x): the API server serves no kind Nothing in example.com/v1", file.display())
    );
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_exec_feeds_stdin_and_returns_the_exit_status_and_output() {
    let ns = Ns::new("exec");
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "d.yaml",
        &shell_deployment(
            "box",
            1,
            "touch /tmp/ready\nexec sleep 3600",
            "test -f /tmp/ready",
            0,
        ),
    );
    ns.cluster
        .apply(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));
    ns.cluster
        .wait_deployment_ready(&ns.name, "box", 1, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    let pod = ns
        .cluster
        .pods(&ns.name, Some("app=box"))
        .unwrap()
        .remove(0)
        .name;

    let payload: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let out = ns
        .cluster
        .exec(
            &ns.name,
            &pod,
            None,
            &[
                "/bin/sh",
                "-c",
                "cat > /tmp/in; wc -c < /tmp/in; cat /tmp/in >&2; exit 3",
            ],
            Some(&payload),
            Duration::from_secs(60),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.code, 3);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "200000");
    assert!(
        out.stderr == payload,
        "stderr is the payload back ({} bytes)",
        out.stderr.len()
    );

    let ok = ns
        .cluster
        .exec(
            &ns.name,
            &pod,
            Some("main"),
            &["/bin/sh", "-c", "echo hi"],
            None,
            Duration::from_secs(30),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((ok.code, ok.stdout.as_slice()), (0, &b"hi\n"[..]));

    let missing = ns.cluster.exec(
        &ns.name,
        &pod,
        None,
        &["/no/such/binary"],
        None,
        Duration::from_secs(30),
    );
    match missing {
        Err(e) => assert!(e.to_string().contains("/no/such/binary"), "{e}"),
        Ok(o) => assert_ne!(o.code, 0, "{o:?}"),
    }
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_prometheus_text_is_scraped_through_the_pod_proxy() {
    let ns = Ns::new("prom");
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "exporter.yaml",
        &format!(
            r##"apiVersion: v1
kind: ConfigMap
metadata: {{name: exporter}}
data:
  nginx.conf: |
    worker_processes 1;
    pid /tmp/nginx.pid;
    error_log stderr;
    events {{ worker_connections 64; }}
    http {{
      access_log off;
      server {{
        listen 9113;
        location /metrics {{
          default_type text/plain;
          return 200 "# TYPE pb_reloads_total counter\npb_reloads_total{{result=\"ok\"}} 7\npb_up 1\n";
        }}
      }}
    }}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: exporter}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: exporter}}}}
  template:
    metadata: {{labels: {{app: exporter}}}}
    spec:
      terminationGracePeriodSeconds: 0
      automountServiceAccountToken: false
      volumes: [{{name: conf, configMap: {{name: exporter}}}}]
      containers:
      - name: nginx
        image: {NGINX_IMAGE}
        imagePullPolicy: Never
        args: [-c, /conf/nginx.conf, -g, "daemon off;"]
        volumeMounts: [{{name: conf, mountPath: /conf}}]
        readinessProbe:
          httpGet: {{path: /metrics, port: 9113}}
          periodSeconds: 1
"##
        ),
    );
    ns.cluster
        .apply(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));
    ns.cluster
        .wait_deployment_ready(&ns.name, "exporter", 1, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    let pod = ns
        .cluster
        .pods(&ns.name, Some("app=exporter"))
        .unwrap()
        .remove(0);
    assert!(
        pod.ip
            .is_some_and(|ip| ip.to_string().starts_with("198.18.")),
        "{pod:?}"
    );

    let samples = ns
        .cluster
        .scrape(&ns.name, &pod.name, 9113, "/metrics")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(samples.len(), 2, "{samples:?}");
    assert_eq!(samples[0].metric, "pb_reloads_total");
    assert_eq!(
        (samples[0].label("result"), samples[0].value),
        (Some("ok"), 7.0)
    );

    let origin = Instant::now();
    let target = PromTarget {
        port: 9113,
        path: "/metrics".into(),
        keep: vec!["pb_reloads".into()],
    };
    let scraper = ns.cluster.scrape_prometheus(
        &ns.name,
        "app=exporter",
        &target,
        origin,
        Duration::from_millis(300),
    );
    while scraper.snapshot().data.len() < 2 {
        assert!(origin.elapsed() < BOUND, "{:?}", scraper.snapshot());
        std::thread::sleep(Duration::from_millis(100));
    }
    let got = scraper.stop();
    assert_eq!(got.absent, None);
    for s in &got.data {
        assert_eq!(s.pod, pod.name);
        assert_eq!(s.samples.len(), 1, "only the kept metric: {s:?}");
        assert!(s.t_s > 0.0);
    }

    eprintln!("scraped at {:?}", origin.elapsed());
    // A port nothing listens on: the error carries the API server's message.
    let e = ns
        .cluster
        .scrape(&ns.name, &pod.name, 9, "/metrics")
        .unwrap_err()
        .to_string();
    eprintln!("{e} at {:?}", origin.elapsed());
    assert!(
        e.contains(&format!("pods/{}:9/proxy/metrics", pod.name)),
        "{e}"
    );
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_port_forward_reaches_a_port_on_the_pods_loopback() {
    use std::io::{Read, Write};
    let ns = Ns::new("forward");
    let dir = tempfile::tempdir().unwrap();
    // nginx on the pod's loopback only: the pod IP does not reach it, a port-forward does.
    let file = write(
        dir.path(),
        "d.yaml",
        &shell_deployment(
            "lo",
            1,
            "printf 'events {}\\nhttp { server { listen 127.0.0.1:18080; return 200 \"on loopback\\\\n\"; } }\\n' > /tmp/n.conf\nexec /usr/sbin/nginx -c /tmp/n.conf -g 'daemon off; pid /tmp/n.pid;'",
            "wget -q -O- http://127.0.0.1:18080/",
            0,
        ),
    );
    ns.cluster
        .apply(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));
    ns.cluster
        .wait_deployment_ready(&ns.name, "lo", 1, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    let pod = ns.cluster.pods(&ns.name, Some("app=lo")).unwrap().remove(0);
    let ip = pod.ip.expect("a bridge-mode pod has an IP");
    assert!(
        std::net::TcpStream::connect_timeout(&(ip, 18080).into(), Duration::from_secs(2)).is_err(),
        "{ip}:18080 is the pod's loopback only"
    );
    let get = |addr: std::net::SocketAddr| {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut b = String::new();
        let _ = s.read_to_string(&mut b);
        b
    };
    let fwd = ns
        .cluster
        .port_forward(&ns.name, &pod.name, 18080)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(fwd.addr().ip().is_loopback(), "{fwd:?}");
    // Each connection is a stream of its own: two in a row both answer.
    for _ in 0..2 {
        let b = get(fwd.addr());
        assert!(b.starts_with("HTTP/1.1 200"), "{b}");
        assert!(b.ends_with("on loopback\n"), "{b}");
    }
    assert_eq!(fwd.last_error(), None);
    // Nothing listens on 18081: the connection ends without an answer and the reason is kept.
    let closed = ns
        .cluster
        .port_forward(&ns.name, &pod.name, 18081)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(get(closed.addr()), "");
    let t = Instant::now();
    while closed.last_error().is_none() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let why = closed.last_error().expect("the reason the forward failed");
    eprintln!("forward to a closed port: {why}");
    assert!(why.contains(&pod.name) && why.contains("18081"), "{why}");

    // The test cluster's two nodes each take the kubelet's maxPods (110, k8s/cluster.sh), and
    // hold our pod among others; one more pod of ours takes one place more.
    let cap = ns.cluster.pod_capacity().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("capacity: {cap:?}");
    assert_eq!((cap.nodes, cap.allocatable), (2, 220), "{cap:?}");
    assert!(cap.used >= 1, "{cap:?}");
    let file = write(
        dir.path(),
        "one-more.yaml",
        &shell_deployment("one-more", 1, "exec sleep 3600", "true", 0),
    );
    ns.cluster
        .apply(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));
    ns.cluster
        .wait_deployment_ready(&ns.name, "one-more", 1, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    let after = ns.cluster.pod_capacity().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(after.used, cap.used + 1, "{cap:?} then {after:?}");
    assert_eq!(after.free(), cap.free() - 1, "{cap:?} then {after:?}");
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_pods_on_both_nodes_answer_on_their_ip_and_through_their_kubelet() {
    use std::io::{Read, Write};
    let ns = Ns::new("nodes");
    let dir = tempfile::tempdir().unwrap();
    // Two nodes, and one of them is this machine (the hostNetwork pods on loopback go there).
    let cap = ns.cluster.pod_capacity().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cap.nodes, 2, "{cap:?}");
    let here = ns
        .cluster
        .local_node_selector()
        .expect("one node of the test cluster is this machine");
    eprintln!("this machine is node {here:?}");
    // One nginx per node (a topology spread), answering with its pod's name on every address.
    let deployment = shell_deployment(
        "spread",
        2,
        "printf 'events {}\\nhttp { server { listen 18080; return 200 \"$hostname\\\\n\"; } }\\n' > /tmp/n.conf\nexec /usr/sbin/nginx -c /tmp/n.conf -g 'daemon off; pid /tmp/n.pid;'",
        "wget -q -O- http://127.0.0.1:18080/",
        0,
    )
    .replacen(
        "      automountServiceAccountToken: false\n",
        "      automountServiceAccountToken: false\n      topologySpreadConstraints:\n      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: spread}}}\n",
        1,
    );
    let file = write(dir.path(), "d.yaml", &deployment);
    ns.cluster
        .apply(&file, &ns.name)
        .unwrap_or_else(|e| panic!("{e}"));
    ns.cluster
        .wait_deployment_ready(&ns.name, "spread", 2, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    let pods = ns.cluster.pods(&ns.name, Some("app=spread")).unwrap();
    let nodes: std::collections::BTreeSet<_> = pods.iter().map(|p| p.node.clone()).collect();
    assert_eq!(nodes.len(), 2, "one pod on each node: {pods:?}");
    assert!(
        nodes.contains(&here.get(proxybench_k8s::HOSTNAME_LABEL).cloned()),
        "{nodes:?} {here:?}"
    );
    let get = |addr: std::net::SocketAddr| {
        let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{addr}: {e}"));
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut b = String::new();
        let _ = s.read_to_string(&mut b);
        b
    };
    let mut subnets = std::collections::BTreeSet::new();
    for p in &pods {
        // Straight to the pod IP: each node's pod subnet is routed from this machine.
        let ip = p.ip.expect("a pod IP");
        assert!(ip.to_string().starts_with("198.18."), "{p:?}");
        subnets.insert(ip.to_string().rsplit_once('.').unwrap().0.to_string());
        let b = get((ip, 18080).into());
        assert!(
            b.starts_with("HTTP/1.1 200") && b.ends_with(&format!("{}\n", p.name)),
            "{}: {b}",
            p.name
        );
        // Through the API server and the pod's kubelet: a port-forward, an exec, the log.
        let fwd = ns
            .cluster
            .port_forward(&ns.name, &p.name, 18080)
            .unwrap_or_else(|e| panic!("{e}"));
        let b = get(fwd.addr());
        assert!(b.ends_with(&format!("{}\n", p.name)), "{}: {b}", p.name);
        let out = ns
            .cluster
            .exec(
                &ns.name,
                &p.name,
                None,
                &["cat", "/etc/hostname"],
                None,
                BOUND,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (out.code, String::from_utf8_lossy(&out.stdout).trim()),
            (0, p.name.as_str()),
            "{}",
            out.text()
        );
        ns.cluster
            .logs(&ns.name, &p.name, None, false)
            .unwrap_or_else(|e| panic!("{}: {e}", p.name));
    }
    assert_eq!(
        subnets.len(),
        2,
        "each node has its own pod subnet: {pods:?}"
    );
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_a_run_never_applies_over_an_object_it_did_not_make() {
    use proxybench_k8s::k8s_openapi::api::core::v1::ConfigMap;
    use proxybench_k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use proxybench_k8s::{Error, INSTANCE};
    let ns = Ns::new("owned");
    let dir = tempfile::tempdir().unwrap();
    // A user's ConfigMap, of the name a run's would have, without a run's instance label.
    let file = write(
        dir.path(),
        "theirs.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: proxy-conf\n  labels: {owner: user}\ndata:\n  owner: user\n",
    );
    ns.cluster.apply(&file, &ns.name).unwrap();
    let run_cm = |name: &str, run: &str| ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([(INSTANCE.to_string(), run.to_string())].into()),
            ..Default::default()
        },
        data: Some([("owner".to_string(), run.to_string())].into()),
        ..Default::default()
    };
    let labelled = |sel: &str| {
        ns.cluster
            .names_labelled::<ConfigMap>(&ns.name, sel)
            .unwrap()
    };
    // Refused, named, and the user's object left as it was (no run's label on it).
    let e = ns
        .cluster
        .apply_owned(&ns.name, &run_cm("proxy-conf", "pb-a"), "pb-a")
        .unwrap_err();
    assert!(matches!(e, Error::NotOurs(_)), "{e}");
    let said = e.to_string();
    assert!(
        said.contains("ConfigMap/proxy-conf") && said.contains("without the label"),
        "{said}"
    );
    assert_eq!(labelled("owner=user"), ["proxy-conf"]);
    assert!(labelled(INSTANCE).is_empty(), "{:?}", labelled(INSTANCE));
    // A run's own object: made, and applied again by the same run.
    for _ in 0..2 {
        ns.cluster
            .apply_owned(&ns.name, &run_cm("proxy-conf-pb-a", "pb-a"), "pb-a")
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(labelled(&format!("{INSTANCE}=pb-a")), ["proxy-conf-pb-a"]);
    // Another run's object is not taken over either.
    let e = ns
        .cluster
        .apply_owned(&ns.name, &run_cm("proxy-conf-pb-a", "pb-b"), "pb-b")
        .unwrap_err();
    assert!(e.to_string().contains("another run's"), "{e}");
    assert!(labelled(&format!("{INSTANCE}=pb-b")).is_empty());
}
