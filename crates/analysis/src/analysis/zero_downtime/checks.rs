//! The mechanism checks of one case. Each states what the mechanism makes certain (a count that
//! must be zero, a bound no run can exceed, an ordering in time), never a tuned number.

use super::ledger::{Ledger, LoadBooks};
use super::plan::{Plan, What};
use super::text::{fill, text};
use super::{OLD_WORKERS_QUIT_MS, QUIT_MARGIN_MS};
use crate::analysis::common::{all_measured, check, measured_check, unmeasured};
use model::{Cell, CheckResult, ReloadRecord};
use scenario::{RemoveMode, StopSpec};

/// What every check of a case reads.
struct Input<'a> {
    case: &'a str,
    plan: &'a Plan,
    ledger: &'a Ledger,
    loads: &'a [LoadBooks],
    /// Replicas stopped by SIGKILL or SIGTERM.
    killed: u32,
}

/// Every check that applies to the case's actions. A check that counts what a collector gathered
/// (the proxy's log lines, the backends' counters, the loads' per-request records) fails as "not
/// measurable" when that collector gathered nothing (`common::measured_check`); the
/// reload-timing check, which models nginx's reload sequence, is made only for that kind (the
/// analysis says so for others).
pub fn all(
    case: &str,
    plan: &Plan,
    ledger: &Ledger,
    loads: &[LoadBooks],
    reload_records: &[ReloadRecord],
    model_applies: bool,
) -> Vec<CheckResult> {
    let i = Input {
        case,
        plan,
        ledger,
        loads,
        killed: plan.stopped(StopSpec::Kill) + plan.stopped(StopSpec::Fast),
    };
    let mut out = vec![conservation(&i)];
    out.extend(in_spans(&i));
    out.extend(replicas(&i));
    out.extend(served(case, reload_records));
    out.extend(reloads(&i, model_applies));
    out.extend(idle_and_busy(&i, model_applies));
    out.extend(backends(&i, model_applies));
    out.extend(h2_refused_only(&i));
    out
}

/// HTTP/2 loads: a reload or a graceful stop sends GOAWAY, and the streams above its
/// last-stream-id are refused (never processed, safe to retry). What must hold is that nothing
/// else failed, and that no GOAWAY refused more streams than a connection may have open; that
/// no request was lost or answered twice is the conservation check, over every load.
fn h2_refused_only(i: &Input<'_>) -> Vec<CheckResult> {
    let mut out = Vec::new();
    if i.plan.fired.is_empty() {
        return out;
    }
    for l in i.loads {
        let Some(h) = &l.h2 else { continue };
        let other = l.failures - h.refused.min(l.failures);
        let bound = (h.goaways_graceful + h.goaways_error) * u64::from(h.streams_per_connection);
        out.push(check(
            i.case,
            fill("check_h2_refused", &[("load", &l.name)]),
            fill("check_h2_refused_expected", &[("bound", &bound)]),
            fill(
                "check_h2_refused_actual",
                &[("refused", &h.refused), ("other", &other)],
            ),
            other == 0 && h.refused <= bound,
        ));
    }
    out
}

/// Conservation: one access-log line per answer the proxy sent, one response per answer
/// received.
fn conservation(i: &Input<'_>) -> CheckResult {
    let (ledger, killed) = (i.ledger, i.killed);
    let connections: u64 = i.loads.iter().map(|l| l.connections).sum();
    let tolerance = ledger.client_timeouts + connections * killed as u64;
    measured_check(
        i.case,
        text("check_conservation"),
        fill(
            "check_conservation_expected",
            &[
                ("responses", &ledger.client_responses),
                ("tolerance", &tolerance),
                (
                    "killed",
                    &if killed > 0 {
                        text("check_conservation_killed")
                    } else {
                        ""
                    },
                ),
            ],
        ),
        ledger.log.clone(),
        |log| {
            let diff = log.proxy_answered() as i64 - ledger.client_responses as i64;
            (
                format!("{} ({})", log.proxy_answered(), Cell::Signed(diff)),
                diff.unsigned_abs() <= tolerance,
            )
        },
    )
}

/// Every failure falls inside the span of an action: placed by the loads' per-request records,
/// so not measurable for a load that kept none.
fn in_spans(i: &Input<'_>) -> Option<CheckResult> {
    if i.plan.fired.is_empty() {
        return None;
    }
    // HTTP/2 loads are held to `h2_refused_only` instead: a refused stream is safe to retry
    // whenever the GOAWAY reaches the client.
    let h1 = || i.loads.iter().filter(|l| l.h2.is_none());
    let total: u64 = h1().map(|l| l.failures - l.timeouts).sum();
    Some(measured_check(
        i.case,
        text("check_in_spans"),
        "0 outside",
        all_measured(h1().map(|l| l.timed.as_ref().map(|t| t.outside))),
        |outside| {
            let outside: u64 = outside.iter().sum();
            (
                fill(
                    "check_in_spans_actual",
                    &[("outside", &outside), ("total", &total)],
                ),
                outside == 0,
            )
        },
    ))
}

/// Replicas joining, stopping or dying: what each may cost.
fn replicas(i: &Input<'_>) -> Vec<CheckResult> {
    let (case, plan, ledger, loads, killed) = (i.case, i.plan, i.ledger, i.loads, i.killed);
    let mut out = Vec::new();
    let only_up = plan.has(|w| w == What::ReplicasUp)
        && !plan.has(|w| !matches!(w, What::ReplicasUp | What::Other));
    if only_up {
        let broken: u64 = loads.iter().map(|l| l.broken()).sum();
        out.push(check(
            case,
            text("check_join"),
            text("check_join_expected"),
            broken,
            broken == 0,
        ));
    }
    let kills = killed > 0 || plan.has(|w| w == What::BackendsDown(RemoveMode::Kill));
    if !kills {
        let answers = ledger.log.as_ref().map(|l| l.upstream_answers);
        out.push(measured_check(
            case,
            text("check_nothing_dies"),
            Cell::measured(&answers, |a| Cell::Int(*a as i64)).to_string(),
            ledger.lost_in_proxy(),
            |lost| {
                // `lost_in_proxy` is complete only when the backends' counters are.
                let backends = Cell::measured(&ledger.backend_responses, |n| Cell::Int(*n as i64));
                (backends.to_string(), lost == 0)
            },
        ));
    }
    if killed > 0 {
        out.push(measured_check(
            case,
            text("check_killed_answers"),
            fill(
                "check_killed_answers_expected",
                &[("broken", &ledger.client_broken)],
            ),
            ledger.lost_in_proxy(),
            |lost| {
                let lost = lost.max(0) as u64;
                (lost.to_string(), lost <= ledger.client_broken)
            },
        ));
    }
    let stopped = plan.stopped(StopSpec::Graceful) + killed;
    if stopped > 0 {
        for l in loads.iter().filter(|l| l.h2.is_none()) {
            let bound = 2 * l.connections * stopped as u64;
            out.push(check(
                case,
                fill(
                    "check_stop_cost",
                    &[("load", &l.name), ("stopped", &stopped)],
                ),
                format!("<= {bound}"),
                l.broken(),
                l.broken() <= bound,
            ));
        }
    }
    out
}

/// Every reload of the case served its new generation: a reload that failed, or never served,
/// left the replica on the old config, whatever the loads saw. A kind whose reloads report no
/// time at which the new generation served (an external proxy's reload command) cannot show it.
fn served(case: &str, reloads: &[ReloadRecord]) -> Option<CheckResult> {
    if reloads.is_empty() {
        return None;
    }
    let n = reloads.len();
    let ok = reloads
        .iter()
        .filter(|r| r.error.is_none() && r.served_ms.is_some())
        .count();
    let failed: Vec<&str> = reloads.iter().filter_map(|r| r.error.as_deref()).collect();
    let expected = fill("check_reloads_served_expected", &[("n", &n)]);
    // A reload that succeeded without a time to serve (an external target's command exited)
    // shows nothing of whether the new generation served: the check is not measurable on it,
    // whether it is every reload or one of several.
    let untimed = n - ok - failed.len();
    if untimed > 0 {
        return Some(check(
            case,
            text("check_reloads_served"),
            expected,
            format!(
                "not measurable: {untimed} of {n} reloads report no time at which the new \
                 generation served"
            ),
            false,
        ));
    }
    Some(check(
        case,
        text("check_reloads_served"),
        expected,
        fill(
            "check_reloads_served_actual",
            &[
                ("served", &ok),
                ("n", &n),
                (
                    "failed",
                    &failed.first().map_or(String::new(), |e| format!(" ({e})")),
                ),
            ],
        ),
        ok == n,
    ))
}

/// A load whose records time each loss by its send: a closed-loop HTTP/1.1 one.
fn timing_eligible(l: &LoadBooks) -> bool {
    !l.open && l.h2.is_none()
}

/// Whether a case's loads can time a loss against its SIGHUP: at least one closed-loop HTTP/1.1
/// load. Without one the reload-timing check is not made, and the analysis says why.
pub(super) fn reload_timing_measurable(loads: &[LoadBooks]) -> bool {
    loads.iter().any(timing_eligible)
}

/// Reloads alone: at most one request per connection each, lost when the old workers quit (the
/// timing of that quit is nginx's, checked only when `model_applies`). Both are placed by the
/// loads' per-request records: not measurable for a load that kept none.
fn reloads(i: &Input<'_>, model_applies: bool) -> Vec<CheckResult> {
    let (case, plan, loads) = (i.case, i.plan, i.loads);
    let mut out = Vec::new();
    let hups = plan.sighups() as u64;
    if hups == 0 || !plan.has(|w| w.reload_only()) {
        return out;
    }
    for l in loads.iter().filter(|l| l.h2.is_none()) {
        let bound = l.connections * hups;
        out.push(measured_check(
            case,
            fill("check_reload_cost", &[("load", &l.name), ("hups", &hups)]),
            format!("<= {bound}"),
            l.owned_by(plan, |w| w.reload_only()),
            |lost| (lost.to_string(), lost <= bound),
        ));
    }
    if !model_applies {
        return out;
    }
    // Timed by the send, which only closed-loop records carry exactly. Without such a load the
    // check is not made (the analysis's finding says so, as it does for another proxy kind),
    // never "no request lost" read off no load; the reload-cost check above counts the losses.
    if !reload_timing_measurable(loads) {
        return out;
    }
    let eligible: Vec<&LoadBooks> = loads.iter().filter(|l| timing_eligible(l)).collect();
    let gaps = all_measured(
        eligible
            .iter()
            .map(|l| l.sighup_gaps(plan, |w| w.reload_only())),
    );
    let expected = fill(
        "check_reload_timing_expected",
        &[("ms", &Cell::num(OLD_WORKERS_QUIT_MS - QUIT_MARGIN_MS, 0))],
    );
    match gaps.complete() {
        Err(a) => out.push(unmeasured(case, text("check_reload_timing"), expected, &a)),
        Ok(gaps) => {
            let early: u64 = gaps.iter().map(|g| g.early).sum();
            let first = gaps
                .iter()
                .filter_map(|g| g.earliest)
                .fold(None, |a: Option<f64>, g| Some(a.map_or(g, |x| x.min(g))));
            // The records were kept: with no loss after any SIGHUP none was early either, and
            // the check says so rather than going missing (the cost check holds the count).
            let actual = match first {
                Some(first) => fill(
                    "check_reload_timing_actual",
                    &[("first", &Cell::num(first, 1)), ("early", &early)],
                ),
                None => text("check_reload_timing_none").to_string(),
            };
            out.push(check(
                case,
                text("check_reload_timing"),
                expected,
                actual,
                early == 0,
            ));
        }
    }
    out
}

/// Reloads under busy and idle keep-alive loads: the busy ones lose requests (nginx's behaviour,
/// NGF issue 1147: expected only when `model_applies`; another proxy losing none is no failure),
/// the idle ones no more per connection.
fn idle_and_busy(i: &Input<'_>, model_applies: bool) -> Vec<CheckResult> {
    let (case, plan, loads) = (i.case, i.plan, i.loads);
    let mut out = Vec::new();
    if !plan.has(|w| w == What::Reload) || !loads.iter().any(|l| l.open) {
        return out;
    }
    let hups = plan.sighups() as u64;
    let busy: Vec<&LoadBooks> = loads.iter().filter(|l| !l.open).collect();
    let idle: Vec<&LoadBooks> = loads.iter().filter(|l| l.open).collect();
    let rate = |ls: &[&LoadBooks]| {
        let lost: u64 = ls.iter().map(|l| l.broken()).sum();
        let chances: u64 = ls.iter().map(|l| l.connections * hups).sum();
        (lost, lost as f64 / chances.max(1) as f64)
    };
    if busy.is_empty() {
        return out;
    }
    let lost: u64 = busy.iter().map(|l| l.cause("read_idle_closed")).sum();
    if model_applies {
        out.push(check(
            case,
            text("check_busy_lose"),
            ">= 1",
            lost,
            lost >= 1,
        ));
    }
    let (bl, br) = rate(&busy);
    let (il, ir) = rate(&idle);
    out.push(check(
        case,
        text("check_idle_quiet"),
        fill(
            "check_idle_quiet_expected",
            &[("rate", &Cell::num(br, 4)), ("lost", &bl)],
        ),
        fill(
            "check_idle_quiet_actual",
            &[("rate", &Cell::num(ir, 4)), ("lost", &il)],
        ),
        ir <= br,
    ));
    out
}

/// Backends drained (never met) or killed (met, and passed on). That nginx meets a killed
/// backend shows in its error log (`connect() failed`), so those two checks read the proxy's
/// logs; another proxy may retry without a line, so for it only the outcome is checked: no 5xx
/// reached a client.
fn backends(i: &Input<'_>, model_applies: bool) -> Vec<CheckResult> {
    let (case, plan, ledger) = (i.case, i.plan, i.ledger);
    let mut out = Vec::new();
    let five: u64 = i.loads.iter().map(|l| l.five_xx()).sum();
    let lines = |n: u64| fill("lines_5xx", &[("lines", &n), ("five", &five)]);
    let error_warn = || ledger.log.as_ref().map(|l| l.error_warn);
    if plan.has(|w| w == What::BackendsDown(RemoveMode::Drain)) {
        out.push(measured_check(
            case,
            text("check_drained"),
            text("check_drained_expected"),
            error_warn(),
            |n| (lines(n), n == 0 && five == 0),
        ));
    }
    if plan.has(|w| w == What::BackendsDown(RemoveMode::Kill)) {
        out.push(if model_applies {
            measured_check(
                case,
                text("check_killed_backends"),
                text("check_killed_backends_expected"),
                error_warn(),
                |n| (lines(n), n >= 1 && five == 0),
            )
        } else {
            check(
                case,
                text("check_killed_backends_passed_on"),
                "0 5xx",
                format!("{five} 5xx"),
                five == 0,
            )
        });
    }
    out
}
