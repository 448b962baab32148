//! temporary diagnosis: open connections with think time
mod common;
use common::{parse_response, stamp};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::collections::BinaryHeap;
use std::cmp::Reverse;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::time::Duration;

#[test]
fn diag() {
    let n: usize = std::env::var("DIAG_CONNS").unwrap().parse().unwrap();
    let secs: u64 = std::env::var("DIAG_SECS").unwrap().parse().unwrap();
    let think_us: u64 = std::env::var("DIAG_THINK_US").unwrap().parse().unwrap();
    let addr: std::net::SocketAddr = std::env::var("DIAG_ADDR").unwrap().parse().unwrap();
    let req = b"GET / HTTP/1.1\r\nHost: t\r\nX-Backend-Debug: 1\r\n\r\n";
    let mut poll = Poll::new().unwrap();
    let mut events = Events::with_capacity(1024);
    let mut socks = Vec::new();
    let mut bufs: Vec<Vec<u8>> = Vec::new();
    let mut sent = vec![0u64; n];
    let mut arrived = vec![0u64; n];
    let mut heap = BinaryHeap::new();
    let t0 = stamp::mono_ns();
    for i in 0..n {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        stamp::enable(s.as_raw_fd());
        poll.registry().register(&mut s, Token(i), Interest::READABLE).unwrap();
        socks.push(s);
        bufs.push(Vec::new());
        heap.push(Reverse((t0 + 200_000_000 + (i as u64 * think_us * 1000 / n as u64), i)));
    }
    let end = t0 + secs * 1_000_000_000;
    let mut wire = Vec::new();
    let mut over = Vec::new();
    let mut late_send = Vec::new();
    let mut chunk = vec![0u8; 65536];
    loop {
        let now = stamp::mono_ns();
        if now > end { break; }
        while let Some(Reverse((at, i))) = heap.peek().copied() {
            if at > now { break; }
            heap.pop();
            sent[i] = stamp::mono_ns();
            late_send.push(sent[i] - at);
            (&socks[i]).write_all(req).unwrap();
        }
        let timeout = heap.peek().map(|Reverse((at, _))| Duration::from_nanos(at.saturating_sub(stamp::mono_ns())));
        poll.poll(&mut events, timeout.map(|t| t.max(Duration::from_micros(1)))).unwrap();
        for ev in events.iter() {
            let i = ev.token().0;
            loop {
                match stamp::read(socks[i].as_raw_fd(), &mut chunk) {
                    Ok((0, _)) => panic!("closed"),
                    Ok((k, at)) => { bufs[i].extend_from_slice(&chunk[..k]); arrived[i] = at.unwrap(); }
                    Err(_) => break,
                }
            }
            while let Some((r, k)) = parse_response(&bufs[i], false).unwrap() {
                bufs[i].drain(..k);
                let d: u64 = r.header("x-backend-delay-ns").unwrap().parse().unwrap();
                let w = arrived[i] - sent[i];
                wire.push(w / 1000);
                over.push(w.saturating_sub(d) / 1000);
                heap.push(Reverse((stamp::mono_ns() + think_us * 1000, i)));
            }
        }
    }
    let q = |v: &mut Vec<u64>| { v.sort(); let n = v.len(); format!("n {} p50 {} p90 {} p99 {} max {}", n, v[n/2], v[n*9/10], v[n*99/100], v[n-1]) };
    let mut ls: Vec<u64> = late_send.iter().map(|x| x / 1000).collect();
    eprintln!("rps {:.0}\n wire {}\n overshoot {}\n client late send us {}", wire.len() as f64 / secs as f64, q(&mut wire), q(&mut over), q(&mut ls));
}
