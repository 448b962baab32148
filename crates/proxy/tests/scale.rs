//! Configs at the sizes of the NGF scale tests: 64 HTTP and 64 HTTPS listeners, 1000 routes,
//! 648 upstream servers, thousands of header matches on one path; and the nginx limit that a
//! long match value runs into, which must surface in nginx's own words.

mod common;

use common::{context, get, parse, request, scratch, Backend};
use proxybench_proxy::config::{Listener, Route};
use proxybench_proxy::nginx::{self, Replica};
use proxybench_proxy::{Driver as _, Error, ProxyConfig};
use std::net::SocketAddr;
use std::time::Instant;

fn base() -> ProxyConfig {
    parse(
        "[[proxy.upstreams]]\nname = \"small\"\nbackends = \"small\"\nkeepalive = 16\n\
         [[proxy.upstreams]]\nname = \"big\"\nbackends = \"big\"\nlb = \"least_conn\"\nkeepalive = 16\n",
    )
}

#[test]
fn listeners_routes_and_upstream_servers_at_ngf_scale() {
    let small = Backend::start("small");
    let mut cfg = base();
    for i in 0..64 {
        for (kind, tls) in [("http", false), ("https", true)] {
            cfg.listeners.push(Listener {
                name: format!("{kind}-{i}"),
                tls,
                server_names: vec![format!("{kind}-{i}.example.com")],
                port: None,
                http2: false,
            });
        }
    }
    for i in 0..1000 {
        let mut r = Route::to_upstream(&format!("/route-{i}"), "small");
        r.listener = Some(cfg.listeners[i % cfg.listeners.len()].name.clone());
        cfg.routes.push(r);
    }
    cfg.routes.push(Route::to_upstream("/big", "big"));
    // 648 servers: addresses nginx only has to parse (nothing listens on them).
    let big: Vec<SocketAddr> = (0..648)
        .map(|i| SocketAddr::from(([127, 0, 1 + (i / 200) as u8, (i % 200) as u8 + 1], 9000)))
        .collect();
    let dir = scratch("scale");
    let mut ctx = context(
        &cfg,
        dir.path(),
        &[("small", vec![small.addr]), ("big", big)],
    );
    ctx.prefix = dir.path().join("nginx-0");
    let t = Instant::now();
    let conf = nginx::render(&cfg, &ctx).unwrap();
    let render_t = t.elapsed();
    assert_eq!(
        conf.matches("\n    server {").count(),
        128 + 1,
        "128 listeners and the admin server"
    );
    assert_eq!(conf.matches("server 127.0.").count(), 648 + 1);
    assert_eq!(conf.matches("location /route-").count(), 1000);
    let checked = nginx::DRIVER.validate(&conf, &ctx.prefix).unwrap();
    let mut r = Replica::start("nginx-0", &ctx.prefix, &conf, ctx.admin_port, 1).unwrap();
    // A route on an HTTP listener and the 404 of a route that lives on another listener.
    let http7 = ctx.ports["http-7"];
    assert_eq!(get(http7, "/route-14", "http-7.example.com").body, "small");
    assert_eq!(get(http7, "/route-15", "http-7.example.com").status, 404);
    // Reload with one more route: the new generation serves it.
    cfg.routes.push(Route::to_upstream("/route-new", "small"));
    ctx.generation = 2;
    let conf2 = nginx::render(&cfg, &ctx).unwrap();
    let mut rec = r.reload(&conf2, 2, Instant::now());
    proxybench_proxy::driver::settle_reloads(std::slice::from_mut(&mut rec));
    assert_eq!(rec.error, None);
    let resp = get(http7, "/route-new", "http-7.example.com");
    assert_eq!(
        (resp.status, resp.header("X-Config-Generation")),
        (200, Some("2"))
    );
    eprintln!(
        "scale: {} KB config, render {:?}, nginx -t {:?}, reload validate {:.0} ms, served {:.0} ms, old workers gone {:.0} ms",
        conf.len() / 1024,
        render_t,
        checked.took,
        rec.validate_ms,
        rec.served_ms.unwrap(),
        rec.old_workers_exited_ms.unwrap()
    );
}

fn matches_config(n: usize, distinct_names: bool) -> ProxyConfig {
    let mut cfg = parse(
        "[[proxy.listeners]]\nname = \"http\"\n\
         [[proxy.upstreams]]\nname = \"plain\"\nbackends = \"plain\"\n\
         [[proxy.upstreams]]\nname = \"matched\"\nbackends = \"matched\"\n\
         [[proxy.routes]]\npath = \"/coffee\"\nupstream = \"plain\"\n",
    );
    for i in 0..n {
        let mut r = Route::to_upstream("/coffee", "matched");
        if distinct_names {
            r.headers.insert(format!("x-match-{i}"), "yes".into());
        } else {
            r.headers.insert("x-match".into(), format!("value-{i}"));
        }
        cfg.routes.push(r);
    }
    cfg
}

fn first_and_last_match_route(n: usize, distinct_names: bool) {
    let (plain, matched) = (Backend::start("plain"), Backend::start("matched"));
    let cfg = matches_config(n, distinct_names);
    let dir = scratch("matches");
    let mut ctx = context(
        &cfg,
        dir.path(),
        &[("plain", vec![plain.addr]), ("matched", vec![matched.addr])],
    );
    ctx.prefix = dir.path().join("nginx-0");
    let conf = nginx::render(&cfg, &ctx).unwrap();
    let t = Instant::now();
    let _r = Replica::start("nginx-0", &ctx.prefix, &conf, ctx.admin_port, 1).unwrap();
    let started = t.elapsed();
    let port = ctx.ports["http"];
    let header = |i: usize| {
        if distinct_names {
            (format!("x-match-{i}"), "yes".to_string())
        } else {
            ("x-match".to_string(), format!("value-{i}"))
        }
    };
    for i in [0, n / 2, n - 1] {
        let (h, v) = header(i);
        assert_eq!(
            request(port, "GET", "/coffee", "x", &[(&h, &v)]).body,
            "matched",
            "match {i}"
        );
    }
    let (h, _) = header(n - 1);
    assert_eq!(
        request(port, "GET", "/coffee", "x", &[(&h, "other")]).body,
        "plain"
    );
    assert_eq!(get(port, "/coffee", "x").body, "plain");
    assert_eq!(matched.requests(), 3);
    eprintln!(
        "{n} header matches ({}): {} KB config, nginx -t and start {:?}",
        if distinct_names {
            "distinct names"
        } else {
            "one name"
        },
        conf.len() / 1024,
        started
    );
}

#[test]
fn five_thousand_matches_on_one_header_route_first_to_last() {
    first_and_last_match_route(5000, false);
}

#[test]
fn hundreds_of_distinct_header_names_route_past_nginx_nesting_limit() {
    // Each distinct header is its own map; nginx stops at variables nested 100 deep, so the maps
    // must be tried one after the other rather than chained.
    first_and_last_match_route(300, true);
}

#[test]
fn a_match_value_past_nginx_token_buffer_is_refused_in_nginx_words() {
    let a = Backend::start("a");
    let mut cfg = matches_config(1, false);
    cfg.routes[1]
        .headers
        .insert("x-match".into(), "v".repeat(4100));
    let dir = scratch("toolong");
    let mut ctx = context(
        &cfg,
        dir.path(),
        &[("plain", vec![a.addr]), ("matched", vec![a.addr])],
    );
    ctx.prefix = dir.path().join("nginx-0");
    let conf = nginx::render(&cfg, &ctx).unwrap();
    let line = conf.lines().position(|l| l.contains("vvvv")).unwrap() + 1;
    let want = format!(
        "nginx: [emerg] too long parameter, probably missing terminating \"\"\" character in {}:{line}",
        ctx.prefix.join("nginx-test.conf").display()
    );
    match nginx::DRIVER.validate(&conf, &ctx.prefix) {
        Err(Error::Refused(m)) => assert_eq!(m.lines().next(), Some(want.as_str()), "{m}"),
        other => panic!("{other:?}"),
    }
    // Starting a replica reports the same refusal (for its own file) and starts nothing.
    match Replica::start("nginx-0", &ctx.prefix, &conf, ctx.admin_port, 1) {
        Err(Error::Refused(m)) => {
            assert!(m.starts_with("nginx: [emerg] too long parameter"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    // 4000 bytes still fit.
    cfg.routes[1]
        .headers
        .insert("x-match".into(), "v".repeat(4000));
    let conf = nginx::render(&cfg, &ctx).unwrap();
    nginx::DRIVER.validate(&conf, &ctx.prefix).unwrap();
}
