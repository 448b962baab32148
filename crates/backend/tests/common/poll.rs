//! A single-threaded, poll-driven client for timing tests: one thread multiplexes every
//! connection, so the measurement is not disturbed by dozens of client threads competing for
//! two cores. Latency is taken with `Instant` from just before each write to the moment the
//! response has been parsed. With `X-Backend-Debug` each response also reports the delay the
//! server drew, so the test can check the draws and the overshoot (measured minus drawn).

use super::parse_response;
use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub struct PollRun {
    /// Client-side latency, µs.
    pub latency: Histogram<u64>,
    /// Server-drawn delay, µs (from X-Backend-Delay-Ns).
    pub drawn: Histogram<u64>,
    /// Measured minus drawn, µs (at least 1).
    pub overshoot: Histogram<u64>,
    /// Responses measured before their drawn delay had passed (must be 0).
    pub early: u64,
    pub status: BTreeMap<u16, u64>,
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap()
}

struct C {
    s: TcpStream,
    buf: Vec<u8>,
    t0: Instant,
    left: u64,
    busy: bool,
}

/// Sends `total` GETs of `path` over `conns` keep-alive connections to `addr`.
pub fn run(addr: SocketAddr, conns: usize, total: u64, path: &str) -> PollRun {
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nX-Backend-Debug: 1\r\n\r\n");
    let mut poll = Poll::new().unwrap();
    let mut events = Events::with_capacity(1024);
    let mut cs: Vec<C> = (0..conns)
        .map(|i| {
            let mut s = TcpStream::connect(addr).unwrap();
            poll.registry()
                .register(&mut s, Token(i), Interest::READABLE | Interest::WRITABLE)
                .unwrap();
            C {
                s,
                buf: Vec::with_capacity(4096),
                t0: Instant::now(),
                left: total / conns as u64 + u64::from((i as u64) < total % conns as u64),
                busy: false,
            }
        })
        .collect();
    let mut out = PollRun {
        latency: hist(),
        drawn: hist(),
        overshoot: hist(),
        early: 0,
        status: BTreeMap::new(),
    };
    let send = |c: &mut C| {
        c.t0 = Instant::now();
        let n = (&c.s).write(req.as_bytes()).expect("write");
        assert_eq!(n, req.len(), "short write of a small request");
        c.busy = true;
    };
    let mut done = 0u64;
    let mut chunk = vec![0u8; 64 * 1024];
    while done < total {
        poll.poll(&mut events, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(!events.is_empty(), "no progress in 30 s");
        for ev in events.iter() {
            let c = &mut cs[ev.token().0];
            if ev.is_writable() && !c.busy && c.left > 0 && c.s.peer_addr().is_ok() {
                send(c);
            }
            if !ev.is_readable() {
                continue;
            }
            loop {
                match (&c.s).read(&mut chunk) {
                    Ok(0) => panic!("server closed a keep-alive connection"),
                    Ok(n) => c.buf.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("read: {e}"),
                }
            }
            while let Some((r, n)) = parse_response(&c.buf, false).unwrap() {
                let ns = c.t0.elapsed().as_nanos() as u64;
                c.buf.drain(..n);
                c.busy = false;
                c.left -= 1;
                done += 1;
                *out.status.entry(r.status).or_insert(0) += 1;
                out.latency.record((ns / 1000).max(1)).unwrap();
                if let Some(d) = r
                    .header("x-backend-delay-ns")
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    out.drawn.record((d / 1000).max(1)).unwrap();
                    if ns < d {
                        out.early += 1;
                    }
                    out.overshoot
                        .record((ns.saturating_sub(d) / 1000).max(1))
                        .unwrap();
                }
                if c.left > 0 {
                    send(c);
                }
            }
        }
    }
    out
}
