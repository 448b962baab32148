//! The per-case tables: what each action cost each load and when, the three-way count of
//! requests, and (for reloads under keep-alive load) losses per connection kind.

use super::ledger::{Ledger, LoadBooks, LogBooks, Owned};
use super::plan::{Plan, What};
use super::text::{fill, text};
use super::OLD_WORKERS_QUIT_MS;
use model::{Cell, Measured, Table};
use scenario::{RemoveMode, StopSpec};

fn cols(c: &[&str]) -> Vec<String> {
    c.iter().map(|s| s.to_string()).collect()
}

/// What each action cost: failures per load, when they came after the action, and why.
pub fn actions(case: &str, plan: &Plan, loads: &[LoadBooks], migrate_req: &str) -> Table {
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
        let mut placed = true;
        for l in loads {
            let o: Measured<Owned> = l
                .timed
                .as_ref()
                .map(|t| t.by_action.get(&f.index).copied().unwrap_or_default());
            row.push(Cell::measured(&o, |o| Cell::Int(o.failed as i64)));
            match o {
                Measured::Complete(o) if o.failed > 0 => {
                    first = first.min(o.first_ms);
                    last = last.max(o.last_ms);
                }
                Measured::Complete(_) => {}
                Measured::Partial(..) | Measured::Absent(_) => placed = false,
            }
        }
        if !placed {
            row.push(Cell::Missing("not sampled".into()));
            row.push(Cell::Missing("not sampled".into()));
        } else if first.is_finite() {
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
        notes: explain(plan, migrate_req),
    }
}

/// One paragraph per kind of action the case has: the mechanism behind its cost.
fn explain(plan: &Plan, migrate_req: &str) -> Vec<String> {
    let mut out = Vec::new();
    if plan.has(|w| w == What::ReplicasUp) {
        out.push(text("explain_up").into());
    }
    if plan.has(|w| w == What::ReplicasDown(StopSpec::Graceful)) {
        out.push(fill(
            "explain_graceful",
            &[("tcp_migrate_req", &migrate_req)],
        ));
    }
    if plan.has(|w| matches!(w, What::ReplicasDown(StopSpec::Kill | StopSpec::Fast))) {
        out.push(text("explain_kill").into());
    }
    if plan.has(|w| w.reloads()) {
        out.push(fill(
            "explain_reload",
            &[("quit_ms", &Cell::num(OLD_WORKERS_QUIT_MS, 0))],
        ));
    }
    if plan.has(|w| w == What::BackendsDown(RemoveMode::Drain)) {
        out.push(text("explain_drain").into());
    }
    if plan.has(|w| w == What::BackendsDown(RemoveMode::Kill)) {
        out.push(text("explain_kill_backends").into());
    }
    out
}

/// Requests counted by the clients, the proxy and the backends; the proxy's and the backends'
/// counts only where their collectors gathered them.
pub fn ledger(case: &str, l: &Ledger) -> Table {
    let row = |what: &str, n: Cell, meaning: &str| vec![Cell::text(what), n, Cell::text(meaning)];
    let log = |f: &dyn Fn(&LogBooks) -> i64| Cell::measured(&l.log, |b| Cell::Int(f(b)));
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
                "refused, reset or closed before an answer; the proxy never logged them",
            ),
            row(
                "clients: timed out",
                Cell::Int(l.client_timeouts as i64),
                "the client gave up; the proxy logs 499 or the answer it sent too late",
            ),
            row(
                "proxy: access-log lines",
                log(&|b| b.proxy_lines as i64),
                "one per request the proxy read",
            ),
            row(
                "proxy: of which 499",
                log(&|b| b.proxy_499 as i64),
                "the client closed first",
            ),
            row(
                "proxy answers - client answers",
                Cell::measured(&l.log, |b| {
                    Cell::Signed(b.proxy_answered() as i64 - l.client_responses as i64)
                }),
                "0 when every answer the proxy logged reached a client",
            ),
            row(
                "backends: responses",
                Cell::measured(&l.backend_responses, |n| Cell::Int(*n as i64)),
                "what the backends completed",
            ),
            row(
                "proxy: backend answers logged",
                log(&|b| b.upstream_answers as i64),
                "upstream attempts a backend answered",
            ),
            row(
                "lost inside the proxy",
                Cell::measured(&l.lost_in_proxy(), |n| Cell::Int(*n)),
                "a backend answered, the proxy died before it logged: only a kill does this",
            ),
            row(
                "proxy: passed to a second backend",
                log(&|b| b.retried as i64),
                "lines with more than one upstream attempt",
            ),
            row(
                "proxy: error/warn lines",
                log(&|b| b.error_warn as i64),
                "error log at warn and above",
            ),
        ],
        notes: vec![text("ledger_note").into()],
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
                    Cell::measured(&l.sighup_gaps(plan, |w| w.reload_only()), |g| {
                        g.earliest.map_or_else(Cell::dash, |g| Cell::num(g, 1))
                    }),
                ]
            })
            .collect(),
        notes: vec![text("reloads_1147").into(), text("reloads_idle").into()],
    }
}
