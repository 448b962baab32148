//! Cross-reference and value checks of a [`ProxyConfig`], with messages that name the item, and
//! the placement of routes into (listener, host) servers that the checks and the renderers share.

use super::{Invalid, PathMatch, ProxyConfig, Route};
use std::collections::{BTreeMap, HashMap, HashSet};

/// One server block a listener renders: the listener, one of its names (or any host), and the
/// routes that land there, in config order.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Index into `listeners`.
    pub listener: usize,
    /// The server name, or `None` for a listener without names.
    pub host: Option<String>,
    /// Indices into `routes`.
    pub routes: Vec<usize>,
}

/// Where a route sits in a server and what it requires beyond its path: two routes with equal
/// keys in one server can never both be reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RouteKey {
    path_match: PathMatch,
    path: String,
    headers: Vec<(String, String)>,
    query: Vec<(String, String)>,
    method: Option<String>,
}

pub(crate) fn route_key(r: &Route) -> RouteKey {
    RouteKey {
        path_match: r.path_match,
        path: r.path.clone(),
        headers: r
            .headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect(),
        query: r
            .query
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        method: r.method.clone(),
    }
}

impl ProxyConfig {
    /// Checks names, cross-references and values nginx could not express. The error names the
    /// offending item (`route #4 (/tea): unknown upstream 'tea'`).
    pub fn validate(&self) -> Result<(), Invalid> {
        let bad = |m: String| Err(Invalid(m));
        if self.kind == super::ProxyKind::External || self.external.is_some() {
            return super::external::check_config(self);
        }
        if self.replicas == 0 {
            return bad("proxy.replicas must be at least 1".into());
        }
        if self.worker_processes == 0 {
            return bad("proxy.worker_processes must be at least 1".into());
        }
        if self.worker_connections < 16 {
            return bad("proxy.worker_connections must be at least 16".into());
        }
        if self.keepalive_requests == 0 {
            return bad("proxy.keepalive_requests must be at least 1".into());
        }
        if self.listeners.is_empty() {
            return bad("proxy has no listeners ([[proxy.listeners]])".into());
        }
        unique("listener", self.listeners.iter().map(|l| l.name.as_str()))?;
        unique("upstream", self.upstreams.iter().map(|u| u.name.as_str()))?;
        unique(
            "rate limit",
            self.rate_limits.iter().map(|r| r.name.as_str()),
        )?;
        self.check_listeners()?;
        self.check_upstreams()?;
        self.check_rate_limits()?;
        for (i, r) in self.routes.iter().enumerate() {
            self.check_route(i, r)?;
        }
        for p in self.placements() {
            let mut seen: HashMap<_, usize> = HashMap::new();
            for &i in &p.routes {
                if let Some(&first) = seen.get(&route_key(&self.routes[i])) {
                    let where_ = match &p.host {
                        Some(h) => {
                            format!("listener '{}' host '{h}'", self.listeners[p.listener].name)
                        }
                        None => format!("listener '{}'", self.listeners[p.listener].name),
                    };
                    return bad(format!(
                        "{} repeats {} on {where_} (same path, match and conditions), so it could never be chosen",
                        self.routes[i].label(i),
                        self.routes[first].label(first)
                    ));
                }
                seen.insert(route_key(&self.routes[i]), i);
            }
        }
        Ok(())
    }

    /// The server blocks the listeners render and the routes each holds: one server per
    /// (listener, server name), or one per listener without names. Assumes a valid config.
    pub fn placements(&self) -> Vec<Placement> {
        let mut out = Vec::new();
        for (li, l) in self.listeners.iter().enumerate() {
            let hosts: Vec<Option<String>> = if l.server_names.is_empty() {
                vec![None]
            } else {
                l.server_names.iter().cloned().map(Some).collect()
            };
            for host in hosts {
                let routes = self
                    .routes
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.listener.as_deref().is_none_or(|n| n == l.name))
                    .filter(|(_, r)| match (&r.host, &host) {
                        (None, _) => true,
                        (Some(rh), Some(h)) => rh == h,
                        (Some(_), None) => false,
                    })
                    .map(|(i, _)| i)
                    .collect();
                out.push(Placement {
                    listener: li,
                    host,
                    routes,
                });
            }
        }
        out
    }

    fn check_listeners(&self) -> Result<(), Invalid> {
        let mut fixed: BTreeMap<u16, (&str, bool)> = BTreeMap::new();
        for l in &self.listeners {
            name_ok("listener", &l.name)?;
            let mut names = HashSet::new();
            for n in &l.server_names {
                if n.is_empty() || n.bytes().any(|b| b <= b' ' || b"\"';{}\\$#".contains(&b)) {
                    return Err(Invalid(format!(
                        "listener '{}': server name '{n}' is not a host name",
                        l.name
                    )));
                }
                if !names.insert(n) {
                    return Err(Invalid(format!(
                        "listener '{}': server name '{n}' is listed twice",
                        l.name
                    )));
                }
            }
            if let Some(p) = l.port {
                if p == 0 {
                    return Err(Invalid(format!("listener '{}': port 0", l.name)));
                }
                if let Some((other, tls)) = fixed.insert(p, (&l.name, l.tls)) {
                    if tls != l.tls {
                        return Err(Invalid(format!(
                            "listeners '{other}' and '{}' share port {p} but only one of them is TLS",
                            l.name
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    fn check_upstreams(&self) -> Result<(), Invalid> {
        for u in &self.upstreams {
            name_ok("upstream", &u.name)?;
            let bad = |m: &str| Err(Invalid(format!("upstream '{}': {m}", u.name)));
            if u.backends.trim().is_empty() {
                return bad("backends (the backend group) is empty");
            }
            if u.keepalive_requests == Some(0) {
                return bad("keepalive_requests must be at least 1");
            }
            if u.next_upstream_tries == Some(0) {
                // nginx reads 0 as "unlimited"; say so rather than guess.
                return bad(
                    "next_upstream_tries = 0 means unlimited in nginx; leave it unset instead",
                );
            }
            if let Some(nu) = &u.next_upstream {
                use super::NextUpstream::Off;
                if nu.is_empty() {
                    return bad("next_upstream is empty (write [\"off\"] to disable retries)");
                }
                if nu.contains(&Off) && nu.len() > 1 {
                    return bad("next_upstream 'off' cannot be combined with other conditions");
                }
            }
            if let super::Lb::Hash { key, .. } = &u.lb {
                if key.contains(['"', '\'', ';', '{', '}', '\n']) {
                    return bad("lb hash key contains quotes, braces or ';'");
                }
            }
        }
        Ok(())
    }

    fn check_rate_limits(&self) -> Result<(), Invalid> {
        for r in &self.rate_limits {
            name_ok("rate limit", &r.name)?;
            let bad = |m: String| Err(Invalid(format!("rate limit '{}': {m}", r.name)));
            if !(r.rate.0.is_finite() && r.rate.0 > 0.0) {
                return bad(format!("rate {} r/s must be positive", r.rate.0));
            }
            if !(400..=599).contains(&r.status) {
                return bad(format!("status {} must lie in 400-599", r.status));
            }
            if r.nodelay && r.delay.is_some() {
                return bad(
                    "nodelay and delay exclude each other (nodelay is delay = burst)".into(),
                );
            }
            if let Some(d) = r.delay {
                if d > r.burst {
                    return bad(format!("delay {d} exceeds burst {}", r.burst));
                }
            }
            if r.key.trim().is_empty() || r.key.contains(['"', '\'', ';', '{', '}', '\n']) {
                return bad(format!(
                    "key '{}' is empty or contains quotes, braces or ';'",
                    r.key
                ));
            }
            if r.zone_size.0 < 32 * 1024 {
                return bad("zone_size must be at least 32k".into());
            }
        }
        Ok(())
    }

    /// Route `i`: its path, where it sends (an upstream of the model or a return), what a
    /// WebSocket or gRPC route needs, its rate limit, listener and host, and its matches.
    fn check_route(&self, i: usize, r: &Route) -> Result<(), Invalid> {
        let bad = |m: String| Err(Invalid(format!("{}: {m}", r.label(i))));
        if !r.path.starts_with('/') {
            return bad("path must start with '/'".into());
        }
        if let Some(c) = r.path.chars().find(|c| !path_char(*c)) {
            return bad(format!(
                "path contains '{}', which a location cannot hold unquoted",
                c.escape_default()
            ));
        }
        match (&r.upstream, r.return_status) {
            (Some(_), Some(_)) => return bad("has both upstream and return; pick one".into()),
            (None, None) => return bad("needs an upstream or a return status".into()),
            (Some(u), None) if self.upstream(u).is_none() => {
                return bad(format!("unknown upstream '{u}'"))
            }
            (None, Some(s)) if !(100..=599).contains(&s) => {
                return bad(format!("return status {s} must lie in 100-599"))
            }
            _ => {}
        }
        if r.body.is_some() && r.return_status.is_none() {
            return bad("body is only sent with return".into());
        }
        if r.websocket && r.grpc {
            return bad("websocket and grpc: a route carries one or the other".into());
        }
        if (r.websocket || r.grpc) && r.return_status.is_some() {
            return bad(format!(
                "{} needs an upstream to tunnel to, not a return",
                if r.grpc { "grpc" } else { "websocket" }
            ));
        }
        if r.grpc {
            if let Some(u) = r.upstream.as_deref().and_then(|u| self.upstream(u)) {
                if !u.http2 {
                    return bad(format!(
                        "grpc needs HTTP/2 to the backends: set http2 = true on upstream '{}'",
                        u.name
                    ));
                }
            }
            let plain: Vec<&str> = self
                .listeners
                .iter()
                .filter(|l| r.listener.as_deref().is_none_or(|n| n == l.name))
                .filter(|l| !l.http2)
                .map(|l| l.name.as_str())
                .collect();
            if !plain.is_empty() {
                return bad(format!(
                    "grpc needs HTTP/2 from the clients: set http2 = true on listener '{}' (or name the route's listener)",
                    plain.join("', '")
                ));
            }
        }
        if let Some(b) = &r.body {
            if b.contains('\n') {
                return bad("body must be a single line".into());
            }
        }
        if let Some(l) = &r.rate_limit {
            if self.rate_limit(l).is_none() {
                return bad(format!("unknown rate limit '{l}'"));
            }
            if r.return_status.is_some() {
                return bad(
                    "a rate limit has no effect on a return route (nginx runs return before limit_req); route it to an upstream"
                        .into(),
                );
            }
        }
        if let Some(l) = &r.listener {
            if self.listener(l).is_none() {
                return bad(format!("unknown listener '{l}'"));
            }
        }
        if let Some(h) = &r.host {
            let scope: Vec<_> = self
                .listeners
                .iter()
                .filter(|l| r.listener.as_deref().is_none_or(|n| n == l.name))
                .collect();
            if !scope.iter().any(|l| l.server_names.contains(h)) {
                return bad(format!(
                    "host '{h}' is not a server name of any listener it applies to"
                ));
            }
        }
        if let Some(why) = match_problem(r) {
            return bad(why);
        }
        Ok(())
    }
}

/// Why a route's request matches (headers, query arguments, method) cannot be written into
/// a proxy's config; `None` if they can.
fn match_problem(r: &Route) -> Option<String> {
    let mut lower = HashSet::new();
    for (name, value) in &r.headers {
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Some(format!(
                "header name '{name}' must be letters, digits and '-' (nginx ignores headers with '_')"
            ));
        }
        if !lower.insert(name.to_ascii_lowercase()) {
            return Some(format!(
                "header '{name}' is listed twice (names are case-insensitive)"
            ));
        }
        if let Some(why) = value_problem(&format!("header '{name}'"), value) {
            return Some(why);
        }
    }
    for (name, value) in &r.query {
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Some(format!(
                "query argument '{name}' must be letters, digits and '_'"
            ));
        }
        if let Some(why) = value_problem(&format!("query argument '{name}'"), value) {
            return Some(why);
        }
    }
    if let Some(m) = &r.method {
        if m.is_empty() || !m.bytes().all(|b| b.is_ascii_uppercase()) {
            return Some(format!(
                "method '{m}' must be upper-case letters (GET, POST...)"
            ));
        }
    }
    None
}

/// Why `v` cannot be the value of `what` in nginx's config; `None` if it can.
fn value_problem(what: &str, v: &str) -> Option<String> {
    if v.is_empty() {
        return Some(format!("{what} has an empty value"));
    }
    if v.chars().any(|c| c.is_control()) {
        return Some(format!("{what} value contains a control character"));
    }
    None
}

fn path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "/-._~!*+,=:@%&()".contains(c)
}

fn name_ok(what: &str, name: &str) -> Result<(), Invalid> {
    let ok = !name.is_empty()
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Invalid(format!(
            "{what} name '{name}' must start with a letter or digit and hold only letters, digits, '_', '.' and '-'"
        )))
    }
}

fn unique<'a>(what: &str, names: impl Iterator<Item = &'a str>) -> Result<(), Invalid> {
    let mut seen = HashSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(Invalid(format!("{what} '{n}' is defined twice")));
        }
    }
    Ok(())
}
