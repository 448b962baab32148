//! The fleet's operations and counters: counts add up exactly, drain loses nothing, kill
//! produces resets and refused connects, restart serves again, profiles change live.

mod common;

use common::{closed_loop, eventually, fleet, one, Client};
use proxybench_backend::{Error, InstanceConfig};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn addrs(f: &proxybench_backend::Fleet) -> Vec<SocketAddr> {
    f.addrs().into_iter().map(|(_, a)| a).collect()
}

#[test]
fn counters_equal_what_the_client_saw_exactly() {
    let (f, _) = fleet(4, 2, "status=503:5%; size=uniform(10,2000); close_after=50");
    let run = closed_loop(&addrs(&f), 12, 30_001, "/");
    assert_eq!(run.errors, 0);
    let cs = f.counters();
    let sum = |g: &dyn Fn(&model::BackendCounters) -> u64| cs.iter().map(g).sum::<u64>();
    assert_eq!(sum(&|c| c.requests), 30_001);
    assert_eq!(sum(&|c| c.in_flight), 0);
    assert_eq!(sum(&|c| c.connections), run.connects);
    for (status, n) in &run.status {
        assert_eq!(
            sum(&|c| c.by_status.get(status).copied().unwrap_or(0)),
            *n,
            "status {status}"
        );
    }
    for c in &cs {
        assert_eq!(
            run.backends.get(&c.name).copied().unwrap_or(0),
            c.requests,
            "{}",
            c.name
        );
        assert_eq!(c.by_status.values().sum::<u64>(), c.requests);
        assert_eq!(c.state, "running");
    }
    // Bytes are counted after each write returns: give the loops a moment to record the last.
    assert!(eventually(Duration::from_secs(2), || {
        f.counters().iter().map(|c| c.bytes).sum::<u64>() == run.wire_bytes
    }));
    f.shutdown();
}

/// Clients that keep sending on keep-alive connections until their instance goes away; they
/// count requests written, responses read, and failures.
struct Load {
    sent: Arc<AtomicU64>,
    answered: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

fn keep_sending(addr: SocketAddr, conns: usize) -> Load {
    let sent = Arc::new(AtomicU64::new(0));
    let answered = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let threads = (0..conns)
        .map(|_| {
            let (s, a, f) = (sent.clone(), answered.clone(), failed.clone());
            std::thread::spawn(move || {
                let Ok(mut c) = Client::connect(addr) else {
                    return;
                };
                loop {
                    s.fetch_add(1, Ordering::SeqCst);
                    match c.get("/") {
                        Ok(r) => {
                            a.fetch_add(1, Ordering::SeqCst);
                            if r.closes() {
                                assert!(c.at_eof(Duration::from_secs(5)));
                                return;
                            }
                        }
                        Err(_) => {
                            f.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                    }
                }
            })
        })
        .collect();
    Load {
        sent,
        answered,
        failed,
        threads,
    }
}

#[test]
fn drain_loses_no_in_flight_request() {
    let (f, _) = fleet(2, 2, "latency=uniform(1ms,30ms)");
    let a = addrs(&f);
    let load = keep_sending(a[0], 24);
    let other = keep_sending(a[1], 4);
    std::thread::sleep(Duration::from_millis(300));
    let in_flight = f.counters()[0].in_flight;
    let t = Instant::now();
    f.drain("backend-0").unwrap();
    let took = t.elapsed();
    for t in load.threads {
        t.join().unwrap();
    }
    let (sent, answered, failed) = (
        load.sent.load(Ordering::SeqCst),
        load.answered.load(Ordering::SeqCst),
        load.failed.load(Ordering::SeqCst),
    );
    eprintln!("drain: {in_flight} in flight at the start, took {took:?}; sent {sent}, answered {answered}");
    assert_eq!(failed, 0, "a request was lost in the drain");
    assert_eq!(sent, answered);
    let c = &f.counters()[0];
    assert_eq!(c.requests, answered);
    assert_eq!(c.in_flight, 0);
    assert_eq!(c.state, "stopped");
    // The listener is closed: connects are refused.
    let e = TcpStream::connect_timeout(&a[0], Duration::from_secs(2)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    // The other instance is untouched.
    assert_eq!(f.counters()[1].state, "running");
    assert_eq!(other.failed.load(Ordering::SeqCst), 0);
    // A drained instance restarts on the same address and serves again.
    f.restart("backend-0").unwrap();
    let mut c = Client::connect(a[0]).unwrap();
    assert_eq!(c.get("/").unwrap().backend(), "backend-0");
    drop(c);
    f.shutdown();
    for t in other.threads {
        t.join().unwrap();
    }
}

#[test]
fn drain_closes_idle_keep_alive_connections_and_answers_late_requests_with_close() {
    let (f, addr) = one("");
    let mut idle = Client::connect(addr).unwrap();
    assert_eq!(idle.get("/").unwrap().status, 200);
    let mut active = Client::connect(addr).unwrap();
    assert_eq!(active.get("/").unwrap().status, 200);
    let h = f.drain_async("backend-0").unwrap();
    assert_eq!(f.counters()[0].state, "draining");
    // A request within the grace period is answered, with Connection: close.
    let r = active.get("/").unwrap();
    assert!(r.closes());
    assert!(active.at_eof(Duration::from_secs(5)));
    // The idle one is closed after its grace period.
    assert!(idle.at_eof(Duration::from_secs(5)));
    assert!(h.wait_timeout(Duration::from_secs(5)));
    assert_eq!(f.counters()[0].state, "stopped");
    assert_eq!(f.counters()[0].requests, 3);
    f.shutdown();
}

#[test]
fn kill_resets_connections_and_refuses_connects_then_restart_serves() {
    let (f, addr) = one("latency=2s");
    // Requests waiting on their latency when the instance is killed.
    let mut waiting: Vec<TcpStream> = (0..5)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s
        })
        .collect();
    assert!(eventually(Duration::from_secs(2), || f.counters()[0]
        .in_flight
        == 5));
    f.kill("backend-0").unwrap();
    for s in &mut waiting {
        let mut b = [0u8; 16];
        let e = s.read(&mut b).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
    }
    let e = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    let c = &f.counters()[0];
    assert_eq!(
        (c.state.as_str(), c.in_flight, c.requests),
        ("killed", 0, 0)
    );
    // Wrong-state operations say why.
    match f.kill("backend-0") {
        Err(Error::State { state, op, .. }) => assert_eq!((state.as_str(), op), ("killed", "kill")),
        other => panic!("{other:?}"),
    }
    f.restart("backend-0").unwrap();
    f.set_profile("backend-0", "latency=0ms".parse().unwrap())
        .unwrap();
    let mut c = Client::connect(addr).unwrap();
    assert_eq!(c.get("/").unwrap().status, 200);
    assert_eq!(f.counters()[0].state, "running");
    assert_eq!(
        f.restart("backend-0").unwrap_err().to_string(),
        "backend-0 is running: cannot restart it"
    );
    f.shutdown();
}

#[test]
fn profiles_change_live_and_instances_can_be_added() {
    let (f, addr) = one("");
    let mut c = Client::connect(addr).unwrap();
    assert_eq!(c.get("/").unwrap().status, 200);
    f.set_profile("backend-0", "status=503".parse().unwrap())
        .unwrap();
    assert_eq!(c.get("/").unwrap().status, 503);
    // A response decided under the old profile keeps its status when the profile changes.
    f.set_profile("backend-0", "latency=300ms; status=418".parse().unwrap())
        .unwrap();
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    // The loop decides a response as it starts the request (in flight, then answered): wait
    // for that, not a fixed 50 ms, which a busy machine's loop thread can take to read it.
    assert!(eventually(Duration::from_secs(5), || {
        let n = &f.counters()[0];
        n.requests + n.in_flight == 3
    }));
    f.set_profile("backend-0", "".parse().unwrap()).unwrap();
    assert_eq!(c.read_response(false).unwrap().status, 418);
    assert_eq!(c.get("/").unwrap().status, 200);
    let added = f
        .add(InstanceConfig {
            name: "extra".into(),
            addr: "127.0.0.1:0".parse().unwrap(),
            profile: "size=7".parse().unwrap(),
        })
        .unwrap();
    let mut c2 = Client::connect(added).unwrap();
    let r = c2.get("/").unwrap();
    assert_eq!((r.backend(), r.body.len()), ("extra", 7));
    assert_eq!(f.addrs()[1], ("extra".to_string(), added));
    let dup = f.add(InstanceConfig {
        name: "extra".into(),
        addr: "127.0.0.1:0".parse().unwrap(),
        profile: Default::default(),
    });
    assert!(dup.unwrap_err().to_string().contains("exists already"));
    let busy = f.add(InstanceConfig {
        name: "clash".into(),
        addr: added,
        profile: Default::default(),
    });
    let msg = busy.unwrap_err().to_string();
    assert!(
        msg.starts_with(&format!("clash: cannot listen on {added}")),
        "{msg}"
    );
    assert_eq!(
        f.drain("nope").unwrap_err().to_string(),
        "no backend instance named 'nope'"
    );
    f.shutdown();
}

#[test]
fn shutdown_finishes_requests_in_flight() {
    let (f, addr) = one("latency=200ms");
    let clients: Vec<_> = (0..10)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr).unwrap();
                c.get("/").unwrap()
            })
        })
        .collect();
    assert!(eventually(Duration::from_secs(2), || f.counters()[0]
        .in_flight
        == 10));
    f.shutdown();
    for c in clients {
        let r = c.join().unwrap();
        assert_eq!(r.status, 200);
        assert!(r.closes());
    }
}

#[test]
fn loops_are_named_for_cpu_attribution() {
    let (f, _) = fleet(1, 2, "");
    let mut names = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap() {
        let p = t.unwrap().path().join("comm");
        names.push(std::fs::read_to_string(p).unwrap().trim().to_string());
    }
    assert!(names.iter().any(|n| n == "pb-backend-0"), "{names:?}");
    assert!(names.iter().any(|n| n == "pb-backend-1"), "{names:?}");
    f.shutdown();
}
