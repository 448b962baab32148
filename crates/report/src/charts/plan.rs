//! Which charts a run gets, with their data: computed from recorded data alone, so report.md can
//! link every chart by name without drawing it, and `report DIR` draws the same set again.

use crate::fmt::slug;
use model::{CaseResult, ErrorKind, LoadSummary, RunResults, SeriesX};
use std::collections::{BTreeMap, BTreeSet};

/// Where a chart belongs in report.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A load's responses per second by status class.
    Throughput,
    /// A load's latency percentiles per second.
    Latency,
    /// A load's failures per second by kind.
    Errors,
    /// CPU per process group.
    Cpu,
    /// Resident memory per process group.
    Memory,
    /// Status-page connections per replica.
    Stub,
    /// Reload times against time.
    Reloads,
    /// The case's scenario series with this index.
    Series(usize),
    /// Ready pods per role (Kubernetes).
    Pods,
}

/// One drawn line (or stacked layer), possibly broken where there was nothing to plot.
#[derive(Debug, Clone)]
pub struct Line {
    /// Legend text.
    pub name: String,
    /// RGB colour.
    pub color: (u8, u8, u8),
    /// Runs of (seconds, value) points; a gap separates runs.
    pub segments: Vec<Vec<(f64, f64)>>,
    /// Draw a dot at each point (sparse data such as reloads).
    pub dots: bool,
    /// Join the points with a line (false for scattered events such as reloads).
    pub join: bool,
}

/// A vertical marker for an action on the time axis.
#[derive(Debug, Clone)]
pub struct Marker {
    /// Seconds since the run origin.
    pub t: f64,
    /// Event number as in the events table (1-based).
    pub n: usize,
    /// The action's kind, e.g. `reload`.
    pub action: String,
}

/// A run of actions too close together to mark one by one (a growth of a thousand steps): drawn
/// as one shaded span with a count, so a thousand dashed lines do not merge into a grey wall.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// Seconds since the run origin of the first action.
    pub from: f64,
    /// Seconds since the run origin of the last action.
    pub to: f64,
    /// What the span stands for, e.g. `999 grow actions (#2–#1000)`.
    pub label: String,
}

/// Actions at most this fraction of the time axis apart belong to one run of actions.
const DENSE_GAP: f64 = 0.01;
/// A run of at least this many actions is drawn as a [`Span`]; shorter runs stay markers.
const DENSE_MIN: usize = 8;
/// A per-second value whose second the load covered less than this fraction of is left out of
/// the per-second charts: a rate over part of a second reads as a drop that did not happen.
const FULL_SECOND: f64 = 0.95;

/// One chart: what to draw and where report.md shows it.
#[derive(Debug, Clone)]
pub struct Chart {
    /// File stem inside charts/ (`.png` and `.svg` are added).
    pub stem: String,
    /// Title printed above the plot.
    pub title: String,
    /// Y axis description with its unit.
    pub y_label: String,
    /// Logarithmic Y axis.
    pub log_y: bool,
    /// Lines are layers stacked on each other (filled areas).
    pub stacked: bool,
    /// The data.
    pub lines: Vec<Line>,
    /// The case's actions that stand apart, one marker each.
    pub markers: Vec<Marker>,
    /// The case's actions that come in dense runs, one shaded span per run.
    pub spans: Vec<Span>,
    /// The x axis: seconds since the run origin, or a count for a per-step series.
    pub x_range: (f64, f64),
    /// X axis description.
    pub x_desc: String,
    /// Index of the case.
    pub case: usize,
    /// Index of the load within the case, for per-load charts.
    pub load: Option<usize>,
    /// What the chart shows.
    pub kind: Kind,
    /// Ready pods per role against time (Kubernetes), drawn as steps on a scale of their own
    /// on the right: every time chart of a case that ran on a cluster carries them.
    pub ready: Vec<Line>,
}

/// A palette that stays tellable apart on white, in a fixed order.
const PALETTE: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

/// Colours of the status classes 1xx..5xx.
const CLASS_COLORS: [(u8, u8, u8); 5] = [
    (127, 127, 127),
    (44, 160, 44),
    (31, 119, 180),
    (255, 127, 14),
    (214, 39, 40),
];

/// The colour of the `i`-th line of a chart.
pub(crate) fn color(i: usize) -> (u8, u8, u8) {
    PALETTE[i % PALETTE.len()]
}

/// Every chart of the run, in report order, with unique stems.
pub fn plan(r: &RunResults) -> Vec<Chart> {
    let mut out = Vec::new();
    for (ci, case) in r.cases.iter().enumerate() {
        let prefix = if r.cases.len() == 1 {
            slug(&case.name)
        } else {
            format!("{}-{}", ci + 1, slug(&case.name))
        };
        let x_range = x_range(case);
        let (markers, spans) = actions(markers(case), x_range);
        let base = CaseBase {
            case: ci,
            markers,
            spans,
            x_range,
            ready: ready_lines(case, x_range),
        };
        for (li, load) in case.loads.iter().enumerate() {
            let stem = format!("{prefix}-{}", slug(&load.name));
            out.push(throughput(&base, li, load, &stem));
            out.push(latency(&base, li, load, &stem));
            if load.failures() > 0 {
                out.push(errors(&base, li, load, &stem));
            }
        }
        if !case.proc_samples.is_empty() {
            out.extend(procs(&base, case, &prefix));
        }
        if case.gap(model::Collector::StatusPages).is_none() {
            out.push(stub(&base, fmt_proxy(r), case, &prefix));
        }
        if case
            .reloads
            .iter()
            .any(|r| r.served_ms.is_some() || r.old_workers_exited_ms.is_some())
        {
            out.push(reloads(&base, case, &prefix));
        }
        out.extend(series_charts(&base, case, &prefix));
        if !base.ready.is_empty() {
            let mut c = base.chart(
                format!("{prefix}-pods-ready"),
                format!("{}: pods Ready", case.name),
                "pods Ready".into(),
                Kind::Pods,
            );
            c.lines = std::mem::take(&mut c.ready);
            for l in &mut c.lines {
                l.name = l.name.replace(" (right)", "");
            }
            out.push(c);
        }
    }
    dedupe(&mut out);
    out
}

/// The charts of a case's scenario series, in series order. Series sharing a chart title go on
/// the chart of the first of them; a series against a count is a scatter with no actions on it.
fn series_charts(base: &CaseBase, case: &CaseResult, prefix: &str) -> Vec<Chart> {
    let mut out: Vec<Chart> = Vec::new();
    let mut grouped: Vec<(&str, usize)> = Vec::new();
    for (si, s) in case.series.iter().enumerate() {
        let per_step = !s.x.is_time();
        let line = |n: usize| Line {
            name: s.name.clone(),
            color: color(n),
            segments: vec![s
                .points
                .iter()
                .copied()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .collect()],
            // One value per step against a count is a scatter, as NGF plots time to ready.
            dots: per_step || s.points.len() <= 60,
            join: !per_step,
        };
        if let Some(&(_, at)) = grouped.iter().find(|g| Some(g.0) == s.chart.as_deref()) {
            let c: &mut Chart = &mut out[at];
            let n = c.lines.len();
            c.lines.push(line(n));
            continue;
        }
        let title = s.chart.as_deref().unwrap_or(&s.name);
        let mut c = base.chart(
            format!("{prefix}-series-{}", slug(title)),
            format!("{}: {}", case.name, title),
            s.unit.clone(),
            Kind::Series(si),
        );
        if let SeriesX::Count(what) = &s.x {
            c.x_desc = format!("number of {what}");
            c.x_range = count_range(&s.points);
            c.markers.clear();
            c.spans.clear();
            c.ready.clear();
        }
        c.lines.push(line(0));
        if let Some(k) = s.chart.as_deref() {
            grouped.push((k, out.len()));
        }
        out.push(c);
    }
    out
}

/// What every chart of one case shares.
struct CaseBase {
    case: usize,
    markers: Vec<Marker>,
    spans: Vec<Span>,
    x_range: (f64, f64),
    ready: Vec<Line>,
}

impl CaseBase {
    fn chart(&self, stem: String, title: String, y_label: String, kind: Kind) -> Chart {
        Chart {
            stem,
            title,
            y_label,
            log_y: false,
            stacked: false,
            lines: Vec::new(),
            markers: self.markers.clone(),
            spans: self.spans.clone(),
            x_range: self.x_range,
            x_desc: "time since start (s)".into(),
            case: self.case,
            load: None,
            kind,
            ready: self.ready.clone(),
        }
    }
}

/// Colours of the pods-Ready steps, by role: proxy, backend, watched (the user's own).
const READY_COLORS: [(u8, u8, u8); 3] = [(0, 0, 0), (110, 110, 110), (148, 103, 189)];

/// The pods-Ready steps of a case that ran on a cluster: for each role seen (`proxy`,
/// `backend`, `watched`), how many of its pods were Ready from each change to the next, held to
/// the end of the axis. Empty off Kubernetes, and when the pod watch gathered nothing.
pub fn ready_lines(case: &CaseResult, x_range: (f64, f64)) -> Vec<Line> {
    let (Some(cluster), None) = (&case.cluster, case.gap(model::Collector::PodWatch)) else {
        return Vec::new();
    };
    let mut roles: Vec<&str> = Vec::new();
    for p in &cluster.pods {
        if !roles.contains(&p.role.as_str()) {
            roles.push(&p.role);
        }
    }
    let rank = |r: &str| match r {
        "proxy" => 0,
        "backend" => 1,
        _ => 2,
    };
    roles.sort_by_key(|r| (rank(r), r.to_string()));
    let mut out = Vec::new();
    for role in roles {
        let mut ready: BTreeMap<&str, bool> = BTreeMap::new();
        let mut pts: Vec<(f64, f64)> = Vec::new();
        let mut changes: Vec<&model::PodChange> =
            cluster.pods.iter().filter(|p| p.role == role).collect();
        changes.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        let mut n = 0.0;
        for ch in changes.into_iter().filter(|c| c.t_s.is_finite()) {
            let now = ch.ready && ch.phase != "Deleted";
            ready.insert(&ch.pod, now);
            let m = ready.values().filter(|r| **r).count() as f64;
            if pts.is_empty() {
                pts.push((ch.t_s.min(x_range.0), 0.0));
            }
            // A step: the old count up to this instant, then the new one.
            pts.push((ch.t_s, n));
            pts.push((ch.t_s, m));
            n = m;
        }
        if let Some(&(t, _)) = pts.last() {
            pts.push((t.max(x_range.1), n));
        }
        out.push(Line {
            name: format!("{role} pods Ready (right)"),
            color: READY_COLORS[rank(role)],
            segments: vec![pts],
            dots: false,
            join: true,
        });
    }
    out
}

fn markers(case: &CaseResult) -> Vec<Marker> {
    case.events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.t_s.is_finite())
        .map(|(i, e)| Marker {
            t: e.t_s,
            n: i + 1,
            action: e.action.clone(),
        })
        .collect()
}

/// Splits the actions into the ones that stand apart (markers) and dense runs (spans): a run is
/// actions each at most [`DENSE_GAP`] of the axis from the next, and it becomes a span when it
/// holds [`DENSE_MIN`] or more. `markers` must be in time order (the events table's).
fn actions(markers: Vec<Marker>, x_range: (f64, f64)) -> (Vec<Marker>, Vec<Span>) {
    let gap = (x_range.1 - x_range.0) * DENSE_GAP;
    let mut runs: Vec<Vec<Marker>> = Vec::new();
    for m in markers {
        match runs.last_mut() {
            Some(run) if m.t - run.last().expect("runs are never empty").t <= gap => run.push(m),
            _ => runs.push(vec![m]),
        }
    }
    let (mut sparse, mut spans) = (Vec::new(), Vec::new());
    for run in runs {
        if run.len() < DENSE_MIN {
            sparse.extend(run);
            continue;
        }
        let (first, last) = (&run[0], &run[run.len() - 1]);
        let what = if run.iter().all(|m| m.action == first.action) {
            format!("{} actions", first.action)
        } else {
            "actions".to_string()
        };
        spans.push(Span {
            from: first.t,
            to: last.t,
            label: format!("{} {what} (#{}–#{})", run.len(), first.n, last.n),
        });
    }
    (sparse, spans)
}

/// The x axis of a per-step series: from zero (or its smallest count) to a little past its
/// largest, so the last point is not drawn on the frame.
fn count_range(points: &[(f64, f64)]) -> (f64, f64) {
    let xs = points.iter().map(|p| p.0).filter(|x| x.is_finite());
    let (lo, hi) = xs.fold((0.0f64, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    if !hi.is_finite() || hi <= lo {
        return (lo, lo + 1.0);
    }
    (lo, hi + (hi - lo) * 0.02)
}

/// The seconds of `load`'s timeline that it ran through (at least [`FULL_SECOND`] of each):
/// its last second, and its first when it started mid-second, cover only part of a second,
/// and their counts would read as a drop. If no second is full (a load under a second), all
/// are kept, there being nothing better to show.
pub(crate) fn full_seconds(load: &LoadSummary) -> impl Iterator<Item = &model::Second> {
    full_of(&load.timeline, load.start_s, load.elapsed_s)
}

/// [`full_seconds`] of a timeline that ran `elapsed` seconds from `start`.
fn full_of(
    timeline: &[model::Second],
    start: f64,
    elapsed: f64,
) -> impl Iterator<Item = &model::Second> {
    let end = start + elapsed;
    let covered = move |s: &model::Second| {
        let t = f64::from(s.t);
        (end.min(t + 1.0) - start.max(t)).max(0.0)
    };
    let any_full = timeline.iter().any(|s| covered(s) >= FULL_SECOND);
    timeline
        .iter()
        .filter(move |s| !any_full || covered(s) >= FULL_SECOND)
}

/// The case's span on the time axis: its own start and length, widened to any data outside it.
fn x_range(case: &CaseResult) -> (f64, f64) {
    // Times inside a case (load timelines, events, series) count from the case's own origin;
    // `start_s` places the case in the run and is not on this axis.
    let mut lo = 0.0_f64;
    let mut hi = case.elapsed_s;
    let mut widen = |t: f64| {
        if t.is_finite() {
            lo = lo.min(t);
            hi = hi.max(t);
        }
    };
    for l in &case.loads {
        widen(l.start_s);
        if let (Some(a), Some(b)) = (l.timeline.first(), l.timeline.last()) {
            widen(a.t as f64);
            widen(b.t as f64 + 1.0);
        }
    }
    for e in &case.events {
        widen(e.t_s);
    }
    if !(lo.is_finite() && hi.is_finite()) {
        return (0.0, 1.0);
    }
    if hi - lo < 1.0 {
        hi = lo + 1.0;
    }
    (lo, hi)
}

/// Splits per-second values into runs, leaving a gap where a second has no value.
fn runs(points: impl Iterator<Item = (f64, Option<f64>)>) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for (t, v) in points {
        match v {
            Some(v) => out.last_mut().expect("non-empty").push((t, v)),
            None if !out.last().expect("non-empty").is_empty() => out.push(Vec::new()),
            None => {}
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

fn throughput(b: &CaseBase, li: usize, load: &LoadSummary, stem: &str) -> Chart {
    let mut c = b.chart(
        format!("{stem}-throughput"),
        format!("{}: responses per second by status class", load.name),
        "responses per second".into(),
        Kind::Throughput,
    );
    c.load = Some(li);
    c.stacked = true;
    for class in [1usize, 2, 3, 4, 0] {
        if load.timeline.iter().all(|s| s.status_class[class] == 0) && class != 1 {
            continue;
        }
        c.lines.push(Line {
            name: format!("{}xx", class + 1),
            color: CLASS_COLORS[class],
            segments: vec![full_seconds(load)
                .map(|s| (s.t as f64 + 0.5, s.status_class[class] as f64))
                .collect()],
            dots: false,
            join: true,
        });
    }
    c
}

fn latency(b: &CaseBase, li: usize, load: &LoadSummary, stem: &str) -> Chart {
    let mut c = b.chart(
        format!("{stem}-latency"),
        format!("{}: latency per second", load.name),
        "latency (ms)".into(),
        Kind::Latency,
    );
    c.load = Some(li);
    type Pick = fn(&model::Second) -> u64;
    let picks: [(&str, Pick); 4] = [
        ("p50", |s| s.p50_us),
        ("p90", |s| s.p90_us),
        ("p99", |s| s.p99_us),
        ("max", |s| s.max_us),
    ];
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for (i, (name, pick)) in picks.iter().enumerate() {
        let segments = runs(full_seconds(load).map(|s| {
            let v = pick(s);
            let ms = (s.requests > 0 && v > 0).then(|| v as f64 / 1000.0);
            if let Some(ms) = ms {
                lo = lo.min(ms);
                hi = hi.max(ms);
            }
            (s.t as f64 + 0.5, ms)
        }));
        c.lines.push(Line {
            name: name.to_string(),
            color: color(i),
            segments,
            dots: false,
            join: true,
        });
    }
    // A wide spread (fast median, slow tail) is only readable on a log axis.
    c.log_y = lo.is_finite() && hi / lo > 30.0;
    if c.log_y {
        c.title.push_str(" (log scale)");
    }
    c
}

fn errors(b: &CaseBase, li: usize, load: &LoadSummary, stem: &str) -> Chart {
    let mut c = b.chart(
        format!("{stem}-errors"),
        format!("{}: failures per second by kind", load.name),
        "failures per second".into(),
        Kind::Errors,
    );
    c.load = Some(li);
    let per_second = |f: &dyn Fn(&model::Second) -> u64| -> Vec<Vec<(f64, f64)>> {
        vec![full_seconds(load)
            .map(|s| (s.t as f64 + 0.5, f(s) as f64))
            .collect()]
    };
    let mut i = 0;
    for kind in ErrorKind::ALL {
        if load.errors.get(&kind).copied().unwrap_or(0) == 0 {
            continue;
        }
        c.lines.push(Line {
            name: kind.name().to_string(),
            color: color(i),
            segments: per_second(&|s| s.errors.get(&kind).copied().unwrap_or(0)),
            dots: false,
            join: true,
        });
        i += 1;
    }
    for class in [3usize, 4] {
        if load.timeline.iter().any(|s| s.status_class[class] > 0) {
            c.lines.push(Line {
                name: format!("HTTP {}xx", class + 1),
                color: color(i),
                segments: per_second(&|s| s.status_class[class]),
                dots: false,
                join: true,
            });
            i += 1;
        }
    }
    c
}

fn procs(b: &CaseBase, case: &CaseResult, prefix: &str) -> [Chart; 2] {
    let mut by_group: BTreeMap<&str, Vec<&model::ProcSample>> = BTreeMap::new();
    for s in &case.proc_samples {
        by_group.entry(&s.group).or_default().push(s);
    }
    let mut cpu = b.chart(
        format!("{prefix}-cpu"),
        format!("{}: CPU per process group", case.name),
        "CPU (% of one core)".into(),
        Kind::Cpu,
    );
    let mut mem = b.chart(
        format!("{prefix}-memory"),
        format!("{}: resident memory per process group", case.name),
        "RSS (MiB)".into(),
        Kind::Memory,
    );
    for (i, (group, samples)) in by_group.iter().enumerate() {
        cpu.lines.push(Line {
            name: group.to_string(),
            color: color(i),
            segments: vec![samples.iter().map(|s| (s.t_s, s.cpu_pct)).collect()],
            dots: samples.len() == 1,
            join: true,
        });
        if samples.iter().all(|s| s.rss_bytes == 0) {
            continue;
        }
        mem.lines.push(Line {
            name: group.to_string(),
            color: color(i),
            segments: vec![samples
                .iter()
                .map(|s| (s.t_s, s.rss_bytes as f64 / (1024.0 * 1024.0)))
                .collect()],
            dots: samples.len() == 1,
            join: true,
        });
    }
    [cpu, mem]
}

/// The proxy kind's name for chart titles.
fn fmt_proxy(r: &RunResults) -> &str {
    crate::fmt::proxy_name(&r.env)
}

fn stub(b: &CaseBase, proxy: &str, case: &CaseResult, prefix: &str) -> Chart {
    let mut c = b.chart(
        format!("{prefix}-stub-status"),
        format!(
            "{}: {proxy} connections per replica (status page)",
            case.name
        ),
        "connections".into(),
        Kind::Stub,
    );
    let replicas: BTreeSet<&str> = case
        .stub_samples
        .iter()
        .map(|s| s.replica.as_str())
        .collect();
    for (i, rep) in replicas.iter().enumerate() {
        let mine: Vec<_> = case
            .stub_samples
            .iter()
            .filter(|s| s.replica == *rep)
            .collect();
        for (j, (what, pick)) in [
            (
                "active",
                (|s: &model::StubSample| s.active) as fn(&model::StubSample) -> u64,
            ),
            ("waiting", |s| s.waiting),
        ]
        .iter()
        .enumerate()
        {
            c.lines.push(Line {
                name: format!("{rep} {what}"),
                color: color(2 * i + j),
                segments: vec![mine.iter().map(|s| (s.t_s, pick(s) as f64)).collect()],
                dots: mine.len() == 1,
                join: true,
            });
        }
    }
    c
}

fn reloads(b: &CaseBase, case: &CaseResult, prefix: &str) -> Chart {
    let mut c = b.chart(
        format!("{prefix}-reloads"),
        format!("{}: reload times", case.name),
        "time after the reload signal (ms)".into(),
        Kind::Reloads,
    );
    type Pick = fn(&model::ReloadRecord) -> Option<f64>;
    let picks: [(&str, Pick); 2] = [
        ("served under new config", |r| r.served_ms),
        ("old workers exited", |r| r.old_workers_exited_ms),
    ];
    for (i, (name, pick)) in picks.iter().enumerate() {
        let mut pts: Vec<(f64, f64)> = case
            .reloads
            .iter()
            .filter_map(|r| pick(r).map(|v| (r.t_s, v)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        c.lines.push(Line {
            name: name.to_string(),
            color: color(i),
            segments: vec![pts],
            dots: true,
            join: false,
        });
    }
    c
}

/// Makes every stem unique by numbering repeats (`-2`, `-3`...).
fn dedupe(charts: &mut [Chart]) {
    let mut seen = BTreeSet::new();
    for c in charts.iter_mut() {
        if !seen.insert(c.stem.clone()) {
            let mut n = 2;
            while seen.contains(&format!("{}-{n}", c.stem)) {
                n += 1;
            }
            c.stem = format!("{}-{n}", c.stem);
            seen.insert(c.stem.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{Second, Series};

    fn second(t: u32, ok: u64) -> Second {
        Second {
            t,
            requests: ok,
            status_class: [0, ok, 0, 0, 0],
            ..Second::default()
        }
    }

    fn secs(v: Vec<&Second>) -> Vec<u32> {
        v.iter().map(|s| s.t).collect()
    }

    #[test]
    fn a_partial_last_second_is_left_out() {
        // 3.4 s from the origin: seconds 0, 1, 2 are whole, second 3 holds 0.4 s of load.
        let tl: Vec<Second> = (0..4).map(|t| second(t, 100)).collect();
        assert_eq!(secs(full_of(&tl, 0.0, 3.4).collect()), vec![0, 1, 2]);
        // Started mid-second: the first second is partial too.
        assert_eq!(secs(full_of(&tl, 0.5, 3.0).collect()), vec![1, 2]);
        // Started 2 ms in and ended on a whole second: every second counts (95% or more).
        assert_eq!(secs(full_of(&tl, 0.002, 3.998).collect()), vec![0, 1, 2, 3]);
        // Shorter than a second: nothing is whole, so everything is kept.
        let short = [second(0, 40)];
        assert_eq!(secs(full_of(&short, 0.0, 0.4).collect()), vec![0]);
    }

    fn marker(t: f64, n: usize, action: &str) -> Marker {
        Marker {
            t,
            n,
            action: action.into(),
        }
    }

    #[test]
    fn dense_actions_become_one_span_and_sparse_ones_stay_markers() {
        // A reload at 1 s, 999 grow steps 0.1 s apart from 5 s, a reload at 150 s.
        let mut ms = vec![marker(1.0, 1, "reload")];
        ms.extend((0..999).map(|i| marker(5.0 + i as f64 * 0.1, i + 2, "grow")));
        ms.push(marker(150.0, 1001, "reload"));
        let (sparse, spans) = actions(ms, (0.0, 160.0));
        assert_eq!(
            sparse.iter().map(|m| m.n).collect::<Vec<_>>(),
            vec![1, 1001]
        );
        assert_eq!(
            spans,
            vec![Span {
                from: 5.0,
                to: 5.0 + 998.0 * 0.1,
                label: "999 grow actions (#2–#1000)".into(),
            }]
        );
    }

    #[test]
    fn a_few_close_actions_stay_markers_and_mixed_runs_are_named_generally() {
        // Seven actions in a second: under the span threshold.
        let few: Vec<Marker> = (0..7)
            .map(|i| marker(i as f64 * 0.1, i + 1, "reload"))
            .collect();
        let (sparse, spans) = actions(few, (0.0, 60.0));
        assert_eq!((sparse.len(), spans.len()), (7, 0));
        // Ten spaced 2% of the axis apart: not dense either.
        let spaced: Vec<Marker> = (0..10)
            .map(|i| marker(i as f64 * 1.2, i + 1, "scale"))
            .collect();
        let (sparse, spans) = actions(spaced, (0.0, 60.0));
        assert_eq!((sparse.len(), spans.len()), (10, 0));
        // Eight close actions of two kinds: one span, named by count only.
        let mixed: Vec<Marker> = (0..8)
            .map(|i| {
                marker(
                    i as f64 * 0.1,
                    i + 1,
                    if i % 2 == 0 { "scale" } else { "reload" },
                )
            })
            .collect();
        let (sparse, spans) = actions(mixed, (0.0, 60.0));
        assert!(sparse.is_empty());
        assert_eq!(spans[0].label, "8 actions (#1–#8)");
    }

    #[test]
    fn a_per_step_series_is_a_scatter_against_its_count() {
        let case = CaseResult {
            name: "routes".into(),
            series: vec![
                Series {
                    name: "time to ready".into(),
                    unit: "ms".into(),
                    points: vec![(10.0, 40.0), (20.0, 130.0), (30.0, 55.0)],
                    x: SeriesX::Count("routes".into()),
                    ..Series::default()
                },
                Series {
                    name: "routes in the config".into(),
                    unit: "items".into(),
                    points: vec![(0.0, 10.0), (5.0, 30.0)],
                    ..Series::default()
                },
            ],
            ..CaseResult::default()
        };
        let base = CaseBase {
            case: 0,
            markers: vec![marker(1.0, 1, "grow")],
            spans: vec![],
            x_range: (0.0, 6.0),
            ready: Vec::new(),
        };
        let charts = series_charts(&base, &case, "scale");
        let ttr = &charts[0];
        assert_eq!(ttr.x_desc, "number of routes");
        assert_eq!(ttr.lines[0].segments[0][1], (20.0, 130.0), "x is the count");
        assert!(
            ttr.lines[0].dots && !ttr.lines[0].join,
            "points, not a line"
        );
        assert!(
            ttr.markers.is_empty(),
            "actions happen in time, not in routes"
        );
        assert!(
            ttr.x_range.0 <= 10.0 && ttr.x_range.1 > 30.0,
            "{:?}",
            ttr.x_range
        );
        // A series against time keeps its line, the time axis and the actions.
        let items = &charts[1];
        assert_eq!(items.x_desc, "time since start (s)");
        assert!(items.lines[0].join);
        assert_eq!((items.x_range, items.markers.len()), ((0.0, 6.0), 1));
    }

    #[test]
    fn ready_steps_count_ready_pods_per_role_and_hold_to_the_end() {
        let pod = |t: f64, pod: &str, phase: &str, ready: bool| model::PodChange {
            t_s: t,
            pod: pod.into(),
            role: "proxy".into(),
            phase: phase.into(),
            ready,
            terminating: false,
        };
        let case = CaseResult {
            cluster: Some(model::ClusterRecord {
                pods: vec![
                    pod(1.0, "a", "Running", true),
                    pod(2.0, "b", "Running", true),
                    pod(3.0, "a", "Deleted", true),
                ],
                ..Default::default()
            }),
            ..CaseResult::default()
        };
        let lines = ready_lines(&case, (0.0, 5.0));
        assert_eq!(lines.len(), 1);
        assert_eq!(
            lines[0].segments[0],
            [
                (0.0, 0.0),
                (1.0, 0.0),
                (1.0, 1.0),
                (2.0, 1.0),
                (2.0, 2.0),
                (3.0, 2.0),
                (3.0, 1.0),
                (5.0, 1.0)
            ]
        );
        assert!(ready_lines(&CaseResult::default(), (0.0, 5.0)).is_empty());
    }

    #[test]
    fn runs_break_at_gaps() {
        let r = runs(
            [
                (0.0, Some(1.0)),
                (1.0, None),
                (2.0, Some(2.0)),
                (3.0, Some(3.0)),
                (4.0, None),
            ]
            .into_iter(),
        );
        assert_eq!(r, vec![vec![(0.0, 1.0)], vec![(2.0, 2.0), (3.0, 3.0)]]);
    }
}
