//! A blocking h2c client for the backend's tests: the workspace's own client connection
//! (`http2::ClientConn`) over a real socket, plus an observer that decodes what the server sent
//! (each stream's header fields and body, and the frames), so tests can check more than the
//! client reports.

use http2::frame::{self, Head};
use http2::{hpack, ClientConn, Event};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// What the server sent on one stream.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// END_STREAM arrived, and when.
    pub ended: Option<Instant>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Decodes the server's frames on the side.
#[derive(Default)]
pub struct Observer {
    buf: Vec<u8>,
    dec: hpack::Decoder,
    pub streams: BTreeMap<u32, Seen>,
    /// Every frame: (type, flags, stream, payload).
    pub frames: Vec<(u8, u8, u32, Vec<u8>)>,
}

impl Observer {
    pub fn feed(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
        let mut p = 0;
        while let Some(h) = Head::parse(&self.buf[p..]) {
            let end = p + 9 + h.len as usize;
            if self.buf.len() < end {
                break;
            }
            let payload = self.buf[p + 9..end].to_vec();
            self.frame(h, &payload);
            self.frames.push((h.kind, h.flags, h.stream, payload));
            p = end;
        }
        self.buf.drain(..p);
    }

    fn frame(&mut self, h: Head, p: &[u8]) {
        let now = Instant::now();
        match h.kind {
            frame::HEADERS => {
                let s = self.streams.entry(h.stream).or_default();
                self.dec
                    .decode(p, |n, v| {
                        s.headers.push((
                            String::from_utf8_lossy(n).into_owned(),
                            String::from_utf8_lossy(v).into_owned(),
                        ))
                    })
                    .expect("the server's HPACK decodes");
                if h.flags & frame::END_STREAM != 0 {
                    s.ended = Some(now);
                }
            }
            frame::DATA => {
                let s = self.streams.entry(h.stream).or_default();
                s.body.extend_from_slice(p);
                if h.flags & frame::END_STREAM != 0 {
                    s.ended = Some(now);
                }
            }
            _ => {}
        }
    }

    /// The GOAWAY frames: (last-stream-id, code).
    pub fn goaways(&self) -> Vec<(u32, u32)> {
        self.frames
            .iter()
            .filter(|f| f.0 == frame::GOAWAY)
            .map(|f| {
                let p = &f.3;
                (
                    u32::from_be_bytes([p[0], p[1], p[2], p[3]]),
                    u32::from_be_bytes([p[4], p[5], p[6], p[7]]),
                )
            })
            .collect()
    }
}

/// The request a connection is made for (each test request brings its own block).
pub fn default_request() -> std::sync::Arc<hpack::RequestHeaders> {
    std::sync::Arc::new(hpack::RequestHeaders::new(
        "GET",
        "http",
        "backend.test",
        "/",
        &[],
    ))
}

/// One h2c connection.
pub struct H2Client {
    pub s: TcpStream,
    pub c: ClientConn,
    pub seen: Observer,
    pub events: Vec<Event>,
    /// The server closed the connection.
    pub eof: bool,
}

impl H2Client {
    pub fn connect(addr: SocketAddr) -> H2Client {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        H2Client {
            s,
            c: ClientConn::new(default_request(), None),
            seen: Observer::default(),
            events: Vec::new(),
            eof: false,
        }
    }

    /// Opens a stream: `method` `path` with `headers`; returns its id.
    pub fn request(
        &mut self,
        slot: u32,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> u32 {
        let h: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let block = hpack::request_block(method, "http", "backend.test", path, &h);
        self.c
            .open_block(slot, &block)
            .expect("a stream can be opened")
    }

    /// Writes what the client queued, reads and feeds what came back, until `done` holds, the
    /// server closes, or `timeout` passes; returns `done`'s last verdict.
    pub fn run_until(&mut self, timeout: Duration, done: impl Fn(&H2Client) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            if !self.c.out.is_empty() {
                if self.s.write_all(&self.c.out).is_err() {
                    self.eof = true;
                }
                self.c.out.clear();
            }
            if done(self) || self.eof || Instant::now() >= deadline {
                return done(self);
            }
            match self.s.read(&mut chunk) {
                Ok(0) => {
                    // Close our side too, as a client does, so the server need not linger.
                    let _ = self.s.shutdown(std::net::Shutdown::Write);
                    self.eof = true;
                }
                Ok(n) => {
                    self.seen.feed(&chunk[..n]);
                    let _ = self.c.feed(&chunk[..n]);
                    self.events.append(&mut self.c.events);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => self.eof = true,
            }
        }
    }

    /// The responses completed: slot -> (status, body bytes).
    pub fn responses(&self) -> BTreeMap<u32, (u16, u64)> {
        self.events
            .iter()
            .filter_map(|e| match *e {
                Event::Response {
                    slot,
                    status,
                    bytes,
                } => Some((slot, (status, bytes))),
                _ => None,
            })
            .collect()
    }
}

/// Writes `bytes` on a fresh connection and reads until the server closes (or `timeout`);
/// returns what it sent.
pub fn raw_exchange(addr: SocketAddr, bytes: &[u8], timeout: Duration) -> (Vec<u8>, bool) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let _ = s.write_all(bytes);
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    while Instant::now() < deadline {
        match s.read(&mut chunk) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return (got, true),
        }
    }
    (got, false)
}
