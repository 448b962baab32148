//! What a case measured, and what it could not: every collector's data is read through
//! [`CaseResult::gap`] or [`CaseResult::measured`], the one place that decides whether a
//! collector gathered anything, so that an absent collector's empty data is never read as zeros
//! by an analysis, a check or the report.

use crate::{CaseResult, Cell};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A source of measurements that a case may lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Collector {
    /// Readiness probes of each proxy replica ([`CaseResult::readiness`]).
    Readiness,
    /// Each proxy replica's status page ([`CaseResult::stub_samples`]).
    StatusPages,
    /// The proxy's access and error logs ([`CaseResult::logs`]).
    Logs,
    /// The backends' final counters ([`CaseResult::backends`]).
    BackendCounters,
    /// Every load's per-request records (`requests/<case>/<load>.bin`).
    Records,
    /// Pod phases and readiness from the cluster's pod watch (`ClusterRecord::pods`).
    PodWatch,
    /// Warning events from the cluster (`ClusterRecord::warnings`).
    Events,
    /// Container restarts seen by the pod watch (`ClusterRecord::restarts`).
    Restarts,
    /// CPU and memory per pod from the metrics API (`ClusterRecord::metrics`).
    MetricsApi,
    /// The optional Prometheus scrape (`ClusterRecord::scrapes`).
    Scrape,
    /// The watched pods' logs counted by level (`ClusterRecord::log_levels`).
    LogLevels,
}

impl Collector {
    /// Every collector, in report order.
    pub const ALL: [Collector; 11] = [
        Collector::Readiness,
        Collector::StatusPages,
        Collector::Logs,
        Collector::BackendCounters,
        Collector::Records,
        Collector::PodWatch,
        Collector::Events,
        Collector::Restarts,
        Collector::MetricsApi,
        Collector::Scrape,
        Collector::LogLevels,
    ];

    /// What the collector gathers, in words, for "not sampled" sentences.
    pub fn what(self) -> &'static str {
        match self {
            Collector::Readiness => "readiness probes",
            Collector::StatusPages => "status pages",
            Collector::Logs => "the proxy's logs",
            Collector::BackendCounters => "backend counters",
            Collector::Records => "per-request records",
            Collector::PodWatch => "the pod watch",
            Collector::Events => "cluster events",
            Collector::Restarts => "container restarts",
            Collector::MetricsApi => "the metrics API",
            Collector::Scrape => "the Prometheus scrape",
            Collector::LogLevels => "the watched pods' log levels",
        }
    }

    /// The prefix the Kubernetes platform gives this collector's sentence in
    /// `ClusterRecord::absent` (`metrics API: not served by this cluster`).
    fn cluster_prefix(self) -> Option<&'static str> {
        match self {
            Collector::PodWatch | Collector::Restarts => Some("pod watch"),
            Collector::Events => Some("events"),
            Collector::MetricsApi => Some("metrics API"),
            Collector::Scrape => Some("Prometheus scrape"),
            Collector::LogLevels => Some("log levels"),
            _ => None,
        }
    }
}

/// Why a value was not measured: the collector that would give it had no data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Absent {
    /// The collector that had nothing.
    pub collector: Collector,
    /// Why, one sentence fragment (`the proxy runs in pods: ...`).
    pub why: String,
}

impl fmt::Display for Absent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} not sampled: {}", self.collector.what(), self.why)
    }
}

/// A value drawn from a collector, or why the collector has none.
pub type Measured<T> = Result<T, Absent>;

impl Cell {
    /// A cell of a measured value, or `not sampled` when its collector had no data (the
    /// table's notes or the case's findings say why).
    pub fn measured<T>(m: &Measured<T>, f: impl FnOnce(&T) -> Cell) -> Cell {
        match m {
            Ok(v) => f(v),
            Err(_) => Cell::Missing("not sampled".into()),
        }
    }
}

impl CaseResult {
    /// Why `c` gathered nothing in this case, or `None` when its data is there to read. The
    /// reason the run recorded ([`CaseResult::absent`]) comes first; without one (runs recorded
    /// before it was kept), an empty collector counts as absent.
    pub fn gap(&self, c: Collector) -> Option<String> {
        if let Some(why) = self.absent.get(&c) {
            return Some(why.clone());
        }
        if let Some(prefix) = c.cluster_prefix() {
            let Some(k) = &self.cluster else {
                return Some("the case ran on no Kubernetes cluster".into());
            };
            if let Some(a) = k
                .absent
                .iter()
                .find(|a| a.split_once(':').is_some_and(|(p, _)| p.trim() == prefix))
            {
                return Some(a.clone());
            }
            if c == Collector::LogLevels && k.log_levels.is_empty() {
                return Some(
                    "no watched pod's log was counted by level (platform.watch.log_levels)".into(),
                );
            }
            return (c == Collector::Scrape && k.scrapes.is_empty())
                .then(|| "no Prometheus scrape was configured".into());
        }
        match c {
            Collector::Readiness => self
                .readiness
                .is_empty()
                .then(|| "no readiness probe was recorded".into()),
            Collector::StatusPages => self
                .stub_samples
                .is_empty()
                .then(|| "no status-page sample was recorded".into()),
            Collector::Logs => self.logs.missing.clone(),
            Collector::BackendCounters => {
                let missing = self
                    .cluster
                    .as_ref()
                    .map_or(&[][..], |k| &k.counters_missing);
                if !missing.is_empty() {
                    Some(format!(
                        "the final counters of {} backend pod(s) could not be read ({})",
                        missing.len(),
                        missing.join("; ")
                    ))
                } else if self.backends.is_empty() {
                    Some("no backend counters were recorded".into())
                } else {
                    None
                }
            }
            Collector::Records => {
                let loads: Vec<&str> = self.distributed.iter().map(|d| d.load.as_str()).collect();
                (!loads.is_empty()).then(|| {
                    format!(
                        "load(s) {} ran on agents, which keep no per-request records",
                        loads.join(", ")
                    )
                })
            }
            _ => None,
        }
    }

    /// `f` of this case when `c` gathered data, or why it gathered none.
    pub fn measured<'a, T>(
        &'a self,
        c: Collector,
        f: impl FnOnce(&'a CaseResult) -> T,
    ) -> Measured<T> {
        match self.gap(c) {
            Some(why) => Err(Absent { collector: c, why }),
            None => Ok(f(self)),
        }
    }

    /// Why load `load` has no per-request records, when the run kept none for it (it ran on
    /// agents, which keep none); `None` when the run meant to keep them.
    pub fn records_gap(&self, load: &str) -> Option<String> {
        self.distributed.iter().find(|d| d.load == load).map(|d| {
            format!(
                "load '{load}' ran on agents ({}), which keep no per-request records",
                d.place
            )
        })
    }
}
