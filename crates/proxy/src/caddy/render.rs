//! Renders the config model into one Caddy JSON config for one replica.
//!
//! Layout: one http server per listener port (listeners sharing a port share it); its routes
//! stamp `X-Config-Generation` (and, in a config of several replicas, close connections while
//! the replica drains), then one route per group of server names with the same routes
//! (a `host` matcher) holding a subroute, then the first server name's subroute again without a
//! matcher (nginx's default server: the first on the port answers unknown hosts). A subroute
//! lists the model's routes as nginx would pick them: exact paths first, then prefixes longest
//! first; within one path the conditional routes in config order, then the path's fallback (or
//! a 404, since nginx never falls back to a shorter location). Proxying routes become
//! `reverse_proxy` handlers, `return` routes `static_response`. An admin server on its own port
//! answers `/generation`; Caddy's admin API listens on the control port.
//!
//! JSON has no comments: every object rendered from a model item carries an `@id` of the form
//! `pbN:ITEM` (N keeps ids unique, as Caddy requires), which [`Driver::item_at`](crate::driver::Driver::item_at) reads back when
//! `caddy validate` names a server, route or handler.

use super::logs::UPSTREAM_HEADER;
use super::RenderContext;
use crate::admin::{GENERATION_HEADER, GENERATION_PATH};
use crate::config::{
    Lb, LogLevel, NextUpstream, PathMatch, Placement, ProxyConfig, Route, Upstream,
};
use crate::Error;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::time::Duration;

/// The logger name of the access log (`http.log.access.<name>`).
pub(crate) const ACCESS_LOGGER: &str = "pb_access";

/// The key of the admin server (listener names cannot hold ':').
pub(crate) const ADMIN_SERVER: &str = "pb:admin";

/// The file in the replica directory whose presence makes every answer close its connection.
pub(crate) const DRAIN_FILE: &str = "draining";

/// The `@id` prefix that carries GOMAXPROCS (the model's `worker_processes`) to the replica.
pub(crate) const PROCS_ID: &str = "pb:gomaxprocs=";

/// Renders `cfg` for one replica. Fails when the model is inconsistent, uses what Caddy cannot
/// express, or the context lacks a port, a backend group, a control port or a certificate.
pub fn render(cfg: &ProxyConfig, ctx: &RenderContext) -> Result<String, Error> {
    cfg.validate()?;
    if let Some(l) = cfg.rate_limits.first() {
        return Err(Error::Invalid(format!(
            "rate limit '{}': Caddy 2.6's standard build has no rate limiter",
            l.name
        )));
    }
    if !(cfg.raw.main.trim().is_empty()
        && cfg.raw.events.trim().is_empty()
        && cfg.raw.http.trim().is_empty()
        && cfg.raw.server.trim().is_empty()
        && cfg.raw.location.trim().is_empty())
    {
        return Err(Error::Invalid(
            "[proxy.raw] holds nginx snippets, which Caddy cannot read".into(),
        ));
    }
    if cfg.keepalive_requests != ProxyConfig::default().keepalive_requests {
        return Err(Error::Invalid(
            "keepalive_requests: Go's HTTP server, which Caddy uses, has no bound on requests per \
             client connection"
                .into(),
        ));
    }
    if ctx.admin_port == 0 {
        return Err(Error::Invalid("the run assigned no admin port".into()));
    }
    if ctx.control_port == 0 || ctx.control_port == ctx.admin_port {
        return Err(Error::Invalid(
            "Caddy needs a control port of its own for its admin API (RenderContext.control_port)"
                .into(),
        ));
    }
    let mut r = Renderer { cfg, ctx, ids: 0 };
    r.config()
}

struct Renderer<'a> {
    cfg: &'a ProxyConfig,
    ctx: &'a RenderContext,
    ids: usize,
}

impl Renderer<'_> {
    /// A unique `@id` for an object rendered from model item `item`.
    fn id(&mut self, item: &str) -> Value {
        self.ids += 1;
        Value::String(format!("pb{}:{item}", self.ids))
    }

    fn path(&self, name: &str) -> String {
        self.ctx.prefix.join(name).to_string_lossy().into_owned()
    }

    fn port_of(&self, li: usize) -> Result<u16, Error> {
        self.ctx.port_of(&self.cfg.listeners[li])
    }

    fn gen_route(&self) -> Value {
        json!({"handle": [{"handler": "headers", "response": {"set": {
            GENERATION_HEADER: [self.ctx.generation.to_string()]}}}]})
    }

    /// While the replica directory holds [`DRAIN_FILE`], every answer says `Connection: close`:
    /// the replica's driver drains keep-alive connections that way before a graceful stop, so
    /// that the shutdown finds no idle connection to close under a request the client has
    /// already sent (see `caddy::DRAIN`).
    fn drain_route(&self) -> Value {
        json!({"match": [{"file": {"root": self.ctx.prefix.to_string_lossy(),
            "try_files": [format!("/{DRAIN_FILE}")]}}],
            "handle": [{"handler": "headers", "response": {"set": {"Connection": ["close"]}}}]})
    }

    fn config(&mut self) -> Result<String, Error> {
        let cfg = self.cfg;
        let mut servers = Map::new();
        let ports = self.ports()?;
        let placements = cfg.placements();
        for (port, members) in &ports {
            let first = &cfg.listeners[members[0]];
            let server = self.server(*port, members, &placements)?;
            servers.insert(first.name.clone(), server);
        }
        servers.insert(ADMIN_SERVER.to_string(), self.admin_server()?);
        let mut http = json!({"servers": servers});
        if let Some(t) = cfg.worker_shutdown_timeout {
            http["grace_period"] = nanos(t.0);
        }
        let mut apps = json!({"http": http});
        if let (Some(tls), Some(l)) = (&self.ctx.tls, cfg.listeners.iter().find(|l| l.tls)) {
            apps["tls"] = json!({
                "@id": self.id(&format!("listener.{}", l.name)),
                "certificates": {"load_files": [{
                    "certificate": tls.cert.to_string_lossy(),
                    "key": tls.key.to_string_lossy(),
                    "tags": ["pb"],
                }]},
                "disable_ocsp_stapling": true,
            });
        }
        let logs = self.logs();
        let doc = json!({
            "@id": format!("{PROCS_ID}{}", cfg.worker_processes),
            "admin": {
                "listen": self.ctx.control_listen.clone().unwrap_or_else(|| format!("127.0.0.1:{}", self.ctx.control_port)),
                "config": {"persist": false},
            },
            "storage": {"module": "file_system", "root": self.path("caddy-data")},
            "logging": {"logs": logs},
            "apps": apps,
        });
        serde_json::to_string_pretty(&doc)
            .map_err(|e| Error::Invalid(format!("cannot write the Caddy config: {e}")))
    }

    /// The listeners by port, in order of first appearance: one Caddy server each. Fails on a
    /// port the replica keeps for itself, a TLS listener without a certificate, or a port
    /// shared by a TLS and a plain listener.
    fn ports(&self) -> Result<Vec<(u16, Vec<usize>)>, Error> {
        let cfg = self.cfg;
        let mut ports: Vec<(u16, Vec<usize>)> = Vec::new();
        for (li, l) in cfg.listeners.iter().enumerate() {
            let port = self.port_of(li)?;
            if port == self.ctx.admin_port || port == self.ctx.control_port {
                return Err(Error::Invalid(format!(
                    "listener '{}' uses port {port}, which is the replica's admin or control port",
                    l.name
                )));
            }
            if l.tls && self.ctx.tls.is_none() {
                return Err(Error::Invalid(format!(
                    "listener '{}' is TLS but the run provided no certificate",
                    l.name
                )));
            }
            match ports.iter_mut().find(|(p, _)| *p == port) {
                Some((_, v)) => {
                    if cfg.listeners[v[0]].tls != l.tls {
                        return Err(Error::Invalid(format!(
                            "listeners '{}' and '{}' share port {port} but only one of them is TLS",
                            cfg.listeners[v[0]].name, l.name
                        )));
                    }
                    v.push(li)
                }
                None => ports.push((port, vec![li])),
            }
        }
        Ok(ports)
    }

    /// The server of one port (its listeners `members`): the generation and drain routes, a
    /// route per host group, the default server's routes, and the server's own settings.
    fn server(
        &mut self,
        port: u16,
        members: &[usize],
        placements: &[Placement],
    ) -> Result<Value, Error> {
        let cfg = self.cfg;
        let first = &cfg.listeners[members[0]];
        let mut routes = vec![self.gen_route()];
        // The drain costs a file lookup per request (measured: ~15-20 us of Caddy's CPU per
        // request at GOMAXPROCS=1, about a fifth), so only a config that runs several
        // replicas, which a scale-down stops one by one, carries it.
        if cfg.replicas > 1 {
            routes.push(self.drain_route());
        }
        let on_port: Vec<_> = placements
            .iter()
            .filter(|p| members.contains(&p.listener))
            .collect();
        let groups = host_groups(&on_port);
        for (li, names, members) in &groups {
            let item = format!("listener.{}", cfg.listeners[*li].name);
            let sub = self.subroute(members)?;
            routes.push(json!({"@id": self.id(&item), "match": [{"host": names}],
                "handle": [sub], "terminal": true}));
        }
        if let Some(default) = on_port.first() {
            let item = format!("listener.{}", cfg.listeners[default.listener].name);
            let sub = self.subroute(&default.routes)?;
            routes.push(json!({"@id": self.id(&item), "handle": [sub], "terminal": true}));
        }
        let skip = https_skip(&groups);
        let mut server = json!({
            "@id": self.id(&format!("listener.{}", first.name)),
            "listen": [self.ctx.listen_on(port)],
            "automatic_https": {"skip": skip, "disable_redirects": true},
            // h2c (prior knowledge) only when a plain listener asks for HTTP/2; over TLS,
            // h2 by ALPN is Caddy's default.
            "protocols": if first.http2 && !first.tls {
                json!(["h1", "h2", "h2c"])
            } else {
                json!(["h1", "h2"])
            },
            "idle_timeout": nanos(cfg.keepalive_timeout.0),
            "routes": routes,
        });
        if first.tls {
            server["automatic_https"] = json!({"disable": true});
        }
        if cfg.access_log {
            server["logs"] = json!({"default_logger_name": ACCESS_LOGGER});
        }
        if first.tls {
            let names = cfg.tls_names();
            let mut policy = json!({"certificate_selection": {"any_tag": ["pb"]}});
            if let Some(n) = names.first() {
                policy["default_sni"] = json!(n);
            }
            server["tls_connection_policies"] = json!([policy]);
        }
        Ok(server)
    }

    /// The `logging.logs` object: Caddy's own log at the model's level, and the access log
    /// when the model keeps one; to files in the replica directory or to stdio.
    fn logs(&self) -> Value {
        let cfg = self.cfg;
        let level = match cfg.error_log_level {
            LogLevel::Info | LogLevel::Notice => "INFO",
            LogLevel::Warn => "WARN",
            LogLevel::Error | LogLevel::Crit => "ERROR",
        };
        let access_name = format!("http.log.access.{ACCESS_LOGGER}");
        // In a container the access lines go to stdout and the rest to stderr, read through the
        // platform's log API.
        let writer = |file: &str, stdio: &str| {
            if self.ctx.stdio_logs {
                json!({"output": stdio})
            } else {
                json!({"output": "file", "filename": self.path(file), "roll": false})
            }
        };
        let mut logs = json!({"default": {
            "writer": writer("caddy.log", "stderr"),
            "encoder": {"format": "json"},
            "level": level,
            "exclude": [access_name],
        }});
        if cfg.access_log {
            logs[ACCESS_LOGGER] = json!({
                "writer": writer("access.log", "stdout"),
                "encoder": {"format": "json"},
                "level": "DEBUG",
                "include": [access_name],
            });
        }
        logs
    }

    fn admin_server(&self) -> Result<Value, Error> {
        Ok(json!({
            "listen": [self.ctx.admin_address()?],
            "automatic_https": {"skip": [], "disable_redirects": true},
            "protocols": ["h1"],
            "routes": [
                self.gen_route(),
                {"match": [{"path": [GENERATION_PATH]}], "handle": [{"handler": "static_response",
                    "status_code": 200, "body": format!("{}\n", self.ctx.generation)}],
                    "terminal": true},
                {"handle": [{"handler": "static_response", "status_code": 404}]},
            ],
        }))
    }

    /// A `subroute` handler with the routes of one server (listener, host) in nginx's order.
    fn subroute(&mut self, members: &[usize]) -> Result<Value, Error> {
        let cfg = self.cfg;
        let mut groups: Vec<((PathMatch, &str), Vec<usize>)> = Vec::new();
        let mut index: HashMap<(PathMatch, &str), usize> = HashMap::new();
        for &i in members {
            let r = &cfg.routes[i];
            let key = (r.path_match, r.path.as_str());
            match index.get(&key) {
                Some(&g) => groups[g].1.push(i),
                None => {
                    index.insert(key, groups.len());
                    groups.push((key, vec![i]));
                }
            }
        }
        // Exact paths first, then the longest prefix wins (stable: config order on ties).
        groups.sort_by_key(|((m, p), _)| (*m == PathMatch::Prefix, std::cmp::Reverse(p.len())));
        let mut routes = Vec::new();
        for ((m, path), rs) in &groups {
            for &i in rs.iter().filter(|&&i| cfg.routes[i].has_conditions()) {
                routes.push(self.route(i, true)?);
            }
            match rs.iter().find(|&&i| !cfg.routes[i].has_conditions()) {
                Some(&i) => routes.push(self.route(i, false)?),
                None => {
                    // nginx answers 404 when no condition holds: no shorter location is tried.
                    let mut nf = json!({"@id": self.id(&format!("route.{}", rs[0])),
                        "handle": [not_found()], "terminal": true});
                    if let Some(pm) = path_matcher(*m, path) {
                        nf["match"] = json!([pm]);
                    }
                    routes.push(nf);
                }
            }
        }
        if !index.contains_key(&(PathMatch::Prefix, "/")) {
            routes.push(json!({"handle": [not_found()], "terminal": true}));
        }
        Ok(json!({"handler": "subroute", "routes": routes}))
    }

    /// One model route: its matchers (path, and the conditions when `conditions`) and action.
    fn route(&mut self, i: usize, conditions: bool) -> Result<Value, Error> {
        let r = &self.cfg.routes[i];
        let item = format!("route.{i}");
        let mut set = match path_matcher(r.path_match, &r.path) {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        if conditions {
            let mut plain = Map::new();
            let mut re = Map::new();
            for (k, v) in &r.headers {
                if v.contains('*') {
                    // `*` is a wildcard in Caddy's header matcher: compare literally.
                    re.insert(
                        k.clone(),
                        json!({"pattern": format!("^{}$", regex_escape(v))}),
                    );
                } else {
                    plain.insert(k.clone(), json!([v]));
                }
            }
            if !plain.is_empty() {
                set.insert("header".into(), Value::Object(plain));
            }
            if !re.is_empty() {
                set.insert("header_regexp".into(), Value::Object(re));
            }
            if !r.query.is_empty() {
                let q: Map<String, Value> = r
                    .query
                    .iter()
                    .map(|(k, v)| (k.clone(), json!([v])))
                    .collect();
                set.insert("query".into(), Value::Object(q));
            }
            if let Some(m) = &r.method {
                set.insert("method".into(), json!([m]));
            }
        }
        let action = self.action(r)?;
        let mut route = json!({"@id": self.id(&item), "handle": [action], "terminal": true});
        if !set.is_empty() {
            route["match"] = json!([set]);
        }
        Ok(route)
    }

    fn action(&mut self, r: &Route) -> Result<Value, Error> {
        if let Some(u) = &r.upstream {
            let u = self.cfg.upstream(u).expect("validated");
            return self.reverse_proxy(u);
        }
        let status = r.return_status.expect("validated: upstream or return");
        let mut h = json!({"handler": "static_response", "status_code": status});
        if let Some(b) = &r.body {
            if (300..400).contains(&status) {
                h["headers"] = json!({"Location": [escape_placeholders(b)]});
            } else {
                h["body"] = json!(escape_placeholders(b));
            }
        }
        Ok(h)
    }

    fn reverse_proxy(&mut self, u: &Upstream) -> Result<Value, Error> {
        let addrs = self.ctx.groups.get(&u.backends).ok_or_else(|| {
            Error::Invalid(format!(
                "upstream '{}': the run provided no backend group '{}'",
                u.name, u.backends
            ))
        })?;
        let mut upstreams = Vec::new();
        for a in addrs {
            self.ctx.check_upstream(&u.name, a)?;
            upstreams.push(json!({"dial": a.to_string()}));
        }
        if upstreams.is_empty() {
            // An empty group: nothing listens on port 1, so Caddy answers 502.
            upstreams.push(json!({"dial": "127.0.0.1:1"}));
        }
        let mut lb = json!({"selection_policy": selection_policy(u)?});
        let retries_off = u
            .next_upstream
            .as_ref()
            .is_some_and(|n| n.contains(&NextUpstream::Off));
        if !retries_off {
            // nginx tries each server once by default; Caddy does not retry unless told.
            let tries = match u.next_upstream_tries {
                Some(n) if n > 0 => n as usize,
                _ => upstreams.len(),
            };
            if tries > 1 {
                lb["retries"] = json!(tries - 1);
            }
            if let Some(t) = u.next_upstream_timeout {
                if !t.0.is_zero() {
                    lb["try_duration"] = nanos(t.0);
                    // Caddy would pause 250 ms between attempts; nginx passes on at once.
                    lb["try_interval"] = json!(1_000_000);
                }
            }
        }
        let mut transport = json!({"protocol": "http"});
        if u.keepalive > 0 {
            let mut ka = json!({"enabled": true, "max_idle_conns_per_host": u.keepalive});
            if let Some(t) = u.keepalive_timeout {
                ka["idle_timeout"] = nanos(t.0);
            }
            transport["keep_alive"] = ka;
        } else {
            // As nginx without `keepalive`: a new connection per request.
            transport["keep_alive"] = json!({"enabled": false});
        }
        if let Some(t) = u.connect_timeout {
            transport["dial_timeout"] = nanos(t.0);
        }
        if let Some(t) = u.read_timeout {
            transport["read_timeout"] = nanos(t.0);
        }
        if let Some(t) = u.send_timeout {
            transport["write_timeout"] = nanos(t.0);
        }
        if u.http2 {
            // h2c with prior knowledge: the backends are plain HTTP.
            transport["versions"] = json!(["h2c"]);
        }
        let mut h = json!({
            "@id": self.id(&format!("upstream.{}", u.name)),
            "handler": "reverse_proxy",
            "upstreams": upstreams,
            "load_balancing": lb,
            "transport": transport,
            "headers": {
                "request": {"set": {"X-Request-Id": ["{http.request.uuid}"]}},
                "response": {"set": {UPSTREAM_HEADER: ["{http.reverse_proxy.upstream.hostport}"]}},
            },
        });
        // nginx's passive health defaults: max_fails=1 fail_timeout=10s; max_fails=0 turns it off.
        let max_fails = u.max_fails.unwrap_or(1);
        if max_fails > 0 {
            let window = u.fail_timeout.map_or(Duration::from_secs(10), |d| d.0);
            if !window.is_zero() {
                h["health_checks"] = json!({"passive": {
                    "max_fails": max_fails, "fail_duration": nanos(window)}});
            }
        }
        Ok(h)
    }
}

/// The named placements of one port grouped by listener and routes: server names with the same
/// routes share one host matcher.
fn host_groups<'p>(on_port: &[&'p Placement]) -> Vec<(usize, Vec<String>, &'p Vec<usize>)> {
    let mut groups: Vec<(usize, Vec<String>, &Vec<usize>)> = Vec::new();
    for p in on_port.iter().filter(|p| p.host.is_some()) {
        let host = p.host.clone().expect("filtered");
        match groups
            .iter_mut()
            .find(|(li, _, r)| *li == p.listener && **r == p.routes)
        {
            Some((_, names, _)) => names.push(host),
            None => groups.push((p.listener, vec![host], &p.routes)),
        }
    }
    groups
}

/// The names a plain server's automatic HTTPS skips: every name of its host matchers, as
/// written and lowercased, each once.
fn https_skip(groups: &[(usize, Vec<String>, &Vec<usize>)]) -> Vec<String> {
    // Automatic HTTPS: off for a TLS server (Caddy warns at each load that it is); a
    // plain server skips every name its host matchers hold (as written and as Caddy
    // lowercases them), so that no certificate is managed and nothing redirects, without
    // that warning.
    let mut skip: Vec<String> = Vec::new();
    for (_, names, _) in groups {
        for n in names {
            for v in [n.clone(), n.to_ascii_lowercase()] {
                if !skip.contains(&v) {
                    skip.push(v);
                }
            }
        }
    }
    skip
}

/// The load-balancing policy of an upstream, or why Caddy 2.6 cannot express it.
fn selection_policy(u: &Upstream) -> Result<Value, Error> {
    Ok(match &u.lb {
        Lb::RoundRobin => json!({"policy": "round_robin"}),
        Lb::LeastConn => json!({"policy": "least_conn"}),
        Lb::Random => json!({"policy": "random"}),
        Lb::RandomTwoLeastConn => json!({"policy": "random_choose", "choose": 2}),
        Lb::IpHash => json!({"policy": "ip_hash"}),
        Lb::Hash { key, .. } => {
            let k = key.trim();
            if k == "$request_uri" {
                json!({"policy": "uri_hash"})
            } else if let Some(h) = k.strip_prefix("$http_").filter(|h| {
                !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            }) {
                json!({"policy": "header", "field": h.replace('_', "-")})
            } else {
                return Err(Error::Invalid(format!(
                    "upstream '{}': Caddy 2.6 can hash only $request_uri or one request header \
                     ($http_NAME), not '{key}'",
                    u.name
                )));
            }
        }
    })
}

/// The path matcher of a route (case-sensitive, as nginx's), or `None` for the prefix `/`.
fn path_matcher(m: PathMatch, path: &str) -> Option<Value> {
    let pattern = match m {
        PathMatch::Prefix if path == "/" => return None,
        PathMatch::Prefix => format!("^{}", regex_escape(path)),
        PathMatch::Exact => format!("^{}$", regex_escape(path)),
    };
    Some(json!({"path_regexp": {"pattern": pattern}}))
}

fn not_found() -> Value {
    json!({"handler": "static_response", "status_code": 404})
}

/// A duration as Caddy reads it in JSON: integer nanoseconds.
fn nanos(d: Duration) -> Value {
    json!(d.as_nanos() as u64)
}

/// Escapes a literal for Go's regexp syntax (`regexp.QuoteMeta`).
fn regex_escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len() + 8);
    for c in v.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            s.push('\\');
        }
        s.push(c);
    }
    s
}

/// Escapes `{` and `}` so that Caddy sends the text as written instead of expanding
/// placeholders.
fn escape_placeholders(s: &str) -> String {
    s.replace('{', "\\{").replace('}', "\\}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_escape_for_go_regexps_and_caddy_placeholders() {
        assert_eq!(regex_escape("/a.b(c)*"), "/a\\.b\\(c\\)\\*");
        assert_eq!(escape_placeholders("x {y}"), "x \\{y\\}");
        assert_eq!(path_matcher(PathMatch::Prefix, "/"), None);
        assert_eq!(
            path_matcher(PathMatch::Exact, "/a.b"),
            Some(json!({"path_regexp": {"pattern": "^/a\\.b$"}}))
        );
        assert_eq!(nanos(Duration::from_millis(1500)), json!(1_500_000_000u64));
    }
}
