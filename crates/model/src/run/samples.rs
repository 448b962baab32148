//! The per-second samples a case records of its proxy: /proc, the status page, readiness and
//! the probes of each replica.

use super::*;

/// CPU and memory of one process group at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcSample {
    /// Seconds from the run origin.
    pub t_s: f64,
    /// Group name, e.g. a replica (`nginx-0`, `haproxy-1`), `load`, `backends`.
    pub group: String,
    /// CPU used since the previous sample, in percent of one core.
    pub cpu_pct: f64,
    /// Resident memory in bytes.
    pub rss_bytes: u64,
    /// Processes (or threads) in the group.
    pub procs: u32,
}

/// One sample of a replica's status page (nginx's stub_status: connections and requests).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StubSample {
    /// Seconds from the run origin.
    pub t_s: f64,
    /// Replica name.
    pub replica: String,
    /// Active client connections.
    pub active: u64,
    /// Accepted connections since start.
    pub accepts: u64,
    /// Handled connections since start.
    pub handled: u64,
    /// Requests since start.
    pub requests: u64,
    /// Connections reading a request.
    pub reading: u64,
    /// Connections writing a response.
    pub writing: u64,
    /// Idle keep-alive connections.
    pub waiting: u64,
}

/// One readiness probe of one proxy replica: its admin endpoint asked with a 1 s timeout, as a
/// Kubernetes readiness probe would (NGF saw probes time out under load and pods flap).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadinessSample {
    /// Seconds from the case origin.
    pub t_s: f64,
    /// Replica name.
    pub replica: String,
    /// Whether it answered in time.
    pub ok: bool,
    /// How long the answer took, in milliseconds; `None` when it failed (a probe that got no
    /// answer has no answer time; files written before kept the timeout here, which
    /// [`ReadinessSample::answered_ms`] leaves out).
    #[serde(default)]
    pub ms: Option<f64>,
}

impl ReadinessSample {
    /// The answer time of a probe that was answered; `None` for a failed one.
    pub fn answered_ms(&self) -> Option<f64> {
        self.ms.filter(|_| self.ok)
    }
}

/// How long a config change took to reach clients: from the start of the change (render, the
/// proxy's config check, reload) until the new item answered, counted as ready only after 3 successes in a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadyRecord {
    /// Seconds from the case origin when the change started.
    pub t_s: f64,
    /// What grew (`routes`, `listeners`, `https_listeners`, `matches`, `upstream_servers`).
    pub what: String,
    /// How many of them the config held after the change.
    pub count: u32,
    /// The item probed (a URL, with the header for matches).
    pub item: String,
    /// Config generation after the change.
    pub generation: u64,
    /// Milliseconds from the start of the change to the first of 3 consecutive successes.
    pub ready_ms: Option<f64>,
    /// Why it never became ready (or why the change failed).
    pub error: Option<String>,
}

/// A probed cluster action (an `apply` or `delete` with `probe`, or one step of a templated
/// `grow`): how long the new state took to serve at each data-plane replica, probed on its own
/// at its pod IP or through its port-forward, and how long the replicas disagreed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ProbeRecord {
    /// Seconds from the case origin when the action started (the times below count from it).
    pub t_s: f64,
    /// The action (`apply`, `delete`, `grow`).
    pub action: String,
    /// What it applied (`route.yaml`, `route.yaml.j2 item 7`).
    pub detail: String,
    /// The request (`http://r7.example:8080/r7 -> 200`).
    pub request: String,
    /// How the probe reached the pods (`pod IP` or `port-forward`).
    pub path: String,
    /// The interval asked for between one replica's requests (`every`), µs: beside each
    /// replica's achieved `interval_us`, what says whether the path and the machine allowed
    /// the resolution asked for.
    #[serde(default)]
    pub every_us: f64,
    /// Milliseconds from the action's start until its `wait` condition held (every object),
    /// when it had one and it came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition_ms: Option<f64>,
    /// Each replica probed: the pods the selector matched during the action.
    pub replicas: Vec<ReplicaProbe>,
    /// Milliseconds from the first replica's first expected answer to the last replica's
    /// (the mixed window, when replicas disagreed); `None` unless every replica still there
    /// answered as expected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixed_ms: Option<f64>,
    /// Why the action's probe failed as a whole (a replica never stable, no pod matched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One data-plane replica's times in a [`ProbeRecord`], each in milliseconds from the action's
/// start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ReplicaProbe {
    /// The pod.
    pub pod: String,
    /// Where the probe connected (its IP and port, or the port-forward's local end).
    pub addr: String,
    /// The first expected answer (its request's start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_ms: Option<f64>,
    /// The start of the first run of `consecutive` expected answers (the local growth's time
    /// to ready).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_ms: Option<f64>,
    /// When the last answer of that run came back: from then on the replica was stable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_ms: Option<f64>,
    /// Requests sent to this replica.
    pub requests: u64,
    /// Mean time from one request's start to the next one's (the resolution achieved), µs.
    pub interval_us: f64,
    /// Mean time of one request (connect, send, answer), µs: the probe's own cost.
    pub request_us: f64,
    /// The pod went away (deleted, scaled down) before it was stable: not a gateway failure.
    #[serde(default)]
    pub gone: bool,
    /// Why it never became stable (its last answer or error), when it did not and is not gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The probe never reached the pod's port: no request got an answer (each was refused,
    /// timed out or failed at the port-forward), or none could be sent. The probe has no
    /// evidence of this replica (`error` says why): its record covers the others only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unreached: bool,
}

impl ProbeRecord {
    /// What the probe covered of the replicas it was meant to (every one still there at the
    /// end, gone ones aside), when it did not reach some: those, with why. `None` when it
    /// reached every one.
    pub fn shortfall(&self) -> Option<crate::Shortfall> {
        let here = self.replicas.iter().filter(|r| !r.gone).count();
        let missing: Vec<crate::MissingItem> = self
            .replicas
            .iter()
            .filter(|r| r.unreached && !r.gone)
            .map(|r| crate::MissingItem {
                item: r.pod.clone(),
                why: r.error.clone().unwrap_or_else(|| "not reached".into()),
            })
            .collect();
        (!missing.is_empty()).then(|| crate::Shortfall::new("replicas", here, missing))
    }
}
