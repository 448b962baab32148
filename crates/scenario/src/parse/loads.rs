//! The checks of one load: its target, its scheme, agents, and a long-lived load's protocol,
//! keys and numbers.

use super::*;

/// `agents = N` on a load: at least one, at most [`MAX_AGENTS`], and enough of the load to give
/// each agent a share (connections, requests, an even schedule's arrivals).
pub(super) fn check_agents(l: &LoadSpec, n: u32) -> Result<(), Invalid> {
    let name = &l.name;
    if n == 0 {
        return Err(Invalid::from(format!(
            "load '{name}': agents must be at least 1"
        )));
    }
    if n > MAX_AGENTS {
        return Err(Invalid::from(format!(
            "load '{name}': agents = {n} is more than {MAX_AGENTS}"
        )));
    }
    if l.connections < n {
        return Err(Invalid::from(format!(
            "load '{name}': agents = {n} needs at least {n} connections (it has {})",
            l.connections
        )));
    }
    if let Some(r) = l.requests.filter(|&r| r < u64::from(n)) {
        return Err(Invalid::from(format!(
            "load '{name}': agents = {n} needs at least {n} requests (it has {r})"
        )));
    }
    if let (Some(rate), ArrivalsSpec::Even, Some(d)) = (l.rate, l.arrivals, l.duration) {
        let within = model::schedule::even_arrivals(rate.0, d.0.as_nanos() as u64);
        if within < u64::from(n) {
            return Err(Invalid::from(format!(
                "load '{name}': agents = {n} would share only {within} requests (rate {}/s for {d})",
                rate.0
            )));
        }
    }
    Ok(())
}

/// The long-lived settings a load sets, by their scenario keys.
fn stream_keys(l: &LoadSpec) -> Vec<&'static str> {
    [
        (l.protocol.is_some(), "protocol"),
        (l.message_rate.is_some(), "message_rate"),
        (l.message_size.is_some(), "message_size"),
        (l.ramp.is_some(), "ramp"),
        (l.reconnect.is_some(), "reconnect"),
        (l.backoff.is_some(), "backoff"),
        (l.backoff_max.is_some(), "backoff_max"),
        (l.idle_timeout.is_some(), "idle_timeout"),
        (l.ping.is_some(), "ping"),
        (l.grpc_deadline.is_some(), "grpc_deadline"),
        (l.grpc_path.is_some(), "grpc_path"),
    ]
    .into_iter()
    .filter(|(set, _)| *set)
    .map(|(_, k)| k)
    .collect()
}

/// The smallest WebSocket message: its sequence number and send time, which time its echo
/// (the load engine's `WS_STAMP`).
const WS_STAMP: u64 = 16;

/// A long-lived load's settings: what its protocol takes, in range; the HTTP-only keys and the
/// settings of other protocols are refused by name.
fn check_stream(l: &LoadSpec, p: StreamProtocol) -> Result<(), Invalid> {
    let name = &l.name;
    let proto = p.name();
    let http_only = [
        (
            l.requests.is_some(),
            "requests (a long-lived load runs for a `duration`)",
        ),
        (
            l.rate.is_some(),
            "rate (the message rate is `message_rate`)",
        ),
        (l.arrivals != ArrivalsSpec::Even, "arrivals"),
        (l.seed != 1, "seed"),
        (!l.method.eq_ignore_ascii_case("GET"), "method"),
        (l.body.is_some(), "body"),
        (l.http.is_some(), "http"),
        (l.streams.is_some(), "streams"),
        (l.retry_idle_closed, "retry_idle_closed"),
        (
            l.agents.is_some(),
            "agents (agents run HTTP loads; a long-lived load runs in proxybench itself)",
        ),
    ];
    if let Some((_, key)) = http_only.iter().find(|(set, _)| *set) {
        return Err(Invalid::from(format!(
            "load '{name}': {key} is for HTTP loads; a {proto} load does not take it"
        )));
    }
    if l.duration.is_none() {
        return Err(Invalid::from(format!(
            "load '{name}': a {proto} load needs a `duration` (it holds connections open)"
        )));
    }
    let grpc = p.is_grpc();
    let only = |set: bool, key: &str, who: &str| -> Result<(), Invalid> {
        if set {
            Err(Invalid::from(format!(
                "load '{name}': {key} is for {who}; a {proto} load does not take it"
            )))
        } else {
            Ok(())
        }
    };
    only(
        l.ping.is_some() && p != StreamProtocol::WebSocket,
        "ping",
        "WebSocket loads",
    )?;
    only(
        l.grpc_deadline.is_some() && !grpc,
        "grpc_deadline",
        "gRPC loads",
    )?;
    only(l.grpc_path.is_some() && !grpc, "grpc_path", "gRPC loads")?;
    only(
        l.message_size.is_some() && p == StreamProtocol::Sse,
        "message_size",
        "loads that send messages (ws, grpc-unary, grpc-stream's request)",
    )?;
    stream_numbers(l, p)
}

/// A long-lived load's numbers in range: its message rate and size, its positive waits, its
/// backoff, and its gRPC path.
fn stream_numbers(l: &LoadSpec, p: StreamProtocol) -> Result<(), Invalid> {
    let name = &l.name;
    let proto = p.name();
    if let Some(r) = l.message_rate.filter(|r| r.0 > 0.0) {
        if matches!(p, StreamProtocol::Sse | StreamProtocol::GrpcStream) {
            return Err(Invalid::from(format!(
                "load '{name}': a {proto} load only listens: the backend sets the message rate \
                 (its push= profile key); leave message_rate out"
            )));
        }
        if r.0 > 100_000.0 {
            return Err(Invalid::from(format!(
                "load '{name}': message_rate must be at most 100000 per second per connection"
            )));
        }
    }
    if let Some(sz) = l.message_size {
        if p == StreamProtocol::WebSocket && sz.0 < WS_STAMP {
            return Err(Invalid::from(format!(
                "load '{name}': a WebSocket message carries a {WS_STAMP}-byte stamp to time its \
                 echo: message_size must be at least {WS_STAMP} bytes"
            )));
        }
        if sz.0 > 16 << 20 {
            return Err(Invalid::from(format!(
                "load '{name}': message_size must be at most 16 MiB"
            )));
        }
    }
    for (d, key) in [
        (l.ramp, "ramp"),
        (l.idle_timeout, "idle_timeout"),
        (l.ping, "ping"),
        (l.grpc_deadline, "grpc_deadline"),
        (l.backoff, "backoff"),
        (l.backoff_max, "backoff_max"),
    ] {
        if d.is_some_and(|d| d.0.is_zero()) && key != "ramp" {
            return Err(Invalid::from(format!(
                "load '{name}': {key} must be positive"
            )));
        }
    }
    let backoff = l.backoff.map_or(Duration::from_millis(100), |d| d.0);
    let backoff_max = l.backoff_max.map_or(Duration::from_secs(5), |d| d.0);
    if backoff_max < backoff {
        return Err(Invalid::from(format!(
            "load '{name}': backoff_max ({}) must be at least backoff ({})",
            Dur(backoff_max),
            Dur(backoff)
        )));
    }
    if (l.backoff.is_some() || l.backoff_max.is_some())
        && l.reconnect.is_some_and(|r| r == Reconnect::None)
    {
        return Err(Invalid::from(format!(
            "load '{name}': backoff and backoff_max are waits between reconnects; \
             reconnect = \"none\" makes none"
        )));
    }
    if let Some(path) = &l.grpc_path {
        if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(Invalid::from(format!(
                "load '{name}': grpc_path '{path}' must start with '/' and hold no spaces"
            )));
        }
    }
    Ok(())
}

/// Whether a long-lived load of protocol `p` can go through listener `lis`: gRPC needs HTTP/2
/// from the client (`http2`); WebSocket and SSE need HTTP/1.1, which a plain `http2`
/// listener does not speak (h2c only), while a TLS one offers both by ALPN.
fn stream_fits(p: StreamProtocol, lis: &setup::proxy::Listener) -> bool {
    if p.is_grpc() {
        lis.http2
    } else {
        lis.tls || !lis.http2
    }
}

/// Why a listener does not fit a long-lived load of protocol `p`.
fn stream_misfit(p: StreamProtocol) -> &'static str {
    if p.is_grpc() {
        "a gRPC load needs a listener with `http2 = true` (h2c, or h2 by ALPN with tls)"
    } else {
        "a WebSocket or SSE load needs HTTP/1.1, which a plain `http2 = true` listener does \
         not speak (h2c only)"
    }
}

/// One load in itself (its url and scheme, its stream settings, TLS, size, HTTP version,
/// retries, streams) and against where it goes (see [`check_load_target`]).
pub(super) fn check_load(
    l: &LoadSpec,
    proxy: Option<&ProxyConfig>,
    groups: &BTreeMap<String, u32>,
) -> Result<(), Invalid> {
    let stream = l.stream_protocol();
    let https = url_is_https(l, stream)?;
    match stream {
        Some(p) => check_stream(l, p)?,
        None => {
            if let Some(key) = stream_keys(l).first() {
                return Err(Invalid::from(format!(
                    "load '{}': {key} is for long-lived loads (a ws:// url, or protocol = \
                     \"grpc-unary\", \"grpc-stream\" or \"sse\")",
                    l.name
                )));
            }
        }
    }
    // A url load connects where its url points (the reach list decides); every other load
    // connects where the stack says, so its url may only name a host.
    if l.via != Some(Via::Url) {
        crate::reach::check_url_host(&l.target_url())
            .map_err(|e| format!("load '{}': {e}", l.name))?;
        if let Some(ip) = l.resolve {
            return Err(Invalid::from(format!(
                "load '{}': resolve = \"{ip}\" needs via = \"url\": other loads connect \
                 where the run's stack listens",
                l.name
            )));
        }
    }
    if let Some(n) = &l.sni {
        if !https || n.is_empty() || n.parse::<std::net::IpAddr>().is_ok() {
            return Err(Invalid::from(format!(
                "load '{}': sni = \"{n}\" needs an https url and a host name",
                l.name
            )));
        }
    }
    if (l.insecure || l.cacert.is_some()) && !https {
        return Err(Invalid::from(format!(
            "load '{}': cacert and insecure are for https urls",
            l.name
        )));
    }
    if l.duration.is_none() && l.requests.is_none() {
        return Err(Invalid::from(format!(
            "load '{}' needs a `duration` or `requests`",
            l.name
        )));
    }
    if l.connections == 0 || l.threads == 0 {
        return Err(Invalid::from(format!(
            "load '{}': connections and threads must be at least 1",
            l.name
        )));
    }
    match l.http.as_deref() {
        None | Some("1.1") | Some("2") => {}
        Some(v) => {
            return Err(Invalid::from(format!(
                "load '{}': http = \"{v}\" is not a version; use \"1.1\" or \"2\"",
                l.name
            )))
        }
    }
    if l.retry_idle_closed
        && (l.http2() || !model::schedule::replayable(&l.method) || l.body.is_some())
    {
        return Err(Invalid::from(format!(
            "load '{}': retry_idle_closed sends a request twice, so it is for HTTP/1.1 GET, \
             HEAD, OPTIONS or TRACE without a body",
            l.name
        )));
    }
    if let Some(m) = l.streams {
        if !l.http2() {
            return Err(Invalid::from(format!(
                "load '{}': streams = {m} needs http = \"2\"",
                l.name
            )));
        }
        if m == 0 || m > 65_536 {
            return Err(Invalid::from(format!(
                "load '{}': streams must be 1 to 65536, not {m}",
                l.name
            )));
        }
    }
    check_load_target(l, https, stream, proxy, groups)
}

/// Whether a load's url is https (or wss), refusing a scheme that does not fit its protocol.
fn url_is_https(l: &LoadSpec, stream: Option<StreamProtocol>) -> Result<bool, Invalid> {
    let scheme = l
        .url
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase())
        .unwrap_or_default();
    match (scheme.as_str(), stream) {
        ("https", Some(StreamProtocol::WebSocket)) | ("http", Some(StreamProtocol::WebSocket)) => {
            Err(Invalid::from(format!(
                "load '{}': protocol = \"ws\" needs a ws:// or wss:// url",
                l.name
            )))
        }
        ("ws" | "wss", Some(p)) if p != StreamProtocol::WebSocket => Err(Invalid::from(format!(
            "load '{}': a ws:// url is WebSocket; a {} load needs an http:// or https:// url",
            l.name,
            p.name()
        ))),
        ("https" | "wss", _) => Ok(true),
        ("http" | "ws", _) => Ok(false),
        _ => Err(Invalid::from(format!(
            "load '{}': url '{}' must start with http:// or https:// (ws:// or wss:// for \
             a WebSocket load)",
            l.name, l.url
        ))),
    }
}

/// Where a load goes: a backend group that exists (plain HTTP), a listener of the run's proxy
/// that fits its scheme and protocol, or, without `via`, a listener that fits; cluster
/// addresses and urls are checked elsewhere.
fn check_load_target(
    l: &LoadSpec,
    https: bool,
    stream: Option<StreamProtocol>,
    proxy: Option<&ProxyConfig>,
    groups: &BTreeMap<String, u32>,
) -> Result<(), Invalid> {
    match &l.via {
        Some(Via::Backend(g)) => {
            if !groups.contains_key(g) {
                return Err(Invalid::from(format!(
                    "load '{}' goes via backend group '{g}', which is not defined",
                    l.name
                )));
            }
            if https {
                return Err(Invalid::from(format!(
                    "load '{}': backends speak plain HTTP, use an http:// url",
                    l.name
                )));
            }
        }
        Some(Via::Listener(v)) if proxy.is_some_and(|p| p.external.is_some()) => {
            return Err(Invalid::from(format!(
                "load '{}' goes via listener '{v}', but an external target has no listeners: \
                 its url is used as written, port included",
                l.name
            )));
        }
        Some(Via::Listener(v)) => {
            let p = proxy.ok_or_else(|| {
                format!(
                    "load '{}' goes via listener '{v}' but there is no [proxy]",
                    l.name
                )
            })?;
            let lis = p.listener(v).ok_or_else(|| {
                format!(
                    "load '{}' goes via listener '{v}', which is not defined",
                    l.name
                )
            })?;
            if lis.tls != https {
                return Err(Invalid::from(format!(
                    "load '{}': listener '{v}' is {} but the url is {}",
                    l.name,
                    if lis.tls { "HTTPS" } else { "HTTP" },
                    if https { "https" } else { "http" }
                )));
            }
            if let Some(p) = stream {
                if !stream_fits(p, lis) {
                    return Err(Invalid::from(format!(
                        "load '{}': listener '{v}' {}",
                        l.name,
                        stream_misfit(p)
                    )));
                }
            }
        }
        // Checked by check_cluster_via, which knows the platform.
        Some(Via::Service(..) | Via::NodePort(_) | Via::LoadBalancer(_) | Via::Gateway { .. }) => {}
        // Checked against the scenario's reach list by the caller.
        Some(Via::Url) => {}
        None => match proxy {
            // An external target's loads go where their urls say (checked by the runner).
            Some(p) if p.external.is_some() => {}
            Some(p) => {
                if !p.listeners.iter().any(|x| x.tls == https) {
                    return Err(Invalid::from(format!(
                        "load '{}': no {} listener to send it to",
                        l.name,
                        if https { "HTTPS" } else { "HTTP" }
                    )));
                }
                if let Some(sp) = stream {
                    if !p
                        .listeners
                        .iter()
                        .any(|x| x.tls == https && stream_fits(sp, x))
                    {
                        return Err(Invalid::from(format!(
                            "load '{}': no {} listener fits it: each {}; name one with `via`",
                            l.name,
                            if https { "HTTPS" } else { "HTTP" },
                            stream_misfit(sp)
                        )));
                    }
                }
            }
            None => {
                return Err(Invalid::from(format!(
                    "load '{}': without a [proxy], say `via = \"backend:GROUP\"`",
                    l.name
                )));
            }
        },
    }
    Ok(())
}
