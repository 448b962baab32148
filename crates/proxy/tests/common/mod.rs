//! Test parts: small real HTTP backends on loopback that count what they see, a plain HTTP client,
//! and a helper that renders a config and starts a real nginx replica for it.
#![allow(dead_code)]

use proxybench_proxy::nginx::{self, RenderContext, Replica};
use proxybench_proxy::ProxyConfig;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A real HTTP/1.1 server on 127.0.0.1 that answers every request with its own name (body and
/// `X-Backend` header) after an optional delay, keeps connections alive, and counts accepted
/// connections and requests.
pub struct Backend {
    pub name: String,
    pub addr: SocketAddr,
    pub accepts: Arc<AtomicU64>,
    pub requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Backend {
    pub fn start(name: &str) -> Backend {
        Backend::with_delay(name, Duration::ZERO)
    }

    pub fn with_delay(name: &str, delay: Duration) -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let b = Backend {
            name: name.to_string(),
            addr,
            accepts: Arc::new(AtomicU64::new(0)),
            requests: Arc::new(AtomicU64::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
            conns: Arc::new(Mutex::new(Vec::new())),
        };
        let (accepts, requests, stop, conns) = (
            b.accepts.clone(),
            b.requests.clone(),
            b.stop.clone(),
            b.conns.clone(),
        );
        let name = name.to_string();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(s) = s else { continue };
                accepts.fetch_add(1, Ordering::SeqCst);
                conns.lock().unwrap().push(s.try_clone().unwrap());
                let (requests, name) = (requests.clone(), name.clone());
                std::thread::spawn(move || serve(s, &name, delay, &requests));
            }
        });
        b
    }

    pub fn accepts(&self) -> u64 {
        self.accepts.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

fn serve(s: TcpStream, name: &str, delay: Duration, requests: &AtomicU64) {
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let http10 = line.trim_end().ends_with("HTTP/1.0");
        let mut close = http10;
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let lower = h.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
            if lower.starts_with("connection:") {
                close = lower.contains("close") || (http10 && !lower.contains("keep-alive"));
            }
        }
        let mut body = vec![0u8; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        requests.fetch_add(1, Ordering::SeqCst);
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nX-Backend: {name}\r\n{}\r\n{name}",
            name.len(),
            if close { "Connection: close\r\n" } else { "" }
        );
        if w.write_all(resp.as_bytes()).is_err() || close {
            return;
        }
    }
}

/// A response as the test client saw it.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Parses a whole HTTP response read until the server closed (with the workspace's one
/// HTTP/1 module); panics on bytes that are no response.
pub fn parse_response(raw: &[u8]) -> Resp {
    resp(http1::client::parse_reply(raw, false).expect("an HTTP response"))
}

fn resp(r: http1::client::Reply) -> Resp {
    Resp {
        status: r.status,
        body: r.text(),
        headers: r.headers,
    }
}

/// Sends one request (`Connection: close`) to 127.0.0.1:`port` and reads the response.
pub fn request(port: u16, method: &str, path: &str, host: &str, headers: &[(&str, &str)]) -> Resp {
    try_request(port, method, path, host, headers).unwrap()
}

/// [`request`] that reports I/O failures (a reset, a refused connection) instead of panicking.
pub fn try_request(
    port: u16,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Resp> {
    let mut all = vec![("Host", host)];
    all.extend_from_slice(headers);
    let req = http1::client::Request {
        method,
        path,
        headers: &all,
        body: &[],
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    http1::client::request(addr, &req, Duration::from_secs(10)).map(resp)
}

/// GET with a Host header.
pub fn get(port: u16, path: &str, host: &str) -> Resp {
    request(port, "GET", path, host, &[])
}

/// A scratch directory for one test.
pub fn scratch(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("pb-proxy-{tag}-"))
        .tempdir()
        .unwrap()
}

/// A render context for replica directory `dir`, with a free port per listener and an admin port.
pub fn context(cfg: &ProxyConfig, dir: &Path, groups: &[(&str, Vec<SocketAddr>)]) -> RenderContext {
    let ports = testkit::free_ports(cfg.listeners.len() + 1);
    let mut ctx = RenderContext {
        prefix: dir.to_path_buf(),
        generation: 1,
        groups: groups
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ports: BTreeMap::new(),
        admin_port: ports[cfg.listeners.len()],
        control_port: 0,
        tls: None,
        ..RenderContext::default()
    };
    for (l, p) in cfg.listeners.iter().zip(&ports) {
        ctx.ports.insert(l.name.clone(), *p);
    }
    if cfg.has_tls() {
        ctx.tls = Some(nginx::tls::self_signed(&cfg.tls_names(), &dir.join("tls")).unwrap());
    }
    ctx
}

/// Renders `cfg` and starts one replica in `dir/name`.
pub fn start(name: &str, cfg: &ProxyConfig, ctx: &mut RenderContext, root: &Path) -> Replica {
    let dir: PathBuf = root.join(name);
    ctx.prefix = dir.clone();
    let conf = nginx::render(cfg, ctx).unwrap();
    Replica::start(name, &dir, &conf, ctx.admin_port, ctx.generation).unwrap()
}

/// Parses a `[proxy]` table the way a scenario embeds it.
pub fn parse(toml_text: &str) -> ProxyConfig {
    #[derive(serde::Deserialize)]
    struct Doc {
        proxy: ProxyConfig,
    }
    toml::from_str::<Doc>(toml_text)
        .unwrap_or_else(|e| panic!("{e}"))
        .proxy
}

/// True while a process exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s[s.rfind(')').unwrap() + 2..].chars().next().unwrap();
            state != 'Z' && state != 'X'
        }
        Err(_) => false,
    }
}

/// Waits until none of `pids` is alive, up to `bound`; returns the ones still alive.
pub fn wait_gone(pids: &[u32], bound: Duration) -> Vec<u32> {
    let deadline = std::time::Instant::now() + bound;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || std::time::Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
