//! report.html (and comparison.html): one self-contained page a person opens in a browser, with
//! no network fetch. Its charts are drawn by uPlot (assets/uplot: the library's minified JS and
//! CSS, embedded in the binary), zoomed by dragging and read by hovering: every chart of report.md
//! (the same plan), plus per-pod CPU and memory on Kubernetes and readiness probe times per
//! replica, with the actions marked and each load's disruptions (first to last failure after an
//! action) shaded.
//!
//! The page is built from data.json alone and holds no clock, so `proxybench report DIR` and
//! `proxybench analyse DIR` rebuild it byte for byte. The chart data travel as one JSON block
//! that a small script (below, [`SCRIPT`]) hands to uPlot.

mod charts;

use crate::charts::plan::{self, Chart, Kind, Line, Marker, Span};
use crate::comparison::Comparison;
use crate::fmt::{self, count};
use crate::hdr;
use charts::{chart_out, extra_charts, hex, kind_name, unit_of, ChartOut, SeriesOut};
use model::{CaseResult, LoadSummary, RunResults};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// The uPlot release embedded (see assets/uplot/README.md).
pub const UPLOT_VERSION: &str = "1.6.32";

/// uPlot's minified build, MIT licensed (assets/uplot/LICENSE).
static UPLOT_JS: &str = include_str!("../assets/uplot/uPlot.iife.min.js");
/// uPlot's stylesheet.
static UPLOT_CSS: &str = include_str!("../assets/uplot/uPlot.min.css");

/// The page's own style.
const STYLE: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;margin:24px auto;max-width:1180px;padding:0 16px;color:#222}
h1{font-size:1.6em}h2{font-size:1.3em;margin-top:2em;border-bottom:1px solid #ddd}h3{font-size:1.05em;margin-top:1.6em}
table{border-collapse:collapse;margin:8px 0;font-size:.9em}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#2a7d2a}.fail{color:#c62828;font-weight:bold}.note{color:#666;font-size:.9em}.chart{margin:18px 0 30px}
.partial{background:#fff3e0;border:1px solid #f0a030;padding:8px}
"#;

/// The page's script: reads the data block and draws each chart with uPlot. Markers, spans and
/// disruption windows are drawn by a hook; what each chart drew is kept on `window.pbCharts` so
/// a reader's tools (and the tests) can see it.
const SCRIPT: &str = r##"
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("pb-data").textContent);
  var dpr = window.devicePixelRatio || 1;
  window.pbCharts = [];
  window.pbPlots = [];
  function fmt(v, unit) {
    if (v == null) return "-";
    var a = Math.abs(v);
    var s = a >= 1000 ? v.toFixed(0) : a >= 100 ? v.toFixed(1) : a >= 1 ? v.toFixed(2) : v.toPrecision(3);
    return unit ? s + " " + unit : s;
  }
  function overlay(c, rec) {
    return {
      hooks: {
        drawClear: [function (u) {
          var ctx = u.ctx, b = u.bbox;
          ctx.save();
          rec.shaded = 0;
          c.shade.forEach(function (s) {
            var x0 = u.valToPos(s.from, "x", true), x1 = u.valToPos(s.to, "x", true);
            ctx.fillStyle = "rgba(214,39,40,0.16)";
            ctx.fillRect(Math.min(x0, x1) - dpr, b.top, Math.max(Math.abs(x1 - x0), 2 * dpr) + 2 * dpr, b.height);
            rec.shaded++;
          });
          c.spans.forEach(function (s) {
            var x0 = u.valToPos(s.from, "x", true), x1 = u.valToPos(s.to, "x", true);
            ctx.fillStyle = "rgba(120,120,120,0.14)";
            ctx.fillRect(Math.min(x0, x1), b.top, Math.max(Math.abs(x1 - x0), 2 * dpr), b.height);
          });
          ctx.restore();
        }],
        draw: [function (u) {
          var ctx = u.ctx, b = u.bbox;
          ctx.save();
          rec.markers = [];
          ctx.strokeStyle = "#444";
          ctx.fillStyle = "#444";
          ctx.lineWidth = dpr;
          ctx.font = (11 * dpr) + "px sans-serif";
          c.markers.forEach(function (m) {
            var x = Math.round(u.valToPos(m.t, "x", true));
            if (x < b.left || x > b.left + b.width) return;
            ctx.setLineDash([4 * dpr, 3 * dpr]);
            ctx.beginPath();
            // Half a pixel over, so a one-pixel line covers its column instead of two halves.
            ctx.moveTo(x + 0.5, b.top);
            ctx.lineTo(x + 0.5, b.top + b.height);
            ctx.stroke();
            ctx.setLineDash([]);
            ctx.fillText("#" + m.n + " " + m.action, x + 3 * dpr, b.top + 12 * dpr);
            rec.markers.push({ t: m.t, n: m.n, action: m.action, x: x });
          });
          ctx.restore();
          rec.drawn++;
        }]
      }
    };
  }
  D.charts.forEach(function (c) {
    var el = document.getElementById("chart-" + c.id);
    var rec = { id: c.id, kind: c.kind, series: c.series.length, drawn: 0, markers: [], shaded: 0 };
    var series = [{ label: c.x, value: function (u, v) { return fmt(v); } }];
    c.series.forEach(function (s) {
      var o = {
        label: s.name,
        stroke: s.color,
        width: 1.5,
        scale: s.right ? "r" : "y",
        spanGaps: !s.gaps,
        value: function (u, v) { return fmt(v, s.right ? "" : c.unit); },
        points: { show: s.dots, size: 6, fill: s.color }
      };
      if (!s.join) o.paths = function () { return null; };
      series.push(o);
    });
    // The x data run from the axis' start to its end (empty rows at both ends), so the first
    // view and a double-click's reset show the whole case, and a drag zooms.
    // A linear axis starts at zero (below it only for values below zero), so a 1% wobble
    // does not fill the chart's height as if it were an outage; a log axis says it is one.
    var scales = { x: { time: false }, y: c.log ? { distr: 3 } : {
      range: function (u, lo, hi) {
        var top = hi > 0 ? hi * 1.06 : 1;
        return [lo < 0 ? lo * 1.06 : 0, top];
      }
    } };
    var axes = [{ label: c.x }, { label: c.y, size: 70 }];
    if (c.series.some(function (s) { return s.right; })) {
      scales.r = { range: function (u, lo, hi) { return [0, Math.max(1, hi + 1)]; } };
      axes.push({ scale: "r", side: 1, label: "pods Ready", grid: { show: false } });
    }
    var width = Math.max(480, Math.min(1140, el.clientWidth || 1140));
    var u = new uPlot({
      width: width,
      height: 330,
      series: series,
      scales: scales,
      axes: axes,
      cursor: { drag: { x: true, y: false, setScale: true } },
      plugins: [overlay(c, rec)]
    }, c.data, el);
    rec.uplotSeries = u.series.length - 1;
    window.pbCharts.push(rec);
    window.pbPlots.push(u);
  });
  window.pbReady = true;
})();
"##;

/// The data block of a page.
#[derive(Serialize)]
struct Data {
    charts: Vec<ChartOut>,
}

/// Escapes text for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// JSON for a `<script type="application/json">` block: `<` written as `\u003c`, so no text in
/// it can close the block.
fn json_block<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v)
        .expect("chart data holds only finite numbers and strings")
        .replace('<', "\\u003c")
}

/// The page around `body` and the chart data.
fn page(title: &str, body: &str, data: &Data) -> String {
    let mut out = String::with_capacity(UPLOT_JS.len() + body.len() + 4096);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"proxybench; charts by uPlot {UPLOT_VERSION} (MIT)\">\n\
         <title>{}</title>\n<style>\n{UPLOT_CSS}\n{STYLE}</style>\n</head>\n<body>\n",
        esc(title)
    );
    out.push_str(body);
    let _ = write!(
        out,
        "<p class=\"note\">Charts: drag across a chart to zoom into that span, double-click to \
         zoom out; hover for each series' value. Dashed lines are actions (numbered as in the \
         events table), red bands the time from a load's first to its last failure after an \
         action, grey bands runs of many actions. Drawn with uPlot {UPLOT_VERSION} (MIT \
         licence, embedded).</p>\n\
         <script type=\"application/json\" id=\"pb-data\">{}</script>\n\
         <script>\n{UPLOT_JS}\n</script>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
        json_block(data)
    );
    out
}

/// One of the long-lived loads' tables, under a heading `tag`.
fn grid_html(b: &mut String, g: &crate::streams::Grid, tag: &str) {
    let _ = writeln!(b, "<{tag}>{}</{tag}>", esc(&g.title));
    if !g.note.is_empty() {
        let _ = writeln!(b, "<p class=\"note\">{}</p>", esc(&g.note));
    }
    b.push_str("<table>\n<tr>");
    for c in &g.columns {
        let _ = write!(b, "<th>{}</th>", esc(c.trim_start_matches('>')));
    }
    b.push_str("</tr>\n");
    for r in &g.rows {
        b.push_str("<tr>");
        for (i, cell) in r.iter().enumerate() {
            let num = g.columns.get(i).is_some_and(|c| c.starts_with('>'));
            let _ = write!(
                b,
                "<td{}>{}</td>",
                if num { " class=\"n\"" } else { "" },
                esc(cell)
            );
        }
        b.push_str("</tr>\n");
    }
    b.push_str("</table>\n");
}

/// A chart's place in the page.
fn chart_div(c: &ChartOut) -> String {
    format!(
        "<div class=\"chart\"><h3>{}</h3><div id=\"chart-{}\"></div></div>\n",
        esc(&c.title),
        esc(&c.id)
    )
}

fn ms(us: Option<u64>) -> String {
    us.map_or("-".into(), |v| format!("{:.3}", v as f64 / 1000.0))
}

/// report.html for `r`.
pub fn render(r: &RunResults) -> String {
    let mut charts: Vec<(Chart, &'static str)> = plan::plan(r)
        .into_iter()
        .map(|c| {
            let k = kind_name(c.kind);
            (c, k)
        })
        .collect();
    let plain: Vec<Chart> = charts.iter().map(|(c, _)| c.clone()).collect();
    charts.extend(extra_charts(r, &plain));
    let all: Vec<ChartOut> = charts.iter().map(|(c, k)| chart_out(r, c, k)).collect();
    let mut b = String::new();
    head_html(&mut b, r);
    if let Some(g) = crate::streams::headline(r) {
        grid_html(&mut b, &g, "h2");
    }
    for (ci, case) in r.cases.iter().enumerate() {
        case_html(&mut b, case);
        for ((c, _), out) in charts.iter().zip(&all) {
            if c.case == ci {
                b.push_str(&chart_div(out));
            }
        }
    }
    page(
        &format!("proxybench report: {}", r.scenario),
        &b,
        &Data { charts: all },
    )
}

/// The page's head: the title, a partial run's warning, the run's facts and its checks.
fn head_html(b: &mut String, r: &RunResults) {
    let _ = writeln!(b, "<h1>proxybench report: {}</h1>", esc(&r.scenario));
    if r.partial {
        let _ = writeln!(
            b,
            "<p class=\"partial\"><b>PARTIAL RESULTS.</b> The run stopped before it finished: {}.</p>",
            esc(r.abort_reason.as_deref().unwrap_or("no reason was recorded"))
        );
    }
    if !r.description.is_empty() {
        let _ = writeln!(b, "<p>{}</p>", esc(r.description.trim()));
    }
    b.push_str("<table>\n");
    for (k, v) in [
        ("Scenario", r.scenario.clone()),
        ("Started (UTC)", r.started_at.clone()),
        ("Form", if r.quick { "quick" } else { "full" }.to_string()),
        ("Proxy", fmt::proxy_name(&r.env).to_string()),
        (
            "Proxy version",
            r.env.proxy.lines().next().unwrap_or("").to_string(),
        ),
        ("proxybench", r.env.proxybench.clone()),
        (
            "Outcome",
            if r.partial { "PARTIAL" } else { "complete" }.to_string(),
        ),
    ] {
        let _ = writeln!(b, "<tr><th>{k}</th><td>{}</td></tr>", esc(&v));
    }
    b.push_str("</table>\n");
    if !r.checks.is_empty() {
        b.push_str("<h2>Checks</h2>\n<table>\n<tr><th>Check</th><th>Case</th><th>Expected</th><th>Actual</th><th>Result</th></tr>\n");
        for c in &r.checks {
            let _ = writeln!(
                b,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
                esc(&c.name),
                esc(c.case.as_deref().unwrap_or("")),
                esc(&c.expected),
                esc(&c.actual),
                if c.pass { "pass" } else { "fail" },
                if c.pass { "pass" } else { "FAIL" }
            );
        }
        b.push_str("</table>\n");
    }
}

/// A case's section before its charts: its title, findings, description, the loads' table,
/// the long-lived loads' grids and the actions' events.
fn case_html(b: &mut String, case: &CaseResult) {
    let _ = writeln!(b, "<h2>Case <code>{}</code></h2>", esc(&case.name));
    if !case.findings.is_empty() {
        b.push_str("<ul>\n");
        for f in &case.findings {
            let _ = writeln!(b, "<li>{}</li>", esc(f.trim()));
        }
        b.push_str("</ul>\n");
    }
    if !case.description.is_empty() {
        let _ = writeln!(b, "<p>{}</p>", esc(&case.description));
    }
    b.push_str("<table>\n<tr><th>Load</th><th>Requests</th><th>Req/s</th><th>p50 (ms)</th><th>p99 (ms)</th><th>p99.9 (ms)</th><th>max (ms)</th><th>Failures</th></tr>\n");
    for l in &case.loads {
        let p = |q: f64| hdr::percentile_us(&l.latency, q);
        let _ = writeln!(
            b,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&l.name),
            count(l.requests),
            fmt::f2(l.req_per_sec_total()),
            ms(p(50.0)),
            ms(p(99.0)),
            ms(p(99.9)),
            ms((l.latency.count > 0).then_some(l.latency.max_us)),
            count(l.failures())
        );
    }
    b.push_str("</table>\n");
    for g in crate::streams::case_grids(case) {
        grid_html(b, &g, "h3");
    }
    if !case.events.is_empty() {
        b.push_str("<table>\n<tr><th>#</th><th>t (s)</th><th>Action</th><th>Detail</th><th>Took (ms)</th><th>Error</th></tr>\n");
        for (i, e) in case.events.iter().enumerate() {
            let _ = writeln!(
                b,
                "<tr><td class=\"n\">{}</td><td class=\"n\">{:.3}</td><td>{}</td><td>{}</td><td class=\"n\">{:.1}</td><td>{}</td></tr>",
                i + 1,
                e.t_s,
                esc(&e.action),
                esc(&e.detail),
                e.duration_ms,
                esc(e.error.as_deref().unwrap_or(""))
            );
        }
        b.push_str("</table>\n");
    }
}

/// comparison.html for a comparison across proxies: per case and load, req/s and latency
/// percentiles per proxy, and each proxy's own cost, as bars.
pub fn render_comparison(c: &Comparison) -> String {
    let kinds: Vec<&str> = c.proxies.iter().map(|p| p.kind.as_str()).collect();
    let mut b = String::new();
    let _ = writeln!(
        b,
        "<h1>proxybench comparison: {}</h1>\n<table>\n<tr><th>Proxy</th><th>Status</th><th>Version</th><th>Checks</th><th>Report</th></tr>",
        esc(&c.scenario)
    );
    for p in &c.proxies {
        let _ = writeln!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{} of {}</td><td><a href=\"{}/report.html\">{}/report.html</a></td></tr>",
            esc(&p.kind),
            esc(&p.status),
            esc(&p.version),
            p.checks.0,
            p.checks.1,
            esc(&p.dir),
            esc(&p.dir)
        );
    }
    b.push_str("</table>\n");
    let mut charts = Vec::new();
    // One bar group per proxy: x is the proxy's place, labelled by the page's axis.
    let bars = |id: String, title: String, y: &str, series: Vec<(String, Vec<Option<f64>>)>| {
        let n = kinds.len();
        // Empty rows half a place before the first proxy and after the last frame the points.
        let mut xs = vec![Some(-0.5)];
        xs.extend((0..n).map(|i| Some(i as f64)));
        xs.push(Some(n as f64 - 0.5));
        let mut data = vec![xs];
        let mut out = Vec::new();
        for (i, (name, mut v)) in series.into_iter().enumerate() {
            v.insert(0, None);
            v.push(None);
            out.push(SeriesOut {
                name,
                color: hex(plan::color(i)),
                dots: true,
                join: false,
                gaps: false,
                right: false,
            });
            data.push(v);
        }
        ChartOut {
            id,
            kind: "comparison",
            title,
            x: format!("proxy ({})", kinds.join(", ")),
            y: y.to_string(),
            unit: unit_of(y),
            log: false,
            series: out,
            data,
            markers: Vec::new(),
            spans: Vec::new(),
            shade: Vec::new(),
        }
    };
    for case in &c.cases {
        for load in &case.loads {
            let get =
                |f: &dyn Fn(&crate::comparison::LoadMetrics) -> Option<f64>| -> Vec<Option<f64>> {
                    kinds
                        .iter()
                        .map(|k| load.by_proxy.iter().find(|m| m.kind == *k).and_then(f))
                        .collect()
                };
            let stem = format!("{}-{}", fmt::slug(&case.name), fmt::slug(&load.name));
            charts.push(bars(
                format!("{stem}-rps"),
                format!("{} / {}: responses per second", case.name, load.name),
                "responses per second",
                vec![("req/s".into(), get(&|m| Some(m.req_per_sec)))],
            ));
            let ms = |v: Option<u64>| v.map(|x| x as f64 / 1000.0);
            charts.push(bars(
                format!("{stem}-latency"),
                format!("{} / {}: latency", case.name, load.name),
                "latency (ms)",
                vec![
                    ("p50".into(), get(&|m| ms(m.p50_us))),
                    ("p99".into(), get(&|m| ms(m.p99_us))),
                    ("p99.9".into(), get(&|m| ms(m.p999_us))),
                ],
            ));
        }
        let cost =
            |f: &dyn Fn(&crate::comparison::ProxyMetrics) -> Option<f64>| -> Vec<Option<f64>> {
                kinds
                    .iter()
                    .map(|k| case.proxy.iter().find(|m| m.kind == *k).and_then(f))
                    .collect()
            };
        charts.push(bars(
            format!("{}-proxy-cpu", fmt::slug(&case.name)),
            format!("{}: proxy CPU per request", case.name),
            "CPU per request (µs)",
            vec![("CPU per request".into(), cost(&|m| m.cpu_us_per_request))],
        ));
    }
    for ch in &charts {
        b.push_str(&chart_div(ch));
    }
    page(
        &format!("proxybench comparison: {}", c.scenario),
        &b,
        &Data { charts },
    )
}
