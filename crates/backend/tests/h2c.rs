//! h2c (HTTP/2 with prior knowledge) on the backend's listeners, beside HTTP/1.1: every profile
//! feature per stream, counts by protocol, streams answered independently, the concurrency
//! limit, request and response bodies under flow control, GOAWAY on drain and close_after, and
//! clients that break the protocol.

mod common;

use common::h2::{raw_exchange, H2Client};
use common::{eventually, one, Client};
use http2::frame::{self, code};
use http2::Event;
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

fn h2_counts(f: &proxybench_backend::Fleet) -> model::BackendH2 {
    f.counters()[0].h2.clone().expect("h2 counters")
}

#[test]
fn one_listener_serves_h2c_and_http1_and_counts_each() {
    let (fleet, addr) = one("status=503:20%; path /big { size=100k }");
    let mut h2 = H2Client::connect(addr);
    for slot in 0..40 {
        h2.request(slot, "GET", &format!("/coffee/{slot}"), &[]);
    }
    h2.request(40, "GET", "/big", &[]);
    h2.request(41, "HEAD", "/big", &[]);
    assert!(h2.run_until(T, |c| c.responses().len() == 42));
    let r = h2.responses();
    let n503 = r.values().filter(|v| v.0 == 503).count() as u64;
    assert!(r.values().all(|v| v.0 == 200 || v.0 == 503), "{r:?}");
    assert!((0..40).all(|s| r[&s].1 == 10), "{r:?}");
    // Every response names its backend; the body is the name, or the pattern for /big (whatever
    // the status drawn).
    let seen = &h2.seen.streams;
    for id in (1..80).step_by(2) {
        assert_eq!(seen[&id].header("x-backend"), Some("backend-0"));
        assert_eq!(seen[&id].header("server"), Some("proxybench"));
        assert_eq!(seen[&id].header("content-length"), Some("10"));
        assert_eq!(seen[&id].body, b"backend-0\n");
    }
    assert_eq!(seen[&81].body.len(), 100 * 1024);
    assert!(seen[&81].body.starts_with(b"abcdefghij"));
    // HEAD: the length, no body.
    assert_eq!(seen[&83].header("content-length"), Some("102400"));
    assert!(seen[&83].body.is_empty());
    // HTTP/1.1 on the same listener, at the same time.
    let mut h1 = Client::connect(addr).unwrap();
    let mut h1_503 = 0;
    let mut h1_bytes = 0;
    for _ in 0..10 {
        let resp = h1.get("/tea").unwrap();
        h1_503 += u64::from(resp.status == 503);
        h1_bytes += resp.wire as u64;
        assert_eq!(resp.backend(), "backend-0");
    }
    let c = &fleet.counters()[0];
    assert_eq!(c.requests, 52);
    assert_eq!(c.by_status.get(&503).copied().unwrap_or(0), n503 + h1_503);
    assert_eq!(c.connections, 2);
    assert_eq!(c.in_flight, 0);
    let h = c.h2.clone().unwrap();
    assert_eq!((h.connections, h.requests), (1, 42));
    assert_eq!((h.refused, h.stream_errors, h.connection_errors), (0, 0, 0));
    // Bytes are every byte written on both connections (HTTP/2 frames and all).
    let h2_bytes: u64 = h2.seen.frames.iter().map(|f| 9 + f.3.len() as u64).sum();
    assert!(eventually(Duration::from_secs(2), || {
        fleet.counters()[0].bytes == h2_bytes + h1_bytes
    }));
    // Closed clients let the fleet stop at once (no lingering for them).
    drop(h2);
    drop(h1);
    fleet.shutdown();
}

#[test]
fn a_slow_stream_does_not_delay_a_fast_one_on_the_same_connection() {
    let (fleet, addr) = one("path /slow { latency=400ms }");
    let mut c = H2Client::connect(addr);
    let slow = c.request(0, "GET", "/slow", &[("x-backend-debug", "1")]);
    let fast = c.request(1, "GET", "/fast", &[("x-backend-debug", "1")]);
    assert!(c.run_until(T, |c| c.responses().len() == 2));
    let s = &c.seen.streams;
    // The fast stream was answered first, though asked second, with no delay drawn; the slow
    // one got its 400 ms.
    assert!(s[&fast].ended.unwrap() < s[&slow].ended.unwrap());
    assert_eq!(s[&fast].header("x-backend-delay-ns"), Some("0"));
    assert_eq!(s[&slow].header("x-backend-delay-ns"), Some("400000000"));
    let order: Vec<u32> = c
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Response { slot, .. } => Some(*slot),
            _ => None,
        })
        .collect();
    assert_eq!(order, [1, 0]);
    // Closed clients let the fleet stop at once (no lingering for them).
    drop(c);
    fleet.shutdown();
}

#[test]
fn streams_above_the_limit_are_refused_and_counted() {
    // Every stream waits 300 ms, so the first 128 are all open when the others arrive.
    let (fleet, addr) = one("latency=300ms");
    let mut c = H2Client::connect(addr);
    // Opened before the server's SETTINGS arrive: the client does not know the limit yet.
    for slot in 0..150 {
        c.request(slot, "GET", "/", &[]);
    }
    let done = |c: &H2Client| {
        c.events
            .iter()
            .filter(|e| matches!(e, Event::Response { .. } | Event::Reset { .. }))
            .count()
            == 150
    };
    assert!(c.run_until(T, done));
    let refused = c
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Reset {
                    code: code::REFUSED_STREAM,
                    ..
                }
            )
        })
        .count();
    assert_eq!((c.responses().len(), refused), (128, 22));
    let h = h2_counts(&fleet);
    assert_eq!((h.requests, h.refused), (128, 22));
    assert_eq!(h.max_streams_per_connection, 128);
    assert_eq!(h.max_streams, 128);
    assert_eq!(fleet.counters()[0].requests, 128);
    // Closed clients let the fleet stop at once (no lingering for them).
    drop(c);
    fleet.shutdown();
}

#[test]
fn request_bodies_are_read_under_flow_control() {
    let (fleet, addr) = one("");
    let mut c = H2Client::connect(addr);
    let body: std::sync::Arc<[u8]> = vec![b'x'; 300_000].into();
    c.c = http2::ClientConn::new(common::h2::default_request(), Some(body));
    for slot in 0..3 {
        c.request(slot, "POST", "/upload", &[("content-length", "300000")]);
    }
    assert!(c.run_until(T, |c| c.responses().len() == 3));
    assert!(c.responses().values().all(|r| r.0 == 200));
    // 300,000 bytes each through 65,535-byte stream windows: the server gave window back.
    let updates = c
        .seen
        .frames
        .iter()
        .filter(|f| f.0 == frame::WINDOW_UPDATE)
        .count();
    assert!(updates >= 9, "{updates} WINDOW_UPDATEs");
    assert_eq!(h2_counts(&fleet).requests, 3);
    drop(c);
    // A body shorter than its content-length is malformed: the stream is reset, not answered.
    let mut c = H2Client::connect(addr);
    c.c = http2::ClientConn::new(common::h2::default_request(), Some(b"abc".to_vec().into()));
    c.request(0, "POST", "/", &[("content-length", "4")]);
    let reset = |c: &H2Client| {
        c.events.contains(&Event::Reset {
            slot: 0,
            code: code::PROTOCOL_ERROR,
        })
    };
    assert!(c.run_until(T, reset));
    assert!(c.responses().is_empty());
    assert_eq!(h2_counts(&fleet).stream_errors, 1);
    assert_eq!(fleet.counters()[0].requests, 3);
    // Closed clients let the fleet stop at once (no lingering for them).
    drop(c);
    fleet.shutdown();
}

#[test]
fn drain_sends_goaway_and_finishes_the_streams_in_flight() {
    let (fleet, addr) = one("latency=300ms");
    let mut c = H2Client::connect(addr);
    for slot in 0..5 {
        c.request(slot, "GET", "/", &[]);
    }
    // Wait until the server has the five streams (their responses are 300 ms away).
    assert!(eventually(Duration::from_secs(5), || {
        c.run_until(Duration::from_millis(20), |_| false);
        fleet.counters()[0].in_flight == 5
    }));
    let drain = fleet.drain_async("backend-0").unwrap();
    assert!(c.run_until(T, |c| c.responses().len() == 5 && c.eof));
    assert!(c.responses().values().all(|r| *r == (200, 10)));
    // One graceful GOAWAY naming the last stream opened (9), before the responses ended.
    assert_eq!(c.seen.goaways(), [(9, code::NO_ERROR)]);
    let goaway_at = c
        .seen
        .frames
        .iter()
        .position(|f| f.0 == frame::GOAWAY)
        .unwrap();
    let first_data = c
        .seen
        .frames
        .iter()
        .position(|f| f.0 == frame::DATA)
        .unwrap();
    assert!(goaway_at < first_data);
    assert!(drain.wait_timeout(Duration::from_secs(5)));
    let ctr = &fleet.counters()[0];
    assert_eq!(
        (ctr.requests, ctr.in_flight, ctr.state.as_str()),
        (5, 0, "stopped")
    );
    assert_eq!(ctr.h2.as_ref().unwrap().goaways, 1);
    // Closed clients let the fleet stop at once (no lingering for them).
    drop(c);
    fleet.shutdown();
}

#[test]
fn a_graceful_stop_sends_goaway_and_answers_the_streams_in_flight() {
    let (fleet, addr) = one("latency=300ms");
    let mut c = H2Client::connect(addr);
    for slot in 0..3 {
        c.request(slot, "GET", "/", &[]);
    }
    assert!(eventually(Duration::from_secs(5), || {
        c.run_until(Duration::from_millis(20), |_| false);
        fleet.counters()[0].in_flight == 3
    }));
    // The client keeps reading on its own thread while the fleet stops.
    let client = std::thread::spawn(move || {
        c.run_until(T, |c| c.responses().len() == 3 && c.eof);
        c
    });
    fleet.close(Duration::from_secs(10));
    let c = client.join().unwrap();
    assert_eq!(c.responses().len(), 3);
    assert!(c.responses().values().all(|r| *r == (200, 10)));
    assert_eq!(c.seen.goaways(), [(5, code::NO_ERROR)]);
    let ctr = &fleet.counters()[0];
    assert_eq!((ctr.requests, ctr.in_flight), (3, 0));
}

#[test]
fn close_after_sends_goaway_after_the_nth_request() {
    let (fleet, addr) = one("close_after=3");
    let mut c = H2Client::connect(addr);
    for slot in 0..3 {
        c.request(slot, "GET", "/", &[]);
        assert!(c.run_until(T, |c| c.responses().len() == slot as usize + 1));
    }
    assert!(c.run_until(T, |c| c.eof));
    assert_eq!(c.seen.goaways(), [(5, code::NO_ERROR)]);
    assert!(!c.c.can_open());
    let h = h2_counts(&fleet);
    assert_eq!((h.requests, h.goaways), (3, 1));
    // Closed clients let the fleet stop at once (no lingering for them).
    drop(c);
    fleet.shutdown();
}

#[test]
fn probes_and_slow_start_over_h2c() {
    let (fleet, addr) = one("slow_start=30s");
    let mut c = H2Client::connect(addr);
    c.request(0, "GET", "/healthz", &[]);
    c.request(1, "GET", "/readyz", &[]);
    c.request(2, "GET", "/", &[]);
    assert!(c.run_until(T, |c| c.responses().len() == 3));
    let r = c.responses();
    assert_eq!((r[&0].0, r[&1].0, r[&2].0), (200, 503, 503));
    assert_eq!(c.seen.streams[&3].body, b"not ready\n");
    // Probes are not counted; the slow-start 503 is.
    let ctr = &fleet.counters()[0];
    assert_eq!((ctr.requests, ctr.h2.as_ref().unwrap().requests), (1, 1));
    // Closed clients let the fleet stop at once (no lingering for them).
    drop(c);
    fleet.shutdown();
}

/// The GOAWAY codes in a server's bytes.
fn goaway_codes(bytes: &[u8]) -> Vec<u32> {
    let mut o = common::h2::Observer::default();
    o.feed(bytes);
    o.goaways().into_iter().map(|g| g.1).collect()
}

#[test]
fn clients_that_break_the_protocol_are_counted_and_closed_while_others_are_served() {
    let (fleet, addr) = one("latency=200ms");
    // A well-behaved h2 connection and an HTTP/1.1 one with requests in flight throughout.
    let mut good = H2Client::connect(addr);
    for slot in 0..10 {
        good.request(slot, "GET", "/", &[]);
    }
    good.run_until(Duration::from_millis(30), |_| false);
    let preface = {
        let mut v = frame::PREFACE.to_vec();
        frame::settings(&mut v, &[]);
        v
    };
    let with = |tail: &[u8]| {
        let mut v = preface.clone();
        v.extend_from_slice(tail);
        v
    };
    let mut oversized = Vec::new();
    frame::head(&mut oversized, 1 << 20, frame::DATA, 0, 1);
    let mut bad_hpack = Vec::new();
    frame::head(&mut bad_hpack, 1, frame::HEADERS, 5, 1);
    bad_hpack.push(0xbf);
    let mut truncated = Vec::new();
    frame::head(&mut truncated, 100, frame::HEADERS, 5, 1);
    truncated.extend_from_slice(&[0x82; 10]);
    let cases: Vec<(&str, Vec<u8>, Option<u32>)> = vec![
        (
            "garbage",
            with(b"\xff\xfe garbage garbage garbage"),
            Some(code::FRAME_SIZE_ERROR),
        ),
        (
            "an oversized frame",
            with(&oversized),
            Some(code::FRAME_SIZE_ERROR),
        ),
        (
            "a bad HPACK block",
            with(&bad_hpack),
            Some(code::COMPRESSION_ERROR),
        ),
        (
            "no SETTINGS first",
            [frame::PREFACE, &bad_hpack].concat(),
            Some(code::PROTOCOL_ERROR),
        ),
        // A truncated frame, then the client closes: no error to send, the connection closes.
        ("a truncated frame", with(&truncated), None),
    ];
    for (what, bytes, want) in &cases {
        let (got, closed) = if want.is_some() {
            raw_exchange(addr, bytes, Duration::from_secs(10))
        } else {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            use std::io::Write;
            s.write_all(bytes).unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut got = Vec::new();
            use std::io::Read;
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let closed = s.read_to_end(&mut got).is_ok();
            (got, closed)
        };
        assert!(closed, "{what}: the server did not close");
        let codes = goaway_codes(&got);
        match want {
            Some(c) => assert_eq!(codes, [*c], "{what}"),
            None => assert!(codes.is_empty(), "{what}: {codes:?}"),
        }
    }
    // The good connections were served all along.
    assert!(good.run_until(T, |c| c.responses().len() == 10));
    let mut h1 = Client::connect(addr).unwrap();
    assert_eq!(h1.get("/").unwrap().status, 200);
    // Anything short of the whole preface is HTTP/1.x, and this is no HTTP/1.1 request.
    let mut near = Client::connect(addr).unwrap();
    near.send(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n").unwrap();
    assert_eq!(near.read_response(false).unwrap().status, 400);
    let h = h2_counts(&fleet);
    assert_eq!(h.connection_errors, 4);
    assert_eq!(h.requests, 10);
    assert_eq!(h.connections, 6);
    assert_eq!(fleet.counters()[0].in_flight, 0);
    // Closed clients let the fleet stop at once (no lingering for them).
    drop(h1);
    drop(good);
    drop(near);
    fleet.shutdown();
}
