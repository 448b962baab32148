//! compare.md: the same metrics of two runs side by side, per case and load, with deltas; with
//! gates, each side may be several runs and compare.md ends with the gates ([`crate::gate`]).
//! Cases match by name, loads by name within their case; anything present in only one run is
//! listed as such.

use crate::files::{read_results, write_atomic};
use crate::fmt::{self, count, signed_count, Table};
use crate::gate::{self, Gate, GateOptions, GateResult, Method};
use crate::hdr;
use crate::Error;
use model::results_dir::COMPARE_MD;
use model::ReloadStats;
use model::{CaseResult, Collector, ErrorKind, LoadSummary, RunResults};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Reads both directories, renders the comparison, writes it to `b/compare.md` and returns it.
pub fn compare_dirs(a: &Path, b: &Path) -> Result<String, Error> {
    Ok(compare_runs(
        &[a.to_path_buf()],
        &[b.to_path_buf()],
        b,
        &[],
        &GateOptions::default(),
    )?
    .markdown)
}

/// What `compare` found: the markdown it wrote and each gate's outcome.
#[derive(Debug, Clone)]
pub struct Compared {
    /// compare.md as written.
    pub markdown: String,
    /// Each gate on each load it applies to, in the order the gates were given.
    pub gates: Vec<GateResult>,
    /// The scenario both sides ran.
    pub scenario: String,
    /// The runs' cases (places are named `case/load` when there are several).
    pub cases: usize,
    /// The runs a side and how the intervals were made.
    pub method: Method,
}

/// Compares the runs of side `a` (the baseline) with those of side `b`, each one or more
/// results directories, and writes compare.md into `write_to`. With gates, every run must be
/// fit for gating and all comparable (same scenario, form, cases, loads and proxy), and
/// compare.md ends with the gates section; the side-by-side tables set the first run of each
/// side against each other.
pub fn compare_runs(
    a: &[PathBuf],
    b: &[PathBuf],
    write_to: &Path,
    gates: &[Gate],
    opts: &GateOptions,
) -> Result<Compared, Error> {
    let read = |dirs: &[PathBuf]| {
        dirs.iter()
            .map(|d| read_results(d))
            .collect::<Result<Vec<_>, _>>()
    };
    let (ra, rb) = (read(a)?, read(b)?);
    let (Some(fa), Some(fb)) = (ra.first(), rb.first()) else {
        return Err(Error::Mismatch("each side needs at least one run".into()));
    };
    let method = Method::new(a.len(), b.len(), opts);
    let results = if gates.is_empty() {
        Vec::new()
    } else {
        gate::evaluate(gates, &side(a, &ra), &side(b, &rb), opts)?
    };
    let label = |dirs: &[PathBuf]| match dirs {
        [one] => one.display().to_string(),
        [first, ..] => format!("{} (run 1 of {})", first.display(), dirs.len()),
        [] => String::new(),
    };
    let mut md = render_compare(fa, fb, &label(a), &label(b));
    if a.len() > 1 || b.len() > 1 {
        md.push_str(&format!(
            "Runs: {}. The tables above set the first run of each side side by side; the gates              read every run.\n\n",
            method.runs()
        ));
    }
    if !gates.is_empty() {
        md.push_str(&gate::render(&results, fa.cases.len(), &method));
    }
    write_atomic(&write_to.join(COMPARE_MD), md.as_bytes())?;
    Ok(Compared {
        markdown: md,
        gates: results,
        scenario: fa.scenario.clone(),
        cases: fa.cases.len(),
        method,
    })
}

/// A side's runs as the gate reads them: each directory with its data.json.
fn side<'a>(dirs: &'a [PathBuf], runs: &'a [RunResults]) -> Vec<gate::Run<'a>> {
    dirs.iter().map(PathBuf::as_path).zip(runs.iter()).collect()
}

/// How a metric's values print.
#[derive(Clone, Copy)]
enum Num {
    /// An exact count.
    Int,
    /// A number with two decimals.
    F2,
    /// Microseconds printed as milliseconds with three decimals.
    Ms,
    /// A percentage with two decimals.
    Pct,
}

fn show(v: Option<f64>, k: Num) -> String {
    match v {
        None => "-".into(),
        Some(v) => match k {
            Num::Int => count(v.max(0.0) as u64),
            Num::F2 => fmt::f2(v),
            Num::Ms => format!("{:.3}", v / 1000.0),
            Num::Pct => format!("{v:.2}%"),
        },
    }
}

fn delta(a: Option<f64>, b: Option<f64>, k: Num) -> (String, String) {
    let (Some(a), Some(b)) = (a, b) else {
        return ("-".into(), "-".into());
    };
    let d = b - a;
    let abs = match k {
        Num::Int => signed_count(d as i128),
        Num::F2 => format!("{d:+.2}"),
        Num::Ms => format!("{:+.3}", d / 1000.0),
        Num::Pct => format!("{d:+.2} pp"),
    };
    let rel = if a != 0.0 {
        format!("{:+.2}%", d * 100.0 / a)
    } else if b == 0.0 {
        "0%".into()
    } else {
        "new".into()
    };
    (abs, rel)
}

/// A metric table: one row per metric, A, B, absolute and relative delta.
struct Rows(Table);

impl Rows {
    fn new() -> Rows {
        Rows(Table::new(&["Metric", ">A", ">B", ">Δ (B - A)", ">Δ %"]))
    }
    fn add(&mut self, name: &str, a: Option<f64>, b: Option<f64>, k: Num) {
        let (d, p) = delta(a, b, k);
        self.0.row([name.to_string(), show(a, k), show(b, k), d, p]);
    }
    fn ints(&mut self, name: &str, a: Option<u64>, b: Option<u64>) {
        self.add(name, a.map(|v| v as f64), b.map(|v| v as f64), Num::Int);
    }
    /// A count read from a collector that may not have sampled: `not sampled` rather than 0,
    /// and no delta against it.
    fn logged(&mut self, name: &str, a: Logged, b: Logged) {
        match (a, b) {
            (Logged::Count(x), Logged::Count(y)) => self.ints(name, Some(x), Some(y)),
            (x, y) => {
                let cell = |v: Logged| match v {
                    Logged::Count(n) => count(n),
                    Logged::NotSampled => "not sampled".into(),
                };
                self.0
                    .row([name.to_string(), cell(x), cell(y), "-".into(), "-".into()]);
            }
        }
    }
}

/// A count from the proxy's logs, or the fact that they were not read.
#[derive(Clone, Copy)]
enum Logged {
    Count(u64),
    NotSampled,
}

/// Renders the comparison of `a` and `b`, labelled with the given names (usually their paths).
pub fn render_compare(a: &RunResults, b: &RunResults, a_label: &str, b_label: &str) -> String {
    let mut out = String::from("# proxybench compare\n\n");
    let mut t = Table::new(&["", "A", "B"]);
    t.row(["Directory", a_label, b_label]);
    t.row(["Scenario", &a.scenario, &b.scenario]);
    t.row(["Started (UTC)", &a.started_at, &b.started_at]);
    let form = |r: &RunResults| if r.quick { "quick" } else { "full" };
    t.row(["Form", form(a), form(b)]);
    let outcome = |r: &RunResults| if r.partial { "PARTIAL" } else { "complete" };
    t.row(["Outcome", outcome(a), outcome(b)]);
    let checks = |r: &RunResults| {
        format!(
            "{} of {} passed",
            r.checks.iter().filter(|c| c.pass).count(),
            r.checks.len()
        )
    };
    t.row(["Checks", &checks(a), &checks(b)]);
    t.row(["proxybench", &a.env.proxybench, &b.env.proxybench]);
    let kind = |r: &RunResults| crate::fmt::proxy_name(&r.env).to_string();
    t.row(["Proxy kind", &kind(a), &kind(b)]);
    let version = |r: &RunResults| r.env.proxy.lines().next().unwrap_or("").to_string();
    t.row(["Proxy version", &version(a), &version(b)]);
    t.row(["Kernel", &a.env.kernel, &b.env.kernel]);
    t.row(["CPU", &a.env.cpu, &b.env.cpu]);
    out.push_str(&t.render());
    out.push_str(
        "\nΔ is B - A; Δ % is relative to A (`new` when A is zero). Latencies are in milliseconds; \
         a failure is an attempt with no HTTP answer or a status outside 2xx/3xx.\n\n",
    );

    let names = |r: &RunResults| r.cases.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    for name in union(&names(a), &names(b)) {
        let ca = a.cases.iter().find(|c| c.name == name);
        let cb = b.cases.iter().find(|c| c.name == name);
        match (ca, cb) {
            (Some(ca), Some(cb)) => case(&mut out, &name, ca, cb),
            (Some(_), None) => {
                let _ = writeln!(out, "## Case `{name}`\n\nOnly in A.\n");
            }
            (None, Some(_)) => {
                let _ = writeln!(out, "## Case `{name}`\n\nOnly in B.\n");
            }
            (None, None) => {}
        }
    }
    out
}

/// Names of `a` in order, then those only in `b`.
fn union(a: &[String], b: &[String]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    a.iter()
        .chain(b)
        .filter(|n| seen.insert(n.as_str()))
        .cloned()
        .collect()
}

fn case(out: &mut String, name: &str, a: &CaseResult, b: &CaseResult) {
    let names = |c: &CaseResult| c.loads.iter().map(|l| l.name.clone()).collect::<Vec<_>>();
    for lname in union(&names(a), &names(b)) {
        let la = a.loads.iter().find(|l| l.name == lname);
        let lb = b.loads.iter().find(|l| l.name == lname);
        let _ = writeln!(out, "## Case `{name}`, load `{lname}`\n");
        match (la, lb) {
            (Some(la), Some(lb)) => {
                out.push_str(&load(la, lb));
                out.push('\n');
            }
            (Some(_), None) => out.push_str("Only in A.\n\n"),
            (None, Some(_)) => out.push_str("Only in B.\n\n"),
            (None, None) => {}
        }
    }
    let _ = writeln!(out, "## Case `{name}`: reloads and proxy logs\n");
    let mut rows = Rows::new();
    let (ra, rb) = (ReloadStats::of(&a.reloads), ReloadStats::of(&b.reloads));
    rows.ints("reloads", Some(ra.total), Some(rb.total));
    rows.ints("reload errors", Some(ra.errors), Some(rb.errors));
    rows.add(
        "reload ave time (ms)",
        ra.served_avg_ms,
        rb.served_avg_ms,
        Num::F2,
    );
    let share = |n: u64, s: &ReloadStats| (s.total > 0).then(|| n as f64 * 100.0 / s.total as f64);
    rows.add(
        "reloads <= 500ms",
        share(ra.within_500, &ra),
        share(rb.within_500, &rb),
        Num::Pct,
    );
    rows.add(
        "reloads <= 1000ms",
        share(ra.within_1000, &ra),
        share(rb.within_1000, &rb),
        Num::Pct,
    );
    rows.add(
        "old workers exited, ave (ms)",
        ra.old_exit_avg_ms,
        rb.old_exit_avg_ms,
        Num::F2,
    );
    // The proxy's logs: counted only where they were read, else "not sampled" (never 0).
    let logs = |c: &CaseResult| c.gap(Collector::Logs);
    let (ga, gb) = (logs(a), logs(b));
    let levels: BTreeSet<&String> = [(a, &ga), (b, &gb)]
        .into_iter()
        .filter(|(_, g)| g.is_none())
        .flat_map(|(c, _)| c.logs.error_levels.keys())
        .collect();
    let read = |c: &CaseResult, gap: &Option<String>, f: &dyn Fn(&CaseResult) -> u64| {
        if gap.is_some() {
            Logged::NotSampled
        } else {
            Logged::Count(f(c))
        }
    };
    let lines = |c: &CaseResult| c.logs.error_levels.values().sum::<u64>();
    rows.logged(
        "proxy error-log lines",
        read(a, &ga, &lines),
        read(b, &gb, &lines),
    );
    for lv in levels {
        let get = |c: &CaseResult| c.logs.error_levels.get(lv).copied().unwrap_or(0);
        rows.logged(
            &format!("proxy error-log `{lv}`"),
            read(a, &ga, &get),
            read(b, &gb, &get),
        );
    }
    let s499 = |c: &CaseResult| c.logs.access_status.get(&499).copied().unwrap_or(0);
    rows.logged("access-log 499", read(a, &ga, &s499), read(b, &gb, &s499));
    let mut why = Vec::new();
    for (side, gap) in [("A", &ga), ("B", &gb)] {
        if let Some(g) = gap {
            why.push(format!("{side}: the proxy's logs not sampled: {g}"));
        }
    }
    out.push_str(&rows.0.render());
    out.push('\n');
    for w in why {
        let _ = writeln!(out, "{w}.");
    }
    if ga.is_some() || gb.is_some() {
        out.push('\n');
    }
}

fn load(a: &LoadSummary, b: &LoadSummary) -> String {
    let mut rows = Rows::new();
    rows.ints("requests", Some(a.requests), Some(b.requests));
    rows.add(
        "req/s",
        Some(a.req_per_sec_total()),
        Some(b.req_per_sec_total()),
        Num::F2,
    );
    for (label, p) in [("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9)] {
        let get = |l: &LoadSummary| hdr::percentile_us(&l.latency, p).map(|v| v as f64);
        rows.add(&format!("latency {label} (ms)"), get(a), get(b), Num::Ms);
    }
    let max = |l: &LoadSummary| (l.latency.count > 0).then_some(l.latency.max_us as f64);
    rows.add("latency max (ms)", max(a), max(b), Num::Ms);
    rows.ints("attempts", Some(a.attempts()), Some(b.attempts()));
    rows.ints("failures", Some(a.failures()), Some(b.failures()));
    let ppm = |l: &LoadSummary| {
        (l.attempts() > 0).then(|| l.failures() as f64 * 1e6 / l.attempts() as f64)
    };
    rows.add("failures (ppm)", ppm(a), ppm(b), Num::F2);
    for k in ErrorKind::ALL {
        let get = |l: &LoadSummary| l.errors.get(&k).copied().unwrap_or(0);
        if get(a) > 0 || get(b) > 0 {
            rows.ints(
                &format!("errors `{}`", k.name()),
                Some(get(a)),
                Some(get(b)),
            );
        }
    }
    let statuses: BTreeSet<u16> = a
        .status
        .keys()
        .chain(b.status.keys())
        .copied()
        .filter(|s| !(200..400).contains(s))
        .collect();
    for s in statuses {
        let get = |l: &LoadSummary| l.status.get(&s).copied().unwrap_or(0);
        rows.ints(&format!("status {s}"), Some(get(a)), Some(get(b)));
    }
    rows.0.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_print_absolute_and_relative() {
        assert_eq!(
            delta(Some(100.0), Some(150.0), Num::Int),
            ("+50".into(), "+50.00%".into())
        );
        assert_eq!(
            delta(Some(2000.0), Some(1500.0), Num::Ms),
            ("-0.500".into(), "-25.00%".into())
        );
        assert_eq!(
            delta(Some(0.0), Some(3.0), Num::Int),
            ("+3".into(), "new".into())
        );
        assert_eq!(
            delta(Some(0.0), Some(0.0), Num::Int),
            ("0".into(), "0%".into())
        );
        assert_eq!(delta(None, Some(1.0), Num::F2), ("-".into(), "-".into()));
    }
}
