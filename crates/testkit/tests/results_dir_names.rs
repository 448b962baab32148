//! docs/architecture.md's rule for the results directory, checked on the source: its files and
//! record folders are named in `model::results_dir` and nowhere else. A crate that writes
//! `"data.json"` or `.join("requests")` itself would let the layout drift from its one
//! description. The check reads the product part of every crate's `src/` (a file up to its
//! `#[cfg(test)]` module; comment lines skipped) and fails naming `file:line` of each literal.

use model::results_dir::*;
use proxybench_testkit::{assert_none_found, crates_dir, rust_files};
use std::fs;
use std::path::{Path, PathBuf};

/// The files no crate but model may spell, as a string literal.
const FILES: &[&str] = &[
    RECORD_JSON,
    SCENARIO_TOML,
    DATA_JSON,
    ENV_JSON,
    REPORT_MD,
    REPORT_HTML,
    TIMELINE_CSV,
    EVENTS_CSV,
    DISRUPTIONS_CSV,
    SAMPLES_CSV,
    RELOADS_CSV,
    SERIES_CSV,
    COMPARISON_JSON,
    COMPARISON_MD,
    COMPARISON_HTML,
    COMPARE_MD,
];

/// The record folders no crate but model may name, as a `join` argument (the bare words are
/// common: "requests" is also a metric).
const FOLDERS: &[&str] = &[REQUESTS_DIR, STREAMS_DIR, AGENTS_DIR, CHARTS_DIR];

/// `file:line: text` of each line of `text`'s product part that spells a name of the layout.
fn offenders(shown: &str, text: &str) -> Vec<String> {
    let spells = |l: &str| {
        FILES.iter().any(|n| l.contains(&format!("\"{n}\"")))
            || FOLDERS
                .iter()
                .any(|n| l.contains(&format!("join(\"{n}\")")))
    };
    text.lines()
        .enumerate()
        .take_while(|(_, l)| l.trim() != "#[cfg(test)]")
        .filter(|(_, l)| !l.trim_start().starts_with("//") && spells(l))
        .map(|(i, l)| format!("{shown}:{}: {}", i + 1, l.trim()))
        .collect()
}

#[test]
fn only_model_names_the_results_directory() {
    let crates = crates_dir();
    let owner = Path::new("model").join("src").join("results_dir.rs");
    let mut checked = 0;
    let mut found = Vec::new();
    let mut dirs: Vec<PathBuf> = fs::read_dir(&crates)
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        for file in rust_files(&dir) {
            let rel = file.strip_prefix(&crates).unwrap();
            if rel == owner {
                continue;
            }
            let text = fs::read_to_string(&file).unwrap();
            found.extend(offenders(&format!("crates/{}", rel.display()), &text));
            checked += 1;
        }
    }
    assert_none_found(
        checked,
        &found,
        "results-directory names spelled outside model::results_dir (use its constants and \
         path functions)",
    );
}

/// The checker itself: literals and joins in product code count; comments, other words and
/// test modules do not.
#[test]
fn the_checker_reads_literals_and_joins_of_product_code_only() {
    let src = r#"
let a = dir.join("data.json");
// dir.join("report.md") in a comment
let b = "data.json and report.md";
let c = r.join("requests").join(case);
let d = metric == "requests";
#[cfg(test)]
mod tests { const X: &str = "record.json"; }
"#;
    let found = offenders("f.rs", src);
    assert_eq!(
        found,
        [
            "f.rs:2: let a = dir.join(\"data.json\");",
            "f.rs:5: let c = r.join(\"requests\").join(case);"
        ]
    );
}
