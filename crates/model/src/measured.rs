//! What a case measured, and what it could not: every collector's data is read through
//! [`CaseResult::gap`] or [`CaseResult::measured`], the one place that decides whether a
//! collector gathered anything, so that an absent collector's empty data is never read as zeros
//! by an analysis, a check or the report.

use crate::{CaseResult, Cell};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
    /// The proxy replicas' processes by generation ([`CaseResult::generations`]).
    Generations,
    /// Every long-lived connection's life (`streams/<case>/<load>.csv`).
    StreamLives,
}

impl Collector {
    /// Every collector, in report order.
    pub const ALL: [Collector; 13] = [
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
        Collector::Generations,
        Collector::StreamLives,
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
            Collector::Generations => "the proxy's processes by generation",
            Collector::StreamLives => "the long-lived connections' lives",
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

/// One item (a replica, a pod, a log, a node, a load) a collector was meant to cover and did
/// not, wholly or in part, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingItem {
    /// The item's name (`nginx-2`, `proxy-7c9f/nginx`, `node-2`).
    pub item: String,
    /// Why it is missing (`connection refused`, `3 of 30 samples failed: timed out`).
    pub why: String,
}

/// What a collector covered of the items it was meant to, when it missed some: recorded by the
/// run in [`CaseResult::partial`], so that every reader of the collector's data sees the
/// shortfall.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Shortfall {
    /// What one item is, plural (`replicas`, `pods`, `logs`, `nodes`, `loads`).
    pub unit: String,
    /// How many items the collector was meant to cover.
    pub of: usize,
    /// The items it missed wholly or in part, each with why.
    pub missing: Vec<MissingItem>,
}

impl Shortfall {
    /// A shortfall of `missing` among `of` items of `unit`.
    pub fn new(unit: &str, of: usize, missing: Vec<MissingItem>) -> Shortfall {
        Shortfall {
            unit: unit.to_string(),
            of: of.max(missing.len()),
            missing,
        }
    }

    /// Items covered whole.
    pub fn covered(&self) -> usize {
        self.of - self.missing.len().min(self.of)
    }

    /// True when `item` is among the missing.
    pub fn lacks(&self, item: &str) -> bool {
        self.missing.iter().any(|m| m.item == item)
    }

    /// The coverage in a few words, for a cell: `2 of 3 replicas`.
    pub fn coverage(&self) -> String {
        format!("{} of {} {}", self.covered(), self.of, self.unit)
    }

    /// The missing items with why: `nginx-2: connection refused; nginx-3: timed out`.
    pub fn detail(&self) -> String {
        self.missing
            .iter()
            .map(|m| format!("{}: {}", m.item, m.why))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// This shortfall and `other` of the same collector as one (items by name, once each).
    fn merge(mut self, other: &Shortfall) -> Shortfall {
        for m in &other.missing {
            if !self.lacks(&m.item) {
                self.missing.push(m.clone());
            }
        }
        self.of = self.of.max(other.of).max(self.missing.len());
        self
    }
}

/// Evidence that a collector covered only in part: which collector, and what it missed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial {
    /// The collector that missed items.
    pub collector: Collector,
    /// What it covered and what it missed.
    pub shortfall: Shortfall,
}

impl fmt::Display for Partial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} covered {} ({})",
            self.collector.what(),
            self.shortfall.coverage(),
            self.shortfall.detail()
        )
    }
}

/// A value drawn from a collector, with its coverage: whole, in part (the value of what was
/// covered, and what was missed), or absent (why the collector has none). A check passes only
/// on [`Measured::Complete`]; a cell shows a partial value with its coverage; a finding is not
/// written from a partial value unless its sentence says so.
#[derive(Debug, Clone, PartialEq)]
pub enum Measured<T> {
    /// Every item the collector was meant to cover was covered.
    Complete(T),
    /// The value of the items covered, and what was missed.
    Partial(T, Partial),
    /// Nothing was gathered.
    Absent(Absent),
}

/// Why a value is not complete evidence: the collector gathered nothing, or only part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incomplete {
    /// Nothing was gathered.
    Absent(Absent),
    /// Only part was gathered.
    Partial(Partial),
}

impl Incomplete {
    /// The collector concerned.
    pub fn collector(&self) -> Collector {
        match self {
            Incomplete::Absent(a) => a.collector,
            Incomplete::Partial(p) => p.collector,
        }
    }
}

impl fmt::Display for Incomplete {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Incomplete::Absent(a) => a.fmt(f),
            Incomplete::Partial(p) => p.fmt(f),
        }
    }
}

impl<T> Measured<T> {
    /// The value when it is complete evidence, or why it is not: what a check reads.
    pub fn complete(self) -> Result<T, Incomplete> {
        match self {
            Measured::Complete(v) => Ok(v),
            Measured::Partial(_, p) => Err(Incomplete::Partial(p)),
            Measured::Absent(a) => Err(Incomplete::Absent(a)),
        }
    }

    /// The value of what was covered, whole or in part; `None` when nothing was gathered.
    pub fn value(&self) -> Option<&T> {
        match self {
            Measured::Complete(v) | Measured::Partial(v, _) => Some(v),
            Measured::Absent(_) => None,
        }
    }

    /// True when the value is complete evidence.
    pub fn is_complete(&self) -> bool {
        matches!(self, Measured::Complete(_))
    }

    /// True when something was gathered (whole or in part).
    pub fn is_sampled(&self) -> bool {
        !matches!(self, Measured::Absent(_))
    }

    /// The same coverage over a reference to the value.
    pub fn as_ref(&self) -> Measured<&T> {
        match self {
            Measured::Complete(v) => Measured::Complete(v),
            Measured::Partial(v, p) => Measured::Partial(v, p.clone()),
            Measured::Absent(a) => Measured::Absent(a.clone()),
        }
    }

    /// `f` of the value, with the same coverage.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Measured<U> {
        match self {
            Measured::Complete(v) => Measured::Complete(f(v)),
            Measured::Partial(v, p) => Measured::Partial(f(v), p),
            Measured::Absent(a) => Measured::Absent(a),
        }
    }

    /// `f` of the value, whose own coverage joins this one's (the narrower wins).
    pub fn and_then<U>(self, f: impl FnOnce(T) -> Measured<U>) -> Measured<U> {
        match self {
            Measured::Complete(v) => f(v),
            Measured::Partial(v, p) => match f(v) {
                Measured::Complete(u) => Measured::Partial(u, p),
                Measured::Partial(u, q) => Measured::Partial(u, join(p, &q)),
                Measured::Absent(a) => Measured::Absent(a),
            },
            Measured::Absent(a) => Measured::Absent(a),
        }
    }

    /// Both values, with the narrower coverage of the two.
    pub fn zip<U>(self, other: Measured<U>) -> Measured<(T, U)> {
        self.and_then(|a| other.map(|b| (a, b)))
    }
}

/// Two partial coverages as one: the same collector's shortfalls merged; of two collectors,
/// the first one's (a check or cell names one collector's shortfall; either makes it partial).
fn join(p: Partial, q: &Partial) -> Partial {
    if p.collector == q.collector {
        Partial {
            collector: p.collector,
            shortfall: p.shortfall.merge(&q.shortfall),
        }
    } else {
        p
    }
}

/// Every value of `items` with the narrowest coverage among them: absent when any is absent (the
/// first such), partial when any is partial, else complete.
impl<T> FromIterator<Measured<T>> for Measured<Vec<T>> {
    fn from_iter<I: IntoIterator<Item = Measured<T>>>(items: I) -> Self {
        let mut out = Measured::Complete(Vec::new());
        for m in items {
            out = out.and_then(|mut v| {
                m.map(|x| {
                    v.push(x);
                    v
                })
            });
            if let Measured::Absent(_) = out {
                return out;
            }
        }
        out
    }
}

impl Cell {
    /// A cell of a measured value: the value; a partial one with its coverage (`12 (2 of 3
    /// replicas)`); or `not sampled` when its collector had no data (the table's notes or the
    /// case's findings say why).
    pub fn measured<T>(m: &Measured<T>, f: impl FnOnce(&T) -> Cell) -> Cell {
        match m {
            Measured::Complete(v) => f(v),
            Measured::Partial(v, p) => Cell::Partial {
                value: Box::new(f(v)),
                coverage: p.shortfall.coverage(),
            },
            Measured::Absent(_) => Cell::Missing("not sampled".into()),
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
                // Some read, some not: partial ([`CaseResult::shortfall`]), not absent.
                (self.backends.is_empty()).then(|| {
                    if missing.is_empty() {
                        "no backend counters were recorded".to_string()
                    } else {
                        format!(
                            "the final counters of {} backend pod(s) could not be read ({})",
                            missing.len(),
                            missing.join("; ")
                        )
                    }
                })
            }
            Collector::Generations => self
                .generations
                .is_empty()
                .then(|| "no proxy process was sampled".into()),
            Collector::StreamLives => self
                .streams
                .is_empty()
                .then(|| "no long-lived load ran in this case".into()),
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

    /// What `c` missed of the items it was meant to cover in this case, when it gathered
    /// something but not everything (the run recorded it in [`CaseResult::partial`]).
    /// Besides what the run recorded, a collector's own rows may say an item is short: a
    /// watched container's log read in part, or with lines whose level cannot be read; a
    /// backend pod whose final counters could not be read.
    pub fn shortfall(&self, c: Collector) -> Option<Shortfall> {
        let mut s = self.partial.get(&c).cloned().unwrap_or_default();
        let mut add = |unit: &str, of: usize, item: String, why: String| {
            if s.unit.is_empty() {
                s.unit = unit.to_string();
            }
            if !s.lacks(&item) {
                s.missing.push(MissingItem { item, why });
            }
            s.of = s.of.max(of).max(s.missing.len());
        };
        match (c, &self.cluster) {
            (Collector::LogLevels, Some(k)) => {
                for l in &k.log_levels {
                    let item = format!("{}/{}", l.pod, l.container);
                    let of = k.log_levels.len();
                    if let Some(why) = &l.incomplete {
                        add("logs", of, item, format!("read in part: {why}"));
                    } else if l.lines > l.leveled {
                        add(
                            "logs",
                            of,
                            item,
                            format!(
                                "{} of {} line(s) carry no level it can read",
                                l.lines - l.leveled,
                                l.lines
                            ),
                        );
                    }
                }
            }
            (Collector::StreamLives, _) => {
                let of = self.streams.len();
                for st in self.streams.iter().filter(|st| st.lives_left_out > 0) {
                    add(
                        "loads",
                        of,
                        st.name.clone(),
                        format!(
                            "{} connection lives past the first {} were left out",
                            st.lives_left_out,
                            crate::stream::StreamSummary::LIVES_MAX
                        ),
                    );
                }
            }
            (Collector::BackendCounters, Some(k)) if !self.backends.is_empty() => {
                let of = self.backends.len() + k.counters_missing.len();
                for m in &k.counters_missing {
                    let (item, why) = m.split_once(": ").unwrap_or((m.as_str(), "not read"));
                    add("backend pods", of, item.to_string(), why.to_string());
                }
            }
            _ => {}
        }
        (!s.missing.is_empty()).then_some(s)
    }

    /// Why `c`'s data in this case is not complete evidence (nothing gathered, or only part),
    /// or `None` when it is: what a check asks before it reads the data.
    pub fn incomplete(&self, c: Collector) -> Option<Incomplete> {
        match self.measured(c, |_| ()) {
            Measured::Complete(()) => None,
            Measured::Partial((), p) => Some(Incomplete::Partial(p)),
            Measured::Absent(a) => Some(Incomplete::Absent(a)),
        }
    }

    /// `f` of this case with `c`'s coverage: complete, partial (what it missed), or absent
    /// (why it gathered nothing).
    pub fn measured<'a, T>(
        &'a self,
        c: Collector,
        f: impl FnOnce(&'a CaseResult) -> T,
    ) -> Measured<T> {
        if let Some(why) = self.gap(c) {
            return Measured::Absent(Absent { collector: c, why });
        }
        match self.shortfall(c) {
            Some(shortfall) => Measured::Partial(
                f(self),
                Partial {
                    collector: c,
                    shortfall,
                },
            ),
            None => Measured::Complete(f(self)),
        }
    }

    /// Records that `c` missed `item` (one of `of` items of `unit`) with why; a second miss of
    /// the same item keeps the first reason.
    pub fn add_missing(&mut self, c: Collector, unit: &str, of: usize, item: &str, why: &str) {
        add_missing(&mut self.partial, c, unit, of, item, why);
    }

    /// Which loads' per-request records the analysis has: complete when every load's, partial
    /// naming each load without them and why (it ran on agents, its file could not be read),
    /// absent when no load's. What is drawn from the records of all loads together (the
    /// disruption windows) carries this coverage.
    pub fn records_coverage(&self) -> Measured<()> {
        let read = self.shortfall(Collector::Records);
        let missing: Vec<MissingItem> = self
            .loads
            .iter()
            .filter_map(|l| {
                let why = self.records_gap(&l.name).or_else(|| {
                    read.as_ref()
                        .and_then(|s| s.missing.iter().find(|m| m.item == l.name))
                        .map(|m| m.why.clone())
                })?;
                Some(MissingItem {
                    item: l.name.clone(),
                    why,
                })
            })
            .collect();
        if missing.is_empty() {
            return Measured::Complete(());
        }
        if missing.len() == self.loads.len() {
            return Measured::Absent(Absent {
                collector: Collector::Records,
                why: missing
                    .iter()
                    .map(|m| format!("{}: {}", m.item, m.why))
                    .collect::<Vec<_>>()
                    .join("; "),
            });
        }
        Measured::Partial(
            (),
            Partial {
                collector: Collector::Records,
                shortfall: Shortfall::new("loads", self.loads.len(), missing),
            },
        )
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

/// Records in `partial` that `c` missed `item` (one of `of` items of `unit`) with why; a second
/// miss of the same item keeps the first reason. The one rule behind
/// [`CaseResult::add_missing`] and [`crate::CaseRecord::add_missing`].
pub(crate) fn add_missing(
    partial: &mut BTreeMap<Collector, Shortfall>,
    c: Collector,
    unit: &str,
    of: usize,
    item: &str,
    why: &str,
) {
    let s = partial
        .entry(c)
        .or_insert_with(|| Shortfall::new(unit, of, Vec::new()));
    if !s.lacks(item) {
        s.missing.push(MissingItem {
            item: item.to_string(),
            why: why.to_string(),
        });
    }
    s.of = s.of.max(of).max(s.missing.len());
}
