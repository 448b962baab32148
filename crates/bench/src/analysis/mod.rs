//! Built-in analyses: scenario-specific theory that turns a case's measurements into predicted vs
//! measured tables and checks. A scenario names its analysis with `analysis = "NAME"`; each
//! analysis lives in its own module with two entry points:
//!
//! - `case(scn, case, result, records) -> Vec<CheckResult>`: after each case; may add tables,
//!   series and findings to `result` and returns its checks (they join the run's checks).
//! - `finish(scn, results)`: after the last case; cross-case tables and run findings.

mod balance;
mod burst;
mod overhead;
mod scale;
mod scaling;

use crate::scenario::{Case, Scenario};
use model::{CaseResult, CheckResult, RequestRecord, RunResults};
use std::collections::BTreeMap;

/// Per-load request records of a case, by load name (sorted by completion time).
pub type Records = BTreeMap<String, Vec<RequestRecord>>;

/// The analyses a scenario may name.
pub const KNOWN: &[&str] = &["burst", "overhead", "balance", "scaling", "scale"];

/// Runs the named analysis on one finished case.
pub fn case(
    name: &str,
    scn: &Scenario,
    case: &Case,
    result: &mut CaseResult,
    records: &Records,
) -> Vec<CheckResult> {
    match name {
        "burst" => burst::case(scn, case, result, records),
        "overhead" => overhead::case(scn, case, result, records),
        "balance" => balance::case(scn, case, result, records),
        "scaling" => scaling::case(scn, case, result, records),
        "scale" => scale::case(scn, case, result, records),
        _ => Vec::new(),
    }
}

/// Runs the named analysis over the whole run.
pub fn finish(name: &str, scn: &Scenario, results: &mut RunResults) {
    match name {
        "burst" => burst::finish(scn, results),
        "overhead" => overhead::finish(scn, results),
        "balance" => balance::finish(scn, results),
        "scaling" => scaling::finish(scn, results),
        "scale" => scale::finish(scn, results),
        _ => {}
    }
}
