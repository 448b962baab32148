//! The charts of the HTML report as uPlot reads them: each chart's series aligned on one time
//! axis, its markers and disruption windows, and the pod and readiness lines of a case.

use super::*;

/// One series as the page draws it.
#[derive(Serialize)]
pub(super) struct SeriesOut {
    pub(super) name: String,
    pub(super) color: String,
    pub(super) dots: bool,
    pub(super) join: bool,
    /// Breaks in the line are meant (null values are gaps, not missing neighbours' points).
    pub(super) gaps: bool,
    /// On the right-hand scale (pods Ready).
    pub(super) right: bool,
}

/// A shaded window on the time axis.
#[derive(Serialize)]
pub(super) struct Window {
    pub(super) from: f64,
    pub(super) to: f64,
    pub(super) label: String,
}

/// An action's marker.
#[derive(Serialize)]
pub(super) struct MarkerOut {
    pub(super) t: f64,
    pub(super) n: usize,
    pub(super) action: String,
}

/// One chart as the page draws it: uPlot's aligned data (x values, then one column per series,
/// `null` where a series has no point).
#[derive(Serialize)]
pub(super) struct ChartOut {
    pub(super) id: String,
    pub(super) kind: &'static str,
    pub(super) title: String,
    pub(super) x: String,
    pub(super) y: String,
    /// The y axis' unit, for hover values.
    pub(super) unit: String,
    pub(super) log: bool,
    pub(super) series: Vec<SeriesOut>,
    pub(super) data: Vec<Vec<Option<f64>>>,
    pub(super) markers: Vec<MarkerOut>,
    pub(super) spans: Vec<Window>,
    pub(super) shade: Vec<Window>,
}

pub(super) fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Throughput => "throughput",
        Kind::Latency => "latency",
        Kind::Errors => "errors",
        Kind::Cpu => "cpu",
        Kind::Memory => "memory",
        Kind::Stub => "stub",
        Kind::Reloads => "reloads",
        Kind::Series(_) => "series",
        Kind::Pods => "pods",
    }
}

pub(super) fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// The unit of a y label (`latency (ms)` → `ms`).
pub(super) fn unit_of(label: &str) -> String {
    match (label.rfind('('), label.ends_with(')')) {
        (Some(i), true) => label[i + 1..label.len() - 1].to_string(),
        _ => String::new(),
    }
}

/// Aligns the chart's lines on one x axis for uPlot. A line broken into runs gets a `null`
/// between them, so the page draws the break.
fn aligned(
    lines: &[(&Line, bool)],
    x_range: (f64, f64),
) -> (Vec<SeriesOut>, Vec<Vec<Option<f64>>>) {
    let mut per: Vec<BTreeMap<u64, Option<f64>>> = Vec::new();
    let mut xs: BTreeSet<u64> = BTreeSet::new();
    // f64 keys in total order: finite x values map monotonically onto u64.
    let key = |x: f64| {
        let b = x.to_bits();
        if b >> 63 == 1 {
            !b
        } else {
            b | (1 << 63)
        }
    };
    let unkey = |k: u64| f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k });
    let mut series = Vec::new();
    for (l, right) in lines {
        let mut m = BTreeMap::new();
        for (si, seg) in l.segments.iter().enumerate() {
            for &(x, y) in seg.iter().filter(|p| p.0.is_finite()) {
                m.insert(key(x), y.is_finite().then_some(y));
            }
            if let (Some(last), Some(next)) =
                (seg.last(), l.segments.get(si + 1).and_then(|s| s.first()))
            {
                let mid = (last.0 + next.0) / 2.0;
                if mid.is_finite() {
                    m.entry(key(mid)).or_insert(None);
                }
            }
        }
        xs.extend(m.keys().copied());
        per.push(m);
        series.push(SeriesOut {
            name: l.name.clone(),
            color: hex(l.color),
            dots: l.dots,
            join: l.join,
            gaps: l.segments.len() > 1,
            right: *right,
        });
    }
    for x in [x_range.0, x_range.1] {
        if x.is_finite() {
            xs.insert(key(x));
        }
    }
    let mut data = vec![xs.iter().map(|&k| Some(unkey(k))).collect::<Vec<_>>()];
    for m in &per {
        data.push(xs.iter().map(|k| m.get(k).copied().flatten()).collect());
    }
    (series, data)
}

/// The windows of `load` in which its requests failed after an action: from its first to its
/// last failure.
fn disruption_windows(case: &CaseResult, load: &LoadSummary) -> Vec<Window> {
    case.disruptions
        .iter()
        .filter(|d| d.load == load.name && d.failed > 0)
        .filter_map(|d| {
            let (from, to) = (d.first_failure_s?, d.last_failure_s?);
            let action = case
                .events
                .get(d.event)
                .map_or("an action", |e| e.action.as_str());
            Some(Window {
                from,
                to,
                label: format!("{} failed after #{} {action}", d.failed, d.event + 1),
            })
        })
        .collect()
}

pub(super) fn chart_out(r: &RunResults, c: &Chart, kind: &'static str) -> ChartOut {
    let case = &r.cases[c.case];
    let mut lines: Vec<(&Line, bool)> = c.lines.iter().map(|l| (l, false)).collect();
    if c.kind != Kind::Pods {
        lines.extend(c.ready.iter().map(|l| (l, true)));
    }
    let (series, data) = aligned(&lines, c.x_range);
    let shade = match c.load {
        Some(li) if c.x_desc.starts_with("time") => disruption_windows(case, &case.loads[li]),
        _ => Vec::new(),
    };
    ChartOut {
        id: c.stem.clone(),
        kind,
        title: c.title.clone(),
        x: c.x_desc.clone(),
        y: c.y_label.clone(),
        unit: unit_of(&c.y_label),
        log: c.log_y,
        series,
        data,
        markers: c
            .markers
            .iter()
            .map(|m: &Marker| MarkerOut {
                t: m.t,
                n: m.n,
                action: m.action.clone(),
            })
            .collect(),
        spans: c
            .spans
            .iter()
            .map(|s: &Span| Window {
                from: s.from,
                to: s.to,
                label: s.label.clone(),
            })
            .collect(),
        shade,
    }
}

/// The charts the page adds to report.md's: per-pod CPU and memory (Kubernetes metrics API)
/// and readiness probe times per replica.
pub(super) fn extra_charts(r: &RunResults, charts: &[Chart]) -> Vec<(Chart, &'static str)> {
    let mut out = Vec::new();
    for (ci, case) in r.cases.iter().enumerate() {
        // Reuse the case's axis, markers and spans from any of its time charts.
        let Some(base) = charts
            .iter()
            .find(|c| c.case == ci && c.x_desc.starts_with("time"))
        else {
            continue;
        };
        let prefix = base.stem.split('-').next().unwrap_or("case").to_string();
        let mk = |stem: String, title: String, y: &str, lines: Vec<Line>| Chart {
            stem,
            title,
            y_label: y.to_string(),
            log_y: false,
            stacked: false,
            lines,
            markers: base.markers.clone(),
            spans: base.spans.clone(),
            x_range: base.x_range,
            x_desc: base.x_desc.clone(),
            case: ci,
            load: None,
            kind: Kind::Series(0),
            ready: base.ready.clone(),
        };
        if let Some((cpu, mem)) = case.cluster.as_ref().and_then(pod_lines) {
            out.push((
                mk(
                    format!("{prefix}-pod-cpu"),
                    format!("{}: CPU per pod (metrics API)", case.name),
                    "CPU (millicores)",
                    cpu,
                ),
                "pod-cpu",
            ));
            out.push((
                mk(
                    format!("{prefix}-pod-memory"),
                    format!("{}: memory per pod (metrics API)", case.name),
                    "working set (MiB)",
                    mem,
                ),
                "pod-memory",
            ));
        }
        let lines = readiness_lines(case);
        if !lines.is_empty() {
            out.push((
                mk(
                    format!("{prefix}-readiness"),
                    format!(
                        "{}: readiness probe answer time per replica (a gap: probes failed)",
                        case.name
                    ),
                    "probe answer (ms)",
                    lines,
                ),
                "readiness",
            ));
        }
    }
    out
}

/// Per-pod CPU and memory lines from the metrics API's samples; none without a sample.
fn pod_lines(k: &model::ClusterRecord) -> Option<(Vec<Line>, Vec<Line>)> {
    let mut pods: BTreeMap<&str, Vec<&model::PodMetric>> = BTreeMap::new();
    for m in &k.metrics {
        pods.entry(&m.pod).or_default().push(m);
    }
    if pods.is_empty() {
        return None;
    }
    let line = |i: usize, pod: &str, pts: Vec<(f64, f64)>| Line {
        name: pod.to_string(),
        color: plan::color(i),
        segments: vec![pts],
        dots: false,
        join: true,
    };
    let cpu = pods
        .iter()
        .enumerate()
        .map(|(i, (p, v))| line(i, p, v.iter().map(|m| (m.t_s, m.cpu_millicores)).collect()))
        .collect();
    let mem = pods
        .iter()
        .enumerate()
        .map(|(i, (p, v))| {
            line(
                i,
                p,
                v.iter()
                    .map(|m| (m.t_s, m.memory_bytes as f64 / (1024.0 * 1024.0)))
                    .collect(),
            )
        })
        .collect();
    Some((cpu, mem))
}

/// Each replica's readiness probe answer times, one line per replica.
fn readiness_lines(case: &CaseResult) -> Vec<Line> {
    // Answer times only: a failed probe has none, so it breaks the replica's line (a gap),
    // rather than standing as a point at the timeout.
    let mut replicas: BTreeMap<&str, Vec<Vec<(f64, f64)>>> = BTreeMap::new();
    for s in &case.readiness {
        let segs = replicas.entry(&s.replica).or_default();
        match s.answered_ms() {
            Some(ms) => match segs.last_mut() {
                Some(seg) => seg.push((s.t_s, ms)),
                None => segs.push(vec![(s.t_s, ms)]),
            },
            None => {
                if segs.last().is_none_or(|seg| !seg.is_empty()) {
                    segs.push(Vec::new());
                }
            }
        }
    }
    for segs in replicas.values_mut() {
        segs.retain(|seg| !seg.is_empty());
    }
    replicas
        .into_iter()
        .enumerate()
        .map(|(i, (rep, segments))| Line {
            name: rep.to_string(),
            color: plan::color(i),
            segments,
            dots: false,
            join: true,
        })
        .collect()
}
