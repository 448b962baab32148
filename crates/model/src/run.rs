//! What a scenario run recorded around its loads: the actions fired, reloads, proxy logs, process
//! samples, backend counters and checks. `data.json` is one [`RunResults`].

mod cluster;
mod samples;

use crate::load::{LoadSummary, RequestRecord};
pub use cluster::{
    ClusterEvent, ClusterRecord, LogLevels, PodChange, PodMetric, RestartRecord, ScrapeSample,
};
pub use samples::{
    ProbeRecord, ProcSample, ReadinessSample, ReadyRecord, ReplicaProbe, StubSample,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The whole of `data.json`: everything `proxybench report DIR` needs to rebuild report.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResults {
    /// Schema version ([`crate::SCHEMA_VERSION`]).
    pub schema: u32,
    /// Scenario name.
    pub scenario: String,
    /// One-line description of the scenario.
    pub description: String,
    /// Wall-clock start, UTC, RFC 3339 (`2026-11-22T10:04:05Z`).
    pub started_at: String,
    /// True when the scenario ran in its `--quick` (scaled-down) form.
    pub quick: bool,
    /// True when the run was interrupted (Ctrl-C or a failure) and these results are partial.
    pub partial: bool,
    /// Why the run stopped early, when it did.
    pub abort_reason: Option<String>,
    /// Versions and machine.
    pub env: Env,
    /// The cases of the scenario, in the order they ran (most scenarios have one).
    pub cases: Vec<CaseResult>,
    /// Scenario-level findings, one sentence each, for the report's summary.
    pub findings: Vec<String>,
    /// SLO and theory checks with their outcome.
    pub checks: Vec<CheckResult>,
}

impl RunResults {
    /// True when every check passed.
    pub fn checks_passed(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }

    /// Actions that failed (or never ran), with their case's name: any one fails the run.
    pub fn failed_actions(&self) -> Vec<(&str, &Event)> {
        self.cases
            .iter()
            .flat_map(|c| {
                c.events
                    .iter()
                    .filter(|e| e.error.is_some() && !e.limit)
                    .map(move |e| (c.name.as_str(), e))
            })
            .collect()
    }

    /// Loads in which every request failed, and long-lived loads of which no connection
    /// opened, as `case/load`: the target was unusable.
    pub fn unusable_loads(&self) -> Vec<String> {
        self.cases
            .iter()
            .flat_map(|c| {
                c.loads
                    .iter()
                    .filter(|l| l.all_failed())
                    .map(move |l| format!("{}/{}", c.name, l.name))
                    .chain(
                        c.streams
                            .iter()
                            .filter(|s| s.attempts > 0 && s.unusable())
                            .map(move |s| format!("{}/{}", c.name, s.name)),
                    )
            })
            .collect()
    }
}

/// Versions and the machine a run happened on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Env {
    /// proxybench's version.
    pub proxybench: String,
    /// The proxy's own version text (`nginx -V`, `haproxy -vv`...), verbatim, as its driver
    /// reports it; read as `nginx` in records from before the proxy was any kind.
    #[serde(alias = "nginx")]
    pub proxy: String,
    /// The kind of proxy under test as scenarios spell it (`nginx`, `haproxy`...), so analyses
    /// and checks know what the run could measure; `None` when no proxy ran or in old records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_kind: Option<String>,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// CPU model name.
    pub cpu: String,
    /// Online CPUs.
    pub cores: u32,
    /// Host OS description (PRETTY_NAME from /etc/os-release).
    pub os: String,
    /// Kernel settings the analyses explain results with, read when the run started, by dotted
    /// name (`net.ipv4.tcp_migrate_req` → `0`); a setting that could not be read is absent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctls: BTreeMap<String, String>,
    /// Resolution of CLOCK_MONOTONIC_COARSE in microseconds (the clock a proxy such as nginx
    /// caches once per event-loop turn), read at run time; `None` in records from before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coarse_clock_us: Option<u64>,
    /// The platform the run's cases ran on, when not this machine (`None`: local processes,
    /// and every record from before platforms): `proxybench analyse` parses scenario.toml for
    /// it again, and the report names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<PlatformInfo>,
    /// What each case gave the proxy to run on, by case name (`1 worker process, pinned to CPUs
    /// 1`): a comparison of proxies is fair only with equal resources, and shows them. Empty
    /// when no case ran a proxy of this machine, and in records from before it was kept.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub proxy_resources: BTreeMap<String, String>,
}

/// Where a run's cases ran, as the record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PlatformInfo {
    /// `kubernetes` (or `local`).
    pub kind: String,
    /// The kubeconfig context used (empty when unknown).
    #[serde(default)]
    pub context: String,
    /// The namespace the run's objects lived in (empty when unknown).
    #[serde(default)]
    pub namespace: String,
    /// Whether the namespace was kept after the run.
    #[serde(default)]
    pub kept: bool,
    /// How this machine reached the proxy pods for reload timing, generation checks and grow
    /// probes: `pod IP` (it routes the pod network) or `port-forward` (one per pod, through the
    /// API server), as the first case that ran proxy pods found it; empty when none did, and in
    /// records from before it was kept.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_path: String,
    /// The path each load of each case took: what it aimed at and where it ran from, so that a
    /// run through a Service is told from one through a pod or a port-forward. Empty locally.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load_paths: Vec<LoadPath>,
}

/// One load's path on a platform, as env.json keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LoadPath {
    /// The case the load ran in.
    pub case: String,
    /// The load's name.
    pub load: String,
    /// What it aimed at (`Service proxy (ClusterIP) at 198.18.128.7:8080`).
    pub target: String,
    /// Where it ran from (`this machine`, or its agents' place: `2 pods of Job agents-x ...`).
    pub from: String,
}

/// One case of a scenario: its loads and everything observed while they ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CaseResult {
    /// Case name (`main` when the scenario has a single case).
    pub name: String,
    /// One-line description of the case.
    pub description: String,
    /// Seconds from the run origin at which the case started.
    pub start_s: f64,
    /// Seconds the case took.
    pub elapsed_s: f64,
    /// Each load's summary.
    pub loads: Vec<LoadSummary>,
    /// Disruption windows: how each action showed up in each load's failures.
    pub disruptions: Vec<Disruption>,
    /// The actions fired, in order.
    pub events: Vec<Event>,
    /// Reloads, one per replica per reload.
    pub reloads: Vec<ReloadRecord>,
    /// The proxy's logs, summarised.
    pub logs: LogSummary,
    /// CPU and memory per process group, sampled every second.
    pub proc_samples: Vec<ProcSample>,
    /// The proxy's status page (nginx's stub_status) per replica, sampled every second; empty
    /// when the kind's replicas have no status page.
    pub stub_samples: Vec<StubSample>,
    /// Readiness probes of every replica, once a second.
    #[serde(default)]
    pub readiness: Vec<ReadinessSample>,
    /// Time to ready of each config change that added something clients can reach.
    #[serde(default)]
    pub ready: Vec<ReadyRecord>,
    /// Kubernetes: each probed action's (or templated growth step's) times at every
    /// data-plane replica.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeRecord>,
    /// Backend counters at the end of the case.
    pub backends: Vec<BackendCounters>,
    /// TIME_WAIT sockets at the backends' ports right after the case (read from /proc/net/tcp
    /// at run time); `None` when they could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_wait: Option<TimeWait>,
    /// Extra tables the scenario computed (comparisons, predictions), rendered as they are.
    pub tables: Vec<crate::Table>,
    /// Extra series the scenario computed (e.g. limiter queue depth), charted against time.
    pub series: Vec<Series>,
    /// Findings about this case, one sentence each.
    pub findings: Vec<String>,
    /// What the cluster showed during the case (Kubernetes platform only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterRecord>,
    /// The loads that ran on agents (`agents = N`): where, and each agent's part. Their
    /// per-agent result files are in `agents/<case>/<load>/`; they keep no per-request records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distributed: Vec<DistributedLoad>,
    /// Collectors that gathered nothing in this case, each with why (`readiness`: the proxy runs
    /// in pods, whose probes the kubelet runs). Read through [`CaseResult::gap`], never directly.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub absent: BTreeMap<crate::Collector, String>,
    /// Collectors that gathered part of what they were meant to (one replica's status page of
    /// three, one pod's log), each with the items it missed and why. Read through
    /// [`CaseResult::measured`], which makes every value drawn from them partial.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub partial: BTreeMap<crate::Collector, crate::Shortfall>,
    /// Each long-lived load's summary (WebSocket, gRPC, SSE), in the case's load order. The
    /// record keeps their connection lives apart, one file per load
    /// (`streams/<case>/<load>.csv`), so these carry none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<crate::stream::StreamSummary>,
    /// The proxy replicas' processes by generation, sampled once a second (proxies this
    /// machine runs): which generation was alive when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generations: Vec<crate::generation::GenerationSample>,
    /// The case's origin on CLOCK_MONOTONIC, ns, when the backends ran on this machine: their
    /// per-connection times count on that clock, the loads' from the origin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monotonic_origin_ns: Option<u64>,
    /// The long-lived connections' ledger (analysed: empty in the record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_ledger: Option<crate::ledger::StreamLedger>,
}

/// A load of a case that ran on agents: its summary in [`CaseResult::loads`] is the exact merge
/// of the agents' results, and this says where they ran and what each did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DistributedLoad {
    /// The load's name.
    pub load: String,
    /// Where the agents ran (`3 agent processes on this machine`, `3 pods of Job agents-1a2b in
    /// namespace ...`).
    pub place: String,
    /// Where its per-agent result files are, relative to the results directory
    /// (`agents/<case>/<load>`).
    pub files: String,
    /// One row per agent, in agent order: counts, latency, clock offset, start skew, lost.
    pub agents: Vec<crate::load::AgentRow>,
    /// Each agent's clock-offset uncertainty (half the fastest ping's round trip), µs.
    pub clock_uncertainty_us: Vec<u64>,
    /// Agents lost mid-run, with why.
    pub lost: Vec<String>,
}

/// TIME_WAIT sockets that involve the backends' ports, split by which end holds them: the side
/// that closed first keeps the TIME_WAIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeWait {
    /// Sockets whose local port is a backend's (the backend closed first).
    pub backend_side: u64,
    /// Sockets whose remote port is a backend's (the proxy or the load closed first).
    pub peer_side: u64,
}

/// An action fired during a run (scale, reload, kill...) and how it went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Seconds from the run origin when the action started (monotonic clock).
    pub t_s: f64,
    /// Action kind, e.g. `scale_backends`, `reload`, `kill_backend`, `stop_replica`.
    pub action: String,
    /// Human-readable detail, e.g. `backend-2` or `3 -> 1 (graceful)`.
    pub detail: String,
    /// How long the action took, in milliseconds.
    pub duration_ms: f64,
    /// The error, if the action failed.
    pub error: Option<String>,
    /// True when `error` is the limit the action was sent to find (a `grow` with
    /// `stop_on_error` met a config the proxy refused): a finding, not a failed action.
    #[serde(default)]
    pub limit: bool,
}

/// How one action showed up in one load: the failures between it and the next action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disruption {
    /// The load's name.
    pub load: String,
    /// Index into the case's `events`.
    pub event: usize,
    /// Seconds from origin of the window's start (the action) and end (the next action or the end).
    pub window_s: (f64, f64),
    /// Attempts completed in the window.
    pub attempts: u64,
    /// Failed attempts in the window.
    pub failed: u64,
    /// Time of the first failure in the window, seconds from origin.
    pub first_failure_s: Option<f64>,
    /// Time of the last failure in the window, seconds from origin.
    pub last_failure_s: Option<f64>,
    /// Longest run of consecutive failures (in completion order).
    pub longest_failure_run: u64,
    /// Failures by kind or status (`read_reset`, `502`...).
    pub by_cause: BTreeMap<String, u64>,
}

/// One reload of one replica: when the signal went, and how long until the new config served and
/// the old workers were gone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReloadRecord {
    /// Replica name.
    pub replica: String,
    /// Config generation after the reload.
    pub generation: u64,
    /// Seconds from the run origin when the reload was signalled.
    pub t_s: f64,
    /// Milliseconds from the signal until a request was served under the new config; `None`
    /// when that was not seen (a failed reload, or a target that shows no generation).
    pub served_ms: Option<f64>,
    /// Milliseconds the reload command took, start to exit, for a target reloaded by a command
    /// whose serving of the new config proxybench cannot see (an external target): a time of
    /// its own, never read as [`ReloadRecord::served_ms`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_ms: Option<f64>,
    /// Milliseconds from the signal until every old worker (process of the old generation) had
    /// exited.
    pub old_workers_exited_ms: Option<f64>,
    /// Milliseconds the proxy's own config check (`nginx -t`, `haproxy -c`...) took before the
    /// signal.
    pub validate_ms: f64,
    /// Why the reload failed, if it did.
    pub error: Option<String>,
}

impl ReloadRecord {
    /// The record of a reload of `replica` to `generation` signalled at `t_s`, before anything
    /// about it is known: every reload starts from it.
    pub fn begun(replica: &str, generation: u64, t_s: f64) -> ReloadRecord {
        ReloadRecord {
            replica: replica.to_string(),
            generation,
            t_s,
            served_ms: None,
            command_ms: None,
            old_workers_exited_ms: None,
            validate_ms: 0.0,
            error: None,
        }
    }
}

/// The proxy's logs, summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LogSummary {
    /// Error-log lines by level (`warn`, `error`, `crit`...).
    pub error_levels: BTreeMap<String, u64>,
    /// Error-log messages grouped by their normalised text, largest first.
    pub error_groups: Vec<LogGroup>,
    /// Access-log lines.
    pub access_lines: u64,
    /// Access-log lines by status.
    pub access_status: BTreeMap<u16, u64>,
    /// Access-log lines by upstream status (`-` when no upstream answered).
    pub upstream_status: BTreeMap<String, u64>,
    /// Access-log lines by rate-limit outcome (nginx's `$limit_req_status`: PASSED, DELAYED,
    /// REJECTED...).
    pub limit_req_status: BTreeMap<String, u64>,
    /// Access-log lines by upstream address.
    pub upstream_addr: BTreeMap<String, u64>,
    /// A few example 499 lines, verbatim.
    pub examples_499: Vec<String>,
    /// Responses outside 2xx/3xx by who produced them: `"502 proxy"` (the proxy answered itself:
    /// upstream connect failure or timeout, limit_req, no route, no live upstreams) or
    /// `"503 upstream"` (the backend's own status passed through).
    #[serde(default)]
    pub status_origin: BTreeMap<String, u64>,
    /// Why there is no log summary (no proxy ran, or its logs could not be read); `None` when the
    /// logs were read. Checks on the logs fail with "no data" rather than read zeros.
    #[serde(default)]
    pub missing: Option<String>,
    /// Access-log lines of rate-limited requests (`$limit_req_status` set), in log order, so an
    /// analysis can replay the limiter on the arrival times the proxy itself logged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limit_req_lines: Vec<LimitReqLine>,
}

/// One access-log line of a rate-limited request: when the proxy read it and what its limiter
/// did, on the proxy's own clock (a stall of the client or of the proxy shows in these times).
/// The fields follow nginx's limit_req, the model the burst analysis replays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitReqLine {
    /// When the proxy read the request (nginx: `$msec - $request_time`, the request's start,
    /// taken in the event-loop turn whose cached clock limit_req reads), ms since the Unix epoch.
    pub start_ms: u64,
    /// When the proxy logged it (nginx: `$msec`), ms since the Unix epoch.
    pub end_ms: u64,
    /// `$status`.
    pub status: u16,
    /// `$limit_req_status`: `PASSED`, `DELAYED`, `REJECTED` or a `_DRY_RUN` form.
    pub limit: String,
}

impl LimitReqLine {
    /// Whether limit_req let the request through (`PASSED` or `DELAYED`).
    pub fn accepted(&self) -> bool {
        self.limit == "PASSED" || self.limit == "DELAYED"
    }
}

/// Error-log lines that share a message once addresses, ids and times are removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogGroup {
    /// Level (`warn`, `error`...).
    pub level: String,
    /// The normalised message, e.g. `upstream server temporarily disabled while connecting to upstream`.
    pub message: String,
    /// How many lines fell in the group.
    pub count: u64,
    /// One line of the group, verbatim.
    pub example: String,
}

/// One backend instance's counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct BackendCounters {
    /// Instance name (`backend-0`...).
    pub name: String,
    /// Listen address.
    pub addr: String,
    /// Responses completed.
    pub requests: u64,
    /// Requests in flight when sampled.
    pub in_flight: u64,
    /// Responses by status.
    pub by_status: BTreeMap<u16, u64>,
    /// Response bytes written.
    pub bytes: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Instance state when sampled (`running`, `draining`, `stopped`...).
    pub state: String,
    /// What the instance saw over HTTP/2 (h2c), when any connection spoke it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2: Option<BackendH2>,
    /// What the instance saw of long-lived connections (WebSocket, SSE, gRPC), when any came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<crate::stream::BackendStreams>,
}

/// What one backend instance saw over HTTP/2 (h2c with prior knowledge), beside its totals: its
/// requests are also in [`BackendCounters::requests`] and `by_status`, so HTTP/1.x is the
/// difference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct BackendH2 {
    /// Connections that opened with the HTTP/2 preface.
    pub connections: u64,
    /// Responses produced on HTTP/2 streams.
    pub requests: u64,
    /// Most streams open at once on one connection.
    pub max_streams_per_connection: u64,
    /// Most streams open at once on the instance: each event loop's peak, summed (exact with one
    /// event loop; with several an upper bound, as their peaks need not coincide).
    pub max_streams: u64,
    /// Streams refused above the concurrency limit (RST_STREAM REFUSED_STREAM, never processed).
    pub refused: u64,
    /// Streams the client reset (RST_STREAM) before their response was complete.
    pub client_resets: u64,
    /// Streams reset for breaking the protocol (a malformed request, a frame the stream's state
    /// forbids).
    pub stream_errors: u64,
    /// Connections ended by a protocol error (GOAWAY with an error code).
    pub connection_errors: u64,
    /// Graceful GOAWAYs sent (drain, graceful stop, `close_after`).
    pub goaways: u64,
}

/// A check (an SLO or a theory prediction) and its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// What was checked, e.g. `coffee failure rate <= 0.5%`.
    pub name: String,
    /// The case it applies to, if any.
    pub case: Option<String>,
    /// The expected value or bound, as text.
    pub expected: String,
    /// The measured value, as text.
    pub actual: String,
    /// Whether it held.
    pub pass: bool,
}

impl CheckResult {
    /// Why the check could not be evaluated, when the run could not give its data (the proxy
    /// kind or the platform cannot): its `actual`, which then reads `not measurable...: why`.
    /// `None` for a check that was measured, whether it held or not. A "no data" check is not
    /// this: its data could have been there, so it is a failure.
    pub fn not_measurable(&self) -> Option<&str> {
        self.actual
            .starts_with("not measurable")
            .then_some(self.actual.as_str())
    }
}

/// A series computed by a scenario (for example limiter queue depth), charted against time or,
/// for one value per step of a growth, against what grew.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Series {
    /// Chart title and file stem, e.g. `queue depth`.
    pub name: String,
    /// Unit of the values, e.g. `requests`.
    pub unit: String,
    /// Points as (x, value); what x is says [`Series::x`].
    pub points: Vec<(f64, f64)>,
    /// Series of a case with the same chart title are drawn together on one chart (a measured
    /// line against its prediction); `None` gives the series a chart of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<String>,
    /// What the points' x is: seconds from the origin (the default, and all that files written
    /// before this field existed hold), or a count of what grew.
    #[serde(default, skip_serializing_if = "SeriesX::is_time")]
    pub x: SeriesX,
}

/// The x axis of a [`Series`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SeriesX {
    /// Seconds from the case origin: a line against time, with the case's actions marked.
    #[default]
    Time,
    /// How many of something there were (the label, e.g. `routes`): one scattered point per
    /// step, the way time to ready is plotted against the number of routes.
    Count(String),
}

impl SeriesX {
    /// True for the time axis (kept out of JSON so older files and readers stay as they were).
    pub fn is_time(&self) -> bool {
        matches!(self, SeriesX::Time)
    }
}

/// Disruption windows computed from per-request records: one per (load, event) pair. The window of
/// event `i` runs from its time to the next event's time (or `end_s`).
pub fn disruption_windows(
    load: &str,
    records: &[RequestRecord],
    events: &[Event],
    end_s: f64,
) -> Vec<Disruption> {
    let mut out = Vec::with_capacity(events.len());
    for (i, ev) in events.iter().enumerate() {
        let start = ev.t_s;
        let end = events.get(i + 1).map(|e| e.t_s).unwrap_or(end_s).max(start);
        let (lo, hi) = ((start * 1e6) as u64, (end * 1e6) as u64);
        let from = records.partition_point(|r| r.t_us < lo);
        let to = records.partition_point(|r| r.t_us < hi);
        let mut d = Disruption {
            load: load.to_string(),
            event: i,
            window_s: (start, end),
            attempts: (to - from) as u64,
            failed: 0,
            first_failure_s: None,
            last_failure_s: None,
            longest_failure_run: 0,
            by_cause: BTreeMap::new(),
        };
        let mut run = 0u64;
        for r in &records[from..to] {
            if r.failed() {
                d.failed += 1;
                run += 1;
                d.longest_failure_run = d.longest_failure_run.max(run);
                let t = r.t_us as f64 / 1e6;
                d.first_failure_s.get_or_insert(t);
                d.last_failure_s = Some(t);
                let cause = match r.error {
                    Some(k) => k.name().to_string(),
                    None => r.status.to_string(),
                };
                *d.by_cause.entry(cause).or_insert(0) += 1;
            } else {
                run = 0;
            }
        }
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn series_x_defaults_to_time_and_a_count_axis_round_trips() {
        let old = r#"{"name":"q","unit":"requests","points":[[0.5,1.0]]}"#;
        let s: Series = serde_json::from_str(old).unwrap();
        assert_eq!(s.x, SeriesX::Time);
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            old,
            "time stays out of the JSON"
        );
        let c = Series {
            x: SeriesX::Count("routes".into()),
            ..s
        };
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains(r#""x":{"count":"routes"}"#), "{json}");
        assert_eq!(serde_json::from_str::<Series>(&json).unwrap(), c);
    }

    fn rec(t_ms: u64, status: u16, error: Option<ErrorKind>) -> RequestRecord {
        RequestRecord {
            t_us: t_ms * 1000,
            latency_us: 100,
            status,
            error,
            ..Default::default()
        }
    }

    fn ev(t_s: f64) -> Event {
        Event {
            t_s,
            action: "kill_backend".into(),
            detail: String::new(),
            duration_ms: 0.0,
            error: None,
            limit: false,
        }
    }

    #[test]
    fn windows_count_failures_and_runs() {
        let recs = vec![
            rec(500, 200, None),
            rec(1100, 200, None),
            rec(1200, 502, None),
            rec(1300, 0, Some(ErrorKind::ReadReset)),
            rec(1400, 200, None),
            rec(1500, 0, Some(ErrorKind::ReadReset)),
            rec(2500, 0, Some(ErrorKind::ConnectRefused)),
            rec(2600, 200, None),
        ];
        let w = disruption_windows("coffee", &recs, &[ev(1.0), ev(2.0)], 3.0);
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].attempts, 5);
        assert_eq!(w[0].failed, 3);
        assert_eq!(w[0].longest_failure_run, 2);
        assert_eq!(w[0].first_failure_s, Some(1.2));
        assert_eq!(w[0].last_failure_s, Some(1.5));
        assert_eq!(w[0].by_cause.get("502"), Some(&1));
        assert_eq!(w[0].by_cause.get("read_reset"), Some(&2));
        assert_eq!(w[1].attempts, 2);
        assert_eq!(w[1].failed, 1);
        assert_eq!(w[1].window_s, (2.0, 3.0));
    }
}
