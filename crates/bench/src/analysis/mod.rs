//! Built-in analyses: scenario-specific theory that turns a case's measurements into predicted vs
//! measured tables and checks. A scenario names its analysis with `analysis = "NAME"`; each
//! analysis lives in its own module with two entry points:
//!
//! - `case(scn, case, result, records) -> Vec<CheckResult>`: after each case; may add tables,
//!   series and findings to `result` and returns its checks (they join the run's checks).
//! - `finish(scn, results)`: after the last case; cross-case tables and run findings.

use crate::scenario::{Case, Scenario};
use model::{CaseResult, CheckResult, RequestRecord, RunResults};
use std::collections::BTreeMap;

/// Per-load request records of a case, by load name (sorted by completion time).
pub type Records = BTreeMap<String, Vec<RequestRecord>>;

/// The analyses a scenario may name.
pub const KNOWN: &[&str] = &[];

/// Runs the named analysis on one finished case.
pub fn case(
    name: &str,
    scn: &Scenario,
    case: &Case,
    result: &mut CaseResult,
    records: &Records,
) -> Vec<CheckResult> {
    let _ = (name, scn, case, result, records);
    Vec::new()
}

/// Runs the named analysis over the whole run.
pub fn finish(name: &str, scn: &Scenario, results: &mut RunResults) {
    let _ = (name, scn, results);
}
