//! The ledger of a case's long-lived connections: how many were alive at each action, which
//! dropped, and by what (a reload's old generation, a backend action, the backend itself, or
//! nothing the run can name, with the evidence), with drops that carried a close frame (or a
//! GOAWAY, a `grpc-status`) counted apart from those cut without one, and the time from each
//! reload to its drops. The analyse stage computes it from the loads' connection lives, the
//! reloads, the actions, the proxy's generations and the backends' counters, and keeps it in
//! [`crate::CaseResult::stream_ledger`]; the checks (`ws.dropped_by_reload <= 0`) and the report
//! read it.

use crate::generation::{Draining, GenerationLife};
use crate::stream::{EndKind, StreamProtocol};
use serde::{Deserialize, Serialize};

/// At most this many unattributed drops are listed one by one (all are counted).
pub const UNATTRIBUTED_ROWS: usize = 50;

/// What a drop was attributed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropCause {
    /// A reload: the connection opened before it, on the generation it superseded, and dropped
    /// while that generation drained or exited.
    Reload,
    /// A backend action (`kill_backend`, `drain_backend`, a `scale_backends` that removed
    /// instances) while the backends' counters show their end closing connections.
    BackendAction,
    /// The backend ended it on its own (its profile: a push count, a gRPC deadline), as its
    /// per-connection counters show.
    Backend,
    /// Nothing the run recorded explains it.
    Unattributed,
}

impl DropCause {
    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            DropCause::Reload => "reload",
            DropCause::BackendAction => "backend action",
            DropCause::Backend => "backend",
            DropCause::Unattributed => "unattributed",
        }
    }
}

/// A distribution of times in seconds, as the ledger reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Spread {
    /// How many values.
    pub n: u64,
    /// The smallest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_s: Option<f64>,
    /// The median (nearest rank).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_s: Option<f64>,
    /// The largest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_s: Option<f64>,
}

impl Spread {
    /// The spread of `values` (any order).
    pub fn of(mut values: Vec<f64>) -> Spread {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        Spread {
            n: n as u64,
            min_s: values.first().copied(),
            p50_s: (n > 0).then(|| values[(n - 1) / 2]),
            max_s: values.last().copied(),
        }
    }
}

/// One long-lived load's connections, by what ended them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LoadLedger {
    /// The load's name.
    pub name: String,
    /// Its protocol.
    pub protocol: Option<StreamProtocol>,
    /// Connection lives the ledger read (every connection the load started).
    pub lives: u64,
    /// Connections that opened.
    pub opened: u64,
    /// Of those, the ones dropped ([`crate::stream::ConnLife::dropped`]).
    pub dropped: u64,
    /// Drops attributed to a reload.
    pub by_reload: u64,
    /// Drops attributed to a backend action.
    pub by_backend_action: u64,
    /// Drops the backend made on its own.
    pub by_backend: u64,
    /// Drops nothing explains.
    pub unattributed: u64,
    /// Drops the server announced in the protocol (a close frame, a GOAWAY, a `grpc-status`).
    pub with_close: u64,
    /// Drops cut without a word (a FIN, a reset, a timeout).
    pub without_close: u64,
    /// Connections still open when the load ended: they survived every action.
    pub survived: u64,
    /// From each reload to each drop attributed to it, seconds.
    pub reload_to_drop: Spread,
    /// How long each dropped connection had been open, seconds: how long one survives.
    pub lifetime: Spread,
    /// Why the ledger of this load is incomplete (lives left out, a lives file missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}

/// What one action of the case did to the long-lived connections.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ActionLedger {
    /// Index into the case's events.
    pub event: usize,
    /// When it fired, seconds from the case origin.
    pub t_s: f64,
    /// The action (`reload`, `kill_backend`...).
    pub action: String,
    /// Its detail.
    pub detail: String,
    /// Connections of every long-lived load open when it fired.
    pub alive: u64,
    /// Drops attributed to it.
    pub dropped: u64,
    /// Of those, announced (close frame, GOAWAY, `grpc-status`).
    pub with_close: u64,
    /// Of those, cut without a word.
    pub without_close: u64,
    /// From the action to each of its drops, seconds.
    pub to_drop: Spread,
}

/// A drop nothing explains, with what the run knows of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct UnattributedDrop {
    /// The load.
    pub load: String,
    /// The connection slot and its attempt.
    pub conn: u32,
    /// Which connection of the slot.
    pub attempt: u32,
    /// When it opened, seconds from the case origin.
    pub open_s: f64,
    /// When it ended.
    pub end_s: f64,
    /// How.
    pub end: EndKind,
    /// Its close code or `grpc-status`, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// Why no action took it (the reloads and generations around it, the backends' closes).
    pub evidence: String,
}

/// The case's ledger of long-lived connections.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StreamLedger {
    /// Each long-lived load, in the case's order.
    pub loads: Vec<LoadLedger>,
    /// Each action of the case, in order.
    pub actions: Vec<ActionLedger>,
    /// Every generation of every sampled proxy replica.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generations: Vec<GenerationLife>,
    /// Old generations still alive at each sample, all replicas summed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub draining: Vec<Draining>,
    /// Replicas that reload inside one process: their generations are not told apart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_place: Vec<String>,
    /// The drops nothing explains, one by one (at most [`UNATTRIBUTED_ROWS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unattributed: Vec<UnattributedDrop>,
    /// How the drops were attributed, and what evidence was missing, one sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl StreamLedger {
    /// The ledger of load `name`.
    pub fn load(&self, name: &str) -> Option<&LoadLedger> {
        self.loads.iter().find(|l| l.name == name)
    }

    /// The most old generations alive at once.
    pub fn draining_generations_max(&self) -> u32 {
        self.draining
            .iter()
            .map(|d| d.generations)
            .max()
            .unwrap_or(0)
    }

    /// The most resident memory old generations held at once, bytes.
    pub fn draining_rss_max(&self) -> u64 {
        self.draining.iter().map(|d| d.rss_bytes).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_takes_the_nearest_rank_median() {
        let s = Spread::of(vec![3.0, 1.0, 2.0, 10.0]);
        assert_eq!(
            (s.n, s.min_s, s.p50_s, s.max_s),
            (4, Some(1.0), Some(2.0), Some(10.0))
        );
        assert_eq!(Spread::of(vec![]).p50_s, None);
    }
}
