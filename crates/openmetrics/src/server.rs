//! `/metrics` over HTTP/1.1: one accepting thread, one thread per connection (a scraper keeps
//! one open), heads parsed by the workspace's `http1`. GET and HEAD only, no request bodies.

use crate::registry::Registry;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connections served at once; more are closed as they arrive.
const MAX_CONNS: usize = 16;
/// A connection idle this long is closed.
const IDLE: Duration = Duration::from_secs(60);
/// The longest request head read.
const MAX_HEAD: usize = 16 * 1024;

/// A running `/metrics` server. Its threads end with the process.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    registry: Arc<Registry>,
}

/// Serves `registry` on `listener` (from [`crate::bind`]) from a thread of its own.
pub fn serve(listener: TcpListener, registry: Arc<Registry>) -> std::io::Result<Server> {
    let addr = listener.local_addr()?;
    let reg = registry.clone();
    let open = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("pb-metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if open.load(Ordering::SeqCst) >= MAX_CONNS {
                    continue;
                }
                open.fetch_add(1, Ordering::SeqCst);
                let (reg, open) = (reg.clone(), open.clone());
                let spawned = std::thread::Builder::new()
                    .name("pb-metrics-conn".into())
                    .spawn(move || {
                        let _ = connection(stream, &reg);
                        open.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    // The stream went with the closure: closed. Nothing else to undo but the count.
                    continue;
                }
            }
        })?;
    Ok(Server { addr, registry })
}

impl Server {
    /// The address it listens on (the port the system chose for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// After [`Registry::finish`]: keeps serving until a scrape has read the final values, at
    /// most `max`, or until `stop` turns true (when it was false on entry: a Ctrl-C during the
    /// linger). Returns true when a scrape read the final values.
    pub fn linger(&self, max: Duration, stop: &AtomicBool) -> bool {
        let deadline = Instant::now() + max;
        let stopped_before = stop.load(Ordering::SeqCst);
        loop {
            if self.registry.final_served() {
                return true;
            }
            if Instant::now() >= deadline || (!stopped_before && stop.load(Ordering::SeqCst)) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// One connection: requests until it closes, idles out or breaks the protocol.
fn connection(mut s: TcpStream, reg: &Registry) -> std::io::Result<()> {
    s.set_read_timeout(Some(IDLE))?;
    s.set_nodelay(true)?;
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let head = loop {
            match http1::parse_request(&buf, |_, _| {}) {
                Ok(Some(h)) => break h,
                Ok(None) if buf.len() > MAX_HEAD => {
                    return answer(
                        &mut s,
                        431,
                        "text/plain",
                        b"request head too large\n",
                        false,
                        false,
                    );
                }
                Ok(None) => {}
                Err(http1::RequestError::TooManyHeaders) => {
                    return answer(
                        &mut s,
                        431,
                        "text/plain",
                        b"too many headers\n",
                        false,
                        false,
                    );
                }
                Err(http1::RequestError::Bad) => {
                    return answer(&mut s, 400, "text/plain", b"bad request\n", false, false);
                }
            }
            let n = s.read(&mut chunk)?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let method_end = head.path.0.saturating_sub(1);
        let method = buf[..method_end].trim_ascii();
        let target = &buf[head.path.0..head.path.1];
        let path = target.split(|&b| b == b'?').next().unwrap_or_default();
        let get = method == b"GET" || method == b"HEAD";
        let keep = head.keep_alive && head.body == http1::BodyKind::None;
        if head.body != http1::BodyKind::None {
            return answer(
                &mut s,
                400,
                "text/plain",
                b"no request body here\n",
                false,
                head.head_only,
            );
        }
        match (get, path) {
            (true, b"/metrics") => {
                let body = reg.render();
                answer(
                    &mut s,
                    200,
                    crate::CONTENT_TYPE,
                    body.as_bytes(),
                    keep,
                    head.head_only,
                )?;
            }
            (true, b"/") => answer(
                &mut s,
                200,
                "text/plain; charset=utf-8",
                b"proxybench: the OpenMetrics exposition is at /metrics\n",
                keep,
                head.head_only,
            )?,
            (true, _) => answer(
                &mut s,
                404,
                "text/plain",
                b"not found: try /metrics\n",
                keep,
                head.head_only,
            )?,
            (false, _) => {
                return answer(
                    &mut s,
                    405,
                    "text/plain",
                    b"GET or HEAD only\n",
                    false,
                    false,
                );
            }
        }
        if !keep {
            return Ok(());
        }
        buf.drain(..head.len);
    }
}

fn answer(
    s: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &[u8],
    keep: bool,
    head_only: bool,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Request Header Fields Too Large",
    };
    let allow = if status == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}{}\r\n",
        body.len(),
        if keep { "" } else { "Connection: close\r\n" }
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body);
    }
    s.write_all(&out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Info;

    fn exchange(addr: SocketAddr, raw: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(raw).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn serves_metrics_on_a_real_socket() {
        let reg = Registry::new(Info {
            command: "load".into(),
            ..Info::default()
        });
        let _feed = reg.load(&crate::registry::Scope::default(), "load", None);
        let listener = crate::bind("127.0.0.1:0", false).unwrap();
        let server = serve(listener, reg.clone()).unwrap();
        let addr = server.addr();
        // Two requests on one connection; the second closes it.
        let text = exchange(
            addr,
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
        assert!(text.contains(&format!("Content-Type: {}\r\n", crate::CONTENT_TYPE)));
        assert_eq!(text.matches("# EOF\n").count(), 2);
        assert!(text.contains("proxybench_load_requests_total{load=\"load\"} 0\n"));
        let head = exchange(addr, b"HEAD /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert!(
            head.starts_with("HTTP/1.1 200 OK") && !head.contains("# EOF"),
            "{head}"
        );
        let nf = exchange(addr, b"GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert!(nf.starts_with("HTTP/1.1 404"), "{nf}");
        let post = exchange(
            addr,
            b"POST /metrics HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
        );
        assert!(post.starts_with("HTTP/1.1 400"), "{post}");
        let put = exchange(addr, b"DELETE /metrics HTTP/1.1\r\n\r\n");
        assert!(
            put.starts_with("HTTP/1.1 405") && put.contains("Allow: GET, HEAD"),
            "{put}"
        );
        let bad = exchange(addr, b"\x01\x02 nonsense\r\n\r\n");
        assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
        // The linger ends as soon as a scrape has read the final values.
        reg.finish();
        let stop = AtomicBool::new(false);
        assert!(!server.linger(Duration::from_millis(50), &stop));
        let t = std::thread::spawn(move || {
            exchange(addr, b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
        });
        assert!(server.linger(Duration::from_secs(10), &stop));
        assert!(t
            .join()
            .unwrap()
            .contains("proxybench_load_running{load=\"load\"} 0\n"));
    }
}
