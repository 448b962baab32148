//! A case's loads configured: where each aims on its stage, and the engine's and stream
//! loads' settings made from the scenario.

use crate::error::{LoadError, LoadProblem};
use crate::platform::Stage;
use proxy::{ProxyConfig, TlsFiles};
use scenario::{ArrivalsSpec, LoadSpec, Via};
use std::net::SocketAddr;

/// Where one scenario load connects: its listener (for a long-lived load, the first one of its
/// url's scheme that speaks its protocol), a backend, an address the platform gives, or the
/// url's own host. `target` is the load's url with an http(s) scheme.
fn aim_at(
    l: &LoadSpec,
    target: &str,
    stack: &dyn Stage,
    proxy: Option<&ProxyConfig>,
) -> Result<(u16, std::net::IpAddr), LoadError> {
    let u = load::target::Url::parse(target).map_err(|e| LoadError::new(&l.name, e))?;
    let scheme = if u.tls { "https" } else { "http" };
    Ok(match &l.via {
        // An external target: the url as written, port included; its host resolved (to
        // `resolve`, or by the system) and held to 127.0.0.0/8.
        None if stack.external().is_some() => {
            let resolve = stack.external().and_then(|e| e.resolve);
            crate::reach::external_target(target, resolve)
                .map_err(|e| LoadError::new(&l.name, e))?
        }
        Some(Via::Backend(g)) => {
            let a = stack
                .first_backend(g)
                .ok_or_else(|| LoadError::new(&l.name, LoadProblem::NoBackend(g.clone())))?;
            (a.port(), a.ip())
        }
        // The url's own host (held to loopback and the scenario's reach list at parse).
        Some(Via::Url) => {
            crate::reach::url_target(target, l.resolve).map_err(|e| LoadError::new(&l.name, e))?
        }
        Some(
            v @ (Via::Service(..) | Via::NodePort(_) | Via::LoadBalancer(_) | Via::Gateway { .. }),
        ) => {
            let a = stack
                .aim(v, scheme == "https")
                .map_err(|e| LoadError::new(&l.name, e))?;
            (a.port(), a.ip())
        }
        Some(Via::Listener(v)) => (
            *stack
                .ports()
                .get(v)
                .ok_or_else(|| LoadError::new(&l.name, LoadProblem::NoListener(v.clone())))?,
            stack.listener_ip(),
        ),
        None => {
            // The first listener of the URL's scheme (validated at parse time); a long-lived
            // load's, the first that speaks its protocol.
            let want_tls = scheme == "https";
            let fitting = l.stream_protocol().and_then(|p| {
                proxy?
                    .listeners
                    .iter()
                    .find(|x| {
                        x.tls == want_tls
                            && (if p.is_grpc() {
                                x.http2
                            } else {
                                x.tls || !x.http2
                            })
                    })
                    .and_then(|x| stack.ports().get(&x.name).copied())
            });
            let p = fitting
                .or_else(|| stack.listener_port(want_tls))
                .ok_or_else(|| LoadError::new(&l.name, LoadProblem::NoSchemeListener(scheme)))?;
            (p, stack.listener_ip())
        }
    })
}

/// The url as the engine is given it: the scheme (`scheme`), the url's host (an IPv6 address
/// in brackets), `port` and its path; with a `--resolve` entry to `ip` when the host is a name.
fn aimed_url(
    l: &LoadSpec,
    scheme: &str,
    u: &load::target::Url,
    (port, ip): (u16, std::net::IpAddr),
) -> Result<(String, Option<load::Resolve>), LoadError> {
    let host = if u.host.contains(':') {
        format!("[{}]", u.host)
    } else {
        u.host.clone()
    };
    let url = format!("{scheme}://{host}:{port}{}", u.path);
    let resolve = if u.host.parse::<std::net::IpAddr>().is_err() {
        Some(
            load::Resolve::parse(&format!("{host}:{port}:{ip}"))
                .map_err(|e| LoadError::new(&l.name, e))?,
        )
    } else {
        None
    };
    Ok((url, resolve))
}

/// Builds the engine's config for one long-lived scenario load (WebSocket, gRPC, SSE), aimed
/// as any load, with every connection's life kept.
pub(super) fn stream_config(
    l: &LoadSpec,
    p: model::stream::StreamProtocol,
    stack: &dyn Stage,
    tls: Option<&TlsFiles>,
    proxy: Option<&ProxyConfig>,
) -> Result<load::StreamConfig, LoadError> {
    let target = l.target_url();
    let u = load::target::Url::parse(&target).map_err(|e| LoadError::new(&l.name, e))?;
    let aim = aim_at(l, &target, stack, proxy)?;
    let scheme = match (p, u.tls) {
        (model::stream::StreamProtocol::WebSocket, false) => "ws",
        (model::stream::StreamProtocol::WebSocket, true) => "wss",
        (_, false) => "http",
        (_, true) => "https",
    };
    let (url, resolve) = aimed_url(l, scheme, &u, aim)?;
    let mut cfg = load::StreamConfig::new(&url, p).map_err(|e| LoadError::new(&l.name, e))?;
    cfg.resolve.extend(resolve);
    stream_settings(&mut cfg, l, u.tls, tls)?;
    cfg.validate().map_err(|e| LoadError::new(&l.name, e))?;
    // Where it connects is this run's own target, as for any load.
    let http = format!(
        "{}://{}",
        if u.tls { "https" } else { "http" },
        url.split_once("://").map_or("", |(_, r)| r)
    );
    let mut check = load::Config::new(&http).map_err(|e| LoadError::new(&l.name, e))?;
    check.resolve.clone_from(&cfg.resolve);
    crate::reach::own_target(&check, SocketAddr::new(aim.1, aim.0))
        .map_err(|e| LoadError::new(&l.name, e))?;
    Ok(cfg)
}

/// A long-lived scenario load's settings onto the engine's config (everything but where it
/// aims).
pub(super) fn stream_settings(
    cfg: &mut load::StreamConfig,
    l: &LoadSpec,
    url_tls: bool,
    tls: Option<&TlsFiles>,
) -> Result<(), LoadError> {
    cfg.name = l.name.clone();
    cfg.connections = l.connections;
    cfg.threads = l.threads.min(l.connections);
    cfg.duration = l.duration.map(|d| d.0);
    if let Some(r) = l.ramp {
        cfg.ramp = r.0;
    }
    if let Some(r) = l.message_rate {
        cfg.rate = r.0;
    }
    if let Some(sz) = l.message_size {
        cfg.size =
            u32::try_from(sz.0).map_err(|_| LoadError::new(&l.name, LoadProblem::MessageSize))?;
    }
    cfg.timeout = l.timeout.0;
    cfg.idle_timeout = l.idle_timeout.map(|d| d.0);
    cfg.ping = l.ping.map(|d| d.0);
    cfg.deadline = l.grpc_deadline.map(|d| d.0);
    cfg.grpc_path.clone_from(&l.grpc_path);
    if let Some(r) = l.reconnect {
        cfg.reconnect = r;
    }
    if let Some(b) = l.backoff {
        cfg.backoff = b.0;
    }
    if let Some(b) = l.backoff_max {
        cfg.backoff_max = b.0;
    }
    cfg.headers = l
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    cfg.lives = true;
    if url_tls {
        cfg.cacert = l.cacert.clone().or_else(|| tls.map(|t| t.ca.clone()));
        cfg.insecure = l.insecure;
        cfg.sni.clone_from(&l.sni);
    }
    Ok(())
}

/// Builds the engine's config for one scenario load, aimed at its listener or backend.
pub(super) fn load_config(
    l: &LoadSpec,
    stack: &dyn Stage,
    tls: Option<&TlsFiles>,
) -> Result<load::Config, LoadError> {
    let u = load::target::Url::parse(&l.url).map_err(|e| LoadError::new(&l.name, e))?;
    let scheme = if u.tls { "https" } else { "http" };
    let (port, ip) = aim_at(l, &l.url, stack, None)?;
    let (url, resolve) = aimed_url(l, scheme, &u, (port, ip))?;
    let mut cfg = load::Config::new(&url).map_err(|e| LoadError::new(&l.name, e))?;
    cfg.resolve.extend(resolve);
    cfg.name = l.name.clone();
    cfg.connections = l.connections;
    cfg.threads = l.threads.min(l.connections);
    cfg.duration = l.duration.map(|d| d.0);
    cfg.requests = l.requests;
    cfg.rate = l.rate.map(|r| r.0);
    cfg.arrivals = match l.arrivals {
        ArrivalsSpec::Even => model::Arrivals::Even,
        ArrivalsSpec::Poisson => model::Arrivals::Poisson,
    };
    cfg.seed = l.seed;
    cfg.timeout = l.timeout.0;
    cfg.method = l.method.clone();
    cfg.headers = l
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    cfg.body = l.body.as_ref().map(|b| b.clone().into_bytes());
    cfg.record_requests = true;
    cfg.http2 = l.http2();
    cfg.streams = l.streams.unwrap_or(1);
    cfg.retry_idle_closed = l.retry_idle_closed;
    if u.tls {
        // The run's CA signs its own listeners; a target the run did not make brings its own.
        cfg.cacert = l.cacert.clone().or_else(|| tls.map(|t| t.ca.clone()));
        cfg.insecure = l.insecure;
        cfg.sni.clone_from(&l.sni);
    }
    crate::reach::own_target(&cfg, SocketAddr::new(ip, port))
        .map_err(|e| LoadError::new(&l.name, e))?;
    Ok(cfg)
}
