//! What instances answer: headers, bodies, status mixes, sizes, close-after-N, per-path
//! overrides, slow start, probes, HTTP/1.0, HEAD, pipelining, request bodies and bad requests.

mod common;

use common::{closed_loop, eventually, one, Client};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

#[test]
fn every_response_names_its_backend_and_any_path_answers() {
    let (fleet, addr) = one("");
    let mut c = Client::connect(addr).unwrap();
    for path in ["/", "/coffee", "/tea?x=1", "/a/b/c"] {
        let r = c.get(path).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.backend(), "backend-0");
        assert_eq!(r.body, b"backend-0\n");
        assert!(!r.closes());
    }
    c.send(b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n")
        .unwrap();
    assert_eq!(c.read_response(false).unwrap().status, 200);
    fleet.shutdown();
}

#[test]
fn status_mix_follows_its_shares() {
    let (fleet, addr) = one("status=503:10%,500:1%");
    let n = 20_000u64;
    let run = closed_loop(&[addr], 4, n, "/");
    assert_eq!(run.errors, 0);
    let got = |s: u16| run.status.get(&s).copied().unwrap_or(0);
    assert_eq!(got(200) + got(503) + got(500), n);
    // Binomial: 10% of 20k is 2000 +- 42 (1 sd); 1% is 200 +- 14. Allow 5 sd.
    assert!((1790..=2210).contains(&got(503)), "503: {}", got(503));
    assert!((130..=270).contains(&got(500)), "500: {}", got(500));
    let c = &fleet.counters()[0];
    assert_eq!(c.by_status.get(&503), Some(&got(503)));
    assert_eq!(c.by_status.get(&500), Some(&got(500)));
    assert_eq!(c.requests, n);
    fleet.shutdown();
}

#[test]
fn a_lone_status_applies_to_every_response_and_204_has_no_body() {
    let (fleet, addr) = one("status=204");
    let mut c = Client::connect(addr).unwrap();
    for _ in 0..3 {
        let r = c.get("/").unwrap();
        assert_eq!(r.status, 204);
        assert!(r.header("content-length").is_none());
        assert!(r.body.is_empty());
    }
    fleet.shutdown();
}

#[test]
fn sizes_fixed_large_and_distributed() {
    let (fleet, addr) = one("size=1k; path /big { size=3m }; path /var { size=uniform(100,300) }");
    let mut c = Client::connect(addr).unwrap();
    let r = c.get("/").unwrap();
    assert_eq!(r.body.len(), 1024);
    assert_eq!(&r.body[..10], b"abcdefghij");
    assert_eq!(r.body[63], b'\n');
    let r = c.get("/big").unwrap();
    assert_eq!(r.body.len(), 3 << 20);
    assert!(r
        .body
        .chunks(64)
        .all(|l| l[..l.len().min(63)] == r.body[..l.len().min(63)]));
    let mut sum = 0usize;
    for _ in 0..2000 {
        let r = c.get("/var").unwrap();
        assert!((100..=300).contains(&r.body.len()), "{}", r.body.len());
        sum += r.body.len();
    }
    let mean = sum as f64 / 2000.0;
    assert!((mean - 200.0).abs() < 6.0, "mean size {mean}");
    // HEAD: the Content-Length of the GET, no body.
    c.send(b"HEAD /big HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let r = c.read_response(true).unwrap();
    assert_eq!(r.header("content-length"), Some("3145728"));
    assert_eq!(c.get("/").unwrap().body.len(), 1024);
    fleet.shutdown();
}

#[test]
fn close_after_n_requests() {
    let (fleet, addr) = one("close_after=3");
    for _ in 0..2 {
        let mut c = Client::connect(addr).unwrap();
        assert!(!c.get("/").unwrap().closes());
        assert!(!c.get("/").unwrap().closes());
        let r = c.get("/").unwrap();
        assert!(r.closes(), "third response must say Connection: close");
        assert!(
            c.at_eof(Duration::from_secs(5)),
            "server must close after the third"
        );
    }
    let run = closed_loop(&[addr], 2, 300, "/");
    assert_eq!(run.errors, 0);
    assert_eq!(run.connects, 100);
    assert_eq!(fleet.counters()[0].connections, 102);
    fleet.shutdown();
}

#[test]
fn per_path_overrides() {
    let (fleet, addr) = one("latency=0ms; path /slow { latency=80ms }; path /fail { status=500 }");
    let mut c = Client::connect(addr).unwrap();
    let t = Instant::now();
    assert_eq!(c.get("/fast").unwrap().status, 200);
    let fast = t.elapsed();
    let t = Instant::now();
    assert_eq!(c.get("/slow/x?y").unwrap().status, 200);
    let slow = t.elapsed();
    assert!(slow >= Duration::from_millis(80), "{slow:?}");
    assert!(fast < Duration::from_millis(80), "{fast:?}");
    assert_eq!(c.get("/fail").unwrap().status, 500);
    assert_eq!(c.get("/failing").unwrap().status, 500);
    assert_eq!(c.get("/fai").unwrap().status, 200);
    fleet.shutdown();
}

#[test]
fn slow_start_answers_503_and_readyz_flips() {
    // t0 before the start, so the instance's own clock started after it.
    let t0 = Instant::now();
    let (fleet, addr) = one("slow_start=1500ms");
    let mut c = Client::connect(addr).unwrap();
    assert_eq!(fleet.counters()[0].state, "starting");
    let r = c.get("/readyz").unwrap();
    assert_eq!((r.status, r.body.as_slice()), (503, &b"not ready\n"[..]));
    assert_eq!(c.get("/healthz").unwrap().status, 200);
    let r = c.get("/").unwrap();
    assert_eq!((r.status, r.body.as_slice()), (503, &b"not ready\n"[..]));
    assert!(
        t0.elapsed() < Duration::from_millis(1200),
        "test too slow to observe slow start"
    );
    assert!(eventually(Duration::from_secs(3), || c
        .get("/readyz")
        .unwrap()
        .status
        == 200));
    assert!(t0.elapsed() >= Duration::from_millis(1500));
    assert_eq!(c.get("/").unwrap().status, 200);
    assert_eq!(fleet.counters()[0].state, "running");
    // Probes are not counted; the two ordinary requests are.
    let cnt = &fleet.counters()[0];
    assert_eq!(cnt.requests, 2);
    assert_eq!(cnt.by_status.get(&503), Some(&1));
    fleet.shutdown();
}

#[test]
fn http10_and_keep_alive_variants() {
    let (fleet, addr) = one("");
    let mut c = Client::connect(addr).unwrap();
    c.send(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let r = c.read_response(false).unwrap();
    assert!(r.closes());
    assert!(c.at_eof(Duration::from_secs(5)));
    let mut c = Client::connect(addr).unwrap();
    for _ in 0..2 {
        c.send(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        let r = c.read_response(false).unwrap();
        assert_eq!(r.header("connection"), Some("keep-alive"));
    }
    c.send(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert!(c.read_response(false).unwrap().closes());
    assert!(c.at_eof(Duration::from_secs(5)));
    fleet.shutdown();
}

#[test]
fn pipelined_requests_are_answered_in_order_each_after_its_latency() {
    let (fleet, addr) = one("latency=20ms; path /now { latency=0ms }");
    let mut c = Client::connect(addr).unwrap();
    let mut batch = Vec::new();
    for i in 0..5 {
        let path = if i % 2 == 0 { "/now" } else { "/wait" };
        batch.extend_from_slice(format!("GET {path}?i={i} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    }
    let t = Instant::now();
    c.send(&batch).unwrap();
    for _ in 0..5 {
        assert_eq!(c.read_response(false).unwrap().status, 200);
    }
    // Two requests wait 20 ms each, one after the other.
    assert!(
        t.elapsed() >= Duration::from_millis(40),
        "{:?}",
        t.elapsed()
    );
    // Many pipelined zero-latency requests in one write.
    let (fleet2, addr2) = one("");
    let mut c = Client::connect(addr2).unwrap();
    let one_req = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    let many: Vec<u8> = one_req
        .iter()
        .copied()
        .cycle()
        .take(one_req.len() * 1000)
        .collect();
    c.send(&many).unwrap();
    for _ in 0..1000 {
        assert_eq!(c.read_response(false).unwrap().backend(), "backend-0");
    }
    assert_eq!(fleet2.counters()[0].requests, 1000);
    fleet.shutdown();
    fleet2.shutdown();
}

#[test]
fn request_bodies_are_read_and_discarded() {
    let (fleet, addr) = one("");
    let mut c = Client::connect(addr).unwrap();
    let body = vec![b'z'; 100_000];
    c.send(
        format!(
            "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    c.send(&body).unwrap();
    assert_eq!(c.read_response(false).unwrap().status, 200);
    c.send(b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        .unwrap();
    c.send(b"3;x=y\r\nabc\r\n0\r\nTrailer: 1\r\n\r\n").unwrap();
    assert_eq!(c.read_response(false).unwrap().status, 200);
    // Expect: 100-continue gets an interim response first.
    c.send(b"PUT /up HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
        .unwrap();
    let interim = c.read_response(false).unwrap();
    assert_eq!(interim.status, 100);
    c.send(b"data").unwrap();
    assert_eq!(c.read_response(false).unwrap().status, 200);
    assert_eq!(c.get("/").unwrap().status, 200);
    assert_eq!(fleet.counters()[0].requests, 4);
    fleet.shutdown();
}

#[test]
fn bad_requests_get_400_or_431_and_a_close() {
    let (fleet, addr) = one("");
    let mut c = Client::connect(addr).unwrap();
    c.send(b"\x01\x02garbage\r\n\r\n").unwrap();
    let r = c.read_response(false).unwrap();
    assert_eq!((r.status, r.closes()), (400, true));
    assert!(c.at_eof(Duration::from_secs(5)));
    let mut c = Client::connect(addr).unwrap();
    let big = format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(9000));
    c.send(big.as_bytes()).unwrap();
    let r = c.read_response(false).unwrap();
    assert_eq!((r.status, r.closes()), (431, true));
    let mut c = Client::connect(addr).unwrap();
    c.send(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
        .unwrap();
    assert_eq!(c.read_response(false).unwrap().status, 400);
    // A client that sends half a request and leaves costs nothing.
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET / HT").unwrap();
    drop(s);
    let c = &fleet.counters()[0];
    assert_eq!(c.by_status.get(&400), Some(&2));
    assert_eq!(c.by_status.get(&431), Some(&1));
    assert!(eventually(Duration::from_secs(3), || fleet.counters()[0]
        .in_flight
        == 0));
    fleet.shutdown();
}

#[test]
fn a_client_that_leaves_mid_latency_does_not_hang_the_instance() {
    let (fleet, addr) = one("latency=100ms");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    drop(s);
    let mut c = Client::connect(addr).unwrap();
    assert_eq!(c.get("/").unwrap().status, 200);
    assert!(eventually(Duration::from_secs(3), || fleet.counters()[0]
        .in_flight
        == 0));
    let mut buf = [0u8; 1];
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(s.read(&mut buf).unwrap(), 1);
    fleet.shutdown();
}

#[test]
fn cpu_cost_burns_the_loop_thread() {
    // 20 requests of 5 ms CPU on one loop: at least 100 ms of that thread's CPU, and the
    // responses cannot overlap, so 4 clients need >= 100 ms wall time.
    let (fleet, addr) = one("cpu=5ms");
    let t = Instant::now();
    let run = closed_loop(&[addr], 4, 20, "/");
    assert_eq!(run.errors, 0);
    assert!(
        t.elapsed() >= Duration::from_millis(100),
        "{:?}",
        t.elapsed()
    );
    fleet.shutdown();
}
