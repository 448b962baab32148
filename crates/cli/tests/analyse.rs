//! `proxybench analyse DIR` end to end: a real quick run of the default scenario (real nginx, real
//! backends on loopback) records what it measured; with the analysis outputs deleted, analysing
//! the directory again (in place, and copied to another path) gives them back byte for byte.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn analyse(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .arg("analyse")
        .arg(dir)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Is `name` (relative to a results directory) written by the analysis, not the record?
fn is_output(name: &str) -> bool {
    name == "data.json"
        || name == "report.md"
        || name == "report.html"
        || name.ends_with(".csv")
        || name.starts_with("charts/")
}

/// Every analysis output of `dir`, by relative path, with its bytes.
fn outputs(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if is_output(&rel) {
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn delete_outputs(dir: &Path) {
    for name in outputs(dir).keys() {
        fs::remove_file(dir.join(name)).unwrap();
    }
    fs::remove_dir(dir.join("charts")).unwrap();
    assert!(outputs(dir).is_empty());
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        let dest: PathBuf = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            fs::copy(&p, &dest).unwrap();
        }
    }
}

fn assert_same(want: &BTreeMap<String, Vec<u8>>, got: &BTreeMap<String, Vec<u8>>, what: &str) {
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>(),
        "{what}: the same files"
    );
    for (name, bytes) in want {
        assert!(got[name] == *bytes, "{what}: {name} differs");
    }
}

#[test]
fn analyse_reproduces_a_run_byte_for_byte_in_place_and_elsewhere() {
    let root = tempfile::tempdir().unwrap();
    let q = common::run_quick("default", root.path());
    // A check (a p99 bound) may fail on a loaded machine; what matters here is that the
    // analysis, run again, says exactly what the run said, exit code included.
    assert!(matches!(q.code, Some(0 | 1)), "{}", q.text);
    let dir = &q.dir;

    // The record: what was measured, raw.
    for f in ["record.json", "scenario.toml"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let toml = fs::read_to_string(dir.join("scenario.toml")).unwrap();
    assert_eq!(toml, scenario::catalogue::builtin("default").unwrap().text);
    let case = common::case(&q.r, "main");
    assert!(!case.loads.is_empty());
    for load in &case.loads {
        let path = dir.join("requests/main").join(format!("{}.bin", load.name));
        let recs = model::records::decode(&fs::read(&path).unwrap()).unwrap();
        // One record per attempt, in completion order, each on one of the load's connections.
        assert_eq!(recs.len() as u64, load.attempts(), "{}", load.name);
        assert!(recs.windows(2).all(|w| w[0].t_us <= w[1].t_us));
        assert!(recs.iter().all(|r| r.conn < load.connections));
        let ok: Vec<_> = recs.iter().filter(|r| r.status == 200).collect();
        assert!(!ok.is_empty());
        // A 200 carries a head and a body; the bytes of all of them are what the load read.
        assert!(ok.iter().all(|r| r.bytes > 0));
        let all: u64 = recs.iter().map(|r| u64::from(r.bytes)).sum();
        assert!(all <= load.bytes_read, "{all} > {}", load.bytes_read);
    }

    let want = outputs(dir);
    for f in ["data.json", "report.md", "timeline.csv", "events.csv"] {
        assert!(
            want.contains_key(f),
            "{f} was not written: {:?}",
            want.keys()
        );
    }
    assert!(want.keys().any(|k| k.ends_with(".svg")), "no charts");

    // In place.
    delete_outputs(dir);
    let out = analyse(dir);
    assert_eq!(out.status.code(), q.code, "{}", text(&out));
    assert_same(&want, &outputs(dir), "analysed in place");

    // Elsewhere: the directory copied to another path, the outputs deleted there.
    let other = tempfile::tempdir().unwrap();
    let moved = other.path().join("somewhere/else");
    copy_dir(dir, &moved);
    delete_outputs(&moved);
    let out = analyse(&moved);
    assert_eq!(out.status.code(), q.code, "{}", text(&out));
    assert_same(&want, &outputs(&moved), "analysed after a copy");

    // One load's request file gone (of two): the other's are read, and report.md says what is
    // missing (the fault matrix, crates/bench/tests/partial_collectors.rs, holds that no check
    // that reads it passes).
    let gone = other.path().join("gone");
    copy_dir(dir, &gone);
    delete_outputs(&gone);
    fs::remove_file(gone.join("requests/main/tea.bin")).unwrap();
    let out = analyse(&gone);
    assert_eq!(out.status.code(), q.code, "{}", text(&out));
    let r: model::RunResults =
        serde_json::from_str(&fs::read_to_string(gone.join("data.json")).unwrap()).unwrap();
    let case = common::case(&r, "main");
    let s = case
        .shortfall(model::Collector::Records)
        .expect("the records are short of tea's");
    assert_eq!(s.coverage(), "1 of 2 loads");
    assert!(s.lacks("tea") && !s.lacks("coffee"));
    let md = fs::read_to_string(gone.join("report.md")).unwrap();
    assert!(
        md.contains("per-request records covered 1 of 2 loads (tea: ")
            && md.contains("requests/main/tea.bin is not there"),
        "report.md does not say what is missing"
    );
    // The checks of the scenario read the load summaries (kept in the record), not the
    // request files: they say what they said in the whole run.
    let whole: model::RunResults = serde_json::from_slice(&want["data.json"]).unwrap();
    for c in &r.checks {
        let w = whole.checks.iter().find(|w| w.name == c.name).unwrap();
        assert_eq!((c.pass, &c.actual), (w.pass, &w.actual), "{}", c.name);
    }
    // A damaged request file is bad input, named.
    let bin = moved.join("requests/main/coffee.bin");
    let bytes = fs::read(&bin).unwrap();
    fs::write(&bin, &bytes[..bytes.len() - 3]).unwrap();
    let out = analyse(&moved);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("coffee.bin: truncated: the header announces"),
        "{err}"
    );
}

#[test]
fn analyse_without_a_record_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("data.json"), "{}").unwrap();
    let out = analyse(dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no record.json here; is this a proxybench results directory"),
        "{err}"
    );

    let out = analyse(&dir.path().join("nope"));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope: no such directory"));

    fs::write(
        dir.path().join("record.json"),
        r#"{"record_version": 99, "run": {"schema": 1}}"#,
    )
    .unwrap();
    let out = analyse(dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "record version 99 (schema 1), but this proxybench reads record versions 1 to {}",
            model::RECORD_VERSION
        )),
        "{err}"
    );
}
