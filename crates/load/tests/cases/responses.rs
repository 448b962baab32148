// Included by tests/responses.rs once per I/O backend (`IO`).

use super::common::*;
use model::ErrorKind;
use proxybench_load as load;
use std::io::Write;
use std::time::Duration;

/// Runs `cfg` on this module's backend.
fn run(cfg: &load::Config) -> load::Outcome {
    let mut cfg = cfg.clone();
    cfg.io = IO;
    super::common::run(&cfg)
}

fn errors(o: &load::Outcome, kind: ErrorKind) -> u64 {
    o.summary.errors.get(&kind).copied().unwrap_or(0)
}

/// The first message recorded for `kind` ("" when none).
fn message(o: &load::Outcome, kind: ErrorKind) -> &str {
    o.summary
        .error_messages
        .get(&kind)
        .map(String::as_str)
        .unwrap_or("")
}

fn status(o: &load::Outcome, code: u16) -> u64 {
    o.summary.status.get(&code).copied().unwrap_or(0)
}

#[test]
fn chunked_keep_alive() {
    let srv = fixed(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;x=y\r\n\n\r\n0\r\nT: 1\r\n\r\n",
    );
    let o = run(&cfg_n(&srv.url("/"), 300, 3));
    assert_eq!(status(&o, 200), 300);
    assert_eq!(o.summary.error_total(), 0);
    assert_eq!(o.summary.connects, 3, "keep-alive reuses connections");
    assert_eq!(srv.request_count(), 300);
}

#[test]
fn close_delimited_body() {
    let srv = one_shot(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nbody until close");
    let o = run(&cfg_n(&srv.url("/"), 60, 2));
    assert_eq!(status(&o, 200), 60);
    assert_eq!(o.summary.error_total(), 0);
    assert_eq!(o.summary.connects, 60);
}

#[test]
fn connection_close_reconnects() {
    let srv = one_shot(b"HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbusy");
    let o = run(&cfg_n(&srv.url("/"), 40, 2));
    assert_eq!(status(&o, 503), 40);
    assert_eq!(o.summary.non_2xx_3xx(), 40);
    assert_eq!(o.summary.failures(), 40);
    assert_eq!(o.summary.error_total(), 0);
    assert_eq!(o.summary.connects, 40);
}

#[test]
fn http10_server() {
    let srv = one_shot(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
    let o = run(&cfg_n(&srv.url("/"), 40, 4));
    assert_eq!(status(&o, 200), 40);
    assert_eq!(o.summary.connects, 40);
    // An HTTP/1.0 server that says keep-alive keeps the connection.
    let srv = fixed(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok");
    let o = run(&cfg_n(&srv.url("/"), 40, 4));
    assert_eq!((status(&o, 200), o.summary.connects), (40, 4));
}

#[test]
fn interim_responses_are_skipped() {
    let srv = fixed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n");
    let o = run(&cfg_n(&srv.url("/"), 50, 1));
    assert_eq!(status(&o, 204), 50);
    assert_eq!(o.summary.error_total(), 0);
}

#[test]
fn truncated_body_is_a_read_reset() {
    let srv = one_shot(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b");
    let o = run(&cfg_n(&srv.url("/"), 25, 2));
    assert_eq!(errors(&o, ErrorKind::ReadReset), 25);
    assert_eq!(
        message(&o, ErrorKind::ReadReset),
        "the server closed the connection in the middle of a response"
    );
    assert_eq!(o.summary.error_messages.len(), 1, "one kind, one message");
    assert_eq!(o.summary.requests, 0);
    assert_eq!(o.summary.attempts(), 25);
}

#[test]
fn garbage_is_malformed() {
    let srv = fixed(b"SSH-2.0-OpenSSH_9.2\r\n\r\n");
    let o = run(&cfg_n(&srv.url("/"), 30, 3));
    assert_eq!(errors(&o, ErrorKind::Malformed), 30);
    assert_eq!(message(&o, ErrorKind::Malformed), "not an HTTP/1.x status line");
    assert_eq!(o.summary.requests, 0);
}

#[test]
fn reset_before_answering_is_a_read_reset() {
    let srv = TestServer::start(|mut s, ctx| {
        let mut buf = Vec::new();
        if ctx.read_request(&mut s, &mut buf).is_some() {
            reset(s);
        }
    });
    let o = run(&cfg_n(&srv.url("/"), 30, 3));
    assert_eq!(errors(&o, ErrorKind::ReadReset), 30);
    assert_eq!(o.summary.error_total(), 30);
    assert_eq!(
        message(&o, ErrorKind::ReadReset),
        "Connection reset by peer (os error 104)"
    );
}

#[test]
fn reset_mid_response_is_a_read_reset() {
    let srv = TestServer::start(|mut s, ctx| {
        let mut buf = Vec::new();
        if ctx.read_request(&mut s, &mut buf).is_some() {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab");
            std::thread::sleep(Duration::from_millis(5));
            reset(s);
        }
    });
    let o = run(&cfg_n(&srv.url("/"), 20, 2));
    assert_eq!(errors(&o, ErrorKind::ReadReset), 20);
}

/// A server that answers the first request on each connection, then closes when the second
/// arrives: every reuse meets the race of an idle close.
fn closes_under_the_second_request() -> TestServer {
    TestServer::start(|mut s, ctx| {
        let mut buf = Vec::new();
        if ctx.read_request(&mut s, &mut buf).is_some() {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            let _ = ctx.read_request(&mut s, &mut buf);
        }
    })
}

#[test]
fn reused_connection_closed_before_answering_is_read_idle_closed() {
    let srv = closes_under_the_second_request();
    let o = run(&cfg_n(&srv.url("/"), 100, 1));
    assert_eq!(status(&o, 200), 50);
    assert_eq!(errors(&o, ErrorKind::ReadIdleClosed), 50);
    assert_eq!(o.summary.error_total(), 50);
    assert_eq!(
        message(&o, ErrorKind::ReadIdleClosed),
        "the server closed a reused keep-alive connection before answering"
    );
}

#[test]
fn with_retry_idle_closed_each_cut_off_request_is_sent_again_and_answered() {
    // Every request after the first meets the idle-close race on a reused connection, and is
    // answered on the new connection it is sent again on.
    let srv = closes_under_the_second_request();
    let mut cfg = cfg_n(&srv.url("/"), 100, 1);
    cfg.retry_idle_closed = true;
    let o = run(&cfg);
    assert_eq!(status(&o, 200), 100, "every request answered");
    assert_eq!(o.summary.error_total(), 0);
    assert_eq!(o.summary.retried, 99, "each but the first was sent twice");
    assert_eq!(
        o.summary.timeline.iter().map(|r| r.retried).sum::<u64>(),
        99,
        "the timeline holds every retry"
    );
    // The server read the 99 cut-off requests too: 100 answered + 99 closed under.
    assert_eq!(srv.request_count(), 199);
    assert_eq!(o.summary.connects, 100);
}

#[test]
fn a_retried_request_cut_off_again_fails_and_is_not_retried_twice() {
    // The first connection answers its first request and closes under the second; every later
    // connection closes under its first request (not a reused connection: no retry).
    let conns = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = conns.clone();
    let srv = TestServer::start(move |mut s, ctx| {
        let mut buf = Vec::new();
        let first = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
        if ctx.read_request(&mut s, &mut buf).is_some() && first {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            let _ = ctx.read_request(&mut s, &mut buf);
        }
    });
    let mut cfg = cfg_n(&srv.url("/"), 2, 1);
    cfg.retry_idle_closed = true;
    let o = run(&cfg);
    assert_eq!(status(&o, 200), 1);
    assert_eq!(o.summary.retried, 1);
    assert_eq!(errors(&o, ErrorKind::ReadReset), 1, "{:?}", o.summary.errors);
    assert_eq!(o.summary.error_total(), 1);
    assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[test]
fn silent_server_times_out_and_the_connection_is_replaced() {
    let srv = TestServer::start(|mut s, ctx| {
        let mut buf = Vec::new();
        while ctx.read_request(&mut s, &mut buf).is_some() {}
    });
    let mut cfg = cfg_n(&srv.url("/"), 6, 3);
    cfg.timeout = Duration::from_millis(200);
    let o = run(&cfg);
    assert_eq!(errors(&o, ErrorKind::Timeout), 6);
    assert_eq!(
        message(&o, ErrorKind::Timeout),
        "no complete response within the timeout (200ms)"
    );
    assert_eq!(
        o.summary.connects, 6,
        "a timed-out connection is closed and reopened"
    );
    assert!(o.summary.elapsed_s >= 0.39, "two rounds of 200 ms");
}

#[test]
fn refused_connections_are_counted_without_spinning() {
    let port = testkit::free_port();
    let mut cfg = cfg_n(&format!("http://127.0.0.1:{port}/"), 20, 2);
    cfg.reconnect_backoff = Duration::from_millis(5);
    let o = run(&cfg);
    assert_eq!(errors(&o, ErrorKind::ConnectRefused), 20);
    assert_eq!(
        message(&o, ErrorKind::ConnectRefused),
        format!("connect to 127.0.0.1:{port}: Connection refused (os error 111)")
    );
    assert_eq!(o.summary.attempts(), 20);
    assert_eq!(o.summary.requests, 0);
}

#[test]
fn accepting_but_never_connecting_is_impossible_on_loopback_so_timeouts_come_from_reads() {
    // A listener that never accepts still completes the TCP handshake (the kernel does), so a
    // stuck backend shows up as a response timeout, not a connect timeout.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let mut cfg = cfg_n(&url, 2, 2);
    cfg.timeout = Duration::from_millis(150);
    let o = run(&cfg);
    assert_eq!(errors(&o, ErrorKind::Timeout), 2);
    drop(listener);
}

#[test]
fn records_one_per_attempt_in_time_order() {
    let srv = TestServer::start(|mut s, ctx| {
        let mut buf = Vec::new();
        let mut n = 0;
        while ctx.read_request(&mut s, &mut buf).is_some() {
            n += 1;
            let r: &[u8] = if n % 3 == 0 {
                b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n"
            } else {
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
            };
            if s.write_all(r).is_err() {
                return;
            }
        }
    });
    let mut cfg = cfg_n(&srv.url("/"), 300, 1);
    cfg.record_requests = true;
    let o = run(&cfg);
    let recs = o.records.expect("records were asked for");
    assert_eq!(recs.len(), 300);
    assert!(recs.windows(2).all(|w| w[0].t_us <= w[1].t_us));
    assert_eq!(recs.iter().filter(|r| r.status == 500).count(), 100);
    assert_eq!(
        recs.iter().filter(|r| r.failed()).count() as u64,
        o.summary.failures()
    );
}

#[test]
fn a_random_misbehaving_server_is_counted_never_a_crash_or_a_hang() {
    // Each answer is drawn at random: valid, truncated, garbage, split in pieces, a reset, a
    // close, silence, or extra bytes. Every attempt must end as a response or an error.
    let srv = TestServer::start(|mut s, ctx| {
        let mut rng = load::Rng::new(ctx.requests.load(std::sync::atomic::Ordering::SeqCst) + 1);
        let mut buf = Vec::new();
        let ok: &[u8] =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        while ctx.read_request(&mut s, &mut buf).is_some() {
            match rng.next_u64() % 9 {
                0 | 1 => {
                    // Valid, written in random pieces.
                    let mut off = 0;
                    while off < ok.len() {
                        let n = 1 + (rng.next_u64() as usize % (ok.len() - off));
                        if s.write_all(&ok[off..off + n]).is_err() {
                            return;
                        }
                        off += n;
                    }
                }
                2 => {
                    let cut = rng.next_u64() as usize % ok.len();
                    let _ = s.write_all(&ok[..cut]);
                    return;
                }
                3 => {
                    let junk: Vec<u8> = (0..(rng.next_u64() % 64))
                        .map(|_| rng.next_u64() as u8)
                        .collect();
                    let _ = s.write_all(&junk);
                    return;
                }
                4 => return reset(s),
                5 => return,
                6 => {
                    // Silence until the client gives up.
                    while ctx.read_request(&mut s, &mut buf).is_some() {}
                    return;
                }
                7 => {
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxEXTRA");
                }
                _ => {
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n");
                    std::thread::sleep(Duration::from_millis(rng.next_u64() % 3));
                    let _ = s.write_all(b"x");
                }
            }
        }
    });
    let mut cfg = cfg_n(&srv.url("/"), 1500, 8);
    cfg.threads = 2;
    cfg.timeout = Duration::from_millis(200);
    cfg.reconnect_backoff = Duration::ZERO;
    let o = run(&cfg);
    assert_eq!(o.summary.attempts(), 1500, "{:?}", o.summary.errors);
    assert!(o.summary.requests > 100);
    assert!(o.summary.error_total() > 100);
}

#[test]
fn a_close_seen_with_the_response_is_not_an_error() {
    // The server says keep-alive but closes right after each response: the client sees the
    // close before it would send again, so it reconnects instead of failing a request.
    let srv = TestServer::start(|mut s, ctx| {
        let mut buf = Vec::new();
        if ctx.read_request(&mut s, &mut buf).is_some() {
            // Corked, so the FIN rides on the response's segment and arrives with it.
            cork(&s);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            let _ = s.shutdown(std::net::Shutdown::Write);
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let o = run(&cfg_n(&srv.url("/"), 40, 2));
    assert_eq!(status(&o, 200), 40);
    assert_eq!(o.summary.error_total(), 0, "{:?}", o.summary.errors);
    assert_eq!(o.summary.connects, 40);
}

#[test]
fn idle_connections_closed_by_the_server_are_replaced_quietly() {
    // Open loop at 20/s on two connections: each sits idle ~100 ms between requests, and the
    // server closes connections idle for 30 ms. No request was in flight, so nothing failed.
    let srv = TestServer::start(|mut s, ctx| {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        let _ = s.set_read_timeout(Some(Duration::from_millis(30)));
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    ctx.requests
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    let mut cfg = load::Config::new(&srv.url("/")).unwrap();
    cfg.connections = 2;
    cfg.threads = 1;
    cfg.rate = Some(20.0);
    cfg.duration = Some(Duration::from_secs(1));
    let o = run(&cfg);
    assert_eq!(o.summary.attempts(), 20);
    // A close can still cross a request on the wire (the server thread stalled on a busy
    // machine): that race is a real ReadIdleClosed, and rare.
    let idle = errors(&o, ErrorKind::ReadIdleClosed);
    assert!(
        idle <= 2 && o.summary.error_total() == idle,
        "{:?}",
        o.summary.errors
    );
    assert!(
        o.summary.connects >= 15,
        "reconnected: {}",
        o.summary.connects
    );
}
