//! `proxybench run SCENARIO --proxy ...` through the binary, against real proxies and real
//! backends on loopback: one run per proxy kind (every kind but `external`, so the test grows as
//! drivers land), each in its own results directory, with comparison.md and comparison.json over
//! them whose counts are the runs' own; and the one-line refusals of bad `--proxy` lists.

use model::RunResults;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SCENARIO: &str = r#"
name = "two-cases"
description = "Two short cases behind the proxy under test, one with a reload"

[[backends]]
name = "cafe"
count = 2

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
connections = 4
requests = 20000
duration = "30s"

[[cases]]
name = "steady"

[[cases]]
name = "reload"
actions = [{ at = "0.2s", reload = true }]
"#;

fn run(dir: &Path, toml: &str, proxy: &str) -> (Output, PathBuf) {
    let file = dir.join("scenario.toml");
    fs::write(&file, toml).unwrap();
    let results = dir.join("results");
    let out = Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .arg("run")
        .arg(&file)
        .args(["--no-progress", "--proxy", proxy, "--results"])
        .arg(&results)
        .output()
        .unwrap();
    (out, results)
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The kinds a comparison runs: every kind but the user's own proxy.
fn comparable() -> Vec<&'static str> {
    proxy::ProxyKind::ALL
        .iter()
        .map(|k| k.name())
        .filter(|n| *n != "external")
        .collect()
}

#[test]
fn every_proxy_runs_into_its_own_directory_and_the_comparison_counts_are_theirs() {
    let tmp = tempfile::tempdir().unwrap();
    let kinds = comparable();
    // `all` is the list of every comparable kind, compared even while there is only one.
    let arg = if kinds.len() > 1 {
        kinds.join(",")
    } else {
        "all".to_string()
    };
    let (out, results) = run(tmp.path(), SCENARIO, &arg);
    let t = text(&out);
    let stamp_dirs: Vec<PathBuf> = fs::read_dir(results.join("two-cases"))
        .unwrap_or_else(|e| panic!("no results ({e}): {t}"))
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(stamp_dirs.len(), 1, "{t}");
    let root = &stamp_dirs[0];
    assert!(root.join("comparison.md").is_file(), "{t}");
    let md = fs::read_to_string(root.join("comparison.md")).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(root.join("comparison.json")).unwrap()).unwrap();
    assert_eq!(json["comparison_version"], 1);
    assert_eq!(json["scenario"], "two-cases");
    let listed: Vec<&str> = json["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(listed, kinds, "the proxies in the order given");
    // One full results directory per proxy, as a single run writes it, and nothing else.
    let mut entries: Vec<String> = fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    let mut want: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
    want.extend([
        "comparison.html".into(),
        "comparison.json".into(),
        "comparison.md".into(),
    ]);
    want.sort();
    assert_eq!(entries, want, "{t}");
    // comparison.html: the same comparison for a browser, each proxy's report.html linked,
    // rebuilt byte for byte from comparison.json by `report DIR`.
    let html = fs::read_to_string(root.join("comparison.html")).unwrap();
    for kind in &kinds {
        assert!(
            html.contains(&format!("href=\"{kind}/report.html\"")),
            "{kind}"
        );
    }
    fs::remove_file(root.join("comparison.html")).unwrap();
    let rebuilt = std::process::Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .arg("report")
        .arg(root)
        .output()
        .unwrap();
    assert!(rebuilt.status.success(), "{rebuilt:?}");
    assert_eq!(
        fs::read_to_string(root.join("comparison.html")).unwrap(),
        html
    );

    for (i, kind) in kinds.iter().enumerate() {
        let dir = root.join(kind);
        for f in ["data.json", "record.json", "report.md", "scenario.toml"] {
            assert!(dir.join(f).is_file(), "{kind}: no {f}");
        }
        let r: RunResults =
            serde_json::from_str(&fs::read_to_string(dir.join("data.json")).unwrap()).unwrap();
        assert!(!r.partial, "{kind}: {:?}", r.abort_reason);
        assert_eq!(json["proxies"][i]["status"], "complete", "{kind}");
        assert!(md.contains(&format!("[{kind}/report.md]({kind}/report.md)")));
        // The record names the kind it ran, so `analyse` sees the scenario as it ran.
        let rec: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.join("record.json")).unwrap()).unwrap();
        assert_eq!(rec["proxy"], *kind);
        assert_eq!(r.cases.len(), 2, "{kind}");
        for (ci, case) in r.cases.iter().enumerate() {
            let jc = &json["cases"][ci];
            assert_eq!(jc["name"], case.name.as_str());
            let l = &case.loads[0];
            let jl = jc["loads"][0]["by_proxy"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["kind"] == *kind)
                .unwrap_or_else(|| panic!("{kind}: case {} missing", case.name));
            assert_eq!(
                jl["requests"].as_u64(),
                Some(l.requests),
                "{kind} {}",
                case.name
            );
            assert_eq!(jl["attempts"].as_u64(), Some(l.attempts()));
            assert_eq!(jl["failures"].as_u64(), Some(l.failures()));
            // A requests load asks for exactly its count: answered or failed, every one is there.
            assert_eq!(l.attempts(), 20000, "{kind} {}", case.name);
            let jp = jc["proxy"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["kind"] == *kind)
                .unwrap();
            assert_eq!(jp["reloads"].as_u64(), Some(case.reloads.len() as u64));
            assert!(jp["peak_rss_bytes"].as_u64().unwrap() > 0, "{kind}: {jp}");
        }
        assert_eq!(
            r.cases[1].reloads.len(),
            1,
            "{kind}: one replica reloaded once"
        );
        // `analyse` reads the kind from the record: the same data.json, byte for byte.
        let before = fs::read(dir.join("data.json")).unwrap();
        let again = Command::new(env!("CARGO_BIN_EXE_proxybench"))
            .arg("analyse")
            .arg(&dir)
            .output()
            .unwrap();
        assert_eq!(again.status.code(), Some(0), "{kind}: {}", text(&again));
        assert_eq!(fs::read(dir.join("data.json")).unwrap(), before, "{kind}");
    }
    // The features the scenario uses, each with every proxy's support.
    let features = json["features"].as_array().unwrap();
    let keepalive = features
        .iter()
        .find(|f| f["feature"] == "upstreams.keepalive")
        .expect("upstream keepalive is used");
    assert_eq!(keepalive["support"].as_array().unwrap().len(), kinds.len());
    assert!(md.contains("`upstreams.keepalive`"));
    assert!(md.contains("## Case `reload`") && md.contains("reload served p50 / max (ms)"));
}

#[test]
fn bad_proxy_lists_and_configs_a_proxy_refuses_stop_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let bogus = SCENARIO.to_string()
        + "\n[configs.alt]\nkeepalive_requests = 10\n[configs.alt.raw]\n\
           server = \"bogus_server_directive 1;\"\n";
    let cases: Vec<(&str, String, &str)> = vec![
        ("nosuch", SCENARIO.into(), "unknown proxy kind 'nosuch'"),
        ("nginx,nginx", SCENARIO.into(), "nginx is named twice"),
        (
            "nginx,nosuch",
            SCENARIO.into(),
            "unknown proxy kind 'nosuch'",
        ),
        // Every kind's config is checked before the first run: one the proxy refuses stops the
        // comparison with the scenario line, before any results directory exists.
        ("all", bogus, "scenario.toml:"),
    ];
    for (arg, toml, want) in cases {
        let (out, results) = run(tmp.path(), &toml, arg);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "--proxy {arg}: {}", text(&out));
        assert_eq!(err.lines().count(), 1, "--proxy {arg}: {err}");
        assert!(err.contains(want), "--proxy {arg}: {err}");
        assert!(!results.exists(), "--proxy {arg}: results were written");
    }
}

#[test]
fn one_kind_overrides_the_scenario_in_a_single_run_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let kind = comparable()[0];
    let file = tmp.path().join("scenario.toml");
    fs::write(&file, SCENARIO).unwrap();
    let results = tmp.path().join("results");
    let out = Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .arg("run")
        .arg(&file)
        .args([
            "--no-progress",
            "--case",
            "steady",
            "--proxy",
            kind,
            "--results",
        ])
        .arg(&results)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let dir = fs::read_dir(results.join("two-cases"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    assert!(dir.join("data.json").is_file() && !dir.join("comparison.md").exists());
    let rec: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("record.json")).unwrap()).unwrap();
    assert_eq!(rec["proxy"], kind);
}

#[test]
fn ctrl_c_keeps_the_current_run_starts_no_other_and_still_writes_the_comparison() {
    let tmp = tempfile::tempdir().unwrap();
    let kinds = comparable();
    let arg = if kinds.len() > 1 {
        kinds.join(",")
    } else {
        "all".to_string()
    };
    // A paced load long enough to be interrupted.
    let toml = SCENARIO
        .replace("requests = 20000", "rate = 200")
        .replace("duration = \"30s\"", "duration = \"20s\"");
    let file = tmp.path().join("scenario.toml");
    fs::write(&file, toml).unwrap();
    let results = tmp.path().join("results");
    let mut child = Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .arg("run")
        .arg(&file)
        .args(["--no-progress", "--proxy", &arg, "--results"])
        .arg(&results)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the first proxy's run has recorded its scenario, it is under way.
    let first = kinds[0];
    let started = std::time::Instant::now();
    let root = loop {
        let found = fs::read_dir(results.join("two-cases"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.join(first).join("scenario.toml").is_file());
        if let Some(p) = found {
            break p;
        }
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the first run never started");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: kill(2) on our own child's pid, with a valid signal number.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(root.join("comparison.json")).unwrap()).unwrap();
    assert_eq!(json["partial"], true);
    let proxies = json["proxies"].as_array().unwrap();
    assert_eq!(proxies.len(), kinds.len());
    assert_eq!(proxies[0]["status"], "partial");
    assert_eq!(proxies[0]["detail"], "interrupted");
    for (p, kind) in proxies.iter().zip(&kinds).skip(1) {
        assert_eq!(p["status"], "not run", "{kind}");
        assert!(!root.join(kind).exists(), "{kind} started after Ctrl-C");
    }
    // The interrupted run's own directory holds its partial results, as a single run's would.
    let r: RunResults =
        serde_json::from_str(&fs::read_to_string(root.join(first).join("data.json")).unwrap())
            .unwrap();
    assert!(r.partial);
    let md = fs::read_to_string(root.join("comparison.md")).unwrap();
    assert!(md.contains("**PARTIAL**"), "{md}");
}

#[test]
fn the_capability_table_has_a_row_per_feature_and_a_column_per_kind() {
    let out = Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .arg("capabilities")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let t = String::from_utf8(out.stdout).unwrap();
    let head: Vec<&str> = t
        .lines()
        .next()
        .unwrap()
        .split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let mut want = vec!["Feature"];
    want.extend(proxy::ProxyKind::ALL.iter().map(|k| k.name()));
    assert_eq!(head, want);
    for f in proxy::Feature::ALL {
        let row = t
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", f.key())))
            .unwrap_or_else(|| panic!("no row for {}", f.key()));
        assert_eq!(row.matches(" |").count(), want.len(), "{row}");
    }
}
