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
