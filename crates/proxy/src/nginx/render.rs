//! Renders the config model into one nginx.conf for one replica.
//!
//! Layout: one `server` per (listener, server name); routes become locations. A path whose routes
//! carry header/query/method conditions renders as a location that jumps (`error_page 418 =
//! $var; return 418;`) to a named location picked by `map`s: each run of consecutive routes with
//! the same condition keys is one map whose regex entries are tried in order (first match wins).
//! One map defaults to the path's fallback route (or 404); several are tried one after the other
//! with `if`, never by nesting map variables, because nginx refuses to evaluate variables nested
//! 100 deep. This is pure nginx (no njs) and a path may hold tens of thousands of matches. Every
//! server and location stamps `X-Config-Generation`, and an admin server on its own port answers
//! the generation and `stub_status`.

use super::{nginx_rate, nginx_size, nginx_time, quote, RenderContext, GENERATION_HEADER};
use crate::config::Lb;
use crate::config::{PathMatch, ProxyConfig, Route, Upstream};
use crate::Error;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use units::Dur;

/// Renders `cfg` for one replica. Fails when the model is inconsistent or the context lacks a
/// port, a backend group or a certificate the model needs.
pub fn render(cfg: &ProxyConfig, ctx: &RenderContext) -> Result<String, Error> {
    cfg.validate()?;
    let mut r = Renderer::new(cfg, ctx);
    let servers = r.servers()?;
    let mut out = String::with_capacity(servers.len() + 16 * 1024);
    r.main(&mut out);
    r.http_head(&mut out)?;
    r.upstreams(&mut out)?;
    out.push_str(&r.maps);
    out.push_str(&servers);
    r.admin(&mut out)?;
    out.push_str("}\n");
    Ok(out)
}

/// What a route does once chosen; routes with equal actions share a named location.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Action {
    Proxy {
        upstream: String,
        limit: Option<String>,
        tunnel: Tunnel,
    },
    Return {
        status: u16,
        body: Option<String>,
    },
    NotFound,
}

/// What a proxying route carries beyond plain requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Tunnel {
    /// Plain HTTP (`proxy_pass`).
    Http,
    /// WebSocket upgrades passed on (`proxy_pass` with `Upgrade` and `Connection`).
    WebSocket,
    /// gRPC (`grpc_pass` over h2c).
    Grpc,
}

/// The variable a websocket route sends as `Connection`: `upgrade` when the client asked for
/// an upgrade, else empty (the upstream connection's keep-alive as without the route flag).
const CONNECTION_UPGRADE: &str = "$pb_connection_upgrade";

struct Renderer<'a> {
    cfg: &'a ProxyConfig,
    ctx: &'a RenderContext,
    /// Rendered `map` blocks (http level).
    maps: String,
    /// Maps already rendered, by the routes of their path group: (run variables, fallback).
    map_of_group: HashMap<Vec<usize>, (Vec<String>, String)>,
    map_count: usize,
    /// Distinct return actions, numbered for their named locations.
    returns: HashMap<(u16, Option<String>), usize>,
    server_names: usize,
}

impl<'a> Renderer<'a> {
    fn new(cfg: &'a ProxyConfig, ctx: &'a RenderContext) -> Renderer<'a> {
        Renderer {
            cfg,
            ctx,
            maps: String::new(),
            map_of_group: HashMap::new(),
            map_count: 0,
            returns: HashMap::new(),
            server_names: 0,
        }
    }

    fn path(&self, name: &str) -> String {
        quote(&self.ctx.prefix.join(name).to_string_lossy())
    }

    fn gen_header(&self) -> String {
        format!(
            "add_header {GENERATION_HEADER} {} always;",
            self.ctx.generation
        )
    }

    fn main(&self, o: &mut String) {
        let c = self.cfg;
        let _ = writeln!(
            o,
            "# Rendered by proxybench: generation {}.",
            self.ctx.generation
        );
        // Workers need the scratch prefix; as root they would otherwise run as nobody. A
        // container of the proxy's image runs as a non-root user (where `user` would only be
        // warned about), whoever ran the render.
        if !self.ctx.remote && rustix::process::geteuid().is_root() {
            o.push_str("user root;\n");
        }
        let _ = writeln!(o, "worker_processes {};", c.worker_processes);
        let _ = writeln!(o, "pid {};", self.path("nginx.pid"));
        let _ = writeln!(
            o,
            "error_log {} {};",
            if self.ctx.stdio_logs {
                "stderr".to_string()
            } else {
                self.path("error.log")
            },
            c.error_log_level.as_str()
        );
        if let Some(t) = c.worker_shutdown_timeout {
            let _ = writeln!(o, "worker_shutdown_timeout {};", nginx_time(t.0));
        }
        raw(o, "", "main", &c.raw.main);
        let _ = writeln!(
            o,
            "events {{\n    worker_connections {};",
            c.worker_connections
        );
        raw(o, "    ", "events", &c.raw.events);
        o.push_str("}\n");
    }

    fn http_head(&self, o: &mut String) -> Result<(), Error> {
        let c = self.cfg;
        o.push_str("http {\n");
        o.push_str(
            "    log_format pb_json escape=json '{\"time\":\"$time_iso8601\",\"msec\":$msec,\
             \"status\":$status,\"request_time\":$request_time,\"upstream_addr\":\"$upstream_addr\",\
             \"upstream_status\":\"$upstream_status\",\"upstream_response_time\":\"$upstream_response_time\",\
             \"upstream_connect_time\":\"$upstream_connect_time\",\"limit_req_status\":\"$limit_req_status\",\
             \"connection\":$connection,\"connection_requests\":$connection_requests,\
             \"request_id\":\"$request_id\",\"host\":\"$host\",\"method\":\"$request_method\",\
             \"uri\":\"$request_uri\",\"bytes_sent\":$bytes_sent,",
        );
        let _ = writeln!(o, "\"generation\":{}}}';", self.ctx.generation);
        if c.access_log {
            let to = if self.ctx.stdio_logs {
                "/dev/stdout".to_string()
            } else {
                self.path("access.log")
            };
            let _ = writeln!(o, "    access_log {to} pb_json;");
        } else {
            o.push_str("    access_log off;\n");
        }
        for (d, dir) in [
            ("client_body_temp_path", "client_body_temp"),
            ("proxy_temp_path", "proxy_temp"),
            ("fastcgi_temp_path", "fastcgi_temp"),
            ("uwsgi_temp_path", "uwsgi_temp"),
            ("scgi_temp_path", "scgi_temp"),
        ] {
            let _ = writeln!(o, "    {d} {};", self.path(dir));
        }
        let _ = writeln!(o, "    keepalive_requests {};", c.keepalive_requests);
        let _ = writeln!(
            o,
            "    keepalive_timeout {};",
            nginx_time(c.keepalive_timeout.0)
        );
        // Sized for the config so that many names or maps do not trip nginx's hash defaults.
        o.push_str("    server_names_hash_bucket_size 128;\n");
        let _ = writeln!(
            o,
            "    server_names_hash_max_size {};",
            (4 * self.server_names).next_power_of_two().max(512)
        );
        let _ = writeln!(
            o,
            "    variables_hash_max_size {};",
            (4 * (self.map_count + 256)).next_power_of_two().max(1024)
        );
        let _ = writeln!(o, "    {}", self.gen_header());
        if c.routes.iter().any(|r| r.websocket) {
            let _ = writeln!(
                o,
                "    map $http_upgrade {CONNECTION_UPGRADE} {{\n        default upgrade;\n        \"\" \"\";\n    }}"
            );
        }
        raw(o, "    ", "http", &c.raw.http);
        for l in &c.rate_limits {
            item(o, "    ", &format!("rate_limit.{}", l.name));
            let rate = nginx_rate(l.rate.0).ok_or_else(|| {
                Error::Invalid(format!(
                    "rate limit '{}': rate {} r/s cannot be written for nginx, which takes whole \
                     requests per second or per minute",
                    l.name, l.rate.0
                ))
            })?;
            let _ = writeln!(
                o,
                "    limit_req_zone {} zone=rl_{}:{} rate={};",
                quote(&l.key),
                l.name,
                nginx_size(l.zone_size.0),
                rate
            );
        }
        Ok(())
    }

    fn upstreams(&self, o: &mut String) -> Result<(), Error> {
        for u in &self.cfg.upstreams {
            let addrs = self.ctx.groups.get(&u.backends).ok_or_else(|| {
                Error::Invalid(format!(
                    "upstream '{}': the run provided no backend group '{}'",
                    u.name, u.backends
                ))
            })?;
            item(o, "    ", &format!("upstream.{}", u.name));
            let _ = writeln!(o, "    upstream {} {{", u.name);
            if let Some(d) = lb_directive(&u.lb) {
                let _ = writeln!(o, "        {d}");
            }
            if let Some(z) = u.zone {
                let _ = writeln!(o, "        zone up_{} {};", u.name, nginx_size(z.0));
            }
            let mut params = String::new();
            if let Some(m) = u.max_fails {
                let _ = write!(params, " max_fails={m}");
            }
            if let Some(t) = u.fail_timeout {
                let _ = write!(params, " fail_timeout={}", nginx_time(t.0));
            }
            if addrs.is_empty() {
                o.push_str(
                    "        # the group is empty: a down placeholder makes nginx answer 502\n",
                );
                o.push_str("        server 127.0.0.1:1 down;\n");
            }
            for a in addrs {
                self.ctx.check_upstream(&u.name, a)?;
                let _ = writeln!(o, "        server {a}{params};");
            }
            if u.keepalive > 0 {
                let _ = writeln!(o, "        keepalive {};", u.keepalive);
                if let Some(n) = u.keepalive_requests {
                    let _ = writeln!(o, "        keepalive_requests {n};");
                }
                if let Some(t) = u.keepalive_timeout {
                    let _ = writeln!(o, "        keepalive_timeout {};", nginx_time(t.0));
                }
            }
            o.push_str("    }\n");
        }
        Ok(())
    }

    fn port_of(&self, li: usize) -> Result<u16, Error> {
        self.ctx.port_of(&self.cfg.listeners[li])
    }

    /// Renders every listener's server blocks (and, as a side effect, the maps they use).
    fn servers(&mut self) -> Result<String, Error> {
        let cfg = self.cfg;
        let mut port_tls: HashMap<u16, (usize, bool)> = HashMap::new();
        for (li, l) in cfg.listeners.iter().enumerate() {
            let port = self.port_of(li)?;
            if port == self.ctx.admin_port {
                return Err(Error::Invalid(format!(
                    "listener '{}' and the admin server both use port {port}",
                    l.name
                )));
            }
            if let Some(&(other, tls)) = port_tls.get(&port) {
                if tls != l.tls {
                    return Err(Error::Invalid(format!(
                        "listeners '{}' and '{}' share port {port} but only one of them is TLS",
                        cfg.listeners[other].name, l.name
                    )));
                }
            }
            if let Some(&(other, _)) = port_tls.get(&port) {
                if cfg.listeners[other].http2 != l.http2 {
                    return Err(Error::Invalid(format!(
                        "listeners '{}' and '{}' share port {port} but only one of them is HTTP/2",
                        cfg.listeners[other].name, l.name
                    )));
                }
            }
            port_tls.entry(port).or_insert((li, l.tls));
            if l.tls && self.ctx.tls.is_none() {
                return Err(Error::Invalid(format!(
                    "listener '{}' is TLS but the run provided no certificate",
                    l.name
                )));
            }
        }
        let mut out = String::new();
        let mut reuseport_done: HashSet<u16> = HashSet::new();
        for p in cfg.placements() {
            let l = &cfg.listeners[p.listener];
            let port = self.port_of(p.listener)?;
            // reuseport is a socket option: only the first server on a port may state it.
            let reuseport = if reuseport_done.insert(port) {
                " reuseport"
            } else {
                ""
            };
            let ssl = if l.tls { " ssl" } else { "" };
            // nginx 1.22's syntax: `http2` is a parameter of `listen`.
            let http2 = if l.http2 { " http2" } else { "" };
            item(&mut out, "    ", &format!("listener.{}", l.name));
            let _ = writeln!(
                out,
                "    server {{\n        listen {}{ssl}{http2}{reuseport};",
                self.ctx.listen_on(port)
            );
            if let Some(h) = &p.host {
                self.server_names += 1;
                let _ = writeln!(out, "        server_name {};", quote(h));
            }
            if l.tls {
                let tls = self.ctx.tls.as_ref().expect("checked above");
                let _ = writeln!(
                    out,
                    "        ssl_certificate {};\n        ssl_certificate_key {};",
                    quote(&tls.cert.to_string_lossy()),
                    quote(&tls.key.to_string_lossy())
                );
            }
            let _ = writeln!(out, "        {}", self.gen_header());
            raw(&mut out, "        ", "server", &cfg.raw.server);
            self.locations(&mut out, &p.routes);
            out.push_str("    }\n");
        }
        Ok(out)
    }

    /// The locations of one server: one per (match, path), plus named locations for the
    /// actions that conditional routes jump to, plus a 404 catch-all when `/` is not routed.
    fn locations(&mut self, out: &mut String, routes: &[usize]) {
        let cfg = self.cfg;
        let mut groups: Vec<((PathMatch, &str), Vec<usize>)> = Vec::new();
        let mut index: HashMap<(PathMatch, &str), usize> = HashMap::new();
        for &i in routes {
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
        let mut named: Vec<Action> = Vec::new();
        for ((m, path), members) in &groups {
            let modifier = match m {
                PathMatch::Exact => "= ",
                PathMatch::Prefix => "",
            };
            item(out, "        ", &format!("route.{}", members[0]));
            let _ = writeln!(out, "        location {modifier}{path} {{");
            if members.iter().all(|&i| !cfg.routes[i].has_conditions()) {
                let action = action_of(&cfg.routes[members[0]]);
                self.action_body(out, &action);
            } else {
                let (vars, fallback) = self.match_maps(members);
                let _ = writeln!(out, "            {}", self.gen_header());
                if vars.len() == 1 {
                    // One map: its default is the fallback.
                    let _ = writeln!(
                        out,
                        "            error_page 418 = ${};\n            return 418;",
                        vars[0]
                    );
                } else {
                    // Several maps, tried in order without nesting variables (nginx stops
                    // evaluating variables nested 100 deep).
                    for v in &vars {
                        let _ = writeln!(
                            out,
                            "            if (${v}) {{ error_page 418 = ${v}; return 418; }}"
                        );
                    }
                    let _ = writeln!(
                        out,
                        "            error_page 418 = {fallback};\n            return 418;"
                    );
                }
                for &i in members {
                    let a = action_of(&cfg.routes[i]);
                    if !named.contains(&a) {
                        named.push(a);
                    }
                }
                if members.iter().all(|&i| cfg.routes[i].has_conditions())
                    && !named.contains(&Action::NotFound)
                {
                    named.push(Action::NotFound);
                }
            }
            out.push_str("        }\n");
        }
        if !index.contains_key(&(PathMatch::Prefix, "/")) {
            let _ = writeln!(
                out,
                "        location / {{\n            {}\n            return 404;\n        }}",
                self.gen_header()
            );
        }
        for a in named {
            let name = self.action_name(&a);
            let _ = writeln!(out, "        location {name} {{");
            self.action_body(out, &a);
            out.push_str("        }\n");
        }
    }

    /// Renders (once per distinct path group) the maps that pick a named location for a
    /// request: one map per run of consecutive routes with the same condition keys, whose regex
    /// entries are tried in order. Returns the maps' variables and the fallback's name; a lone
    /// map defaults to the fallback, several default to "" and are tried in turn.
    fn match_maps(&mut self, members: &[usize]) -> (Vec<String>, String) {
        if let Some(done) = self.map_of_group.get(members) {
            return done.clone();
        }
        let cfg = self.cfg;
        let g = self.map_of_group.len();
        let fallback = members
            .iter()
            .find(|&&i| !cfg.routes[i].has_conditions())
            .map(|&i| action_of(&cfg.routes[i]))
            .unwrap_or(Action::NotFound);
        let fallback = self.action_name(&fallback);
        let conds: Vec<&Route> = members
            .iter()
            .map(|&i| &cfg.routes[i])
            .filter(|r| r.has_conditions())
            .collect();
        let mut runs: Vec<Vec<&Route>> = Vec::new();
        for r in conds {
            match runs.last_mut() {
                Some(run) if signature(run[0]) == signature(r) => run.push(r),
                _ => runs.push(vec![r]),
            }
        }
        let default = if runs.len() == 1 {
            fallback.clone()
        } else {
            "\"\"".to_string()
        };
        let mut maps = String::new();
        let mut vars = Vec::with_capacity(runs.len());
        for (k, run) in runs.iter().enumerate() {
            let sig = signature(run[0]);
            let source: Vec<String> = sig.fields.iter().map(|f| f.variable()).collect();
            let var = format!("pb_match{g}_{k}");
            let _ = writeln!(maps, "    map \"{}\" ${var} {{", source.join("\\n"));
            let mut seen = HashSet::new();
            for r in run {
                let values = sig.values(r);
                if !seen.insert(values.clone()) {
                    continue;
                }
                let re: Vec<String> = values.iter().map(|v| regex_escape(v)).collect();
                let key = format!("~^{}$", re.join("\\n"));
                let name = self.action_name(&action_of(r));
                let _ = writeln!(maps, "        {} {};", quote_always(&key), name);
            }
            let _ = writeln!(maps, "        default {default};\n    }}");
            self.map_count += 1;
            vars.push(var);
        }
        self.maps.push_str(&maps);
        self.map_of_group
            .insert(members.to_vec(), (vars.clone(), fallback.clone()));
        (vars, fallback)
    }

    fn action_name(&mut self, a: &Action) -> String {
        match a {
            Action::Proxy {
                upstream,
                limit,
                tunnel,
            } => {
                let t = match tunnel {
                    Tunnel::Http => "",
                    Tunnel::WebSocket => ":ws",
                    Tunnel::Grpc => ":grpc",
                };
                match limit {
                    None => format!("@up:{upstream}{t}"),
                    Some(l) => format!("@up:{upstream}{t}:limit:{l}"),
                }
            }
            Action::Return { status, body } => {
                let n = self.returns.len();
                let k = *self.returns.entry((*status, body.clone())).or_insert(n);
                format!("@return:{status}:{k}")
            }
            Action::NotFound => "@no_route".to_string(),
        }
    }

    fn action_body(&self, o: &mut String, a: &Action) {
        let cfg = self.cfg;
        let _ = writeln!(o, "            {}", self.gen_header());
        match a {
            Action::Proxy {
                upstream,
                limit,
                tunnel,
            } => {
                if let Some(l) = limit.as_deref().and_then(|l| cfg.rate_limit(l)) {
                    let mut d = format!("limit_req zone=rl_{}", l.name);
                    if l.burst > 0 {
                        let _ = write!(d, " burst={}", l.burst);
                    }
                    if l.nodelay {
                        d.push_str(" nodelay");
                    } else if let Some(n) = l.delay {
                        let _ = write!(d, " delay={n}");
                    }
                    let _ = writeln!(
                        o,
                        "            {d};\n            limit_req_status {};",
                        l.status
                    );
                }
                let u = cfg.upstream(upstream).expect("validated");
                if *tunnel == Tunnel::Grpc {
                    let _ = writeln!(o, "            grpc_pass grpc://{};", u.name);
                    o.push_str("            grpc_set_header X-Request-Id $request_id;\n");
                    grpc_settings(o, u, cfg.tunnel_timeout);
                } else {
                    let _ = writeln!(o, "            proxy_pass http://{};", u.name);
                    o.push_str("            proxy_set_header Host $host;\n");
                    o.push_str("            proxy_set_header X-Request-Id $request_id;\n");
                    proxy_settings(o, u, *tunnel, cfg.tunnel_timeout);
                }
            }
            Action::Return { status, body } => match body {
                Some(b) => {
                    let _ = writeln!(o, "            return {status} {};", quote_always(b));
                }
                None => {
                    let _ = writeln!(o, "            return {status};");
                }
            },
            Action::NotFound => o.push_str("            return 404;\n"),
        }
        if !matches!(a, Action::NotFound) {
            raw(o, "            ", "location", &cfg.raw.location);
        }
    }

    fn admin(&self, o: &mut String) -> Result<(), Error> {
        let listen = self.ctx.admin_address()?;
        let g = self.ctx.generation;
        let _ = writeln!(
            o,
            "    # admin: generation and stub_status for proxybench\n    server {{\n        \
             listen {listen};\n        access_log off;\n        {}\n        \
             location = {} {{ return 200 \"{g}\\n\"; }}\n        \
             location = {} {{ stub_status; }}\n        location / {{ return 404; }}\n    }}",
            self.gen_header(),
            super::GENERATION_PATH,
            super::STUB_STATUS_PATH,
        );
        Ok(())
    }
}

/// The proxy directives an upstream's settings imply, for a location that proxies to it; a
/// websocket route passes the upgrade on, and its tunnel's idle time is `tunnel_timeout` when
/// set.
fn proxy_settings(o: &mut String, u: &Upstream, tunnel: Tunnel, tunnel_timeout: Option<Dur>) {
    if tunnel == Tunnel::WebSocket {
        // The upgrade needs HTTP/1.1 and both hop-by-hop headers said again; without an
        // upgrade the empty Connection keeps the upstream's keep-alive as below.
        let _ = writeln!(
            o,
            "            proxy_http_version 1.1;\n            proxy_set_header Upgrade $http_upgrade;\n            proxy_set_header Connection {CONNECTION_UPGRADE};"
        );
    } else if u.keepalive > 0 {
        // Without both, nginx speaks HTTP/1.0 with "Connection: close" and never reuses.
        o.push_str(
            "            proxy_http_version 1.1;\n            proxy_set_header Connection \"\";\n",
        );
    }
    let tunnel_time = tunnel_timeout.filter(|_| tunnel == Tunnel::WebSocket);
    upstream_limits(o, "proxy", u, tunnel_time);
}

/// The `grpc_` directives of a grpc route: the upstream's timeouts, the tunnel's idle time
/// when set (a stream's gaps), and its retry conditions where gRPC has them.
fn grpc_settings(o: &mut String, u: &Upstream, tunnel_timeout: Option<Dur>) {
    upstream_limits(o, "grpc", u, tunnel_timeout);
}

/// An upstream's timeouts and retry conditions as the directives of nginx's `module` (`proxy`,
/// `grpc`); `tunnel_time`, when set, is the idle time of both directions in place of the
/// upstream's read and send timeouts.
fn upstream_limits(o: &mut String, module: &str, u: &Upstream, tunnel_time: Option<Dur>) {
    let times = [
        ("connect_timeout", u.connect_timeout),
        ("read_timeout", tunnel_time.or(u.read_timeout)),
        ("send_timeout", tunnel_time.or(u.send_timeout)),
        ("next_upstream_timeout", u.next_upstream_timeout),
    ];
    for (d, t) in times {
        if let Some(t) = t {
            let _ = writeln!(o, "            {module}_{d} {};", nginx_time(t.0));
        }
    }
    if let Some(nu) = &u.next_upstream {
        let words: Vec<&str> = nu.iter().map(|c| c.as_str()).collect();
        let _ = writeln!(o, "            {module}_next_upstream {};", words.join(" "));
    }
    if let Some(n) = u.next_upstream_tries {
        let _ = writeln!(o, "            {module}_next_upstream_tries {n};");
    }
}

fn action_of(r: &Route) -> Action {
    match (&r.upstream, r.return_status) {
        (Some(u), _) => Action::Proxy {
            upstream: u.clone(),
            limit: r.rate_limit.clone(),
            tunnel: if r.grpc {
                Tunnel::Grpc
            } else if r.websocket {
                Tunnel::WebSocket
            } else {
                Tunnel::Http
            },
        },
        (None, Some(s)) => Action::Return {
            status: s,
            body: r.body.clone(),
        },
        (None, None) => Action::NotFound,
    }
}

/// A request field a condition reads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Field {
    Header(String),
    Query(String),
    Method,
}

impl Field {
    fn variable(&self) -> String {
        match self {
            Field::Header(h) => format!("$http_{}", h.replace('-', "_")),
            Field::Query(q) => format!("$arg_{q}"),
            Field::Method => "$request_method".to_string(),
        }
    }
}

/// The fields a route's conditions read, in a fixed order.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Signature {
    fields: Vec<Field>,
}

impl Signature {
    fn values(&self, r: &Route) -> Vec<String> {
        let headers: BTreeMap<String, &String> = r
            .headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        self.fields
            .iter()
            .map(|f| match f {
                Field::Header(h) => headers[h].clone(),
                Field::Query(q) => r.query[q].clone(),
                Field::Method => r.method.clone().unwrap_or_default(),
            })
            .collect()
    }
}

fn signature(r: &Route) -> Signature {
    let mut headers: Vec<String> = r.headers.keys().map(|k| k.to_ascii_lowercase()).collect();
    headers.sort();
    let mut fields: Vec<Field> = headers.into_iter().map(Field::Header).collect();
    fields.extend(r.query.keys().cloned().map(Field::Query));
    if r.method.is_some() {
        fields.push(Field::Method);
    }
    Signature { fields }
}

/// Escapes a literal for a PCRE pattern.
fn regex_escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len() + 8);
    for c in v.chars() {
        if "\\^$.|?*+()[]{}/#".contains(c) {
            s.push('\\');
        }
        s.push(c);
    }
    s
}

/// The nginx directive that selects a balancing method, or `None` for round robin (no directive).
fn lb_directive(lb: &Lb) -> Option<String> {
    match lb {
        Lb::RoundRobin => None,
        Lb::LeastConn => Some("least_conn;".into()),
        Lb::Random => Some("random;".into()),
        Lb::RandomTwoLeastConn => Some("random two least_conn;".into()),
        Lb::IpHash => Some("ip_hash;".into()),
        Lb::Hash { key, consistent } => Some(format!(
            "hash {}{};",
            quote(key),
            if *consistent { " consistent" } else { "" }
        )),
    }
}

/// Quotes a string for nginx.conf unconditionally (map keys, return bodies).
fn quote_always(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The comment that opens the lines rendered from one item of the model, so that a line nginx
/// complains about can be traced back to the scenario (see [`Driver::item_at`](crate::driver::Driver::item_at)).
pub(crate) const ITEM_MARK: &str = "# pb:item ";

/// Marks where the lines of model item `key` (`listener.NAME`, `route.N`, `raw.http`...) begin.
fn item(o: &mut String, indent: &str, key: &str) {
    let _ = writeln!(o, "{indent}{ITEM_MARK}{key}");
}

/// Appends a raw snippet (`raw.<block>` of the model), indented, when it is not empty.
fn raw(o: &mut String, indent: &str, block: &str, snippet: &str) {
    if snippet.trim().is_empty() {
        return;
    }
    item(o, indent, &format!("raw.{block}"));
    for line in snippet.trim_end().lines() {
        let _ = writeln!(o, "{indent}{}", line.trim_start());
    }
}
