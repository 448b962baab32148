//! The Prometheus scrape's series by type (`model::scrape`), on a real exporter whose counts
//! are known: proxybench's own live OpenMetrics endpoint (`load --metrics-listen`), scraped
//! over HTTP and parsed as the Kubernetes collector parses a pod's, while a load runs against
//! a real backend with a fixed 20 ms delay; then the exporter restarts (a second load process
//! on the same port, as a pod's restarted container), so its counters go back to zero. The
//! deltas must equal what each load counted itself (its JSON summary), across the reset.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PB: &str = env!("CARGO_BIN_EXE_proxybench");

/// A `proxybench backend` answering every request after exactly 20 ms, stopped on drop.
struct Backend(Child, u16);

impl Backend {
    fn start() -> Backend {
        let port = testkit::free_port();
        let child = Command::new(PB)
            .args(["backend", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--profile", "latency=20ms"])
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

/// One GET of `/metrics` on 127.0.0.1:`port`: the body, or `None` when nothing listens.
fn scrape(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let (head, body) = buf.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// `proxybench load` at `rate` a second for `duration` against the backend, serving its live
/// metrics on `port` until a scrape read the final values; its JSON summary.
fn load(port: u16, backend: u16, rate: &str, duration: &str) -> Value {
    let out = Command::new(PB)
        .args([
            "load", "-R", rate, "-c", "8", "-d", duration, "--format", "json",
        ])
        .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-linger", "30s"])
        .arg(format!("http://127.0.0.1:{backend}/"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn histogram_and_counter_deltas_are_exact_across_an_exporter_restart() {
    let backend = Backend::start();
    let port = testkit::free_port();
    let origin = Instant::now();
    let samples: Arc<Mutex<Vec<model::ScrapeSample>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let scraper = {
        let (samples, stop) = (samples.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(body) = scrape(port) {
                    let t = origin.elapsed().as_secs_f64();
                    let mut v = samples.lock().unwrap();
                    for x in k8s::prom::parse_prometheus(&body) {
                        v.push(model::ScrapeSample {
                            t_s: t,
                            namespace: "gw".into(),
                            pod: "exporter".into(),
                            labels: x
                                .labels
                                .iter()
                                .map(|(k, v)| format!("{k}={v:?}"))
                                .collect::<Vec<_>>()
                                .join(","),
                            metric: x.metric,
                            value: x.value,
                            kind: x.kind,
                        });
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let a = load(port, backend.1, "200", "3s");
    // The restart: an action between the two processes opens the second window.
    let restart_s = origin.elapsed().as_secs_f64();
    let b = load(port, backend.1, "100", "2s");
    let elapsed = origin.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    scraper.join().unwrap();
    let samples = samples.lock().unwrap().clone();
    let requests = |v: &Value| v["requests"].as_u64().unwrap() as f64;
    let (na, nb) = (requests(&a), requests(&b));
    assert!(
        na > nb && nb > 0.0,
        "A {na} > B {nb} > 0, so B's counts are a reset"
    );
    // What the exporter showed of A before its first scrape (counted once a second, so 0
    // unless the first scrape came after A's first second): the case window starts there.
    let first = |metric: &str| {
        samples
            .iter()
            .find(|s| s.metric == metric)
            .unwrap_or_else(|| panic!("no {metric} scraped"))
            .value
    };
    let a0 = first("proxybench_load_requests_total");
    let c0 = first("proxybench_load_latency_seconds_count");
    let event = model::Event {
        t_s: restart_s,
        action: "exec".into(),
        detail: "restart the exporter".into(),
        duration_ms: 0.0,
        error: None,
        limit: false,
    };
    let windows = model::scrape::scrape_windows(&samples, &[event], elapsed, &[0.01, 0.025, 0.03]);
    assert_eq!(windows.len(), 2);
    let (case, after) = (&windows[0], &windows[1]);
    eprintln!(
        "A counted {na}, B {nb}; first scrape {a0}; {} scrapes samples; case: {:?}; after the restart: {:?}",
        samples.len(),
        case.histograms,
        after.counters.iter().find(|c| c.metric == "proxybench_load_requests_total")
    );

    let counter = |w: &model::scrape::ScrapeWindow, m: &str| {
        let c: Vec<_> = w.counters.iter().filter(|c| c.metric == m).collect();
        assert_eq!(c.len(), 1, "one {m} series: {:?}", w.counters);
        c[0].clone()
    };
    let r = counter(case, "proxybench_load_requests_total");
    assert_eq!((r.delta, r.resets, r.pods), (na - a0 + nb, 1, 1), "{r:?}");
    let r = counter(after, "proxybench_load_requests_total");
    assert_eq!((r.delta, r.resets), (nb, 1), "{r:?}");

    let hist = |w: &model::scrape::ScrapeWindow| {
        let h: Vec<_> = w
            .histograms
            .iter()
            .filter(|h| h.metric == "proxybench_load_latency_seconds")
            .collect();
        assert_eq!(h.len(), 1, "{:?}", w.histograms);
        h[0].clone()
    };
    let h = hist(case);
    assert_eq!((h.count, h.resets), (na - c0 + nb, 1), "{h:?}");
    // Every answer waited the backend's 20 ms: none at or below 10 ms, whatever else.
    assert_eq!(h.buckets[0].le, 0.01);
    assert_eq!(h.buckets[0].count, Some(0.0), "{h:?}");
    assert_eq!(h.buckets[0].share, Some(0.0));
    // 0.025 is a bound of the exposition, 0.03 is not: its share is not made up.
    assert!(h.buckets[1].count.is_some(), "{h:?}");
    assert_eq!((h.buckets[2].count, h.buckets[2].share), (None, None));
    assert!(
        h.mean.unwrap() >= 0.02,
        "a mean below the fixed delay: {h:?}"
    );
    let h = hist(after);
    assert_eq!(h.count, nb, "{h:?}");

    // A gauge: the load ran (1) and ended (0), both seen.
    let running: Vec<_> = case
        .gauges
        .iter()
        .filter(|g| g.metric == "proxybench_load_running")
        .collect();
    assert_eq!(running.len(), 1, "{:?}", case.gauges);
    assert_eq!(
        (running[0].min, running[0].max, running[0].last),
        (0.0, 1.0, 0.0)
    );
    assert_eq!(running[0].kind, "gauge");
    assert_eq!(running[0].pod, "gw/exporter");
}
