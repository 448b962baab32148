//! The ledger of a case's long-lived connections ([`model::ledger::StreamLedger`]): every
//! connection's life set beside the case's actions, reloads, the proxy's generations and the
//! backends' own record of their connections, so that each drop is placed on what caused it,
//! or listed with the evidence when nothing explains it. It runs for every case with a
//! long-lived load, whatever the scenario's analysis, before the checks that read it.
//!
//! A drop is given, in this order, to:
//! 1. a backend action (`kill_backend`, `drain_backend`, a `scale_backends` that removed
//!    instances) when it came within the action's span (and a second after) and the backends'
//!    counters show their end closing connections then (as many drops as closes);
//! 2. a reload when the connection opened before the reload's new generation took over (its
//!    signal, plus the time until the new generation served and a margin for the old one to stop
//!    accepting) and dropped after the signal and before the old generation's last process
//!    exited, as the reload's own watch of the old processes timed it (or the generation samples:
//!    the first without them). A proxy that reloads inside one process (Caddy) shows no old
//!    processes: its old generation is taken to live to the drain timeout when one is set, and to
//!    the end of the case when not, which the ledger's notes say;
//! 3. the backend itself, when a backend connection closed by the backend (its close frame, its
//!    `grpc-status`) ended within a second before the drop;
//! 4. nothing: listed with what the run knows around it.

use crate::analysis::Lives;
use model::generation::{self, GenerationLife};
use model::ledger::{
    ActionLedger, DropCause, LoadLedger, Spread, StreamLedger, UnattributedDrop, UNATTRIBUTED_ROWS,
};
use model::stream::{ClosedBy, ConnLife};
use model::{CaseResult, Collector, Event, Series};
use scenario::Case;
use std::collections::BTreeMap;

/// After the new generation served, how long an old generation may still accept connections
/// (nginx's master signals the old workers 100 ms after starting the new ones).
const TAKEOVER_MARGIN_S: f64 = 0.25;
/// How long after an old generation's exit a cut may still be read by the client.
const EXIT_MARGIN_S: f64 = 0.5;
/// How long after a backend action's end its closes may still reach the client.
const BACKEND_MARGIN_S: f64 = 1.0;
/// How long before a drop the backend's own close may have come.
const BACKEND_SELF_S: f64 = 1.0;

/// One reload moment of the case: an action that reloaded every replica.
#[derive(Debug)]
struct Reload {
    /// Its event's index.
    event: usize,
    /// The earliest signal of its successful replica reloads.
    t_s: f64,
    /// Until when the old generation could still take new connections.
    takeover_s: f64,
    /// When the last old process had exited (infinite: not seen to exit within the case).
    end_s: f64,
    /// How the end was known.
    end_how: &'static str,
}

/// The backend actions of the case: events that remove or stop backends.
fn backend_action(e: &Event) -> bool {
    matches!(e.action.as_str(), "kill_backend" | "drain_backend")
        || (e.action == "scale_backends" && removed(&e.detail))
}

/// A backend action's span, in seconds of the case, and whether it drains (its backends end
/// their connections with a close frame, a `grpc-status` or the end of the stream).
#[derive(Clone, Copy)]
struct BackendEvent {
    /// The event's index in the case.
    event: usize,
    /// When it started.
    from: f64,
    /// When it ended, with the margin for the backends' closes to arrive.
    to: f64,
    /// True for a drain: only announced drops are its.
    announces: bool,
}

/// Whether a backend action drains its backends rather than killing them (`drain_backend`, or
/// `scale_backends` with `remove = "drain"`, whose detail reads `3 -> 2 (drain: app-2)`).
fn drains(e: &Event) -> bool {
    e.action == "drain_backend" || (e.action == "scale_backends" && e.detail.contains("(drain"))
}

/// Whether a `scale_backends` detail (`3 -> 1 (drain)`, `app2: 3 -> 1 (drain: app2-2)`) removed
/// instances: the numbers either side of its arrow, whatever digits the group's name holds.
fn removed(detail: &str) -> bool {
    let Some((left, right)) = detail.split_once(" -> ") else {
        return false;
    };
    let from = left
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse::<u32>().ok());
    let to = right
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse::<u32>().ok());
    matches!((from, to), (Some(from), Some(to)) if to < from)
}

/// The case's reload moments, each with its old generation's end.
fn reloads(result: &CaseResult, lives: &[GenerationLife], drain_s: Option<f64>) -> Vec<Reload> {
    let in_place = generation::in_place(&result.generations, &result.reloads);
    let mut out = Vec::new();
    for (i, e) in result.events.iter().enumerate() {
        let until = e.t_s + e.duration_ms / 1e3 + 1e-3;
        let recs: Vec<&model::ReloadRecord> = result
            .reloads
            .iter()
            .filter(|r| r.error.is_none() && r.t_s >= e.t_s - 1e-3 && r.t_s <= until)
            .collect();
        if recs.is_empty() {
            continue;
        }
        let t_s = recs.iter().map(|r| r.t_s).fold(f64::INFINITY, f64::min);
        // The new generation served at `served_ms`; a reload that could not watch for it (a
        // user's gateway, reloaded by its own command) is known to be done when its command
        // ended, and until then the old generation may still take new connections.
        let served = recs
            .iter()
            .filter_map(|r| r.served_ms.or(r.command_ms))
            .fold(0.0, f64::max);
        let mut end_s: f64 = t_s;
        let mut end_how = "the reload's watch of its old processes and the generation samples";
        for r in &recs {
            // The generation this reload superseded, as the samples and the reload's watch of
            // the old processes (which also waits for older generations) give its end.
            let sampled = lives
                .iter()
                .find(|l| l.replica == r.replica && l.draining_from_s == Some(r.t_s))
                .and_then(|g| g.exited_s);
            let end = if let Some(x) = sampled {
                x
            } else if let Some(ms) = r.old_workers_exited_ms {
                r.t_s + ms / 1e3
            } else if in_place.contains(&r.replica) {
                end_how = "in place: the drain timeout, or the case's end";
                match drain_s {
                    Some(d) => r.t_s + r.served_ms.unwrap_or(0.0) / 1e3 + d,
                    None => f64::INFINITY,
                }
            } else {
                end_how = "still draining at the case's end";
                f64::INFINITY
            };
            end_s = end_s.max(end);
        }
        out.push(Reload {
            event: i,
            t_s,
            takeover_s: t_s + served / 1e3 + TAKEOVER_MARGIN_S,
            end_s,
            end_how,
        });
    }
    out
}

/// A backend's close, in seconds on the case's clock, and whether an action's attribution or
/// a drop has taken it.
struct BackendClose {
    t_s: f64,
    by: ClosedBy,
    used: bool,
}

/// Every connection the backends saw end, on the case's clock (none without the shared clock).
fn backend_closes(result: &CaseResult) -> Vec<BackendClose> {
    let Some(origin) = result.monotonic_origin_ns else {
        return Vec::new();
    };
    let mut out: Vec<BackendClose> = result
        .backends
        .iter()
        .filter_map(|b| b.streams.as_ref())
        .flat_map(|s| &s.lives)
        .filter(|l| matches!(l.by, ClosedBy::Server | ClosedBy::Dropped))
        .filter_map(|l| {
            let c = l.closed_ns?;
            Some(BackendClose {
                t_s: (c as f64 - origin as f64) / 1e9,
                by: l.by,
                used: false,
            })
        })
        .collect();
    out.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    out
}

/// Seconds from the case origin of a time in µs.
fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

/// The ledger of `result`'s long-lived loads from their lives.
pub fn ledger(case: &Case, result: &CaseResult, lives: &Lives) -> StreamLedger {
    let drain_s = case
        .proxy
        .as_ref()
        .and_then(|p| p.worker_shutdown_timeout)
        .map(|d| d.0.as_secs_f64());
    let gens = generation::lives(&result.generations, &result.reloads);
    let reloads = reloads(result, &gens, drain_s);
    let mut closes = backend_closes(result);
    let backend_events = backend_events(result);
    let aligned = result.monotonic_origin_ns.is_some();
    let action_budget = action_budgets(&backend_events, &mut closes, aligned);
    let mut causes = Causes {
        reloads: &reloads,
        backend_events: &backend_events,
        action_budget,
        closes,
        aligned,
    };
    let mut tally = Tally::new(result, lives);
    for (li, l) in lives_by_end(result, lives) {
        tally.count(li, l, &mut causes);
    }
    let unattributed_total = tally.unattributed_total;
    let mut out = tally.finish();
    if result.gap(Collector::Generations).is_none() {
        out.draining = generation::draining(&result.generations, &result.reloads);
        out.in_place = generation::in_place(&result.generations, &result.reloads);
        out.generations = gens;
    }
    out.notes = notes(result, &reloads, &out, unattributed_total, aligned, drain_s);
    out
}

/// The case's backend actions that succeeded, each with its span (and the margin for its
/// closes to arrive).
fn backend_events(result: &CaseResult) -> Vec<BackendEvent> {
    result
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.error.is_none() && backend_action(e))
        .map(|(i, e)| BackendEvent {
            event: i,
            from: e.t_s,
            to: e.t_s + e.duration_ms / 1e3 + BACKEND_MARGIN_S,
            announces: drains(e),
        })
        .collect()
}

/// The backend's closes within each backend action's span: the drops it can take (any number
/// without the shared clock). The closes counted are marked used.
fn action_budgets(
    backend_events: &[BackendEvent],
    closes: &mut [BackendClose],
    aligned: bool,
) -> BTreeMap<usize, u64> {
    let mut action_budget: BTreeMap<usize, u64> = BTreeMap::new();
    for &BackendEvent {
        event: i, from, to, ..
    } in backend_events
    {
        let n = closes
            .iter_mut()
            .filter(|c| !c.used && c.t_s >= from - 1e-3 && c.t_s <= to)
            .map(|c| c.used = true)
            .count() as u64;
        action_budget.insert(i, if aligned { n } else { u64::MAX });
    }
    action_budget
}

/// Every load's lives with the load's index, in order of their end across loads: the
/// backend's closes are taken first come.
fn lives_by_end<'a>(result: &CaseResult, lives: &'a Lives) -> Vec<(usize, &'a ConnLife)> {
    let mut all: Vec<(usize, &ConnLife)> = Vec::new();
    for (li, st) in result.streams.iter().enumerate() {
        if let Some(l) = lives.get(&st.name) {
            all.extend(l.iter().map(|x| (li, x)));
        }
    }
    all.sort_by_key(|(_, l)| l.end_us);
    all
}

/// What a drop is attributed against: the case's reloads and backend actions, the drops each
/// action can still take, and the backends' closes not yet taken.
struct Causes<'a> {
    reloads: &'a [Reload],
    backend_events: &'a [BackendEvent],
    action_budget: BTreeMap<usize, u64>,
    closes: Vec<BackendClose>,
    aligned: bool,
}

/// The ledger as its lives are counted: a book per load and per action, the times to spread,
/// and the unattributed drops.
struct Tally {
    books: Vec<LoadLedger>,
    actions: Vec<ActionLedger>,
    action_times: BTreeMap<usize, Vec<f64>>,
    reload_times: Vec<Vec<f64>>,
    lifetimes: Vec<Vec<f64>>,
    out: StreamLedger,
    unattributed_total: u64,
}

impl Tally {
    /// Empty books for every load and every action of `result`.
    fn new(result: &CaseResult, lives: &Lives) -> Tally {
        let actions: Vec<ActionLedger> = result
            .events
            .iter()
            .enumerate()
            .map(|(i, e)| ActionLedger {
                event: i,
                t_s: e.t_s,
                action: e.action.clone(),
                detail: e.detail.clone(),
                ..ActionLedger::default()
            })
            .collect();
        let books: Vec<LoadLedger> = result
            .streams
            .iter()
            .map(|st| LoadLedger {
                name: st.name.clone(),
                protocol: Some(st.protocol),
                incomplete: incomplete(result, st, lives),
                ..LoadLedger::default()
            })
            .collect();
        Tally {
            reload_times: vec![Vec::new(); books.len()],
            lifetimes: vec![Vec::new(); books.len()],
            books,
            actions,
            action_times: BTreeMap::new(),
            out: StreamLedger::default(),
            unattributed_total: 0,
        }
    }

    /// Counts one life of load `li`: in its load's book, in the actions it was alive at, and,
    /// when it dropped, on the cause it is given.
    fn count(&mut self, li: usize, l: &ConnLife, causes: &mut Causes<'_>) {
        let b = &mut self.books[li];
        b.lives += 1;
        let Some(open_us) = l.open_us else { return };
        b.opened += 1;
        for a in self.actions.iter_mut() {
            if secs(open_us) <= a.t_s && a.t_s < secs(l.end_us) {
                a.alive += 1;
            }
        }
        if l.end == model::stream::EndKind::Client {
            b.survived += 1;
        }
        if !l.dropped() {
            return;
        }
        let (o, e) = (secs(open_us), secs(l.end_us));
        b.dropped += 1;
        self.lifetimes[li].push(e - o);
        let announced = l.end.announced();
        if announced {
            b.with_close += 1;
        } else {
            b.without_close += 1;
        }
        let (cause, event) = attribute(
            (o, e, announced),
            causes.reloads,
            causes.backend_events,
            &mut causes.action_budget,
            &mut causes.closes,
        );
        match cause {
            DropCause::Reload => {
                b.by_reload += 1;
                let t = causes
                    .reloads
                    .iter()
                    .find(|r| r.event == event.unwrap_or(usize::MAX));
                if let Some(r) = t {
                    self.reload_times[li].push(e - r.t_s);
                }
            }
            DropCause::BackendAction => b.by_backend_action += 1,
            DropCause::Backend => b.by_backend += 1,
            DropCause::Unattributed => {
                b.unattributed += 1;
                self.unattributed_total += 1;
                if self.out.unattributed.len() < UNATTRIBUTED_ROWS {
                    self.out.unattributed.push(UnattributedDrop {
                        load: b.name.clone(),
                        conn: l.conn,
                        attempt: l.attempt,
                        open_s: o,
                        end_s: e,
                        end: l.end,
                        code: l.close_code.or(l.grpc_status),
                        evidence: evidence(o, e, causes.reloads, &causes.closes, causes.aligned),
                    });
                }
            }
        }
        if let Some(ev) = event {
            let a = &mut self.actions[ev];
            a.dropped += 1;
            if announced {
                a.with_close += 1;
            } else {
                a.without_close += 1;
            }
            self.action_times.entry(ev).or_default().push(e - a.t_s);
        }
    }

    /// The ledger's loads and actions with their spreads, and the unattributed drops kept.
    fn finish(self) -> StreamLedger {
        let Tally {
            mut books,
            mut actions,
            action_times,
            mut reload_times,
            mut lifetimes,
            mut out,
            ..
        } = self;
        for (i, b) in books.iter_mut().enumerate() {
            b.reload_to_drop = Spread::of(std::mem::take(&mut reload_times[i]));
            b.lifetime = Spread::of(std::mem::take(&mut lifetimes[i]));
        }
        for (ev, t) in action_times {
            actions[ev].to_drop = Spread::of(t);
        }
        out.loads = books;
        out.actions = actions;
        out
    }
}

/// Why a load's ledger is incomplete: its lives file missing, or lives left out.
fn incomplete(
    result: &CaseResult,
    st: &model::stream::StreamSummary,
    lives: &Lives,
) -> Option<String> {
    if !lives.contains_key(&st.name) {
        return Some(
            result
                .shortfall(Collector::StreamLives)
                .and_then(|s| s.missing.into_iter().find(|m| m.item == st.name))
                .map_or_else(
                    || format!("the lives of '{}' were not read", st.name),
                    |m| format!("the lives of '{}': {}", st.name, m.why),
                ),
        );
    }
    (st.lives_left_out > 0).then(|| {
        format!(
            "'{}' left {} connection lives out past the first {}",
            st.name,
            st.lives_left_out,
            model::stream::StreamSummary::LIVES_MAX
        )
    })
}

/// What dropped a connection that opened at `o` and dropped at `e` (seconds), and the event it
/// is counted against.
fn attribute(
    (o, e, announced): (f64, f64, bool),
    reloads: &[Reload],
    backend_events: &[BackendEvent],
    budget: &mut BTreeMap<usize, u64>,
    closes: &mut [BackendClose],
) -> (DropCause, Option<usize>) {
    for &BackendEvent {
        event: i,
        from,
        to,
        announces,
    } in backend_events
    {
        // A drained backend says goodbye in the protocol: a drop cut without a word in its
        // span is not its doing.
        if announces && !announced {
            continue;
        }
        if e >= from - 1e-3 && e <= to {
            let left = budget.entry(i).or_default();
            if *left > 0 {
                *left -= 1;
                return (DropCause::BackendAction, Some(i));
            }
        }
    }
    // The generation that held it is the one the first reload after its open superseded; a
    // connection opened while that reload took over may be of either. When both could have
    // cut it, it is the one whose moments (its takeover, its old generation's end) the drop is
    // nearest: a proxy that reloads in place cuts at the reload itself, so a connection
    // reopened during one reload and cut at the next is the next one's.
    if let Some(first) = reloads.iter().position(|r| r.takeover_s > o) {
        let also_next = o >= reloads[first].t_s;
        let nearest = |r: &Reload| {
            let to_end = if r.end_s.is_finite() {
                (e - r.end_s).abs()
            } else {
                f64::INFINITY
            };
            (e - r.t_s).abs().min(to_end)
        };
        let cut = reloads[first..]
            .iter()
            .take(if also_next { 2 } else { 1 })
            .filter(|r| e >= r.t_s && e <= r.end_s + EXIT_MARGIN_S)
            .min_by(|a, b| nearest(a).total_cmp(&nearest(b)));
        if let Some(r) = cut {
            return (DropCause::Reload, Some(r.event));
        }
    }
    if let Some(c) = closes.iter_mut().find(|c| {
        !c.used && c.by == ClosedBy::Server && c.t_s >= e - BACKEND_SELF_S && c.t_s <= e + 0.05
    }) {
        c.used = true;
        return (DropCause::Backend, None);
    }
    (DropCause::Unattributed, None)
}

/// What the run knows around an unattributed drop, in a sentence.
fn evidence(o: f64, e: f64, reloads: &[Reload], closes: &[BackendClose], aligned: bool) -> String {
    let mut parts = Vec::new();
    match reloads.iter().find(|r| r.takeover_s > o) {
        None => parts.push("no reload came after it opened".to_string()),
        Some(r) if e < r.t_s => parts.push(format!(
            "it dropped before the next reload ({:.2} s), while its generation served",
            r.t_s
        )),
        Some(r) => parts.push(format!(
            "the reload at {:.2} s superseded its generation, whose last process exited at \
             {:.2} s ({}), before the drop",
            r.t_s, r.end_s, r.end_how
        )),
    }
    if aligned {
        let near = closes
            .iter()
            .filter(|c| (c.t_s - e).abs() <= BACKEND_SELF_S)
            .count();
        parts.push(format!(
            "the backends saw {near} connection(s) end within 1 s of it"
        ));
    } else {
        parts.push("the backends' connection times are not on this clock".into());
    }
    parts.join("; ")
}

/// The ledger's notes: how reloads' old generations were timed, what evidence was missing.
fn notes(
    result: &CaseResult,
    reloads: &[Reload],
    l: &StreamLedger,
    unattributed: u64,
    aligned: bool,
    drain_s: Option<f64>,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(why) = result.gap(Collector::Generations) {
        if !reloads.is_empty() {
            out.push(format!(
                "The proxy's processes by generation were not sampled ({why}): a drop is placed \
                 on a reload by time alone (after the reload, before its old generation was \
                 seen to end), and no check on it passes."
            ));
        }
    }
    if !l.in_place.is_empty() {
        out.push(format!(
            "{} reload(s) inside one process: its old generation has no process of its own, \
             so a drop is placed on a reload by time, from the reload to {}.",
            l.in_place.join(", "),
            match drain_s {
                Some(d) => format!("the drain timeout ({d} s) after it"),
                None => "the case's end (no drain timeout is set)".to_string(),
            }
        ));
    }
    if !aligned && !result.streams.is_empty() {
        out.push(
            "The backends ran on another machine's clock: their own closes cannot be set beside \
             the drops, so a drop is placed on a backend action by time alone."
                .into(),
        );
    }
    if unattributed > l.unattributed.len() as u64 {
        out.push(format!(
            "{unattributed} drops were unattributed; the first {} are listed.",
            l.unattributed.len()
        ));
    }
    out
}

/// The case's series: connections open per long-lived load, and, when the proxy's generations
/// were sampled, the old generations draining and their memory.
pub fn series(result: &CaseResult) -> Vec<Series> {
    let mut out = Vec::new();
    for st in &result.streams {
        out.push(Series {
            name: format!("{} connections open", st.name),
            unit: "connections".into(),
            points: st
                .timeline
                .iter()
                .map(|r| (f64::from(r.t) + 1.0, r.open as f64))
                .collect(),
            chart: Some("long-lived connections open".into()),
            ..Default::default()
        });
    }
    if let Some(l) = &result.stream_ledger {
        if !l.draining.is_empty() && l.in_place.is_empty() && !result.reloads.is_empty() {
            out.push(Series {
                name: "old generations draining".into(),
                unit: "generations".into(),
                points: l
                    .draining
                    .iter()
                    .map(|d| (d.t_s, f64::from(d.generations)))
                    .collect(),
                chart: None,
                ..Default::default()
            });
            out.push(Series {
                name: "old generations' memory".into(),
                unit: "MiB".into(),
                points: l
                    .draining
                    .iter()
                    .map(|d| (d.t_s, d.rss_bytes as f64 / (1024.0 * 1024.0)))
                    .collect(),
                chart: None,
                ..Default::default()
            });
        }
    }
    out
}

/// A protocol in words.
fn words(p: model::stream::StreamProtocol) -> &'static str {
    match p {
        model::stream::StreamProtocol::WebSocket => "WebSocket",
        model::stream::StreamProtocol::GrpcUnary => "gRPC unary",
        model::stream::StreamProtocol::GrpcStream => "gRPC stream",
        model::stream::StreamProtocol::Sse => "SSE",
    }
}

/// The case's answer in one sentence per long-lived load: how long a connection survived and
/// what dropped it; then what the proxy paid (old generations, their memory).
pub fn findings(result: &CaseResult) -> Vec<String> {
    let Some(l) = &result.stream_ledger else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (b, st) in l.loads.iter().zip(&result.streams) {
        let secs = |v: Option<f64>| v.map_or("-".to_string(), |s| format!("{s:.1} s"));
        let mut s = format!(
            "{} ({}): {} of {} connections opened dropped ({} with a close frame, {} cut \
             without one)",
            b.name,
            words(st.protocol),
            b.dropped,
            b.opened,
            b.with_close,
            b.without_close
        );
        if b.dropped > 0 {
            s.push_str(&format!(
                "; a dropped connection had lived {} (median, longest {})",
                secs(b.lifetime.p50_s),
                secs(b.lifetime.max_s)
            ));
            s.push_str(&format!(
                "; {} by reloads{}, {} by the backends, {} unattributed",
                b.by_reload,
                if b.by_reload > 0 {
                    format!(
                        " ({} after the reload, median; longest {})",
                        secs(b.reload_to_drop.p50_s),
                        secs(b.reload_to_drop.max_s)
                    )
                } else {
                    String::new()
                },
                b.by_backend + b.by_backend_action,
                b.unattributed
            ));
        }
        s.push_str(&format!("; {} lasted to the load's end.", b.survived));
        if let Some(why) = &b.incomplete {
            s.push_str(&format!(" Drawn in part: {why}."));
        }
        out.push(s);
    }
    if !result.reloads.is_empty() {
        if !l.in_place.is_empty() {
            out.push(format!(
                "What the proxy paid for them is not measurable in processes: {} reload(s) \
                 inside one process.",
                l.in_place.join(", ")
            ));
        } else if !l.draining.is_empty() {
            out.push(format!(
                "The proxy kept up to {} old generation(s) draining at once ({} processes at \
                 most), holding up to {} of memory (RSS, shared pages counted in each process).",
                l.draining_generations_max(),
                l.draining.iter().map(|d| d.processes).max().unwrap_or(0),
                units::fmt_bytes(l.draining_rss_max() as f64)
            ));
        }
    }
    out.extend(l.notes.iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::generation::{GenerationSample, ProcGen};
    use model::stream::{EndKind, StreamProtocol, StreamSummary};
    use model::ReloadRecord;

    fn scenario_case() -> Case {
        let src = scenario::layers::Source {
            file: "t.toml".into(),
            text: r#"name = "t"
[[backends]]
name = "app"
[proxy]
drain_timeout = "3s"
[[proxy.listeners]]
name = "web"
[[proxy.upstreams]]
name = "app"
backends = "app"
[[proxy.routes]]
path = "/"
upstream = "app"
websocket = true
[[loads]]
name = "ws"
url = "ws://localhost/"
duration = "20s"
"#
            .into(),
        };
        scenario::Scenario::parse(&src, false)
            .unwrap()
            .cases
            .remove(0)
    }

    fn summary(name: &str) -> StreamSummary {
        serde_json::from_value(serde_json::json!({
            "schema": model::SCHEMA_VERSION, "name": name, "url": "ws://x/", "protocol": "ws",
            "threads": 1, "connections": 4, "start_s": 0.0, "elapsed_s": 20.0, "ramp_s": 0.0,
            "rate": 1.0, "size": 64, "timeout_ms": 2000, "reconnect": "backoff",
            "attempts": 0, "opened": 0, "reconnects": 0, "dropped": 0, "open_max": 0,
            "open_at_end": 0, "ended": {}, "messages": {"sent":0,"answered":0,"pushed":0,
            "lost":0,"unanswered_at_end":0,"pings_sent":0,"pongs":0,"server_pings":0,
            "bytes_sent":0,"bytes_received":0},
            "rtt": {"count":0,"mean_us":0,"stdev_us":0,"min_us":0,"max_us":0,
            "within_stdev_pct":0,"percentiles":[],"hdr":""},
            "gap": {"count":0,"mean_us":0,"stdev_us":0,"min_us":0,"max_us":0,
            "within_stdev_pct":0,"percentiles":[],"hdr":""},
            "handshake": {"count":0,"mean_us":0,"stdev_us":0,"min_us":0,"max_us":0,
            "within_stdev_pct":0,"percentiles":[],"hdr":""},
            "cost": {"rss_before_kib":0,"rss_open_kib":0,"open_at_sample":0,"cpu_s":0.0},
            "timeline": []
        }))
        .unwrap()
    }

    fn life(conn: u32, open_s: f64, end_s: f64, end: EndKind) -> ConnLife {
        ConnLife {
            conn,
            start_us: (open_s * 1e6) as u64,
            open_us: Some((open_s * 1e6) as u64),
            end_us: (end_s * 1e6) as u64,
            end,
            close_code: (end == EndKind::CloseFrame).then_some(1001),
            ..ConnLife::default()
        }
    }

    fn event(t_s: f64, action: &str, detail: &str) -> Event {
        Event {
            t_s,
            action: action.into(),
            detail: detail.into(),
            duration_ms: 20.0,
            error: None,
            limit: false,
        }
    }

    /// A reload at 4 s whose old worker exits 3 s later, and a backend killed at 12 s.
    fn case(lives: Vec<ConnLife>) -> (CaseResult, Lives) {
        let mut r = CaseResult {
            name: "main".into(),
            elapsed_s: 20.0,
            streams: vec![summary("ws")],
            monotonic_origin_ns: Some(1_000_000_000),
            events: vec![
                event(4.0, "reload", ""),
                event(12.0, "kill_backend", "app-0"),
            ],
            reloads: vec![ReloadRecord {
                replica: "nginx-0".into(),
                generation: 2,
                t_s: 4.001,
                served_ms: Some(10.0),
                command_ms: None,
                old_workers_exited_ms: Some(3000.0),
                validate_ms: 1.0,
                error: None,
            }],
            generations: vec![GenerationSample {
                t_s: 1.0,
                replica: "nginx-0".into(),
                procs: vec![ProcGen {
                    pid: 10,
                    started_s: -0.2,
                    rss_bytes: 1 << 20,
                    shutting_down: false,
                }],
            }],
            ..Default::default()
        };
        // The killed backend closed one connection at 12.01 s.
        r.backends = vec![model::BackendCounters {
            name: "app-0".into(),
            streams: Some(model::stream::BackendStreams {
                lives: vec![model::stream::BackendLife {
                    protocol: StreamProtocol::WebSocket,
                    opened_ns: 1_000_000_000,
                    closed_ns: Some(1_000_000_000 + 12_010_000_000),
                    by: ClosedBy::Dropped,
                    messages_in: 0,
                    messages_out: 0,
                }],
                ..Default::default()
            }),
            ..Default::default()
        }];
        let mut l = Lives::new();
        l.insert("ws".into(), lives);
        (r, l)
    }

    #[test]
    fn each_drop_is_placed_on_its_cause() {
        let (r, l) = case(vec![
            // Opened before the reload, cut when its old worker exited.
            life(0, 0.1, 7.0, EndKind::Fin),
            // Opened after the reload: cut by the backend kill.
            life(1, 5.0, 12.02, EndKind::Fin),
            // Opened after the reload, dropped with nothing around: unattributed.
            life(2, 5.0, 9.0, EndKind::Reset),
            // Lived to the end.
            life(3, 5.0, 20.0, EndKind::Client),
        ]);
        let g = ledger(&scenario_case(), &r, &l);
        let b = &g.loads[0];
        assert_eq!(
            (
                b.opened,
                b.dropped,
                b.by_reload,
                b.by_backend_action,
                b.unattributed,
                b.survived
            ),
            (4, 3, 1, 1, 1, 1)
        );
        assert_eq!((b.with_close, b.without_close), (0, 3));
        assert!(
            (b.reload_to_drop.max_s.unwrap() - 2.999).abs() < 1e-6,
            "{b:?}"
        );
        assert_eq!(
            g.actions[0].alive, 1,
            "one connection was open at the reload"
        );
        assert_eq!((g.actions[0].dropped, g.actions[1].dropped), (1, 1));
        assert_eq!(g.unattributed.len(), 1);
        assert!(
            g.unattributed[0]
                .evidence
                .contains("dropped before the next reload")
                || g.unattributed[0]
                    .evidence
                    .contains("no reload came after it opened"),
            "{:?}",
            g.unattributed[0]
        );
    }

    /// A second drop in the kill's span beyond what the backends closed is not the kill's.
    #[test]
    fn a_backend_action_takes_no_more_drops_than_the_backends_closed() {
        let (r, l) = case(vec![
            life(0, 5.0, 12.02, EndKind::Fin),
            life(1, 5.0, 12.03, EndKind::Fin),
        ]);
        let g = ledger(&scenario_case(), &r, &l);
        assert_eq!(
            (g.loads[0].by_backend_action, g.loads[0].unattributed),
            (1, 1)
        );
    }

    /// A drop after the old generation had exited is not the reload's.
    #[test]
    fn a_drop_after_the_old_generation_exited_is_not_the_reloads() {
        let (r, l) = case(vec![life(0, 0.1, 8.0, EndKind::CloseFrame)]);
        let g = ledger(&scenario_case(), &r, &l);
        assert_eq!((g.loads[0].by_reload, g.loads[0].unattributed), (0, 1));
        assert_eq!(g.loads[0].with_close, 1);
        assert!(
            g.unattributed[0].evidence.contains("exited at 7.00 s"),
            "{:?}",
            g.unattributed
        );
    }

    /// Reloads at 4 s and 8 s whose old generations each end 10 s later: a connection opened
    /// while the first took over may be of either generation, and is placed on the reload
    /// whose moment its drop is nearest.
    #[test]
    fn a_drop_two_reloads_could_explain_is_the_nearest_ones() {
        let (mut r, _) = case(Vec::new());
        r.events = vec![event(4.0, "reload", ""), event(8.0, "reload", "")];
        let rec = r.reloads[0].clone();
        r.reloads = [4.001, 8.001]
            .into_iter()
            .enumerate()
            .map(|(i, t_s)| ReloadRecord {
                t_s,
                generation: 2 + i as u64,
                old_workers_exited_ms: Some(10_000.0),
                ..rec.clone()
            })
            .collect();
        let l = |lives| {
            let mut l = Lives::new();
            l.insert("ws".to_string(), lives);
            l
        };
        // Cut at the second reload itself (a proxy that reloads in place), 0.04 s after it.
        let g = ledger(
            &scenario_case(),
            &r,
            &l(vec![life(0, 4.05, 8.041, EndKind::CloseFrame)]),
        );
        assert_eq!(g.loads[0].by_reload, 1);
        assert_eq!((g.actions[0].dropped, g.actions[1].dropped), (0, 1));
        assert!(g.loads[0].reload_to_drop.max_s.unwrap() < 0.05, "{g:?}");
        // Cut when the first reload's old generation ended, 10 s after it.
        let g = ledger(
            &scenario_case(),
            &r,
            &l(vec![life(0, 4.05, 14.01, EndKind::Fin)]),
        );
        assert_eq!((g.actions[0].dropped, g.actions[1].dropped), (1, 0));
        assert!(
            (g.loads[0].reload_to_drop.max_s.unwrap() - 10.009).abs() < 1e-6,
            "{g:?}"
        );
    }

    /// A user's gateway reloaded by its own command (320 ms), which cannot say when its new
    /// generation served: until the command ended, the old one may still take connections, and
    /// what it takes is cut when it ends.
    #[test]
    fn a_gateway_reloaded_by_its_command_took_connections_until_the_command_ended() {
        let (mut r, _) = case(Vec::new());
        r.reloads[0].served_ms = None;
        r.reloads[0].command_ms = Some(320.0);
        let mut l = Lives::new();
        // Opened 0.3 s into the command, cut with the old generation 3 s after the reload.
        l.insert("ws".to_string(), vec![life(0, 4.3, 7.0, EndKind::Fin)]);
        let g = ledger(&scenario_case(), &r, &l);
        assert_eq!(
            (g.loads[0].by_reload, g.loads[0].unattributed),
            (1, 0),
            "{g:?}"
        );
        // Opened after the command and its margin: not the old generation's.
        let mut l = Lives::new();
        l.insert("ws".to_string(), vec![life(0, 4.7, 7.0, EndKind::Fin)]);
        let g = ledger(&scenario_case(), &r, &l);
        assert_eq!(
            (g.loads[0].by_reload, g.loads[0].unattributed),
            (0, 1),
            "{g:?}"
        );
    }

    #[test]
    fn the_scale_detail_says_whether_backends_left() {
        assert!(removed("3 -> 1 (drain)"));
        assert!(!removed("1 -> 3"));
        // A group whose name holds digits.
        assert!(removed("app2: 3 -> 2 (drain: app2-2); generation 4"));
        assert!(!removed("app2: 2 -> 3; generation 5"));
        assert!(!removed("no arrow 3 2"));
        assert!(drains(&event(
            1.0,
            "scale_backends",
            "app: 3 -> 2 (drain: app-2)"
        )));
        assert!(drains(&event(1.0, "scale_backends", "app: 3 -> 2 (drain)")));
        assert!(!drains(&event(1.0, "scale_backends", "app: 3 -> 2 (kill)")));
        assert!(!drains(&event(1.0, "kill_backend", "app-0")));
    }

    /// A drained backend ends its connections in the protocol: in its span a drop with a close
    /// frame is the drain's, and one cut without a word (an old proxy generation's drain
    /// timeout firing then) is not, even with the backends' closes on another clock.
    #[test]
    fn a_drain_takes_only_the_drops_it_announced() {
        let (mut r, l) = case(vec![
            life(0, 5.0, 12.02, EndKind::CloseFrame),
            life(1, 5.0, 12.03, EndKind::Fin),
        ]);
        r.events[1] = event(12.0, "scale_backends", "app: 3 -> 2 (drain: app-2)");
        r.monotonic_origin_ns = None;
        let g = ledger(&scenario_case(), &r, &l);
        let b = &g.loads[0];
        assert_eq!((b.by_backend_action, b.unattributed), (1, 1), "{b:?}");
        assert_eq!((b.with_close, b.without_close), (1, 1));
    }
}
