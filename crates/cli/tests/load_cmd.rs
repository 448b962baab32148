//! `proxybench load` as a user runs it: bad input gets one line and exit 2; a run against a real
//! nginx prints wrk's block (parsed here as a wrk-reading script would) and proxybench's block,
//! JSON, and a timeline CSV, with counts equal to nginx's.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn pb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .arg("load")
        .args(args)
        .output()
        .expect("run proxybench")
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let url = "http://127.0.0.1:9/";
    let cases: &[(&[&str], &str)] = &[
        (
            &["ftp://x/"],
            "bad URL 'ftp://x/': the scheme must be http or https",
        ),
        (&["127.0.0.1:8080"], "bad URL '127.0.0.1:8080'"),
        (&["http://h:0/"], "the port must be 1-65535"),
        (&["-c", "0", url], "-c/--connections must be at least 1"),
        (&["-c", "-3", url], "unexpected argument '-3'"),
        (&["-t", "0", url], "-t/--threads must be at least 1"),
        (
            &["-t", "4", "-c", "2", url],
            "-t/--threads (4) must not exceed -c/--connections (2)",
        ),
        (&["-d", "0s", url], "-d/--duration must be positive"),
        (&["-d", "10", url], "needs a unit"),
        (&["-n", "0", url], "-n/--requests must be at least 1"),
        (
            &["-R", "0", url],
            "-R/--rate: rate '0' must be a positive number",
        ),
        (&["-R", "-5", url], "unexpected argument '-5'"),
        (&["--timeout", "0ms", url], "--timeout must be positive"),
        (&["-H", "no colon", url], "bad header 'no colon'"),
        (&["-H", "bad name: x", url], "bad header"),
        (
            &["-m", "get", url],
            "method 'get' must be upper-case letters",
        ),
        (&["--resolve", "h:80", url], "bad --resolve 'h:80'"),
        (
            &["--body", "@/nonexistent/file", url],
            "--body: cannot read /nonexistent/file",
        ),
        (&["--arrivals", "bursty", url], "invalid value 'bursty'"),
        (&["--bogus", url], "unexpected argument '--bogus'"),
        (&[], "the following required arguments were not provided"),
        (
            &["--cacert", "/nonexistent.pem", "https://127.0.0.1:9/"],
            "TLS setup: cannot read /nonexistent.pem",
        ),
        (
            &["http://no-such-host.invalid/"],
            "cannot resolve 'no-such-host.invalid'",
        ),
        (
            &["--io", "uring", "https://127.0.0.1:9/"],
            "io_uring drives plain http only; https runs on epoll",
        ),
    ];
    for (args, want) in cases {
        let out = pb(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err:?}");
        assert!(err.starts_with("proxybench: "), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: want {want:?} in {err:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// Pulls the numbers a wrk-reading script would take from wrk's block.
fn wrk_numbers(text: &str) -> (u64, f64, f64) {
    let mut requests = None;
    let mut rps = None;
    let mut lat_avg = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Requests/sec:") {
            rps = rest.trim().parse::<f64>().ok();
        }
        if line.ends_with(" read") && line.contains(" requests in ") {
            requests = line.split_whitespace().next().and_then(|n| n.parse().ok());
        }
        if let Some(rest) = line.strip_prefix("    Latency ") {
            let avg = rest.split_whitespace().next().unwrap();
            let (num, unit) = avg.split_at(avg.find(|c: char| c.is_alphabetic()).unwrap());
            let scale = match unit {
                "us" => 1.0,
                "ms" => 1e3,
                "s" => 1e6,
                other => panic!("unit {other}"),
            };
            lat_avg = Some(num.parse::<f64>().unwrap() * scale);
        }
    }
    (requests.unwrap(), rps.unwrap(), lat_avg.unwrap())
}

fn settled(ng: &testkit::Nginx, want: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    while ng.access_log_lines() < want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    ng.access_log_lines()
}

#[test]
fn text_output_reads_like_wrk_and_counts_match_nginx() {
    let ng = testkit::Nginx::return_200(1);
    let url = ng.url("/");
    let out = pb(&["-t1", "-c4", "-d1s", "--latency", &url]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("Running 1s test @ {url}"));
    assert_eq!(lines[1], "  1 threads and 4 connections");
    assert_eq!(
        lines[2],
        "  Thread Stats   Avg      Stdev     Max   +/- Stdev"
    );
    assert!(lines[3].starts_with("    Latency "), "{text}");
    assert!(lines[4].starts_with("    Req/Sec "), "{text}");
    assert_eq!(lines[5], "  Latency Distribution");
    assert!(lines[6].starts_with("     50% "));
    assert!(lines[9].starts_with("     99% "));
    assert!(lines[10].contains(" requests in 1.0"), "{text}");
    assert!(lines[11].starts_with("Requests/sec: "), "{text}");
    assert!(lines[12].starts_with("Transfer/sec: "), "{text}");
    assert_eq!(lines[13], "proxybench:");
    let (requests, rps, avg_us) = wrk_numbers(&text);
    assert!(requests > 100);
    assert!(rps > 100.0 && avg_us > 0.0);
    assert_eq!(settled(&ng, requests), requests);
    assert!(text.contains(&format!("  Status codes: 200={requests}\n")));
    assert!(text.contains(&format!("  Failures: 0 of {requests} attempts (0 ppm)\n")));
    assert!(!text.contains("Socket errors"));
}

#[test]
fn json_and_timeline_files() {
    let ng = testkit::Nginx::return_200(1);
    let dir = tempfile_dir();
    let csv = format!("{dir}/timeline.csv");
    let out = pb(&[
        "-c2",
        "-n",
        "500",
        "-R",
        "1000",
        "--format",
        "json",
        "--timeline",
        &csv,
        &ng.url("/"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = String::from_utf8(out.stdout).unwrap();
    assert!(json.contains("\"schema\": 1"), "{json}");
    assert!(json.contains("\"requests\": 500,"));
    assert!(json.contains("\"kind\": \"open\""));
    assert!(json.contains("\"p\": 99.999"));
    assert!(
        json.contains("\"hdr\": \"HISTFAAA"),
        "the whole histogram is there"
    );
    let csv = std::fs::read_to_string(&csv).unwrap();
    let mut rows = csv.lines();
    let header = rows.next().unwrap();
    assert!(header.starts_with("t,requests,status_1xx,status_2xx"));
    assert!(header.ends_with(",p50_us,p90_us,p99_us,max_us,bytes"));
    let total: u64 = rows
        .map(|r| r.split(',').nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 500);
    let _ = std::fs::remove_dir_all(dir);
}

fn tempfile_dir() -> String {
    let dir = std::env::temp_dir().join(format!("pb-load-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.to_string_lossy().into_owned()
}
