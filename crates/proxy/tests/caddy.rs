//! The Caddy driver against a real caddy (Debian's 2.6.2), a real backend fleet and the real
//! load engine: exact counts, reloads and a gradual scale-down under keep-alive load without a
//! failed request, a refusal of `caddy validate` traced back to its model item, and the
//! rendered config routing as nginx's would.

mod common;

use backend::{Fleet, FleetConfig, InstanceConfig, Profile};
use common::{parse, request, scratch};
use proxybench_proxy::caddy::{self, Replica};
use proxybench_proxy::driver::Replica as _;
use proxybench_proxy::logs::{self, LogFormat};
use proxybench_proxy::{ProxyConfig, RenderContext, StopMode};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn fleet(n: usize) -> Fleet {
    Fleet::start(FleetConfig {
        instances: (0..n)
            .map(|i| InstanceConfig {
                name: format!("backend-{i}"),
                addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                profile: Profile::default(),
            })
            .collect(),
        threads: 1,
        seed: 1,
    })
    .unwrap()
}

fn addrs(f: &Fleet) -> Vec<SocketAddr> {
    f.addrs().into_iter().map(|(_, a)| a).collect()
}

fn backend_requests(f: &Fleet) -> u64 {
    f.counters().iter().map(|c| c.requests).sum()
}

fn one_route() -> ProxyConfig {
    parse(
        r#"
[proxy]
kind = "caddy"
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "app"
backends = "app"
keepalive = 32
[[proxy.routes]]
path = "/"
upstream = "app"
"#,
    )
}

/// A context for replica directory `dir` with fresh listener, admin and control ports.
fn context(cfg: &ProxyConfig, dir: &Path, groups: &[(&str, Vec<SocketAddr>)]) -> RenderContext {
    let ports = testkit::free_ports(cfg.listeners.len() + 2);
    let n = cfg.listeners.len();
    let mut ctx = RenderContext {
        prefix: dir.to_path_buf(),
        generation: 1,
        groups: groups
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ports: BTreeMap::new(),
        admin_port: ports[n],
        control_port: ports[n + 1],
        tls: None,
        ..RenderContext::default()
    };
    for (l, p) in cfg.listeners.iter().zip(&ports) {
        ctx.ports.insert(l.name.clone(), *p);
    }
    if cfg.has_tls() {
        ctx.tls =
            Some(proxybench_proxy::tls::self_signed(&cfg.tls_names(), &dir.join("tls")).unwrap());
    }
    ctx
}

/// Renders and starts one replica in `root/name` (own admin and control ports).
fn start(name: &str, cfg: &ProxyConfig, ctx: &mut RenderContext, root: &Path) -> Replica {
    ctx.prefix = root.join(name);
    let json = caddy::render(cfg, ctx).unwrap();
    Replica::start(name, ctx, &json).unwrap()
}

/// Caddy writes the access-log line after the response; wait until the count settles.
fn settled_lines(paths: &[PathBuf], at_least: u64) -> u64 {
    let count = || {
        logs::summarize(LogFormat::Caddy, paths, &[])
            .unwrap()
            .access_lines
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = count();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        let now = count();
        if now == last && now >= at_least {
            return now;
        }
        last = now;
    }
    last
}

fn load_cfg(port: u16, conns: u32) -> load::Config {
    let mut c = load::Config::new(&format!("http://127.0.0.1:{port}/")).unwrap();
    c.connections = conns;
    c.threads = 2;
    c
}

/// What Caddy drops when a reload shuts the old servers down under closed-loop keep-alive load
/// (the driver cannot drain first there: see `caddy::DRAIN`): Go's `http.Server.Shutdown` closes
/// every connection that is idle at that moment, including one on which the client has just sent
/// its next request and the server has not read it yet (golang/go#65802). The client sees a
/// reused keep-alive connection closed before any byte of the answer (ReadIdleClosed). Mostly
/// Caddy never read the request, so its access log has no line for it and no backend saw it;
/// when Caddy had just read it, it logs it, its upstream request is cancelled with the
/// connection and its answer goes nowhere. This checks exactly that: every failure is of that
/// kind, Caddy's log lines lie between the client's successes and its attempts, the backends'
/// total between the successes and Caddy's lines, and each second with a failure holds a reload
/// (`events`, seconds on the load's clock). Returns the failures.
fn dropped_only_at_shutdowns(
    s: &model::LoadSummary,
    log_lines: u64,
    backends: u64,
    events: &[f64],
) -> u64 {
    let failed = s.error_total();
    assert_eq!(
        s.errors
            .get(&model::ErrorKind::ReadIdleClosed)
            .copied()
            .unwrap_or(0),
        failed,
        "only idle keep-alive connections closed by the shutdown: {:?}",
        s.errors
    );
    assert_eq!(s.status.get(&200), Some(&s.requests));
    assert_eq!(s.attempts(), s.requests + failed);
    // A request Caddy read just before the close is proxied and logged, but its answer goes
    // into the closed socket; the others were never read.
    assert!(
        (s.requests..=s.attempts()).contains(&log_lines),
        "Caddy logged {log_lines}: every answered request, and at most the dropped ones"
    );
    // Its upstream request is cancelled with the connection, so a backend may not have
    // counted it either.
    assert!(
        (s.requests..=log_lines).contains(&backends),
        "the backends answered {backends}: every answered request, and at most what Caddy logged"
    );
    for row in s.timeline.iter().filter(|r| r.error_total() > 0) {
        let t = f64::from(row.t);
        assert!(
            events.iter().any(|&e| e >= t - 1.0 && e < t + 1.0),
            "failures in second {} but no shutdown near it: {events:?}",
            row.t
        );
    }
    failed
}

#[test]
fn a_counted_run_matches_caddys_log_and_the_backends_exactly() {
    let f = fleet(3);
    let cfg = one_route();
    let dir = scratch("caddy-n");
    let mut ctx = context(&cfg, dir.path(), &[("app", addrs(&f))]);
    let r = start("caddy-0", &cfg, &mut ctx, dir.path());
    let mut lc = load_cfg(ctx.ports["http"], 8);
    lc.duration = None;
    lc.requests = Some(5003);
    let o = load::run(&lc, &load::Control::new()).unwrap();
    let s = &o.summary;
    assert_eq!(s.requests, 5003);
    assert_eq!(s.error_total(), 0);
    assert_eq!(s.status.get(&200), Some(&5003));
    assert_eq!(settled_lines(&[r.access_log_path()], 5003), 5003);
    assert_eq!(backend_requests(&f), 5003);
    let sum = logs::summarize(LogFormat::Caddy, &[r.access_log_path()], &[]).unwrap();
    assert_eq!(sum.access_status.get(&200), Some(&5003));
    // Every line names its upstream; round robin spreads them over the three.
    let by_addr: u64 = addrs(&f)
        .iter()
        .map(|a| sum.upstream_addr.get(&a.to_string()).copied().unwrap_or(0))
        .sum();
    assert_eq!(by_addr, 5003);
    assert_eq!(sum.upstream_status.get("200"), Some(&5003));
}

#[test]
fn reloads_under_keepalive_load_lose_only_requests_on_idle_connections_the_old_servers_close() {
    let f = fleet(2);
    let cfg = one_route();
    let dir = scratch("caddy-reload");
    let all = addrs(&f);
    let mut ctx = context(&cfg, dir.path(), &[("app", all.clone())]);
    let mut r = start("caddy-0", &cfg, &mut ctx, dir.path());
    let mut lc = load_cfg(ctx.ports["http"], 16);
    lc.duration = Some(Duration::from_secs(4));
    let ctl = load::Control::new();
    let origin = ctl.origin;
    let load = std::thread::spawn(move || load::run(&lc, &ctl).unwrap());
    std::thread::sleep(Duration::from_millis(600));
    let mut recs = Vec::new();
    for generation in 2..=6u64 {
        ctx.generation = generation;
        // Alternate between both backends and one of them.
        let group = if generation % 2 == 0 {
            vec![all[0]]
        } else {
            all.clone()
        };
        ctx.groups.insert("app".into(), group);
        let json = caddy::render(&cfg, &ctx).unwrap();
        let rec = r.reload(&json, generation, origin);
        assert_eq!(rec.error, None, "{rec:?}");
        assert!(rec.served_ms.is_some());
        assert_eq!(r.generation(), generation);
        recs.push(rec);
        std::thread::sleep(Duration::from_millis(500));
    }
    let o = load.join().unwrap();
    let s = &o.summary;
    assert!(s.requests > 1000, "a real run: {}", s.requests);
    let events: Vec<f64> = recs.iter().map(|r| r.t_s).collect();
    let lines = settled_lines(&[r.access_log_path()], s.requests);
    let dropped = dropped_only_at_shutdowns(s, lines, backend_requests(&f), &events);
    eprintln!(
        "caddy: {} reloads under 16 keep-alive connections: {} of {} attempts dropped \
         (idle keep-alive connections closed by the old servers' shutdown)",
        recs.len(),
        dropped,
        s.attempts()
    );
    let resp = request(ctx.ports["http"], "GET", "/", "x", &[]);
    assert_eq!(resp.header("X-Config-Generation"), Some("6"));
    for rec in &recs {
        eprintln!(
            "caddy reload gen {}: validate {:.1} ms, served {:.1} ms",
            rec.generation,
            rec.validate_ms,
            rec.served_ms.unwrap()
        );
    }
}

#[test]
fn a_gradual_scale_down_under_load_fails_no_request() {
    let f = fleet(2);
    let mut cfg = one_route();
    cfg.replicas = 3;
    let dir = scratch("caddy-scale");
    let mut ctx = context(&cfg, dir.path(), &[("app", addrs(&f))]);
    let mut reps = Vec::new();
    for i in 0..3 {
        let ports = testkit::free_ports(2);
        ctx.admin_port = ports[0];
        ctx.control_port = ports[1];
        reps.push(start(&format!("caddy-{i}"), &cfg, &mut ctx, dir.path()));
    }
    let port = ctx.ports["http"];
    let logs: Vec<PathBuf> = reps.iter().map(|r| r.access_log_path()).collect();
    // New connections spread over the three (SO_REUSEPORT).
    for _ in 0..60 {
        assert_eq!(request(port, "GET", "/", "x", &[]).status, 200);
    }
    let per: Vec<u64> = logs
        .iter()
        .map(|p| {
            logs::summarize(LogFormat::Caddy, std::slice::from_ref(p), &[])
                .unwrap()
                .access_lines
        })
        .collect();
    assert!(per.iter().all(|&n| n > 0), "every replica served: {per:?}");
    let mut lc = load_cfg(port, 24);
    lc.duration = Some(Duration::from_secs(4));
    let ctl = load::Control::new();
    let origin = ctl.origin;
    let load = std::thread::spawn(move || load::run(&lc, &ctl).unwrap());
    std::thread::sleep(Duration::from_millis(800));
    let mut gone = Vec::new();
    let mut events = Vec::new();
    for mut r in reps.drain(1..).rev().collect::<Vec<_>>() {
        let t = Instant::now();
        events.push(origin.elapsed().as_secs_f64());
        r.stop(StopMode::Graceful).unwrap();
        assert!(!r.is_running());
        eprintln!(
            "{} stopped gracefully in {:?}",
            r.dir().display(),
            t.elapsed()
        );
        gone.push(r);
        std::thread::sleep(Duration::from_millis(1000));
    }
    let o = load.join().unwrap();
    let s = &o.summary;
    assert!(s.requests > 1000, "a real run: {}", s.requests);
    // The graceful stop drains keep-alive connections first (every answer closes its
    // connection, the client reconnects to a replica that stays), so the shutdown finds no idle
    // connection to close under a request: nothing fails. The 60 requests before the load are
    // in the logs and the backends' counts too.
    assert_eq!(s.error_total(), 0, "{:?}", s.errors);
    assert_eq!(s.status.get(&200), Some(&s.requests));
    assert_eq!(settled_lines(&logs, s.requests + 60), s.requests + 60);
    assert_eq!(backend_requests(&f), s.requests + 60);
    assert!(
        s.connects > 24,
        "the drained connections reconnected: {}",
        s.connects
    );
    eprintln!(
        "caddy: scale-down 3 -> 1 at {events:?} s under 24 keep-alive connections: 0 of {} \
         attempts failed, {} connections",
        s.attempts(),
        s.connects
    );
    assert!(reps[0].is_running());
}

#[test]
fn a_config_caddy_refuses_is_traced_to_its_item_and_leaves_the_running_one() {
    let f = fleet(1);
    let mut cfg = one_route();
    let d = proxybench_proxy::driver(cfg.kind);
    assert_eq!(d.name(), "caddy");
    assert!(
        d.version().unwrap().starts_with("2.6"),
        "{}",
        d.version().unwrap()
    );
    let dir = scratch("caddy-refused");
    let mut ctx = context(&cfg, dir.path(), &[("app", addrs(&f))]);
    let mut r = start("caddy-0", &cfg, &mut ctx, dir.path());
    // Two names nginx keeps apart by case; Caddy's host matcher refuses the repeat.
    cfg.listeners[0].server_names = vec!["cafe.example.com".into(), "CAFE.example.com".into()];
    ctx.generation = 2;
    let rendered = d.render(&cfg, &ctx).unwrap();
    let t = Instant::now();
    let refusal = d
        .check(&rendered, &dir.path().join("check"))
        .unwrap()
        .unwrap_err();
    eprintln!(
        "caddy validate refused in {:?}: {}",
        t.elapsed(),
        refusal.message
    );
    assert!(
        refusal.message.starts_with("Error: loading http app module: provision http: server http: setting up route matchers: route 1: "),
        "{}",
        refusal.message
    );
    assert!(
        refusal
            .message
            .ends_with("host at index 0 is repeated at index 1: cafe.example.com"),
        "{}",
        refusal.message
    );
    assert_eq!(refusal.item.as_deref(), Some("listener.http"));
    // A reload with it is refused before anything is loaded; the old config serves on.
    let rec = r.reload(&rendered.text, 2, Instant::now());
    assert!(rec.error.unwrap().contains("host at index 0 is repeated"));
    assert_eq!(rec.served_ms, None);
    assert!(rec.validate_ms > 0.0);
    let resp = request(ctx.ports["http"], "GET", "/", "cafe.example.com", &[]);
    assert_eq!(
        (resp.status, resp.header("X-Config-Generation")),
        (200, Some("1"))
    );
    // And a replica does not start with it.
    let mut ctx2 = context(&cfg, dir.path(), &[("app", addrs(&f))]);
    ctx2.prefix = dir.path().join("caddy-1");
    let json = caddy::render(&cfg, &ctx2).unwrap();
    match Replica::start("caddy-1", &ctx2, &json) {
        Err(proxybench_proxy::Error::Refused(m)) => assert!(m.contains("is repeated"), "{m}"),
        other => panic!("{other:?}"),
    }
    // A port held by a socket without SO_REUSEPORT passes `caddy validate` (which binds
    // nothing) but not Caddy's load: the reload records Caddy's answer and the old config
    // serves on.
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = squatter.local_addr().unwrap().port();
    let mut grown = one_route();
    grown.listeners.push(proxybench_proxy::config::Listener {
        name: "extra".into(),
        port: Some(taken),
        ..Default::default()
    });
    ctx.generation = 3;
    let json = caddy::render(&grown, &ctx).unwrap();
    let rec = r.reload(&json, 3, Instant::now());
    let err = rec.error.expect("the load was refused");
    assert!(
        err.starts_with("caddy load: 400 ") && err.contains("address already in use"),
        "{err}"
    );
    assert_eq!(rec.served_ms, None);
    assert_eq!(r.generation(), 1);
    // Caddy started the refused config's servers before one failed to bind. Those it had
    // started keep serving the refused config (caddyserver/caddy#7175), and which ones depends
    // on Go's map order: either the running generation answers alone (50 in a row), or the
    // record says which ports still answer with the refused one.
    match err.split_once("; the refused generation 3 still answers on port(s) ") {
        None => {
            for _ in 0..50 {
                let resp = request(ctx.ports["http"], "GET", "/", "x", &[]);
                assert_eq!(resp.header("X-Config-Generation"), Some("1"));
            }
        }
        Some((_, leak)) => {
            eprintln!("Caddy left the refused generation serving: {leak}");
            let http = ctx.ports["http"];
            let mut seen = BTreeMap::new();
            for _ in 0..50 {
                let resp = request(http, "GET", "/", "x", &[]);
                *seen
                    .entry(resp.header("X-Config-Generation").map(str::to_string))
                    .or_insert(0) += 1;
            }
            // Each listed port answers with generation 3 at least once in 8 tries, and no
            // generation but 1 and 3 answers anywhere.
            assert!(
                seen.keys()
                    .all(|g| matches!(g.as_deref(), Some("1") | Some("3"))),
                "{seen:?}"
            );
            if !leak.contains(&format!("{http}")) {
                assert_eq!(seen.len(), 1, "port {http} is not listed: {seen:?}");
            }
        }
    }
    // A replica that cannot bind exits at start with Caddy's words, and nothing is left.
    let mut ctx3 = context(&grown, dir.path(), &[("app", addrs(&f))]);
    ctx3.ports.insert("extra".into(), taken);
    ctx3.prefix = dir.path().join("caddy-3");
    let json = caddy::render(&grown, &ctx3).unwrap();
    match Replica::start("caddy-3", &ctx3, &json) {
        Err(proxybench_proxy::Error::Refused(m)) => {
            assert!(
                m.contains("caddy exited") && m.contains("address already in use"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    // A valid config checks, and the check is timed.
    cfg.listeners[0].server_names = vec!["cafe.example.com".into()];
    let ok = d
        .check(&d.render(&cfg, &ctx).unwrap(), &dir.path().join("check"))
        .unwrap()
        .unwrap();
    eprintln!("caddy validate passed in {:?}", ok.took);
    assert!(ok.warnings.is_empty(), "{:?}", ok.warnings);
}

fn routing_config() -> ProxyConfig {
    parse(
        r#"
[proxy]
kind = "caddy"
keepalive_timeout = "30s"
worker_shutdown_timeout = "5s"
[[proxy.listeners]]
name = "http"
server_names = ["cafe.example.com", "tea.example.com"]
[[proxy.listeners]]
name = "https"
tls = true
server_names = ["cafe.example.com"]
[[proxy.upstreams]]
name = "coffee"
backends = "coffee"
lb = "least_conn"
keepalive = 8
next_upstream_tries = 2
connect_timeout = "2s"
[[proxy.upstreams]]
name = "tea"
backends = "tea"
lb = { hash = "$request_uri" }
max_fails = 0
[[proxy.routes]]
path = "/coffee"
upstream = "coffee"
[[proxy.routes]]
path = "/coffee"
headers = { "X-Tea" = "yes" }
upstream = "tea"
[[proxy.routes]]
path = "/coffee/exact"
match = "exact"
return = 204
[[proxy.routes]]
path = "/tea"
query = { cup = "big" }
method = "POST"
upstream = "tea"
[[proxy.routes]]
path = "/go"
return = 302
body = "https://example.com/{x}"
[[proxy.routes]]
path = "/tea-only"
host = "tea.example.com"
return = 200
body = "tea host"
"#,
    )
}

#[test]
fn the_rendered_config_routes_as_nginx_would() {
    let f = fleet(2);
    let all = addrs(&f);
    let cfg = routing_config();
    let dir = scratch("caddy-routes");
    let mut ctx = context(
        &cfg,
        dir.path(),
        &[("coffee", vec![all[0]]), ("tea", vec![all[1]])],
    );
    let r = start("caddy-0", &cfg, &mut ctx, dir.path());
    let port = ctx.ports["http"];
    let backend = |resp: &common::Resp| resp.header("X-Backend").unwrap_or("").to_string();
    let get = |path: &str, host: &str, h: &[(&str, &str)]| request(port, "GET", path, host, h);
    // Prefix, header condition, exact path, and the 404 of a path no route covers.
    let c = get("/coffeehouse", "cafe.example.com", &[]);
    assert_eq!((c.status, backend(&c).as_str()), (200, "backend-0"));
    assert_eq!(c.header("X-Config-Generation"), Some("1"));
    assert_eq!(
        c.header("X-Proxybench-Upstream"),
        Some(all[0].to_string().as_str())
    );
    let t = get("/coffee", "cafe.example.com", &[("X-Tea", "yes")]);
    assert_eq!(backend(&t), "backend-1");
    assert_eq!(get("/coffee/exact", "cafe.example.com", &[]).status, 204);
    assert_eq!(
        backend(&get("/coffee/exact/more", "cafe.example.com", &[])),
        "backend-0"
    );
    let nf = get("/nothing", "cafe.example.com", &[]);
    assert_eq!(
        (nf.status, nf.header("X-Config-Generation")),
        (404, Some("1"))
    );
    // Query and method: both must hold; otherwise the path has no fallback, so 404.
    let p = request(port, "POST", "/tea?cup=big", "cafe.example.com", &[]);
    assert_eq!(backend(&p), "backend-1");
    assert_eq!(get("/tea?cup=big", "cafe.example.com", &[]).status, 404);
    // Return bodies are sent as written; 3xx bodies become the Location.
    let go = get("/go", "cafe.example.com", &[]);
    assert_eq!(
        (go.status, go.header("Location")),
        (302, Some("https://example.com/{x}"))
    );
    // Host routes, and nginx's default server (the first name) for an unknown host.
    assert_eq!(get("/tea-only", "tea.example.com", &[]).body, "tea host");
    assert_eq!(get("/tea-only", "cafe.example.com", &[]).status, 404);
    assert_eq!(get("/tea-only", "unknown.example.com", &[]).status, 404);
    assert_eq!(
        backend(&get("/coffee", "unknown.example.com", &[])),
        "backend-0"
    );
    // TLS with the run's certificate.
    let https = ctx.ports["https"];
    let out = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
        .arg(&ctx.tls.as_ref().unwrap().ca)
        .arg("--resolve")
        .arg(format!("cafe.example.com:{https}:127.0.0.1"))
        .arg(format!("https://cafe.example.com:{https}/coffee"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
    // Caddy writes a request's access-log line after its response: curl's may still be
    // coming when curl has exited.
    assert_eq!(settled_lines(&[r.access_log_path()], 13), 13);
    // No error was logged.
    let sum = logs::summarize(
        LogFormat::Caddy,
        &[r.access_log_path()],
        &[r.error_log_path()],
    )
    .unwrap();
    assert_eq!(
        sum.error_levels.get("error"),
        None,
        "{:?}",
        sum.error_groups
    );
    assert_eq!(sum.access_lines, 13);
    // No warning about the traffic; the TLS server's automatic HTTPS being off is Caddy's one
    // warning, a lifecycle line (logged at every load), and nothing speaks of ACME or of
    // obtaining a certificate.
    let at = |level: &str| -> Vec<&str> {
        sum.error_groups
            .iter()
            .filter(|g| g.level == level)
            .map(|g| g.message.as_str())
            .collect()
    };
    assert_eq!(at("warn"), Vec::<&str>::new());
    assert!(
        at(proxybench_proxy::logs::LIFECYCLE)
            .contains(&"automatic HTTPS is completely disabled for server"),
        "{:?}",
        sum.error_groups
    );
    let own = std::fs::read_to_string(r.error_log_path()).unwrap();
    let lower = own.to_ascii_lowercase();
    assert!(
        !lower.contains("acme") && !lower.contains("obtain"),
        "{own}"
    );
}

#[test]
fn the_render_maps_the_model_to_caddy_json() {
    let cfg = routing_config();
    let dir = scratch("caddy-render");
    let a: SocketAddr = "127.0.0.1:9101".parse().unwrap();
    let b: SocketAddr = "127.0.0.1:9102".parse().unwrap();
    let mut ctx = context(&cfg, dir.path(), &[("coffee", vec![a, b]), ("tea", vec![])]);
    ctx.generation = 7;
    let v: Value = serde_json::from_str(&caddy::render(&cfg, &ctx).unwrap()).unwrap();
    assert_eq!(v["@id"], "pb:gomaxprocs=1");
    assert_eq!(
        v["admin"]["listen"],
        format!("127.0.0.1:{}", ctx.control_port)
    );
    let http = &v["apps"]["http"];
    assert_eq!(http["grace_period"], 5_000_000_000u64);
    let s = &http["servers"]["http"];
    assert_eq!(s["listen"][0], format!("127.0.0.1:{}", ctx.ports["http"]));
    // No certificate managed for the names, no redirect, and no outbound call.
    assert_eq!(
        s["automatic_https"],
        serde_json::json!({"skip": ["cafe.example.com", "tea.example.com"], "disable_redirects": true})
    );
    assert_eq!(http["servers"]["https"]["automatic_https"]["disable"], true);
    assert_eq!(s["idle_timeout"], 30_000_000_000u64);
    assert_eq!(s["logs"]["default_logger_name"], "pb_access");
    let routes = s["routes"].as_array().unwrap();
    assert_eq!(
        routes[0]["handle"][0]["response"]["set"]["X-Config-Generation"][0],
        "7"
    );
    // cafe and tea hold different routes (tea-only): two host routes, then the default.
    assert_eq!(
        routes[1]["match"][0]["host"],
        serde_json::json!(["cafe.example.com"])
    );
    assert_eq!(
        routes[2]["match"][0]["host"],
        serde_json::json!(["tea.example.com"])
    );
    assert!(routes[3].get("match").is_none());
    assert_eq!(routes.len(), 4, "one replica: no drain route");
    // With several replicas, every answer closes its connection while the replica drains.
    let mut several = cfg.clone();
    several.replicas = 3;
    let v3: Value = serde_json::from_str(&caddy::render(&several, &ctx).unwrap()).unwrap();
    let drain = &v3["apps"]["http"]["servers"]["http"]["routes"][1];
    assert_eq!(drain["match"][0]["file"]["try_files"][0], "/draining");
    assert_eq!(
        drain["handle"][0]["response"]["set"]["Connection"][0],
        "close"
    );
    let sub = routes[1]["handle"][0]["routes"].as_array().unwrap();
    let ids: Vec<&str> = sub
        .iter()
        .map(|r| r["@id"].as_str().unwrap_or("-"))
        .collect();
    let items: Vec<&str> = ids
        .iter()
        .map(|i| i.split_once(':').map_or("-", |x| x.1))
        .collect();
    // Exact first, then the longest prefix; conditions before their fallback; then 404.
    assert_eq!(
        items,
        ["route.2", "route.1", "route.0", "route.3", "route.3", "route.4", "-"]
    );
    assert_eq!(sub[1]["match"][0]["header"]["X-Tea"][0], "yes");
    assert_eq!(sub[1]["match"][0]["path_regexp"]["pattern"], "^/coffee");
    assert_eq!(
        sub[0]["match"][0]["path_regexp"]["pattern"],
        "^/coffee/exact$"
    );
    assert_eq!(sub[3]["match"][0]["query"]["cup"][0], "big");
    assert_eq!(sub[3]["match"][0]["method"][0], "POST");
    assert_eq!(sub[4]["handle"][0]["status_code"], 404);
    assert_eq!(
        sub[5]["handle"][0]["headers"]["Location"][0],
        "https://example.com/\\{x\\}"
    );
    let rp = &sub[2]["handle"][0];
    assert_eq!(rp["handler"], "reverse_proxy");
    assert_eq!(
        rp["upstreams"],
        serde_json::json!([{"dial": "127.0.0.1:9101"}, {"dial": "127.0.0.1:9102"}])
    );
    assert_eq!(
        rp["load_balancing"]["selection_policy"]["policy"],
        "least_conn"
    );
    assert_eq!(rp["load_balancing"]["retries"], 1);
    assert_eq!(rp["transport"]["keep_alive"]["max_idle_conns_per_host"], 8);
    assert_eq!(rp["transport"]["dial_timeout"], 2_000_000_000u64);
    assert_eq!(rp["health_checks"]["passive"]["max_fails"], 1);
    let tea = &sub[1]["handle"][0];
    assert_eq!(
        tea["load_balancing"]["selection_policy"]["policy"],
        "uri_hash"
    );
    assert_eq!(
        tea["upstreams"][0]["dial"], "127.0.0.1:1",
        "an empty group answers 502"
    );
    assert!(tea.get("health_checks").is_none());
    assert_eq!(tea["transport"]["keep_alive"]["enabled"], false);
    // TLS: the run's certificate, no OCSP, selected by tag.
    let tls = &v["apps"]["tls"];
    assert_eq!(tls["disable_ocsp_stapling"], true);
    assert_eq!(tls["certificates"]["load_files"][0]["tags"][0], "pb");
    assert!(http["servers"]["https"]["tls_connection_policies"].is_array());
    // The admin server answers the generation.
    let admin = &http["servers"]["pb:admin"];
    assert_eq!(admin["listen"][0], format!("127.0.0.1:{}", ctx.admin_port));
    assert_eq!(admin["routes"][1]["handle"][0]["body"], "7\n");
    // Logs in the replica directory; the access log apart from Caddy's own.
    let logs = &v["logging"]["logs"];
    assert_eq!(
        logs["default"]["writer"]["filename"],
        dir.path().join("caddy.log").to_string_lossy().as_ref()
    );
    assert_eq!(logs["pb_access"]["include"][0], "http.log.access.pb_access");
    // What Caddy cannot express is refused at render, naming the item.
    ctx.groups.insert("app".into(), vec![a]);
    let mut limited = one_route();
    limited
        .rate_limits
        .push(proxybench_proxy::config::RateLimit::new("rl", 5.0));
    let err = caddy::render(&limited, &ctx).unwrap_err().to_string();
    assert!(err.contains("rate limit 'rl'"), "{err}");
    let mut hashed = one_route();
    hashed.upstreams[0].lb = proxybench_proxy::config::Lb::Hash {
        key: "$remote_addr$uri".into(),
        consistent: false,
    };
    let err = caddy::render(&hashed, &ctx).unwrap_err().to_string();
    assert!(err.contains("can hash only"), "{err}");
    let mut bounded = one_route();
    bounded.keepalive_requests = 100;
    let err = caddy::render(&bounded, &ctx).unwrap_err().to_string();
    assert!(err.starts_with("keepalive_requests: "), "{err}");
    let mut no_control = ctx.clone();
    no_control.control_port = 0;
    assert!(caddy::render(&one_route(), &no_control).is_err());
}

#[test]
fn every_stop_mode_ends_caddy_and_a_drop_leaves_nothing() {
    let f = fleet(1);
    let cfg = one_route();
    for mode in [StopMode::Graceful, StopMode::Fast, StopMode::Kill] {
        let dir = scratch("caddy-stop");
        let mut ctx = context(&cfg, dir.path(), &[("app", addrs(&f))]);
        let mut r = start("caddy-0", &cfg, &mut ctx, dir.path());
        let pids = r.pids();
        assert_eq!(pids.len(), 1, "caddy is one process: {pids:?}");
        r.stop(mode).unwrap();
        assert!(!r.is_running());
        assert_eq!(
            common::wait_gone(&pids, Duration::from_secs(2)),
            Vec::<u32>::new()
        );
        r.stop(StopMode::Kill).unwrap();
    }
    let dir = scratch("caddy-drop");
    let mut ctx = context(&cfg, dir.path(), &[("app", addrs(&f))]);
    let r = start("caddy-0", &cfg, &mut ctx, dir.path());
    let pids = r.pids();
    drop(r);
    assert_eq!(
        common::wait_gone(&pids, Duration::from_secs(2)),
        Vec::<u32>::new()
    );
}
