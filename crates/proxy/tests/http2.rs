//! `http2 = true` on a listener: nginx (1.22 syntax `listen ... http2`) serves h2c on a plain
//! listener and h2 by ALPN on a TLS one, which the load engine's HTTP/2 proves end to end; the
//! HAProxy and Caddy renders carry the same meaning. `http2 = true` on an upstream: HAProxy and
//! Caddy speak h2c to proxybench backends, whose own counters say which protocol they saw.

mod common;

use common::{context, parse, scratch, start, Backend};
use proxybench_proxy::{caddy, haproxy, nginx, ProxyConfig};

fn cfg() -> ProxyConfig {
    cfg_kind("nginx")
}

fn cfg_kind(kind: &str) -> ProxyConfig {
    parse(&format!(
        r#"
[proxy]
kind = "{kind}"
[[proxy.listeners]]
name = "h2c"
http2 = true
[[proxy.listeners]]
name = "h2"
tls = true
http2 = true
server_names = ["cafe.example.com"]
[[proxy.upstreams]]
name = "a"
backends = "a"
[[proxy.routes]]
path = "/"
upstream = "a"
"#
    ))
}

#[test]
fn nginx_serves_http2_on_both_kinds_of_listener() {
    let a = Backend::start("a");
    let cfg = cfg();
    let dir = scratch("h2");
    let mut ctx = context(&cfg, dir.path(), &[("a", vec![a.addr])]);
    let conf = nginx::render(&cfg, &ctx).unwrap();
    assert!(
        conf.contains(&format!("listen 127.0.0.1:{} http2", ctx.ports["h2c"])),
        "{conf}"
    );
    assert!(
        conf.contains(&format!("listen 127.0.0.1:{} ssl http2", ctx.ports["h2"])),
        "{conf}"
    );
    let _r = start("nginx-0", &cfg, &mut ctx, dir.path());
    h2_loads(&ctx);
    assert_eq!(a.requests(), 200);
}

/// 100 requests over HTTP/2 to each listener (h2c, then h2 by ALPN), all answered.
fn h2_loads(ctx: &proxybench_proxy::driver::RenderContext) {
    let ca = ctx.tls.as_ref().unwrap().ca.clone();
    let urls = [
        format!("http://127.0.0.1:{}/", ctx.ports["h2c"]),
        format!("https://cafe.example.com:{}/", ctx.ports["h2"]),
    ];
    for url in &urls {
        let mut c = load::Config::new(url).unwrap();
        c.http2 = true;
        c.streams = 4;
        c.connections = 2;
        c.threads = 1;
        c.duration = None;
        c.requests = Some(100);
        c.cacert = Some(ca.clone());
        c.resolve.push(
            load::Resolve::parse(&format!("cafe.example.com:{}:127.0.0.1", ctx.ports["h2"]))
                .unwrap(),
        );
        let s = load::run(&c, &load::Control::new()).unwrap().summary;
        assert_eq!(
            s.status.get(&200).copied(),
            Some(100),
            "{url}: {:?}",
            s.error_messages
        );
        assert_eq!(s.http2.unwrap().streams, 100);
    }
}

#[test]
fn haproxy_and_caddy_serve_http2_on_both_kinds_of_listener() {
    for kind in ["haproxy", "caddy"] {
        let a = Backend::start("a");
        let cfg = cfg_kind(kind);
        let dir = scratch(&format!("h2-{kind}"));
        let mut ctx = context(&cfg, dir.path(), &[("a", vec![a.addr])]);
        let taken: Vec<u16> = ctx
            .ports
            .values()
            .copied()
            .chain([ctx.admin_port])
            .collect();
        ctx.control_port = testkit::free_ports(4)
            .into_iter()
            .find(|p| !taken.contains(p))
            .unwrap();
        ctx.prefix = dir.path().join(format!("{kind}-0"));
        if kind == "haproxy" {
            let text = haproxy::render(&cfg, &ctx).unwrap();
            let _r = haproxy::Replica::start("haproxy-0", &ctx.prefix, &text, ctx.admin_port, 1)
                .unwrap();
            h2_loads(&ctx);
        } else {
            let json = caddy::render(&cfg, &ctx).unwrap();
            let _r = caddy::Replica::start("caddy-0", &ctx, &json).unwrap();
            h2_loads(&ctx);
        }
        assert_eq!(a.requests(), 200, "{kind}");
    }
}

#[test]
fn haproxy_and_caddy_renders_offer_http2() {
    let cfg = cfg();
    let dir = scratch("h2-render");
    let mut ctx = context(
        &cfg,
        dir.path(),
        &[("a", vec!["127.0.0.1:9".parse().unwrap()])],
    );
    // Rendered only, never bound.
    ctx.control_port = ctx.admin_port % 60_000 + 1;
    let hap = haproxy::render(&cfg, &ctx).unwrap();
    assert!(
        hap.contains(&format!("bind 127.0.0.1:{} proto h2", ctx.ports["h2c"])),
        "{hap}"
    );
    assert!(hap.contains(" alpn h2,http/1.1"), "{hap}");
    let json: serde_json::Value =
        serde_json::from_str(&caddy::render(&cfg, &ctx).unwrap()).unwrap();
    let servers = json["apps"]["http"]["servers"].as_object().unwrap();
    let protocols: Vec<String> = servers
        .values()
        .map(|s| s["protocols"].to_string())
        .collect();
    assert!(
        protocols.contains(&r#"["h1","h2","h2c"]"#.to_string()),
        "{protocols:?}"
    );
    assert!(
        protocols.contains(&r#"["h1","h2"]"#.to_string()),
        "{protocols:?}"
    );
}

/// Listeners for HTTP/1.1 and h2c clients, one upstream of `backends` over h2c.
fn h2_upstream_cfg(kind: &str, keepalive: u32) -> ProxyConfig {
    parse(&format!(
        r#"
[proxy]
kind = "{kind}"
[[proxy.listeners]]
name = "h1"
[[proxy.listeners]]
name = "h2c"
http2 = true
[[proxy.upstreams]]
name = "a"
backends = "a"
http2 = true
keepalive = {keepalive}
[[proxy.routes]]
path = "/"
upstream = "a"
"#
    ))
}

/// `n` requests to 127.0.0.1:`port`, over h2c with 2 connections of 4 streams, or over
/// HTTP/1.1 on 4 connections; returns the 200s.
fn count_load(port: u16, http2: bool, n: u64) -> u64 {
    let mut c = load::Config::new(&format!("http://127.0.0.1:{port}/x")).unwrap();
    c.http2 = http2;
    c.streams = if http2 { 4 } else { 1 };
    c.connections = if http2 { 2 } else { 4 };
    c.threads = 1;
    c.duration = None;
    c.requests = Some(n);
    let s = load::run(&c, &load::Control::new()).unwrap().summary;
    assert!(s.errors.is_empty(), "{:?}", s.error_messages);
    s.status.get(&200).copied().unwrap_or(0)
}

/// Starts `kind` (haproxy or caddy) for `cfg` in `dir`; the guard stops it.
fn start_kind(
    kind: &str,
    cfg: &ProxyConfig,
    ctx: &mut proxybench_proxy::driver::RenderContext,
    dir: &std::path::Path,
) -> Box<dyn std::any::Any> {
    let taken: Vec<u16> = ctx
        .ports
        .values()
        .copied()
        .chain([ctx.admin_port])
        .collect();
    ctx.control_port = testkit::free_ports(4)
        .into_iter()
        .find(|p| !taken.contains(p))
        .unwrap();
    ctx.prefix = dir.join(format!("{kind}-0"));
    if kind == "haproxy" {
        let text = haproxy::render(cfg, ctx).unwrap();
        assert!(text.contains(" proto h2"), "{text}");
        Box::new(
            haproxy::Replica::start("haproxy-0", &ctx.prefix, &text, ctx.admin_port, 1).unwrap(),
        )
    } else {
        let json = caddy::render(cfg, ctx).unwrap();
        assert!(json.contains(r#""versions": ["#), "{json}");
        Box::new(caddy::Replica::start("caddy-0", ctx, &json).unwrap())
    }
}

#[test]
fn haproxy_and_caddy_speak_h2c_to_an_http2_upstream() {
    let fleet = backend::Fleet::start(backend::FleetConfig {
        instances: (0..2)
            .map(|i| backend::InstanceConfig {
                name: format!("b{i}"),
                addr: "127.0.0.1:0".parse().unwrap(),
                profile: backend::Profile::default(),
            })
            .collect(),
        ..backend::FleetConfig::default()
    })
    .unwrap();
    let addrs: Vec<_> = fleet.addrs().into_iter().map(|(_, a)| a).collect();
    let mut before = (0, 0);
    for kind in ["haproxy", "caddy"] {
        for keepalive in [0, 16] {
            let cfg = h2_upstream_cfg(kind, keepalive);
            let dir = scratch(&format!("h2up-{kind}-{keepalive}"));
            let mut ctx = context(&cfg, dir.path(), &[("a", addrs.clone())]);
            let _r = start_kind(kind, &cfg, &mut ctx, dir.path());
            let h2_ok = count_load(ctx.ports["h2c"], true, 400);
            let h1_ok = count_load(ctx.ports["h1"], false, 400);
            assert_eq!((h2_ok, h1_ok), (400, 400), "{kind} keepalive {keepalive}");
            let cs = fleet.counters();
            let total: u64 = cs.iter().map(|c| c.requests).sum();
            let h2: u64 = cs
                .iter()
                .map(|c| c.h2.as_ref().map_or(0, |h| h.requests))
                .sum();
            // End to end: every answer the clients got is one request the backends counted,
            // and the backends saw each over HTTP/2.
            let what = format!("{kind} keepalive {keepalive}: {cs:?}");
            assert_eq!(total - before.0, 800, "{what}");
            assert_eq!(h2 - before.1, 800, "{what}");
            before = (total, h2);
        }
    }
    fleet.shutdown();
}
