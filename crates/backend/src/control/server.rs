//! The control endpoint's server: one short-lived thread per request (control traffic is a few
//! requests a second), so a long drain never blocks a counters poll. Loopback only; every request
//! must carry the run's bearer token.

use super::token::Token;
use super::wire::{decode, read_message, Added, ErrorBody, ProfileBody};
use crate::error::Error;
use crate::fleet::{Fleet, InstanceConfig};
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A running control endpoint; dropping it (or [`Server::stop`]) stops accepting.
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    join: Option<JoinHandle<()>>,
}

/// Serves the control endpoint for `fleet` on `addr` (port 0 picks one), answering only
/// requests that carry `Authorization: Bearer <token>` (401 otherwise). `addr` must be a
/// loopback address (127.0.0.0/8 or ::1): anything else is refused with `InvalidInput`.
pub fn serve(fleet: Arc<Fleet>, addr: SocketAddr, token: Token) -> io::Result<Server> {
    if !addr.ip().is_loopback() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{addr} is not a loopback address (the control endpoint binds 127.0.0.0/8 or [::1] only)"),
        ));
    }
    let listener = TcpListener::bind(addr)?;
    let token = Arc::new(token);
    let addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let join = std::thread::Builder::new()
        .name("pb-control".into())
        .spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let fleet = fleet.clone();
                let token = token.clone();
                let _ = std::thread::Builder::new()
                    .name("pb-control-req".into())
                    .spawn(move || handle(conn, &fleet, &token));
            }
        })?;
    Ok(Server {
        addr,
        stop,
        join: Some(join),
    })
}

impl Server {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and joins the accept thread (requests under way finish on their own).
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        if let Some(j) = self.join.take() {
            self.stop.store(true, Ordering::SeqCst);
            // Wake the blocking accept.
            let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
            let _ = j.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shut();
    }
}

fn handle(mut conn: TcpStream, fleet: &Fleet, token: &Token) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let (status, body) = match read_message(&mut conn) {
        Ok(m) if !token.admits(m.authorization.as_deref()) => (
            401,
            error_json(
                "missing or wrong token: send Authorization: Bearer <the token file's contents>",
            ),
        ),
        Ok(m) => route(&m.line, &m.body, fleet),
        Err(e) => (400, error_json(&format!("unreadable request: {e}"))),
    };
    let reason = match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    let challenge = if status == 401 {
        "WWW-Authenticate: Bearer\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\n{challenge}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body.as_bytes());
}

fn error_json(msg: &str) -> String {
    serde_json::to_string(&ErrorBody {
        error: msg.to_string(),
    })
    .unwrap_or_default()
}

fn result(r: Result<(), Error>) -> (u16, String) {
    match r {
        Ok(()) => (200, "{\"ok\":true}".into()),
        Err(e) => (e.http_status(), error_json(&e.to_string())),
    }
}

/// The query of `POST /instances/NAME/close`: `code` (the WebSocket close code, 1001 unless
/// given) and `grpc_status` (14, UNAVAILABLE, unless given).
fn close_params(query: &str) -> Result<(u16, u16), Error> {
    let (mut code, mut grpc) = (1001u16, 14u16);
    for kv in query.split('&').filter(|q| !q.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let n: u16 = v
            .parse()
            .map_err(|_| Error::BadRequest(format!("{k}: '{v}' is not a number")))?;
        match k {
            "code" => code = n,
            "grpc_status" => grpc = n,
            _ => {
                return Err(Error::BadRequest(format!(
                    "unknown parameter '{k}' (use code, grpc_status)"
                )))
            }
        }
    }
    Ok((code, grpc))
}

fn route(line: &str, body: &[u8], fleet: &Fleet) -> (u16, String) {
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("");
    let target = parts.next().unwrap_or("");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, segs.as_slice()) {
        ("GET", ["counters"]) => (
            200,
            serde_json::to_string(&fleet.counters()).unwrap_or_default(),
        ),
        ("GET", ["instances"]) => (
            200,
            serde_json::to_string(&fleet.instances()).unwrap_or_default(),
        ),
        ("POST", ["instances"]) => match serde_json::from_slice::<InstanceConfig>(body) {
            Err(e) => (400, error_json(&format!("bad instance: {e}"))),
            Ok(inst) => {
                let name = inst.name.clone();
                match fleet.try_add(inst) {
                    Ok(addr) => (
                        201,
                        serde_json::to_string(&Added { name, addr }).unwrap_or_default(),
                    ),
                    Err(e) => (e.http_status(), error_json(&e.to_string())),
                }
            }
        },
        (m, ["instances", name, op]) => {
            let Some(name) = decode(name) else {
                return (400, error_json("malformed instance name in the path"));
            };
            match (m, *op) {
                ("PUT", "profile") => match serde_json::from_slice::<ProfileBody>(body) {
                    Err(e) => (400, error_json(&format!("bad profile: {e}"))),
                    Ok(p) => result(fleet.set_profile(&name, p.profile)),
                },
                ("POST", "drain") if query.split('&').any(|q| q == "wait=false") => {
                    match fleet.drain_async(&name) {
                        Ok(_) => (202, "{\"ok\":true}".into()),
                        Err(e) => (e.http_status(), error_json(&e.to_string())),
                    }
                }
                ("POST", "drain") => result(fleet.drain(&name)),
                ("POST", "kill") => result(fleet.kill(&name)),
                ("POST", "close") => match close_params(query) {
                    Ok((code, grpc)) => result(fleet.close_streams(&name, code, grpc)),
                    Err(e) => (e.http_status(), error_json(&e.to_string())),
                },
                ("POST", "restart") => result(fleet.restart(&name)),
                (_, "profile" | "drain" | "kill" | "restart" | "close") => (
                    405,
                    error_json(&format!("{m} not allowed on /instances/NAME/{op}")),
                ),
                _ => (404, error_json(&format!("no such endpoint: {m} {path}"))),
            }
        }
        _ => (
            404,
            error_json(&format!("no such endpoint: {method} {path}")),
        ),
    }
}
