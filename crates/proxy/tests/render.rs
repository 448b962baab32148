//! The config model as a scenario writes it, and its nginx rendering: every feature renders the
//! directives it promises and passes the real `nginx -t`; inconsistent models are refused with a
//! message naming the item; nginx's own refusals come back verbatim.

mod common;

use common::{context, parse, scratch};
use proxybench_proxy::config::{Lb, NextUpstream, PathMatch};
use proxybench_proxy::nginx::{self, render};
use proxybench_proxy::{Driver as _, Error, ProxyConfig};
use std::net::SocketAddr;

/// An annotated example of the model: every key, with what it means.
pub const FULL_EXAMPLE: &str = r#"
[proxy]
kind = "nginx"                # the only driver for now
replicas = 2                  # nginx masters sharing every listener port (reuseport)
worker_processes = 1
cpus = "0"                    # optional: pin every process of every replica (taskset -c syntax)
worker_connections = 4096
keepalive_requests = 1000     # client side (nginx default)
keepalive_timeout = "75s"     # client side (nginx default)
worker_shutdown_timeout = "10s"   # optional: bound on old workers after reload / graceful stop
error_log_level = "notice"    # info | notice | warn (default) | error | crit
access_log = true             # JSON access log per replica (off to measure without logging)

[[proxy.listeners]]
name = "http"                 # routes refer to it; the run assigns the port (or `port = 8080`)
server_names = ["cafe.example.com"]   # one server block per name; empty: any host

[[proxy.listeners]]
name = "https"
tls = true                    # served with a CA + leaf generated per run for these names
server_names = ["cafe.example.com", "tea.example.com"]

[[proxy.upstreams]]
name = "coffee"
backends = "coffee"           # a backend group; the run resolves it to addresses
lb = "least_conn"             # round_robin | least_conn | random | random_two_least_conn | ip_hash
keepalive = 64                # idle upstream connections per worker; also renders
                              # proxy_http_version 1.1 + proxy_set_header Connection ""
max_fails = 1                 # nginx defaults: 1 failure within fail_timeout = 10s
fail_timeout = "10s"
next_upstream = ["error", "timeout", "http_502"]   # proxy_next_upstream conditions
next_upstream_tries = 2
next_upstream_timeout = "1s"
connect_timeout = "1s"
read_timeout = "60s"
send_timeout = "60s"
zone = "256k"                 # optional: share failure state and least_conn counts across workers

[[proxy.upstreams]]
name = "tea"
backends = "tea"
lb = { hash = "$request_uri", consistent = true }

[[proxy.upstreams]]
name = "tea-v2"
backends = "tea"
lb = "random_two_least_conn"

[[proxy.routes]]
listener = "http"             # optional: every listener
path = "/coffee"
match = "prefix"              # prefix (default, nginx semantics: /coffee matches /coffeehouse) | exact
upstream = "coffee"
rate_limit = "ingress"

[[proxy.routes]]
name = "tea-v2"               # optional, for messages and for merging scenario layers
host = "tea.example.com"      # optional: one of the listener's server names
path = "/tea"
headers = { "x-version" = "v2" }   # exact values; names case-insensitive
query = { tier = "gold" }          # exact raw (undecoded) values
method = "GET"
upstream = "tea-v2"

[[proxy.routes]]               # same host and path, no conditions: the fallback
host = "tea.example.com"
path = "/tea"
upstream = "tea"

[[proxy.routes]]
path = "/healthz"
match = "exact"
return = 200                  # answered by nginx itself
body = "ok"

[[proxy.rate_limits]]
name = "ingress"
rate = "3r/s"                 # whole r/s or r/m, as nginx takes them
burst = 10
delay = 5                     # two-stage: first 5 excess pass at once (or nodelay = true)
status = 429                  # limit_req_status (default 503)
key = "$binary_remote_addr"
zone_size = "10m"

[proxy.raw]                   # verbatim snippets, inserted where named
main = "worker_rlimit_nofile 8192;"
events = "multi_accept on;"
http = "server_tokens off;"
server = "client_max_body_size 1m;"
location = "proxy_buffering on;"
"#;

fn groups() -> Vec<(&'static str, Vec<SocketAddr>)> {
    vec![
        (
            "coffee",
            vec![
                "127.0.0.1:9001".parse().unwrap(),
                "127.0.0.1:9002".parse().unwrap(),
            ],
        ),
        ("tea", vec!["127.0.0.1:9003".parse().unwrap()]),
    ]
}

fn render_and_test(cfg: &ProxyConfig, tag: &str) -> String {
    let dir = scratch(tag);
    let ctx = context(cfg, dir.path(), &groups());
    let conf = render(cfg, &ctx).unwrap_or_else(|e| panic!("render: {e}"));
    if let Err(e) = nginx::DRIVER.validate(&conf, dir.path()) {
        panic!("nginx -t refused the rendering: {e}\n{conf}");
    }
    conf
}

fn invalid(cfg: &ProxyConfig) -> String {
    match cfg.validate() {
        Err(proxybench_proxy::config::Invalid(m)) => m,
        other => panic!("expected an Invalid error, got {other:?}"),
    }
}

#[test]
fn full_example_parses_renders_and_passes_nginx_t() {
    let cfg = parse(FULL_EXAMPLE);
    assert_eq!(cfg.replicas, 2);
    assert_eq!(cfg.upstreams[0].lb, Lb::LeastConn);
    assert_eq!(
        cfg.upstreams[1].lb,
        Lb::Hash {
            key: "$request_uri".into(),
            consistent: true
        }
    );
    assert_eq!(
        cfg.upstreams[0].next_upstream.as_deref(),
        Some(
            &[
                NextUpstream::Error,
                NextUpstream::Timeout,
                NextUpstream::Http502
            ][..]
        )
    );
    assert_eq!(cfg.routes[3].path_match, PathMatch::Exact);
    assert_eq!(cfg.tls_names(), vec!["cafe.example.com", "tea.example.com"]);
    let conf = render_and_test(&cfg, "full");
    for needle in [
        "worker_processes 1;",
        "worker_shutdown_timeout 10s;",
        "error_log ",
        " notice;",
        "worker_connections 4096;",
        "multi_accept on;",
        "worker_rlimit_nofile 8192;",
        "keepalive_requests 1000;",
        "keepalive_timeout 75s;",
        "log_format pb_json escape=json",
        "limit_req_zone $binary_remote_addr zone=rl_ingress:10m rate=3r/s;",
        "least_conn;",
        "zone up_coffee 256k;",
        "server 127.0.0.1:9001 max_fails=1 fail_timeout=10s;",
        "keepalive 64;",
        "hash $request_uri consistent;",
        "random two least_conn;",
        "ssl reuseport;",
        "server_name tea.example.com;",
        "limit_req zone=rl_ingress burst=10 delay=5;",
        "limit_req_status 429;",
        "proxy_http_version 1.1;",
        "proxy_set_header Connection \"\";",
        "proxy_next_upstream error timeout http_502;",
        "proxy_next_upstream_tries 2;",
        "proxy_next_upstream_timeout 1s;",
        "proxy_connect_timeout 1s;",
        "location = /healthz {",
        "return 200 \"ok\";",
        "error_page 418 = $pb_match0_0;",
        "map \"$http_x_version\\n$arg_tier\\n$request_method\" $pb_match0_0 {",
        "\"~^v2\\\\ngold\\\\nGET$\" @up:tea-v2;",
        "default @up:tea;",
        "add_header X-Config-Generation 1 always;",
        "location = /stub_status { stub_status; }",
        "proxy_buffering on;",
    ] {
        assert!(conf.contains(needle), "missing {needle:?} in\n{conf}");
    }
    // The HTTP listener has only /coffee and /healthz (tea routes are for tea.example.com, which
    // it does not serve), so it gets a 404 catch-all.
    assert!(conf.contains("location / {"));
    // Client keep-alive to the tea upstream is not configured: no HTTP/1.1 in its locations.
    let tea_loc = conf
        .split("location @up:tea {")
        .nth(1)
        .unwrap()
        .split('}')
        .next()
        .unwrap();
    assert!(!tea_loc.contains("proxy_http_version"), "{tea_loc}");
}

#[test]
fn unknown_keys_and_bad_values_are_rejected_by_the_parser() {
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Doc {
        proxy: ProxyConfig,
    }
    let cases = [
        ("[proxy]\nworkers = 2\n", "unknown field `workers`"),
        ("[[proxy.listeners]]\nname = \"a\"\ntsl = true\n", "unknown field `tsl`"),
        ("[[proxy.upstreams]]\nname = \"a\"\nbackends = \"b\"\nlb = \"fastest\"\n", "unknown load-balancing method 'fastest'"),
        ("[[proxy.upstreams]]\nname = \"a\"\nbackends = \"b\"\nlb = { hash = \"$x\", ring = 1 }\n", "unknown field `ring`"),
        ("[[proxy.upstreams]]\nname = \"a\"\nbackends = \"b\"\nfail_timeout = \"10\"\n", "needs a unit"),
        ("[[proxy.upstreams]]\nname = \"a\"\nbackends = \"b\"\nnext_upstream = [\"http_599\"]\n", "http_599"),
        ("[[proxy.rate_limits]]\nname = \"a\"\nrate = \"3r/h\"\n", "unknown unit"),
        ("[[proxy.routes]]\npath = \"/\"\nmatch = \"regex\"\nupstream = \"a\"\n", "regex"),
    ];
    for (text, want) in cases {
        let err = toml::from_str::<Doc>(text).unwrap_err().to_string();
        assert!(err.contains(want), "{text:?}: {err}");
        // The parser points at a line.
        assert!(err.contains("line"), "{err}");
    }
}

#[test]
fn cross_references_and_duplicates_are_named() {
    let base = parse(FULL_EXAMPLE);
    let mut c = base.clone();
    c.routes[0].upstream = Some("milk".into());
    assert_eq!(invalid(&c), "route #1 (/coffee): unknown upstream 'milk'");
    let mut c = base.clone();
    c.routes[0].listener = Some("grpc".into());
    assert_eq!(invalid(&c), "route #1 (/coffee): unknown listener 'grpc'");
    let mut c = base.clone();
    c.routes[0].rate_limit = Some("egress".into());
    assert_eq!(
        invalid(&c),
        "route #1 (/coffee): unknown rate limit 'egress'"
    );
    let mut c = base.clone();
    c.upstreams[1].name = "coffee".into();
    assert_eq!(invalid(&c), "upstream 'coffee' is defined twice");
    let mut c = base.clone();
    c.listeners[1].name = "http".into();
    assert_eq!(invalid(&c), "listener 'http' is defined twice");
    let mut c = base.clone();
    c.routes[1].host = Some("milk.example.com".into());
    assert!(invalid(&c).contains("host 'milk.example.com' is not a server name"));
    let mut c = base.clone();
    c.routes.push(c.routes[2].clone());
    assert_eq!(
        invalid(&c),
        "route #5 (/tea) repeats route #3 (/tea) on listener 'https' host 'tea.example.com' (same path, match and conditions), so it could never be chosen"
    );
    let mut c = base.clone();
    c.routes[3].rate_limit = Some("ingress".into());
    assert!(invalid(&c).contains("no effect on a return route"));
    let mut c = base.clone();
    c.rate_limits[0].nodelay = true;
    assert!(invalid(&c).contains("nodelay and delay exclude each other"));
    let mut c = base.clone();
    c.rate_limits[0].rate = units::Rate(1.0 / 7.0);
    // A rate nginx cannot write is the nginx driver's refusal, not the model's.
    c.validate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    match render(&c, &context(&c, dir.path(), &groups())) {
        Err(Error::Invalid(m)) => {
            assert!(m.contains("whole requests per second or per minute"), "{m}")
        }
        other => panic!("expected an Invalid error, got {other:?}"),
    }
    let mut c = base.clone();
    c.routes[1].headers.insert("x_bad".into(), "1".into());
    assert!(invalid(&c).contains("header name 'x_bad'"));
    let mut c = base.clone();
    c.routes[1].headers.insert("x-empty".into(), String::new());
    assert!(
        invalid(&c).ends_with("header 'x-empty' has an empty value"),
        "{}",
        invalid(&c)
    );
    let mut c = base.clone();
    c.routes[1].query.insert("tier".into(), "a\nb".into());
    assert!(
        invalid(&c).ends_with("query argument 'tier' value contains a control character"),
        "{}",
        invalid(&c)
    );
    let mut c = base.clone();
    c.routes[0].path = "coffee".into();
    assert!(invalid(&c).contains("path must start with '/'"));
    let mut c = base.clone();
    c.routes[0].return_status = Some(204);
    assert!(invalid(&c).contains("has both upstream and return"));
}

#[test]
fn the_context_must_provide_ports_groups_and_certificates() {
    let cfg = parse(FULL_EXAMPLE);
    let dir = scratch("ctx");
    let ctx = context(&cfg, dir.path(), &groups());
    let mut c = ctx.clone();
    c.groups.remove("tea");
    let e = render(&cfg, &c).unwrap_err().to_string();
    assert_eq!(e, "upstream 'tea': the run provided no backend group 'tea'");
    let mut c = ctx.clone();
    c.ports.remove("https");
    let e = render(&cfg, &c).unwrap_err().to_string();
    assert!(e.contains("listener 'https' has no port"), "{e}");
    let mut c = ctx.clone();
    c.tls = None;
    let e = render(&cfg, &c).unwrap_err().to_string();
    assert!(
        e.contains("is TLS but the run provided no certificate"),
        "{e}"
    );
    let mut c = ctx.clone();
    c.groups
        .insert("tea".into(), vec!["10.0.0.1:80".parse().unwrap()]);
    let e = render(&cfg, &c).unwrap_err().to_string();
    assert!(e.contains("not on loopback"), "{e}");
}

#[test]
fn every_lb_method_and_an_empty_group_pass_nginx_t() {
    for (lb, directive) in [
        ("\"round_robin\"", None),
        ("\"least_conn\"", Some("least_conn;")),
        ("\"random\"", Some("random;")),
        ("\"random_two_least_conn\"", Some("random two least_conn;")),
        ("\"ip_hash\"", Some("ip_hash;")),
        (
            "{ hash = \"$remote_addr$remote_port\" }",
            Some("hash $remote_addr$remote_port;"),
        ),
    ] {
        let cfg = parse(&format!(
            "[[proxy.listeners]]\nname = \"http\"\n[[proxy.upstreams]]\nname = \"u\"\nbackends = \"coffee\"\nlb = {lb}\n\
             [[proxy.upstreams]]\nname = \"none\"\nbackends = \"empty\"\nlb = {lb}\n\
             [[proxy.routes]]\npath = \"/\"\nupstream = \"u\"\n[[proxy.routes]]\npath = \"/none\"\nupstream = \"none\"\n"
        ));
        let dir = scratch("lb");
        let mut g = groups();
        g.push(("empty", vec![]));
        let ctx = context(&cfg, dir.path(), &g);
        let conf = render(&cfg, &ctx).unwrap();
        nginx::DRIVER
            .validate(&conf, dir.path())
            .unwrap_or_else(|e| panic!("{lb}: {e}\n{conf}"));
        if let Some(d) = directive {
            assert!(conf.contains(d), "{lb}: {conf}");
        }
        assert!(conf.contains("server 127.0.0.1:1 down;"));
    }
}

#[test]
fn rate_limit_variants_render() {
    for (extra, want) in [
        ("burst = 0", "limit_req zone=rl_l;"),
        (
            "burst = 100\nnodelay = true",
            "limit_req zone=rl_l burst=100 nodelay;",
        ),
        (
            "burst = 300\ndelay = 20",
            "limit_req zone=rl_l burst=300 delay=20;",
        ),
        ("rate = \"30r/m\"", "rate=30r/m;"),
    ] {
        let rate = if extra.contains("rate") {
            ""
        } else {
            "rate = \"3r/s\"\n"
        };
        let cfg = parse(&format!(
            "[[proxy.listeners]]\nname = \"http\"\n[[proxy.upstreams]]\nname = \"u\"\nbackends = \"coffee\"\n\
             [[proxy.routes]]\npath = \"/\"\nupstream = \"u\"\nrate_limit = \"l\"\n\
             [[proxy.rate_limits]]\nname = \"l\"\n{rate}{extra}\n"
        ));
        let conf = render_and_test(&cfg, "rl");
        assert!(conf.contains(want), "{want}: {conf}");
        assert!(conf.contains("limit_req_status 503;"));
    }
}

#[test]
fn nginx_refusals_come_back_verbatim() {
    let mut cfg = parse(FULL_EXAMPLE);
    cfg.raw.location = "proxy_frobnicate on;".into();
    let dir = scratch("refuse");
    let ctx = context(&cfg, dir.path(), &groups());
    let conf = render(&cfg, &ctx).unwrap();
    let line = conf
        .lines()
        .position(|l| l.contains("proxy_frobnicate"))
        .unwrap()
        + 1;
    match nginx::DRIVER.validate(&conf, dir.path()) {
        Err(Error::Refused(m)) => assert_eq!(
            m.lines().next().unwrap(),
            format!(
                "nginx: [emerg] unknown directive \"proxy_frobnicate\" in {}:{line}",
                dir.path().join("nginx-test.conf").display()
            )
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn version_is_nginx_dash_v() {
    let v = nginx::DRIVER.version().unwrap();
    assert!(v.starts_with("nginx version: nginx/"), "{v}");
    assert!(v.contains("configure arguments:"), "{v}");
}
