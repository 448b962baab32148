//! `proxybench backend` as a user runs it: bad input gets one line and exit 2; a good run prints
//! its addresses, serves, and drains on SIGTERM; `proxybench load --http2` against it (h2c) counts
//! exactly what the backend counts.

use http1::client::{Reply, Request};
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn pb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_proxybench"))
}

/// Kills the child if the test fails before it exits.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn bad_specs_and_flags_exit_2_with_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--profile", "latency=lognorml(1ms,1)"],
            "proxybench: --profile: latency: unknown distribution 'lognorml' (use fixed, uniform, normal, lognormal, exponential)",
        ),
        (&["--count", "0"], "proxybench: --count: 0 is outside 1..10000"),
        (&["--threads", "0"], "proxybench: --threads: 0 is outside 1..256"),
        (&["--ports", "8081,x"], "proxybench: --ports: 'x' is not a port"),
        (&["--count", "2", "--ports", "1,2,3"], "proxybench: --count 2 disagrees with the 3 ports of --ports"),
        (
            &["--listen", "localhost"],
            "proxybench: --listen: 'localhost' is not an address like 127.0.0.1:8081",
        ),
        (
            &["--path-profile", "/slow"],
            "proxybench: --path-profile: '/slow' is not PATH=SPEC (e.g. /slow=latency=100ms)",
        ),
        (
            &["--path-profile", "/slow=latency=1"],
            "proxybench: --path-profile: path /slow: latency: duration '1' needs a unit (ns, us, ms, s, m, h, d)",
        ),
        (
            &["--count", "2", "--instance-profile", "backend-9=status=503"],
            "proxybench: --instance-profile: no instance named 'backend-9' (they are backend-0..backend-1)",
        ),
        (
            &["--instance-profile", "backend-0=size=1q"],
            "proxybench: --instance-profile backend-0: size: size '1q' has unknown unit 'q' (use b, k, m, g)",
        ),
        (&["--frobnicate"], "proxybench: unexpected argument '--frobnicate' found"),
        (&["--control", "nowhere"], "proxybench: --control: 'nowhere' is not an address like 127.0.0.1:8081"),
        (
            &["--control", "0.0.0.0:9000"],
            "proxybench: --control: 0.0.0.0:9000 is not a loopback address (the control port binds 127.0.0.0/8 or [::1] only)",
        ),
        (
            &["--control", "[::]:9000"],
            "proxybench: --control: [::]:9000 is not a loopback address (the control port binds 127.0.0.0/8 or [::1] only)",
        ),
        (&["--token-file", "t"], "proxybench: --token-file needs --control"),
        (&["--token-from", "t"], "proxybench: --token-from needs --control"),
        (
            &["--control", "127.0.0.1:0", "--token-from", "/nonexistent/token"],
            "proxybench: --token-from: cannot read /nonexistent/token: No such file or directory (os error 2)",
        ),
        (
            &["--drain-timeout", "3"],
            "proxybench: --drain-timeout: duration '3' needs a unit (ns, us, ms, s, m, h, d)",
        ),
    ];
    for (args, want) in cases {
        let out = pb().arg("backend").args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert_eq!(err.trim_end(), *want, "{args:?}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn a_busy_port_is_a_runtime_error() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap();
    let out = pb()
        .args(["backend", "--listen", &addr.to_string()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(&format!("proxybench: backend-0: cannot listen on {addr}: ")),
        "{err}"
    );
}

fn get(addr: SocketAddr, path: &str) -> Reply {
    get_with(addr, path, &[])
}

/// A GET (`Connection: close`) with extra headers, by the workspace's one HTTP/1 client.
fn get_with(addr: SocketAddr, path: &str, extra: &[(&str, &str)]) -> Reply {
    let req = Request {
        headers: extra,
        ..Request::get(path)
    };
    http1::client::request(addr, &req, Duration::from_secs(10)).unwrap()
}

/// Waits until instance `name` holds a request in flight, as the control endpoint at `control`
/// (with `auth`) counts, up to 10 s. A request sent from another thread and given a fixed
/// 100 ms to arrive can still be unsent on a busy machine when the test goes on: a SIGTERM
/// then finds nothing in flight, and the drain refuses the request instead of answering it.
fn wait_in_flight(control: SocketAddr, auth: &str, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = get_with(control, "/counters", &[("Authorization", auth)]);
        assert_eq!(r.status, 200, "{r:?}");
        let counters: serde_json::Value = serde_json::from_str(&r.text()).unwrap();
        let held = counters
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .and_then(|c| c["in_flight"].as_u64())
            .unwrap_or(0);
        if held > 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never had a request in flight: {counters}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn runs_in_the_foreground_and_drains_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let token_path = dir.path().join("ctl.token");
    let child = pb()
        .args([
            "backend",
            "--count",
            "2",
            "--listen",
            "127.0.0.1:0",
            "--threads",
            "2",
            "--profile",
            "latency=400ms",
            "--path-profile",
            "/fast=latency=0ms",
            "--instance-profile",
            "backend-1=status=503",
            "--control",
            "127.0.0.1:0",
        ])
        .arg("--token-file")
        .arg(&token_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut g = Guard(child);
    let mut lines = BufReader::new(g.0.stdout.take().unwrap()).lines();
    let mut addrs = Vec::new();
    for want in ["backend-0", "backend-1"] {
        let line = lines.next().unwrap().unwrap();
        let (name, addr) = line.split_once(' ').unwrap();
        assert_eq!(name, want);
        addrs.push(addr.parse::<SocketAddr>().unwrap());
    }
    // "control ADDR TOKEN-FILE": the token file is the one asked for, owner-only.
    let line = lines.next().unwrap().unwrap();
    let f: Vec<&str> = line.split(' ').collect();
    assert_eq!(
        (f.len(), f[0], f[2]),
        (3, "control", token_path.to_str().unwrap()),
        "{line}"
    );
    addrs.push(f[1].parse::<SocketAddr>().unwrap());
    let mode = std::fs::metadata(&token_path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let token = std::fs::read_to_string(&token_path).unwrap();
    let token = token.trim();
    assert_eq!(token.len(), 64, "{token}");
    let fast = get(addrs[0], "/fast");
    assert_eq!(fast.status, 200, "{fast:?}");
    assert_eq!(fast.header("X-Backend"), Some("backend-0"));
    assert_eq!(get(addrs[1], "/fast").status, 503);
    let refused = get(addrs[2], "/counters");
    assert_eq!(refused.status, 401, "{refused:?}");
    let auth = format!("Bearer {token}");
    let counters = get_with(addrs[2], "/counters", &[("Authorization", &auth)]);
    assert_eq!(counters.status, 200, "{counters:?}");
    assert!(
        counters.text().contains("\"name\":\"backend-1\""),
        "{counters:?}"
    );
    // A slow request in flight when SIGTERM arrives is still answered.
    let slow_addr = addrs[0];
    let slow = std::thread::spawn(move || get(slow_addr, "/slow"));
    wait_in_flight(addrs[2], &auth, "backend-0");
    let t = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &g.0.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let slow = slow.join().unwrap();
    assert_eq!(slow.status, 200, "{slow:?}");
    assert_eq!(slow.header("Connection"), Some("close"), "{slow:?}");
    let status = loop {
        if let Some(s) = g.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    let mut err = String::new();
    g.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("SIGTERM, draining the fleet"), "{err}");
    assert!(
        err.contains(&format!("backend-0 {}: 2 requests (200: 2)", addrs[0])),
        "{err}"
    );
    assert!(
        err.contains(&format!("backend-1 {}: 1 requests (503: 1)", addrs[1])),
        "{err}"
    );
    assert!(!token_path.exists(), "the token file outlived the backend");
    // The same final counts, as the one machine-readable line stdout ends with.
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert_eq!(rest.len(), 1, "{rest:?}");
    let counters = backend::parse_counters_line(&rest[0]).expect("a counters line");
    let by: Vec<String> = counters
        .into_iter()
        .map(|c| format!("{} {} {} {:?}", c.name, c.addr, c.requests, c.by_status))
        .collect();
    assert_eq!(
        by,
        [
            format!("backend-0 {} 2 {{200: 2}}", addrs[0]),
            format!("backend-1 {} 1 {{503: 1}}", addrs[1]),
        ]
    );
}

#[test]
fn a_given_token_file_is_used_and_left_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let token_path = dir.path().join("secret-token");
    std::fs::write(&token_path, "s3cret-given-token\n").unwrap();
    let child = pb()
        .args([
            "backend",
            "--listen",
            "127.0.0.1:0",
            "--control",
            "127.0.0.1:0",
            "--drain-timeout",
            "1s",
        ])
        .arg("--token-from")
        .arg(&token_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut g = Guard(child);
    let mut lines = BufReader::new(g.0.stdout.take().unwrap()).lines();
    lines.next().unwrap().unwrap();
    let line = lines.next().unwrap().unwrap();
    let f: Vec<&str> = line.split(' ').collect();
    assert_eq!(f[2], token_path.to_str().unwrap(), "{line}");
    let addr: SocketAddr = f[1].parse().unwrap();
    let wrong = get_with(addr, "/instances", &[("Authorization", "Bearer other")]);
    assert_eq!(wrong.status, 401, "{wrong:?}");
    let ok = get_with(
        addr,
        "/instances",
        &[("Authorization", "Bearer s3cret-given-token")],
    );
    assert!(ok.text().contains("\"name\":\"backend-0\""), "{ok:?}");
    // SAFETY: a plain signal to our own child.
    unsafe { libc::kill(g.0.id() as i32, libc::SIGTERM) };
    assert!(g.0.wait().unwrap().success());
    assert!(
        token_path.exists(),
        "a given token file is not the backend's to remove"
    );
    let last = lines.last().unwrap().unwrap();
    let counters = backend::parse_counters_line(&last).expect("a counters line");
    assert_eq!((counters.len(), counters[0].requests), (1, 0), "{last}");
}

#[test]
fn the_default_token_file_is_named_after_the_control_port() {
    let dir = tempfile::tempdir().unwrap();
    let child = pb()
        .current_dir(dir.path())
        .args([
            "backend",
            "--listen",
            "127.0.0.1:0",
            "--control",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut g = Guard(child);
    let mut lines = BufReader::new(g.0.stdout.take().unwrap()).lines();
    lines.next().unwrap().unwrap();
    let line = lines.next().unwrap().unwrap();
    let f: Vec<&str> = line.split(' ').collect();
    let addr: SocketAddr = f[1].parse().unwrap();
    let want = dir
        .path()
        .join(format!("proxybench-control-{}.token", addr.port()));
    assert_eq!(f[2], want.to_str().unwrap(), "{line}");
    let mode = std::fs::metadata(&want).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let token = std::fs::read_to_string(&want).unwrap();
    let auth = format!("Bearer {}", token.trim());
    let ok = get_with(addr, "/instances", &[("Authorization", &auth)]);
    assert!(ok.text().contains("\"name\":\"backend-0\""), "{ok:?}");
    // SAFETY: a plain signal to our own child.
    unsafe { libc::kill(g.0.id() as i32, libc::SIGTERM) };
    assert!(g.0.wait().unwrap().success());
    assert!(!want.exists(), "the token file outlived the backend");
}

/// `proxybench backend` with a control port: its guard, its first instance's address and a GET
/// of its counters as JSON.
fn backend_with_control(
    profile: &str,
    token: &std::path::Path,
) -> (Guard, SocketAddr, impl Fn() -> serde_json::Value) {
    let child = pb()
        .args(["backend", "--listen", "127.0.0.1:0", "--threads", "1"])
        .args(["--profile", profile, "--control", "127.0.0.1:0"])
        .arg("--token-file")
        .arg(token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut g = Guard(child);
    let mut lines = BufReader::new(g.0.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr: SocketAddr = first.split_once(' ').unwrap().1.parse().unwrap();
    let control = lines.next().unwrap().unwrap();
    let ctl: SocketAddr = control.split(' ').nth(1).unwrap().parse().unwrap();
    let auth = format!("Bearer {}", std::fs::read_to_string(token).unwrap().trim());
    let counters = move || {
        let r = get_with(ctl, "/counters", &[("Authorization", &auth)]);
        let v: serde_json::Value = serde_json::from_str(&r.text()).unwrap();
        v[0].clone()
    };
    (g, addr, counters)
}

/// `proxybench load ARGS --format json URL`, which must succeed.
fn load_json(args: &[&str], url: &str) -> serde_json::Value {
    let out = pb()
        .arg("load")
        .args(args)
        .args(["--format", "json", url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn load_http2_against_the_backend_counts_exactly_and_sees_every_stream_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (mut g, addr, counters) = backend_with_control("latency=10ms", &dir.path().join("t"));
    let url = format!("http://{addr}/");
    // 4 connections x 8 streams, closed loop: every stream waits its 10 ms at the backend, so
    // all 32 are open there at once.
    let v = load_json(
        &["--http2", "-t", "1", "-c", "4", "-m", "8", "-n", "3000"],
        &url,
    );
    assert_eq!(v["status"]["200"], 3000, "{}", v["error_messages"]);
    assert_eq!(v["http2"]["streams"], 3000);
    assert_eq!(v["http2"]["connections"], 4);
    let c = counters();
    assert_eq!(c["requests"], 3000);
    assert_eq!(c["by_status"]["200"], 3000);
    assert_eq!(c["in_flight"], 0);
    let h2 = &c["h2"];
    assert_eq!(h2["requests"], 3000);
    assert_eq!(h2["connections"], 4);
    assert_eq!(h2["max_streams"], 32);
    assert_eq!(h2["max_streams_per_connection"], 8);
    assert_eq!(h2["refused"], 0);
    // The fixed delay is the floor of every latency; the median sits just above it.
    let p50 = v["latency"]["percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["p"] == 50.0)
        .unwrap()["us"]
        .as_u64()
        .unwrap();
    assert!((10_000..20_000).contains(&p50), "p50 {p50} us");
    assert!(v["latency"]["min_us"].as_u64().unwrap() >= 10_000);
    // HTTP/1.1 on the same listener still works, counted apart from h2.
    let v = load_json(&["-t", "1", "-c", "2", "-n", "200"], &url);
    assert_eq!(v["status"]["200"], 200);
    let c = counters();
    assert_eq!(c["requests"], 3200);
    assert_eq!(c["h2"]["requests"], 3000);
    assert_eq!(c["connections"], 6);
    let killed = Command::new("kill")
        .args(["-TERM", &g.0.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut err = String::new();
    g.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(
        err.contains(&format!(
            "backend-0 {addr}: 3200 requests (200: 3200), 6 connections, "
        )),
        "{err}"
    );
    assert!(
        err.contains("; over h2c: 3000 requests on 4 connections, at most 32 streams at once"),
        "{err}"
    );
}

#[test]
fn an_http2_upstream_is_refused_for_nginx_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("h2up.toml");
    std::fs::write(
        &file,
        r#"name = "h2up"

[[backends]]
name = "app"
count = 1

[proxy]
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "app"
backends = "app"
http2 = true
[[proxy.routes]]
path = "/"
upstream = "app"

[[loads]]
name = "l"
url = "http://a.test/"
duration = "1s"
"#,
    )
    .unwrap();
    let out = pb()
        .arg("run")
        .arg(&file)
        .args(["--no-progress", "--results"])
        .arg(dir.path().join("results"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("h2up.toml:10: case 'main', [proxy] upstream.app: "),
        "{err}"
    );
    assert!(
        err.contains("nginx cannot express upstreams.http2: nginx 1.22 proxies to upstreams over HTTP/1.x only"),
        "{err}"
    );
    assert!(!dir.path().join("results").exists());
}
