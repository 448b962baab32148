//! Small purpose-built servers for faults nginx cannot produce (garbage, resets, stalls, exact
//! delays): a thread per connection on 127.0.0.1, stopped on drop.
#![allow(dead_code)]

use proxybench_load as load;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a connection handler gets.
pub struct Ctx {
    /// Set when the server is dropped; handlers should return soon after.
    pub stop: Arc<AtomicBool>,
    /// Requests read so far across all connections.
    pub requests: Arc<AtomicU64>,
    /// The server's start time.
    pub start: Instant,
}

impl Ctx {
    /// Reads one request head (no body) into `buf`. `None` on EOF, error or stop.
    pub fn read_request(&self, s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Instant> {
        buf.clear();
        let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(i) = find(buf, b"\r\n\r\n") {
                buf.drain(..i + 4);
                self.requests.fetch_add(1, Ordering::SeqCst);
                return Some(Instant::now());
            }
            if self.stop.load(Ordering::Relaxed) {
                return None;
            }
            match s.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => return None,
            }
        }
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// A test server: each accepted connection runs `handler` in its own thread.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Requests read.
    pub requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl TestServer {
    /// Starts a server whose connections are handled by `handler(stream, ctx)`.
    pub fn start<F>(handler: F) -> TestServer
    where
        F: Fn(TcpStream, &Ctx) + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let handler = Arc::new(handler);
        let start = Instant::now();
        let (st, rq) = (stop.clone(), requests.clone());
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let _ = conn.set_nodelay(true);
                let h = handler.clone();
                let ctx = Ctx {
                    stop: st.clone(),
                    requests: rq.clone(),
                    start,
                };
                std::thread::spawn(move || h(conn, &ctx));
            }
        });
        TestServer {
            addr,
            requests,
            stop,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Requests the server read.
    pub fn request_count(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

/// A server that answers every request on a keep-alive connection with `response`.
pub fn fixed(response: &'static [u8]) -> TestServer {
    TestServer::start(move |mut s, ctx| {
        let mut buf = Vec::new();
        while ctx.read_request(&mut s, &mut buf).is_some() {
            if s.write_all(response).is_err() {
                return;
            }
        }
    })
}

/// A server that answers one request per connection with `response`, then closes.
pub fn one_shot(response: &'static [u8]) -> TestServer {
    TestServer::start(move |mut s, ctx| {
        let mut buf = Vec::new();
        if ctx.read_request(&mut s, &mut buf).is_some() {
            let _ = s.write_all(response);
        }
    })
}

/// Closes `s` with a TCP reset (SO_LINGER 0).
pub fn reset(s: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: `s` owns the fd for the call; the value pointer and length describe `linger`,
    // a live struct the kernel only reads.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(s);
}

/// Holds back partial segments (TCP_CORK) until the socket is shut down or uncorked.
pub fn cork(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: `s` is borrowed, so its fd is open; the value is `one`, a live c_int, read only.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CORK,
            &one as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// A config for `url` with `n` requests over `c` connections on one thread.
pub fn cfg_n(url: &str, n: u64, c: u32) -> load::Config {
    let mut cfg = load::Config::new(url).unwrap();
    cfg.connections = c;
    cfg.threads = 1;
    cfg.duration = None;
    cfg.requests = Some(n);
    cfg
}

/// Runs `cfg` with a fresh control.
pub fn run(cfg: &load::Config) -> load::Outcome {
    load::run(cfg, &load::Control::new()).expect("run starts")
}
