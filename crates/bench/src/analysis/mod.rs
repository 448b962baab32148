//! Built-in analyses: scenario-specific theory that turns a case's measurements into predicted vs
//! measured tables and checks. A scenario names its analysis with `analysis = "NAME"`.

use crate::scenario::{Case, Scenario};
use model::{CaseResult, CheckResult, RequestRecord, RunResults};
use std::collections::BTreeMap;

/// The analyses a scenario may name.
pub const KNOWN: &[&str] = &[];

/// Runs the named analysis on one finished case: it may add tables, series and findings to the
/// case and returns its checks.
pub fn case(
    name: &str,
    _scn: &Scenario,
    _case: &Case,
    _result: &mut CaseResult,
    _records: &BTreeMap<String, Vec<RequestRecord>>,
) -> Vec<CheckResult> {
    let _ = name;
    Vec::new()
}

/// Runs the named analysis over the whole run (cross-case comparisons, summary findings).
pub fn finish(name: &str, _scn: &Scenario, _results: &mut RunResults) {
    let _ = name;
}
