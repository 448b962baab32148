//! Checks: SLOs and predictions written as one-line expressions, e.g. `coffee.failure_rate <= 0.5%`,
//! `tea.p99 <= 250ms`, `backends.spread <= 1%`, `backends.requests == all.requests`,
//! `proxy.errors == 0`, `reloads.avg_ms < 500`. A breached check makes the run's exit code non-zero.
//!
//! Subjects: a load's name, `all` (every load summed), `backends`, `proxy` (the proxy under
//! test, whatever its kind: its logs and status page; `nginx` is read as an alias, as scenarios
//! written before other kinds existed spell it), `reloads`, `cluster` (Kubernetes only: container
//! restarts, Warning events, the fewest and most proxy pods Ready).
//! Values may carry units: `%`, `ppm`, durations (`250ms`), `r/s`; or be another `subject.metric`.
//!
//! A check on data the run's proxy kind cannot give (no status page, no logs, no reload timing)
//! fails with "not measurable for KIND: why": it never passes and never reads zeros.

pub use crate::error::CheckError;
mod metrics;

use metrics::metric_value;
use model::metric::{self, MetricKind};
use model::stream::EndKind;
use model::{CaseResult, CheckResult, Collector, Incomplete, LoadSummary};
use std::fmt;

/// The subject of the proxy under test, whatever its kind.
pub const PROXY_SUBJECT: &str = "proxy";

/// Subjects that are not load names: scenario validation accepts these besides its loads.
pub const SUBJECTS: &[&str] = &[
    "all",
    "backends",
    PROXY_SUBJECT,
    "nginx",
    "reloads",
    CLUSTER_SUBJECT,
];

/// The subject of what a Kubernetes cluster showed (pods, restarts, Warning events).
pub const CLUSTER_SUBJECT: &str = "cluster";

/// True for the proxy's subject or its alias `nginx` (the only kind there was once).
fn is_proxy(subject: &str) -> bool {
    subject == PROXY_SUBJECT || subject == "nginx"
}

/// Why a metric has no value: the run did not produce the data, or the proxy kind cannot give it.
#[derive(Debug)]
enum Gap {
    /// The data could have been there but was not (no reload happened, no load ran...).
    NoData(CheckError),
    /// The proxy kind cannot give this data; the text says what is missing.
    NotMeasurable(String),
    /// The platform the case ran on cannot give this data (cluster metrics off Kubernetes).
    OffPlatform(String),
    /// The data was gathered only in part, or is narrower than the metric's claim (one
    /// replica's status page of three, a reload timed only to its command's exit).
    Partial(String),
}

/// A check's evidence from collector `c`: nothing gathered is `absent(why)`; part gathered is
/// [`Gap::Partial`], naming what is missing.
fn evidence(
    case: &CaseResult,
    c: Collector,
    absent: impl FnOnce(String) -> Gap,
) -> Result<(), Gap> {
    match case.incomplete(c) {
        None => Ok(()),
        Some(Incomplete::Absent(a)) => Err(absent(a.why)),
        Some(Incomplete::Partial(p)) => Err(Gap::Partial(p.to_string())),
    }
}

impl From<CheckError> for Gap {
    fn from(e: CheckError) -> Self {
        Gap::NoData(e)
    }
}

impl From<&str> for Gap {
    fn from(s: &str) -> Self {
        Gap::NoData(s.into())
    }
}

impl From<String> for Gap {
    fn from(s: String) -> Self {
        Gap::NoData(CheckError(s))
    }
}

/// A parsed check.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// The expression as written.
    pub text: String,
    lhs: Operand,
    op: Op,
    rhs: Operand,
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Metric { subject: String, metric: String },
    Value(f64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Le,
    Lt,
    Ge,
    Gt,
    Eq,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Le => "<=",
            Op::Lt => "<",
            Op::Ge => ">=",
            Op::Gt => ">",
            Op::Eq => "==",
        })
    }
}

/// How a metric's value is read and printed: the load metrics' vocabulary, shared with gates
/// (`model::metric`).
type Kind = MetricKind;

impl Check {
    /// Parses `subject.metric OP value` and checks that the metric exists for its subject; the
    /// error names the bad part.
    pub fn parse(text: &str) -> Result<Check, CheckError> {
        let t = text.trim();
        let (pos, op, len) = ["<=", ">=", "==", "<", ">"]
            .iter()
            .find_map(|o| t.find(o).map(|p| (p, *o, o.len())))
            .ok_or_else(|| format!("check '{t}' has no comparison (<=, <, >=, >, ==)"))?;
        let op = match op {
            "<=" => Op::Le,
            ">=" => Op::Ge,
            "==" => Op::Eq,
            "<" => Op::Lt,
            _ => Op::Gt,
        };
        let (lhs, kind) = parse_metric(t[..pos].trim(), t)?;
        let rhs_text = t[pos + len..].trim();
        let rhs = if rhs_text.starts_with(|c: char| c.is_ascii_alphabetic()) {
            parse_metric(rhs_text, t)?.0
        } else {
            Operand::Value(parse_value(rhs_text, kind, t)?)
        };
        Ok(Check {
            text: t.to_string(),
            lhs,
            op,
            rhs,
        })
    }

    /// Each `subject.metric` the check reads, for validation against what its loads are.
    pub fn operands(&self) -> Vec<(&str, &str)> {
        [&self.lhs, &self.rhs]
            .iter()
            .filter_map(|o| match o {
                Operand::Metric { subject, metric } => Some((subject.as_str(), metric.as_str())),
                Operand::Value(_) => None,
            })
            .collect()
    }

    /// The subjects (load names, `backends`...) the check refers to, for validation.
    pub fn subjects(&self) -> Vec<&str> {
        [&self.lhs, &self.rhs]
            .iter()
            .filter_map(|o| match o {
                Operand::Metric { subject, .. } => Some(subject.as_str()),
                Operand::Value(_) => None,
            })
            .collect()
    }

    /// Evaluates the check against a finished (or partial) case of a run whose proxy was of
    /// kind `proxy_kind` (its name, as [`model::Env::proxy_kind`] records it). A metric whose subject
    /// never happened (no reload, no attempts) fails the check with "no data: ..."; one the kind
    /// cannot give (no status page, no logs, no reload timing) with "not measurable for KIND: ...".
    pub fn eval(&self, case: &CaseResult, proxy_kind: Option<&str>) -> CheckResult {
        let l = self.operand(&self.lhs, case);
        let r = self.operand(&self.rhs, case);
        let kind = match &self.lhs {
            Operand::Metric { subject, metric } => {
                metric_kind(subject, metric).unwrap_or(Kind::Count)
            }
            Operand::Value(_) => Kind::Count,
        };
        let (pass, actual, expected) = match (l, r) {
            (Ok(a), Ok(b)) => {
                let pass = match self.op {
                    Op::Le => a <= b,
                    Op::Lt => a < b,
                    Op::Ge => a >= b,
                    Op::Gt => a > b,
                    Op::Eq => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
                };
                (
                    pass,
                    show(a, kind),
                    format!("{} {}", self.op, show(b, kind)),
                )
            }
            (Err(Gap::OffPlatform(why) | Gap::Partial(why)), _)
            | (_, Err(Gap::OffPlatform(why) | Gap::Partial(why))) => {
                (false, format!("not measurable: {why}"), self.text.clone())
            }
            (Err(Gap::NotMeasurable(why)), _) | (_, Err(Gap::NotMeasurable(why))) => {
                let actual = match proxy_kind {
                    Some(k) => format!("not measurable for {k}: {why}"),
                    None => format!("no data: {why}"),
                };
                (false, actual, self.text.clone())
            }
            (Err(Gap::NoData(e)), _) | (_, Err(Gap::NoData(e))) => {
                (false, format!("no data: {e}"), self.text.clone())
            }
        };
        CheckResult {
            name: self.text.clone(),
            case: Some(case.name.clone()),
            expected,
            actual,
            pass,
        }
    }

    fn operand(&self, o: &Operand, case: &CaseResult) -> Result<f64, Gap> {
        match o {
            Operand::Value(v) => Ok(*v),
            Operand::Metric { subject, metric } => metric_value(subject, metric, case),
        }
    }
}

/// `SUBJECT.METRIC`, with the metric checked against what its subject offers.
fn parse_metric(s: &str, whole: &str) -> Result<(Operand, Kind), CheckError> {
    let (subject, metric) = s.split_once('.').ok_or_else(|| {
        format!("check '{whole}': '{s}' should be SUBJECT.METRIC, e.g. coffee.p99")
    })?;
    let (subject, metric) = (subject.trim(), metric.trim());
    let kind = metric_kind(subject, metric).map_err(|e| format!("check '{whole}': {e}"))?;
    Ok((
        Operand::Metric {
            subject: subject.to_string(),
            metric: metric.to_string(),
        },
        kind,
    ))
}

/// Which subject a metric belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubjectKind {
    /// A load by name, or `all` (every load summed).
    Load,
    /// `backends`: the backends' final counters.
    Backends,
    /// `proxy` (or its alias `nginx`): its logs and status page.
    Proxy,
    /// `reloads`: every reload of the case.
    Reloads,
    /// `cluster`: what a Kubernetes cluster showed.
    Cluster,
}

/// Every metric the parser accepts of the subjects other than loads, with how its value is
/// printed (a load's are [`model::metric::LOAD`], which compare's gates read too). `status_CODE`
/// stands for a family (`status_503`). Validation, the error messages and the no-data tests read
/// these two lists.
const METRICS: &[(SubjectKind, &str, Kind)] = &[
    (SubjectKind::Backends, "requests", Kind::Count),
    (SubjectKind::Backends, "count", Kind::Count),
    (SubjectKind::Backends, "spread", Kind::Fraction),
    (SubjectKind::Backends, "status_CODE", Kind::Count),
    (SubjectKind::Proxy, "errors", Kind::Count),
    (SubjectKind::Proxy, "warns", Kind::Count),
    (SubjectKind::Proxy, "access_lines", Kind::Count),
    (SubjectKind::Proxy, "requests", Kind::Count),
    (SubjectKind::Proxy, "status_CODE", Kind::Count),
    (SubjectKind::Proxy, "active_max", Kind::Count),
    (SubjectKind::Proxy, "served", Kind::Count),
    (SubjectKind::Proxy, "draining_generations_max", Kind::Count),
    (SubjectKind::Proxy, "draining_rss_max", Kind::Bytes),
    (SubjectKind::Reloads, "count", Kind::Count),
    (SubjectKind::Reloads, "errors", Kind::Count),
    (SubjectKind::Reloads, "avg_ms", Kind::Millis),
    (SubjectKind::Reloads, "max_ms", Kind::Millis),
    (SubjectKind::Reloads, "within_500ms", Kind::Fraction),
    (SubjectKind::Reloads, "within_1000ms", Kind::Fraction),
    (SubjectKind::Reloads, "command_ms", Kind::Millis),
    (SubjectKind::Cluster, "restarts", Kind::Count),
    (SubjectKind::Cluster, "warnings", Kind::Count),
    (SubjectKind::Cluster, "ready_pods_min", Kind::Count),
    (SubjectKind::Cluster, "ready_pods_max", Kind::Count),
    (SubjectKind::Cluster, "pods_deleted", Kind::Count),
    (SubjectKind::Cluster, "log_errors", Kind::Count),
    (SubjectKind::Cluster, "log_warnings", Kind::Count),
];

/// The kind of subject a name is (anything else is a load's name).
pub fn subject_kind(subject: &str) -> SubjectKind {
    match subject {
        "backends" => SubjectKind::Backends,
        s if is_proxy(s) => SubjectKind::Proxy,
        "reloads" => SubjectKind::Reloads,
        CLUSTER_SUBJECT => SubjectKind::Cluster,
        _ => SubjectKind::Load,
    }
}

/// Every metric the parser accepts for a kind of subject, families in their pattern form
/// (`status_CODE`), in the order the error messages list them.
pub fn metric_names(kind: SubjectKind) -> Vec<&'static str> {
    if kind == SubjectKind::Load {
        let mut out: Vec<&'static str> = metric::LOAD.iter().map(|(m, _)| *m).collect();
        for (m, _) in metric::STREAM {
            if !out.contains(m) {
                out.push(m);
            }
        }
        return out;
    }
    METRICS
        .iter()
        .filter(|(k, _, _)| *k == kind)
        .map(|(_, m, _)| *m)
        .collect()
}

/// How `subject.metric` is printed, or why that metric does not exist for that subject.
fn metric_kind(subject: &str, metric: &str) -> Result<Kind, CheckError> {
    let sk = subject_kind(subject);
    if sk == SubjectKind::Load {
        if let Some(kind) = metric::stream_metric_kind(metric) {
            if subject == "all" && metric::stream_single_load_only(metric) {
                return Err(CheckError(format!(
                    "'{metric}' is a metric of one load; name the load instead of 'all'"
                )));
            }
            return Ok(kind);
        }
        return metric::load_metric_kind(metric, Some(subject)).map_err(|e| {
            CheckError(format!(
                "{e}; long-lived loads: {}",
                metric::STREAM
                    .iter()
                    .map(|(m, _)| *m)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        });
    }
    // `backends` and `proxy` count statuses; no other family applies to them.
    let family = if metric.starts_with("status_") {
        status_code(metric)?;
        "status_CODE"
    } else {
        metric
    };
    let Some((_, _, kind)) = METRICS.iter().find(|(k, m, _)| *k == sk && *m == family) else {
        return Err(CheckError(format!(
            "unknown metric '{metric}' for '{subject}' ({})",
            metric_names(sk).join(", ")
        )));
    };
    Ok(*kind)
}

/// The status code of `status_CODE`.
fn status_code(m: &str) -> Result<u16, CheckError> {
    Ok(metric::status_code(m)?)
}

fn parse_value(s: &str, kind: Kind, whole: &str) -> Result<f64, CheckError> {
    metric::parse_value(s, kind)
        .map_err(|e| CheckError(format!("check '{whole}': value '{}' {e}", s.trim())))
}

fn show(v: f64, kind: Kind) -> String {
    metric::show(v, kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::stream::StreamSummary;
    use model::{
        BackendCounters, ErrorKind, Latency, LoadMode, Percentile, RateStats, ReloadRecord,
    };
    use std::collections::BTreeMap;

    fn load(name: &str, ok: u64, e503: u64, resets: u64) -> LoadSummary {
        LoadSummary {
            schema: 1,
            name: name.into(),
            url: "http://x/".into(),
            method: "GET".into(),
            mode: LoadMode::Closed,
            threads: 1,
            connections: 2,
            start_s: 0.0,
            planned_s: Some(10.0),
            elapsed_s: 10.0,
            timeout_ms: 2000,
            requests: ok + e503,
            bytes_read: 0,
            bytes_written: 0,
            status: BTreeMap::from([(200, ok), (503, e503)]),
            errors: BTreeMap::from([(ErrorKind::ReadReset, resets)]),
            error_messages: BTreeMap::new(),
            connects: 2,
            retried: 0,
            latency: Latency {
                percentiles: vec![Percentile {
                    p: 99.0,
                    us: 12_000,
                }],
                ..Default::default()
            },
            latency_uncorrected: None,
            req_per_sec: RateStats::default(),
            schedule: None,
            timeline: vec![],
            http2: None,
        }
    }

    fn case() -> CaseResult {
        CaseResult {
            name: "main".into(),
            loads: vec![load("coffee", 990, 5, 5), load("tea", 1000, 0, 0)],
            backends: vec![
                BackendCounters {
                    name: "b0".into(),
                    requests: 1000,
                    ..Default::default()
                },
                BackendCounters {
                    name: "b1".into(),
                    requests: 995,
                    ..Default::default()
                },
            ],
            reloads: vec![
                ReloadRecord {
                    replica: "nginx-0".into(),
                    generation: 2,
                    t_s: 1.0,
                    served_ms: Some(100.0),
                    command_ms: None,
                    old_workers_exited_ms: None,
                    validate_ms: 5.0,
                    error: None,
                },
                ReloadRecord {
                    replica: "nginx-0".into(),
                    generation: 3,
                    t_s: 2.0,
                    served_ms: Some(700.0),
                    command_ms: None,
                    old_workers_exited_ms: None,
                    validate_ms: 5.0,
                    error: None,
                },
            ],
            ..Default::default()
        }
    }

    fn eval(expr: &str) -> CheckResult {
        Check::parse(expr).unwrap().eval(&case(), Some("nginx"))
    }

    #[test]
    fn cluster_metrics_come_from_the_cluster_record_and_are_not_measurable_off_kubernetes() {
        let r = eval("cluster.restarts == 0");
        assert!(!r.pass);
        assert_eq!(
            r.actual,
            "not measurable: the case ran on no Kubernetes cluster (cluster.* needs --platform kubernetes)"
        );
        let pod = |t: f64, pod: &str, phase: &str, ready: bool| model::PodChange {
            t_s: t,
            pod: pod.into(),
            role: "proxy".into(),
            phase: phase.into(),
            ready,
            terminating: false,
        };
        let mut c = case();
        c.cluster = Some(model::ClusterRecord {
            pods: vec![
                pod(0.5, "a", "Pending", false),
                pod(1.0, "a", "Running", true),
                pod(2.0, "b", "Running", true),
                pod(3.0, "c", "Running", true),
                pod(4.0, "a", "Deleted", false),
                pod(4.5, "b", "Running", false),
            ],
            restarts: vec![model::RestartRecord {
                t_s: 2.0,
                pod: "b".into(),
                container: "nginx".into(),
                count: 1,
                reason: "Error".into(),
                added: Some(1),
            }],
            warnings: vec![model::ClusterEvent {
                t_s: 2.0,
                object: "Pod/b".into(),
                reason: "Unhealthy".into(),
                message: "probe".into(),
                count: 3,
                added: Some(3),
            }],
            ..Default::default()
        });
        let on = |e: &str| Check::parse(e).unwrap().eval(&c, Some("nginx"));
        assert!(on("cluster.restarts == 1").pass);
        assert!(on("cluster.warnings == 3").pass);
        assert!(on("cluster.ready_pods_max == 3").pass);
        // Pending before the first Ready does not count; c alone was Ready at the end.
        assert!(
            on("cluster.ready_pods_min == 1").pass,
            "{:?}",
            on("cluster.ready_pods_min == 1")
        );
        assert!(on("cluster.pods_deleted == 1").pass);
        // No log counted by level: not measurable, never a zero.
        let r = on("cluster.log_errors == 0");
        assert!(!r.pass);
        assert!(r.actual.contains("platform.watch.log_levels"), "{r:?}");
        c.cluster.as_mut().unwrap().log_levels = vec![model::LogLevels {
            pod: "gw/ctl".into(),
            container: "ctl".into(),
            lines: 9,
            leveled: 8,
            levels: [("error".to_string(), 3), ("warn".to_string(), 2)].into(),
            errors: 3,
            ..Default::default()
        }];
        // One line of nine carries no level: its level could be an error's. Not measurable,
        // naming the log; never "3" read off the eight.
        let on = |e: &str| Check::parse(e).unwrap().eval(&c, Some("nginx"));
        let r = on("cluster.log_errors == 3");
        assert!(!r.pass, "{r:?}");
        assert_eq!(
            r.actual,
            "not measurable: the watched pods' log levels covered 0 of 1 logs (gw/ctl/ctl: 1 of \
             9 line(s) carry no level it can read)"
        );
        c.cluster.as_mut().unwrap().log_levels[0].lines = 8;
        let on = |e: &str| Check::parse(e).unwrap().eval(&c, Some("nginx"));
        assert!(on("cluster.log_errors == 3").pass);
        assert!(!on("cluster.log_errors == 0").pass);
        assert!(on("cluster.log_warnings == 2").pass);
        // A log read in part (its follower failed): not measurable either.
        c.cluster.as_mut().unwrap().log_levels[0].incomplete =
            Some("the log stream ended: connection reset".into());
        let on = |e: &str| Check::parse(e).unwrap().eval(&c, Some("nginx"));
        let r = on("cluster.log_errors == 3");
        assert!(
            !r.pass && r.actual.contains("read in part: the log stream ended"),
            "{r:?}"
        );
        assert!(Check::parse("cluster.pods == 1")
            .unwrap_err()
            .to_string()
            .contains("unknown metric 'pods' for 'cluster'"));
    }

    /// Counts as the API means them: an event seen at counts 1 to 5 is 5 Warning events, not
    /// 15, and one that had counted 10 before the case adds only what came in it; a
    /// restartCount seen going 0 -> 3 is 3 restarts, not 1. A record that kept only the counts
    /// (from before the increases were kept) is not measurable, never read as rows.
    #[test]
    fn warnings_and_restarts_are_counted_as_the_api_counts_them() {
        let event = |count: u32, added: Option<u32>| model::ClusterEvent {
            t_s: f64::from(count),
            object: "Pod/b".into(),
            reason: "Unhealthy".into(),
            message: "Readiness probe failed".into(),
            count,
            added,
        };
        let restart = |count: u32, added: Option<u32>| model::RestartRecord {
            t_s: 3.0,
            pod: "b".into(),
            container: "nginx".into(),
            count,
            reason: "Error".into(),
            added,
        };
        let mut c = case();
        c.cluster = Some(model::ClusterRecord {
            // Seen at 1, 2, 3, 4, 5 (each adds 1), and an older event at 11 then 12 (it had
            // counted 10 before the case).
            warnings: (1..=5)
                .map(|n| event(n, Some(1)))
                .chain([event(11, Some(1)), event(12, Some(1))])
                .collect(),
            // 0 -> 3 at once.
            restarts: vec![restart(3, Some(3))],
            ..Default::default()
        });
        let on = |c: &CaseResult, e: &str| Check::parse(e).unwrap().eval(c, Some("nginx"));
        let r = on(&c, "cluster.warnings == 7");
        assert!(r.pass, "{r:?}");
        assert!(!on(&c, "cluster.warnings <= 6").pass);
        let r = on(&c, "cluster.restarts == 3");
        assert!(r.pass, "{r:?}");
        assert!(!on(&c, "cluster.restarts <= 1").pass);
        // Only the event seen at 1 to 5: 5, never 15.
        c.cluster.as_mut().unwrap().warnings.truncate(5);
        assert!(on(&c, "cluster.warnings == 5").pass);
        // A record from before the increases were kept: not measurable.
        let k = c.cluster.as_mut().unwrap();
        k.warnings = vec![event(5, None)];
        k.restarts = vec![restart(3, None)];
        for e in ["cluster.warnings <= 100", "cluster.restarts <= 100"] {
            let r = on(&c, e);
            assert!(!r.pass, "{e}: {r:?}");
            assert!(r.actual.contains("run the case again"), "{e}: {r:?}");
        }
    }

    /// A status page that one replica of two never answered, and a backend pod whose final
    /// counters were not read: every check on them is not measurable, naming the item, even
    /// one that the other items' numbers would pass.
    #[test]
    fn partial_collectors_never_pass() {
        let mut c = case();
        c.stub_samples = vec![stub("nginx-0", 1.0, 5, 400)];
        c.add_missing(
            Collector::StatusPages,
            "replicas",
            2,
            "nginx-1",
            "its status page never answered (3 reads; connection refused)",
        );
        for e in ["proxy.served >= 0", "proxy.active_max <= 100"] {
            let r = Check::parse(e).unwrap().eval(&c, Some("nginx"));
            assert!(!r.pass, "{e}: {r:?}");
            assert_eq!(
                r.actual,
                "not measurable: status pages covered 1 of 2 replicas (nginx-1: its status page \
                 never answered (3 reads; connection refused))",
                "{e}"
            );
        }
        let mut c = case();
        c.cluster = Some(model::ClusterRecord {
            counters_missing: vec!["b2 (pod backend-b2-x): connection refused".into()],
            ..Default::default()
        });
        let r = Check::parse("backends.requests >= 0")
            .unwrap()
            .eval(&c, Some("nginx"));
        assert!(!r.pass, "{r:?}");
        assert_eq!(
            r.actual,
            "not measurable: backend counters covered 2 of 3 backend pods (b2 (pod \
             backend-b2-x): connection refused)"
        );
    }

    #[test]
    fn load_metrics() {
        let r = eval("coffee.failure_rate <= 1%");
        assert!(r.pass, "{r:?}");
        assert_eq!(r.actual, "1.000%");
        assert!(!eval("coffee.failure_rate < 1%").pass);
        assert!(eval("coffee.failures == 10").pass);
        assert!(eval("coffee.status_503 == 5").pass);
        assert!(eval("coffee.error_read_reset == 5").pass);
        assert!(eval("coffee.p99 <= 12ms").pass);
        assert!(!eval("coffee.p99 < 12ms").pass);
        assert!(eval("tea.failure_rate == 0").pass);
        assert!(eval("all.requests == 1995").pass);
        assert!(eval("coffee.rps >= 99.5r/s").pass);
        assert!(eval("tea.success_ratio >= 99.99%").pass);
    }

    #[test]
    fn other_subjects_and_metric_comparisons() {
        assert!(eval("backends.requests == all.requests").pass);
        assert!(eval("backends.spread <= 0.3%").pass);
        assert!(!eval("backends.spread <= 0.2%").pass);
        assert!(eval("reloads.avg_ms == 400").pass);
        assert!(eval("reloads.within_500ms == 50%").pass);
        assert!(eval("proxy.errors == 0").pass);
    }

    #[test]
    fn bad_checks_are_named() {
        assert!(Check::parse("coffee.p99 250ms")
            .unwrap_err()
            .to_string()
            .contains("no comparison"));
        assert!(Check::parse("coffee.bogus < 1")
            .unwrap_err()
            .to_string()
            .contains("unknown metric 'bogus'"));
        assert!(Check::parse("p99 < 1ms")
            .unwrap_err()
            .to_string()
            .contains("SUBJECT.METRIC"));
        assert!(Check::parse("coffee.p99 < 10").is_ok());
        assert!(Check::parse("coffee.p99 < 1x")
            .unwrap_err()
            .to_string()
            .contains("not a duration"));
        let r = eval("nosuch.requests > 1");
        assert!(!r.pass && r.actual.contains("no data: load 'nosuch' did not run"));
    }

    #[test]
    fn metrics_are_checked_against_their_subject_when_parsed() {
        let err = |e: &str| Check::parse(e).unwrap_err().to_string();
        assert!(err("nginx.p99 < 1ms").contains("unknown metric 'p99' for 'nginx'"));
        assert!(err("reloads.warns == 0").contains("unknown metric 'warns' for 'reloads'"));
        assert!(err("backends.late_sends == 0").contains("for 'backends'"));
        assert!(err("coffee.warns == 0").contains("unknown metric 'warns' for 'coffee'"));
        assert!(err("coffee.status_abc == 0").contains("status must be a code"));
        assert!(err("coffee.status_99 == 0").contains("status must be a code"));
        assert!(err("coffee.error_bogus == 0").contains("unknown error kind 'bogus'"));
        assert!(err("coffee.p101 < 1ms").contains("percentile"));
        assert!(err("all.p99 < 1ms").contains("name the load instead of 'all'"));
        assert!(err("coffee.failures == nginx.p99").contains("unknown metric 'p99' for 'nginx'"));
        assert!(err("proxy.p99 < 1ms").contains("unknown metric 'p99' for 'proxy'"));
        assert!(Check::parse("proxy.status_503 == backends.status_503").is_ok());
        assert!(Check::parse("all.failure_rate < 1%").is_ok());
        assert!(Check::parse("nginx.status_503 == backends.status_503").is_ok());
    }

    #[test]
    fn checks_without_their_subject_fail_with_no_data() {
        let mut c = case();
        c.reloads.clear();
        for e in [
            "reloads.errors == 0",
            "reloads.max_ms <= 1000",
            "reloads.avg_ms < 500",
            "reloads.within_1000ms == 100%",
        ] {
            let r = Check::parse(e).unwrap().eval(&c, Some("nginx"));
            assert!(!r.pass, "{e} passed without a reload: {r:?}");
            assert_eq!(r.actual, "no data: no reload happened", "{e}");
        }
        assert!(
            Check::parse("reloads.count == 0")
                .unwrap()
                .eval(&c, Some("nginx"))
                .pass
        );

        // Reloads that never served: no time to report, rather than 0 ms.
        let mut c = case();
        for r in &mut c.reloads {
            r.served_ms = None;
            r.error = Some("nginx -t failed".into());
        }
        let r = Check::parse("reloads.max_ms <= 1000")
            .unwrap()
            .eval(&c, Some("nginx"));
        assert!(
            !r.pass
                && r.actual == "no data: 2 of 2 reloads failed and never served (reloads.errors)",
            "{r:?}"
        );
        // One failed of two: the slowest reload is not the slowest of those that served.
        let mut c = case();
        c.reloads[1].served_ms = None;
        c.reloads[1].error = Some("nginx -t failed".into());
        let r = Check::parse("reloads.max_ms <= 1000")
            .unwrap()
            .eval(&c, Some("nginx"));
        assert!(
            !r.pass
                && r.actual == "no data: 1 of 2 reloads failed and never served (reloads.errors)",
            "{r:?}"
        );
        // ...but the share within a bound counts it as not within.
        let r = Check::parse("reloads.within_1000ms == 50%")
            .unwrap()
            .eval(&c, Some("nginx"));
        assert!(r.pass, "{r:?}");

        // Unreadable logs are not zero errors.
        let mut c = case();
        c.logs.missing = Some("no proxy replica ran in this case".into());
        let r = Check::parse("proxy.errors == 0")
            .unwrap()
            .eval(&c, Some("nginx"));
        assert!(
            !r.pass
                && r.actual.starts_with(
                    "not measurable for nginx: the proxy's logs could not be read \
                     (no proxy replica ran in this case)"
                ),
            "{r:?}"
        );

        // No backends, no attempts, no responses.
        let mut c = case();
        c.backends.clear();
        assert!(
            !Check::parse("backends.requests == 0")
                .unwrap()
                .eval(&c, Some("nginx"))
                .pass
        );
        c.loads[1].requests = 0;
        c.loads[1].status.clear();
        for e in [
            "tea.failure_rate == 0",
            "tea.p99 < 1s",
            "tea.max < 1s",
            "tea.late_sends == 0",
        ] {
            let r = Check::parse(e).unwrap().eval(&c, Some("nginx"));
            assert!(!r.pass && r.actual.starts_with("no data: "), "{e}: {r:?}");
        }
    }

    /// A case in which no check has a subject: a load that made no attempt, no backend
    /// counters, unreadable logs, no status page, no reload, and a cluster whose collectors all
    /// failed (their lists hold data that must not be read).
    fn case_without_subjects() -> CaseResult {
        let mut c = case();
        for l in &mut c.loads {
            l.requests = 0;
            l.status.clear();
            l.errors.clear();
            l.connects = 0;
            l.latency = Latency::default();
        }
        c.backends.clear();
        c.logs.missing = Some("no proxy replica ran in this case".into());
        c.logs.access_lines = 7;
        c.stub_samples.clear();
        c.reloads.clear();
        c.cluster = Some(model::ClusterRecord {
            pods: vec![model::PodChange {
                t_s: 1.0,
                pod: "proxy-1".into(),
                role: "proxy".into(),
                phase: "Running".into(),
                ready: true,
                terminating: false,
            }],
            absent: vec![
                "pod watch: forbidden".into(),
                "events: forbidden".into(),
                "metrics API: not served by this cluster".into(),
                "Prometheus scrape: no such pod".into(),
            ],
            ..Default::default()
        });
        c
    }

    /// Every metric the parser accepts, on a case where its subject never happened or its
    /// collector gathered nothing, fails with "no data" or "not measurable", even compared with
    /// itself (`x >= x`), which any value it could read passes. The metrics come from the parser's own list, so a metric
    /// cannot be added without meeting this test.
    #[test]
    fn every_metric_fails_without_its_subject() {
        let empty = case_without_subjects();
        let off_cluster = CaseResult {
            cluster: None,
            ..empty.clone()
        };
        // Facts about the subject itself, true without it: the load made no attempt, the case
        // had no reload.
        let exempt = ["coffee.attempts", "all.attempts", "reloads.count"];
        let mut seen = 0;
        for (kind, subjects) in [
            (SubjectKind::Load, &["coffee", "all"][..]),
            (SubjectKind::Backends, &["backends"][..]),
            (SubjectKind::Proxy, &["proxy", "nginx"][..]),
            (SubjectKind::Reloads, &["reloads"][..]),
            (SubjectKind::Cluster, &["cluster"][..]),
        ] {
            for family in metric_names(kind) {
                let metric = family
                    .replace("CODE", "200")
                    .replace("KIND", ErrorKind::ReadReset.name())
                    .replace("NN", "99");
                for subject in subjects {
                    // Compared with itself: any value it could read would pass.
                    let text = format!("{subject}.{metric} >= {subject}.{metric}");
                    let Ok(check) = Check::parse(&text) else {
                        // `all` refuses the metrics of one load, at parse.
                        assert!(
                            *subject == "all"
                                && (metric::single_load_only(&metric)
                                    || metric::stream_single_load_only(&metric)),
                            "{text}"
                        );
                        continue;
                    };
                    seen += 1;
                    for c in [&empty, &off_cluster] {
                        let r = check.eval(c, Some("nginx"));
                        if exempt.contains(&format!("{subject}.{metric}").as_str()) {
                            assert!(r.pass, "{text}: {r:?}");
                            continue;
                        }
                        assert!(
                            !r.pass
                                && (r.actual.starts_with("no data: ")
                                    || r.actual.starts_with("not measurable")),
                            "{text} passed or read a number without its subject: {r:?}"
                        );
                    }
                }
            }
        }
        // Each metric once (a load's: the HTTP ones, then the long-lived ones not also HTTP
        // ones), plus `all` for the 12 summable HTTP metrics and the 12 summable long-lived
        // ones, and the 9 of `nginx`.
        let stream_only = metric::STREAM
            .iter()
            .filter(|(m, _)| !metric::LOAD.iter().any(|(l, _)| l == m))
            .count();
        assert_eq!(stream_only, 14);
        assert_eq!(
            seen,
            METRICS.len() + metric::LOAD.len() + stream_only + 12 + 12 + 9,
            "every metric was tried"
        );
    }

    /// `nginx.*`, written before the proxy could be any kind, reads the same data as `proxy.*`
    /// and gives the same verdict, for every kind.
    #[test]
    fn nginx_is_an_alias_of_proxy() {
        let mut c = case();
        c.logs.error_levels = BTreeMap::from([("warn".into(), 2), ("error".into(), 1)]);
        c.logs.access_lines = 1995;
        c.logs.access_status = BTreeMap::from([(200, 1990), (503, 5)]);
        c.stub_samples = vec![stub("r-0", 1.0, 3, 700), stub("r-0", 2.0, 1, 1000)];
        for kind in [Some("nginx"), Some("haproxy"), None] {
            for (metric, value) in [
                ("errors", "1"),
                ("warns", "2"),
                ("requests", "1995"),
                ("access_lines", "1995"),
                ("status_503", "5"),
                ("active_max", "3"),
                ("served", "1000"),
            ] {
                let p = Check::parse(&format!("proxy.{metric} == {value}"))
                    .unwrap()
                    .eval(&c, kind);
                let n = Check::parse(&format!("nginx.{metric} == {value}"))
                    .unwrap()
                    .eval(&c, kind);
                assert!(p.pass, "{kind:?} {p:?}");
                assert_eq!(
                    (n.pass, &n.actual, &n.expected),
                    (p.pass, &p.actual, &p.expected)
                );
                assert_eq!(n.name, format!("nginx.{metric} == {value}"));
            }
        }
        assert!(
            Check::parse("nginx.requests == all.requests")
                .unwrap()
                .eval(&c, Some("caddy"))
                .pass
        );
    }

    fn stub(replica: &str, t_s: f64, active: u64, requests: u64) -> model::StubSample {
        model::StubSample {
            t_s,
            replica: replica.into(),
            active,
            accepts: requests,
            handled: requests,
            requests,
            reading: 0,
            writing: active,
            waiting: 0,
        }
    }

    /// Data the kind cannot give fails the check, naming the kind, whatever the comparison:
    /// a check that would pass on zeros (`<= 0`, `== 0`) does not.
    #[test]
    fn checks_on_data_the_kind_cannot_give_are_not_measurable() {
        // No status page: no stub samples.
        let c = case();
        assert!(c.stub_samples.is_empty());
        for e in [
            "proxy.active_max <= 0",
            "proxy.served == 0",
            "nginx.active_max < 100",
        ] {
            let r = Check::parse(e).unwrap().eval(&c, Some("caddy"));
            assert!(!r.pass, "{e}: {r:?}");
            assert!(
                r.actual
                    .starts_with("not measurable for caddy: no status-page sample"),
                "{e}: {r:?}"
            );
        }
        // Also on the right-hand side.
        let r = Check::parse("all.requests == proxy.served")
            .unwrap()
            .eval(&c, Some("caddy"));
        assert!(
            !r.pass && r.actual.starts_with("not measurable for caddy"),
            "{r:?}"
        );

        // No logs.
        let mut c = case();
        c.logs.missing = Some("the proxy wrote no access log in this case".into());
        for e in [
            "proxy.errors == 0",
            "proxy.warns <= 0",
            "nginx.status_502 == 0",
        ] {
            let r = Check::parse(e).unwrap().eval(&c, Some("external"));
            assert!(!r.pass, "{e}: {r:?}");
            assert_eq!(
                r.actual,
                "not measurable for external: the proxy's logs could not be read (the proxy \
                 wrote no access log in this case)",
                "{e}"
            );
        }

        // An external target's reloads, as its driver records them: the command's time, and
        // no time at which the new generation served (the command's exit is not that).
        let mut c = case();
        for r in &mut c.reloads {
            r.served_ms = None;
            r.command_ms = Some(4.7);
        }
        for e in [
            "reloads.avg_ms < 500",
            "reloads.max_ms <= 1000",
            "reloads.within_1000ms >= 0%",
        ] {
            let r = Check::parse(e).unwrap().eval(&c, Some("external"));
            assert!(!r.pass, "{e}: {r:?}");
            assert_eq!(
                r.actual,
                "not measurable for external: its reloads report no time at which the new \
                 generation served, only their command's exit (reloads.command_ms)",
                "{e}"
            );
        }
        // The command's time is a metric of its own.
        let r = Check::parse("reloads.command_ms < 1000")
            .unwrap()
            .eval(&c, Some("external"));
        assert!(r.pass && r.actual == "4.7ms", "{r:?}");
        let r = Check::parse("reloads.command_ms < 1000")
            .unwrap()
            .eval(&case(), Some("nginx"));
        assert!(
            !r.pass && r.actual.contains("not run by a command"),
            "{r:?}"
        );
        // One reload of two untimed: partial evidence, never a pass on the other's time.
        let mut c = case();
        c.reloads[1].served_ms = None;
        let r = Check::parse("reloads.max_ms <= 1000")
            .unwrap()
            .eval(&c, Some("nginx"));
        assert!(!r.pass, "{r:?}");
        assert_eq!(
            r.actual,
            "not measurable: 1 of 2 successful reloads report no time at which the new \
             generation served (nginx-0 generation 3)"
        );
        // What the kind does give still evaluates.
        assert!(
            Check::parse("reloads.count == 2")
                .unwrap()
                .eval(&c, Some("external"))
                .pass
        );
        assert!(
            Check::parse("reloads.errors == 0")
                .unwrap()
                .eval(&c, Some("external"))
                .pass
        );

        // A record that did not keep its kind says "no data", and still fails.
        let r = Check::parse("proxy.served == 0")
            .unwrap()
            .eval(&case(), None);
        assert!(
            !r.pass && r.actual.starts_with("no data: no status-page sample"),
            "{r:?}"
        );
    }

    /// A long-lived load's summary with `attempts`, `opened` and `dropped`, the rest zero.
    fn stream(name: &str, protocol: &str, opened: u64, dropped: u64) -> StreamSummary {
        let lat = serde_json::json!({"count":0,"mean_us":0,"stdev_us":0,"min_us":0,"max_us":0,
            "within_stdev_pct":0,"percentiles":[],"hdr":""});
        serde_json::from_value(serde_json::json!({
            "schema": model::SCHEMA_VERSION, "name": name, "url": "ws://x/", "protocol": protocol,
            "threads": 1, "connections": opened, "start_s": 0.0, "elapsed_s": 16.0,
            "ramp_s": 0.0, "rate": 1.0, "size": 64, "timeout_ms": 2000, "reconnect": "backoff",
            "attempts": opened, "opened": opened, "reconnects": 0, "dropped": dropped,
            "open_max": opened, "open_at_end": opened - dropped, "ended": {},
            "messages": {"sent":0,"answered":0,"pushed":0,"lost":0,"unanswered_at_end":0,
            "pings_sent":0,"pongs":0,"server_pings":0,"bytes_sent":0,"bytes_received":0},
            "rtt": lat, "gap": lat, "handshake": lat,
            "cost": {"rss_before_kib":0,"rss_open_kib":0,"open_at_sample":0,"cpu_s":0.0},
            "timeline": []
        }))
        .unwrap()
    }

    /// `case()` with a WebSocket load of 10 connections, 3 of them cut without a close frame
    /// by the reload at 1 s, 10.1 s after it (p50 and max), and an old nginx worker draining
    /// 8 MiB from 1 s to 11 s: every collector the long-lived checks read is complete.
    fn streams_case() -> CaseResult {
        use model::generation::{GenerationSample, ProcGen};
        use model::ledger::{LoadLedger, Spread, StreamLedger};
        let mut c = case();
        c.reloads.truncate(1);
        c.reloads[0].old_workers_exited_ms = Some(10_100.0);
        let mut ws = stream("ws", "ws", 10, 3);
        ws.ended = BTreeMap::from([(EndKind::Fin, 3), (EndKind::Client, 7)]);
        c.streams = vec![ws];
        c.monotonic_origin_ns = Some(1_000_000_000);
        let proc_ = |pid: u32, started_s: f64| ProcGen {
            pid,
            started_s,
            rss_bytes: 8 << 20,
            shutting_down: false,
        };
        let sample = |t_s: f64, procs: Vec<ProcGen>| GenerationSample {
            t_s,
            replica: "nginx-0".into(),
            procs,
        };
        c.generations = vec![
            sample(0.5, vec![proc_(10, -0.1)]),
            sample(2.0, vec![proc_(10, -0.1), proc_(11, 1.01)]),
            sample(12.0, vec![proc_(11, 1.01)]),
        ];
        c.stream_ledger = Some(StreamLedger {
            loads: vec![LoadLedger {
                name: "ws".into(),
                lives: 10,
                opened: 10,
                dropped: 3,
                by_reload: 3,
                without_close: 3,
                survived: 7,
                reload_to_drop: Spread {
                    n: 3,
                    min_s: Some(10.1),
                    p50_s: Some(10.1),
                    max_s: Some(10.1),
                },
                ..Default::default()
            }],
            ..Default::default()
        });
        c
    }

    fn on(c: &CaseResult, expr: &str) -> CheckResult {
        Check::parse(expr).unwrap().eval(c, Some("nginx"))
    }

    /// The long-lived checks pass and fail on the load's exact counts and the ledger's split.
    #[test]
    fn long_lived_checks_pass_and_fail_on_the_counts_and_the_ledger() {
        let c = streams_case();
        for pass in [
            "ws.opened == 10",
            "ws.dropped == 3",
            "ws.dropped_by_reload == 3",
            "ws.dropped_without_close == 3",
            "ws.dropped_with_close == 0",
            "ws.dropped_unattributed == 0",
            "ws.reload_to_drop_max <= 11s",
            "all.dropped == 3",
            "proxy.draining_generations_max == 1",
            "proxy.draining_rss_max <= 8MiB",
        ] {
            let r = on(&c, pass);
            assert!(r.pass, "{pass}: {r:?}");
        }
        for fail in [
            "ws.dropped == 0",
            "ws.dropped_by_reload <= 2",
            "ws.reload_to_drop_max <= 10s",
            "proxy.draining_rss_max <= 7MiB",
        ] {
            let r = on(&c, fail);
            assert!(!r.pass, "{fail}: {r:?}");
            assert!(!r.actual.contains("not measurable"), "{fail}: {r:?}");
        }
        assert_eq!(on(&c, "ws.reload_to_drop_max <= 11s").actual, "10.10s");
        // streams_failed is a gRPC load's: asked of a WebSocket load it says so.
        let r = on(&c, "ws.streams_failed == 0");
        assert!(!r.pass && r.actual.contains("counts gRPC calls"), "{r:?}");
        // A gRPC stream that ended with grpc-status 14 and one cut without a status failed;
        // those that ended with OK or by the client did not.
        let mut c = streams_case();
        let mut g = stream("grpc", "grpc-stream", 5, 2);
        g.ended = BTreeMap::from([
            (EndKind::Fin, 2),
            (EndKind::Client, 2),
            (EndKind::GrpcStatus, 1),
        ]);
        g.grpc_status = BTreeMap::from([(14, 1)]);
        c.streams.push(g);
        let r = on(&c, "grpc.streams_failed == 3");
        assert_eq!(r.actual, "3", "{r:?}");
        assert!(on(&c, "grpc.streams_failed <= 3").pass);
    }

    /// Without complete evidence a long-lived check never passes: the split of the drops needs
    /// the connections' lives, the proxy's generations, the backends' counters and one clock.
    #[test]
    fn long_lived_checks_are_not_measurable_without_complete_evidence() {
        // No generation sampled: the drops cannot be placed on a reload; the counts still read.
        let mut c = streams_case();
        c.generations.clear();
        c.absent.insert(
            Collector::Generations,
            "the proxy runs in pods, whose processes are not sampled from this machine".into(),
        );
        let r = on(&c, "ws.dropped_by_reload <= 100");
        assert!(
            !r.pass && r.actual.starts_with("not measurable for nginx: the proxy's processes by generation were not sampled"),
            "{r:?}"
        );
        let r = on(&c, "proxy.draining_rss_max <= 200MB");
        assert!(!r.pass && r.actual.starts_with("not measurable"), "{r:?}");
        assert!(
            on(&c, "ws.dropped == 3").pass,
            "the load's own count is exact"
        );
        // The backends on another clock: not measurable.
        let mut c = streams_case();
        c.monotonic_origin_ns = None;
        let r = on(&c, "ws.dropped_unattributed == 0");
        assert!(
            !r.pass && r.actual.contains("another machine's clock"),
            "{r:?}"
        );
        // A ledger that could not read every life: partial, never a number.
        let mut c = streams_case();
        c.stream_ledger.as_mut().unwrap().loads[0].incomplete =
            Some("ws: 12 connection lives past the first 1000000 were left out".into());
        let r = on(&c, "ws.dropped_without_close <= 100");
        assert!(
            !r.pass && r.actual.starts_with("not measurable: ws: 12"),
            "{r:?}"
        );
        // A proxy that reloads inside one process (Caddy): no process per generation, so what
        // it pays is not measurable, never zero.
        let mut c = streams_case();
        for s in &mut c.generations {
            s.procs.clear();
        }
        let r = on(&c, "proxy.draining_generations_max <= 100");
        assert!(!r.pass && r.actual.contains("inside one process"), "{r:?}");
        // A load that did not run.
        let r = on(&streams_case(), "sse.dropped == 0");
        assert!(!r.pass && r.actual.contains("'sse' did not run"), "{r:?}");
    }
}
