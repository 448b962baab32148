//! Which charts a run gets, with their data: computed from recorded data alone, so report.md can
//! link every chart by name without drawing it, and `report DIR` draws the same set again.

use crate::fmt::slug;
use model::{CaseResult, ErrorKind, LoadSummary, RunResults};
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
    /// stub_status connections per replica.
    Stub,
    /// Reload times against time.
    Reloads,
    /// The case's scenario series with this index.
    Series(usize),
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
    /// The case's actions.
    pub markers: Vec<Marker>,
    /// The time axis, seconds since the run origin.
    pub x_range: (f64, f64),
    /// Index of the case.
    pub case: usize,
    /// Index of the load within the case, for per-load charts.
    pub load: Option<usize>,
    /// What the chart shows.
    pub kind: Kind,
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
fn color(i: usize) -> (u8, u8, u8) {
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
        let base = CaseBase {
            case: ci,
            markers: markers(case),
            x_range: x_range(case),
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
        if !case.stub_samples.is_empty() {
            out.push(stub(&base, case, &prefix));
        }
        if case
            .reloads
            .iter()
            .any(|r| r.served_ms.is_some() || r.old_workers_exited_ms.is_some())
        {
            out.push(reloads(&base, case, &prefix));
        }
        // Series sharing a chart title go on the chart of the first of them.
        let mut grouped: Vec<(&str, usize)> = Vec::new();
        for (si, s) in case.series.iter().enumerate() {
            let line = |n: usize| Line {
                name: s.name.clone(),
                color: color(n),
                segments: vec![s
                    .points
                    .iter()
                    .copied()
                    .filter(|p| p.0.is_finite() && p.1.is_finite())
                    .collect()],
                dots: s.points.len() <= 60,
                join: true,
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
            c.lines.push(line(0));
            if let Some(k) = s.chart.as_deref() {
                grouped.push((k, out.len()));
            }
            out.push(c);
        }
    }
    dedupe(&mut out);
    out
}

/// What every chart of one case shares.
struct CaseBase {
    case: usize,
    markers: Vec<Marker>,
    x_range: (f64, f64),
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
            x_range: self.x_range,
            case: self.case,
            load: None,
            kind,
        }
    }
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
            segments: vec![load
                .timeline
                .iter()
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
        let segments = runs(load.timeline.iter().map(|s| {
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
        vec![load
            .timeline
            .iter()
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

fn stub(b: &CaseBase, case: &CaseResult, prefix: &str) -> Chart {
    let mut c = b.chart(
        format!("{prefix}-stub-status"),
        format!("{}: nginx connections per replica (stub_status)", case.name),
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
        "time after SIGHUP (ms)".into(),
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
