//! docs/architecture.md's claim, checked on Cargo's own graph: the analyse stage reads nothing
//! from the machine, by construction. `proxybench-analysis`'s normal dependencies (what its
//! library links; dev and build dependencies left out), followed to the end, hold no crate that
//! makes system calls or runs async I/O: no libc, rustix, tokio, mio, kube or k8s-openapi, and
//! none of our crates that drive processes, sockets or a cluster. Nor does it carry a template
//! engine: the scenario language names manifest templates, and the crate that renders them
//! (proxybench-manifests) is the run's, not the reader's. On failure it names the path from
//! analysis to each offending crate.

use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::process::Command;

/// Crates the analyse stage must not reach: the system-call layers, async runtimes and
/// Kubernetes clients, and our own crates that use them.
const FORBIDDEN: &[&str] = &[
    "libc",
    "rustix",
    "linux-raw-sys",
    "nix",
    "mio",
    "tokio",
    "kube",
    "kube-client",
    "k8s-openapi",
    "io-uring",
    "proxybench-proxy",
    "proxybench-backend",
    "proxybench-load",
    "proxybench-bench",
    "proxybench-k8s",
    "proxybench-agent",
    "proxybench-report",
];

/// What renders manifests: the template engine, the YAML reader its output is checked with,
/// and our crate that holds them.
const TEMPLATING: &[&str] = &["minijinja", "serde-saphyr", "proxybench-manifests"];

#[test]
fn analysis_has_no_system_dependency() {
    let graph = normal_graph();
    let (reached, found) = offenders(&graph, "proxybench-analysis", FORBIDDEN);
    assert!(
        reached.iter().any(|n| n == "proxybench-scenario"),
        "the walk did not reach proxybench-scenario: is the graph read right?"
    );
    assert!(
        found.is_empty(),
        "proxybench-analysis reaches crates that touch the machine (move what it needs into a \
         sys-free crate such as proxybench-setup or proxybench-model):\n{}",
        found.join("\n")
    );
}

#[test]
fn analysis_has_no_template_engine() {
    let graph = normal_graph();
    let (reached, found) = offenders(&graph, "proxybench-analysis", TEMPLATING);
    assert!(
        reached.iter().any(|n| n == "proxybench-scenario"),
        "the walk did not reach proxybench-scenario: is the graph read right?"
    );
    assert!(
        found.is_empty(),
        "proxybench-analysis reaches a template engine (templates are rendered by \
         proxybench-manifests, which the scenario language asks through scenario::Templates):\n{}",
        found.join("\n")
    );
    // The run renders its templates: the guard would see the engine if it were there.
    let (_, bench) = offenders(&graph, "proxybench-bench", TEMPLATING);
    assert!(
        bench.iter().any(|p| p.ends_with("-> minijinja")),
        "bench renders manifests, yet the walk finds no minijinja: {bench:?}"
    );
}

/// The crates `start` reaches (names) and, for each one of `forbidden` among them, the path to
/// it (`a -> b -> libc`). Breadth first, so each path is a shortest one.
fn offenders(
    graph: &BTreeMap<String, Vec<String>>,
    start: &str,
    forbidden: &[&str],
) -> (Vec<String>, Vec<String>) {
    let start = graph
        .keys()
        .find(|id| name_of(id) == start)
        .unwrap_or_else(|| panic!("{start} is not in the graph"))
        .clone();
    let mut via: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = VecDeque::from([start.clone()]);
    via.insert(start, String::new());
    while let Some(id) = queue.pop_front() {
        for dep in graph.get(&id).into_iter().flatten() {
            if !via.contains_key(dep) {
                via.insert(dep.clone(), id.clone());
                queue.push_back(dep.clone());
            }
        }
    }
    let mut found = Vec::new();
    for id in via.keys() {
        if forbidden.contains(&name_of(id)) {
            let mut path = vec![name_of(id).to_string()];
            let mut at = id.clone();
            while let Some(prev) = via.get(&at).filter(|p| !p.is_empty()) {
                path.push(name_of(prev).to_string());
                at = prev.clone();
            }
            path.reverse();
            found.push(path.join(" -> "));
        }
    }
    let reached = via.keys().map(|id| name_of(id).to_string()).collect();
    (reached, found)
}

/// The crate's name from a package id (`registry+https://...#libc@0.2.1`,
/// `path+file:///.../crates/model#proxybench-model@0.1.0`, or the old `name version (source)`).
fn name_of(id: &str) -> &str {
    match id.rsplit_once('#') {
        Some((source, tail)) => match tail.split_once('@') {
            Some((name, _)) => name,
            // `path+file:///.../crates/units#0.1.0`: the name is the directory's package name,
            // which Cargo leaves out when it equals the last path segment.
            None => source.rsplit('/').next().unwrap_or(source),
        },
        None => id.split(' ').next().unwrap_or(id),
    }
}

/// Every package's normal dependencies, by package id, on this machine's target, from
/// `cargo metadata` (offline: the lock file and the downloaded sources are enough).
fn normal_graph() -> BTreeMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let vv = Command::new(&rustc)
        .arg("-vV")
        .output()
        .expect("run rustc -vV");
    let vv = String::from_utf8(vv.stdout).unwrap();
    let host = vv
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host");
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let out = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", host, "--manifest-path", manifest])
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let mut graph = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().expect("resolve.nodes") {
        let id = node["id"].as_str().unwrap().to_string();
        let deps = node["deps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| k["kind"].is_null())
            })
            .map(|d| d["pkg"].as_str().unwrap().to_string())
            .collect();
        graph.insert(id, deps);
    }
    graph
}

/// The walk itself, on a graph where analysis reaches libc through a driver crate, and the
/// package ids as Cargo writes them.
#[test]
fn the_walk_names_the_path_to_an_offending_crate() {
    let id = |n: &str| format!("path+file:///w/crates/x#{n}@0.1.0");
    let graph: BTreeMap<String, Vec<String>> = [
        (
            id("proxybench-analysis"),
            vec![id("proxybench-model"), id("proxybench-proxy")],
        ),
        (id("proxybench-model"), vec![id("serde")]),
        (
            id("proxybench-proxy"),
            vec![id("libc"), id("proxybench-model")],
        ),
        (id("serde"), vec![]),
        (id("libc"), vec![]),
    ]
    .into_iter()
    .collect();
    let (reached, found) = offenders(&graph, "proxybench-analysis", FORBIDDEN);
    assert_eq!(reached.len(), 5);
    assert_eq!(
        found,
        [
            "proxybench-analysis -> proxybench-proxy -> libc",
            "proxybench-analysis -> proxybench-proxy",
        ]
    );
    assert_eq!(
        name_of("registry+https://github.com/rust-lang/crates.io-index#libc@0.2.180"),
        "libc"
    );
    assert_eq!(name_of("path+file:///w/crates/units#0.1.0"), "units");
    assert_eq!(name_of("libc 0.2.180 (registry+https://x)"), "libc");
}
