//! Services, pod reach and pods run to completion against the real test cluster (`make
//! test-k8s`): a NodePort Service's addresses from the API and its ClusterIP answering from this
//! machine, the pod-IP path detected (this machine is a node), the same pod port through a
//! port-forward, the added cost of the port-forward measured, and `run_pod`'s exit code and log.

mod common;

use common::{shell_deployment, write, Ns};
use proxybench_k8s::k8s_openapi::api::core::v1::{Container, Pod, PodSpec, Service};
use proxybench_k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proxybench_k8s::{service, PodPath, ServiceType};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(120);

/// One `GET /` on a new connection: the answer, and how long until its whole body (`web\n`)
/// had arrived (not until the connection's end: a port-forward passes the close on later).
fn get(addr: SocketAddr) -> (String, Duration) {
    let t = Instant::now();
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("{addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut b = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut took = None;
    loop {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => b.extend_from_slice(&chunk[..n]),
        }
        if b.ends_with(b"\r\n\r\nweb\n") {
            took = Some(t.elapsed());
            break;
        }
    }
    let b = String::from_utf8_lossy(&b).into_owned();
    (b, took.unwrap_or_else(|| t.elapsed()))
}

/// The median and the 90th percentile of `n` GETs to `addr`, in ms.
fn timed(addr: SocketAddr, n: usize) -> (f64, f64) {
    let mut ms: Vec<f64> = (0..n)
        .map(|_| {
            let (b, d) = get(addr);
            assert!(b.starts_with("HTTP/1.1 200"), "{addr}: {b}");
            d.as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    (ms[n / 2], ms[n * 9 / 10])
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_services_pod_reach_and_pods_run_to_completion() {
    let ns = Ns::new("reach");
    let c = &ns.cluster;
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "web.yaml",
        &shell_deployment(
            "web",
            2,
            "printf 'events {}\\nhttp { server { listen 0.0.0.0:18080; return 200 \"web\\\\n\"; } }\\n' > /tmp/n.conf\nexec /usr/sbin/nginx -c /tmp/n.conf -g 'daemon off; pid /tmp/n.pid;'",
            "wget -q -O- http://127.0.0.1:18080/",
            0,
        ),
    );
    c.apply(&file, &ns.name).unwrap_or_else(|e| panic!("{e}"));
    let sel: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
    let svc = service(
        "web",
        &sel,
        &sel,
        ServiceType::NodePort,
        &[("http".into(), 18080)],
    );
    c.apply_object::<Service>(&ns.name, &svc)
        .unwrap_or_else(|e| panic!("{e}"));
    c.wait_deployment_ready(&ns.name, "web", 2, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));

    // The Service as the API has it: its type, ClusterIP and a NodePort for its named port.
    let a = c
        .service_address(&ns.name, "web")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.kind, ServiceType::NodePort, "{a:?}");
    let ip = a.cluster_ip.expect("a ClusterIP");
    let p = a.port("http").expect("the port named http").clone();
    assert_eq!(a.port("18080"), Some(&p), "by number too: {a:?}");
    assert_eq!(a.port("nope"), None);
    assert!(p.node_port.is_some_and(|n| n >= 30000), "{a:?}");
    // kube-proxy routes the ClusterIP from this machine (a node) to the pods, once it has
    // programmed the Service's endpoints (at most one sync period after they are ready: it
    // rejects connections to a Service without endpoints until then).
    let t = Instant::now();
    while !proxybench_k8s::reaches(ip, p.port, Duration::from_secs(1))
        && t.elapsed() < Duration::from_secs(15)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (b, _) = get(SocketAddr::new(ip, p.port));
    assert!(b.ends_with("web\n"), "{ip}:{}: {b}", p.port);

    // This machine is a node: the pod IP answers, and the path says so.
    let pod = c.pods(&ns.name, Some("app=web")).unwrap().remove(0);
    let pod_ip = pod.ip.expect("a pod IP");
    assert_eq!(
        c.detect_pod_path(pod_ip, 18080, Duration::from_secs(2)),
        PodPath::PodIp
    );
    // A port nothing listens on is not reached.
    assert_eq!(
        c.detect_pod_path(pod_ip, 18081, Duration::from_secs(2)),
        PodPath::PortForward
    );
    let direct = c
        .pod_port(&ns.name, &pod.name, pod_ip, 18080, PodPath::PodIp)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(direct.addr(), SocketAddr::new(pod_ip, 18080));
    let fwd = c
        .pod_port(&ns.name, &pod.name, pod_ip, 18080, PodPath::PortForward)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(fwd.addr().ip().is_loopback(), "{fwd:?}");
    // The cost of the port-forward path: a new connection and one GET each, alternated in
    // rounds so that the machine's load falls on both alike.
    let (mut d, mut f) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        d.push(timed(direct.addr(), 10));
        f.push(timed(fwd.addr(), 10));
    }
    let med = |v: &[(f64, f64)], i: usize| {
        let mut x: Vec<f64> = v.iter().map(|t| if i == 0 { t.0 } else { t.1 }).collect();
        x.sort_by(f64::total_cmp);
        x[x.len() / 2]
    };
    eprintln!(
        "GET on a new connection, median of 5 rounds of 10: pod IP {:.2} ms (p90 {:.2}), \
         port-forward {:.2} ms (p90 {:.2}): +{:.2} ms",
        med(&d, 0),
        med(&d, 1),
        med(&f, 0),
        med(&f, 1),
        med(&f, 0) - med(&d, 0)
    );
    assert_eq!(fwd.forward_error(), None);

    // A pod run to completion: its exit code and its whole log, and it is gone afterwards.
    let run = Pod {
        metadata: ObjectMeta {
            name: Some("once".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            containers: vec![Container {
                name: "once".into(),
                image: Some(common::NGINX_IMAGE.into()),
                image_pull_policy: Some("Never".into()),
                command: Some(vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    "echo out; echo err >&2; exit 3".into(),
                ]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let r = c
        .run_pod(&ns.name, &run, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.code, 3, "{r:?}");
    let lines: Vec<&str> = r.log.lines().collect();
    assert!(lines.contains(&"out") && lines.contains(&"err"), "{r:?}");
    eprintln!("run_pod: exit {} after {:?}", r.code, r.took);
    let t = Instant::now();
    while c
        .pods(&ns.name, None)
        .unwrap()
        .iter()
        .any(|p| p.name == "once")
        && t.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !c.pods(&ns.name, None)
            .unwrap()
            .iter()
            .any(|p| p.name == "once"),
        "the pod was deleted"
    );
}

#[test]
#[ignore = "needs the test cluster (make test-k8s)"]
fn k8s_a_port_forward_whose_pod_is_gone_fails_with_the_reason_and_never_hangs() {
    // A forward opened to a pod that answers; the pod is then killed and its object deleted.
    // A new connection through the same forward is tried once more (a reconnect), then closed,
    // and the forward says why: the client sees the close, not a hang.
    let ns = Ns::new("fwddies");
    let c = &ns.cluster;
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "web.yaml",
        &shell_deployment(
            "web",
            1,
            "printf 'events {}\\nhttp { server { listen 0.0.0.0:18080; return 200 \"web\\\\n\"; } }\\n' > /tmp/n.conf\nexec /usr/sbin/nginx -c /tmp/n.conf -g 'daemon off; pid /tmp/n.pid;'",
            "wget -q -O- http://127.0.0.1:18080/",
            0,
        ),
    );
    c.apply(&file, &ns.name).unwrap_or_else(|e| panic!("{e}"));
    c.wait_deployment_ready(&ns.name, "web", 1, BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    let pod = c.pods(&ns.name, Some("app=web")).unwrap().remove(0);
    let fwd = c
        .port_forward(&ns.name, &pod.name, 18080)
        .unwrap_or_else(|e| panic!("{e}"));
    let (b, _) = get(fwd.addr());
    assert!(b.ends_with("web\n"), "through the forward: {b}");
    assert_eq!(fwd.last_error(), None);
    // The Deployment goes (no new pod takes the name's place), its pod killed at once.
    c.scale_deployment(&ns.name, "web", 0)
        .unwrap_or_else(|e| panic!("{e}"));
    c.delete_pod(&ns.name, &pod.name, Some(Duration::ZERO))
        .unwrap_or_else(|e| panic!("{e}"));
    let t = Instant::now();
    while c
        .pods(&ns.name, None)
        .unwrap()
        .iter()
        .any(|p| p.name == pod.name)
        && t.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let t = Instant::now();
    let (b, took) = get(fwd.addr());
    let why = fwd.last_error().unwrap_or_default();
    eprintln!(
        "port-forward to a gone pod: closed after {took:?} ({:?} in all): {why}",
        t.elapsed()
    );
    assert_eq!(b, "", "no answer from a gone pod");
    // Two opens, each bounded at 10 s: closed within their sum, never hung.
    assert!(took < Duration::from_secs(25), "took {took:?}");
    assert!(
        why.contains(&pod.name) && why.contains("(tried twice)") && why.contains("not found"),
        "{why}"
    );
}
