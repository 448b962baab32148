//! A single-threaded, poll-driven client for timing tests: one thread multiplexes every
//! connection, so the measurement is not disturbed by dozens of client threads competing for
//! two cores.
//!
//! Two latencies per request, both from CLOCK_MONOTONIC (the clock `Instant` reads) taken just
//! before the request's write:
//! - `wire`: to the kernel's receive timestamp of the response's last bytes (SO_TIMESTAMPNS),
//!   which excludes the client's own wake-up delay (on this VM an idle CPU takes 100-300 µs to
//!   wake, which is the client's cost, not the backend's);
//! - `app`: to the moment the client has parsed the response (what a program would see).
//!
//! With `X-Backend-Debug` each response reports the delay the server drew, so tests can check
//! the draws and the overshoot (wire latency minus drawn delay).

use super::{parse_response, stamp};
use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

pub struct PollRun {
    /// Send to the response's kernel arrival, µs.
    pub wire: Histogram<u64>,
    /// Send to the parsed response, µs.
    pub app: Histogram<u64>,
    /// Server-drawn delay, µs (from X-Backend-Delay-Ns).
    pub drawn: Histogram<u64>,
    /// Wire latency minus drawn delay, µs (at least 1).
    pub overshoot: Histogram<u64>,
    /// Responses whose wire latency was below their drawn delay (must be 0).
    pub early: u64,
    pub status: BTreeMap<u16, u64>,
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap()
}

struct C {
    s: TcpStream,
    buf: Vec<u8>,
    sent: u64,
    arrived: u64,
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
            s.set_nodelay(true).unwrap();
            stamp::enable(s.as_raw_fd());
            poll.registry()
                .register(&mut s, Token(i), Interest::READABLE | Interest::WRITABLE)
                .unwrap();
            C {
                s,
                buf: Vec::with_capacity(4096),
                sent: 0,
                arrived: 0,
                left: total / conns as u64 + u64::from((i as u64) < total % conns as u64),
                busy: false,
            }
        })
        .collect();
    let mut out = PollRun {
        wire: hist(),
        app: hist(),
        drawn: hist(),
        overshoot: hist(),
        early: 0,
        status: BTreeMap::new(),
    };
    let send = |c: &mut C| {
        c.sent = stamp::mono_ns();
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
                match stamp::read(c.s.as_raw_fd(), &mut chunk) {
                    Ok((0, _)) => panic!("server closed a keep-alive connection"),
                    Ok((n, at)) => {
                        c.buf.extend_from_slice(&chunk[..n]);
                        c.arrived = at.unwrap_or_else(stamp::mono_ns);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("read: {e}"),
                }
            }
            while let Some((r, n)) = parse_response(&c.buf, false).unwrap() {
                let now = stamp::mono_ns();
                c.buf.drain(..n);
                c.busy = false;
                c.left -= 1;
                done += 1;
                *out.status.entry(r.status).or_insert(0) += 1;
                let wire = c.arrived.saturating_sub(c.sent);
                out.wire.record((wire / 1000).max(1)).unwrap();
                out.app.record(((now - c.sent) / 1000).max(1)).unwrap();
                if let Some(d) = r
                    .header("x-backend-delay-ns")
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    out.drawn.record((d / 1000).max(1)).unwrap();
                    if wire < d {
                        out.early += 1;
                    }
                    out.overshoot
                        .record((wire.saturating_sub(d) / 1000).max(1))
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
