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
    want.extend(["comparison.json".into(), "comparison.md".into()]);
    want.sort();
    assert_eq!(entries, want, "{t}");

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
