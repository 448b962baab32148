//! `proxybench load --http2 -m N` as a user runs it against a real nginx (h2c): wrk's block with
//! the HTTP/2 lines, and JSON with the `http2` counts, equal to nginx's access log.

use std::process::Command;

#[test]
fn http2_text_and_json_match_nginx() {
    let ng = testkit::Nginx::start(
        1,
        "  log_format proto '$server_protocol $status';\n  keepalive_requests 100000000;\n  \
         server {\n    listen 127.0.0.1:{port} http2;\n    access_log {prefix}/access.log proto;\n    \
         location / { return 200 \"hello\\n\"; }\n  }\n",
    );
    let url = ng.url("/");
    let run = |format: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_proxybench"))
            .args([
                "load", "--http2", "-c", "3", "-m", "5", "-t", "1", "-n", "600",
            ])
            .args(["--format", format, &url])
            .output()
            .expect("run proxybench");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run("text");
    assert!(text.contains("  600 requests in "), "{text}");
    assert!(
        text.contains(
            "  HTTP/2: 3 sessions, 600 streams (5 per connection asked, at most 5 open at once)"
        ),
        "{text}"
    );
    assert!(
        text.contains("  GOAWAY: 0 graceful, 0 with errors; 0 streams refused"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&run("json")).unwrap();
    assert_eq!(json["status"]["200"], 600);
    let h = &json["http2"];
    assert_eq!(h["streams_per_connection"], 5);
    assert_eq!(h["connections"], 3);
    assert_eq!(h["streams"], 600);
    assert_eq!(h["max_concurrent_streams"], 5);
    assert_eq!(h["goaways_graceful"], 0);
    assert_eq!(h["refused"], 0);
    // Both runs are in nginx's log, every line over HTTP/2 (a line is written as a stream
    // closes, so wait until it stops growing).
    for _ in 0..100 {
        if ng.access_log_lines() >= 1200 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let log = std::fs::read_to_string(ng.prefix().join("access.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 1200);
    assert!(lines.iter().all(|l| *l == "HTTP/2.0 200"));
}
