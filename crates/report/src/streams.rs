//! The long-lived loads' tables (WebSocket, gRPC, SSE), built once and written by report.md and
//! report.html alike: a headline row per load for the summary, and per case each load's
//! connections, messages and timings, the ledger of what dropped them, what each action did to
//! them, the proxy's generations and the drops nothing explains.

use crate::fmt::{self, count};
use crate::hdr;
use model::ledger::{Spread, StreamLedger};
use model::stream::{grpc_code_name, StreamProtocol, StreamSummary};
use model::{CaseResult, RunResults};

/// Rows of one table, in the shape both reporters write: a leading `>` in a column name marks
/// a number column.
pub(crate) struct Grid {
    /// The table's heading.
    pub title: String,
    /// A sentence under the heading.
    pub note: String,
    /// Column names.
    pub columns: Vec<&'static str>,
    /// Cells, row by row.
    pub rows: Vec<Vec<String>>,
}

/// A spread's median and largest value in seconds, `-` when empty.
fn spread(s: &Spread) -> (String, String) {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
    (f(s.p50_s), f(s.max_s))
}

/// A latency percentile, `-` without values.
fn pct_lat(l: &model::Latency, p: f64) -> String {
    hdr::percentile_us(l, p).map_or("-".into(), fmt::lat)
}

/// The protocol in words.
pub(crate) fn words(p: StreamProtocol) -> &'static str {
    match p {
        StreamProtocol::WebSocket => "WebSocket",
        StreamProtocol::GrpcUnary => "gRPC unary",
        StreamProtocol::GrpcStream => "gRPC stream",
        StreamProtocol::Sse => "SSE",
    }
}

/// The summary's table of every long-lived load: how many connections dropped, by what, and
/// how long after a reload. `None` when no case had one.
pub(crate) fn headline(r: &RunResults) -> Option<Grid> {
    let mut rows = Vec::new();
    for c in &r.cases {
        for st in &c.streams {
            let b = c.stream_ledger.as_ref().and_then(|l| l.load(&st.name));
            let cell = |f: &dyn Fn(&model::ledger::LoadLedger) -> String| {
                b.map_or_else(|| "n/a".to_string(), f)
            };
            let (p50, max) = b.map_or(("n/a".into(), "n/a".into()), |b| spread(&b.reload_to_drop));
            let (life, _) = b.map_or(("n/a".into(), String::new()), |b| spread(&b.lifetime));
            rows.push(vec![
                c.name.clone(),
                st.name.clone(),
                words(st.protocol).to_string(),
                count(st.opened),
                count(st.dropped),
                cell(&|b| count(b.with_close)),
                cell(&|b| count(b.without_close)),
                cell(&|b| count(b.by_reload)),
                p50,
                max,
                life,
                cell(&|b| count(b.survived)),
            ]);
        }
    }
    (!rows.is_empty()).then(|| Grid {
        title: "Long-lived connections".into(),
        note: "Every connection a long-lived load opened, and what became of it: dropped (cut by \
               the server or the path, or ended in error), with a close frame (or a GOAWAY, a \
               grpc-status) or without one, by a reload's old generation, and the seconds from \
               the reload to the drop; how long a dropped connection had lived (median); how \
               many lasted to the load's end. A case that lost no short request may still have \
               cut these."
            .into(),
        columns: vec![
            "Case",
            "Load",
            "Protocol",
            ">Opened",
            ">Dropped",
            ">With close",
            ">Without",
            ">By reload",
            ">Reload→drop p50 (s)",
            ">max (s)",
            ">Lived p50 (s)",
            ">Lasted",
        ],
        rows,
    })
}

/// The tables of one case's long-lived loads (empty without any).
pub(crate) fn case_grids(c: &CaseResult) -> Vec<Grid> {
    if c.streams.is_empty() {
        return Vec::new();
    }
    let mut out = vec![connections(c), messages(c)];
    if let Some(l) = &c.stream_ledger {
        out.push(drops(l));
        out.extend(actions(l));
        out.extend(generations(l));
        out.extend(unattributed(l));
    }
    out
}

/// What dropped each load's connections: each drop placed on its cause.
fn drops(l: &StreamLedger) -> Grid {
    let mut rows = Vec::new();
    for b in &l.loads {
        let (rp50, rmax) = spread(&b.reload_to_drop);
        let (lp50, lmax) = spread(&b.lifetime);
        rows.push(vec![
            b.name.clone(),
            count(b.opened),
            count(b.dropped),
            count(b.with_close),
            count(b.without_close),
            count(b.by_reload),
            count(b.by_backend_action),
            count(b.by_backend),
            count(b.unattributed),
            rp50,
            rmax,
            lp50,
            lmax,
            count(b.survived),
            b.incomplete.clone().unwrap_or_else(|| "complete".into()),
        ]);
    }
    Grid {
        title: "What dropped them".into(),
        note: "Each drop placed on its cause: a reload (the connection opened on the \
               generation the reload superseded and dropped while that generation drained \
               or exited), a backend action (while the backends' counters show their end \
               closing connections), the backend on its own, or nothing the run recorded \
               (listed below with the evidence). Times in seconds."
            .into(),
        columns: vec![
            "Load",
            ">Opened",
            ">Dropped",
            ">With close",
            ">Without",
            ">Reload",
            ">Backend action",
            ">Backend",
            ">Unattributed",
            ">Reload→drop p50",
            ">max",
            ">Lived p50",
            ">max",
            ">Lasted",
            "Evidence",
        ],
        rows,
    }
}

/// Each action and the connections open through it (none without actions).
fn actions(l: &StreamLedger) -> Option<Grid> {
    let acted: Vec<&model::ledger::ActionLedger> = l.actions.iter().collect();
    if acted.is_empty() {
        return None;
    }
    let mut rows = Vec::new();
    let many = acted.len() > crate::markdown::EVENT_ROWS;
    for a in acted
        .iter()
        .filter(|a| !many || a.dropped > 0)
        .take(crate::markdown::EVENT_ROWS)
    {
        let (p50, max) = spread(&a.to_drop);
        rows.push(vec![
            (a.event + 1).to_string(),
            fmt::secs(a.t_s),
            a.action.clone(),
            count(a.alive),
            count(a.dropped),
            count(a.with_close),
            count(a.without_close),
            p50,
            max,
        ]);
    }
    Some(Grid {
        title: "Each action and the connections open through it".into(),
        note: if many {
            format!(
                "{} actions; those that dropped connections are listed (at most {}).",
                acted.len(),
                crate::markdown::EVENT_ROWS
            )
        } else {
            "Open: connections of every long-lived load open when the action fired; \
             dropped: the drops placed on it, and the seconds from it to them."
                .into()
        },
        columns: vec![
            ">#",
            ">Time (s)",
            "Action",
            ">Open",
            ">Dropped",
            ">With close",
            ">Without",
            ">To drop p50 (s)",
            ">max (s)",
        ],
        rows,
    })
}

/// The proxy's generations, each with when it served, drained and exited (none without).
fn generations(l: &StreamLedger) -> Option<Grid> {
    if l.generations.is_empty() {
        return None;
    }
    let opt = |v: Option<f64>| v.map_or("-".to_string(), fmt::secs);
    let rows: Vec<Vec<String>> = l
        .generations
        .iter()
        .take(crate::markdown::EVENT_ROWS)
        .map(|g| {
            vec![
                g.replica.clone(),
                g.generation.to_string(),
                fmt::secs(g.from_s),
                opt(g.draining_from_s),
                match (g.draining_from_s, g.exited_s) {
                    (Some(_), None) => "still draining".into(),
                    (_, x) => opt(x),
                },
                g.processes_max.to_string(),
                units::fmt_bytes(g.rss_max as f64),
            ]
        })
        .collect();
    Some(Grid {
        title: "The proxy's generations".into(),
        note: format!(
            "Each generation of each replica, from /proc once a second (a process's \
             generation is the reload before its start): when it served, when a reload \
             superseded it, when its last process exited (the earlier of the first \
             sample without them and the reload's own watch of the old processes, which \
             waits for every older generation too), and the most it held. At most {} old generations drained at once, holding up to {}.",
            l.draining_generations_max(),
            units::fmt_bytes(l.draining_rss_max() as f64)
        ),
        columns: vec![
            "Replica",
            ">Generation",
            ">From (s)",
            ">Draining from (s)",
            ">Exited (s)",
            ">Processes max",
            ">RSS max",
        ],
        rows,
    })
}

/// The drops nothing the run recorded explains, each with its evidence (none without).
fn unattributed(l: &StreamLedger) -> Option<Grid> {
    if l.unattributed.is_empty() {
        return None;
    }
    let rows = l
        .unattributed
        .iter()
        .map(|u| {
            vec![
                u.load.clone(),
                format!("{}/{}", u.conn, u.attempt),
                fmt::secs(u.open_s),
                fmt::secs(u.end_s),
                u.end.name().to_string(),
                u.code.map_or("-".into(), |c| c.to_string()),
                u.evidence.clone(),
            ]
        })
        .collect();
    Some(Grid {
        title: "Drops nothing explains".into(),
        note: "Each with what the run knows around it.".into(),
        columns: vec![
            "Load",
            "Conn/attempt",
            ">Opened (s)",
            ">Ended (s)",
            "End",
            ">Code",
            "Evidence",
        ],
        rows,
    })
}

/// Each load's connections: attempts, opens, how they ended.
fn connections(c: &CaseResult) -> Grid {
    let rows = c
        .streams
        .iter()
        .map(|s| {
            let ends: Vec<String> = s
                .ended
                .iter()
                .map(|(k, n)| format!("{} {}", k.name(), count(*n)))
                .collect();
            let mut codes: Vec<String> = s
                .close_codes
                .iter()
                .map(|(k, n)| format!("close {k}: {n}"))
                .collect();
            codes.extend(
                s.grpc_status
                    .iter()
                    .map(|(k, n)| format!("{} {n}", grpc_code_name(*k))),
            );
            codes.extend(
                s.refused_status
                    .iter()
                    .map(|(k, n)| format!("refused {k}: {n}")),
            );
            vec![
                s.name.clone(),
                format!("{} @ {}", words(s.protocol), s.url),
                count(s.connections.into()),
                count(s.attempts),
                count(s.opened),
                count(s.reconnects),
                count(s.open_max),
                count(s.dropped),
                ends.join(", "),
                if codes.is_empty() {
                    "-".into()
                } else {
                    codes.join(", ")
                },
            ]
        })
        .collect();
    Grid {
        title: "Long-lived loads: connections".into(),
        note: "Exact counts: connections started (first connects and reconnects), opened, \
               reconnected, open at most at once, dropped; how every one ended (client: the \
               load's own close at its end), and the close codes, grpc-status and refusals."
            .into(),
        columns: vec![
            "Load",
            "Protocol @ target",
            ">Connections",
            ">Started",
            ">Opened",
            ">Reconnects",
            ">Open max",
            ">Dropped",
            "Ended",
            "Codes",
        ],
        rows,
    }
}

/// Each load's messages and timings, and what the engine spent.
fn messages(c: &CaseResult) -> Grid {
    let rows = c
        .streams
        .iter()
        .map(|s| {
            let m = &s.messages;
            vec![
                s.name.clone(),
                count(m.sent),
                count(m.answered),
                count(m.lost),
                count(m.pushed),
                pct_lat(&s.rtt, 50.0),
                pct_lat(&s.rtt, 99.0),
                pct_lat(&s.gap, 50.0),
                pct_lat(&s.gap, 99.0),
                pct_lat(&s.handshake, 99.0),
                s.cost
                    .bytes_per_connection
                    .map_or("-".into(), |b| units::fmt_bytes(b as f64)),
                s.cost.cpu_per_message_us.map_or("-".into(), units::fmt_us),
            ]
        })
        .collect();
    Grid {
        title: "Long-lived loads: messages and timings".into(),
        note: "Sent (WebSocket messages, gRPC calls), answered (echoes, calls with a status), \
               lost with their connection (a gRPC server stream is one call: cut without a \
               grpc-status, as nginx cuts it, its call is lost, though its pushed messages \
               arrived; ended with one, as HAProxy ends it, the call is answered), pushed by the \
               server (events, stream messages); \
               round trips (gRPC unary: call latency), gaps between the server's messages, the \
               handshake; the load's memory per open connection and CPU per message."
            .into(),
        columns: vec![
            "Load",
            ">Sent",
            ">Answered",
            ">Lost",
            ">Pushed",
            ">Round trip p50",
            ">p99",
            ">Gap p50",
            ">p99",
            ">Handshake p99",
            ">Memory/conn",
            ">CPU/msg",
        ],
        rows,
    }
}

/// Whether the summary's HTTP table reads "no failure" for a case whose long-lived loads lost
/// connections: the sentence that says so.
pub(crate) fn not_only_requests(r: &RunResults) -> Option<String> {
    let dropped: u64 = r
        .cases
        .iter()
        .flat_map(|c| &c.streams)
        .map(|s: &StreamSummary| s.dropped)
        .sum();
    (dropped > 0).then(|| {
        format!(
            "The short requests are not the whole story: long-lived loads dropped {} \
             connection(s) (see Long-lived connections).",
            count(dropped)
        )
    })
}
