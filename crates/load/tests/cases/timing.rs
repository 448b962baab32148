// Included by tests/timing.rs once per I/O backend (`IO`).

use super::common::*;
use testkit::{in_one_of, KeepAwake, Realtime};
use proxybench_load as load;
use std::io::Write;
use std::time::{Duration, Instant};

/// Waits until `deadline`: sleeps most of the way, then spins, so the delay is exact to a few µs.
fn wait_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now + Duration::from_millis(3) {
        std::thread::sleep(deadline - now - Duration::from_millis(2));
    }
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

#[test]
fn fixed_10ms_delay_reads_p50_within_2_percent() {
    let _serial = super::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The server and the engine's threads start below and inherit the priority; idle CPUs
    // are kept from halting so that waking a thread costs microseconds, not a host reschedule.
    let _awake = KeepAwake::start();
    let _rt = Realtime::enter();
    let srv = TestServer::start(|mut s, ctx| {
        let mut buf = Vec::new();
        while let Some(t0) = ctx.read_request(&mut s, &mut buf) {
            wait_until(t0 + Duration::from_millis(10));
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
    });
    let mut cfg = load::Config::new(&srv.url("/")).unwrap();
    cfg.io = IO;
    cfg.connections = 1;
    cfg.threads = 1;
    cfg.duration = Some(Duration::from_millis(2500));
    in_one_of(3, || {
        let o = run(&cfg);
        let p50 = o.summary.latency.percentile(50.0).unwrap();
        assert!(o.summary.requests > 150, "{}", o.summary.requests);
        assert!(
            o.summary.latency.min_us >= 10_000,
            "nothing is faster than the delay"
        );
        if (9_800..=10_200).contains(&p50) {
            Ok(())
        } else {
            Err(format!("p50 {p50} us is not within 2% of 10 ms"))
        }
    });
}

#[test]
fn a_one_second_stall_shows_in_corrected_latency_and_less_in_uncorrected() {
    let _serial = super::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Answers at once, except that nothing is answered between 1.0 s and 2.0 s after start.
    let srv = TestServer::start(|mut s, ctx| {
        let mut buf = Vec::new();
        let (stall_from, stall_to) = (
            ctx.start + Duration::from_millis(1000),
            ctx.start + Duration::from_millis(2000),
        );
        while ctx.read_request(&mut s, &mut buf).is_some() {
            let now = Instant::now();
            if now >= stall_from && now < stall_to {
                std::thread::sleep(stall_to - now);
            }
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
    });
    let mut cfg = load::Config::new(&srv.url("/")).unwrap();
    cfg.io = IO;
    cfg.connections = 10;
    cfg.threads = 1;
    cfg.rate = Some(1000.0);
    cfg.duration = Some(Duration::from_secs(4));
    cfg.timeout = Duration::from_secs(5);
    let o = run(&cfg);
    let s = &o.summary;
    assert_eq!(s.error_total(), 0);
    let corrected = s.latency.percentile(99.0).unwrap();
    let uncorrected = s.latency_uncorrected.as_ref().unwrap();
    let unc99 = uncorrected.percentile(99.0).unwrap();
    // About a quarter of the requests were intended during the stall; the top 1% waited for
    // most of the second.
    assert!(corrected > 800_000, "corrected p99 {corrected} us");
    assert!(s.latency.percentile(90.0).unwrap() > 400_000);
    // Measured from the actual send only the ten requests caught in flight saw the stall.
    assert!(unc99 < 100_000, "uncorrected p99 {unc99} us");
    assert!(uncorrected.max_us > 800_000, "the in-flight ones did wait");
    let sch = s.schedule.as_ref().unwrap();
    assert!(
        sch.late >= 900,
        "requests queued behind the stall are late: {}",
        sch.late
    );
    assert!(sch.late_max_us > 800_000);
    assert_eq!(
        sch.sent, sch.intended,
        "the backlog was sent after the stall"
    );
}

/// A server that answers at once, except that nothing is answered from `from` to `to` after
/// its start (requests read meanwhile are answered at `to`).
fn stalling(from: Duration, to: Duration) -> TestServer {
    TestServer::start(move |mut s, ctx| {
        let mut buf = Vec::new();
        let (stall_from, stall_to) = (ctx.start + from, ctx.start + to);
        while ctx.read_request(&mut s, &mut buf).is_some() {
            let now = Instant::now();
            if now >= stall_from && now < stall_to {
                std::thread::sleep(stall_to - now);
            }
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
    })
}

#[test]
fn requests_intended_before_the_end_are_sent_even_when_the_end_finds_them_waiting() {
    let _serial = super::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The stall covers the end of the 1 s run: the arrivals of its last 0.4 s find every
    // connection busy and wait; at the end they are still waiting.
    let srv = stalling(Duration::from_millis(600), Duration::from_millis(1300));
    let mut cfg = load::Config::new(&srv.url("/")).unwrap();
    cfg.io = IO;
    cfg.connections = 10;
    cfg.threads = 1;
    cfg.rate = Some(1000.0);
    cfg.duration = Some(Duration::from_secs(1));
    cfg.timeout = Duration::from_secs(5);
    let o = run(&cfg);
    let s = &o.summary;
    let sch = s.schedule.as_ref().unwrap();
    assert_eq!(sch.intended, 1000, "1 s at 1000/s");
    // They leave late, their latency counted from their intended times: none is dropped.
    assert_eq!(sch.sent, 1000, "the backlog at the end was sent");
    assert_eq!(s.requests, 1000);
    assert_eq!(s.error_total(), 0);
    assert_eq!(srv.request_count(), 1000, "the server read every one");
    assert!(sch.late >= 300, "the backlog left late: {}", sch.late);
    assert!(s.latency.max_us >= 300_000, "max {} us", s.latency.max_us);
}

#[test]
fn a_backlog_at_the_end_is_sent_for_one_timeout_at_most() {
    let _serial = super::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Nothing is answered from 0.6 s to 3 s: the requests in flight time out (0.3 s), and the
    // backlog may leave only until 0.3 s after the end; what is still waiting then is unsent.
    // So the run ends by 1 s + 0.3 s (the last sends) + 0.3 s (their timeout), long before the
    // server answers again at 3 s: a run that waited for the backlog would last past 3 s.
    in_one_of(3, || {
        let srv = stalling(Duration::from_millis(600), Duration::from_millis(3000));
        let mut cfg = load::Config::new(&srv.url("/")).unwrap();
        cfg.io = IO;
        cfg.connections = 4;
        cfg.threads = 1;
        cfg.rate = Some(500.0);
        cfg.duration = Some(Duration::from_secs(1));
        cfg.timeout = Duration::from_millis(300);
        let o = run(&cfg);
        let s = &o.summary;
        let sch = s.schedule.as_ref().unwrap();
        assert_eq!(sch.intended, 500);
        assert!(sch.sent < sch.intended, "sent {}", sch.sent);
        // Every request sent ended once: answered or timed out.
        assert_eq!(sch.sent, s.requests + s.error_total());
        assert!(s.errors.get(&model::ErrorKind::Timeout).copied().unwrap_or(0) > 0);
        // The bound: 1.6 s, plus one event-loop pass of slack for a busy machine.
        if s.elapsed_s <= 1.7 {
            Ok(())
        } else {
            Err(format!("the run took {:.3} s, over 1.7 s", s.elapsed_s))
        }
    });
}
