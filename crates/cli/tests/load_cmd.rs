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
            &["-X", "get", url],
            "method 'get' must be upper-case letters",
        ),
        (&["--resolve", "h:80", url], "bad --resolve 'h:80'"),
        (
            &["-m", "4", url],
            "concurrent streams (-m) need HTTP/2 (--http2)",
        ),
        (&["--http2", "--io", "uring", url], "HTTP/2 runs on epoll"),
        (
            &["--retry-idle-closed", "-X", "POST", url],
            "only GET, HEAD, OPTIONS and TRACE without a body are safe for; this load sends POST",
        ),
        (
            &["--retry-idle-closed", "--http2", url],
            "retrying idle-closed requests is for HTTP/1.1",
        ),
        (
            &["--body", "@/nonexistent/file", url],
            "--body: cannot read /nonexistent/file",
        ),
        (&["--arrivals", "bursty", url], "invalid value 'bursty'"),
        (
            &["--send-window", "1ms", url],
            "--send-window is for open loop: give -R/--rate too",
        ),
        (
            &["-R", "100", "--send-window", "1s", url],
            "the send window must be at most 100ms",
        ),
        (&["-R", "100", "--send-window", "5", url], "--send-window: "),
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
    assert!(
        json.contains(&format!("\"schema\": {}", model::SCHEMA_VERSION)),
        "{json}"
    );
    assert!(json.contains("\"requests\": 500,"));
    assert!(json.contains("\"kind\": \"open\""));
    assert!(
        json.contains("\"send_window_us\": 200"),
        "the default send window is in the results"
    );
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

/// The soft and hard open-files limits of this process, as the kernel reports them.
fn open_files_limit() -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live rlimit the kernel writes, of exactly the type it expects.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    (lim.rlim_cur, lim.rlim_max)
}

fn stderr_line(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    err.trim_end().to_string()
}

#[test]
fn more_connections_than_the_open_files_limit_is_refused_before_any_connect() {
    let (_, hard) = open_files_limit();
    assert!(hard < 1 << 30, "this test needs a finite open-files limit");
    let asked = hard + 5000; // 25000 under the limit of 20000 here
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let out = pb(&["-c", &asked.to_string(), "-t", "2", "-d", "5s", &url]);
    let err = stderr_line(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty());
    assert!(
        err.starts_with(&format!("proxybench: {asked} connections need ")),
        "{err}"
    );
    // The soft limit was raised to the hard one before giving up.
    assert!(
        err.contains(&format!(
            "but the open-files limit (ulimit -n) is {hard}: use at most "
        )),
        "{err}"
    );
    let need: u64 = err
        .split(" connections need ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(need > asked && need < asked + 100, "{err}");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("no connection may be made before the check: {other:?}"),
    }
}

#[test]
fn nineteen_thousand_connections_fit_under_twenty_thousand_open_files() {
    let (_, hard) = open_files_limit();
    // 19000 under the limit of 20000 here; the same margin elsewhere.
    let conns = 19_000u64.min(hard.saturating_sub(1000));
    // Two nginx workers share the port (reuseport), each far under its own 20000 files.
    let ng = testkit::Nginx::start(
        2,
        "  keepalive_requests 100000000;\n  server {\n    \
         listen 127.0.0.1:{port} reuseport backlog=4096;\n    \
         location / { return 200 \"hello\\n\"; }\n  }\n",
    );
    let n = conns.to_string();
    // The timeout is long because of the kernel, not the engine: opening 19,000 connections to
    // one address took 6.5 s of system time here (connect()'s search for a free local port
    // grows with the ports in use), and far longer on a loaded machine. No request may time
    // out meanwhile: the test is about descriptors, not speed.
    let out = pb(&[
        "-c",
        &n,
        "-t",
        "2",
        "-n",
        &n,
        "--timeout",
        "20s",
        "--format",
        "json",
        &ng.url("/"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // One request per connection, and every connection was still open at the end (keep-alive),
    // so all of them were open at once.
    assert_eq!(v["connections"], conns);
    assert_eq!(
        v["errors"],
        serde_json::json!({}),
        "{}",
        v["error_messages"]
    );
    assert_eq!(v["requests"], conns);
    assert_eq!(v["status"]["200"], conns);
    assert_eq!(v["connects"], conns);
    assert_eq!(settled(&ng, conns), conns, "nginx served exactly as many");
}

#[test]
fn a_load_in_which_every_request_failed_exits_3_with_the_reason() {
    // Nothing listens: every connect is refused.
    let port = testkit::free_port();
    let out = pb(&[
        "-t1",
        "-c2",
        "-n",
        "5",
        &format!("http://127.0.0.1:{port}/"),
    ]);
    assert_eq!(out.status.code(), Some(3));
    let refused = format!("connect to 127.0.0.1:{port}: Connection refused (os error 111)");
    assert_eq!(
        stderr_line(&out),
        format!(
            "proxybench: the target was unusable: all 5 attempts failed, most as \
             connect_refused 5 ({refused})"
        )
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!("\n    connect_refused 5 ({refused})\n")),
        "the results are printed all the same: {text}"
    );
    // Every response a 503: a failure too.
    let ng = testkit::Nginx::start(
        1,
        "  server {\n    listen 127.0.0.1:{port};\n    location / { return 503; }\n  }\n",
    );
    let out = pb(&["-t1", "-c2", "-n", "7", "--format", "json", &ng.url("/")]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        stderr_line(&out),
        "proxybench: the target was unusable: all 7 attempts failed, most as status 503 7"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"]["503"], 7);
    // TLS to a plain port: the JSON carries the count and the first message.
    let out = pb(&[
        "-t1",
        "-c1",
        "-n",
        "3",
        "-k",
        "--format",
        "json",
        &format!("https://127.0.0.1:{}/", ng.port),
    ]);
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["errors"]["tls"], 3);
    assert_eq!(
        v["error_messages"]["tls"],
        "received corrupt message of type InvalidContentType"
    );
}

#[test]
fn a_self_signed_certificate_made_by_openssl_works_with_cacert_as_in_curl() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let other = dir.path().join("other.pem");
    for (c, k) in [(&cert, &key), (&other, &dir.path().join("other.key"))] {
        let st = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args(["-subj", "/CN=cafe.example.com"])
            .args(["-addext", "subjectAltName=DNS:cafe.example.com"])
            .arg("-keyout")
            .arg(k)
            .arg("-out")
            .arg(c)
            .output()
            .expect("openssl is installed");
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
    }
    let ng = testkit::Nginx::start(
        1,
        &format!(
            "  server {{\n    listen 127.0.0.1:{{port}} ssl;\n    ssl_certificate {};\n    \
             ssl_certificate_key {};\n    location / {{ return 200 \"hello\\n\"; }}\n  }}\n",
            cert.display(),
            key.display()
        ),
    );
    let resolve = format!("cafe.example.com:{}:127.0.0.1", ng.port);
    let url = format!("https://cafe.example.com:{}/", ng.port);
    let cacert = cert.to_str().unwrap();
    let out = pb(&[
        "-t1",
        "-c2",
        "-n",
        "20",
        "--resolve",
        &resolve,
        "--cacert",
        cacert,
        &url,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("  Status codes: 200=20\n"), "{text}");
    assert_eq!(settled(&ng, 20), 20);
    // The address itself, with the certificate's name given as --sni: verified, 20 more.
    let by_ip = format!("https://127.0.0.1:{}/", ng.port);
    let args = ["-t1", "-c2", "-n", "20", "--cacert", cacert];
    let out = pb(&[&args[..], &["--sni", "cafe.example.com", &by_ip]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("  Status codes: 200=20\n"), "{text}");
    assert_eq!(settled(&ng, 40), 40);
    // Without it the name checked is the address, which the certificate does not name.
    let out = pb(&[&args[..], &[&by_ip]].concat());
    assert_eq!(out.status.code(), Some(3), "{}", stderr_line(&out));
    assert!(
        stderr_line(&out).contains("certificate not valid for name \"127.0.0.1\""),
        "{}",
        stderr_line(&out)
    );
    // Another certificate in the CA file: refused, with the reason, and exit 3.
    let out = pb(&[
        "-t1",
        "-c2",
        "-n",
        "4",
        "--resolve",
        &resolve,
        "--cacert",
        other.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        stderr_line(&out),
        "proxybench: the target was unusable: all 4 attempts failed, most as \
         tls 4 (invalid peer certificate: CaUsedAsEndEntity)"
    );
}

#[test]
fn help_documents_the_exit_codes() {
    let out = pb(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let at = text.find("Exit status:\n").expect("an exit status section");
    let section = &text[at..];
    for code in ["0", "1", "2", "3"] {
        assert!(section.contains(&format!("\n  {code}  ")), "{section}");
    }
    assert!(section.contains("every request failed"), "{section}");
}
