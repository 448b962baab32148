//! `grow` on every platform: each step adds items to the config (listeners, routes, header
//! matches) or backends to a group, renders and reloads the new generation on every replica,
//! and probes the newest item for its time to ready. The platform ([`Grower`]: the local
//! `platform::local::Stack`, the Kubernetes stage) supplies the ports, the backends and the
//! reload; the steps, the probe and the records are the same everywhere.
//!
//! Time to ready has one definition: from the start of the step (render, check, reload) to the
//! first of three 200s in a row from the newest item. The probe asks every
//! [`Grower::ready_poll`]: 2 ms locally ([`LOCAL_POLL`]), 100 ms on Kubernetes as NGF's scale
//! tests do ([`NGF_POLL`]), so the time to ready is known to within one poll.

use crate::error::StackError;
use crate::platform::{Applied, Served};
use model::{Event, ReadyRecord, ReloadRecord};
use proxy::config::{Listener, PathMatch, ProxyConfig, Route};
use scenario::{GrowSpec, GrowWhat};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the local platform's probe asks: fine enough for reloads of a few milliseconds.
pub const LOCAL_POLL: Duration = Duration::from_millis(2);
/// How often NGF's scale tests ask a new route for its first 200, and proxybench on Kubernetes.
pub const NGF_POLL: Duration = Duration::from_millis(100);

/// What `grow` needs of a platform's stage.
pub(crate) trait Grower {
    /// What the stage serves (config, generation, ports, certificate, time origin): one
    /// [`Served`] on every platform.
    fn served(&self) -> &Served;
    /// The same, to change (a step's config; a refused step goes back to the last).
    fn served_mut(&mut self) -> &mut Served;
    /// Renders the current config as a new generation and reloads every replica.
    fn reload_all(&mut self) -> (Vec<ReloadRecord>, Option<StackError>);
    /// Where the time-to-ready probe reaches listener port `port` of one replica: 127.0.0.1
    /// locally; on Kubernetes a proxy pod's IP, or a port-forward to it when this machine
    /// cannot reach the pod network.
    fn probe_addr(&mut self, port: u16) -> Result<SocketAddr, StackError> {
        Ok(SocketAddr::new(crate::reach::RUN_IP, port))
    }
    /// Picks a free port for a new listener `name` and keeps it as that listener's.
    fn add_listener_port(&mut self, name: &str) -> Result<u16, StackError>;
    /// How many backends of `group` the upstreams hold now.
    fn group_size(&self, group: &str) -> u32;
    /// Adds `n` backends to `group`, running and ready; the next reload puts them in the
    /// upstreams.
    fn add_backends(&mut self, group: &str, n: u32) -> Result<(), StackError>;
    /// How often the time-to-ready probe asks.
    fn ready_poll(&self) -> Duration;
    /// Refuses a growth the platform cannot hold, before its first step (`from`: how many
    /// there are now).
    fn can_grow(&self, _g: &GrowSpec, _from: u32) -> Result<(), StackError> {
        Ok(())
    }
}

/// Grows the config step by step: each step adds `by` items, reloads every replica, and (for
/// things a client can reach) probes the newest item until it answers 3 times in a row.
/// A growth the platform cannot hold ([`Grower::can_grow`]) is one failed event, no step.
pub(crate) fn grow(t: &mut dyn Grower, g: &GrowSpec, keep_going: &dyn Fn() -> bool) -> Applied {
    let mut out = Applied::default();
    let Some(base) = t.served().config.clone() else {
        return out;
    };
    let upstream = g
        .upstream
        .clone()
        .or_else(|| base.upstreams.first().map(|u| u.name.clone()))
        .unwrap_or_default();
    let listener = g.listener.clone().or_else(|| {
        base.listeners
            .iter()
            .find(|l| !l.tls)
            .map(|l| l.name.clone())
    });
    let t0 = Instant::now();
    let mut n = grown_count(t, g, &base, &upstream);
    if let Err(e) = t.can_grow(g, n) {
        let t_s = t0.duration_since(t.served().origin).as_secs_f64();
        out.events
            .push(grow_event(t_s, g, n, g.to, t0, Some(e.to_string())));
        return out;
    }
    let poll = t.ready_poll();
    while n < g.to && keep_going() {
        let t0 = Instant::now();
        let t_s = t0.duration_since(t.served().origin).as_secs_f64();
        let before = t.served().config.clone();
        let add = g.by.min(g.to - n);
        let probe = match grow_step(t, g, n, add, &upstream, listener.as_deref()) {
            Ok(p) => p,
            Err(e) => {
                out.events
                    .push(grow_event(t_s, g, n, n + add, t0, Some(e.to_string())));
                break;
            }
        };
        // Probe while the reload happens: the new item may answer before the old workers
        // are gone, and that moment is the time to ready.
        let cancel = Arc::new(AtomicBool::new(false));
        let prober = probe.map(|p| {
            let cancel = cancel.clone();
            let timeout = g.ready_timeout.0;
            std::thread::spawn(move || {
                let r = p.until_ready(t0, timeout, poll, &|| !cancel.load(Ordering::SeqCst));
                (p.describe(), r)
            })
        });
        let (rel, err) = t.reload_all();
        out.reloads.extend(rel);
        if err.is_some() {
            cancel.store(true, Ordering::SeqCst);
        }
        let probed = prober.map(|h| {
            while !h.is_finished() {
                if !keep_going() {
                    cancel.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            h.join()
                .unwrap_or_else(|_| (String::new(), (None, Some("probe panicked".into()))))
        });
        if let Some(e) = err.map(|e| e.to_string()) {
            let mut ev = grow_event(t_s, g, n, n + add, t0, Some(e.clone()));
            // The refused config is the limit this growth was sent to find.
            ev.limit = g.stop_on_error;
            out.events.push(ev);
            out.ready.push(ReadyRecord {
                t_s,
                what: g.what.name().into(),
                count: n + add,
                item: probed.map(|p| p.0).unwrap_or_default(),
                generation: t.served().generation,
                ready_ms: None,
                error: Some(e),
            });
            // The proxy kept serving the previous config: go back to it.
            t.served_mut().config = before;
            if g.stop_on_error {
                break;
            }
            continue;
        }
        if let Some((item, (ready_ms, error))) = probed {
            out.ready.push(ReadyRecord {
                t_s,
                what: g.what.name().into(),
                count: n + add,
                item,
                generation: t.served().generation,
                ready_ms,
                error,
            });
        }
        out.events.push(grow_event(t_s, g, n, n + add, t0, None));
        n += add;
        pause(g, keep_going);
    }
    out
}

/// How many of what `g` grows the current config already has.
fn grown_count(t: &dyn Grower, g: &GrowSpec, cfg: &ProxyConfig, upstream: &str) -> u32 {
    let n = match g.what {
        GrowWhat::Listeners => cfg.listeners.iter().filter(|l| !l.tls).count(),
        GrowWhat::HttpsListeners => cfg.listeners.iter().filter(|l| l.tls).count(),
        GrowWhat::Routes => cfg.routes.len(),
        // Refused at parse for the run's own proxy (an external gateway's generator only).
        GrowWhat::GrpcRoutes => 0,
        GrowWhat::Matches => cfg
            .routes
            .iter()
            .filter(|r| r.path == g.path && r.headers.contains_key(&g.header))
            .count(),
        GrowWhat::UpstreamServers => cfg
            .upstream(upstream)
            .map_or(0, |u| t.group_size(&u.backends) as usize),
    };
    n as u32
}

/// Adds items `n..n+add` to the config (or the backend group) and says what to probe.
fn grow_step(
    t: &mut dyn Grower,
    g: &GrowSpec,
    n: u32,
    add: u32,
    upstream: &str,
    listener: Option<&str>,
) -> Result<Option<ReadyProbe>, StackError> {
    let grow = |why: &str| StackError::Grow(why.to_string());
    let mut cfg = t.served().config.clone().ok_or_else(|| grow("no proxy"))?;
    let last = n + add - 1;
    let host_of = |cfg: &ProxyConfig, l: &str| {
        cfg.listener(l)
            .and_then(|l| l.server_names.first().cloned())
            .unwrap_or_else(|| "localhost".into())
    };
    let probe = match g.what {
        GrowWhat::Routes | GrowWhat::Matches => {
            let l = listener
                .ok_or_else(|| grow("no plain HTTP listener"))?
                .to_string();
            for k in n..n + add {
                let mut r = if g.what == GrowWhat::Routes {
                    let mut r = Route::to_upstream(&format!("/route-{k}"), upstream);
                    r.path_match = PathMatch::Exact;
                    r
                } else {
                    let mut r = Route::to_upstream(&g.path, upstream);
                    r.headers.insert(g.header.clone(), format!("v{k}"));
                    r
                };
                r.name = Some(format!("grow-{}-{k}", g.what.name()));
                r.listener = Some(l.clone());
                cfg.routes.push(r);
            }
            let port = t
                .served()
                .ports
                .get(&l)
                .copied()
                .ok_or_else(|| grow("listener without a port"))?;
            let (path, header) = if g.what == GrowWhat::Routes {
                (format!("/route-{last}"), None)
            } else {
                (g.path.clone(), Some((g.header.clone(), format!("v{last}"))))
            };
            Some(ReadyProbe {
                url: format!("http://{}:{port}{path}", host_of(&cfg, &l)),
                addr: t.probe_addr(port)?,
                header,
                cacert: None,
            })
        }
        GrowWhat::Listeners | GrowWhat::HttpsListeners => {
            let tls = g.what == GrowWhat::HttpsListeners;
            if tls && t.served().tls.is_none() {
                return Err(grow("no certificate for HTTPS listeners"));
            }
            let names = cfg
                .listeners
                .iter()
                .find(|l| l.tls == tls)
                .or(cfg.listeners.first())
                .map(|l| l.server_names.clone())
                .unwrap_or_default();
            let mut last_port = 0;
            let mut last_name = String::new();
            for k in n..n + add {
                let name = format!("grow-{}-{k}", g.what.name());
                let port = t.add_listener_port(&name)?;
                cfg.listeners.push(Listener {
                    name: name.clone(),
                    tls,
                    server_names: names.clone(),
                    port: None,
                    http2: false,
                });
                let mut r = Route::to_upstream("/", upstream);
                r.name = Some(format!("{name}-root"));
                r.listener = Some(name.clone());
                cfg.routes.push(r);
                last_port = port;
                last_name = name;
            }
            let host = host_of(&cfg, &last_name);
            Some(ReadyProbe {
                url: format!(
                    "{}://{host}:{last_port}/",
                    if tls { "https" } else { "http" }
                ),
                addr: t.probe_addr(last_port)?,
                header: None,
                cacert: if tls {
                    t.served().tls.as_ref().map(|f| f.ca.clone())
                } else {
                    None
                },
            })
        }
        GrowWhat::UpstreamServers => {
            let group = cfg
                .upstream(upstream)
                .map(|u| u.backends.clone())
                .ok_or_else(|| StackError::Grow(format!("no upstream '{upstream}'")))?;
            t.add_backends(&group, add)?;
            None
        }
        GrowWhat::GrpcRoutes => {
            return Err(grow(
                "grpc_routes grow on an external Gateway API gateway only",
            ))
        }
    };
    t.served_mut().config = Some(cfg);
    Ok(probe)
}

fn grow_event(
    t_s: f64,
    g: &GrowSpec,
    from: u32,
    to: u32,
    t0: Instant,
    error: Option<String>,
) -> Event {
    Event {
        t_s,
        action: "grow".into(),
        detail: format!("{} {from} -> {to}", g.what.name()),
        duration_ms: t0.elapsed().as_secs_f64() * 1e3,
        error,
        limit: false,
    }
}

/// A request that tells whether a grown item answers.
struct ReadyProbe {
    url: String,
    /// Where it connects (the url's host is sent as Host and SNI).
    addr: SocketAddr,
    header: Option<(String, String)>,
    cacert: Option<PathBuf>,
}

impl ReadyProbe {
    fn describe(&self) -> String {
        match &self.header {
            Some((h, v)) => format!("{} ({h}: {v})", self.url),
            None => self.url.clone(),
        }
    }

    /// Asks every `poll` (from one request's start to the next one's) until 3 answers in a row
    /// are 200; returns the time from `t0` to the first of them.
    fn until_ready(
        &self,
        t0: Instant,
        timeout: Duration,
        poll: Duration,
        keep_going: &dyn Fn() -> bool,
    ) -> (Option<f64>, Option<String>) {
        let Some((host, port)) = host_port(&self.url) else {
            return (None, Some(format!("{}: no port", self.url)));
        };
        // The url's port is the listener's; the connection goes to `addr` (a port-forward's
        // local end may have another port), so the url carries the address's port.
        let url = self
            .url
            .replacen(&format!(":{port}"), &format!(":{}", self.addr.port()), 1);
        let mut cfg = match load::Config::new(&url) {
            Ok(c) => c,
            Err(e) => return (None, Some(e.to_string())),
        };
        if host.parse::<std::net::IpAddr>().is_err() {
            if let Ok(r) =
                load::Resolve::parse(&format!("{host}:{}:{}", self.addr.port(), self.addr.ip()))
            {
                cfg.resolve.push(r);
            }
        }
        // The probe goes to this run's listener only (a server name may be an IP address).
        if let Err(e) = crate::reach::own_target(&cfg, self.addr) {
            return (None, Some(e.to_string()));
        }
        if let Some((h, v)) = &self.header {
            cfg.headers.push((h.clone(), v.clone()));
        }
        cfg.cacert = self.cacert.clone();
        cfg.timeout = Duration::from_secs(1);
        let probe = match load::probe::Probe::new(&cfg) {
            Ok(p) => p,
            Err(e) => return (None, Some(e.to_string())),
        };
        let deadline = t0 + timeout;
        let mut streak: Option<(Instant, u32)> = None;
        let mut last = String::from("no answer");
        while Instant::now() < deadline && keep_going() {
            let at = Instant::now();
            match probe.fetch() {
                Ok(r) if r.status == 200 => {
                    let (first, k) = streak.unwrap_or((at, 0));
                    if k + 1 >= 3 {
                        return (Some(first.duration_since(t0).as_secs_f64() * 1e3), None);
                    }
                    streak = Some((first, k + 1));
                }
                Ok(r) => {
                    last = format!("status {}", r.status);
                    streak = None;
                }
                Err((kind, msg)) => {
                    last = format!("{}: {msg}", kind.name());
                    streak = None;
                }
            }
            std::thread::sleep((at + poll).saturating_duration_since(Instant::now()));
        }
        let why = if Instant::now() >= deadline {
            format!("not ready within {timeout:?}")
        } else {
            "the probe stopped first: the loads ended or the run was interrupted".to_string()
        };
        (None, Some(format!("{why} (last: {last})")))
    }
}

/// The host and the port written in `url`; `None` when it names no port.
fn host_port(url: &str) -> Option<(String, u16)> {
    let u = load::target::Url::parse(url).ok()?;
    u.explicit_port.then_some((u.host, u.port))
}

/// The growth's `pause` between two steps, cut short when the case stops.
pub(crate) fn pause(g: &GrowSpec, keep_going: &dyn Fn() -> bool) {
    let until = Instant::now() + g.pause.0;
    while Instant::now() < until && keep_going() {
        std::thread::sleep((until - Instant::now()).min(Duration::from_millis(20)));
    }
}
