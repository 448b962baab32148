//! `proxybench load` for long-lived connections: `ws://` and `wss://` URLs, and `--protocol
//! grpc-unary|grpc-stream|sse` on http(s) URLs. The flags that shape such a load, their check
//! against the HTTP-only flags, the run, and its wrk-style text (plain HTTP keeps its own).

use crate::CliError;
use model::stream::{grpc_code_name, EndKind, Reconnect, StreamProtocol, StreamSummary};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

/// The flags only long-lived loads take.
#[derive(clap::Args, Default)]
pub struct StreamFlags {
    /// The protocol: inferred from ws:// and wss:// URLs (WebSocket); on http(s) URLs,
    /// grpc-unary, grpc-stream or sse open long-lived connections instead of plain requests.
    #[arg(long, value_name = "PROTO", value_parser = ["ws", "grpc-unary", "grpc-stream", "sse"])]
    protocol: Option<String>,
    /// Messages each connection sends per second (WebSocket messages, gRPC unary calls)
    /// [default: 1; SSE and gRPC streams only listen].
    #[arg(long = "message-rate", value_name = "RATE")]
    message_rate: Option<String>,
    /// Payload size of each message sent, e.g. 64, 1k (WebSocket: at least 16, the stamp that
    /// times its echo).
    #[arg(long = "message-size", value_name = "SIZE", default_value = "64")]
    message_size: String,
    /// Open the connections evenly over this time instead of all at once.
    #[arg(long, value_name = "DURATION")]
    ramp: Option<String>,
    /// What a connection slot does when its connection ends before the run does.
    #[arg(long, value_name = "POLICY", value_parser = ["none", "immediate", "backoff"], default_value = "backoff")]
    reconnect: String,
    /// The first wait of --reconnect backoff (doubles with each failure in a row).
    #[arg(long, value_name = "DURATION", default_value = "100ms")]
    backoff: String,
    /// The longest wait of --reconnect backoff.
    #[arg(long = "backoff-max", value_name = "DURATION", default_value = "5s")]
    backoff_max: String,
    /// End a connection that received nothing for this long.
    #[arg(long = "idle-timeout", value_name = "DURATION")]
    idle_timeout: Option<String>,
    /// WebSocket: send a ping this often.
    #[arg(long, value_name = "DURATION")]
    ping: Option<String>,
    /// gRPC: the deadline each call carries (grpc-timeout).
    #[arg(long = "grpc-deadline", value_name = "DURATION")]
    grpc_deadline: Option<String>,
    /// gRPC: the method's path [default: the backend's /proxybench.Bench/Unary or /Stream].
    #[arg(long = "grpc-path", value_name = "PATH")]
    grpc_path: Option<String>,
    /// Write every connection's life (start, open, end and how, close code, grpc-status,
    /// messages) to this CSV file.
    #[arg(long = "lives", value_name = "FILE.csv")]
    lives: Option<PathBuf>,
}

impl StreamFlags {
    /// Where --lives writes.
    pub fn lives_path(&self) -> Option<&PathBuf> {
        self.lives.as_ref()
    }
}

/// The protocol of a load: `Some` for a long-lived one (the URL's scheme or --protocol).
pub fn protocol(url: &str, flags: &StreamFlags) -> Result<Option<StreamProtocol>, CliError> {
    let scheme = url
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase())
        .unwrap_or_default();
    let ws_url = scheme == "ws" || scheme == "wss";
    match flags.protocol.as_deref() {
        None if ws_url => Ok(Some(StreamProtocol::WebSocket)),
        None => Ok(None),
        Some(p) => {
            let p = StreamProtocol::parse(p).expect("clap checked the value");
            if (p == StreamProtocol::WebSocket) != ws_url {
                return Err(CliError::usage(if ws_url {
                    format!(
                        "--protocol {}: the URL is ws:// or wss://, which is WebSocket",
                        p.name()
                    )
                } else {
                    "--protocol ws needs a ws:// or wss:// URL".to_string()
                }));
            }
            Ok(Some(p))
        }
    }
}

/// True when a stream-only flag was given (a plain HTTP load refuses them).
pub fn any_set(f: &StreamFlags) -> Option<&'static str> {
    [
        (f.message_rate.is_some(), "--message-rate"),
        (f.message_size != "64", "--message-size"),
        (f.ramp.is_some(), "--ramp"),
        (f.reconnect != "backoff", "--reconnect"),
        (f.backoff != "100ms", "--backoff"),
        (f.backoff_max != "5s", "--backoff-max"),
        (f.idle_timeout.is_some(), "--idle-timeout"),
        (f.ping.is_some(), "--ping"),
        (f.grpc_deadline.is_some(), "--grpc-deadline"),
        (f.grpc_path.is_some(), "--grpc-path"),
        (f.lives.is_some(), "--lives"),
    ]
    .into_iter()
    .find(|(set, _)| *set)
    .map(|(_, name)| name)
}

/// What the HTTP flags shared with a stream load say.
pub struct Common<'a> {
    pub url: &'a str,
    pub connections: u32,
    pub threads: Option<u32>,
    pub duration: Option<&'a str>,
    pub timeout: &'a str,
    pub headers: &'a [String],
    pub host: Option<String>,
    pub resolve: &'a [String],
    pub insecure: bool,
    pub sni: Option<String>,
    pub cacert: Option<PathBuf>,
    pub json: bool,
}

fn dur(flag: &str, v: &str) -> Result<std::time::Duration, CliError> {
    let d = units::parse_duration(v).map_err(|e| CliError::usage(format!("{flag}: {e}")))?;
    if d.is_zero() {
        return Err(CliError::usage(format!("{flag} must be positive")));
    }
    Ok(d)
}

/// The engine's config from the flags; every problem is a one-line usage error.
pub fn config(
    p: StreamProtocol,
    c: &Common,
    f: &StreamFlags,
) -> Result<load::StreamConfig, CliError> {
    let usage = |e: &dyn std::fmt::Display| CliError::usage(e.to_string());
    let mut cfg = load::StreamConfig::new(c.url, p).map_err(|e| usage(&e))?;
    if c.connections == 0 {
        return Err(CliError::usage("-c/--connections must be at least 1"));
    }
    cfg.connections = c.connections;
    cfg.threads = match c.threads {
        Some(0) => return Err(CliError::usage("-t/--threads must be at least 1")),
        Some(t) if t > c.connections => {
            return Err(CliError::usage(format!(
                "-t/--threads ({t}) must not exceed -c/--connections ({})",
                c.connections
            )))
        }
        Some(t) => t,
        None => cfg.threads.min(c.connections),
    };
    cfg.duration = Some(match c.duration {
        Some(d) => dur("-d/--duration", d)?,
        None => std::time::Duration::from_secs(10),
    });
    cfg.timeout = dur("--timeout", c.timeout)?;
    if let Some(r) = &f.message_rate {
        cfg.rate = match r.trim() {
            "0" => 0.0,
            r => units::parse_rate(r).map_err(|e| usage(&format!("--message-rate: {e}")))?,
        };
    }
    let size =
        units::parse_size(&f.message_size).map_err(|e| usage(&format!("--message-size: {e}")))?;
    cfg.size = u32::try_from(size).map_err(|_| CliError::usage("--message-size: at most 16m"))?;
    if let Some(r) = &f.ramp {
        cfg.ramp = units::parse_duration(r).map_err(|e| usage(&format!("--ramp: {e}")))?;
    }
    cfg.reconnect = match f.reconnect.as_str() {
        "none" => Reconnect::None,
        "immediate" => Reconnect::Immediate,
        _ => Reconnect::Backoff,
    };
    cfg.backoff = dur("--backoff", &f.backoff)?;
    cfg.backoff_max = dur("--backoff-max", &f.backoff_max)?;
    cfg.idle_timeout = f
        .idle_timeout
        .as_deref()
        .map(|v| dur("--idle-timeout", v))
        .transpose()?;
    cfg.ping = f.ping.as_deref().map(|v| dur("--ping", v)).transpose()?;
    cfg.deadline = f
        .grpc_deadline
        .as_deref()
        .map(|v| dur("--grpc-deadline", v))
        .transpose()?;
    cfg.grpc_path = f.grpc_path.clone();
    for h in c.headers {
        let (n, v) = load::parse_header_line(h).map_err(|e| usage(&e))?;
        cfg.headers.push((n, v));
    }
    cfg.host = c.host.clone();
    for r in c.resolve {
        cfg.resolve
            .push(load::Resolve::parse(r).map_err(|e| usage(&e))?);
    }
    cfg.insecure = c.insecure;
    cfg.sni = c.sni.clone();
    cfg.cacert = c.cacert.clone();
    cfg.validate().map_err(|e| usage(&e))?;
    Ok(cfg)
}

/// Runs the stream load and prints it; exit 3 when no connection ever opened.
pub fn run(
    cfg: &load::StreamConfig,
    json: bool,
    lives: Option<&PathBuf>,
) -> Result<ExitCode, CliError> {
    let ctl = load::Control::new();
    load::stop_on_interrupt(&ctl.stop).map_err(|e| CliError::runtime(e.to_string()))?;
    let stopped = ctl.stop.clone();
    let live = std::io::stderr().is_terminal();
    let summary = if live {
        std::thread::scope(|s| {
            let done = std::sync::atomic::AtomicBool::new(false);
            let h = s.spawn(|| load::run_streams(cfg, &ctl));
            while !h.is_finished() {
                std::thread::sleep(std::time::Duration::from_millis(200));
                if !done.load(Ordering::Relaxed) {
                    eprint!(
                        "\r\x1b[K[{:>5.1}s] running",
                        ctl.origin.elapsed().as_secs_f64()
                    );
                }
            }
            done.store(true, Ordering::Relaxed);
            eprint!("\r\x1b[K");
            h.join()
                .unwrap_or_else(|_| Err(load::Error::Io("the load panicked".into())))
        })
    } else {
        load::run_streams(cfg, &ctl)
    }
    .map_err(CliError::from)?;
    if stopped.load(Ordering::Relaxed) {
        eprintln!("proxybench: interrupted; results so far");
    }
    if let Some(path) = lives {
        std::fs::write(path, model::stream::lives_csv(&summary.lives))
            .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", path.display())))?;
    }
    let text = if json {
        summary.to_json_pretty()
    } else {
        render(&summary)
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    if summary.unusable() {
        eprintln!(
            "proxybench: the target was unusable: {}",
            unusable_why(&summary)
        );
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::SUCCESS)
}

/// Why no connection opened: the most frequent end, with its first message.
fn unusable_why(s: &StreamSummary) -> String {
    let Some((kind, n)) = s.ended.iter().max_by_key(|(_, n)| **n) else {
        return "no connection was attempted".to_string();
    };
    let msg = s
        .end_messages
        .get(kind)
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    format!(
        "no connection opened in {} attempts; {n} ended as {}{msg}",
        s.attempts,
        kind.name()
    )
}

/// The protocol in words.
fn proto_words(p: StreamProtocol) -> &'static str {
    match p {
        StreamProtocol::WebSocket => "WebSocket",
        StreamProtocol::GrpcUnary => "gRPC unary",
        StreamProtocol::GrpcStream => "gRPC server-streaming",
        StreamProtocol::Sse => "server-sent events",
    }
}

/// A latency row: count, p50, p90, p99, max.
fn lat_row(name: &str, l: &model::Latency) -> String {
    let p = |q: f64| units::fmt_us(l.percentile(q).unwrap_or(0) as f64);
    format!(
        "    {name:<11} {:>8}  p50 {:>9}  p90 {:>9}  p99 {:>9}  max {:>9}\n",
        l.count,
        p(50.0),
        p(90.0),
        p(99.0),
        units::fmt_us(l.max_us as f64)
    )
}

/// wrk-style text of a stream load.
pub fn render(s: &StreamSummary) -> String {
    let mut o = String::new();
    render_header(&mut o, s);
    render_connections(&mut o, s);
    render_messages(&mut o, s);
    render_cost(&mut o, s);
    o
}

/// The run line: its length, protocol and url, threads and connections, and the rate of messages.
fn render_header(o: &mut String, s: &StreamSummary) {
    let planned = s
        .planned_s
        .map(units::fmt_secs_short)
        .unwrap_or_else(|| "open-ended".to_string());
    o.push_str(&format!(
        "Running {planned} {} test @ {}\n",
        proto_words(s.protocol),
        s.url
    ));
    let ramp = if s.ramp_s > 0.0 {
        format!(" (opened over {})", units::fmt_secs_short(s.ramp_s))
    } else {
        String::new()
    };
    o.push_str(&format!(
        "  {} threads and {} connections{ramp}, reconnect: {}\n",
        s.threads,
        s.connections,
        s.reconnect.name()
    ));
    if s.rate > 0.0 {
        o.push_str(&format!(
            "  {} of {} bytes at {}/s on each connection\n",
            if s.protocol == StreamProtocol::GrpcUnary {
                "calls"
            } else {
                "messages"
            },
            s.size,
            s.rate
        ));
    }
}

/// The connections: opened, reconnects and how each ended, close frames, gRPC statuses, refused handshakes, failed connects and the first words of each kind of end.
fn render_connections(o: &mut String, s: &StreamSummary) {
    o.push_str(&format!(
        "  Connections: {} attempts, {} opened, {} reconnects, {} open at most, {} open at the end\n",
        s.attempts, s.opened, s.reconnects, s.open_max, s.open_at_end
    ));
    let ends: Vec<String> = s
        .ended
        .iter()
        .map(|(k, n)| format!("{} {n}", k.name()))
        .collect();
    o.push_str(&format!(
        "    ended: {}; dropped (open, then cut, or ended in error, by the server or the path) {}\n",
        if ends.is_empty() {
            "none".to_string()
        } else {
            ends.join(", ")
        },
        s.dropped
    ));
    if !s.close_codes.is_empty() {
        let c: Vec<String> = s
            .close_codes
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect();
        o.push_str(&format!(
            "    close frames from the server: {}\n",
            c.join(", ")
        ));
    }
    if !s.grpc_status.is_empty() {
        let c: Vec<String> = s
            .grpc_status
            .iter()
            .map(|(k, n)| format!("{} {n}", grpc_code_name(*k)))
            .collect();
        o.push_str(&format!("    grpc-status: {}\n", c.join(", ")));
    }
    if !s.refused_status.is_empty() {
        let c: Vec<String> = s
            .refused_status
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect();
        o.push_str(&format!(
            "    handshakes refused, by status: {}\n",
            c.join(", ")
        ));
    }
    if !s.connect_errors.is_empty() {
        let c: Vec<String> = s
            .connect_errors
            .iter()
            .map(|(k, n)| format!("{} {n}", k.name()))
            .collect();
        o.push_str(&format!("    connects failed: {}\n", c.join(", ")));
    }
    for (k, m) in &s.end_messages {
        if *k != EndKind::Client {
            o.push_str(&format!("    first {}: {m}\n", k.name()));
        }
    }
}

/// The messages sent and answered, the pings, and the latency rows.
fn render_messages(o: &mut String, s: &StreamSummary) {
    let m = &s.messages;
    let answered = match s.protocol {
        StreamProtocol::WebSocket => "echoed",
        _ => "answered",
    };
    o.push_str(&format!(
        "  Messages: {} sent, {} {answered}, {} lost with their connection, {} unanswered at the end; {} from the server\n",
        m.sent, m.answered, m.lost, m.unanswered_at_end, m.pushed
    ));
    if m.pings_sent + m.pongs + m.server_pings > 0 {
        o.push_str(&format!(
            "    pings sent {}, pongs received {}, server pings answered {}\n",
            m.pings_sent, m.pongs, m.server_pings
        ));
    }
    o.push_str("  Latency       count\n");
    if s.rtt.count > 0 {
        let name = match s.protocol {
            StreamProtocol::WebSocket => "round trip",
            _ => "call",
        };
        o.push_str(&lat_row(name, &s.rtt));
    }
    if s.gap.count > 0 {
        o.push_str(&lat_row("gap", &s.gap));
    }
    o.push_str(&lat_row("handshake", &s.handshake));
}

/// What an open connection cost: memory per connection and CPU per message.
fn render_cost(o: &mut String, s: &StreamSummary) {
    let c = &s.cost;
    match c.bytes_per_connection {
        Some(b) => o.push_str(&format!(
            "  Memory: {} per open connection (RSS {} before, {} with {} open)\n",
            units::fmt_bytes(b as f64),
            units::fmt_bytes(c.rss_before_kib as f64 * 1024.0),
            units::fmt_bytes(c.rss_open_kib as f64 * 1024.0),
            c.open_at_sample
        )),
        None => o.push_str("  Memory: not measured (no connection opened)\n"),
    }
    match c.cpu_per_message_us {
        Some(us) => o.push_str(&format!(
            "  CPU: {:.3} s in the load's threads, {} per message sent or received\n",
            c.cpu_s,
            units::fmt_us(us)
        )),
        None => o.push_str(&format!(
            "  CPU: {:.3} s in the load's threads (no messages)\n",
            c.cpu_s
        )),
    }
}
