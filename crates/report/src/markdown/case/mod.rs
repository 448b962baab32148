//! One case's section of report.md: its loads, the actions fired, reloads, logs, backends,
//! process and status-page samples, and the scenario's own tables and series; the cluster's
//! part (cluster.rs) and the probed actions (probes.rs) have rooms of their own.

mod cluster;
mod probes;

use super::{chart_line, load, logs, EVENT_ROWS};
use crate::charts::plan::{Chart, Kind};
use crate::fmt::{self, count, Table};
use cluster::{cluster, readiness};
use model::ReloadStats;
use model::{CaseResult, Collector, RunResults};
use probes::probes;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Per-reload rows are listed up to this many reloads; beyond, the summary and chart carry them.
const RELOAD_ROWS: usize = 20;

pub fn render(out: &mut String, r: &RunResults, ci: usize, c: &CaseResult, charts: &[Chart]) {
    if r.cases.len() == 1 {
        let _ = writeln!(out, "## Case: {}\n", c.name);
    } else {
        let _ = writeln!(out, "## Case {}: {}\n", ci + 1, c.name);
    }
    if !c.description.is_empty() {
        let _ = writeln!(out, "{}\n", c.description.trim());
    }
    let _ = writeln!(
        out,
        "Ran from {} s to {} s after the run started ({} s).\n",
        fmt::secs(c.start_s),
        fmt::secs(c.start_s + c.elapsed_s),
        fmt::secs(c.elapsed_s)
    );
    if !c.findings.is_empty() {
        for f in &c.findings {
            let _ = writeln!(out, "- {}", f.trim());
        }
        out.push('\n');
    }
    for (li, l) in c.loads.iter().enumerate() {
        load::render(out, ci, c, li, l, charts);
    }
    let grids = crate::streams::case_grids(c);
    if !grids.is_empty() {
        out.push_str("### Long-lived connections\n\n");
        for g in &grids {
            super::grid(out, g, "####");
        }
        if let Some(l) = &c.stream_ledger {
            for n in &l.notes {
                let _ = writeln!(out, "- {n}");
            }
            if !l.notes.is_empty() {
                out.push('\n');
            }
        }
    }
    events(out, c);
    let proxy = fmt::proxy_name(&r.env);
    reloads(out, c, ci, charts);
    logs::render(out, proxy, &c.logs, c.shortfall(Collector::Logs).as_ref());
    backends(out, c);
    procs(out, c, ci, charts);
    stub(out, proxy, c, ci, charts);
    readiness(out, c);
    probes(out, c);
    cluster(out, c, ci, charts);
    tables(out, c);
    series(out, c, ci, charts);
}

fn case_charts(out: &mut String, charts: &[Chart], ci: usize, want: impl Fn(Kind) -> bool) {
    for ch in charts
        .iter()
        .filter(|ch| ch.case == ci && ch.load.is_none() && want(ch.kind))
    {
        out.push_str(&chart_line(ch));
        out.push('\n');
    }
}

fn events(out: &mut String, c: &CaseResult) {
    out.push_str("### Actions\n\n");
    if c.events.is_empty() {
        out.push_str("No actions were fired in this case.\n\n");
        return;
    }
    if c.events.len() > EVENT_ROWS {
        return events_summary(out, c);
    }
    let mut t = Table::new(&[
        ">#",
        ">Time (s)",
        "Action",
        "Detail",
        ">Duration (ms)",
        "Error",
    ]);
    for (i, e) in c.events.iter().enumerate() {
        t.row([
            (i + 1).to_string(),
            fmt::secs(e.t_s),
            e.action.clone(),
            e.detail.clone(),
            fmt::f2(e.duration_ms),
            e.error.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
}

/// Many actions (a scale test reloads a thousand times): one row per kind, then the failed ones.
fn events_summary(out: &mut String, c: &CaseResult) {
    struct Agg {
        n: u64,
        first: f64,
        last: f64,
        dur: f64,
        errors: u64,
    }
    let mut by: BTreeMap<&str, Agg> = BTreeMap::new();
    for e in &c.events {
        let a = by.entry(&e.action).or_insert(Agg {
            n: 0,
            first: e.t_s,
            last: e.t_s,
            dur: 0.0,
            errors: 0,
        });
        a.n += 1;
        a.first = a.first.min(e.t_s);
        a.last = a.last.max(e.t_s);
        a.dur += e.duration_ms;
        a.errors += e.error.is_some() as u64;
    }
    let _ = writeln!(
        out,
        "{} actions, summarised per kind; each one is in events.csv.\n",
        count(c.events.len() as u64)
    );
    let mut t = Table::new(&[
        "Action",
        ">Count",
        ">First (s)",
        ">Last (s)",
        ">Mean duration (ms)",
        ">Errors",
    ]);
    for (action, a) in &by {
        t.row([
            action.to_string(),
            count(a.n),
            fmt::secs(a.first),
            fmt::secs(a.last),
            fmt::f2(a.dur / a.n as f64),
            count(a.errors),
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
    let failed: Vec<_> = c
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.error.is_some())
        .collect();
    if failed.is_empty() {
        return;
    }
    out.push_str("Actions that failed:\n\n");
    let mut t = Table::new(&[">#", ">Time (s)", "Action", "Detail", "Error"]);
    for (i, e) in failed.iter().take(EVENT_ROWS) {
        t.row([
            (i + 1).to_string(),
            fmt::secs(e.t_s),
            e.action.clone(),
            e.detail.clone(),
            e.error.clone().unwrap_or_default(),
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
    if failed.len() > EVENT_ROWS {
        let _ = writeln!(
            out,
            "{} more failed actions are in events.csv.\n",
            count((failed.len() - EVENT_ROWS) as u64)
        );
    }
}

fn reloads(out: &mut String, c: &CaseResult, ci: usize, charts: &[Chart]) {
    if c.reloads.is_empty() {
        return;
    }
    out.push_str("### Reloads\n\n");
    let s = ReloadStats::of(&c.reloads);
    let opt_ms = |v: Option<f64>| v.map(fmt::f2).unwrap_or_else(|| "n/a".into());
    let mut t = Table::new(&[
        ">Total",
        ">Total Errors",
        ">Ave Time (ms)",
        "><= 500ms",
        "><= 1000ms",
    ]);
    t.row([
        count(s.total),
        count(s.errors),
        opt_ms(s.served_avg_ms),
        fmt::pct(s.within_500, s.total),
        fmt::pct(s.within_1000, s.total),
    ]);
    out.push_str(&t.render());
    out.push('\n');
    let _ = writeln!(
        out,
        "A reload's time runs from the reload signal until the first request served under the new \
         configuration; {} of {} reloads had one (slowest {} ms). Shares are of all reloads, so a \
         reload that never served counts against them.\n",
        count(s.served),
        count(s.total),
        opt_ms(s.served_max_ms)
    );
    if s.old_exited > 0 {
        let _ = writeln!(
            out,
            "Old workers exited {} ms after the signal on average (slowest {} ms; measured for {} \
             of {} reloads).\n",
            opt_ms(s.old_exit_avg_ms),
            opt_ms(s.old_exit_max_ms),
            count(s.old_exited),
            count(s.total)
        );
    } else {
        out.push_str("Old-worker exit times were not measured.\n\n");
    }
    if c.reloads.len() <= RELOAD_ROWS {
        let mut t = Table::new(&[
            "Replica",
            ">Generation",
            ">At (s)",
            ">Config check (ms)",
            ">Served (ms)",
            ">Old workers exited (ms)",
            "Error",
        ]);
        for x in &c.reloads {
            t.row([
                x.replica.clone(),
                x.generation.to_string(),
                fmt::secs(x.t_s),
                fmt::f2(x.validate_ms),
                opt_ms(x.served_ms),
                opt_ms(x.old_workers_exited_ms),
                x.error.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
        out.push_str(&t.render());
        out.push('\n');
    } else {
        let _ = writeln!(
            out,
            "Each of the {} reloads is listed in reloads.csv.\n",
            count(c.reloads.len() as u64)
        );
    }
    case_charts(out, charts, ci, |k| k == Kind::Reloads);
}

fn backends(out: &mut String, c: &CaseResult) {
    let missing = c
        .cluster
        .as_ref()
        .map_or(&[][..], |k| k.counters_missing.as_slice());
    if c.backends.is_empty() && missing.is_empty() {
        return;
    }
    out.push_str("### Backends\n\n");
    // Counters the run could not read at all: said once, never a table of what they held.
    if let (Some(why), true) = (c.gap(Collector::BackendCounters), missing.is_empty()) {
        let _ = writeln!(out, "Backend counters not sampled: {why}.\n");
        return;
    }
    if !missing.is_empty() {
        out.push_str(
            "Backends whose final counters could not be read (left out below, never counted as zero):\n\n",
        );
        for m in missing {
            let _ = writeln!(out, "- {}", m.trim());
        }
        out.push('\n');
    }
    if c.backends.is_empty() {
        return;
    }
    let total: u64 = c.backends.iter().map(|b| b.requests).sum();
    // Requests that came over HTTP/2 (h2c), in their own column once any did.
    let h2 = |b: &model::BackendCounters| b.h2.as_ref().map_or(0, |h| h.requests);
    let any_h2 = c.backends.iter().any(|b| b.h2.is_some());
    let mut columns = vec![
        "Backend",
        "Address",
        "State",
        ">Requests",
        ">Share",
        ">In flight",
        ">Connections",
        "Statuses",
    ];
    if any_h2 {
        columns.push(">Over h2c");
    }
    let mut t = Table::new(&columns);
    for b in &c.backends {
        let statuses: Vec<String> = b
            .by_status
            .iter()
            .map(|(s, n)| format!("{s}: {}", count(*n)))
            .collect();
        let mut row = vec![
            b.name.clone(),
            b.addr.clone(),
            b.state.clone(),
            count(b.requests),
            fmt::pct(b.requests, total),
            count(b.in_flight),
            count(b.connections),
            statuses.join(", "),
        ];
        if any_h2 {
            row.push(count(h2(b)));
        }
        t.row(row);
    }
    let mut all = vec![
        "**all**".to_string(),
        String::new(),
        String::new(),
        count(total),
        fmt::pct(total, total),
        String::new(),
        count(c.backends.iter().map(|b| b.connections).sum()),
        String::new(),
    ];
    if any_h2 {
        all.push(count(c.backends.iter().map(h2).sum()));
    }
    t.row(all);
    out.push_str(&t.render());
    out.push('\n');
}

fn procs(out: &mut String, c: &CaseResult, ci: usize, charts: &[Chart]) {
    if c.proc_samples.is_empty() {
        return;
    }
    out.push_str("### CPU and memory\n\n");
    #[derive(Default)]
    struct Agg {
        n: u64,
        cpu_sum: f64,
        cpu_max: f64,
        rss_max: u64,
        procs_last: u32,
    }
    let mut by: BTreeMap<&str, Agg> = BTreeMap::new();
    for s in &c.proc_samples {
        let a = by.entry(&s.group).or_default();
        a.n += 1;
        a.cpu_sum += s.cpu_pct;
        a.cpu_max = a.cpu_max.max(s.cpu_pct);
        a.rss_max = a.rss_max.max(s.rss_bytes);
        a.procs_last = s.procs;
    }
    let mut t = Table::new(&[
        "Process group",
        ">Samples",
        ">CPU mean (% of a core)",
        ">CPU max",
        ">RSS max (MiB)",
        ">Processes (last)",
    ]);
    for (g, a) in &by {
        t.row([
            g.to_string(),
            count(a.n),
            fmt::f2(a.cpu_sum / a.n as f64),
            fmt::f2(a.cpu_max),
            if a.rss_max == 0 {
                "shared".to_string()
            } else {
                fmt::f2(a.rss_max as f64 / (1024.0 * 1024.0))
            },
            a.procs_last.to_string(),
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
    if by.values().any(|a| a.rss_max == 0) {
        out.push_str(
            "Groups marked *shared* are threads of the proxybench process (processes = threads); \
             their memory is counted in its row.\n\n",
        );
    }
    case_charts(out, charts, ci, |k| matches!(k, Kind::Cpu | Kind::Memory));
}

fn stub(out: &mut String, proxy: &str, c: &CaseResult, ci: usize, charts: &[Chart]) {
    if c.gap(Collector::StatusPages).is_some() {
        return;
    }
    let _ = writeln!(out, "### {proxy} connections (status page)\n");
    let mut by: BTreeMap<&str, Vec<&model::StubSample>> = BTreeMap::new();
    for s in &c.stub_samples {
        by.entry(&s.replica).or_default().push(s);
    }
    let mut t = Table::new(&[
        "Replica",
        ">Samples",
        ">Active max",
        ">Waiting max",
        ">Requests (last)",
        ">Accepted (last)",
        ">Dropped (accepted - handled)",
    ]);
    for (rep, v) in &by {
        let last = v.last().expect("non-empty group");
        t.row([
            rep.to_string(),
            count(v.len() as u64),
            count(v.iter().map(|s| s.active).max().unwrap_or(0)),
            count(v.iter().map(|s| s.waiting).max().unwrap_or(0)),
            count(last.requests),
            count(last.accepts),
            count(last.accepts.saturating_sub(last.handled)),
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
    case_charts(out, charts, ci, |k| k == Kind::Stub);
}

fn tables(out: &mut String, c: &CaseResult) {
    for tb in &c.tables {
        let _ = writeln!(out, "### {}\n", tb.title.trim());
        let mut t = Table::verbatim(&tb.columns);
        for row in &tb.rows {
            t.row(row.iter().map(|c| c.to_string()));
        }
        out.push_str(&t.render());
        out.push('\n');
        for n in &tb.notes {
            let _ = writeln!(out, "{}\n", n.trim());
        }
    }
}

fn series(out: &mut String, c: &CaseResult, ci: usize, charts: &[Chart]) {
    let mut done = vec![false; c.series.len()];
    for (si, s) in c.series.iter().enumerate() {
        if done[si] {
            continue;
        }
        // The series drawn on this one's chart: itself, and later ones with the same chart title.
        let group: Vec<usize> = match s.chart.as_deref() {
            Some(k) => (si..c.series.len())
                .filter(|&j| c.series[j].chart.as_deref() == Some(k))
                .collect(),
            None => vec![si],
        };
        let _ = writeln!(
            out,
            "### {}\n",
            s.chart.as_deref().unwrap_or(&s.name).trim()
        );
        for &j in &group {
            done[j] = true;
            series_line(out, &c.series[j], group.len() > 1);
        }
        out.push('\n');
        case_charts(out, charts, ci, |k| k == Kind::Series(si));
    }
}

/// One series' point count and range; `named` prefixes the series name (for shared charts).
fn series_line(out: &mut String, s: &model::Series, named: bool) {
    let lead = if named {
        format!("- {}: ", s.name.trim())
    } else {
        String::new()
    };
    let vals: Vec<f64> = s
        .points
        .iter()
        .map(|p| p.1)
        .filter(|v| v.is_finite())
        .collect();
    if vals.is_empty() {
        let _ = writeln!(out, "{lead}no points were recorded.");
        return;
    }
    let min = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let max = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let unit = if s.unit.is_empty() {
        String::new()
    } else {
        format!(" {}", s.unit)
    };
    let _ = writeln!(
        out,
        "{lead}{} points; lowest {}{unit}, highest {}{unit}, last {}{unit}.",
        count(vals.len() as u64),
        fmt::f2(min),
        fmt::f2(max),
        fmt::f2(*vals.last().expect("non-empty"))
    );
}
