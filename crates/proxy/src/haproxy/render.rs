//! Renders the config model into one haproxy.cfg for one replica.
//!
//! Layout: `global` (stdout log target, threads, hard-stop-after), the admin frontend on the
//! replica's own port (`/generation` and the stats page) under defaults of its own, then defaults
//! for the proxy (the access `log-format`, timeouts), one frontend per listener and one backend
//! per upstream, and one stick-table backend per rate limit.
//!
//! A listener's routes are decided in `http-request` rules, in nginx's precedence (exact paths,
//! then prefixes longest first; within a path, routes with conditions in order, then the path's
//! fallback or a 404): the first rule whose conditions hold stores the route's index in
//! `txn.pb_route`. Later rules act on that index: `http-request return` for return routes and
//! 404s, the rate limits (track, check, count), and `use_backend` per upstream. Every response
//! of every frontend carries `X-Config-Generation` (`http-after-response`, which also covers
//! HAProxy's own answers). Each item's lines follow a `# pb:item KEY` comment, so a line that
//! `haproxy -c` names maps back to the item.

use crate::config::{
    Lb, NextUpstream, PathMatch, Placement, ProxyConfig, RateLimit, Route, Upstream,
};
use crate::driver::RenderContext;
use crate::{Error, GENERATION_HEADER, GENERATION_PATH};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::Duration;

use super::STATS_PATH;

/// The comment that opens the lines rendered from one item of the model (see
/// [`Driver::item_at`](crate::driver::Driver::item_at)).
pub(crate) const ITEM_MARK: &str = "# pb:item ";

/// File name (in the replica directory) of the PEM that holds the certificate chain and its key,
/// as HAProxy's `crt` wants them.
pub const TLS_PEM: &str = "haproxy-tls.pem";

/// The access `log-format` (one line per request on stdout): `t` log time in ms since the
/// epoch, `st` status, `ua` server address (`-:-` when none), `sv` server name (`<NOSRV>` when
/// HAProxy answered itself), `rc` retries, `ta` active time in ms, `by` bytes to the client, `ts`
/// termination state, `rl` rate-limit outcome (`-` when none applied), `g` generation, `fe`
/// frontend, `m` method, `u` the quoted URI (last, since it may hold spaces).
fn log_format(generation: u64) -> String {
    format!(
        "pb t=%[date(0,ms)] st=%ST ua=%si:%sp sv=%s rc=%rc ta=%Ta by=%B ts=%tsc \
         rl=%[var(txn.pb_rl)] g={generation} fe=%f m=%HM u=%{{+Q}}HU"
    )
}

/// Renders `cfg` for one replica. Fails when the model is inconsistent, uses something HAProxy
/// cannot express (a retry on 429, an untranslatable key), or the context lacks a port, a
/// backend group or a certificate. With TLS listeners it writes `ctx.prefix/haproxy-tls.pem`
/// (chain and key, owner-only), which the rendered `crt` names.
pub fn render(cfg: &ProxyConfig, ctx: &RenderContext) -> Result<String, Error> {
    cfg.validate()?;
    if ctx.admin_port == 0 {
        return Err(Error::Invalid("the run assigned no admin port".into()));
    }
    let ports = ports(cfg, ctx)?;
    let mut o = String::with_capacity(16 * 1024);
    let g = ctx.generation;
    let _ = writeln!(o, "# Rendered by proxybench: generation {g}.");
    global(&mut o, cfg, ctx);
    admin(&mut o, ctx)?;
    defaults(&mut o, cfg, g);
    let pem = if cfg.has_tls() {
        Some(tls_pem(ctx)?)
    } else {
        None
    };
    for (li, l) in cfg.listeners.iter().enumerate() {
        item(&mut o, "", &format!("listener.{}", l.name));
        let _ = writeln!(o, "frontend fe_{}", l.name);
        let ssl = match (&pem, l.tls, l.http2) {
            (Some(p), true, true) => format!(" ssl crt {} alpn h2,http/1.1", quote(p)),
            (Some(p), true, false) => format!(" ssl crt {}", quote(p)),
            // Plain HTTP/2: h2c with prior knowledge.
            (_, _, true) => " proto h2".to_string(),
            _ => String::new(),
        };
        let _ = writeln!(o, "    bind {}{ssl}", ctx.listen_on(ports[li]));
        let _ = writeln!(
            o,
            "    http-after-response set-header {GENERATION_HEADER} {g}"
        );
        routes(&mut o, cfg, li)?;
    }
    for u in &cfg.upstreams {
        backend(&mut o, u, ctx)?;
    }
    for r in &cfg.rate_limits {
        stick_table(&mut o, r)?;
    }
    Ok(o)
}

/// Each listener's port; two listeners on one port are refused (each renders its own frontend,
/// and HAProxy would split the port's connections between them).
fn ports(cfg: &ProxyConfig, ctx: &RenderContext) -> Result<Vec<u16>, Error> {
    let mut seen: HashMap<u16, &str> = HashMap::new();
    let mut out = Vec::new();
    for l in &cfg.listeners {
        let port = ctx.port_of(l)?;
        if port == ctx.admin_port {
            return Err(Error::Invalid(format!(
                "listener '{}' and the admin listener both use port {port}",
                l.name
            )));
        }
        if let Some(other) = seen.insert(port, &l.name) {
            return Err(Error::Invalid(format!(
                "listeners '{other}' and '{}' share port {port}; the haproxy driver renders one \
                 frontend per listener, each on a port of its own",
                l.name
            )));
        }
        if l.tls && ctx.tls.is_none() {
            return Err(Error::Invalid(format!(
                "listener '{}' is TLS but the run provided no certificate",
                l.name
            )));
        }
        out.push(port);
    }
    Ok(out)
}

fn global(o: &mut String, cfg: &ProxyConfig, ctx: &RenderContext) {
    o.push_str("global\n");
    let _ = writeln!(
        o,
        "    pidfile {}",
        quote(&ctx.prefix.join("haproxy.pid").to_string_lossy())
    );
    // Workers write the access log on stdout, which the replica captures into a file.
    o.push_str("    log stdout format raw local0\n");
    let _ = writeln!(o, "    nbthread {}", cfg.worker_processes);
    let _ = writeln!(
        o,
        "    maxconn {}",
        u64::from(cfg.worker_connections) * u64::from(cfg.worker_processes)
    );
    if let Some(t) = cfg.worker_shutdown_timeout {
        let _ = writeln!(o, "    hard-stop-after {}", time(t.0));
    }
}

fn admin(o: &mut String, ctx: &RenderContext) -> Result<(), Error> {
    let g = ctx.generation;
    let _ = writeln!(
        o,
        "# admin: generation and stats for proxybench\n\
         defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    \
         timeout server 30s\n\
         frontend pb_admin\n    bind {}\n    \
         http-after-response set-header {GENERATION_HEADER} {g}\n    \
         http-request return status 200 content-type text/plain string \"{g}\\n\" if {{ path {GENERATION_PATH} }}\n    \
         stats enable\n    stats uri {STATS_PATH}\n    stats show-legends",
        ctx.admin_address()?
    );
    Ok(())
}

fn defaults(o: &mut String, cfg: &ProxyConfig, generation: u64) {
    o.push_str("defaults\n    mode http\n");
    if cfg.access_log {
        o.push_str("    log global\n");
        let _ = writeln!(o, "    log-format {}", quote(&log_format(generation)));
    }
    // Idle keep-alive connections stay open through a soft stop (reload, graceful stop): the
    // next response carries `Connection: close` instead, so a client never writes a request
    // into a connection being closed.
    o.push_str("    option idle-close-on-response\n");
    // A connection closed without a request (a keep-alive client leaving) is not a request.
    o.push_str("    option dontlognull\n");
    let _ = writeln!(
        o,
        "    maxconn {}",
        u64::from(cfg.worker_connections) * u64::from(cfg.worker_processes)
    );
    // nginx's defaults: 60 s for client headers and bodies and for proxy connect/read/send.
    o.push_str(
        "    timeout connect 60s\n    timeout client 60s\n    timeout server 60s\n    \
         timeout http-request 60s\n",
    );
    let _ = writeln!(
        o,
        "    timeout http-keep-alive {}",
        time(cfg.keepalive_timeout.0)
    );
    if let Some(t) = cfg.tunnel_timeout {
        // Upgraded connections (WebSockets) and their idle time, both directions.
        let _ = writeln!(o, "    timeout tunnel {}", time(t.0));
    }
}

/// One decision of a listener's route table: a route index, or `-1` for a 404.
struct Rule {
    id: i64,
    item: usize,
    conds: Vec<String>,
}

/// The `http-request` and `use_backend` rules of listener `li`.
fn routes(o: &mut String, cfg: &ProxyConfig, li: usize) -> Result<(), Error> {
    let placements: Vec<_> = cfg
        .placements()
        .into_iter()
        .filter(|p| p.listener == li)
        .collect();
    let rules = route_rules(cfg, &placements);
    for r in &rules {
        item(o, "    ", &format!("route.{}", r.item));
        let _ = write!(
            o,
            "    http-request set-var(txn.pb_route) int({}) if !{{ var(txn.pb_route) -m found }}",
            r.id
        );
        for c in &r.conds {
            let _ = write!(o, " {c}");
        }
        o.push('\n');
    }
    // Routes used on this listener, by what they do.
    let mut used: Vec<usize> = rules
        .iter()
        .filter(|r| r.id >= 0)
        .map(|r| r.id as usize)
        .collect();
    used.sort_unstable();
    used.dedup();
    for &i in &used {
        let r = &cfg.routes[i];
        if let (None, Some(status)) = (&r.upstream, r.return_status) {
            item(o, "    ", &format!("route.{i}"));
            let _ = writeln!(
                o,
                "    {} if {}",
                return_action(status, &r.body),
                route_in(&[i])
            );
        }
    }
    o.push_str(
        "    http-request return status 404 if { var(txn.pb_route) -m int lt 0 }\n    \
         http-request return status 404 if !{ var(txn.pb_route) -m found }\n",
    );
    rate_limits(o, cfg, &used)?;
    let mut by_upstream: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for &i in &used {
        if let Some(u) = &cfg.routes[i].upstream {
            by_upstream.entry(u.as_str()).or_default().push(i);
        }
    }
    for (u, ids) in &by_upstream {
        for c in route_in_chunks(ids) {
            let _ = writeln!(o, "    use_backend be_{u} if {c}");
        }
    }
    Ok(())
}

/// The listener's route table, from its placements (its server names, the first its default
/// server): per name, its paths in nginx's precedence, each path's conditional routes and then
/// its fallback or a 404.
fn route_rules(cfg: &ProxyConfig, placements: &[Placement]) -> Vec<Rule> {
    let hosts: Vec<String> = placements
        .iter()
        .filter_map(|p| p.host.as_ref().map(|h| h.to_ascii_lowercase()))
        .collect();
    let mut rules: Vec<Rule> = Vec::new();
    for (pi, p) in placements.iter().enumerate() {
        let host = host_condition(pi, p, &hosts);
        let groups = path_groups(cfg, p);
        let with_host = |mut v: Vec<String>| {
            if let Some(h) = &host {
                v.insert(0, h.clone());
            }
            v
        };
        for ((m, path), members) in &groups {
            let path_cond = match m {
                PathMatch::Exact => format!("{{ path -m str {} }}", quote(path)),
                PathMatch::Prefix if *path == "/" => String::new(),
                PathMatch::Prefix => format!("{{ path -m beg {} }}", quote(path)),
            };
            let base = || {
                let mut v = Vec::new();
                if !path_cond.is_empty() {
                    v.push(path_cond.clone());
                }
                v
            };
            let mut fallback = None;
            for &i in members {
                let r = &cfg.routes[i];
                if !r.has_conditions() {
                    fallback = Some(i);
                    continue;
                }
                let mut c = base();
                c.extend(conditions(r));
                rules.push(Rule {
                    id: i as i64,
                    item: i,
                    conds: with_host(c),
                });
            }
            rules.push(match fallback {
                Some(i) => Rule {
                    id: i as i64,
                    item: i,
                    conds: with_host(base()),
                },
                None => Rule {
                    id: -1,
                    item: members[0],
                    conds: with_host(base()),
                },
            });
        }
    }
    rules
}

/// The Host condition of placement `pi` among the listener's `hosts`: none for a listener
/// without names, any other name's absence for its first (default) name.
fn host_condition(pi: usize, p: &Placement, hosts: &[String]) -> Option<String> {
    // The first name is the listener's default server, as in nginx: it takes any Host that
    // no other name of the listener matches.
    match &p.host {
        None => None,
        Some(_) if pi == 0 => {
            let others: Vec<String> = hosts[1..].iter().map(|h| quote(h)).collect();
            (!others.is_empty()).then(|| format!("!{{ {HOST} -m str {} }}", others.join(" ")))
        }
        Some(h) => Some(format!(
            "{{ {HOST} -m str {} }}",
            quote(&h.to_ascii_lowercase())
        )),
    }
}

/// A placement's routes grouped by path, the groups in nginx's precedence: exact first, then
/// prefixes, longest first.
fn path_groups<'a>(cfg: &'a ProxyConfig, p: &Placement) -> Vec<((PathMatch, &'a str), Vec<usize>)> {
    let mut groups: Vec<((PathMatch, &str), Vec<usize>)> = Vec::new();
    for &i in &p.routes {
        let r = &cfg.routes[i];
        let key = (r.path_match, r.path.as_str());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    groups.sort_by(|((ma, pa), _), ((mb, pb), _)| {
        let rank = |m: &PathMatch| if *m == PathMatch::Exact { 0 } else { 1 };
        rank(ma)
            .cmp(&rank(mb))
            .then(pb.len().cmp(&pa.len()))
            .then(pa.cmp(pb))
    });
    groups
}

/// The ACL that holds when the route chosen is one of `ids`.
fn route_in(ids: &[usize]) -> String {
    let list: Vec<String> = ids.iter().map(usize::to_string).collect();
    format!("{{ var(txn.pb_route) -m int {} }}", list.join(" "))
}

/// [`route_in`] for a list of routes of any length, in chunks: HAProxy reads at most 64 words per
/// line, so a long list is tested one line per chunk.
fn route_in_chunks(ids: &[usize]) -> Vec<String> {
    ids.chunks(ROUTES_PER_LINE).map(route_in).collect()
}

/// The rate limits of the routes `used` on a listener: track the key, reject once the window
/// is full, count what was accepted.
fn rate_limits(o: &mut String, cfg: &ProxyConfig, used: &[usize]) -> Result<(), Error> {
    let mut by_limit: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for &i in used {
        if let (Some(_), Some(l)) = (&cfg.routes[i].upstream, &cfg.routes[i].rate_limit) {
            by_limit.entry(l.as_str()).or_default().push(i);
        }
    }
    for (name, ids) in &by_limit {
        let l = cfg.rate_limit(name).expect("validated");
        let (_, window_max) = window(l)?;
        let key = sample(&l.key).ok_or_else(|| untranslatable("rate limit", name, &l.key))?;
        item(o, "    ", &format!("rate_limit.{name}"));
        for c in route_in_chunks(ids) {
            let _ = writeln!(
                o,
                "    http-request set-var(txn.pb_rl_on) str({name}) if {c}"
            );
        }
        let on = format!("{{ var(txn.pb_rl_on) -m str {name} }}");
        let _ = writeln!(
            o,
            "    http-request track-sc0 {key} table st_{name} if {on}\n    \
             http-request set-var(txn.pb_rl) str(REJECTED) if {on} {{ sc_gpc0_rate(0) ge {window_max} }}\n    \
             http-request set-var(txn.pb_rl) str(PASSED) if {on} !{{ var(txn.pb_rl) -m found }}\n    \
             http-request deny deny_status {} if {on} {{ var(txn.pb_rl) -m str REJECTED }}\n    \
             http-request sc-inc-gpc0(0) if {on}",
            l.status
        );
    }
    Ok(())
}

/// The Host header without its port, lower case.
const HOST: &str = "req.hdr(host),field(1,:),lower";

/// Route ids tested on one line (HAProxy splits a line into at most 64 words).
const ROUTES_PER_LINE: usize = 48;

/// A route's header, query and method conditions as anonymous ACLs.
fn conditions(r: &Route) -> Vec<String> {
    let mut v = Vec::new();
    for (h, val) in &r.headers {
        v.push(format!(
            "{{ req.fhdr({},1) -m str {} }}",
            h.to_ascii_lowercase(),
            quote(val)
        ));
    }
    for (q, val) in &r.query {
        v.push(format!("{{ url_param({q}) -m str {} }}", quote(val)));
    }
    if let Some(m) = &r.method {
        v.push(format!("{{ method -m str {} }}", quote(m)));
    }
    v
}

/// `http-request return` (or `redirect` for a 3xx with a URL) for a return route.
fn return_action(status: u16, body: &Option<String>) -> String {
    match body {
        Some(url) if (300..400).contains(&status) => {
            format!(
                "http-request redirect location {} code {status}",
                quote(url)
            )
        }
        Some(b) => format!(
            "http-request return status {status} content-type text/plain string {}",
            quote(b)
        ),
        None => format!("http-request return status {status}"),
    }
}

fn backend(o: &mut String, u: &Upstream, ctx: &RenderContext) -> Result<(), Error> {
    let addrs = ctx.groups.get(&u.backends).ok_or_else(|| {
        Error::Invalid(format!(
            "upstream '{}': the run provided no backend group '{}'",
            u.name, u.backends
        ))
    })?;
    item(o, "", &format!("upstream.{}", u.name));
    let _ = writeln!(o, "backend be_{}", u.name);
    let (balance, hash_type) = balance(u)?;
    let _ = writeln!(o, "    balance {balance}");
    if let Some(h) = hash_type {
        let _ = writeln!(o, "    hash-type {h}");
    }
    let keepalive =
        u.keepalive > 0 || u.keepalive_requests.is_some() || u.keepalive_timeout.is_some();
    if keepalive {
        o.push_str("    http-reuse safe\n");
    } else {
        // nginx without keepalive opens a connection per request and closes it.
        o.push_str("    http-reuse never\n    option http-server-close\n");
    }
    if let Some(t) = u.connect_timeout {
        let _ = writeln!(o, "    timeout connect {}", time(t.0));
    }
    if let Some(t) = u.read_timeout.max(u.send_timeout) {
        let _ = writeln!(o, "    timeout server {}", time(t.0));
    }
    retries(o, u, addrs.len())?;
    let mut params = String::new();
    if keepalive {
        if u.keepalive > 0 {
            let _ = write!(params, " pool-max-conn {}", u.keepalive);
        }
        if let Some(n) = u.keepalive_requests {
            let _ = write!(params, " max-reuse {}", n.saturating_sub(1));
        }
        if let Some(t) = u.keepalive_timeout {
            let _ = write!(params, " pool-purge-delay {}", time(t.0));
        }
    }
    // max_fails = 0 turns passive health off, as in nginx: no observing at all.
    if (u.max_fails.is_some() || u.fail_timeout.is_some()) && u.max_fails != Some(0) {
        let fails = u.max_fails.unwrap_or(1);
        let every = u.fail_timeout.map_or(Duration::from_secs(10), |t| t.0);
        let _ = write!(
            params,
            " check inter {} observe layer4 error-limit {fails} on-error mark-down",
            time(every)
        );
    }
    if u.http2 {
        // h2c with prior knowledge: the backends are plain HTTP.
        params.push_str(" proto h2");
    }
    if addrs.is_empty() {
        o.push_str("    # the group is empty: HAProxy answers 503\n");
    }
    for (i, a) in addrs.iter().enumerate() {
        ctx.check_upstream(&u.name, a)?;
        let _ = writeln!(o, "    server s{i} {a}{params}");
    }
    Ok(())
}

/// `retries`, `option redispatch` and `retry-on` for nginx's next_upstream and its tries.
fn retries(o: &mut String, u: &Upstream, servers: usize) -> Result<(), Error> {
    use NextUpstream as N;
    let default = [N::Error, N::Timeout];
    let conds: &[NextUpstream] = u.next_upstream.as_deref().unwrap_or(&default);
    if conds.contains(&N::Off) {
        o.push_str("    retries 0\n    retry-on none\n");
        return Ok(());
    }
    let mut words: Vec<&str> = Vec::new();
    for c in conds {
        let add: &[&str] = match c {
            N::Error => &["conn-failure", "empty-response"],
            N::Timeout => &["response-timeout"],
            N::InvalidHeader => &["junk-response"],
            N::Http500 => &["500"],
            N::Http502 => &["502"],
            N::Http503 => &["503"],
            N::Http504 => &["504"],
            N::Http403 => &["403"],
            N::Http404 => &["404"],
            N::Http429 => {
                return Err(Error::Invalid(format!(
                    "upstream '{}': next_upstream http_429 has no retry-on equivalent in HAProxy",
                    u.name
                )))
            }
            // HAProxy retries requests of any method.
            N::NonIdempotent | N::Off => &[],
        };
        for w in add {
            if !words.contains(w) {
                words.push(w);
            }
        }
    }
    // nginx's tries count the first attempt; unset, each server is tried once.
    let tries = u.next_upstream_tries.map_or(servers.max(1), |t| t as usize);
    let _ = writeln!(
        o,
        "    retries {}\n    option redispatch 1",
        tries.saturating_sub(1)
    );
    if words.is_empty() {
        o.push_str("    retry-on none\n");
    } else {
        let _ = writeln!(o, "    retry-on {}", words.join(" "));
    }
    Ok(())
}

/// The `balance` algorithm and the `hash-type` of an upstream's lb.
fn balance(u: &Upstream) -> Result<(String, Option<&'static str>), Error> {
    Ok(match &u.lb {
        Lb::RoundRobin => ("roundrobin".into(), None),
        Lb::LeastConn => ("leastconn".into(), None),
        // HAProxy's plain `random` draws two; one draw is nginx's random.
        Lb::Random => ("random(1)".into(), None),
        Lb::RandomTwoLeastConn => ("random(2)".into(), None),
        Lb::IpHash => ("source".into(), Some("map-based")),
        Lb::Hash { key, consistent } => {
            let s = sample(key).ok_or_else(|| untranslatable("upstream", &u.name, key))?;
            let algo = match s.as_str() {
                "src" => "source".to_string(),
                "url" => "uri whole".to_string(),
                "path" => "uri path-only".to_string(),
                other => format!("hash {other}"),
            };
            (
                algo,
                Some(if *consistent {
                    "consistent"
                } else {
                    "map-based"
                }),
            )
        }
    })
}

fn untranslatable(what: &str, name: &str, key: &str) -> Error {
    Error::Invalid(format!(
        "{what} '{name}': key '{key}' has no HAProxy equivalent (use one of $remote_addr, \
         $binary_remote_addr, $host, $uri, $request_uri, $http_NAME, $arg_NAME)"
    ))
}

/// An nginx variable as an HAProxy sample expression, for hash and rate-limit keys.
pub(crate) fn sample(var: &str) -> Option<String> {
    let v = var.trim();
    let name = v.strip_prefix('$')?;
    let ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    Some(match name {
        "remote_addr" | "binary_remote_addr" => "src".into(),
        "host" | "http_host" => "req.hdr(host),field(1,:),lower".into(),
        "uri" => "path".into(),
        "request_uri" => "url".into(),
        n => {
            if let Some(h) = n.strip_prefix("http_").filter(|h| ok(h)) {
                format!("req.fhdr({},1)", h.replace('_', "-"))
            } else if let Some(a) = n.strip_prefix("arg_").filter(|a| ok(a)) {
                format!("url_param({a})")
            } else {
                return None;
            }
        }
    })
}

/// The counting window of a limit (seconds) and the requests it accepts in one window: whole
/// requests per second when the rate is whole, else per minute.
fn window(l: &RateLimit) -> Result<(u64, u64), Error> {
    let r = l.rate.0;
    let (secs, n) = if r >= 1.0 && (r - r.round()).abs() < 1e-9 {
        (1, r.round() as u64)
    } else if (r * 60.0 - (r * 60.0).round()).abs() < 1e-6 && r * 60.0 >= 1.0 {
        (60, (r * 60.0).round() as u64)
    } else {
        return Err(Error::Invalid(format!(
            "rate limit '{}': rate {r} r/s is not a whole number of requests per second or per \
             minute",
            l.name
        )));
    };
    Ok((secs, n + u64::from(l.burst)))
}

fn stick_table(o: &mut String, l: &RateLimit) -> Result<(), Error> {
    let (secs, _) = window(l)?;
    let key = sample(&l.key).ok_or_else(|| untranslatable("rate limit", &l.name, &l.key))?;
    let ty = if key == "src" { "ip" } else { "string len 256" };
    // Entries of about 100 bytes: the zone size bounds the keys as nginx's zone does.
    let size = (l.zone_size.0 / 128).max(1);
    item(o, "", &format!("rate_limit.{}", l.name));
    let _ = writeln!(
        o,
        "backend st_{}\n    stick-table type {ty} size {size} expire {}s store gpc0,gpc0_rate({secs}s)",
        l.name,
        (2 * secs).max(10)
    );
    Ok(())
}

/// A duration as HAProxy writes it (`10s`, `250ms`), rounded up to milliseconds.
pub(crate) fn time(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_nanos().div_ceil(1_000_000))
    }
}

/// Quotes a word for haproxy.cfg: single quotes (nothing is interpreted inside) unless it holds
/// one, then double quotes with `\`, `"` and `$` escaped.
pub(crate) fn quote(s: &str) -> String {
    if !s.contains('\'') {
        format!("'{s}'")
    } else {
        let mut q = String::with_capacity(s.len() + 2);
        q.push('"');
        for c in s.chars() {
            if matches!(c, '\\' | '"' | '$') {
                q.push('\\');
            }
            q.push(c);
        }
        q.push('"');
        q
    }
}

/// Writes the chain and key into one owner-only PEM in the replica directory; returns its path.
/// For a config that runs elsewhere (`remote`), only the path: the container makes the file.
fn tls_pem(ctx: &RenderContext) -> Result<String, Error> {
    if ctx.remote {
        return Ok(ctx.prefix.join(TLS_PEM).to_string_lossy().into_owned());
    }
    let tls = ctx.tls.as_ref().expect("checked by ports()");
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p).map_err(|e| Error::io(format!("cannot read {}", p.display()), e))
    };
    let mut pem = read(&tls.cert)?;
    if !pem.ends_with('\n') {
        pem.push('\n');
    }
    pem.push_str(&read(&tls.key)?);
    std::fs::create_dir_all(&ctx.prefix)
        .map_err(|e| Error::io(format!("cannot create {}", ctx.prefix.display()), e))?;
    let path = ctx.prefix.join(TLS_PEM);
    crate::tls::write_private(&path, pem.as_bytes())
        .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
    Ok(path.to_string_lossy().into_owned())
}

/// Marks where the lines of model item `key` begin.
fn item(o: &mut String, indent: &str, key: &str) {
    let _ = writeln!(o, "{indent}{ITEM_MARK}{key}");
}
