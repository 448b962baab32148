//! docs/architecture.md's crate graph, checked against Cargo's: every workspace crate has one
//! line in the block under "## Crates and the arrows between them", and the crates of ours each
//! line names after its arrow are exactly that crate's normal dependencies among ours (tests'
//! dev-dependencies left out, as the map says). On failure it names each line that is wrong and
//! what Cargo says, so the map cannot drift from the house again.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// The prefix our package names carry; the map drops it (`proxybench-load` is `load`).
const OURS: &str = "proxybench-";

#[test]
fn the_architecture_map_names_every_arrow_cargo_has() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/architecture.md"
    ))
    .expect("read docs/architecture.md");
    let documented = documented_arrows(&doc);
    let normal = cargo_arrows();
    let mut wrong = Vec::new();
    for (krate, deps) in &normal {
        let Some(named) = documented.get(krate) else {
            wrong.push(format!(
                "{krate}: no line (add `{krate} ──► {}`)",
                list(deps)
            ));
            continue;
        };
        if named != deps {
            wrong.push(format!(
                "{krate}: the map says {}, Cargo.toml says {}",
                list(named),
                list(deps)
            ));
        }
    }
    for krate in documented.keys().filter(|k| !normal.contains_key(*k)) {
        wrong.push(format!(
            "{krate}: in the map, but no workspace crate has that name"
        ));
    }
    assert!(
        wrong.is_empty(),
        "docs/architecture.md's crate graph disagrees with Cargo:\n{}",
        wrong.join("\n")
    );
}

/// A set of crate names as the map writes it.
fn list(set: &BTreeSet<String>) -> String {
    if set.is_empty() {
        "(nothing of ours)".into()
    } else {
        set.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// The map's lines: crate → the crates of ours it names. A parenthesised note (crates that are
/// not ours, "tests only") ends the list and is not compared.
fn documented_arrows(doc: &str) -> Arrows {
    let section = doc
        .split("## Crates and the arrows between them")
        .nth(1)
        .expect("architecture.md has its crate-graph section");
    let block = section
        .split("```")
        .nth(1)
        .expect("the crate-graph section holds a fenced block");
    let mut arrows = BTreeMap::new();
    for line in block.lines().filter(|l| l.contains('►')) {
        let (krate, rest) = line
            .split_once("──►")
            .expect("a line reads `crate ──► deps`");
        let named = rest
            .split('(')
            .next()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let previous = arrows.insert(krate.trim().to_string(), named);
        assert!(
            previous.is_none(),
            "{} has two lines in the map",
            krate.trim()
        );
    }
    arrows
}

/// Crate → the crates of ours it uses, by their short names.
type Arrows = BTreeMap<String, BTreeSet<String>>;

/// Each workspace crate's normal dependencies among ours, from `cargo metadata` (offline: the
/// manifests are enough). The binary crate `proxybench` is `cli`, as in the map.
fn cargo_arrows() -> Arrows {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .args(["--manifest-path", manifest])
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let short = |name: &str| -> String {
        if name == "proxybench" {
            "cli".into()
        } else {
            name.strip_prefix(OURS).unwrap_or(name).to_string()
        }
    };
    let mut arrows = Arrows::new();
    for package in meta["packages"].as_array().expect("packages") {
        let uses = arrows
            .entry(short(package["name"].as_str().expect("a package's name")))
            .or_default();
        for dep in package["dependencies"].as_array().expect("dependencies") {
            let name = dep["name"].as_str().expect("a dependency's name");
            let ours = name == "proxybench" || name.starts_with(OURS);
            if ours && dep["kind"].is_null() {
                uses.insert(short(name));
            }
        }
    }
    arrows
}
