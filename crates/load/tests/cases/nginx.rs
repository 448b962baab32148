// Included by tests/nginx.rs once per I/O backend (`IO`).

use proxybench_load as load;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// nginx writes its access log line after the response leaves; wait until the count settles.
fn settled_log_lines(ng: &testkit::Nginx, want_at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = ng.access_log_lines();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        let now = ng.access_log_lines();
        if now == last && now >= want_at_least {
            return now;
        }
        last = now;
    }
    last
}

fn stub_requests(ng: &testkit::Nginx) -> u64 {
    let (_, body) = testkit::http_get(ng.addr(), "/stub").unwrap();
    testkit::stub_requests(&body).unwrap()
}

#[test]
fn closed_loop_counts_equal_nginx_counts() {
    let ng = testkit::Nginx::return_200(1);
    let mut cfg = load::Config::new(&ng.url("/")).unwrap();
    cfg.io = IO;
    cfg.connections = 20;
    cfg.threads = 2;
    cfg.duration = Some(Duration::from_millis(1500));
    let rows = Arc::new(Mutex::new(Vec::new()));
    let sink = rows.clone();
    let ctl = load::Control {
        on_second: Some(Box::new(move |s: &model::Second| {
            sink.lock().unwrap().push(s.clone())
        })),
        ..load::Control::new()
    };
    let o = load::run(&cfg, &ctl).unwrap();
    let s = &o.summary;
    assert!(s.requests > 1000, "a real run: {}", s.requests);
    assert_eq!(s.error_total(), 0);
    assert_eq!(s.status.get(&200).copied(), Some(s.requests));
    assert_eq!(s.connects, 20);
    // Every request the client counted, nginx logged, and nothing more.
    assert_eq!(settled_log_lines(&ng, s.requests), s.requests);
    // stub_status counts our requests plus its own one.
    assert_eq!(stub_requests(&ng), s.requests + 1);
    // The timeline adds up to the totals, and on_second saw the same rows.
    let sum: u64 = s.timeline.iter().map(|r| r.requests).sum();
    assert_eq!(sum, s.requests);
    assert_eq!(
        s.timeline.iter().map(|r| r.bytes).sum::<u64>(),
        s.bytes_read
    );
    assert_eq!(*rows.lock().unwrap(), s.timeline);
    assert_eq!(s.latency.count, s.requests);
    assert!(s.req_per_sec.mean > 0.0);
}

#[test]
fn request_count_is_exact() {
    let ng = testkit::Nginx::return_200(1);
    let mut cfg = load::Config::new(&ng.url("/n")).unwrap();
    cfg.io = IO;
    cfg.connections = 7;
    cfg.threads = 2;
    cfg.duration = None;
    cfg.requests = Some(5003);
    let o = load::run(&cfg, &load::Control::new()).unwrap();
    assert_eq!(o.summary.requests, 5003);
    assert_eq!(o.summary.attempts(), 5003);
    assert_eq!(settled_log_lines(&ng, 5003), 5003);
    assert_eq!(stub_requests(&ng), 5004);
    assert!(o.summary.planned_s.is_none());
}

#[test]
fn open_loop_with_a_request_count_is_exact_too() {
    let ng = testkit::Nginx::return_200(1);
    let mut cfg = load::Config::new(&ng.url("/")).unwrap();
    cfg.io = IO;
    cfg.connections = 4;
    cfg.threads = 2;
    cfg.duration = None;
    cfg.requests = Some(999);
    cfg.rate = Some(5000.0);
    let o = load::run(&cfg, &load::Control::new()).unwrap();
    assert_eq!(o.summary.requests, 999);
    let sch = o.summary.schedule.as_ref().unwrap();
    assert_eq!((sch.intended, sch.sent), (999, 999));
    assert_eq!(settled_log_lines(&ng, 999), 999);
}

#[test]
fn hdr_log_holds_every_response() {
    let ng = testkit::Nginx::return_200(1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.hlog");
    let mut cfg = load::Config::new(&ng.url("/")).unwrap();
    cfg.io = IO;
    cfg.connections = 4;
    cfg.threads = 1;
    cfg.duration = Some(Duration::from_millis(1200));
    cfg.hdr_log = Some(path.clone());
    let o = load::run(&cfg, &load::Control::new()).unwrap();
    let text = std::fs::read(&path).unwrap();
    let mut total = 0;
    let mut intervals = 0;
    for item in hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&text) {
        if let hdrhistogram::serialization::interval_log::LogEntry::Interval(h) = item.unwrap() {
            let hist = model::hdr::decode(h.encoded_histogram()).unwrap();
            total += hist.len();
            intervals += 1;
            assert_eq!(h.duration(), Duration::from_secs(1));
        }
    }
    assert_eq!(total, o.summary.requests);
    assert_eq!(intervals, o.summary.timeline.len());
}

#[test]
fn stop_ends_the_run_early_with_what_was_recorded() {
    let ng = testkit::Nginx::return_200(1);
    let mut cfg = load::Config::new(&ng.url("/")).unwrap();
    cfg.io = IO;
    cfg.connections = 4;
    cfg.threads = 2;
    cfg.duration = Some(Duration::from_secs(60));
    let ctl = load::Control::new();
    let stop = ctl.stop.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        stop.store(true, Ordering::Relaxed);
    });
    let t0 = Instant::now();
    let o = load::run(&cfg, &ctl).unwrap();
    stopper.join().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(o.summary.requests > 0);
    assert_eq!(o.summary.error_total(), 0, "in-flight requests finish");
    assert_eq!(
        settled_log_lines(&ng, o.summary.requests),
        o.summary.requests
    );
}

#[test]
fn probe_reads_status_headers_and_body() {
    let ng = testkit::Nginx::return_200(1);
    let cfg = load::Config::new(&ng.url("/x")).unwrap();
    let r = load::probe::fetch(&cfg).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello\n");
    assert!(r.header("server").unwrap().starts_with("nginx"));
    let probe = load::probe::Probe::new(&cfg).unwrap();
    let (r, waited) = probe
        .poll_until(Duration::from_secs(2), Duration::from_millis(10), |r| {
            r.status == 200
        })
        .unwrap();
    assert_eq!(r.status, 200);
    assert!(waited < Duration::from_secs(2));
    let port = testkit::free_port();
    let cfg = load::Config::new(&format!("http://127.0.0.1:{port}/")).unwrap();
    let err = load::probe::fetch(&cfg).unwrap_err();
    assert_eq!(err.0, model::ErrorKind::ConnectRefused);
}
