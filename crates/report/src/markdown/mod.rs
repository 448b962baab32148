//! report.md: the shape people already publish (versions, summary, a section per test with
//! wrk-style blocks, charts, failure rates, logs, reload tables), written in proxybench's words
//! from recorded data alone.

mod case;
mod load;
mod logs;

use crate::charts::plan::{self, Chart};
use crate::fmt::{self, code_block, count, Table};
use crate::hdr;
use model::RunResults;
use std::fmt::Write;

/// Renders the whole report. Deterministic: no clock, ordered maps, fixed number formats.
pub fn render(r: &RunResults) -> String {
    let charts = plan::plan(r);
    let mut out = String::new();
    header(&mut out, r);
    versions(&mut out, r);
    summary(&mut out, r);
    for (ci, c) in r.cases.iter().enumerate() {
        case::render(&mut out, r, ci, c, &charts);
    }
    checks(&mut out, r);
    files(&mut out);
    out
}

/// Actions are listed one per row up to this many, in a case's actions and in each load's
/// disruptions; beyond, they are summarised per kind.
pub(crate) const EVENT_ROWS: usize = 60;

/// One of the long-lived loads' tables, under a heading of `level`.
pub(crate) fn grid(out: &mut String, g: &crate::streams::Grid, level: &str) {
    let _ = writeln!(out, "{level} {}\n", g.title);
    if !g.note.is_empty() {
        let _ = writeln!(out, "{}\n", g.note);
    }
    let mut t = Table::new(&g.columns);
    for r in &g.rows {
        t.row(r);
    }
    out.push_str(&t.render());
    out.push('\n');
}

/// The markdown line that shows a chart.
pub(crate) fn chart_line(c: &Chart) -> String {
    format!("![{}](charts/{}.png)\n", fmt::cell(&c.title), c.stem)
}

fn header(out: &mut String, r: &RunResults) {
    let _ = writeln!(out, "# proxybench report: {}\n", r.scenario);
    if r.partial {
        let reason = r
            .abort_reason
            .as_deref()
            .unwrap_or("no reason was recorded");
        let _ = writeln!(
            out,
            "> **PARTIAL RESULTS.** The run stopped before it finished: {}. Everything below covers \
             only what ran before the stop; cases and loads that never ran are missing, and checks \
             may be incomplete.\n",
            reason.trim()
        );
    }
    if !r.description.is_empty() {
        let _ = writeln!(out, "{}\n", r.description.trim());
    }
    let mut t = Table::new(&["Run", ""]);
    t.row(["Scenario", &r.scenario]);
    t.row(["Started (UTC)", &r.started_at]);
    t.row([
        "Form",
        if r.quick {
            "quick (durations scaled down)"
        } else {
            "full"
        },
    ]);
    t.row(["Platform", &platform(r)]);
    t.row(["Cases", &r.cases.len().to_string()]);
    t.row(["Outcome", if r.partial { "PARTIAL" } else { "complete" }]);
    out.push_str(&t.render());
    out.push('\n');
}

/// Where the cases ran, in one cell.
fn platform(r: &RunResults) -> String {
    match &r.env.platform {
        None => "local (processes on this machine)".into(),
        Some(p) => {
            let mut s = p.kind.clone();
            let mut parts = Vec::new();
            if !p.context.is_empty() {
                parts.push(format!("context `{}`", p.context));
            }
            if !p.namespace.is_empty() {
                parts.push(format!(
                    "namespace `{}`{}",
                    p.namespace,
                    if p.kept { ", kept" } else { "" }
                ));
            }
            if !p.pod_path.is_empty() {
                parts.push(format!("proxy pods reached by {}", p.pod_path));
            }
            if !parts.is_empty() {
                s.push_str(&format!(" ({})", parts.join(", ")));
            }
            s
        }
    }
}

fn versions(out: &mut String, r: &RunResults) {
    let e = &r.env;
    out.push_str("## Versions\n\n");
    let or_unknown = |s: &str| {
        if s.trim().is_empty() {
            "not recorded".to_string()
        } else {
            s.trim().to_string()
        }
    };
    let mut t = Table::new(&["Component", "Version"]);
    t.row(["proxybench".to_string(), or_unknown(&e.proxybench)]);
    t.row(["OS".to_string(), or_unknown(&e.os)]);
    t.row(["Kernel".to_string(), or_unknown(&e.kernel)]);
    t.row(["CPU".to_string(), or_unknown(&e.cpu)]);
    t.row(["Cores".to_string(), e.cores.to_string()]);
    t.row([
        "Proxy kind".to_string(),
        e.proxy_kind
            .clone()
            .unwrap_or_else(|| "not recorded".to_string()),
    ]);
    out.push_str(&t.render());
    out.push('\n');
    let name = fmt::proxy_name(e);
    if e.proxy.trim().is_empty() {
        let _ = writeln!(
            out,
            "{name} version: not recorded (this run had no proxy, or its version command failed).\n"
        );
    } else {
        let _ = writeln!(out, "{name}, as its version command prints it:\n");
        out.push_str(&code_block("text", &e.proxy));
        out.push('\n');
    }
}

/// The checks' verdict in one sentence.
fn verdict(r: &RunResults) -> String {
    let total = r.checks.len();
    let failed: Vec<&model::CheckResult> = r.checks.iter().filter(|c| !c.pass).collect();
    if total == 0 {
        "No checks were defined for this run.".into()
    } else if failed.is_empty() {
        format!("**All {total} checks passed.**")
    } else {
        let names: Vec<String> = failed.iter().map(|c| format!("`{}`", c.name)).collect();
        format!(
            "**{} of {total} checks failed:** {}.",
            failed.len(),
            names.join(", ")
        )
    }
}

fn summary(out: &mut String, r: &RunResults) {
    out.push_str("## Summary\n\n");
    let _ = writeln!(out, "{}\n", verdict(r));
    if r.partial {
        out.push_str("- The run is partial (see the banner above).\n");
    }
    for f in &r.findings {
        let _ = writeln!(out, "- {}", f.trim());
    }
    if r.partial || !r.findings.is_empty() {
        out.push('\n');
    }
    let mut t = Table::new(&[
        "Case",
        "Load",
        ">Requests",
        ">Req/s",
        ">Failed",
        ">Failure rate",
        ">ppm",
        ">p99",
    ]);
    for c in &r.cases {
        for l in &c.loads {
            t.row([
                c.name.clone(),
                l.name.clone(),
                count(l.requests),
                fmt::f2(l.req_per_sec_total()),
                count(l.failures()),
                fmt::pct(l.failures(), l.attempts()),
                units::fmt_ppm(l.failures(), l.attempts()),
                hdr::percentile_us(&l.latency, 99.0)
                    .map(fmt::lat)
                    .unwrap_or_else(|| "-".into()),
            ]);
        }
    }
    let streams = crate::streams::headline(r);
    if t.is_empty() {
        if streams.is_none() {
            out.push_str("No load ran.\n\n");
        }
    } else {
        out.push_str(
            "Headline numbers per load. A failure is an attempt that got no HTTP answer or a status \
             outside 2xx/3xx; the rate is over all attempts.\n\n",
        );
        out.push_str(&t.render());
        out.push('\n');
    }
    if let Some(g) = streams {
        if let Some(s) = crate::streams::not_only_requests(r) {
            let _ = writeln!(out, "{s}\n");
        }
        grid(out, &g, "###");
    }
    let with_findings: Vec<_> = r.cases.iter().filter(|c| !c.findings.is_empty()).collect();
    if !with_findings.is_empty() {
        out.push_str("Findings per case:\n\n");
        for c in with_findings {
            for f in &c.findings {
                let _ = writeln!(out, "- **{}**: {}", c.name, f.trim());
            }
        }
        out.push('\n');
    }
}

fn checks(out: &mut String, r: &RunResults) {
    out.push_str("## Checks\n\n");
    if r.checks.is_empty() {
        out.push_str("No checks were defined for this run.\n\n");
        return;
    }
    let _ = writeln!(out, "{}\n", verdict(r));
    let mut t = Table::new(&["Result", "Check", "Case", "Expected", "Actual"]);
    for c in &r.checks {
        t.row([
            if c.pass { "PASS" } else { "**FAIL**" },
            c.name.as_str(),
            c.case.as_deref().unwrap_or("(run)"),
            c.expected.as_str(),
            c.actual.as_str(),
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
}

fn files(out: &mut String) {
    out.push_str(
        "## Files\n\n\
         - `data.json`: everything recorded (versioned schema); `proxybench report DIR` rebuilds this \
         report from it, `proxybench compare A B` diffs two runs.\n\
         - `timeline.csv`: every load's seconds (responses by status class, failures by kind, \
         latency percentiles).\n\
         - `events.csv`, `disruptions.csv`, `reloads.csv`: the actions, their disruption windows, \
         the reloads.\n\
         - `samples.csv`, `series.csv`: CPU, memory and status-page samples; scenario series.\n\
         - `charts/`: every chart as PNG and SVG.\n",
    );
}
