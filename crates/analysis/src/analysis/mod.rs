//! Built-in analyses: scenario-specific theory that turns a case's measurements into predicted vs
//! measured tables and checks. A scenario names its analysis with `analysis = "NAME"`; the parser
//! checks the name against [`names`] (given through [`parse_options`]), and the analyse stage
//! finds the [`Analysis`] of that name in [`ALL`].
//!
//! An analysis is a pure function of what the run recorded: the case's measurements, its
//! per-request records and the scenario that was run. It reads nothing from the machine it runs
//! on, so `proxybench analyse DIR` on an old results directory gives the same output.

mod balance;
mod burst;
mod churn;
mod common;
mod growth;
mod overhead;
mod zero_downtime;

use model::{CaseResult, CheckResult, RequestRecord, RunResults};
use scenario::{Case, ParseOptions, Scenario};
use std::collections::BTreeMap;

/// Per-load request records of a case, by load name (sorted by completion time).
pub type Records = BTreeMap<String, Vec<RequestRecord>>;

/// Every connection's life of each long-lived load of a case, by load name (in order of start).
pub type Lives = BTreeMap<String, Vec<model::stream::ConnLife>>;

/// What an analysis reads about one finished case.
pub struct CaseInput<'a> {
    /// The scenario that ran (in the form that ran: full or `--quick`).
    pub scenario: &'a Scenario,
    /// The case's specification.
    pub case: &'a Case,
    /// Every request of every load of the case.
    pub records: &'a Records,
    /// The run's machine, as recorded when it ran (never read from the machine analysing).
    pub env: &'a model::Env,
}

/// A scenario's theory: per case, tables, series, findings and checks; over the whole run,
/// cross-case tables and findings.
pub trait Analysis: Sync {
    /// The name scenarios give in `analysis = "NAME"`.
    fn name(&self) -> &'static str;
    /// Runs on one finished case: may add tables, series and findings to `result`, and returns
    /// its checks (they join the run's checks).
    fn case(&self, input: &CaseInput<'_>, result: &mut CaseResult) -> Vec<CheckResult>;
    /// Runs after the last case: cross-case tables and run findings.
    fn finish(&self, scenario: &Scenario, results: &mut RunResults);
}

/// Every built-in analysis, registered once.
pub static ALL: &[&dyn Analysis] = &[
    &burst::Burst,
    &overhead::Overhead,
    &balance::Balance,
    &zero_downtime::ZeroDowntime,
    &growth::ConfigGrowth,
    &churn::Churn,
];

/// The analysis a scenario names, if there is one by that name.
pub fn find(name: &str) -> Option<&'static dyn Analysis> {
    ALL.iter().copied().find(|a| a.name() == name)
}

/// The resolution of the coarse clock a proxy caches (nginx's `ngx_current_msec` reads it) as the
/// run recorded it, in microseconds (1000, nginx's own millisecond, for records made before it
/// was kept).
pub(crate) fn coarse_clock_us(env: &model::Env) -> u64 {
    env.coarse_clock_us.unwrap_or(1000)
}

/// The names scenarios may give.
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|a| a.name()).collect()
}

/// Parse options that know every analysis of the registry by name, so that a scenario naming
/// an unknown one is a `file:line` error wherever it is parsed (run, analyse, check, tests).
pub fn parse_options() -> ParseOptions {
    ParseOptions {
        analyses: names(),
        ..ParseOptions::default()
    }
}
