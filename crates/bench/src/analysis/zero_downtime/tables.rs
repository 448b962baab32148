//! The per-case tables: what each action cost each load and when, the three-way count of
//! requests, and (for reloads under keep-alive load) losses per connection kind.

use super::ledger::{Ledger, LoadBooks};
use super::plan::{Plan, What};
use super::OLD_WORKERS_QUIT_MS;
use crate::scenario::{RemoveMode, StopSpec};
use model::{Cell, Table};

fn cols(c: &[&str]) -> Vec<String> {
    c.iter().map(|s| s.to_string()).collect()
}

/// What each action cost: failures per load, when they came after the action, and why.
pub fn actions(case: &str, plan: &Plan, loads: &[LoadBooks]) -> Table {
    let mut columns = cols(&["#", "Action", "At (s)", "Took (ms)"]);
    for l in loads {
        columns.push(format!("{} lost", l.name));
    }
    columns.push("Failures from (ms after)".into());
    columns.push("to (ms after)".into());
    let mut rows = Vec::new();
    for f in &plan.fired {
        let mut row = vec![
            Cell::Int(f.index as i64 + 1),
            Cell::text(f.label()),
            Cell::num(f.t(), 2),
            Cell::num(f.event.duration_ms, 0),
        ];
        let (mut first, mut last) = (f64::INFINITY, f64::NEG_INFINITY);
        for l in loads {
            let o = l.by_action.get(&f.index).copied().unwrap_or_default();
            row.push(Cell::Int(o.failed as i64));
            if o.failed > 0 {
                first = first.min(o.first_ms);
                last = last.max(o.last_ms);
            }
        }
        if first.is_finite() {
            row.push(Cell::num(first, 1));
            row.push(Cell::num(last, 1));
        } else {
            row.push(Cell::dash());
            row.push(Cell::dash());
        }
        rows.push(row);
    }
    Table {
        title: format!("{case}: what each action cost"),
        columns,
        rows,
        notes: explain(plan),
    }
}

/// One paragraph per kind of action the case has: the mechanism behind its cost.
fn explain(plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    if plan.has(|w| w == What::ReplicasUp) {
        out.push(
            "Scaling up: a new replica binds the shared port with SO_REUSEPORT, and the kernel \
             starts hashing new connections across one more listening socket. Established \
             connections are not touched and nothing is closed, so no request can fail; the new \
             replica gets traffic only as clients open new connections."
                .into(),
        );
    }
    if plan.has(|w| w == What::ReplicasDown(StopSpec::Graceful)) {
        out.push(format!(
            "Scaling down gracefully (SIGQUIT): the replica's worker closes its listening socket, \
             finishes every request in flight, and closes each keep-alive connection after its \
             last answer. A closed-loop client sends its next request the moment an answer \
             arrives; when that request crosses the server's close, the connection is reset with \
             no byte of answer (read_idle_closed: a reused connection closed by the server). \
             Connections the kernel had already queued on the closing socket but nginx had not \
             yet accepted are reset too (the socket's accept queue dies with it; the kernel moves \
             them to a sibling socket only with net.ipv4.tcp_migrate_req=1, {} here).",
            super::tcp_migrate_req()
        ));
    }
    if plan.has(|w| matches!(w, What::ReplicasDown(StopSpec::Kill | StopSpec::Fast))) {
        out.push(
            "Scaling down with SIGKILL (or SIGTERM): the workers die at once and the kernel \
             resets every connection they held. A request in flight loses its answer: on a \
             reused keep-alive connection the reset arrives before any byte of answer, which a \
             client cannot tell from an idle close (read_idle_closed); on a fresh connection or \
             mid-answer it is read_reset. The backend had often answered already; those answers \
             died inside nginx (see the three-way count)."
                .into(),
        );
    }
    if plan.has(|w| w.reloads()) {
        out.push(format!(
            "Every backend change and reload is a SIGHUP: the master starts new workers, waits \
             about {OLD_WORKERS_QUIT_MS:.0} ms, then tells the old ones to quit. The old workers \
             keep their keep-alive connections until each answers its request in flight, then \
             close it, so each connection can lose at most one request per reload, and only when \
             the client reuses it before it sees the close."
        ));
    }
    if plan.has(|w| w == What::BackendsDown(RemoveMode::Drain)) {
        out.push(
            "Removing backends by draining: nginx is reloaded without them first (old workers \
             finish what they sent there), then the backend finishes its own requests and stops. \
             nginx never meets a dead backend."
                .into(),
        );
    }
    if plan.has(|w| w == What::BackendsDown(RemoveMode::Kill)) {
        out.push(
            "Removing backends by killing: the backend dies first and nginx learns of it from \
             failed attempts (connection refused or reset) until the reload drops it. With \
             nginx's default proxy_next_upstream error, such a GET goes to the next backend, and \
             the first failure marks the dead one unavailable for fail_timeout (max_fails=1)."
                .into(),
        );
    }
    out
}

/// Requests counted by the clients, nginx and the backends.
pub fn ledger(case: &str, l: &Ledger) -> Table {
    let row = |what: &str, n: Cell, meaning: &str| vec![Cell::text(what), n, Cell::text(meaning)];
    Table {
        title: format!("{case}: every request counted three ways"),
        columns: cols(&["Count", "Requests", "What it is"]),
        rows: vec![
            row(
                "clients: answers received",
                Cell::Int(l.client_responses as i64),
                "responses of any status",
            ),
            row(
                "clients: never answered",
                Cell::Int(l.client_broken as i64),
                "refused, reset or closed before an answer; nginx never logged them",
            ),
            row(
                "clients: timed out",
                Cell::Int(l.client_timeouts as i64),
                "the client gave up; nginx logs 499 or the answer it sent too late",
            ),
            row(
                "nginx: access-log lines",
                Cell::Int(l.nginx_lines as i64),
                "one per request nginx read",
            ),
            row(
                "nginx: of which 499",
                Cell::Int(l.nginx_499 as i64),
                "the client closed first",
            ),
            row(
                "nginx answers - client answers",
                Cell::Signed(l.nginx_answered() as i64 - l.client_responses as i64),
                "0 when every answer nginx logged reached a client",
            ),
            row(
                "backends: responses",
                Cell::Int(l.backend_responses as i64),
                "what the backends completed",
            ),
            row(
                "nginx: backend answers logged",
                Cell::Int(l.upstream_answers as i64),
                "upstream attempts a backend answered",
            ),
            row(
                "lost inside nginx",
                Cell::Int(l.lost_in_nginx()),
                "a backend answered, nginx died before it logged: only a kill does this",
            ),
            row(
                "nginx: passed to a second backend",
                Cell::Int(l.retried as i64),
                "lines with more than one upstream attempt",
            ),
            row(
                "nginx: error/warn lines",
                Cell::Int(l.error_warn as i64),
                "error log at warn and above",
            ),
        ],
        notes: vec![
            "The counts must agree: nginx logs a request when it finishes it, so an answer a \
             client received has exactly one access-log line, and a request that died before \
             nginx read it (a reset connection) has none. Only timeouts and killed workers can \
             make the two sides differ."
                .into(),
        ],
    }
}

/// Reloads under keep-alive load: losses per load against the per-connection bound.
pub fn reloads(case: &str, plan: &Plan, loads: &[LoadBooks]) -> Table {
    let hups = plan.sighups() as u64;
    Table {
        title: format!("{case}: reloads and keep-alive connections"),
        columns: cols(&[
            "Load",
            "Loop",
            "Connections",
            "Reloads",
            "read_idle_closed",
            "Other failures",
            "Bound (conn x reloads)",
            "Reconnects",
            "Earliest loss after SIGHUP (ms)",
        ]),
        rows: loads
            .iter()
            .map(|l| {
                let idle = l.cause("read_idle_closed");
                vec![
                    Cell::text(&l.name),
                    Cell::text(if l.open {
                        "open (mostly idle)"
                    } else {
                        "closed (always busy)"
                    }),
                    Cell::Int(l.connections as i64),
                    Cell::Int(hups as i64),
                    Cell::Int(idle as i64),
                    Cell::Int((l.failures - idle) as i64),
                    Cell::Int((l.connections * hups) as i64),
                    Cell::Int(l.connects.saturating_sub(l.connections) as i64),
                    l.sighup_gaps(plan, |w| w.reload_only())
                        .earliest
                        .map_or_else(Cell::dash, |g| Cell::num(g, 1)),
                ]
            })
            .collect(),
        notes: vec![
            "NGF issue 1147 saw wrk report read errors whenever nginx reloaded. The mechanism: an \
             old worker that is quitting answers the request in flight on each keep-alive \
             connection (still saying keep-alive), then closes the connection. A closed-loop \
             client such as wrk writes its next request at once; if it goes out before the \
             client has read the close, the server's kernel answers it with a reset and the \
             request is lost with no byte of answer: read_idle_closed here, a read error in wrk."
                .into(),
            "A connection that is idle when the old worker quits is closed at once (nginx closes \
             idle keep-alive connections on shutdown). A client that watches its idle \
             connections, as proxybench does, sees the close and reconnects before its next \
             request: the Reconnects column counts connections opened again (after such a close, \
             or after nginx's 1000-request keep-alive limit). Only a request sent in the \
             instant between the close and the client reading it can be lost."
                .into(),
        ],
    }
}
