//! One case's section of report.md: its loads, the actions fired, reloads, logs, backends,
//! process and status-page samples, and the scenario's own tables and series.

use super::{chart_line, load, logs, EVENT_ROWS};
use crate::charts::plan::{Chart, Kind};
use crate::fmt::{self, count, Table};
use model::ReloadStats;
use model::{CaseResult, Collector, RunResults};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Per-reload rows are listed up to this many reloads; beyond, the summary and chart carry them.
const RELOAD_ROWS: usize = 20;

/// Writes case `ci`'s section.
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

/// Readiness probes per replica: how many failed, how often a replica flipped from ready to not
/// ready (a flap), and the slowest answer.
fn readiness(out: &mut String, c: &CaseResult) {
    if c.gap(Collector::Readiness).is_some() {
        return;
    }
    out.push_str(
        "### Replica readiness

",
    );
    out.push_str(
        "Each replica's admin endpoint was probed once a second with a 1 s timeout, as a \
         Kubernetes readiness probe would be. A flap is a ready replica turning not ready.\n\n",
    );
    let mut by: BTreeMap<&str, Vec<&model::ReadinessSample>> = BTreeMap::new();
    for s in &c.readiness {
        by.entry(&s.replica).or_default().push(s);
    }
    let mut t = Table::new(&[
        "Replica",
        ">Probes",
        ">Failed",
        ">Flaps",
        ">Slowest answer (ms)",
    ]);
    for (rep, v) in &by {
        let failed = v.iter().filter(|s| !s.ok).count() as u64;
        let flaps = v.windows(2).filter(|w| w[0].ok && !w[1].ok).count() as u64;
        // Answered probes only: a failed one has no answer time (its count is beside it).
        let slowest = v
            .iter()
            .filter_map(|s| s.answered_ms())
            .fold(None, |a: Option<f64>, ms| Some(a.map_or(ms, |a| a.max(ms))));
        t.row([
            rep.to_string(),
            count(v.len() as u64),
            count(failed),
            count(flaps),
            slowest.map_or_else(|| "none answered".to_string(), fmt::f2),
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
}

/// Pod timeline rows listed one by one up to this many; beyond, the first and last are shown.
const POD_ROWS: usize = 80;

/// What the cluster showed (Kubernetes): the pods-Ready chart, every pod change, restarts,
/// Warning events, metrics and scrapes, and each collector's reason for having no data, said as
/// it was recorded (an absent collector is never shown as zeros).
fn cluster(out: &mut String, c: &CaseResult, ci: usize, charts: &[Chart]) {
    let Some(k) = &c.cluster else {
        return;
    };
    out.push_str(
        "### Cluster

",
    );
    let or = |s: &str, what: &str| {
        if s.is_empty() {
            format!("{what} not recorded")
        } else {
            format!("`{s}`")
        }
    };
    let _ = writeln!(
        out,
        "Namespace {}, context {}, API server {}.\n",
        or(&k.namespace, "namespace"),
        or(&k.context, "context"),
        or(&k.server_version, "version")
    );
    if let (Some(g), Some(p)) = (k.proxy_grace_s, k.proxy_pre_stop_s) {
        let _ = writeln!(
            out,
            "A proxy pod that is scaled away or deleted gracefully sleeps {p} s in its preStop \
             hook (still serving), then gets the image's stop signal (nginx: SIGQUIT, finish \
             in-flight requests); the kubelet kills it {g} s after the deletion.\n"
        );
    }
    case_charts(out, charts, ci, |kind| kind == Kind::Pods);
    if !k.absent.is_empty() {
        out.push_str("Data a collector could not gather (nothing below stands in for it):\n\n");
        for a in &k.absent {
            let _ = writeln!(out, "- {}", a.trim());
        }
        out.push('\n');
    }
    // Each list below only when its collector gathered it: an absent one is in the list above,
    // never an empty table or a "none".
    if c.gap(Collector::PodWatch).is_none() {
        pods(out, k);
    }
    if c.gap(Collector::Restarts).is_none() {
        restarts(out, k);
    }
    if c.gap(Collector::Events).is_none() {
        warnings(out, k);
    }
    if c.gap(Collector::MetricsApi).is_none() {
        metrics(out, k);
    }
    if c.gap(Collector::Scrape).is_none() {
        scrapes(out, k);
    }
    if c.gap(Collector::LogLevels).is_none() {
        log_levels(out, c, k);
    }
}

/// The watched pods' logs counted by level, and their coverage when a log was not read whole.
fn log_levels(out: &mut String, c: &CaseResult, k: &model::ClusterRecord) {
    out.push_str("#### Watched pods' log levels\n\n");
    let mut t = Table::new(&[
        "Pod",
        "Container",
        ">Lines",
        ">With a level",
        "By level",
        ">Errors",
        "First errors",
    ]);
    for l in &k.log_levels {
        t.row([
            l.pod.clone(),
            l.container.clone(),
            count(l.lines),
            count(l.leveled),
            if l.levels.is_empty() {
                "-".into()
            } else {
                l.levels
                    .iter()
                    .map(|(k, n)| format!("{k}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            count(l.errors),
            if l.first_errors.is_empty() {
                "-".into()
            } else {
                fmt::cell(&l.first_errors.join("; "))
            },
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
    // Counts from logs not read whole, or with lines whose level cannot be read, are not the
    // logs' counts: said once, with what is missing (`cluster.log_errors` is not measurable).
    if let Some(s) = c.shortfall(Collector::LogLevels) {
        let _ = writeln!(
            out,
            "Partial: the levels cover {} whole ({}); the counts above are of what was read, \
             and checks on them are not measurable.\n",
            s.coverage(),
            s.detail()
        );
    }
}

/// Every container restart the pod watch saw: each change of a container's restartCount, the
/// restarts it adds (the jump), and the total as `cluster.restarts` counts it.
fn restarts(out: &mut String, k: &model::ClusterRecord) {
    out.push_str("#### Container restarts\n\n");
    if k.restarts.is_empty() {
        out.push_str("No container restarted.\n\n");
        return;
    }
    let _ = writeln!(
        out,
        "{}\n",
        match k.restarts_in_case() {
            Some(n) => format!(
                "{n} container restart(s) in the case: the sum of the jumps in each container's \
                 restartCount (a count seen going 0 -> 3 is 3)."
            ),
            None => "The record keeps each change's count after it, not how many restarts it \
                     was: the case's total is not known."
                .to_string(),
        }
    );
    let mut t = Table::new(&[
        ">Time (s)",
        "Pod",
        "Container",
        ">Restarts",
        ">restartCount after",
        "Last state",
    ]);
    for r in &k.restarts {
        t.row([
            fmt::secs(r.t_s),
            r.pod.clone(),
            r.container.clone(),
            r.added.map_or("-".into(), |n| n.to_string()),
            r.count.to_string(),
            if r.reason.is_empty() {
                "-".into()
            } else {
                r.reason.clone()
            },
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
}

/// Every Warning event of the watched namespaces: each change of an event's count, what it adds
/// within the case, and the total as `cluster.warnings` counts it.
fn warnings(out: &mut String, k: &model::ClusterRecord) {
    out.push_str("#### Warning events\n\n");
    if k.warnings.is_empty() {
        out.push_str("No Warning events.\n\n");
        return;
    }
    let _ = writeln!(
        out,
        "{}\n",
        match k.warnings_in_case() {
            Some(n) => format!(
                "{n} Warning event(s) in the case: the increase of each event's count within \
                 the case (an event seen at counts 1 to 5 is 5; what it counted before the case \
                 is not included). *Count* is the API's count, from before the case too."
            ),
            None => "The record keeps each event's cumulative count, not its increase within \
                     the case: the case's total is not known."
                .to_string(),
        }
    );
    let mut t = Table::new(&[
        ">Time (s)",
        "Object",
        "Reason",
        ">In the case",
        ">Count",
        "Message",
    ]);
    for e in &k.warnings {
        t.row([
            fmt::secs(e.t_s),
            e.object.clone(),
            e.reason.clone(),
            e.added.map_or("-".into(), |n| format!("+{n}")),
            e.count.to_string(),
            e.message.clone(),
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
}

/// CPU and memory per pod from the metrics API.
fn metrics(out: &mut String, k: &model::ClusterRecord) {
    if !k.metrics.is_empty() {
        out.push_str("#### Pod CPU and memory (metrics API)\n\n");
        #[derive(Default)]
        struct Agg {
            n: u64,
            cpu_sum: f64,
            cpu_max: f64,
            mem_max: u64,
        }
        let mut by: BTreeMap<&str, Agg> = BTreeMap::new();
        for m in &k.metrics {
            let a = by.entry(&m.pod).or_default();
            a.n += 1;
            a.cpu_sum += m.cpu_millicores;
            a.cpu_max = a.cpu_max.max(m.cpu_millicores);
            a.mem_max = a.mem_max.max(m.memory_bytes);
        }
        let mut t = Table::new(&[
            "Pod",
            ">Samples",
            ">CPU mean (millicores)",
            ">CPU max",
            ">Memory max (MiB)",
        ]);
        for (pod, a) in &by {
            t.row([
                pod.to_string(),
                count(a.n),
                fmt::f2(a.cpu_sum / a.n as f64),
                fmt::f2(a.cpu_max),
                fmt::f2(a.mem_max as f64 / (1024.0 * 1024.0)),
            ]);
        }
        out.push_str(&t.render());
        out.push('\n');
    }
}

/// A count or an increase: whole numbers as such (`1001`), others with two decimals.
fn amount(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        fmt::f2(v)
    }
}

/// A histogram's shares at its bounds: `≤ 500: 98.00%, ≤ 1000: 100%` (`n/a` for a bound the
/// exposition has no bucket at, or when nothing was observed).
fn shares(h: &model::scrape::HistogramDelta) -> String {
    if h.buckets.is_empty() {
        return "-".into();
    }
    h.buckets
        .iter()
        .map(|b| {
            let v = match (b.share, b.count) {
                (Some(s), _) => fmt::pct_value(s * 100.0),
                (None, None) => "no such bucket".into(),
                (None, Some(_)) => "n/a".into(),
            };
            format!("≤ {}: {v}", b.le)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Labels for a table cell (`-` when none).
fn labels_cell(l: &str) -> String {
    if l.is_empty() {
        "-".into()
    } else {
        l.to_string()
    }
}

/// The Prometheus scrape's series by type: histograms and counters as what they counted over
/// the case and in each action's window, gauges as min, max and last. A record not analysed
/// that way (an older run's) gets each series' min, max and last.
fn scrapes(out: &mut String, k: &model::ClusterRecord) {
    if let Some(case) = k.series.iter().find(|w| w.event.is_none()) {
        out.push_str("#### Prometheus scrape\n\n");
        let _ = writeln!(
            out,
            "Histograms and counters are what they counted during the case (each pod's increase \
             from its first to its last scrape, summed over pods; a value that went down is a \
             counter reset, counted from zero after it); gauges are each pod's minimum, maximum \
             and last value.\n"
        );
        if !case.histograms.is_empty() {
            out.push_str("Histograms over the case:\n\n");
            let mut t = Table::new(&[
                "Metric",
                "Labels",
                ">Pods",
                ">Count",
                ">Sum",
                ">Mean",
                "At or below",
                ">Resets",
            ]);
            for h in &case.histograms {
                t.row([
                    h.metric.clone(),
                    labels_cell(&h.labels),
                    count(u64::from(h.pods)),
                    amount(h.count),
                    fmt::f2(h.sum),
                    h.mean.map_or("-".into(), fmt::f2),
                    shares(h),
                    count(u64::from(h.resets)),
                ]);
            }
            out.push_str(&t.render());
            out.push('\n');
        }
        if !case.counters.is_empty() {
            out.push_str("Counters over the case:\n\n");
            let mut t = Table::new(&["Metric", "Labels", ">Pods", ">Increase", ">Resets"]);
            for c in &case.counters {
                t.row([
                    c.metric.clone(),
                    labels_cell(&c.labels),
                    count(u64::from(c.pods)),
                    amount(c.delta),
                    count(u64::from(c.resets)),
                ]);
            }
            out.push_str(&t.render());
            out.push('\n');
        }
        if !case.gauges.is_empty() {
            out.push_str("Gauges over the case:\n\n");
            let mut t = Table::new(&[
                "Metric", "Labels", "Pod", ">Samples", ">Min", ">Max", ">Last",
            ]);
            for g in &case.gauges {
                t.row([
                    g.metric.clone(),
                    labels_cell(&g.labels),
                    g.pod.clone(),
                    count(u64::from(g.samples)),
                    fmt::f2(g.min),
                    fmt::f2(g.max),
                    fmt::f2(g.last),
                ]);
            }
            out.push_str(&t.render());
            out.push('\n');
        }
        // Per action: the histograms and counters that counted anything in its window.
        let mut t = Table::new(&[
            "Action",
            ">From (s)",
            ">To (s)",
            "Metric",
            "Labels",
            ">Count or increase",
            ">Mean",
            "At or below",
        ]);
        let mut rows = 0usize;
        let mut more = 0usize;
        for w in k.series.iter().filter(|w| w.event.is_some()) {
            let mut row = |t: &mut Table, cells: [String; 5]| {
                if rows < EVENT_ROWS {
                    let [m, l, n, mean, sh] = cells;
                    t.row([
                        w.window.clone(),
                        fmt::secs(w.from_s),
                        fmt::secs(w.to_s),
                        m,
                        l,
                        n,
                        mean,
                        sh,
                    ]);
                    rows += 1;
                } else {
                    more += 1;
                }
            };
            for h in w.histograms.iter().filter(|h| h.count != 0.0) {
                row(
                    &mut t,
                    [
                        h.metric.clone(),
                        labels_cell(&h.labels),
                        amount(h.count),
                        h.mean.map_or("-".into(), fmt::f2),
                        shares(h),
                    ],
                );
            }
            for c in w.counters.iter().filter(|c| c.delta != 0.0) {
                row(
                    &mut t,
                    [
                        c.metric.clone(),
                        labels_cell(&c.labels),
                        amount(c.delta),
                        "-".into(),
                        "-".into(),
                    ],
                );
            }
        }
        if rows > 0 {
            out.push_str(
                "In each action's window (from the action to the next one), what counted \
                 anything:\n\n",
            );
            out.push_str(&t.render());
            if more > 0 {
                let _ = writeln!(out, "\n{more} more rows are in data.json.");
            }
            out.push('\n');
        }
        return;
    }
    if !k.scrapes.is_empty() {
        out.push_str("#### Prometheus scrape\n\n");
        let mut by: BTreeMap<(&str, &str), Vec<&model::ScrapeSample>> = BTreeMap::new();
        for s in &k.scrapes {
            by.entry((&s.metric, &s.labels)).or_default().push(s);
        }
        let mut t = Table::new(&[
            "Metric", "Labels", ">Samples", ">Pods", ">Min", ">Max", ">Last",
        ]);
        for ((metric, labels), v) in &by {
            let pods: std::collections::BTreeSet<&str> = v.iter().map(|s| s.pod.as_str()).collect();
            let vals = v.iter().map(|s| s.value);
            t.row([
                metric.to_string(),
                if labels.is_empty() {
                    "-".into()
                } else {
                    labels.to_string()
                },
                count(v.len() as u64),
                count(pods.len() as u64),
                fmt::f2(vals.clone().fold(f64::INFINITY, f64::min)),
                fmt::f2(vals.fold(f64::NEG_INFINITY, f64::max)),
                fmt::f2(v.last().map_or(f64::NAN, |s| s.value)),
            ]);
        }
        out.push_str(&t.render());
        out.push('\n');
    }
}

/// Probed actions (or growth steps) listed one per row up to this many; beyond, the first and
/// last half.
const PROBE_ROWS: usize = 60;
/// Each probed action gets a table of its replicas up to this many actions.
const PROBE_REPLICA_TABLES: usize = 8;

/// Nearest-rank percentile `p` (0..=100) of `v`; `None` when empty.
fn pct(v: &[f64], p: f64) -> Option<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v.get(rank.min(v.len()) - 1).copied()
}

/// `p50 / p99 / max` of `v` in ms, `-` when empty.
fn spread(v: &[f64]) -> String {
    match (pct(v, 50.0), pct(v, 99.0), pct(v, 100.0)) {
        (Some(a), Some(b), Some(c)) => format!("{} / {} / {}", fmt::f2(a), fmt::f2(b), fmt::f2(c)),
        _ => "-".into(),
    }
}

/// The resolution the probes had against the one asked for: a replica's requests are due
/// every `every`, each on a new connection, so where one request costs more than that (the
/// path through a port-forward, a loaded machine) requests overlap and the achieved interval
/// grows. Said in one sentence, with the request's own cost, when the mean achieved interval
/// is more than 10% over the asked one.
fn resolution(out: &mut String, c: &CaseResult) {
    let asked: Vec<&model::ProbeRecord> = c.probes.iter().filter(|r| r.every_us > 0.0).collect();
    let replicas: Vec<&model::ReplicaProbe> = asked
        .iter()
        .flat_map(|r| r.replicas.iter().filter(|x| x.requests > 1 && !x.unreached))
        .collect();
    if replicas.is_empty() {
        return;
    }
    let every = asked.iter().map(|r| r.every_us).fold(0.0, f64::max);
    let n = replicas.len() as f64;
    let interval = replicas.iter().map(|x| x.interval_us).sum::<f64>() / n;
    let request = replicas.iter().map(|x| x.request_us).sum::<f64>() / n;
    if interval > every * 1.1 {
        let _ = writeln!(
            out,
            "Resolution: asked every {:.0} µs, achieved {:.0} µs on average ({}): one request \
             (a new connection, the request, the answer) took {:.0} µs, so this path and \
             machine could not resolve finer.\n",
            every, interval, c.probes[0].path, request
        );
    } else {
        let _ = writeln!(
            out,
            "Resolution: asked every {:.0} µs, achieved {:.0} µs on average ({}).\n",
            every, interval, c.probes[0].path
        );
    }
}

/// Kubernetes: the probed actions and templated growth steps, each replica probed on its own:
/// per action the times over its replicas (p50 / p99 / max), the mixed window and the probe's
/// resolution; then each replica of the first few actions.
fn probes(out: &mut String, c: &CaseResult) {
    if c.probes.is_empty() {
        return;
    }
    out.push_str(
        "### Data-plane probes

",
    );
    let _ = writeln!(
        out,
        "Each data-plane replica was probed on its own ({}), a new connection per request. \
         Times are in ms from the action's start: *first* is the first expected answer, \
         *stable* the last of `consecutive` expected answers in a row; the mixed window runs \
         from the first replica's first expected answer to the last one's. A replica that went \
         away before it was stable is counted as gone, not as a failure. A replica the probe \
         never reached (no request answered, or none could be sent) is counted as not reached: \
         the probe has no evidence of it, and the times of its action are of the others only.\n",
        c.probes[0].path
    );
    let all = |f: fn(&model::ReplicaProbe) -> Option<f64>| -> Vec<f64> {
        c.probes
            .iter()
            .flat_map(|r| r.replicas.iter().filter_map(f))
            .collect()
    };
    let mixed: Vec<f64> = c.probes.iter().filter_map(|r| r.mixed_ms).collect();
    if c.probes.len() > 1 {
        let not: usize = c
            .probes
            .iter()
            .filter_map(|r| r.shortfall())
            .map(|s| s.missing.len())
            .sum();
        let _ = writeln!(
            out,
            "Over all {} probed actions and their {} replica probes{}: first answer p50 / p99 / \
             max {} ms, stable {} ms, mixed window {} ms.\n",
            c.probes.len(),
            c.probes.iter().map(|r| r.replicas.len()).sum::<usize>(),
            if not > 0 {
                format!(" ({not} not reached: the times are of the replicas reached only)")
            } else {
                String::new()
            },
            spread(&all(|x| x.first_ms)),
            spread(&all(|x| x.stable_ms)),
            spread(&mixed)
        );
    }
    let mut t = Table::new(&[
        ">Time (s)",
        "Action",
        "Detail",
        "Replicas",
        ">Condition (ms)",
        ">First p50 / p99 / max (ms)",
        ">Stable p50 / p99 / max (ms)",
        ">Mixed window (ms)",
        ">Interval (µs)",
        ">Request (µs)",
        "Error",
    ]);
    let row = |t: &mut Table, r: &model::ProbeRecord| {
        let v = |f: fn(&model::ReplicaProbe) -> Option<f64>| -> Vec<f64> {
            r.replicas.iter().filter_map(f).collect()
        };
        // The probe's own cost over the replicas it reached.
        let reached: Vec<&model::ReplicaProbe> =
            r.replicas.iter().filter(|x| !x.unreached).collect();
        let n = reached.len().max(1) as f64;
        let short = r.shortfall();
        // A time over the replicas reached says so when some were not.
        let of = |cell: String| match &short {
            Some(s) if cell != "-" => format!("{cell} ({})", s.coverage()),
            _ => cell,
        };
        t.row([
            fmt::secs(r.t_s),
            r.action.clone(),
            r.detail.clone(),
            probe_replicas(r),
            r.condition_ms.map_or("-".into(), fmt::f2),
            of(spread(&v(|x| x.first_ms))),
            of(spread(&v(|x| x.stable_ms))),
            r.mixed_ms.map_or("-".into(), fmt::f2),
            format!(
                "{:.0}",
                reached.iter().map(|x| x.interval_us).sum::<f64>() / n
            ),
            format!(
                "{:.0}",
                reached.iter().map(|x| x.request_us).sum::<f64>() / n
            ),
            r.error.clone().unwrap_or_default(),
        ]);
    };
    if c.probes.len() <= PROBE_ROWS {
        for r in &c.probes {
            row(&mut t, r);
        }
    } else {
        let half = PROBE_ROWS / 2;
        for r in c.probes[..half]
            .iter()
            .chain(&c.probes[c.probes.len() - half..])
        {
            row(&mut t, r);
        }
    }
    out.push_str(&t.render());
    out.push('\n');
    resolution(out, c);
    if c.probes.len() > PROBE_ROWS {
        let _ = writeln!(
            out,
            "{} probed actions; the first and last {} are listed (data.json has them all).\n",
            c.probes.len(),
            PROBE_ROWS / 2
        );
    }
    for r in c.probes.iter().take(PROBE_REPLICA_TABLES) {
        let _ = writeln!(
            out,
            "{} at {} s, {} ({}):\n",
            r.action,
            fmt::secs(r.t_s),
            r.detail,
            r.request
        );
        let mut t = Table::new(&[
            "Pod",
            "Address",
            ">First (ms)",
            ">Ready (ms)",
            ">Stable (ms)",
            ">Requests",
            ">Interval (µs)",
            ">Request (µs)",
            "Outcome",
        ]);
        let opt = |v: Option<f64>| v.map_or("-".to_string(), fmt::f2);
        for x in &r.replicas {
            t.row([
                x.pod.clone(),
                x.addr.clone(),
                opt(x.first_ms),
                opt(x.ready_ms),
                opt(x.stable_ms),
                count(x.requests),
                format!("{:.0}", x.interval_us),
                format!("{:.0}", x.request_us),
                if x.gone {
                    "gone".to_string()
                } else if x.unreached {
                    let why = x.error.as_deref().unwrap_or("no answer");
                    if why.starts_with("not reached") {
                        why.to_string()
                    } else {
                        format!("not reached: {why}")
                    }
                } else {
                    x.error.clone().unwrap_or_else(|| "stable".into())
                },
            ]);
        }
        out.push_str(&t.render());
        out.push('\n');
    }
    if c.probes.len() > PROBE_REPLICA_TABLES {
        let _ = writeln!(
            out,
            "The replicas of the first {PROBE_REPLICA_TABLES} probed actions are listed; \
             data.json (`probes`) has every replica of every action.\n"
        );
    }
}

/// One probed action's replicas in words: `3 of 3 stable`, `2 of 3 stable, 1 gone`, and the
/// replicas it never reached with why (`2 of 3 stable; 1 not reached: gw-c: connect: ...`),
/// never a count of the reached ones alone.
fn probe_replicas(r: &model::ProbeRecord) -> String {
    let stable = r.replicas.iter().filter(|x| x.stable_ms.is_some()).count();
    let gone = r.replicas.iter().filter(|x| x.gone).count();
    let mut s = format!("{stable} of {} stable", r.replicas.len());
    if gone > 0 {
        let _ = write!(s, ", {gone} gone");
    }
    if let Some(short) = r.shortfall() {
        let _ = write!(
            s,
            "; {} not reached: {}",
            short.missing.len(),
            short.detail()
        );
    }
    s
}

/// The pods' readiness: per role the fewest and most Ready at once, then every change.
fn pods(out: &mut String, k: &model::ClusterRecord) {
    out.push_str("#### Pod readiness\n\n");
    if k.pods.is_empty() {
        out.push_str("No pod change was recorded.\n\n");
        return;
    }
    // Fewest and most Ready per role, after the role's first pod became Ready.
    /// A role's pods (Ready or not), and its fewest and most Ready at once.
    type Role<'a> = (BTreeMap<&'a str, bool>, Option<usize>, usize);
    let mut roles: BTreeMap<&str, Role<'_>> = BTreeMap::new();
    for p in &k.pods {
        let (pods, min, max) = roles.entry(&p.role).or_default();
        pods.insert(&p.pod, p.ready && p.phase != "Deleted");
        let n = pods.values().filter(|r| **r).count();
        *max = (*max).max(n);
        if *max > 0 {
            *min = Some(min.map_or(n, |m| m.min(n)));
        }
    }
    let mut t = Table::new(&["Role", ">Pods seen", ">Fewest Ready", ">Most Ready"]);
    for (role, (pods, min, max)) in &roles {
        t.row([
            role.to_string(),
            count(pods.len() as u64),
            min.map_or("never Ready".to_string(), |m| m.to_string()),
            max.to_string(),
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
    let mut t = Table::new(&[">Time (s)", "Pod", "Role", "Phase", "Ready", "Terminating"]);
    let rows = |t: &mut Table, ps: &[model::PodChange]| {
        for p in ps {
            t.row([
                fmt::secs(p.t_s),
                p.pod.clone(),
                p.role.clone(),
                p.phase.clone(),
                if p.ready { "yes" } else { "no" }.to_string(),
                if p.terminating { "yes" } else { "-" }.to_string(),
            ]);
        }
    };
    if k.pods.len() <= POD_ROWS {
        rows(&mut t, &k.pods);
        out.push_str(&t.render());
        out.push('\n');
    } else {
        let half = POD_ROWS / 2;
        rows(&mut t, &k.pods[..half]);
        rows(&mut t, &k.pods[k.pods.len() - half..]);
        out.push_str(&t.render());
        let _ = writeln!(
            out,
            "\n{} pod changes; the first and last {half} are listed (data.json has them all).\n",
            count(k.pods.len() as u64)
        );
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use model::{ProbeRecord, ReplicaProbe};

    fn replica(pod: &str, first: f64, stable: f64, gone: bool) -> ReplicaProbe {
        ReplicaProbe {
            pod: pod.into(),
            addr: "198.18.0.10:8080".into(),
            first_ms: (!gone).then_some(first),
            ready_ms: (!gone).then_some(first),
            stable_ms: (!gone).then_some(stable),
            requests: 40,
            interval_us: 1000.0,
            request_us: 300.0,
            gone,
            error: None,
            unreached: false,
        }
    }

    /// A probed action's row gives p50 / p99 / max over its replicas (nearest rank), the
    /// replicas stable of all and gone, the condition and the mixed window; each replica gets
    /// its own row, a gone one said so.
    #[test]
    fn probes_are_summed_up_per_action_and_listed_per_replica() {
        let c = CaseResult {
            probes: vec![ProbeRecord {
                t_s: 2.5,
                action: "apply".into(),
                detail: "route.yaml".into(),
                request: "http://r7.example:8080/r7 -> 200".into(),
                path: "pod IP".into(),
                every_us: 1000.0,
                condition_ms: Some(12.5),
                replicas: vec![
                    replica("gw-a", 10.0, 14.0, false),
                    replica("gw-b", 30.0, 33.0, false),
                    replica("gw-c", 0.0, 0.0, true),
                ],
                mixed_ms: Some(20.0),
                error: None,
            }],
            ..CaseResult::default()
        };
        let mut out = String::new();
        probes(&mut out, &c);
        assert!(out.contains("### Data-plane probes"), "{out}");
        assert!(out.contains("(pod IP)"), "{out}");
        let row = out
            .lines()
            .find(|l| l.contains("route.yaml") && l.contains("2 of 3 stable, 1 gone"))
            .unwrap_or_else(|| panic!("{out}"));
        for want in [
            "12.50",
            "10.00 / 30.00 / 30.00",
            "14.00 / 33.00 / 33.00",
            "20.00",
        ] {
            assert!(row.contains(want), "{want}: {row}");
        }
        assert!(
            out.lines()
                .any(|l| l.contains("gw-c") && l.contains("gone")),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.contains("gw-b") && l.contains("30.00") && l.contains("stable")),
            "{out}"
        );
        assert!(
            out.contains("Resolution: asked every 1000 µs, achieved 1000 µs on average (pod IP)."),
            "{out}"
        );
        let mut none = String::new();
        probes(&mut none, &CaseResult::default());
        assert!(none.is_empty());
        assert_eq!(pct(&[3.0, 1.0, 2.0], 50.0), Some(2.0));
        assert_eq!(pct(&[], 50.0), None);
    }

    /// A replica the probe never reached: the row says "2 of 3 stable; 1 not reached" with
    /// why (never "2/2" of the two it reached), its times say what they cover, its own row says
    /// not reached, and the probe's cost is the reached replicas'.
    #[test]
    fn a_replica_not_reached_is_shown_as_such_and_the_times_as_partial() {
        let mut not = replica("gw-c", 0.0, 0.0, false);
        (not.first_ms, not.ready_ms, not.stable_ms) = (None, None, None);
        not.unreached = true;
        not.interval_us = 900_000.0;
        not.request_us = 1_000_000.0;
        not.error = Some(
            "not reached: none of 30 request(s) answered (last: connect: connection refused)"
                .into(),
        );
        let c = CaseResult {
            probes: vec![ProbeRecord {
                t_s: 2.5,
                action: "apply".into(),
                detail: "route.yaml".into(),
                request: "http://r7.example:8080/r7 -> 200".into(),
                path: "pod IP".into(),
                every_us: 1000.0,
                replicas: vec![
                    replica("gw-a", 10.0, 14.0, false),
                    replica("gw-b", 30.0, 33.0, false),
                    not,
                ],
                error: Some("not measurable: the probe reached 2 of 3 replicas (...)".into()),
                ..ProbeRecord::default()
            }],
            ..CaseResult::default()
        };
        let mut out = String::new();
        probes(&mut out, &c);
        let row = out
            .lines()
            .find(|l| l.contains("route.yaml") && l.contains("stable"))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(
            row.contains(
                "2 of 3 stable; 1 not reached: gw-c: not reached: none of 30 request(s) answered \
                 (last: connect: connection refused)"
            ),
            "{row}"
        );
        assert!(!row.contains("2/2") && !row.contains("2 of 2"), "{row}");
        assert!(
            row.contains("10.00 / 30.00 / 30.00 (2 of 3 replicas)"),
            "{row}"
        );
        // The probe's cost over the two reached: 1000 µs, 300 µs.
        assert!(row.contains("| 1000 | 300 |"), "{row}");
        assert!(
            out.lines()
                .any(|l| l.contains("gw-c")
                    && l.contains("not reached: none of 30 request(s) answered")),
            "{out}"
        );
        assert!(
            out.contains("Resolution: asked every 1000 µs, achieved 1000 µs on average"),
            "{out}"
        );
    }

    /// A resolution short of the one asked is said, with the request's own cost; a record
    /// from before `every_us` existed (0) says nothing of it.
    #[test]
    fn a_probe_resolution_short_of_the_one_asked_is_said() {
        let mut slow = replica("gw-a", 10.0, 14.0, false);
        slow.interval_us = 2400.0;
        slow.request_us = 1900.0;
        let mut r = ProbeRecord {
            t_s: 1.0,
            action: "grow".into(),
            detail: "route.yaml.j2 item 0".into(),
            request: "http://r0.example:8080/ -> 200".into(),
            path: "pod IP".into(),
            every_us: 1000.0,
            condition_ms: None,
            replicas: vec![slow],
            mixed_ms: None,
            error: None,
        };
        let mut out = String::new();
        resolution(
            &mut out,
            &CaseResult {
                probes: vec![r.clone()],
                ..CaseResult::default()
            },
        );
        assert_eq!(
            out.trim(),
            "Resolution: asked every 1000 µs, achieved 2400 µs on average (pod IP): one \
             request (a new connection, the request, the answer) took 1900 µs, so this path \
             and machine could not resolve finer."
        );
        r.every_us = 0.0;
        let mut old = String::new();
        resolution(
            &mut old,
            &CaseResult {
                probes: vec![r],
                ..CaseResult::default()
            },
        );
        assert!(old.is_empty(), "{old}");
    }
}
