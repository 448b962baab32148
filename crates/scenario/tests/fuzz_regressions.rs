//! Scenario-parser inputs found by the fuzzer (crates/fuzz). Each must be refused with a
//! `file:line` error, quickly. Before the fix, each made `Scenario::parse` expand billions of
//! steps: minutes of work and ~500 MB/s of memory. A watchdog ends the test process if a parse
//! runs past 10 s or 1 GiB, so running these without the fix fails without harming the machine.
//!
//! The fix bounds the steps actions may expand into (crates/scenario/src/action.rs, `MAX_STEPS`
//! and the size limits), checked before expanding.

use proxybench_scenario::layers::Source;
use proxybench_scenario::Scenario;
use std::io::Write;
use std::time::{Duration, Instant};

const BASE: &str = r#"name = "fuzzed"

[[backends]]
name = "b"
count = 2

[proxy]

[[proxy.listeners]]
name = "http"

[[proxy.upstreams]]
name = "b"
backends = "b"

[[proxy.routes]]
path = "/"
upstream = "b"

[[loads]]
name = "l"
url = "http://localhost/"
rate = 100
duration = "10s"
"#;

fn rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// Parses `BASE` + `tail` on a watched thread; it must be refused at a line of `tail`.
fn refused_quickly(tail: &str, quick: bool) {
    let text = format!("{BASE}{tail}");
    let src = Source {
        file: "fuzzed.toml".into(),
        text: text.clone(),
    };
    let parse = std::thread::spawn(move || Scenario::parse(&src, quick).map(|s| s.cases.len()));
    let start = Instant::now();
    while !parse.is_finished() {
        if start.elapsed() > Duration::from_secs(10) || rss_mb() > 1024 {
            // Straight to stderr: the harness's capture is lost when the process exits.
            let msg = format!(
                "Scenario::parse ran {:.1} s and holds {} MiB on:\n{text}\n",
                start.elapsed().as_secs_f64(),
                rss_mb()
            );
            let _ = std::io::stderr().write_all(msg.as_bytes());
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let e = parse
        .join()
        .unwrap()
        .expect_err("the scenario should be refused");
    let shown = e.to_string();
    assert!(shown.starts_with("fuzzed.toml:"), "{shown}");
    let line = e.line.unwrap_or_else(|| panic!("no line: {shown}"));
    assert!(
        line > BASE.lines().count(),
        "points into the valid part: {shown}"
    );
}

#[test]
fn huge_times_is_refused() {
    let tail = "\n[[actions]]\nat = \"1s\"\nevery = \"1s\"\ntimes = 4294967295\nreload = true\n";
    refused_quickly(tail, false);
}

#[test]
fn huge_times_in_quick_is_refused() {
    // The fuzzer's own find: a built-in scenario with `times = 4294967295` in a case's quick
    // override.
    let tail = "\n[[cases]]\nname = \"c\"\nquick = { actions = [{ at = \"1s\", every = \"0.9s\", times = 4294967295, reload = true }] }\n";
    refused_quickly(tail, true);
}

#[test]
fn huge_gradual_scale_backends_is_refused() {
    let tail = "\n[[actions]]\nat = \"1s\"\nscale_backends = { group = \"b\", to = 4294967295, step = \"1s\" }\n";
    refused_quickly(tail, false);
}

#[test]
fn huge_gradual_scale_replicas_is_refused() {
    let tail = "\n[[actions]]\nat = \"1s\"\nscale_replicas = { to = 4294967295, step = \"1s\" }\n";
    refused_quickly(tail, false);
}

#[test]
fn the_base_scenario_parses() {
    // Keeps the tests above honest: what they add is what gets refused, not the base.
    let src = Source {
        file: "fuzzed.toml".into(),
        text: BASE.to_string(),
    };
    assert_eq!(Scenario::parse(&src, false).map(|s| s.cases.len()), Ok(1));
}
