//! Log summaries of real nginx logs (refused connections, disabled servers, no live upstreams,
//! a client that gave up) and of error lines as the published NGF write-ups quote them.

mod common;

use common::{context, get, parse, scratch, start, Backend};
use proxybench_proxy::logs::{self, LogFormat, Summarizer};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Three distinct loopback addresses where nothing listens (testkit's free ports: chosen while
/// all are held, so the kernel cannot hand out one port twice and make two upstreams' refusals
/// count as one server's).
fn dead_addrs() -> (SocketAddr, SocketAddr, SocketAddr) {
    let p = testkit::free_ports(3);
    let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    (at(p[0]), at(p[1]), at(p[2]))
}

#[test]
fn real_logs_summarise_into_counts_and_groups() {
    let live = Backend::start("live");
    let slow = Backend::with_delay("slow", Duration::from_millis(1500));
    let (dead, dead1, dead2) = dead_addrs();
    let cfg = parse(
        r#"
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "half"
backends = "half"
[[proxy.upstreams]]
name = "gone"
backends = "gone"
[[proxy.upstreams]]
name = "slow"
backends = "slow"
[[proxy.routes]]
path = "/half"
upstream = "half"
[[proxy.routes]]
path = "/gone"
upstream = "gone"
[[proxy.routes]]
path = "/slow"
upstream = "slow"
"#,
    );
    let dir = scratch("logs");
    let mut ctx = context(
        &cfg,
        dir.path(),
        &[
            ("half", vec![dead, live.addr]),
            ("gone", vec![dead1, dead2]),
            ("slow", vec![slow.addr]),
        ],
    );
    let r = start("nginx-0", &cfg, &mut ctx, dir.path());
    let port = ctx.ports["http"];
    for _ in 0..10 {
        assert_eq!(get(port, "/half", "x").status, 200);
    }
    for _ in 0..3 {
        assert_eq!(get(port, "/gone", "x").status, 502);
    }
    // A client that gives up before the slow backend answers: nginx logs 499.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    drop(s);
    // nginx notices the close, waits for nothing more, and writes the line.
    let access = r.access_log_path();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while logs::summarize(LogFormat::NginxJson, std::slice::from_ref(&access), &[])
        .unwrap()
        .access_lines
        < 14
    {
        assert!(std::time::Instant::now() < deadline, "no 499 line");
        std::thread::sleep(Duration::from_millis(20));
    }
    let sum = logs::summarize(LogFormat::NginxJson, &[access], &[r.error_log_path()]).unwrap();
    assert_eq!(sum.access_lines, 14);
    assert_eq!(sum.access_status.get(&200), Some(&10));
    assert_eq!(sum.access_status.get(&502), Some(&3));
    assert_eq!(sum.access_status.get(&499), Some(&1));
    assert_eq!(sum.examples_499.len(), 1);
    assert!(
        sum.examples_499[0].contains("\"uri\":\"/slow\""),
        "{}",
        sum.examples_499[0]
    );
    // One attempt on the dead server, then it is out for fail_timeout (10 s).
    assert_eq!(sum.upstream_addr.get(&dead.to_string()), Some(&1));
    assert_eq!(sum.upstream_addr.get(&live.addr.to_string()), Some(&10));
    assert_eq!(sum.limit_req_status.get("-"), Some(&14));
    let group = |level: &str, msg: &str| {
        sum.error_groups
            .iter()
            .find(|g| g.level == level && g.message == msg)
            .map(|g| g.count)
            .unwrap_or(0)
    };
    let refused = group(
        "error",
        "connect() failed (111: Connection refused) while connecting to upstream",
    );
    let disabled = group(
        "warn",
        "upstream server temporarily disabled while connecting to upstream",
    );
    let no_live = group("error", "no live upstreams while connecting to upstream");
    // /half: one refusal; /gone: both servers refuse once, then nothing is live.
    assert_eq!(refused, 3, "{:#?}", sum.error_groups);
    assert_eq!(disabled, 3, "{:#?}", sum.error_groups);
    assert!(no_live >= 1, "{:#?}", sum.error_groups);
    assert_eq!(sum.error_levels.get("warn"), Some(&disabled));
    assert_eq!(sum.error_levels.get("error"), Some(&(refused + no_live)));
    // Each group keeps one line verbatim, addresses and all.
    let example = &sum
        .error_groups
        .iter()
        .find(|g| g.level == "warn")
        .unwrap()
        .example;
    assert!(
        example.contains("[warn]") && example.contains("upstream: \"http://127.0.0.1:"),
        "{example}"
    );
}

/// Lines as the NGF zero-downtime write-up quotes them (reference 000), and lines nginx writes on
/// reloads and limits.
const FIXTURE: &str = r#"2023/10/24 17:31:43 [warn] 176#176: *358453 upstream server temporarily disabled while connecting to upstream, client: 10.X.X.X:, server: cafe.example.com, request: "GET /tea HTTP/1.1", upstream: "http://10.X.X.X:8080/tea", host: "cafe.example.com"
2023/10/24 17:31:43 [error] 176#176: *358453 upstream timed out (110: Operation timed out) while connecting to upstream, client: 10.X.X.X, server: cafe.example.com, request: "GET /tea HTTP/1.1", upstream: "http://10.X.X.X:8080/tea", host: "cafe.example.com"
2023/10/24 20:45:22 [warn] 73#73: *22192 upstream server temporarily disabled while connecting to upstream, client: 10.168.0.14, server: cafe.example.com, request: "GET /coffee HTTP/1.1", upstream: "http://10.4.7.23:8080/coffee", host: "cafe.example.com"
2023/10/24 20:45:22 [error] 73#73: *22192 upstream timed out (110: Operation timed out) while connecting to upstream, client: 10.168.0.14, server: cafe.example.com, request: "GET /coffee HTTP/1.1", upstream: "http://10.4.7.23:8080/coffee", host: "cafe.example.com"
2023/10/24 21:24:39 [warn] 220#220: *423560 upstream server temporarily disabled while connecting to upstream, client: 10.168.15.242, server: cafe.example.com, request: "GET /tea HTTP/1.1", upstream: "http://10.4.8.19:8080/tea", host: "cafe.example.com"
2023/10/24 21:24:39 [error] 220#220: *423560 upstream timed out (110: Operation timed out) while connecting to upstream, client: 10.168.15.242, server: cafe.example.com, request: "GET /tea HTTP/1.1", upstream: "http://10.4.8.19:8080/tea", host: "cafe.example.com"
2023/10/24 21:24:40 [error] 220#220: *423561 limiting requests, excess: 0.960 by zone "rl_ingress", client: 10.168.15.242, server: cafe.example.com, request: "GET /tea HTTP/1.1", host: "cafe.example.com"
2023/10/24 21:24:41 [error] 220#220: *423562 limiting requests, excess: 1.004 by zone "rl_ingress", client: 10.168.15.243, server: cafe.example.com, request: "GET /tea HTTP/1.1", host: "cafe.example.com"
2023/10/24 21:24:42 [notice] 1#1: signal 1 (SIGHUP) received from 77, reconfiguring
2023/10/24 21:24:42 [notice] 1#1: start worker process 4242
2023/10/24 21:24:42 [notice] 1#1: start worker process 4243
"#;

#[test]
fn published_error_lines_group_by_message() {
    let dir = scratch("fixture");
    let path = dir.path().join("error.log");
    // The last line is still being written: it is left for the next read.
    let partial = "2023/10/24 21:24:43 [warn] 1#1: half a li";
    std::fs::write(&path, format!("{FIXTURE}{partial}")).unwrap();
    let mut s = Summarizer::default();
    let end = s.add_error_file(&path, 0).unwrap();
    assert_eq!(end as usize, FIXTURE.len());
    let sum = s.finish();
    assert_eq!(sum.error_levels.get("warn"), Some(&3));
    assert_eq!(sum.error_levels.get("error"), Some(&5));
    assert_eq!(sum.error_levels.get("notice"), Some(&3));
    let groups: Vec<(&str, &str, u64)> = sum
        .error_groups
        .iter()
        .map(|g| (g.level.as_str(), g.message.as_str(), g.count))
        .collect();
    assert_eq!(
        groups,
        vec![
            (
                "warn",
                "upstream server temporarily disabled while connecting to upstream",
                3
            ),
            (
                "error",
                "upstream timed out (110: Operation timed out) while connecting to upstream",
                3
            ),
            (
                "error",
                "limiting requests, excess: N by zone \"rl_ingress\"",
                2
            ),
            ("notice", "start worker process N", 2),
            (
                "notice",
                "signal N (SIGHUP) received from N, reconfiguring",
                1
            ),
        ]
    );
    assert_eq!(sum.error_groups[0].example, FIXTURE.lines().next().unwrap());
    // Reading on from the returned offset sees only what was appended.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(b"ne\n").unwrap();
    let mut s = Summarizer::default();
    assert_eq!(
        s.add_error_file(&path, end).unwrap() as usize,
        FIXTURE.len() + partial.len() + 3
    );
    let sum = s.finish();
    assert_eq!(sum.error_levels.get("warn"), Some(&1));
    assert_eq!(sum.error_groups[0].message, "half a line");
}
