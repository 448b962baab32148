//! A small blocking HTTP/1.1 client and fleet helpers for the backend's tests. It sends raw bytes
//! (the tests mean to send odd requests) and frames each response with http1's head parser.
#![allow(dead_code)]

use hdrhistogram::Histogram;
use proxybench_backend::{Fleet, FleetConfig, InstanceConfig, Profile};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub mod h2;
pub mod poll;
pub mod stamp;

/// One parsed response.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Bytes on the wire (head and body).
    pub wire: usize,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
    pub fn backend(&self) -> &str {
        self.header("x-backend").unwrap_or("")
    }
}

/// A keep-alive connection.
pub struct Client {
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> io::Result<Client> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(20)))?;
        Ok(Client {
            s,
            buf: Vec::with_capacity(16 * 1024),
        })
    }

    pub fn send(&mut self, raw: &[u8]) -> io::Result<()> {
        self.s.write_all(raw)
    }

    pub fn get(&mut self, path: &str) -> io::Result<Resp> {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())?;
        self.read_response(false)
    }

    /// True if the server closed the connection (EOF) within `wait`.
    pub fn at_eof(&mut self, wait: Duration) -> bool {
        let _ = self.s.set_read_timeout(Some(wait));
        let mut b = [0u8; 1];
        let r = matches!(self.s.read(&mut b), Ok(0));
        let _ = self.s.set_read_timeout(Some(Duration::from_secs(20)));
        r
    }

    fn fill(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed",
            ));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    pub fn read_response(&mut self, head_only: bool) -> io::Result<Resp> {
        loop {
            if let Some((r, n)) = parse_response(&self.buf, head_only)? {
                self.buf.drain(..n);
                return Ok(r);
            }
            self.fill()?;
        }
    }
}

/// Keeps the header lines http1's head parser shows.
#[derive(Default)]
struct Headers(Vec<(String, String)>);

impl http1::Sink for Headers {
    fn header(&mut self, name: &[u8], value: &[u8]) {
        self.0.push((
            String::from_utf8_lossy(name).into_owned(),
            String::from_utf8_lossy(value).into_owned(),
        ));
    }
}

/// One response from the start of `buf`, with the bytes it took; `None` if incomplete. The head
/// is parsed by the workspace's http1; an interim 1xx response is returned on its own (the
/// tests check 100-continue), and bodies are framed by Content-Length only (the fleet sends
/// nothing else).
pub fn parse_response(buf: &[u8], head_only: bool) -> io::Result<Option<(Resp, usize)>> {
    let mut headers = Headers::default();
    let head = match http1::parse_response(buf, &mut headers) {
        Ok(Some(h)) => h,
        Ok(None) => return Ok(None),
        Err(m) => return Err(io::Error::new(io::ErrorKind::InvalidData, m.0)),
    };
    let end = head.len;
    let status = head.status;
    let len = if head_only || status == 204 || status == 304 || status < 200 {
        0
    } else {
        head.content_length.unwrap_or(0) as usize
    };
    if buf.len() < end + len {
        return Ok(None);
    }
    let body = buf[end..end + len].to_vec();
    Ok(Some((
        Resp {
            status,
            headers: headers.0,
            body,
            wire: end + len,
        },
        end + len,
    )))
}

/// A one-thread fleet with one instance `backend-0` on a free port.
pub fn one(profile: &str) -> (Fleet, SocketAddr) {
    fleet(1, 1, profile)
}

/// A fleet of `n` instances (`backend-0`...) on free ports with `threads` event loops.
pub fn fleet(n: usize, threads: usize, profile: &str) -> (Fleet, SocketAddr) {
    let profile: Profile = profile.parse().expect("profile");
    let fleet = Fleet::start(FleetConfig {
        instances: (0..n)
            .map(|i| InstanceConfig {
                name: format!("backend-{i}"),
                addr: "127.0.0.1:0".parse().unwrap(),
                profile: profile.clone(),
            })
            .collect(),
        threads,
        seed: 42,
    })
    .expect("fleet starts");
    let addr = fleet.addrs()[0].1;
    (fleet, addr)
}

/// What a closed-loop run saw.
pub struct Run {
    pub latency: Histogram<u64>,
    pub status: BTreeMap<u16, u64>,
    pub backends: BTreeMap<String, u64>,
    pub body_bytes: u64,
    pub wire_bytes: u64,
    pub connects: u64,
    pub errors: u64,
}

/// `conns` client threads send `total` GETs of `path` to `addrs` (round robin by connection),
/// keep-alive, reconnecting when the server says `Connection: close`. Latency (µs) is measured
/// from just before the write to the end of the response, with Instant.
pub fn closed_loop(addrs: &[SocketAddr], conns: usize, total: u64, path: &str) -> Run {
    let run = Arc::new(Mutex::new(Run {
        latency: Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap(),
        status: BTreeMap::new(),
        backends: BTreeMap::new(),
        body_bytes: 0,
        wire_bytes: 0,
        connects: 0,
        errors: 0,
    }));
    let mut threads = Vec::new();
    for c in 0..conns {
        let addr = addrs[c % addrs.len()];
        let n = total / conns as u64 + u64::from((c as u64) < total % conns as u64);
        let run = run.clone();
        let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
        threads.push(std::thread::spawn(move || {
            let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
            let mut status = BTreeMap::new();
            let mut backends: BTreeMap<String, u64> = BTreeMap::new();
            let (mut body, mut wire, mut connects, mut errors) = (0u64, 0u64, 0u64, 0u64);
            let mut client: Option<Client> = None;
            let mut done = 0;
            while done < n {
                if client.is_none() {
                    match Client::connect(addr) {
                        Ok(c) => {
                            connects += 1;
                            client = Some(c);
                        }
                        Err(_) => {
                            errors += 1;
                            done += 1;
                            continue;
                        }
                    }
                }
                let cl = client.as_mut().unwrap();
                let t0 = Instant::now();
                let r = cl
                    .send(req.as_bytes())
                    .and_then(|_| cl.read_response(false));
                let us = t0.elapsed().as_micros() as u64;
                done += 1;
                match r {
                    Ok(r) => {
                        h.record(us.max(1)).unwrap();
                        *status.entry(r.status).or_insert(0) += 1;
                        *backends.entry(r.backend().to_string()).or_insert(0) += 1;
                        body += r.body.len() as u64;
                        wire += r.wire as u64;
                        if r.closes() {
                            client = None;
                        }
                    }
                    Err(_) => {
                        errors += 1;
                        client = None;
                    }
                }
            }
            let mut run = run.lock().unwrap();
            run.latency.add(&h).unwrap();
            for (k, v) in status {
                *run.status.entry(k).or_insert(0) += v;
            }
            for (k, v) in backends {
                *run.backends.entry(k).or_insert(0) += v;
            }
            run.body_bytes += body;
            run.wire_bytes += wire;
            run.connects += connects;
            run.errors += errors;
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    Arc::try_unwrap(run).ok().unwrap().into_inner().unwrap()
}

/// Polls `f` until it holds or `timeout` passes.
pub fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}
