//! Long-lived connections: WebSocket (`ws.rs`, with tungstenite's frame layer), gRPC unary and
//! server-streaming calls on the HTTP/2 connection core (`grpc.rs`), server-sent events
//! (`sse.rs`). They run on their own event loop (`worker.rs`), apart from the HTTP engine's
//! request loop, whose hot path they leave as it was: they share its sockets and epoll
//! (`crate::sys`), its TLS setup, its target resolution and its HDR recorder.
//!
//! [`run_streams`] opens the connections on a ramp, holds them for the duration (sending at
//! the set rate, answering pings, timing echoes and gaps), reconnects the ones that end as the
//! policy says, and closes them all at the end or on a stop. It returns a
//! [`model::stream::StreamSummary`] with every connection's life.

mod config;
mod grpc;
mod io;
mod record;
mod sse;
mod worker;
mod ws;

pub use config::{StreamConfig, GRPC_STREAM_PATH, GRPC_UNARY_PATH, WS_STAMP};
pub use ws::CLIENT_CLOSE;

use crate::config::Error;
use crate::summary::latency;
use crate::target::Target;
use crate::Control;
use model::stream::{EndKind, StreamCost, StreamSecond, StreamSummary};
use record::Rec;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tungstenite::protocol::WebSocketConfig;

/// What every worker of a stream load shares (read-only but for the open gauge).
pub(crate) struct Shared {
    pub cfg: StreamConfig,
    pub addr: SocketAddr,
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    pub origin: Instant,
    pub start_ns: u64,
    pub end_ns: Option<u64>,
    pub stop: Arc<AtomicBool>,
    /// Event-loop threads.
    pub threads: usize,
    /// Connections open now, all threads.
    pub open_now: AtomicU64,
    /// The most connections open at once, all threads.
    pub open_max: AtomicU64,
    /// `GET path HTTP/1.1`, Host and the user's headers, without the final empty line: the
    /// start of every WebSocket upgrade and SSE request.
    pub head_template: Vec<u8>,
    /// gRPC: the request's fields and its one message.
    pub grpc: Option<(Arc<http2::hpack::RequestHeaders>, Arc<[u8]>)>,
    /// WebSocket: the frame layer's settings.
    pub ws_config: WebSocketConfig,
}

/// What a protocol step tells the worker.
pub(crate) enum Step {
    /// Nothing changed for the connection.
    Continue,
    /// The handshake completed: the connection is open.
    Opened,
    /// The handshake was answered with this status, not the one the protocol needs.
    Refused(u16, String),
    /// The connection ended: how, why, and the close code (WebSocket) or `grpc-status`.
    End(EndKind, Option<String>, Option<u16>),
}

/// Runs one stream load to its end (duration or [`Control::stop`]). Errors are setup problems
/// only; everything that goes wrong with a connection is recorded in the summary.
pub fn run_streams(cfg: &StreamConfig, ctl: &Control) -> Result<StreamSummary, Error> {
    cfg.validate()?;
    let http = cfg.http_view()?;
    let target = Target::new(&http)?;
    let tls = match &target.server_name {
        Some(name) => Some((
            crate::tls::client_config(&http)?,
            crate::tls::server_name(name)?,
        )),
        None => None,
    };
    let threads = cfg.threads.min(cfg.connections).max(1) as usize;
    crate::fds::ensure(cfg.connections as u64, threads as u64)?;
    let shared = Shared {
        head_template: head_template(cfg, &http, &target),
        grpc: cfg
            .protocol
            .is_grpc()
            .then(|| grpc_request(cfg, &http, &target)),
        ws_config: ws::config(cfg.size),
        addr: target.addr,
        tls,
        origin: ctl.origin,
        start_ns: ctl.origin.elapsed().as_nanos() as u64,
        end_ns: None,
        stop: ctl.stop.clone(),
        threads,
        open_now: AtomicU64::new(0),
        open_max: AtomicU64::new(0),
        cfg: cfg.clone(),
    };
    let shared = Shared {
        end_ns: cfg.duration.map(|d| shared.start_ns + d.as_nanos() as u64),
        ..shared
    };
    let rss_before = rss_kib();
    let mut sample = (0u64, rss_before);
    let outs = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads);
        for t in 0..threads {
            let first = crate::worker::first_conn(t, threads, cfg.connections as usize);
            let n = crate::share(cfg.connections as u64, threads as u64, t as u64) as usize;
            let sh = &shared;
            let h = std::thread::Builder::new()
                .name(format!("pb-stream-{t}"))
                .spawn_scoped(s, move || worker::run(sh, first, n));
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    shared.stop.store(true, Ordering::Relaxed);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(Error::Io(format!("cannot start a load thread: {e}")));
                }
            }
        }
        // The most connections open at once, and the memory then: the cost of a connection.
        while handles.iter().any(|h| !h.is_finished()) {
            let open = shared.open_now.load(Ordering::Relaxed);
            if open > sample.0 {
                sample = (open, rss_kib());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut outs = Vec::with_capacity(threads);
        for h in handles {
            match h.join() {
                Ok(Ok(o)) => outs.push(o),
                Ok(Err(e)) => return Err(Error::Io(format!("load thread: {e}"))),
                Err(_) => return Err(Error::Io("a load thread panicked".to_string())),
            }
        }
        Ok(outs)
    })?;
    Ok(summarize(cfg, &shared, outs, threads, rss_before, sample))
}

/// The request line, Host and the user's headers, as every HTTP/1.1 request of the load
/// starts.
fn head_template(cfg: &StreamConfig, http: &crate::Config, target: &Target) -> Vec<u8> {
    let has = |name: &str| {
        cfg.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    let mut out = format!("GET {} HTTP/1.1\r\n", target.url.path).into_bytes();
    if !has("host") {
        let host = http.host.clone().unwrap_or_else(|| target.url.authority());
        out.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
    }
    for (n, v) in &cfg.headers {
        out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
    }
    out
}

/// A gRPC call's request fields (POST to the method, `application/grpc`, `te: trailers`, the
/// deadline) and its one message of the load's size.
fn grpc_request(
    cfg: &StreamConfig,
    http: &crate::Config,
    target: &Target,
) -> (Arc<http2::hpack::RequestHeaders>, Arc<[u8]>) {
    let authority = http.host.clone().unwrap_or_else(|| target.url.authority());
    grpc_call(
        &authority,
        target.url.tls,
        cfg.method_path(),
        cfg.deadline,
        &cfg.headers,
        cfg.size,
    )
}

/// The request of one gRPC call to `path` at `authority` (over TLS when `tls`): POST,
/// `application/grpc`, `te: trailers`, the `deadline` as `grpc-timeout`, `headers` (any Host
/// left out: `:authority` says it), and one message of `size` bytes. The load's calls and the
/// bench's gRPC probe ([`crate::probe::GrpcProbe`]) are made by it alike.
pub(crate) fn grpc_call(
    authority: &str,
    tls: bool,
    path: &str,
    deadline: Option<std::time::Duration>,
    headers: &[(String, String)],
    size: u32,
) -> (Arc<http2::hpack::RequestHeaders>, Arc<[u8]>) {
    let scheme = if tls { "https" } else { "http" };
    let mut fields: Vec<(String, String)> = vec![
        ("content-type".into(), http2::grpc::CONTENT_TYPE.into()),
        ("te".into(), "trailers".into()),
        ("user-agent".into(), "proxybench".into()),
    ];
    if let Some(d) = deadline {
        fields.push(("grpc-timeout".into(), http2::grpc::timeout_value(d)));
    }
    fields.extend(
        headers
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("host"))
            .cloned(),
    );
    let req = http2::hpack::RequestHeaders::new("POST", scheme, authority, path, &fields);
    let mut body = Vec::with_capacity(size as usize + http2::grpc::PREFIX);
    http2::grpc::message(&mut body, size, |o| o.resize(o.len() + size as usize, b'x'));
    (Arc::new(req), body.into())
}

/// Resident memory of this process, KiB (0 if /proc cannot say).
fn rss_kib() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * (rustix::param::page_size() as u64) / 1024
}

/// Adds one thread's rows, whose first is second `rec_t0`, into the run's rows from second `t0`
/// on (and each second's round-trip histogram into `row_hist`, for its p99).
fn add_rows(
    rows: &mut Vec<StreamSecond>,
    row_hist: &mut Vec<Option<hdrhistogram::Histogram<u64>>>,
    t0: u32,
    rec_t0: u32,
    rec_rows: Vec<record::Row>,
) {
    for (k, row) in rec_rows.into_iter().enumerate() {
        let at = (rec_t0 + k as u32 - t0) as usize;
        while rows.len() <= at {
            rows.push(StreamSecond {
                t: t0 + rows.len() as u32,
                ..StreamSecond::default()
            });
            row_hist.push(None);
        }
        let out = &mut rows[at];
        out.open += row.open;
        out.opened += row.opened;
        out.ended += row.ended;
        out.dropped += row.dropped;
        out.sent += row.sent;
        out.received += row.received;
        if let Some(h) = row.rtt {
            match &mut row_hist[at] {
                Some(m) => {
                    let _ = m.add(&h);
                }
                slot => *slot = Some(h),
            }
        }
    }
}

/// Adds the threads' recordings up into the summary.
fn summarize(
    cfg: &StreamConfig,
    sh: &Shared,
    outs: Vec<worker::ThreadOut>,
    threads: usize,
    rss_before: u64,
    sample: (u64, u64),
) -> StreamSummary {
    let t0 = (sh.start_ns / 1_000_000_000) as u32;
    let mut all = Rec::new(t0, cfg.lives);
    let mut end_ns = sh.start_ns;
    let mut cpu_ns = 0;
    let mut rows: Vec<StreamSecond> = Vec::new();
    let mut row_hist: Vec<Option<hdrhistogram::Histogram<u64>>> = Vec::new();
    for o in outs {
        end_ns = end_ns.max(o.end_ns);
        cpu_ns += o.cpu_ns;
        let mut r = o.rec;
        add_rows(
            &mut rows,
            &mut row_hist,
            t0,
            r.t0,
            std::mem::take(&mut r.rows),
        );
        all.merge(r);
    }
    for (row, h) in rows.iter_mut().zip(&row_hist) {
        if let Some(h) = h {
            row.rtt_p99_us = h.value_at_quantile(0.99);
        }
    }
    all.lives.sort_by_key(|l| (l.start_us, l.conn));
    let messages = all.msgs.sent + all.msgs.answered + all.msgs.pushed;
    let cpu_s = cpu_ns as f64 / 1e9;
    let (open_at_sample, rss_open) = sample;
    StreamSummary {
        schema: model::SCHEMA_VERSION,
        name: cfg.name.clone(),
        url: cfg.url.clone(),
        protocol: cfg.protocol,
        threads: threads as u32,
        connections: cfg.connections,
        start_s: sh.start_ns as f64 / 1e9,
        planned_s: cfg.duration.map(|d| d.as_secs_f64()),
        elapsed_s: end_ns.saturating_sub(sh.start_ns) as f64 / 1e9,
        ramp_s: cfg.ramp.as_secs_f64(),
        rate: cfg.rate,
        size: cfg.size,
        timeout_ms: cfg.timeout.as_millis() as u64,
        reconnect: cfg.reconnect,
        attempts: all.attempts,
        opened: all.opened,
        reconnects: all.reconnects,
        dropped: all.dropped,
        open_max: sh.open_max.load(Ordering::Relaxed),
        open_at_end: all.open_at_end,
        ended: all.ended,
        close_codes: all.close_codes,
        grpc_status: all.grpc_status,
        refused_status: all.refused_status,
        connect_errors: all.connect_errors,
        end_messages: all.first.into_iter().map(|(k, (_, m))| (k, m)).collect(),
        messages: all.msgs,
        rtt: latency(&all.rtt),
        gap: latency(&all.gap),
        handshake: latency(&all.handshake),
        cost: StreamCost {
            rss_before_kib: rss_before,
            rss_open_kib: rss_open,
            open_at_sample,
            bytes_per_connection: (open_at_sample > 0)
                .then(|| rss_open.saturating_sub(rss_before) * 1024 / open_at_sample),
            cpu_s,
            cpu_per_message_us: (messages > 0).then(|| cpu_s * 1e6 / messages as f64),
        },
        timeline: rows,
        lives: all.lives,
        lives_left_out: all.lives_left_out,
    }
}
