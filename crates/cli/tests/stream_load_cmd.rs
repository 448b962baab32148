//! `proxybench load` for long-lived connections as a user runs it, against `proxybench backend`
//! in its own process: the WebSocket text block, the JSON summary and the lives CSV; and the
//! faults of issue 36 that fall to the load: a gRPC target that speaks HTTP/1.1 only (one line,
//! exit 3), a backend killed under open WebSockets (each drop counted), Ctrl-C with 2,000 open
//! connections (partial results kept, every connection closed by the client, nothing left
//! running), and bad flags (one line, exit 2).

use backend::control::{Client, Token};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `proxybench backend` in its own process, with its control endpoint; killed on drop.
struct Backend {
    child: Child,
    addr: SocketAddr,
    control: Client,
}

impl Backend {
    fn start(profile: &str) -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        let mut child = Command::new(env!("CARGO_BIN_EXE_proxybench"))
            .args([
                "backend",
                "--listen",
                "127.0.0.1:0",
                "--control",
                "127.0.0.1:0",
            ])
            .arg("--token-file")
            .arg(&token_file)
            .args(["--profile", profile])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let addr = first.split_whitespace().nth(1).unwrap().parse().unwrap();
        let control = lines.next().unwrap().unwrap();
        let caddr: SocketAddr = control.split_whitespace().nth(1).unwrap().parse().unwrap();
        let token = Token::read(&token_file).unwrap();
        // The rest of stdout (the exit line) is not read; the pipe stays open until the end.
        std::mem::forget(lines);
        std::mem::forget(dir);
        Backend {
            child,
            addr,
            control: Client::new(caddr, token),
        }
    }

    fn streams(&self) -> model::stream::BackendStreams {
        self.control.counters().unwrap()[0]
            .streams
            .clone()
            .unwrap_or_default()
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn load(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .arg("load")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn websocket_text_json_and_lives_against_the_backend() {
    let b = Backend::start("");
    let url = format!("ws://{}/chat", b.addr);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("lives.csv");
    let out = load(&[
        "-c",
        "5",
        "-t",
        "1",
        "-d",
        "1s",
        "--message-rate",
        "10",
        "--format",
        "json",
        "--lives",
        csv.to_str().unwrap(),
        &url,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: model::stream::StreamSummary = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((s.opened, s.open_at_end, s.dropped), (5, 5, 0));
    assert!(s.messages.sent >= 40, "{:?}", s.messages);
    assert_eq!(s.messages.answered, s.messages.sent);
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.streams().open > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let bs = b.streams();
    assert_eq!(
        (bs.messages_in, bs.echoes),
        (s.messages.sent, s.messages.sent)
    );
    assert_eq!(bs.closed_by_client, 5);
    let lives = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(lives.lines().count(), 6, "{lives}");
    assert!(lives.starts_with("conn,attempt,start_us,open_us,end_us,end,close_code,"));
    assert!(
        lives.lines().skip(1).all(|l| l.contains(",client,1000,")),
        "{lives}"
    );

    let out = load(&["-c", "2", "-d", "1s", &url]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!("Running 1s WebSocket test @ {url}\n")),
        "{text}"
    );
    assert!(
        text.contains("  Connections: 2 attempts, 2 opened, 0 reconnects"),
        "{text}"
    );
    assert!(text.contains("round trip"), "{text}");
    assert!(text.contains("per open connection"), "{text}");
}

#[test]
fn a_grpc_target_that_speaks_http1_only_is_one_line_and_exit_3() {
    let ng = testkit::Nginx::start(
        1,
        "  server {\n    listen 127.0.0.1:{port};\n    location / { return 200 \"hello\\n\"; }\n  }\n",
    );
    let out = load(&[
        "--protocol",
        "grpc-unary",
        "-c",
        "2",
        "-d",
        "1s",
        &ng.url("/"),
    ]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("it does not speak HTTP/2 (h2c), which gRPC needs"),
        "{err}"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("0 opened"), "{text}");
}

#[test]
fn a_backend_killed_under_open_websockets_counts_each_drop() {
    let mut b = Backend::start("");
    let url = format!("ws://{}/chat", b.addr);
    let child = Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .args([
            "load",
            "-c",
            "10",
            "-t",
            "1",
            "-d",
            "4s",
            "--message-rate",
            "5",
        ])
        .args(["--reconnect", "none", "--format", "json", &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.streams().open < 10 {
        assert!(Instant::now() < deadline, "the 10 WebSockets never opened");
        std::thread::sleep(Duration::from_millis(20));
    }
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    let out = child.wait_with_output().unwrap();
    let s: model::stream::StreamSummary = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(s.opened, 10);
    assert_eq!(s.dropped, 10, "{:?} {:?}", s.ended, s.end_messages);
    let cut = s
        .ended
        .get(&model::stream::EndKind::Fin)
        .copied()
        .unwrap_or(0)
        + s.ended
            .get(&model::stream::EndKind::Reset)
            .copied()
            .unwrap_or(0);
    assert_eq!(cut, 10, "{:?}", s.ended);
    assert!(
        s.close_codes.is_empty(),
        "a killed process sends no close frame"
    );
    // Nothing was in flight unnoticed: every message sent was echoed or lost with its
    // connection.
    assert_eq!(
        s.messages.sent,
        s.messages.answered + s.messages.lost + s.messages.unanswered_at_end
    );
    assert_eq!(s.messages.unanswered_at_end, 0);
}

#[test]
fn ctrl_c_with_2000_open_connections_keeps_the_results_and_closes_every_one() {
    let b = Backend::start("");
    let url = format!("ws://{}/chat", b.addr);
    let child = Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .args([
            "load", "-c", "2000", "--ramp", "1s", "-d", "120s", "--format", "json", &url,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(30);
    while b.streams().open < 2000 {
        assert!(
            Instant::now() < deadline,
            "the 2000 WebSockets never opened: {:?}",
            b.streams()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) with a pid this test spawned and still owns (not yet waited for).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("interrupted; results so far"), "{err}");
    let s: model::stream::StreamSummary = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((s.opened, s.open_at_end, s.dropped), (2000, 2000, 0));
    assert_eq!(s.ended.get(&model::stream::EndKind::Client), Some(&2000));
    assert!(s.elapsed_s < 100.0, "stopped early: {}", s.elapsed_s);
    // Every connection was closed by the client with a close frame: the backend holds none.
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.streams().open > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let bs = b.streams();
    assert_eq!(
        (bs.open, bs.closed_by_client, bs.dropped),
        (0, 2000, 0),
        "{:?}",
        bs.close_codes_received
    );
    // The load's process is gone (waited for above): no thread or socket outlived it.
    assert!(std::fs::metadata(format!("/proc/{pid}")).is_err());
}

#[test]
fn bad_flags_are_one_line_and_exit_2() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["--message-size", "8", "ws://127.0.0.1:1/"],
            "16-byte stamp",
        ),
        (
            &["-n", "5", "ws://127.0.0.1:1/"],
            "-n/--requests is for HTTP loads",
        ),
        (
            &["--message-rate", "5", "http://127.0.0.1:1/"],
            "is for long-lived loads",
        ),
        (
            &["--protocol", "sse", "ws://127.0.0.1:1/"],
            "which is WebSocket",
        ),
        (
            &[
                "--protocol",
                "sse",
                "--message-rate",
                "5",
                "http://127.0.0.1:1/",
            ],
            "push=",
        ),
        (
            &[
                "--protocol",
                "grpc-unary",
                "--ping",
                "1s",
                "http://127.0.0.1:1/",
            ],
            "pings are WebSocket's",
        ),
    ];
    for (args, want) in cases {
        let out = load(args);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
