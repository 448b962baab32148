//! One load's part of report.md: how it ran, its wrk-style block, its charts, its failures by
//! kind and status, open-loop lateness, and how each action showed up in it.

use super::{chart_line, EVENT_ROWS};
use crate::charts::plan::Chart;
use crate::fmt::{self, code_block, count, lat, Table};
use crate::text::{render as wrk_text, TextOptions};
use model::{Arrivals, CaseResult, ErrorKind, LoadMode, LoadSummary};
use std::fmt::Write;

/// Writes the section of load `li` of case `ci`.
pub fn render(
    out: &mut String,
    ci: usize,
    case: &CaseResult,
    li: usize,
    l: &LoadSummary,
    charts: &[Chart],
) {
    let _ = writeln!(out, "### Load `{}`: {} {}\n", l.name, l.method, l.url);
    let _ = writeln!(out, "{}\n", how_it_ran(l));
    if let Some(d) = case.distributed.iter().find(|d| d.load == l.name) {
        agents(out, d);
    }
    out.push_str(&code_block(
        "text",
        &wrk_text(
            l,
            &TextOptions {
                latency_distribution: true,
                uncorrected: true,
            },
        ),
    ));
    out.push('\n');
    for c in charts.iter().filter(|c| c.case == ci && c.load == Some(li)) {
        out.push_str(&chart_line(c));
        out.push('\n');
    }
    failures(out, l);
    status(out, l);
    if let Some(s) = &l.schedule {
        schedule(out, s);
    }
    disruptions(out, case, l);
}

/// Where a distributed load's numbers came from: its agents, each one's part, clock offset
/// and start skew, and any that was lost.
fn agents(out: &mut String, d: &model::DistributedLoad) {
    let n = d.agents.len();
    let _ = writeln!(
        out,
        "Ran on {n} agent{} ({}), each an exact share started at one instant; the numbers \
         below are the exact merge of their results (`{}/agent-N.json`; `proxybench merge` of \
         them gives this load). Agents keep no per-request records, so this load has \
         no disruption windows. Clock offsets are from the fastest of 16 pings; the start skew \
         is when an agent began minus the instant it was given, on this machine's clock.\n",
        if n == 1 { "" } else { "s" },
        d.place,
        d.files,
    );
    let mut t = Table::new(&[
        "Agent",
        ">Requests",
        ">Errors",
        ">Req/s",
        ">p50",
        ">p99",
        ">Max",
        ">Clock offset",
        ">Start skew",
        "Lost",
    ]);
    for (i, a) in d.agents.iter().enumerate() {
        let unc = d.clock_uncertainty_us.get(i).copied().unwrap_or(0);
        t.row([
            a.agent.clone(),
            count(a.requests),
            count(a.errors),
            format!("{:.1}", a.req_per_sec),
            lat(a.p50_us),
            lat(a.p99_us),
            lat(a.max_us),
            format!("{} µs ± {unc}", a.clock_offset_us),
            format!("{} µs", a.start_skew_us),
            if a.lost {
                "**lost**".into()
            } else {
                String::new()
            },
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
    for l in &d.lost {
        let _ = writeln!(out, "- {}", l.trim());
    }
    if !d.lost.is_empty() {
        out.push('\n');
    }
}

/// One sentence on the load's shape: loop, threads, connections, timing.
fn how_it_ran(l: &LoadSummary) -> String {
    let mode = match &l.mode {
        LoadMode::Closed => {
            "Closed loop (each connection sends its next request when the previous \
                             answer arrives)"
                .to_string()
        }
        LoadMode::Open {
            rate,
            arrivals,
            seed,
        } => {
            let spacing = match arrivals {
                Arrivals::Even => "evenly spaced arrivals".to_string(),
                Arrivals::Poisson => format!("Poisson arrivals (seed {seed})"),
            };
            format!(
                "Open loop at {} req/s with {spacing}; latency is measured from each request's \
                 intended send time",
                fmt::f2(*rate)
            )
        }
    };
    let planned = l
        .planned_s
        .map(|p| format!("{} s planned, ", fmt::secs(p)))
        .unwrap_or_default();
    let retried = if l.retried > 0 {
        format!(
            " {} sent again on a new connection after the server closed the idle keep-alive \
             connection under them (not failures; each counts once, by its second attempt).",
            plural(l.retried, "request")
        )
    } else {
        String::new()
    };
    format!(
        "{mode}. {}, {} ({} opened in all), started at {} s, {planned}{} s elapsed, request \
         timeout {} ms.{retried}",
        plural(l.threads as u64, "thread"),
        plural(l.connections as u64, "connection"),
        count(l.connects),
        fmt::secs(l.start_s),
        fmt::secs(l.elapsed_s),
        l.timeout_ms
    )
}

/// `1 thread`, `2 threads`.
fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{} {what}s", count(n))
    }
}

fn failures(out: &mut String, l: &LoadSummary) {
    let failed = l.failures();
    let attempts = l.attempts();
    let _ = writeln!(
        out,
        "**Failure rate:** {} of {} attempts failed ({}, {}): {} got no HTTP answer and {} got a \
         status outside 2xx/3xx.\n",
        count(failed),
        count(attempts),
        fmt::pct(failed, attempts),
        units::fmt_ppm(failed, attempts),
        count(l.error_total()),
        count(l.non_2xx_3xx())
    );
    if l.error_total() == 0 {
        return;
    }
    let mut t = Table::new(&[
        "Error kind",
        ">Count",
        ">Share of attempts",
        "wrk column",
        "First message",
    ]);
    for k in ErrorKind::ALL {
        let n = l.errors.get(&k).copied().unwrap_or(0);
        if n == 0 {
            continue;
        }
        let bucket = match k.wrk_bucket() {
            model::WrkBucket::Connect => "connect",
            model::WrkBucket::Read => "read",
            model::WrkBucket::Write => "write",
            model::WrkBucket::Timeout => "timeout",
        };
        t.row([
            k.name().to_string(),
            count(n),
            fmt::pct(n, attempts),
            bucket.to_string(),
            l.error_messages
                .get(&k)
                .map_or("-", String::as_str)
                .to_string(),
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
}

fn status(out: &mut String, l: &LoadSummary) {
    if l.status.is_empty() {
        out.push_str("No HTTP responses were received.\n\n");
        return;
    }
    let mut t = Table::new(&["Status", ">Responses", ">Share"]);
    for (s, n) in &l.status {
        t.row([s.to_string(), count(*n), fmt::pct(*n, l.requests)]);
    }
    out.push_str("Responses by status:\n\n");
    out.push_str(&t.render());
    out.push('\n');
}

fn schedule(out: &mut String, s: &model::Schedule) {
    let _ = writeln!(
        out,
        "**Open-loop schedule:** {} requests were due and {} were sent ({} req/s achieved). {} \
         went out more than {} after the intended time ({}); lateness mean {}, p99 {}, max {}.{}\n",
        count(s.intended),
        count(s.sent),
        fmt::f2(s.achieved_rate),
        plural(s.late, "send"),
        lat(s.late_threshold_us),
        fmt::pct(s.late, s.sent),
        units::fmt_us(s.late_mean_us),
        lat(s.late_p99_us),
        lat(s.late_max_us),
        match s.send_window_us {
            0 => String::new(),
            w => format!(" Sends due within {} of each other left together.", lat(w)),
        }
    );
}

fn disruptions(out: &mut String, case: &CaseResult, l: &LoadSummary) {
    let mine: Vec<_> = case
        .disruptions
        .iter()
        .filter(|d| d.load == l.name)
        .collect();
    if mine.is_empty() {
        return;
    }
    out.push_str(
        "Disruption windows: each action's window runs from the action to the next one (or the \
         end of the case); failures are counted in completion order.\n\n",
    );
    let all = mine.len();
    let mine: Vec<_> = if all > EVENT_ROWS {
        let failed: Vec<_> = mine.into_iter().filter(|d| d.failed > 0).collect();
        let _ = writeln!(
            out,
            "{} of {} windows had failures; only those are listed (all are in \
             disruptions.csv).\n",
            count(failed.len() as u64),
            count(all as u64)
        );
        failed.into_iter().take(EVENT_ROWS).collect()
    } else {
        mine
    };
    if mine.is_empty() {
        return;
    }
    let mut t = Table::new(&[
        ">#",
        "Action",
        ">At (s)",
        ">Window (s)",
        ">Attempts",
        ">Failed",
        ">ppm",
        ">First failure (s)",
        ">Last failure (s)",
        ">Longest run",
        "Causes",
    ]);
    for d in mine {
        let action = case
            .events
            .get(d.event)
            .map(|e| e.action.as_str())
            .unwrap_or("?");
        let causes: Vec<String> = d
            .by_cause
            .iter()
            .map(|(k, v)| format!("{k} {}", count(*v)))
            .collect();
        let opt = |v: Option<f64>| v.map(fmt::secs).unwrap_or_else(|| "-".into());
        t.row([
            (d.event + 1).to_string(),
            action.to_string(),
            fmt::secs(d.window_s.0),
            fmt::secs(d.window_s.1 - d.window_s.0),
            count(d.attempts),
            count(d.failed),
            units::fmt_ppm(d.failed, d.attempts),
            opt(d.first_failure_s),
            opt(d.last_failure_s),
            count(d.longest_failure_run),
            if causes.is_empty() {
                "-".to_string()
            } else {
                causes.join(", ")
            },
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
}
