//! Rendered configs route real requests through a real nginx to real backends on loopback:
//! paths, hosts, header/query/method matches, return, rate limits, upstream keep-alive, every
//! load-balancing method, and TLS with the generated certificate.

mod common;

use common::{context, get, parse, request, scratch, start, Backend};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

fn addrs(bs: &[&Backend]) -> Vec<SocketAddr> {
    bs.iter().map(|b| b.addr).collect()
}

const ROUTES: &str = r#"
[[proxy.listeners]]
name = "http"
server_names = ["cafe.example.com", "tea.example.com"]

[[proxy.upstreams]]
name = "a"
backends = "a"
[[proxy.upstreams]]
name = "b"
backends = "b"
[[proxy.upstreams]]
name = "c"
backends = "c"
[[proxy.upstreams]]
name = "d"
backends = "d"

[[proxy.routes]]
host = "cafe.example.com"
path = "/coffee"
upstream = "a"
[[proxy.routes]]
host = "cafe.example.com"
path = "/exact"
match = "exact"
upstream = "b"
[[proxy.routes]]
host = "cafe.example.com"
path = "/exact"
upstream = "a"

[[proxy.routes]]
host = "tea.example.com"
path = "/tea"
upstream = "b"
[[proxy.routes]]
host = "tea.example.com"
path = "/tea"
headers = { "X-Version" = "v2" }
upstream = "c"
[[proxy.routes]]
host = "tea.example.com"
path = "/tea"
query = { tier = "gold" }
upstream = "d"
[[proxy.routes]]
host = "tea.example.com"
path = "/tea"
method = "POST"
upstream = "a"
[[proxy.routes]]
host = "tea.example.com"
path = "/tea"
headers = { "x-version" = "v3.*" }
upstream = "d"

[[proxy.routes]]
path = "/matched-only"
headers = { "x-pass" = "yes" }
upstream = "a"

[[proxy.routes]]
path = "/ret"
return = 201
body = "made \"here\""
"#;

#[test]
fn paths_hosts_and_matches_reach_the_right_backend() {
    let (a, b, c, d) = (
        Backend::start("a"),
        Backend::start("b"),
        Backend::start("c"),
        Backend::start("d"),
    );
    let cfg = parse(ROUTES);
    let dir = scratch("routes");
    let mut ctx = context(
        &cfg,
        dir.path(),
        &[
            ("a", addrs(&[&a])),
            ("b", addrs(&[&b])),
            ("c", addrs(&[&c])),
            ("d", addrs(&[&d])),
        ],
    );
    let _r = start("nginx-0", &cfg, &mut ctx, dir.path());
    let port = ctx.ports["http"];
    let body = |method: &str, path: &str, host: &str, h: &[(&str, &str)]| {
        let r = request(port, method, path, host, h);
        assert_eq!(
            r.header("X-Config-Generation"),
            Some("1"),
            "{method} {host}{path}: {r:?}"
        );
        (r.status, r.body)
    };
    let ok = |s: &str| (200, s.to_string());
    let cafe = "cafe.example.com";
    let tea = "tea.example.com";
    assert_eq!(body("GET", "/coffee", cafe, &[]), ok("a"));
    assert_eq!(body("GET", "/coffee/latte", cafe, &[]), ok("a"));
    assert_eq!(
        body("GET", "/exact", cafe, &[]),
        ok("b"),
        "exact beats prefix"
    );
    assert_eq!(
        body("GET", "/exact/more", cafe, &[]),
        ok("a"),
        "prefix takes the rest"
    );
    assert_eq!(
        body("GET", "/coffee", tea, &[]).0,
        404,
        "the tea host has no /coffee"
    );
    assert_eq!(
        body("GET", "/tea", tea, &[]),
        ok("b"),
        "no condition: fallback"
    );
    assert_eq!(body("GET", "/tea", tea, &[("X-Version", "v2")]), ok("c"));
    assert_eq!(
        body("GET", "/tea", tea, &[("x-version", "V2")]),
        ok("b"),
        "values are exact"
    );
    assert_eq!(
        body("GET", "/tea", tea, &[("x-version", "v3.*")]),
        ok("d"),
        "literal, not a regex"
    );
    assert_eq!(body("GET", "/tea", tea, &[("x-version", "v3x1")]), ok("b"));
    assert_eq!(body("GET", "/tea?tier=gold", tea, &[]), ok("d"));
    assert_eq!(body("GET", "/tea?tier=silver", tea, &[]), ok("b"));
    assert_eq!(body("POST", "/tea", tea, &[]), ok("a"));
    // Header v2 and POST both match; the earlier route (v2) wins.
    assert_eq!(body("POST", "/tea", tea, &[("x-version", "v2")]), ok("c"));
    assert_eq!(
        body("GET", "/matched-only", tea, &[("x-pass", "yes")]),
        ok("a")
    );
    assert_eq!(
        body("GET", "/matched-only", tea, &[]).0,
        404,
        "no fallback: 404"
    );
    assert_eq!(
        body("GET", "/ret", cafe, &[]),
        (201, "made \"here\"".to_string())
    );
    assert_eq!(body("GET", "/nothing", cafe, &[]).0, 404);
    // The query and the path reach the backend unchanged after the internal jump.
    assert_eq!(a.requests(), 5);
    assert_eq!(b.requests(), 5);
    assert_eq!(c.requests(), 2);
    assert_eq!(d.requests(), 2);
}

#[test]
fn a_rate_limit_answers_its_status() {
    let a = Backend::start("a");
    let cfg = parse(
        r#"
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "a"
backends = "a"
[[proxy.routes]]
path = "/"
upstream = "a"
rate_limit = "slow"
[[proxy.routes]]
path = "/free"
upstream = "a"
[[proxy.rate_limits]]
name = "slow"
rate = "1r/m"
status = 429
"#,
    );
    let dir = scratch("limit");
    let mut ctx = context(&cfg, dir.path(), &[("a", addrs(&[&a]))]);
    let r = start("nginx-0", &cfg, &mut ctx, dir.path());
    let port = ctx.ports["http"];
    assert_eq!(get(port, "/", "x").status, 200);
    // At one request a minute and no burst, the next one within the minute is rejected.
    let rejected = get(port, "/", "x");
    assert_eq!(rejected.status, 429);
    assert_eq!(rejected.header("X-Config-Generation"), Some("1"));
    assert_eq!(get(port, "/free", "x").status, 200);
    assert_eq!(a.requests(), 2);
    drop(r);
    let sum = proxybench_proxy::logs::summarize(
        proxybench_proxy::logs::LogFormat::NginxJson,
        &[dir.path().join("nginx-0/access.log")],
        &[dir.path().join("nginx-0/error.log")],
    )
    .unwrap();
    assert_eq!(sum.access_status.get(&429), Some(&1));
    assert_eq!(sum.limit_req_status.get("REJECTED"), Some(&1));
    assert_eq!(sum.limit_req_status.get("PASSED"), Some(&1));
    assert!(
        sum.error_groups.iter().any(|g| g.level == "error"
            && g.message == "limiting requests, excess: N by zone \"rl_slow\""),
        "{:?}",
        sum.error_groups
    );
}

#[test]
fn upstream_keepalive_reuses_connections_and_none_does_not() {
    let (kept, fresh) = (Backend::start("kept"), Backend::start("fresh"));
    let cfg = parse(
        r#"
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "kept"
backends = "kept"
keepalive = 8
[[proxy.upstreams]]
name = "fresh"
backends = "fresh"
[[proxy.routes]]
path = "/kept"
upstream = "kept"
[[proxy.routes]]
path = "/fresh"
upstream = "fresh"
"#,
    );
    let dir = scratch("keepalive");
    let mut ctx = context(
        &cfg,
        dir.path(),
        &[("kept", addrs(&[&kept])), ("fresh", addrs(&[&fresh]))],
    );
    let _r = start("nginx-0", &cfg, &mut ctx, dir.path());
    let port = ctx.ports["http"];
    for _ in 0..50 {
        assert_eq!(get(port, "/kept", "x").body, "kept");
        assert_eq!(get(port, "/fresh", "x").body, "fresh");
    }
    assert_eq!(kept.requests(), 50);
    assert_eq!(fresh.requests(), 50);
    // Sequential requests through one worker need a single cached connection.
    assert_eq!(kept.accepts(), 1, "keepalive 8 should reuse one connection");
    assert_eq!(
        fresh.accepts(),
        50,
        "without keepalive every request connects anew"
    );
}

fn lb_counts(lb: &str, uris: &[&str], slow_delay: Duration, parallel: usize) -> (u64, u64) {
    let fast = Backend::start("fast");
    let slow = Backend::with_delay("slow", slow_delay);
    let cfg = parse(&format!(
        "[[proxy.listeners]]\nname = \"http\"\n[[proxy.upstreams]]\nname = \"u\"\nbackends = \"g\"\nlb = {lb}\n\
         [[proxy.routes]]\npath = \"/\"\nupstream = \"u\"\n"
    ));
    let dir = scratch("lb");
    let mut ctx = context(&cfg, dir.path(), &[("g", addrs(&[&slow, &fast]))]);
    let _r = start("nginx-0", &cfg, &mut ctx, dir.path());
    let port = ctx.ports["http"];
    let uris: Arc<Vec<String>> = Arc::new(uris.iter().map(|s| s.to_string()).collect());
    let threads: Vec<_> = (0..parallel)
        .map(|t| {
            let uris = uris.clone();
            std::thread::spawn(move || {
                for (i, u) in uris.iter().enumerate() {
                    if i % parallel == t {
                        assert_eq!(get(port, u, "x").status, 200);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    (fast.requests(), slow.requests())
}

#[test]
fn round_robin_alternates_exactly() {
    let uris = vec!["/"; 20];
    assert_eq!(
        lb_counts("\"round_robin\"", &uris, Duration::ZERO, 1),
        (10, 10)
    );
}

#[test]
fn least_conn_prefers_the_fast_backend() {
    // Four clients at once; the slow backend holds each request 200 ms, so least_conn sends
    // most requests to the fast one while round robin would split them evenly.
    let uris = vec!["/"; 80];
    for lb in ["\"least_conn\"", "\"random_two_least_conn\""] {
        let (fast, slow) = lb_counts(lb, &uris, Duration::from_millis(200), 4);
        assert_eq!(fast + slow, 80);
        assert!(fast >= 3 * slow, "{lb}: fast {fast} slow {slow}");
    }
}

#[test]
fn hashing_methods_pin_requests() {
    // Every loopback client has the same address: ip_hash sends all to one server.
    let uris = vec!["/"; 20];
    let (f, s) = lb_counts("\"ip_hash\"", &uris, Duration::ZERO, 1);
    assert!((f, s) == (20, 0) || (f, s) == (0, 20), "ip_hash {f}/{s}");
    // The same URI always lands on the same server; many URIs use both.
    let (f, s) = lb_counts("{ hash = \"$request_uri\" }", &uris, Duration::ZERO, 1);
    assert!(
        (f, s) == (20, 0) || (f, s) == (0, 20),
        "hash one uri {f}/{s}"
    );
    let many: Vec<String> = (0..40).map(|i| format!("/item/{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let (f, s) = lb_counts(
        "{ hash = \"$request_uri\", consistent = true }",
        &many,
        Duration::ZERO,
        1,
    );
    assert_eq!(f + s, 40);
    assert!(f > 0 && s > 0, "consistent hash over 40 uris {f}/{s}");
    let (f, s) = lb_counts("\"random\"", &many, Duration::ZERO, 1);
    assert!(f > 0 && s > 0 && f + s == 40, "random {f}/{s}");
}

fn tls_get(port: u16, ca: &std::path::Path, sni: &str, path: &str) -> Result<common::Resp, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use std::io::{Read, Write};
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(ca).unwrap();
    for c in CertificateDer::pem_slice_iter(&pem) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(sni.to_string()).unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let sock = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    let req = format!("GET {path} HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n");
    tls.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    match tls.read_to_end(&mut buf) {
        Ok(_) => {}
        // nginx may close without close_notify after Connection: close.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !buf.is_empty() => {}
        Err(e) => return Err(e.to_string()),
    }
    Ok(common::parse_response(&buf))
}

#[test]
fn tls_listener_serves_with_the_generated_certificate() {
    let a = Backend::start("a");
    let cfg = parse(
        r#"
[[proxy.listeners]]
name = "https"
tls = true
server_names = ["cafe.example.com", "tea.example.com"]
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "a"
backends = "a"
[[proxy.routes]]
path = "/tea"
upstream = "a"
"#,
    );
    let dir = scratch("tls");
    let mut ctx = context(&cfg, dir.path(), &[("a", addrs(&[&a]))]);
    let _r = start("nginx-0", &cfg, &mut ctx, dir.path());
    let port = ctx.ports["https"];
    let ca = ctx.tls.as_ref().unwrap().ca.clone();
    for sni in ["cafe.example.com", "tea.example.com"] {
        let r = tls_get(port, &ca, sni, "/tea").unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "a"), "{sni}");
        assert_eq!(r.header("X-Config-Generation"), Some("1"));
    }
    // The certificate names exactly the listeners' hosts: anything else fails verification.
    let err = tls_get(port, &ca, "evil.example.com", "/tea").unwrap_err();
    assert!(
        err.contains("NotValidForName") || err.contains("not valid"),
        "{err}"
    );
    // The plain listener speaks HTTP on its own port.
    assert_eq!(get(ctx.ports["http"], "/tea", "x").body, "a");
    assert_eq!(a.requests(), 3);
}
