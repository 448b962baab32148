//! The cluster's part of a case's section on Kubernetes: readiness probes, pods Ready, log
//! levels, restarts, Warning events, metrics and scrapes.

use super::super::EVENT_ROWS;
use super::case_charts;
use crate::charts::plan::{Chart, Kind};
use crate::fmt::{self, count, Table};
use model::{CaseResult, Collector};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Readiness probes per replica: how many failed, how often a replica flipped from ready to not
/// ready (a flap), and the slowest answer.
pub(super) fn readiness(out: &mut String, c: &CaseResult) {
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
pub(super) fn cluster(out: &mut String, c: &CaseResult, ci: usize, charts: &[Chart]) {
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
        over_the_case(out, case);
        in_each_action(out, k);
        return;
    }
    if !k.scrapes.is_empty() {
        out.push_str("#### Prometheus scrape\n\n");
        raw_samples(out, k);
    }
}

/// The case's whole window: its histograms, counters and gauges, a table each.
fn over_the_case(out: &mut String, case: &model::scrape::ScrapeWindow) {
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
}

/// Per action: the histograms and counters that counted anything in its window.
fn in_each_action(out: &mut String, k: &model::ClusterRecord) {
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
}

/// Scrapes kept as raw samples (no windows): each series' samples, pods and range.
fn raw_samples(out: &mut String, k: &model::ClusterRecord) {
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
