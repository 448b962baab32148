//! The HAProxy driver with the real haproxy (Debian's 2.6), the real backend fleet and the real
//! load engine: counts that agree three ways, reloads and a gradual scale-down under closed-loop
//! keep-alive load without a failed request, a config refused by `haproxy -c` traced to its
//! item, routing, TLS and rate limits as served, and the rendered config itself.

mod common;

use backend::{Fleet, FleetConfig, InstanceConfig};
use common::{context, parse, request, scratch, Backend};
use proxybench_proxy::driver::RenderContext;
use proxybench_proxy::driver::{Driver as _, Replica as _};
use proxybench_proxy::haproxy::{self, Replica};
use proxybench_proxy::logs::{self, LogFormat};
use proxybench_proxy::{ProxyConfig, ProxyKind, StopMode};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn fleet(n: usize) -> Fleet {
    Fleet::start(FleetConfig {
        instances: (0..n)
            .map(|i| InstanceConfig {
                name: format!("app-{i}"),
                addr: "127.0.0.1:0".parse().unwrap(),
                profile: "latency=1ms".parse().unwrap(),
            })
            .collect(),
        ..FleetConfig::default()
    })
    .unwrap()
}

fn addrs(f: &Fleet) -> Vec<SocketAddr> {
    f.addrs().into_iter().map(|(_, a)| a).collect()
}

fn backend_total(f: &Fleet) -> u64 {
    f.counters().iter().map(|c| c.requests).sum()
}

fn app(extra: &str) -> ProxyConfig {
    parse(&format!(
        r#"
[proxy]
kind = "haproxy"
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "app"
backends = "app"
keepalive = 16
[[proxy.routes]]
path = "/"
upstream = "app"
{extra}
"#
    ))
}

/// Renders through the driver seam, checks with `haproxy -c` and starts replica `name` in
/// `root/name`.
fn start(name: &str, cfg: &ProxyConfig, ctx: &mut RenderContext, root: &Path) -> Replica {
    ctx.prefix = root.join(name);
    let d = proxybench_proxy::driver(ProxyKind::Haproxy);
    let r = d.render(cfg, ctx).unwrap();
    assert_eq!(r.file, "haproxy.cfg");
    d.check(&r, &ctx.prefix).unwrap().unwrap();
    Replica::start(name, &ctx.prefix, &r.text, ctx.admin_port, ctx.generation).unwrap()
}

fn closed_loop(port: u16, connections: u32) -> load::Config {
    let mut c = load::Config::new(&format!("http://127.0.0.1:{port}/")).unwrap();
    c.connections = connections;
    c.threads = 2;
    c.duration = Some(Duration::from_secs(120));
    c.timeout = Duration::from_secs(10);
    c
}

/// Access-log lines once the log holds at least `n` (HAProxy writes a line when the stream
/// ends, just after the client read its response).
fn access_summary(path: &Path, n: u64) -> model::LogSummary {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = logs::summarize(LogFormat::Haproxy, &[path.to_path_buf()], &[]).expect("read log");
        if s.access_lines >= n || Instant::now() >= deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn n_requests_agree_between_client_access_log_and_backends() {
    let f = fleet(3);
    let cfg = app("");
    let dir = scratch("hap-n");
    let mut ctx = context(&cfg, dir.path(), &[("app", addrs(&f))]);
    let r = start("haproxy-0", &cfg, &mut ctx, dir.path());
    let n = 5000;
    let mut lc = closed_loop(ctx.ports["http"], 8);
    lc.requests = Some(n);
    let out = load::run(&lc, &load::Control::new()).unwrap();
    let s = &out.summary;
    assert_eq!((s.requests, s.error_total()), (n, 0), "{:?}", s.errors);
    assert_eq!(s.status.get(&200), Some(&n));
    let log = access_summary(&r.access_log_path(), n);
    assert_eq!(log.access_lines, n);
    assert_eq!(log.access_status.get(&200), Some(&n));
    assert_eq!(backend_total(&f), n);
    // Every line names the server it went to, and the three servers share the load.
    let per_server: u64 = addrs(&f)
        .iter()
        .map(|a| log.upstream_addr.get(&a.to_string()).copied().unwrap_or(0))
        .sum();
    assert_eq!(per_server, n);
    for c in f.counters() {
        assert_eq!(
            log.upstream_addr.get(&c.addr).copied(),
            Some(c.requests),
            "{}",
            c.name
        );
    }
    // The stats page as a stub sample: the worker counted every request.
    let sample = r.status(Instant::now()).unwrap();
    assert!(sample.requests >= n, "{sample:?}");
    f.shutdown();
}

#[test]
fn reloads_under_keepalive_load_fail_no_request() {
    let f = fleet(2);
    let cfg = app("");
    let dir = scratch("hap-reload");
    let mut ctx = context(&cfg, dir.path(), &[("app", addrs(&f))]);
    let mut r = start("haproxy-0", &cfg, &mut ctx, dir.path());
    let lc = closed_loop(ctx.ports["http"], 16);
    let ctl = load::Control::new();
    let stop = ctl.stop.clone();
    let origin = ctl.origin;
    let (records, out) = std::thread::scope(|s| {
        let load = s.spawn(|| load::run(&lc, &ctl).unwrap());
        std::thread::sleep(Duration::from_millis(500));
        let mut records = Vec::new();
        for generation in 2..=6u64 {
            ctx.generation = generation;
            let text = haproxy::render(&cfg, &ctx).unwrap();
            let rec = r.reload(&text, generation, origin);
            assert_eq!(rec.error, None, "{rec:?}");
            records.push(rec);
            std::thread::sleep(Duration::from_millis(300));
        }
        stop.store(true, Ordering::SeqCst);
        (records, load.join().unwrap())
    });
    let mut records = records;
    proxybench_proxy::driver::settle_reloads(&mut records);
    let s = &out.summary;
    eprintln!(
        "haproxy reloads under load: {} requests; served_ms {:?}; old_workers_exited_ms {:?}",
        s.requests,
        records
            .iter()
            .map(|r| r.served_ms.unwrap())
            .collect::<Vec<_>>(),
        records
            .iter()
            .map(|r| r.old_workers_exited_ms.unwrap())
            .collect::<Vec<_>>()
    );
    assert!(s.requests > 0);
    assert_eq!(s.error_total(), 0, "{:?} {:?}", s.errors, s.error_messages);
    assert_eq!(s.non_2xx_3xx(), 0, "{:?}", s.status);
    assert_eq!(r.generation(), 6);
    let resp = request(ctx.ports["http"], "GET", "/", "x", &[]);
    assert_eq!(resp.header("X-Config-Generation"), Some("6"));
    // The client's count is the log's: no request vanished in a hand-over.
    let log = access_summary(&r.access_log_path(), s.requests + 1);
    assert_eq!(log.access_lines, s.requests + 1);
    // HAProxy wrote its proxies' stop notices into the same stream (3 per reload); they are not
    // access lines.
    let text = std::fs::read_to_string(r.access_log_path()).unwrap();
    let notices: Vec<&str> = text.lines().filter(|l| !l.starts_with("pb ")).collect();
    assert_eq!(notices.len(), 3 * records.len(), "{notices:#?}");
    assert!(
        notices.iter().all(|l| l.starts_with("Proxy ")),
        "{notices:#?}"
    );
    assert_eq!(log.access_status.get(&200), Some(&(s.requests + 1)));
    assert_eq!(backend_total(&f), s.requests + 1);
    f.shutdown();
}

#[test]
fn gradual_scale_down_under_load_fails_no_request() {
    let f = fleet(2);
    let cfg = app("");
    let dir = scratch("hap-scale");
    let mut ctx = context(&cfg, dir.path(), &[("app", addrs(&f))]);
    let mut replicas = Vec::new();
    for i in 0..3 {
        ctx.admin_port = testkit::free_port();
        replicas.push(start(&format!("haproxy-{i}"), &cfg, &mut ctx, dir.path()));
    }
    let lc = closed_loop(ctx.ports["http"], 24);
    let ctl = load::Control::new();
    let stop = ctl.stop.clone();
    let out = std::thread::scope(|s| {
        let load = s.spawn(|| load::run(&lc, &ctl).unwrap());
        std::thread::sleep(Duration::from_millis(700));
        // 3 -> 2 -> 1, one graceful stop at a time, under load.
        for mut r in replicas.drain(1..).rev() {
            let pids = r.pids();
            r.stop(StopMode::Graceful).unwrap();
            assert!(!r.is_running());
            assert_eq!(
                common::wait_gone(&pids, Duration::from_secs(5)),
                Vec::<u32>::new()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        stop.store(true, Ordering::SeqCst);
        load.join().unwrap()
    });
    let s = &out.summary;
    eprintln!(
        "haproxy scale-down 3 -> 1: {} requests, {} connects",
        s.requests, s.connects
    );
    assert!(s.requests > 0);
    assert_eq!(s.error_total(), 0, "{:?} {:?}", s.errors, s.error_messages);
    assert_eq!(s.non_2xx_3xx(), 0, "{:?}", s.status);
    // The client reconnected to the replica left (the stopped ones said Connection: close).
    assert!(s.connects > 24, "{}", s.connects);
    assert_eq!(request(ctx.ports["http"], "GET", "/", "x", &[]).status, 200);
    f.shutdown();
}

#[test]
fn a_value_haproxy_refuses_is_traced_to_its_route() {
    let a = Backend::start("a");
    // The model takes any status from 100; HAProxy's `http-request return` refuses 1xx.
    let mut cfg = app("[[proxy.routes]]\npath = \"/early\"\nreturn = 150\nbody = \"soon\"\n");
    let dir = scratch("hap-refused");
    let mut ctx = context(&cfg, dir.path(), &[("app", vec![a.addr])]);
    ctx.prefix = dir.path().join("haproxy-0");
    let d = proxybench_proxy::driver(ProxyKind::Haproxy);
    let rendered = d.render(&cfg, &ctx).unwrap();
    let refusal = d.check(&rendered, &ctx.prefix).unwrap().unwrap_err();
    assert_eq!(refusal.item.as_deref(), Some("route.1"), "{refusal:?}");
    let line = rendered
        .text
        .lines()
        .position(|l| l.contains("return status 150"))
        .unwrap()
        + 1;
    let want = format!(
        "config : parsing [{}:{line}] : error detected in frontend 'fe_http' while parsing \
         'http-request return' rule : Unexpected status code '150'.",
        ctx.prefix.join("haproxy-test.cfg").display()
    );
    assert!(
        refusal.message.starts_with("[ALERT]"),
        "{}",
        refusal.message
    );
    assert!(refusal.message.contains(&want), "{}", refusal.message);
    // A replica does not start on it, and says why in HAProxy's words.
    match Replica::start("haproxy-0", &ctx.prefix, &rendered.text, ctx.admin_port, 1) {
        Err(proxybench_proxy::Error::Refused(m)) => {
            assert!(m.contains("Unexpected status code '150'"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    // A running replica refuses the reload and keeps serving its generation.
    let refused = cfg.routes.pop().unwrap();
    let mut r = start("haproxy-0", &cfg, &mut ctx, dir.path());
    cfg.routes.push(refused);
    ctx.generation = 2;
    let bad = haproxy::render(&cfg, &ctx).unwrap();
    let pids = r.pids();
    let rec = r.reload(&bad, 2, Instant::now());
    assert!(
        rec.error
            .as_deref()
            .unwrap()
            .contains("Unexpected status code '150'"),
        "{rec:?}"
    );
    assert_eq!((rec.served_ms, rec.old_workers_exited_ms), (None, None));
    assert_eq!(r.pids(), pids, "no signal was sent");
    assert_eq!(r.generation(), 1);
    let resp = request(ctx.ports["http"], "GET", "/", "x", &[]);
    assert_eq!(
        (resp.status, resp.header("X-Config-Generation")),
        (200, Some("1"))
    );
}

#[test]
fn a_reload_the_master_cannot_load_keeps_the_old_worker() {
    let a = Backend::start("a");
    let cfg = app("");
    let dir = scratch("hap-bind");
    let mut ctx = context(&cfg, dir.path(), &[("app", vec![a.addr])]);
    let mut r = start("haproxy-0", &cfg, &mut ctx, dir.path());
    // A port held without SO_REUSEPORT: `haproxy -c` does not bind, the master does.
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = squatter.local_addr().unwrap().port();
    let mut grown = cfg.clone();
    grown.listeners.push(proxybench_proxy::config::Listener {
        name: "extra".into(),
        port: Some(taken),
        ..Default::default()
    });
    ctx.generation = 2;
    let text = haproxy::render(&grown, &ctx).unwrap();
    let rec = r.reload(&text, 2, Instant::now());
    let err = rec.error.expect("the master refused");
    assert!(
        err.contains("[ALERT]") && err.contains("cannot bind socket"),
        "{err}"
    );
    assert_eq!(rec.served_ms, None);
    let resp = request(ctx.ports["http"], "GET", "/", "x", &[]);
    assert_eq!(
        (resp.status, resp.header("X-Config-Generation")),
        (200, Some("1"))
    );
    // The next good reload still works.
    ctx.generation = 3;
    let rec = r.reload(&haproxy::render(&cfg, &ctx).unwrap(), 3, Instant::now());
    assert_eq!(rec.error, None);
    // Served means generation 3 answered on the admin listener. Until the master has told the
    // old worker to stop listening, it may still take a new connection on the shared port
    // (measured: one request 5 ms after served went to generation 1, the next to 3), so the
    // listener is asked until generation 3 answers; generation 2 must never answer.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    loop {
        let resp = request(ctx.ports["http"], "GET", "/", "x", &[]);
        let generation = resp.header("X-Config-Generation").map(str::to_string);
        assert_eq!(resp.status, 200, "{seen:?}");
        assert!(
            matches!(generation.as_deref(), Some("1" | "3")),
            "{generation:?} after {seen:?}"
        );
        seen.push(generation.clone());
        if generation.as_deref() == Some("3") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "generation 3 never answered: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn routes_hosts_and_returns_are_served_as_nginx_would() {
    let (plain, hdr, post, exact) = (
        Backend::start("plain"),
        Backend::start("hdr"),
        Backend::start("post"),
        Backend::start("exact"),
    );
    let cfg = parse(
        r#"
[[proxy.listeners]]
name = "http"
server_names = ["cafe.example.com", "tea.example.com"]
[[proxy.upstreams]]
name = "plain"
backends = "plain"
[[proxy.upstreams]]
name = "hdr"
backends = "hdr"
[[proxy.upstreams]]
name = "post"
backends = "post"
[[proxy.upstreams]]
name = "exact"
backends = "exact"
[[proxy.routes]]
path = "/coffee"
upstream = "plain"
[[proxy.routes]]
path = "/coffee"
headers = { "X-Version" = "v2 beta" }
upstream = "hdr"
[[proxy.routes]]
path = "/coffee"
method = "POST"
query = { q = "a'b" }
upstream = "post"
[[proxy.routes]]
path = "/coffee/exact"
match = "exact"
upstream = "exact"
[[proxy.routes]]
path = "/only-tea"
host = "tea.example.com"
return = 200
body = "tea's $body"
[[proxy.routes]]
path = "/moved"
return = 302
body = "http://elsewhere.example.com/"
"#,
    );
    let dir = scratch("hap-routes");
    let mut ctx = context(
        &cfg,
        dir.path(),
        &[
            ("plain", vec![plain.addr]),
            ("hdr", vec![hdr.addr]),
            ("post", vec![post.addr]),
            ("exact", vec![exact.addr]),
        ],
    );
    let _r = start("haproxy-0", &cfg, &mut ctx, dir.path());
    let port = ctx.ports["http"];
    let cafe = "cafe.example.com";
    let body = |m: &str, p: &str, h: &str, hs: &[(&str, &str)]| request(port, m, p, h, hs).body;
    assert_eq!(body("GET", "/coffee", cafe, &[]), "plain");
    assert_eq!(body("GET", "/coffeehouse", cafe, &[]), "plain");
    assert_eq!(
        body("GET", "/coffee", cafe, &[("x-version", "v2 beta")]),
        "hdr"
    );
    assert_eq!(
        body("GET", "/coffee", cafe, &[("x-version", "v2")]),
        "plain"
    );
    assert_eq!(body("POST", "/coffee?q=a'b", cafe, &[]), "post");
    assert_eq!(body("GET", "/coffee?q=a'b", cafe, &[]), "plain");
    assert_eq!(body("GET", "/coffee/exact", cafe, &[]), "exact");
    assert_eq!(body("GET", "/coffee/exact/more", cafe, &[]), "plain");
    // Host routing: the route lives on tea only; an unknown host falls to the first name.
    let tea = request(port, "GET", "/only-tea", "TEA.example.com:80", &[]);
    assert_eq!((tea.status, tea.body.as_str()), (200, "tea's $body"));
    assert_eq!(request(port, "GET", "/only-tea", cafe, &[]).status, 404);
    assert_eq!(request(port, "GET", "/only-tea", "other", &[]).status, 404);
    assert_eq!(body("GET", "/coffee", "other", &[]), "plain");
    let moved = request(port, "GET", "/moved", cafe, &[]);
    assert_eq!(
        (moved.status, moved.header("location")),
        (302, Some("http://elsewhere.example.com/"))
    );
    let none = request(port, "GET", "/nothing", cafe, &[]);
    assert_eq!(
        (none.status, none.header("X-Config-Generation")),
        (404, Some("1"))
    );
}

#[test]
fn tls_listener_serves_the_runs_certificate() {
    let f = fleet(1);
    let cfg = parse(
        r#"
[[proxy.listeners]]
name = "https"
tls = true
[[proxy.upstreams]]
name = "app"
backends = "app"
[[proxy.routes]]
path = "/"
upstream = "app"
"#,
    );
    let dir = scratch("hap-tls");
    let mut ctx = context(&cfg, dir.path(), &[("app", addrs(&f))]);
    let r = start("haproxy-0", &cfg, &mut ctx, dir.path());
    let mut lc = load::Config::new(&format!("https://localhost:{}/", ctx.ports["https"])).unwrap();
    lc.resolve =
        vec![load::Resolve::parse(&format!("localhost:{}:127.0.0.1", ctx.ports["https"])).unwrap()];
    lc.cacert = Some(ctx.tls.as_ref().unwrap().ca.clone());
    lc.connections = 2;
    lc.threads = 1;
    lc.requests = Some(50);
    let out = load::run(&lc, &load::Control::new()).unwrap();
    assert_eq!(
        out.summary.status.get(&200),
        Some(&50),
        "{:?}",
        out.summary.errors
    );
    // The key sits with the chain in an owner-only PEM in the replica directory.
    use std::os::unix::fs::PermissionsExt;
    let pem = r.dir().join("haproxy-tls.pem");
    assert_eq!(
        std::fs::metadata(&pem).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(backend_total(&f), 50);
    f.shutdown();
}

#[test]
fn a_rate_limit_rejects_past_the_window_and_logs_it() {
    let a = Backend::start("a");
    let cfg = parse(
        r#"
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "app"
backends = "app"
[[proxy.routes]]
path = "/"
upstream = "app"
rate_limit = "rl"
[[proxy.rate_limits]]
name = "rl"
rate = "2r/m"
burst = 2
status = 429
"#,
    );
    let dir = scratch("hap-rl");
    let mut ctx = context(&cfg, dir.path(), &[("app", vec![a.addr])]);
    let r = start("haproxy-0", &cfg, &mut ctx, dir.path());
    let statuses: Vec<u16> = (0..8)
        .map(|_| request(ctx.ports["http"], "GET", "/", "x", &[]).status)
        .collect();
    // rate x window + burst = 2 + 2 accepted in the one-minute window (nginx would accept the
    // first and queue two more, 30 s apart).
    assert_eq!(statuses, [200, 200, 200, 200, 429, 429, 429, 429]);
    assert_eq!(a.requests(), 4);
    let log = access_summary(&r.access_log_path(), 8);
    assert_eq!(log.limit_req_status.get("PASSED"), Some(&4));
    assert_eq!(log.limit_req_status.get("REJECTED"), Some(&4));
    assert_eq!(log.status_origin.get("429 proxy"), Some(&4));
}

#[test]
fn stop_modes_end_every_process() {
    let a = Backend::start("a");
    let cfg = app("");
    let dir = scratch("hap-stop");
    for (i, mode) in [StopMode::Graceful, StopMode::Fast, StopMode::Kill]
        .into_iter()
        .enumerate()
    {
        let mut ctx = context(&cfg, dir.path(), &[("app", vec![a.addr])]);
        let mut r = start(&format!("haproxy-{i}"), &cfg, &mut ctx, dir.path());
        let pids = r.pids();
        assert_eq!(pids.len(), 2, "master and one worker: {pids:?}");
        // Straight after a reload: the master is re-executing itself into its wait mode.
        ctx.generation = 2;
        let rec = r.reload(&haproxy::render(&cfg, &ctx).unwrap(), 2, Instant::now());
        assert_eq!(rec.error, None);
        let pids = r.pids();
        r.stop(mode).unwrap();
        assert!(!r.is_running());
        assert_eq!(
            common::wait_gone(&pids, Duration::from_secs(5)),
            Vec::<u32>::new()
        );
        if mode == StopMode::Graceful {
            // A soft stop, not a crash: the worker left with code 0 and the master followed.
            let text = std::fs::read_to_string(r.error_log_path()).unwrap();
            assert!(!text.contains("[ALERT]"), "{text}");
            assert!(
                text.contains("All workers exited. Exiting... (0)"),
                "{text}"
            );
        }
    }
}

#[test]
fn the_rendered_config_speaks_haproxy() {
    let mut cfg = app("");
    let ctx = RenderContext {
        prefix: "/tmp/pb-render/haproxy-0".into(),
        generation: 7,
        groups: [(
            "app".to_string(),
            vec![
                "127.0.0.1:9101".parse().unwrap(),
                "127.0.0.1:9102".parse().unwrap(),
            ],
        )]
        .into(),
        ports: [("http".to_string(), 8080)].into(),
        admin_port: 9000,
        ..RenderContext::default()
    };
    let lb = |cfg: &ProxyConfig, lb: &str| {
        let mut c = cfg.clone();
        c.upstreams[0].lb = parse(&format!(
            "[[proxy.upstreams]]\nname = \"x\"\nbackends = \"x\"\nlb = {lb}\n"
        ))
        .upstreams[0]
            .lb
            .clone();
        haproxy::render(&c, &ctx).unwrap()
    };
    let has = |text: &str, line: &str| text.lines().any(|l| l.trim() == line);
    for (model, want, hash) in [
        ("\"round_robin\"", "balance roundrobin", None),
        ("\"least_conn\"", "balance leastconn", None),
        ("\"random\"", "balance random(1)", None),
        ("\"random_two_least_conn\"", "balance random(2)", None),
        ("\"ip_hash\"", "balance source", Some("hash-type map-based")),
        (
            "{ hash = \"$request_uri\" }",
            "balance uri whole",
            Some("hash-type map-based"),
        ),
        (
            "{ hash = \"$http_x_user\", consistent = true }",
            "balance hash req.fhdr(x-user,1)",
            Some("hash-type consistent"),
        ),
    ] {
        let text = lb(&cfg, model);
        assert!(has(&text, want), "{model}: {text}");
        if let Some(h) = hash {
            assert!(has(&text, h), "{model}: {text}");
        }
    }
    let text = haproxy::render(&cfg, &ctx).unwrap();
    for line in [
        "bind 127.0.0.1:8080",
        "bind 127.0.0.1:9000",
        "http-after-response set-header X-Config-Generation 7",
        "http-request return status 200 content-type text/plain string \"7\\n\" if { path /generation }",
        "pidfile '/tmp/pb-render/haproxy-0/haproxy.pid'",
        "log stdout format raw local0",
        "http-reuse safe",
        "retries 1",
        "option redispatch 1",
        "retry-on conn-failure empty-response response-timeout",
        "server s0 127.0.0.1:9101 pool-max-conn 16",
        "server s1 127.0.0.1:9102 pool-max-conn 16",
        "# pb:item listener.http",
        "# pb:item upstream.app",
        "# pb:item route.0",
        "use_backend be_app if { var(txn.pb_route) -m int 0 }",
    ] {
        assert!(has(&text, line), "missing {line:?} in\n{text}");
    }
    // No keep-alive: a connection per request; next_upstream off: no retry.
    cfg.upstreams[0].keepalive = 0;
    cfg.upstreams[0].next_upstream = Some(vec![proxybench_proxy::config::NextUpstream::Off]);
    cfg.upstreams[0].next_upstream_tries = None;
    cfg.worker_processes = 2;
    cfg.worker_shutdown_timeout = Some(units::Dur(Duration::from_secs(5)));
    let text = haproxy::render(&cfg, &ctx).unwrap();
    for line in [
        "http-reuse never",
        "option http-server-close",
        "retries 0",
        "retry-on none",
        "nbthread 2",
        "hard-stop-after 5s",
        "server s0 127.0.0.1:9101",
    ] {
        assert!(has(&text, line), "missing {line:?} in\n{text}");
    }
    // Passive health as nginx's max_fails; max_fails = 0 turns it off (nginx's meaning), so no
    // server is observed at all rather than an error-limit of 0 HAProxy refuses.
    cfg.upstreams[0].max_fails = Some(3);
    let text = haproxy::render(&cfg, &ctx).unwrap();
    assert!(
        text.contains("observe layer4 error-limit 3 on-error mark-down"),
        "{text}"
    );
    cfg.upstreams[0].max_fails = Some(0);
    let text = haproxy::render(&cfg, &ctx).unwrap();
    assert!(!text.contains("observe layer4"), "{text}");
    cfg.upstreams[0].max_fails = None;
    // A retry on 429 has no HAProxy equivalent: refused at render, naming the upstream.
    cfg.upstreams[0].next_upstream = Some(vec![proxybench_proxy::config::NextUpstream::Http429]);
    let err = haproxy::render(&cfg, &ctx).unwrap_err().to_string();
    assert!(
        err.contains("upstream 'app'") && err.contains("http_429"),
        "{err}"
    );
    // TLS without a certificate is refused; with one, the PEM is written and named.
    let tls_dir = scratch("hap-render-tls");
    let mut tcfg = app("");
    tcfg.listeners[0].tls = true;
    let mut tctx = ctx.clone();
    tctx.prefix = tls_dir.path().join("haproxy-0");
    assert!(haproxy::render(&tcfg, &tctx).is_err());
    tctx.tls = Some(
        proxybench_proxy::tls::self_signed(&tcfg.tls_names(), &tls_dir.path().join("tls")).unwrap(),
    );
    let text = haproxy::render(&tcfg, &tctx).unwrap();
    let pem = tctx.prefix.join("haproxy-tls.pem");
    assert!(
        has(
            &text,
            &format!("bind 127.0.0.1:8080 ssl crt '{}'", pem.display())
        ),
        "{text}"
    );
    let pem_text = std::fs::read_to_string(&pem).unwrap();
    assert_eq!(pem_text.matches("BEGIN CERTIFICATE").count(), 2);
    assert_eq!(pem_text.matches("PRIVATE KEY-----").count(), 2);
    haproxy::DRIVER.validate(&text, &tctx.prefix).unwrap();
    // The seam names the kind and its log format.
    let d = proxybench_proxy::driver(ProxyKind::Haproxy);
    assert_eq!(d.name(), "haproxy");
    assert_eq!(ProxyKind::parse("haproxy"), Some(ProxyKind::Haproxy));
    assert!(d.version().unwrap().starts_with("HAProxy version 2."));
    assert_eq!(LogFormat::Haproxy.name(), "haproxy");
}
