//! What a case on a Kubernetes cluster records besides its loads: pod changes and restarts,
//! Warning events, pod metrics, log levels and scraped samples.

use super::*;

/// What a case saw on a Kubernetes cluster: pods coming and going, restarts, Warning events,
/// and the optional metrics. Each collector that could not gather its data says why in
/// `absent`, so a missing series is never read as zeros.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ClusterRecord {
    /// The namespace the case ran in.
    pub namespace: String,
    /// The kubeconfig context used.
    pub context: String,
    /// The API server's version (`v1.34.4`).
    pub server_version: String,
    /// Every pod phase and readiness change, in time order.
    pub pods: Vec<PodChange>,
    /// Container restarts, each with the count after it.
    pub restarts: Vec<RestartRecord>,
    /// Warning events of the watched namespaces.
    pub warnings: Vec<ClusterEvent>,
    /// CPU and memory per pod from the metrics API, once a second.
    pub metrics: Vec<PodMetric>,
    /// Samples from the optional Prometheus scrape.
    pub scrapes: Vec<ScrapeSample>,
    /// The scrape's series by type over the case and each action's window (histograms and
    /// counters as deltas, gauges as min/max/last): analysed from `scrapes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<crate::scrape::ScrapeWindow>,
    /// The watched pods' logs counted by level (`[platform] watch.log_levels`), one row per
    /// container whose log was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_levels: Vec<LogLevels>,
    /// Why a collector has no data, one sentence each (`metrics API: not served by this
    /// cluster`).
    pub absent: Vec<String>,
    /// The proxy pods' termination grace period in seconds (absent when the case ran none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_grace_s: Option<u32>,
    /// The proxy pods' preStop sleep in seconds, before their stop signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_pre_stop_s: Option<u32>,
    /// Backend pods whose final counters could not be read, each `NAME (pod POD): why`: the
    /// case's backend counters leave them out, so sums over them are short by their counts.
    #[serde(default)]
    pub counters_missing: Vec<String>,
    /// How this machine reached the proxy pods (`pod IP` or `port-forward`; absent when the
    /// case ran none): env.json's platform record takes it from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_path: Option<String>,
    /// Where the case's loads aimed, by their `via` as written (`node-port:http`), and under
    /// `""` where a load without one went (`Service proxy (ClusterIP) at its ClusterIP
    /// 198.18.128.7`; absent when the proxy had no Service).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub load_targets: BTreeMap<String, String>,
}

impl ClusterRecord {
    /// Container restarts within the case, as the API counts them: the sum of the jumps in each
    /// container's restartCount (0 -> 3 is 3). `None` when a row comes from a record that kept
    /// only the count after each jump (its jump is not known).
    pub fn restarts_in_case(&self) -> Option<u64> {
        self.restarts.iter().map(|r| r.added.map(u64::from)).sum()
    }

    /// Warning events within the case, as the API counts them: the increase of each event's
    /// `count` within the case (an event seen at counts 1 to 5 is 5; what it counted before the
    /// case is not included). `None` when a row comes from a record that kept only the
    /// cumulative count.
    pub fn warnings_in_case(&self) -> Option<u64> {
        self.warnings.iter().map(|w| w.added.map(u64::from)).sum()
    }
}

/// One observed state of one pod: recorded whenever its phase or readiness changes, and when
/// it is deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodChange {
    /// Seconds from the case origin.
    pub t_s: f64,
    /// Pod name.
    pub pod: String,
    /// What the pod is to the run: `proxy`, `backend`, or `watched` (the user's own).
    pub role: String,
    /// Pod phase (`Pending`, `Running`, `Succeeded`, `Failed`, `Deleted`).
    pub phase: String,
    /// Whether the pod's Ready condition is true.
    pub ready: bool,
    /// Whether a deletion was requested (the pod is terminating).
    #[serde(default)]
    pub terminating: bool,
}

/// A container restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartRecord {
    /// Seconds from the case origin.
    pub t_s: f64,
    /// Pod name.
    pub pod: String,
    /// Container name.
    pub container: String,
    /// The restart count after it.
    pub count: u32,
    /// Why the previous instance ended (`Error`, `OOMKilled`), when the API says.
    pub reason: String,
    /// The restarts this change adds: the jump in the container's restartCount since the pod
    /// watch last saw it (from 0 for a pod that came during the case), so that a count seen
    /// going 0 -> 3 is 3 restarts; `None` in records from before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added: Option<u32>,
}

/// A Warning event (or any event the collector keeps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterEvent {
    /// Seconds from the case origin (the event's last time).
    pub t_s: f64,
    /// The object it is about (`Pod/nginx-abc`).
    pub object: String,
    /// Its reason (`Unhealthy`, `BackOff`).
    pub reason: String,
    /// Its message.
    pub message: String,
    /// How many times the API server counted it (its `count`, cumulative, from before the case
    /// too).
    pub count: u32,
    /// The occurrences this row adds within the case: the increase of the event's `count` since
    /// the watch last saw it, or since the case began (an event that began in the case counts
    /// from 0), so that an event seen at counts 1 to 5 adds 5 in all; `None` in records from
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added: Option<u32>,
}

/// One metrics API sample of one pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodMetric {
    /// Seconds from the case origin.
    pub t_s: f64,
    /// Pod name.
    pub pod: String,
    /// CPU in millicores.
    pub cpu_millicores: f64,
    /// Memory working set in bytes.
    pub memory_bytes: u64,
}

/// One watched container's log counted by the level of its JSON lines
/// (`{"level":"error","msg":...}`, as a gateway's control plane writes them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LogLevels {
    /// The pod, as `namespace/pod`.
    pub pod: String,
    /// The container.
    pub container: String,
    /// Lines in all.
    pub lines: u64,
    /// Lines that are a JSON object with a `level` (or `severity`).
    pub leveled: u64,
    /// Those lines by level, lowercased.
    pub levels: BTreeMap<String, u64>,
    /// Lines at an error level or worse (`error`, `fatal`, `panic`...).
    pub errors: u64,
    /// The message of the first few of those.
    pub first_errors: Vec<String>,
    /// Why the log may be incomplete (its pod went away before it could be read...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}

/// One Prometheus sample scraped from a pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScrapeSample {
    /// Seconds from the case origin.
    pub t_s: f64,
    /// The pod's namespace (empty in runs recorded before it was kept).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Metric name.
    pub metric: String,
    /// Labels as `k="v",...` (empty when none).
    pub labels: String,
    /// The value.
    pub value: f64,
    /// Its family's type from the exposition's `# TYPE` (`counter`, `gauge`, `histogram`...;
    /// empty when it gave none, and in runs recorded before it was kept).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
}
