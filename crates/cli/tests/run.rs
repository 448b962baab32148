//! End-to-end tests of `proxybench run`, `report` and `compare` through the binary, against a
//! real nginx and real backends on loopback.

use model::RunResults;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_proxybench")
}

/// Writes `toml` as a scenario file in `dir` and runs it; returns the output and the results
/// directory (if one was written).
fn run_scenario(dir: &Path, toml: &str, extra: &[&str]) -> (Output, Option<PathBuf>) {
    let file = dir.join("scenario.toml");
    fs::write(&file, toml).unwrap();
    let results = dir.join("results");
    let out = Command::new(bin())
        .arg("run")
        .arg(&file)
        .arg("--results")
        .arg(&results)
        .arg("--no-progress")
        .args(extra)
        .output()
        .unwrap();
    (out, results_dir(&results))
}

/// The single run directory under a results root (`<root>/<scenario>/<stamp>`).
fn results_dir(root: &Path) -> Option<PathBuf> {
    let scenario = fs::read_dir(root).ok()?.flatten().next()?.path();
    let mut runs: Vec<PathBuf> = fs::read_dir(scenario)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    runs.sort();
    runs.pop()
}

fn read(dir: &Path) -> RunResults {
    serde_json::from_str(&fs::read_to_string(dir.join("data.json")).unwrap()).unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Pids of processes whose command line mentions `needle` (nginx masters and workers run with
/// their prefix under the results directory).
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmd) = fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(needle) && pid != std::process::id() {
                pids.push(pid);
            }
        }
    }
    pids
}

const THREE_BACKENDS: &str = r#"
name = "spread"
description = "Three backends behind round robin; one reload"
checks = ["backends.spread <= 1%", "backends.requests == all.requests", "proxy.requests == all.requests"]

[[backends]]
name = "cafe"
count = 3

[proxy]
[[proxy.listeners]]
name = "http"
server_names = ["cafe.example.com"]
[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
keepalive = 16
[[proxy.routes]]
path = "/"
upstream = "cafe"

[[loads]]
name = "coffee"
url = "http://cafe.example.com/coffee"
connections = 6
requests = 30000
duration = "60s"

[[actions]]
at = "0.5s"
reload = true
"#;

#[test]
fn round_robin_spreads_evenly_counts_match_and_reports_rebuild() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, dir) = run_scenario(tmp.path(), THREE_BACKENDS, &[]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let dir = dir.expect("a results directory");
    let r = read(&dir);
    let case = &r.cases[0];
    let load = &case.loads[0];
    // The client made exactly 30000 attempts. The reload closes idle keep-alive connections, so
    // a few attempts can meet a closing connection (read_idle_closed, never anything else);
    // every response the client got was served by a backend and logged by nginx, exactly.
    assert_eq!(load.attempts(), 30_000);
    assert_eq!(
        load.error_total(),
        load.errors
            .get(&model::ErrorKind::ReadIdleClosed)
            .copied()
            .unwrap_or(0)
    );
    let served: u64 = case.backends.iter().map(|b| b.requests).sum();
    assert_eq!(served, load.requests);
    assert_eq!(case.logs.access_lines, load.requests);
    // Round robin: each backend within 1% of a third.
    for b in &case.backends {
        let third = load.requests as f64 / 3.0;
        assert!(
            (b.requests as f64 - third).abs() <= third * 0.01,
            "{}: {}",
            b.name,
            b.requests
        );
    }
    assert!(r.checks.iter().all(|c| c.pass), "{:?}", r.checks);
    // The reload was timed: the new config served, the old workers left.
    assert_eq!(case.reloads.len(), 1);
    let rel = &case.reloads[0];
    assert!(rel.error.is_none(), "{rel:?}");
    assert!(
        rel.served_ms.is_some() && rel.old_workers_exited_ms.is_some(),
        "{rel:?}"
    );
    let md = fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains("| Total | Total Errors | Ave Time (ms) | <= 500ms | <= 1000ms |"),
        "{md}"
    );
    // `report` rebuilds a byte-identical report.md from data.json alone.
    fs::remove_file(dir.join("report.md")).unwrap();
    let again = Command::new(bin())
        .arg("report")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(fs::read_to_string(dir.join("report.md")).unwrap(), md);
    // `compare` diffs two runs; a run against itself has zero deltas.
    let cmp = Command::new(bin())
        .arg("compare")
        .arg(&dir)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(cmp.status.success(), "{}", text(&cmp.stderr));
    let c = text(&cmp.stdout);
    let n = format!("{}", load.requests);
    let with_commas = format!("{},{}", &n[..n.len() - 3], &n[n.len() - 3..]);
    assert!(
        c.contains(&format!("| requests | {with_commas} | {with_commas} |")),
        "{c}"
    );
    for png in ["main-coffee-throughput.png", "main-coffee-latency.png"] {
        let bytes = fs::read(dir.join("charts").join(png)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{png}");
    }
}

#[test]
fn killing_a_backend_shows_in_its_window_and_in_the_error_log() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = r#"
name = "kill"
description = "A backend dies under load; nginx does not retry"

[[backends]]
name = "cafe"
count = 3

[proxy]
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
next_upstream = ["off"]
[[proxy.routes]]
path = "/"
upstream = "cafe"

[[loads]]
name = "coffee"
url = "http://localhost/coffee"
rate = 500
connections = 8
duration = "4s"

[[actions]]
at = "1s"
reload = true

[[actions]]
at = "2s"
kill_backend = "cafe-1"
"#;
    let (out, dir) = run_scenario(tmp.path(), scenario, &[]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let r = read(&dir.unwrap());
    let case = &r.cases[0];
    let kill = case
        .events
        .iter()
        .position(|e| e.action == "kill_backend")
        .unwrap();
    let w = case
        .disruptions
        .iter()
        .find(|d| d.event == kill)
        .expect("a window for the kill");
    // Without retries, requests nginx sends to the dead backend come back 502 (proxy-made).
    assert!(w.failed > 0, "{w:?}");
    assert_eq!(w.by_cause.get("502"), Some(&w.failed), "{w:?}");
    // Before the kill, the only failures possible are the reload's: old workers close idle
    // keep-alive connections, and a request sent on one as it closes reads nothing (NGF 1147).
    for d in case.disruptions.iter().filter(|d| d.event < kill) {
        let idle = d.by_cause.get("read_idle_closed").copied().unwrap_or(0);
        assert_eq!(d.failed, idle, "{d:?}");
    }
    assert_eq!(
        case.logs.status_origin.get("502 proxy").copied(),
        Some(w.failed)
    );
    let refused = case
        .logs
        .error_groups
        .iter()
        .find(|g| {
            g.message.contains("Connection refused") || g.message.contains("Connection reset")
        })
        .unwrap_or_else(|| panic!("{:?}", case.logs.error_groups));
    assert!(refused.count > 0);
    assert!(case.logs.error_levels.get("error").copied().unwrap_or(0) > 0);
}

#[test]
fn broken_scenarios_are_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, String, &str); 6] = [
        (
            "unknown key",
            THREE_BACKENDS.replace("count = 3", "count = 3\ncolour = \"blue\""),
            "scenario.toml:9: unknown field `colour`",
        ),
        (
            "bad value",
            THREE_BACKENDS.replace("duration = \"60s\"", "duration = \"60\""),
            "scenario.toml:27: duration '60' needs a unit",
        ),
        (
            "bad profile",
            THREE_BACKENDS.replace(
                "count = 3",
                "count = 3\nprofile = \"latency=lognorml(1ms)\"",
            ),
            "scenario.toml:9: latency: unknown distribution 'lognorml'",
        ),
        (
            "nginx -t",
            THREE_BACKENDS.replace(
                "[[proxy.listeners]]",
                "[proxy.raw]\nhttp = \"no_such_directive on;\"\n[[proxy.listeners]]",
            ),
            "scenario.toml:12: case 'main', [proxy] raw.http: nginx refused the config: \
             nginx: [emerg] unknown directive \"no_such_directive\"",
        ),
        (
            "nginx -t in an alternative config",
            THREE_BACKENDS.to_string()
                + "\n[configs.alt]\nkeepalive_requests = 10\n[configs.alt.raw]\n\
                   server = \"bogus_server_directive 1;\"\n",
            "scenario.toml:36: case 'main', [configs.alt] raw.server: nginx refused the config: \
             nginx: [emerg] unknown directive \"bogus_server_directive\"",
        ),
        (
            "an action after the loads",
            THREE_BACKENDS.replace("at = \"0.5s\"", "at = \"60s\""),
            "scenario.toml:29: reload at 60s fires after every load has ended (60s)",
        ),
    ];
    for (what, toml, want) in cases {
        let (out, dir) = run_scenario(tmp.path(), &toml, &[]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {err}");
        assert!(err.contains(want), "{what}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: one line: {err}");
        assert!(dir.is_none(), "{what}: nothing is written");
    }
    assert!(processes_mentioning(tmp.path().to_str().unwrap()).is_empty());
}

/// A small scenario: two backends with `profile`, one listener, 200 requests, then `extra`.
fn small(profile: &str, extra: &str) -> String {
    format!(
        r#"name = "small"
[[backends]]
name = "cafe"
count = 2
profile = "{profile}"
[proxy]
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
[[proxy.routes]]
path = "/"
upstream = "cafe"
[[loads]]
name = "coffee"
url = "http://cafe.example.com/"
connections = 2
requests = 200
duration = "30s"
{extra}"#
    )
}

#[test]
fn exit_codes_say_what_went_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str, toml: &str| {
        let d = tmp.path().join(name);
        fs::create_dir_all(&d).unwrap();
        let (out, dir) = run_scenario(&d, toml, &[]);
        (out, read(&dir.expect("results are written")))
    };

    // Everything held.
    let (out, _) = run("ok", &small("", ""));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // Every request failed (each backend answers 503): the target was unusable, whatever the
    // checks say (there are none).
    let (out, r) = run("unusable", &small("status=503:100%", ""));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("the target was unusable: every request failed in main/coffee"),
        "{err}"
    );
    assert_eq!(r.cases[0].loads[0].status.get(&503), Some(&200));

    // An action that failed: killing an instance that does not exist.
    let (out, r) = run(
        "action",
        &small("", "[[actions]]\nat = \"0s\"\nkill_backend = \"cafe-7\"\n"),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("1 action(s) failed; first: [main] kill_backend"),
        "{err}"
    );
    assert!(text(&out.stdout).contains("actions: 1 failed"));
    assert!(r.cases[0].events[0].error.is_some());

    // An action still waiting when the loads ended (by count, long before their duration) is
    // recorded as not run, and fails the run.
    let (out, r) = run(
        "late",
        &small("", "[[actions]]\nat = \"25s\"\nreload = true\n"),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let ev = &r.cases[0].events[0];
    assert_eq!(ev.action, "reload");
    assert_eq!(ev.error.as_deref(), Some("not run: every load had ended"));
    assert!(ev.detail.contains("planned at 25.00s"), "{ev:?}");

    // A check whose subject never happened fails with no data: no reload ran.
    let (out, r) = run(
        "nodata",
        &small("", "").replacen(
            "name = \"small\"",
            "name = \"small\"\nchecks = [\"reloads.errors == 0\"]",
            1,
        ),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(r.checks[0].actual, "no data: no reload happened");

    // More connections than the open-files limit can hold: refused before anything starts,
    // at the load's line, with the numbers.
    let d = tmp.path().join("fds");
    fs::create_dir_all(&d).unwrap();
    let (out, dir) = run_scenario(
        &d,
        &small("", "").replace("connections = 2", "connections = 1000000"),
        &[],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("scenario.toml:15: case 'main': its loads' 1000000 connections need"),
        "{err}"
    );
    assert!(err.contains("the open-files limit (ulimit -n) is"), "{err}");
    assert!(dir.is_none(), "nothing is written");

    // The help lists the codes.
    let help = Command::new(bin())
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = text(&help.stdout);
    for code in ["0 ", "1 ", "2 ", "3 ", "130 "] {
        assert!(
            help.contains(&format!("\n  {code}")),
            "exit code {code} in:\n{help}"
        );
    }
}

#[test]
fn case_flag_runs_only_the_named_cases_under_a_relative_results_root() {
    let tmp = tempfile::tempdir().unwrap();
    // 300 requests end long before the reload at 0.5 s would fire: no action here.
    let toml = THREE_BACKENDS
        .replace("requests = 30000", "requests = 300")
        .replace("[[actions]]\nat = \"0.5s\"\nreload = true\n", "")
        + "\n[[cases]]\nname = \"first\"\n\n[[cases]]\nname = \"second\"\n";
    let (out, dir) = run_scenario(tmp.path(), &toml, &["--case", "nope"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        "proxybench: --case nope: scenario 'spread' has no such case (first, second)"
    );
    assert!(dir.is_none());

    // From the scenario's directory with a relative results root, as `make run` does.
    let out = Command::new(bin())
        .current_dir(tmp.path())
        .args(["run", "scenario.toml", "--results", "rel", "--no-progress"])
        .args(["--case", "second"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let r = read(&results_dir(&tmp.path().join("rel")).unwrap());
    let names: Vec<&str> = r.cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["second"]);
    assert_eq!(r.cases[0].loads[0].requests, 300);
}

#[test]
fn ctrl_c_stops_everything_and_keeps_a_partial_report() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("long.toml");
    fs::write(&file, THREE_BACKENDS.replace("requests = 30000\n", "")).unwrap();
    let results = tmp.path().join("results");
    let child = Command::new(bin())
        .arg("run")
        .arg(&file)
        .arg("--results")
        .arg(&results)
        .arg("--no-progress")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until nginx runs (its prefix is under the results directory), then interrupt.
    let needle = results.to_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    while processes_mentioning(&needle).is_empty() {
        assert!(Instant::now() < deadline, "nginx never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill(2) takes no pointers; the pid is our child's, not yet waited for.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(
        processes_mentioning(&needle).is_empty(),
        "left behind: {:?}",
        processes_mentioning(&needle)
    );
    let dir = results_dir(&results).expect("partial results");
    let r = read(&dir);
    assert!(r.partial);
    assert_eq!(r.abort_reason.as_deref(), Some("interrupted"));
    assert!(r.cases[0].loads[0].requests > 0);
    let md = fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("PARTIAL"), "{md}");
}

#[test]
fn the_default_scenario_passes_in_quick_form() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(["run", "--quick", "--no-progress", "--results"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let s = text(&out.stdout);
    assert!(s.contains("checks: 5/5 passed"), "{s}");
    let list = Command::new(bin()).arg("scenarios").output().unwrap();
    assert!(
        text(&list.stdout).starts_with("default "),
        "{}",
        text(&list.stdout)
    );
}

#[test]
fn a_missing_scenario_is_a_usage_error() {
    let out = Command::new(bin())
        .args(["run", "no-such-scenario"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("'no-such-scenario' is neither a built-in scenario"));
}
