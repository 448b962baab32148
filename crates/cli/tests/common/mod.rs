//! What every catalogue scenario test does: run a built-in scenario's quick form through the
//! binary into a fresh results root, and read back what it recorded.
#![allow(dead_code)]

use model::{CaseResult, RunResults};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One quick run: its recorded results, results directory, exit code and printed output.
pub struct Quick {
    /// data.json, parsed.
    pub r: RunResults,
    /// `<root>/<scenario>/<stamp>`.
    pub dir: PathBuf,
    /// The binary's exit code.
    pub code: Option<i32>,
    /// stdout and stderr, for assertion messages.
    pub text: String,
}

/// Runs `proxybench run SCENARIO --quick --no-progress --results ROOT`.
pub fn run_quick(scenario: &str, root: &Path) -> Quick {
    run(scenario, true, root)
}

/// Runs `proxybench run SCENARIO [--quick] --no-progress --results ROOT` (a built-in name or a
/// file) into a root of its own.
pub fn run(scenario: &str, quick: bool, root: &Path) -> Quick {
    run_args(scenario, quick, root, &[])
}

/// [`run_quick`] with the proxy kind overridden (`--proxy KIND`).
#[allow(dead_code)] // not every test binary runs other proxies
pub fn run_quick_as(scenario: &str, kind: &str, root: &Path) -> Quick {
    run_args(scenario, true, root, &["--proxy", kind])
}

/// [`run`] with extra arguments.
fn run_args(scenario: &str, quick: bool, root: &Path, extra: &[&str]) -> Quick {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxybench"));
    cmd.args(["run", scenario, "--no-progress", "--results"])
        .arg(root)
        .args(extra);
    if quick {
        cmd.arg("--quick");
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = results_dir(root).unwrap_or_else(|| panic!("no results: {text}"));
    let r = serde_json::from_str(&fs::read_to_string(dir.join("data.json")).unwrap()).unwrap();
    Quick {
        r,
        dir,
        code: out.status.code(),
        text,
    }
}

/// The newest run directory under a results root that one scenario wrote
/// (`<root>/<scenario>/<stamp>`).
pub fn results_dir(root: &Path) -> Option<PathBuf> {
    let scenario = fs::read_dir(root).ok()?.flatten().next()?.path();
    let mut runs: Vec<PathBuf> = fs::read_dir(scenario)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    runs.sort();
    runs.pop()
}

/// The case called `name`.
pub fn case<'a>(r: &'a RunResults, name: &str) -> &'a CaseResult {
    r.cases
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("case {name} missing"))
}

/// A run's record and its per-request records, by case, as `mutated` receives them.
pub type Recorded = (
    model::RunRecord,
    std::collections::BTreeMap<String, analysis::Records>,
);

/// The mutation smoke: analyses a copy of the results directory `dir` after `mutate` changed
/// what it recorded, and returns the analysed results. A change that must break a check and
/// does not proves the check cannot fail.
pub fn mutated(dir: &Path, mutate: impl FnOnce(&mut Recorded)) -> RunResults {
    use analysis::record;
    let mut rec = record::read_record(dir).unwrap();
    let requests = rec
        .run
        .cases
        .iter_mut()
        .map(|c| {
            let recs = record::read_requests(dir, c).unwrap();
            assert!(c.partial.is_empty(), "{:?}", c.partial);
            (c.name.clone(), recs)
        })
        .collect();
    let mut recorded = (rec, requests);
    mutate(&mut recorded);
    let (rec, requests) = recorded;
    let copy = tempfile::tempdir().unwrap();
    fs::copy(
        dir.join(model::results_dir::SCENARIO_TOML),
        copy.path().join(model::results_dir::SCENARIO_TOML),
    )
    .unwrap();
    record::write_record(copy.path(), &rec).unwrap();
    for c in &rec.run.cases {
        record::write_requests(copy.path(), c, &requests[&c.name]).unwrap();
    }
    analysis::analyse(copy.path()).unwrap()
}

/// The check named `prefix...` of case `case` in `r`.
pub fn check<'a>(r: &'a RunResults, case: &str, prefix: &str) -> &'a model::CheckResult {
    r.checks
        .iter()
        .find(|k| k.case.as_deref() == Some(case) && k.name.starts_with(prefix))
        .unwrap_or_else(|| panic!("{case}: no check '{prefix}...': {:#?}", r.checks))
}
