//! The agent protocol: one JSON object per line over TCP. The coordinator says hello with the
//! shared token, measures the agent's clock with pings, sends the run; the agent streams each
//! second (row and histograms) and ends with its whole result.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};

/// Coordinator to agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum ToAgent {
    /// First message: the shared secret.
    Hello {
        /// The token file's contents (trimmed).
        token: String,
    },
    /// A clock probe; the agent answers with its wall clock.
    Ping {
        /// The coordinator's wall clock when it sent this, ns since the epoch (echoed back).
        t0_ns: u64,
    },
    /// Run this share of the load.
    Run(Box<Job>),
    /// End the run now (Ctrl-C at the coordinator): the agent stops its load, as a local run
    /// stops, and still sends its result. (An agent that does not know this message stops on
    /// it too: any message it cannot read ends its run.)
    Stop,
}

/// One agent's share of a load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// The load's engine config itself, as the coordinator holds it (files it names, the CA
    /// file, are where the agent finds them); the agent applies the share below.
    pub config: load::Config,
    /// The load's name (its scenario name, or `load`): the `load` label of the agent's live
    /// metrics. Absent from older coordinators.
    #[serde(default)]
    pub load: String,
    /// The common start instant on the agent's own clock, ns since the epoch.
    pub start_unix_ns: u64,
    /// The time base (the load's origin: its seconds and `start_s` count from it) lies this
    /// long before the start, ns; 0 puts it at the start. A scenario's load counts from its
    /// case's start, as a local load does.
    #[serde(default)]
    pub origin_ahead_ns: u64,
    /// This agent's phase: it begins this long after the common start, ns.
    pub phase_ns: u64,
    /// Connections for this agent.
    pub connections: u32,
    /// Threads for this agent (at most its connections).
    pub threads: u32,
    /// Open loop: this agent's rate.
    pub rate: Option<f64>,
    /// `-n`: this agent's exact request count.
    pub requests: Option<u64>,
    /// Seed of this agent's arrivals (Poisson: distinct per agent, so their sum stays Poisson).
    pub seed: u64,
}

/// Agent to coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum FromAgent {
    /// The token matched.
    Ready,
    /// The token did not match, or the job was bad: the reason.
    Denied {
        /// Why.
        reason: String,
    },
    /// The answer to a ping.
    Pong {
        /// The ping's `t0_ns`.
        t0_ns: u64,
        /// The agent's wall clock when it answered, ns since the epoch.
        agent_ns: u64,
    },
    /// The agent reached the common start instant: its wall clock then.
    Started {
        /// ns since the epoch, agent clock.
        at_unix_ns: u64,
    },
    /// One completed second.
    Second {
        /// The timeline row.
        row: model::Second,
        /// Its histograms.
        hdr: model::SecondHdr,
    },
    /// The whole result, as the JSON a local `load --format json` writes.
    Result {
        /// The result file's text.
        json: String,
    },
    /// The run could not start or failed: the reason.
    Failed {
        /// Why.
        reason: String,
    },
}

/// Wall clock now, ns since the epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Writes one message as a line.
pub fn send<T: Serialize>(w: &mut impl Write, msg: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line)?;
    w.flush()
}

/// Reads one message; `Ok(None)` at end of stream.
pub fn recv<T: for<'de> Deserialize<'de>>(r: &mut impl BufRead) -> std::io::Result<Option<T>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    serde_json::from_str(&line)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Reads a token file: its contents without surrounding whitespace; an empty token is refused.
pub fn read_token(path: &std::path::Path) -> Result<String, crate::Error> {
    let t = std::fs::read_to_string(path).map_err(|e| {
        crate::Error::Token(format!("cannot read token file {}: {e}", path.display()))
    })?;
    let t = t.trim().to_string();
    if t.is_empty() {
        return Err(crate::Error::Token(format!(
            "token file {} is empty",
            path.display()
        )));
    }
    Ok(t)
}

/// Compares tokens without an early exit on the first differing byte.
pub fn token_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
