//! The record stage's types: what a run measured, before any analysis, as record.json holds
//! it. They are [`RunResults`] and [`CaseResult`] without what the analysis adds (checks,
//! disruption windows, tables, series, the long-lived connections' ledger), so a raw record
//! cannot carry an analysed field, and the analysis starts from measurements alone
//! ([`RunResults::from`] a [`MeasuredRun`]).

use crate::generation::GenerationSample;
use crate::ledger::StreamLedger;
use crate::load::LoadSummary;
use crate::run::{
    BackendCounters, CaseResult, ClusterRecord, DistributedLoad, Env, Event, LogSummary,
    ProbeRecord, ProcSample, ReadinessSample, ReadyRecord, ReloadRecord, RunResults, StubSample,
    TimeWait,
};
use crate::stream::StreamSummary;
use crate::{Collector, Shortfall};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `record.json`: what a run measured, before any analysis. `proxybench analyse DIR` turns it,
/// the scenario.toml beside it and the request records under `requests/` into data.json and the
/// report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Layout version ([`crate::RECORD_VERSION`]).
    pub record_version: u32,
    /// The name the scenario file was read under (`<builtin>/default.toml`, or a path), for
    /// messages when scenario.toml is parsed again.
    pub scenario_file: String,
    /// The scenario's cases that were chosen to run (all of them, or those `--case` named), in
    /// order: the analysis sees the scenario in this form.
    pub selected_cases: Vec<String>,
    /// The case whose failure stopped the run, when it left a result: it is analysed, but its
    /// checks are not evaluated (a case cut short would fail them for the wrong reason).
    #[serde(default)]
    pub aborted_case: Option<String>,
    /// The proxy kind the run used instead of the scenario's own (`run --proxy KIND`), by name:
    /// the analysis applies it to scenario.toml as it was read back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// The measurements.
    pub run: MeasuredRun,
}

/// A run's measurements: data.json's run-level fields that the runner knows, and its cases as
/// recorded. Field by field as in [`RunResults`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct MeasuredRun {
    /// Schema version of the measurements ([`crate::SCHEMA_VERSION`]).
    pub schema: u32,
    /// As [`RunResults::scenario`].
    pub scenario: String,
    /// As [`RunResults::description`].
    pub description: String,
    /// As [`RunResults::started_at`].
    pub started_at: String,
    /// As [`RunResults::quick`].
    pub quick: bool,
    /// As [`RunResults::partial`].
    pub partial: bool,
    /// As [`RunResults::abort_reason`].
    pub abort_reason: Option<String>,
    /// As [`RunResults::env`].
    pub env: Env,
    /// The cases that ran, in order.
    pub cases: Vec<CaseRecord>,
    /// What the runner itself found about the run (a namespace kept or left behind), one
    /// sentence each; the analysis's findings come before these in data.json.
    pub findings: Vec<String>,
}

/// One case's measurements. Field by field as in [`CaseResult`], which adds what the analysis
/// computes from them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CaseRecord {
    /// As [`CaseResult::name`].
    pub name: String,
    /// As [`CaseResult::description`].
    pub description: String,
    /// As [`CaseResult::start_s`].
    pub start_s: f64,
    /// As [`CaseResult::elapsed_s`].
    pub elapsed_s: f64,
    /// As [`CaseResult::loads`].
    pub loads: Vec<LoadSummary>,
    /// As [`CaseResult::events`].
    pub events: Vec<Event>,
    /// As [`CaseResult::reloads`].
    pub reloads: Vec<ReloadRecord>,
    /// As [`CaseResult::logs`].
    pub logs: LogSummary,
    /// As [`CaseResult::proc_samples`].
    pub proc_samples: Vec<ProcSample>,
    /// As [`CaseResult::stub_samples`].
    pub stub_samples: Vec<StubSample>,
    /// As [`CaseResult::readiness`].
    #[serde(default)]
    pub readiness: Vec<ReadinessSample>,
    /// As [`CaseResult::ready`].
    #[serde(default)]
    pub ready: Vec<ReadyRecord>,
    /// As [`CaseResult::probes`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeRecord>,
    /// As [`CaseResult::backends`].
    pub backends: Vec<BackendCounters>,
    /// As [`CaseResult::time_wait`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_wait: Option<TimeWait>,
    /// What the runner itself found about the case (a teardown failure, the stage's time),
    /// one sentence each; the analysis's findings come before these in data.json.
    pub findings: Vec<String>,
    /// As [`CaseResult::cluster`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterRecord>,
    /// As [`CaseResult::distributed`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distributed: Vec<DistributedLoad>,
    /// As [`CaseResult::absent`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub absent: BTreeMap<Collector, String>,
    /// As [`CaseResult::partial`]; [`CaseRecord::add_missing`] adds to it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub partial: BTreeMap<Collector, Shortfall>,
    /// As [`CaseResult::streams`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<StreamSummary>,
    /// As [`CaseResult::generations`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generations: Vec<GenerationSample>,
    /// As [`CaseResult::monotonic_origin_ns`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monotonic_origin_ns: Option<u64>,
}

impl CaseRecord {
    /// Records that `c` missed `item` (one of `of` items of `unit`) with why, as
    /// [`CaseResult::add_missing`].
    pub fn add_missing(&mut self, c: Collector, unit: &str, of: usize, item: &str, why: &str) {
        crate::measured::add_missing(&mut self.partial, c, unit, of, item, why);
    }
}

impl From<CaseRecord> for CaseResult {
    /// The case as the analysis starts it: its measurements, nothing analysed yet.
    fn from(r: CaseRecord) -> CaseResult {
        let CaseRecord {
            name,
            description,
            start_s,
            elapsed_s,
            loads,
            events,
            reloads,
            logs,
            proc_samples,
            stub_samples,
            readiness,
            ready,
            probes,
            backends,
            time_wait,
            findings,
            cluster,
            distributed,
            absent,
            partial,
            streams,
            generations,
            monotonic_origin_ns,
        } = r;
        CaseResult {
            name,
            description,
            start_s,
            elapsed_s,
            loads,
            disruptions: Vec::new(),
            events,
            reloads,
            logs,
            proc_samples,
            stub_samples,
            readiness,
            ready,
            probes,
            backends,
            time_wait,
            tables: Vec::new(),
            series: Vec::new(),
            findings,
            cluster,
            distributed,
            absent,
            partial,
            streams,
            generations,
            monotonic_origin_ns,
            stream_ledger: None::<StreamLedger>,
        }
    }
}

impl From<MeasuredRun> for RunResults {
    /// The run as the analysis starts it: its measurements, no check evaluated yet.
    fn from(r: MeasuredRun) -> RunResults {
        RunResults {
            schema: r.schema,
            scenario: r.scenario,
            description: r.description,
            started_at: r.started_at,
            quick: r.quick,
            partial: r.partial,
            abort_reason: r.abort_reason,
            env: r.env,
            cases: r.cases.into_iter().map(CaseResult::from).collect(),
            findings: r.findings,
            checks: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_of_the_first_version_reads_without_its_empty_analysed_fields() {
        // Version 1 wrote the run as data.json's RunResults, with the analysed fields empty.
        let v1 = RunResults {
            schema: crate::SCHEMA_VERSION,
            scenario: "s".into(),
            description: String::new(),
            started_at: "t".into(),
            quick: true,
            partial: false,
            abort_reason: None,
            env: Env::default(),
            cases: vec![CaseResult {
                name: "main".into(),
                elapsed_s: 1.5,
                findings: vec!["teardown: x".into()],
                ..Default::default()
            }],
            findings: vec!["kept".into()],
            checks: Vec::new(),
        };
        let text = serde_json::to_string(&v1).unwrap();
        let run: MeasuredRun = serde_json::from_str(&text).unwrap();
        assert_eq!(run.cases[0].elapsed_s, 1.5);
        let back = RunResults::from(run);
        assert_eq!(back, v1, "what version 1 held comes through whole");
    }
}
