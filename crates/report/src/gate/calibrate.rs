//! `proxybench compare --calibrate A...`: this machine's run-to-run noise, from the baseline's
//! runs alone, for each gated metric, and the smallest change a gate can tell from it: with the
//! runs given (as many a side), and with more. A gate whose bound is inside that change is
//! named. Nothing is compared; nothing fails.

use super::bootstrap::{detectable, fnv1a, noise, Runs, SplitMix64, Stat};
use super::data::{self, Loaded};
use super::{fmt_conf, pct, sides, Bound, Gate, GateOptions, Run};
use crate::Error;
use model::metric;
use std::path::{Path, PathBuf};

/// File name of the calibration, written into the last directory given.
pub const CALIBRATION_MD: &str = "calibration.md";

/// The gates calibrated when none is given: each load's median, tail, mean and rate.
pub const DEFAULT_GATES: [&str; 4] = ["p50 <= +0%", "p99 <= +0%", "mean <= +0%", "rps >= -0%"];

/// Runs a side that the planning columns show, beside the runs given.
const MORE_RUNS: [usize; 2] = [5, 10];

/// One gated metric on one load, calibrated.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The gate (or the default metric) as written.
    pub gate: String,
    /// `case/load`, or the load when the runs have one case.
    pub place: String,
    /// Each run's own value, as printed.
    pub per_run: Vec<String>,
    /// The relative standard deviation of one run's value: drift between runs and the noise
    /// within one (`±4.10%`).
    pub between: String,
    /// The part of it the run's own seconds show.
    pub within: String,
    /// The smallest detectable change with the runs given, as many a side, in the gate's bad
    /// direction; then with [`MORE_RUNS`] a side.
    pub detectable: Vec<String>,
    /// When the gate's bound is inside the smallest detectable change with the runs given.
    pub tighter: Option<String>,
    /// Why the metric cannot be calibrated on these runs, when it cannot.
    pub problem: Option<String>,
}

/// What `--calibrate` found.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// Runs of A.
    pub runs: usize,
    /// The scenario they ran.
    pub scenario: String,
    /// Their form (`quick`, `full`).
    pub form: String,
    /// The confidence level.
    pub confidence: f64,
    /// One row per gated metric and load.
    pub rows: Vec<Row>,
    /// Gates with an absolute bound: checked exactly, with nothing to calibrate.
    pub absolute: Vec<String>,
    /// True when the rows are [`DEFAULT_GATES`] (no gate was given).
    pub defaults: bool,
}

/// Calibrates `gates` (or [`DEFAULT_GATES`] when none is given) on the runs of `a`, which must
/// be at least two runs of one thing, each fit for gating.
pub fn calibrate(gates: &[Gate], a: &[Run<'_>], opts: &GateOptions) -> Result<Calibration, Error> {
    if a.len() < 2 {
        return Err(Error::Calibration(format!(
            "{} run given; the noise between runs needs at least 2 (`proxybench run --repeat N` \
             makes them)",
            a.len()
        )));
    }
    sides::check(a, &a[..1])?;
    let defaults = gates.is_empty();
    let parsed: Vec<Gate>;
    let gates = if defaults {
        parsed = DEFAULT_GATES
            .iter()
            .map(|g| Gate::parse(g).expect("the default gates parse"))
            .collect();
        &parsed[..]
    } else {
        gates
    };
    let first = a[0].1;
    let cases = first.cases.len();
    let mut runs: Vec<Loaded<'_>> = a.iter().map(|(d, r)| Loaded::new(d, r)).collect();
    let mut rows = Vec::new();
    let mut absolute = Vec::new();
    for g in gates {
        super::check_subject(g, first)?;
        let Bound::Relative(bound) = g.bound else {
            absolute.push(g.text.clone());
            continue;
        };
        for (ci, case) in first.cases.iter().enumerate() {
            for (load, idx) in super::targets(g, case) {
                let place = if cases == 1 {
                    load.clone()
                } else {
                    format!("{}/{load}", case.name)
                };
                let row = one(g, bound, ci, &case.name, &load, &idx, &mut runs, opts);
                rows.push(Row {
                    gate: if defaults {
                        g.metric.clone()
                    } else {
                        g.text.clone()
                    },
                    place,
                    tighter: if defaults { None } else { row.tighter },
                    ..row
                });
            }
        }
    }
    Ok(Calibration {
        runs: a.len(),
        scenario: first.scenario.clone(),
        form: if first.quick { "quick" } else { "full" }.into(),
        confidence: opts.confidence,
        rows,
        absolute,
        defaults,
    })
}

/// One gate on loads `idx` of case `ci`, calibrated.
#[allow(clippy::too_many_arguments)]
fn one(
    g: &Gate,
    bound: f64,
    ci: usize,
    case: &str,
    load: &str,
    idx: &[usize],
    runs: &mut [Loaded<'_>],
    opts: &GateOptions,
) -> Row {
    let mut row = Row {
        gate: String::new(),
        place: String::new(),
        per_run: Vec::new(),
        between: "-".into(),
        within: "-".into(),
        detectable: Vec::new(),
        tighter: None,
        problem: None,
    };
    let source = data::source(runs, &mut [], ci, idx);
    let parts = runs
        .iter_mut()
        .map(|l| data::stat(l, ci, idx, &g.metric, &source).map(|b| (b.stat, b.blocks)))
        .collect::<Result<Vec<(Stat, usize)>, _>>();
    let side = match parts {
        Ok(p) => Runs::new(p),
        Err(why) => {
            row.problem = Some(why.0);
            return row;
        }
    };
    row.per_run = (0..side.runs())
        .map(|r| {
            side.run_value(r)
                .map_or_else(|| "-".into(), |v| metric::show(v, g.kind))
        })
        .collect();
    let mut rng = SplitMix64::new(fnv1a(&["calibrate", &g.text, case, load]));
    let n = match noise(&side, "A", opts.resamples, &mut rng) {
        Ok(n) => n,
        Err(e) => {
            row.problem = Some(e.to_string());
            return row;
        }
    };
    if n.value <= 0.0 {
        row.problem = Some(format!(
            "its value is {} on these runs: a relative change from it has no size",
            metric::show(n.value, g.kind)
        ));
        return row;
    }
    // Standard deviations of the log of one run's value: about the relative standard
    // deviation while it is small.
    let rel = |v: f64| format!("±{:.2}%", 100.0 * v.sqrt());
    row.between = rel(n.per_run);
    row.within = rel(n.within * n.runs as f64);
    let up = g.op.up_is_worse();
    let signed = |h: f64| if up { h.exp() - 1.0 } else { (-h).exp() - 1.0 };
    let r = n.runs;
    let mut sizes = vec![r];
    sizes.extend(MORE_RUNS.iter().copied().filter(|&m| m > r));
    row.detectable = sizes
        .iter()
        .map(|&k| pct(signed(detectable(&n, k, k, opts.confidence))))
        .collect();
    let d = signed(detectable(&n, r, r, opts.confidence));
    let inside = if up { bound < d } else { bound > d };
    if inside {
        row.tighter = Some(format!(
            "`{}` on {load}: the bound {} is inside the smallest change {r} runs a side can tell \
             from noise ({}); it would fail only on a change beyond about {}",
            g.text,
            pct(bound),
            pct(d),
            pct((1.0 + bound) * (1.0 + d) - 1.0)
        ));
    }
    row
}

/// The calibration as markdown: the runs, one row per gated metric and load, what the columns
/// mean, and the gates whose bound is inside the noise.
pub fn render(c: &Calibration, dirs: &[String]) -> String {
    let mut out = String::from("# proxybench compare --calibrate\n\n");
    out.push_str(&format!(
        "Runs of A: {} of scenario `{}` ({} form): {}. Confidence {}%.\n\n",
        c.runs,
        c.scenario,
        c.form,
        dirs.join(", "),
        fmt_conf(c.confidence)
    ));
    let r = c.runs;
    let mut head: Vec<String> = vec![
        if c.defaults { "Metric" } else { "Gate" }.into(),
        "Load".into(),
        ">Per run".into(),
        ">Run to run".into(),
        ">Within a run".into(),
        format!(">Detectable, {r} vs {r} runs"),
    ];
    for m in MORE_RUNS.iter().filter(|&&m| m > r) {
        head.push(format!(">{m} vs {m}"));
    }
    let cols: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = crate::fmt::Table::new(&cols);
    let mut notes: Vec<String> = Vec::new();
    for row in &c.rows {
        let mut cells = vec![
            format!("`{}`", row.gate),
            row.place.clone(),
            if row.per_run.is_empty() {
                "-".into()
            } else {
                row.per_run.join(", ")
            },
            row.between.clone(),
            row.within.clone(),
        ];
        match &row.problem {
            Some(why) => {
                notes.push(format!(
                    "`{}` on {}: not measurable: {why}",
                    row.gate, row.place
                ));
                cells.push(format!("not measurable [{}]", notes.len()));
                cells.extend((1..cols.len() - 5).map(|_| "-".to_string()));
            }
            None => {
                let mut d = row.detectable.clone();
                if let Some(why) = &row.tighter {
                    notes.push(why.clone());
                    d[0] = format!("{} (bound inside) [{}]", d[0], notes.len());
                }
                cells.extend(d);
                cells.resize(cols.len(), "-".into());
            }
        }
        t.row(cells);
    }
    out.push_str(&t.render());
    out.push('\n');
    for (i, n) in notes.iter().enumerate() {
        out.push_str(&format!("[{}] {n}\n", i + 1));
    }
    if !notes.is_empty() {
        out.push('\n');
    }
    if !c.absolute.is_empty() {
        let list: Vec<String> = c.absolute.iter().map(|g| format!("`{g}`")).collect();
        out.push_str(&format!(
            "Gates with an absolute bound ({}) are checked exactly on B, with nothing to \
             calibrate.\n\n",
            list.join(", ")
        ));
    }
    out.push_str(&format!(
        "Run to run: how much one run's value scatters from run to run (the drift between \
         runs and the noise within one): the standard deviation of its log, about its relative \
         standard deviation while that is small; within a run: the part its own seconds show. The smallest detectable change is the half-width of the {conf}% \
         interval a comparison of that many runs a side gives when B scatters as A does: a \
         change of that size is called significant about half the time, one of twice that \
         size almost always. The columns with more runs assume the noise these {r} runs show. \
         The noise comes from a hierarchical bootstrap of the runs given (runs, then seconds \
         within each run), corrected for few runs.\n",
        conf = fmt_conf(c.confidence),
    ));
    out
}

/// Writes the calibration's markdown as `dir/calibration.md` and returns the path.
pub fn write(dir: &Path, md: &str) -> Result<PathBuf, Error> {
    let path = dir.join(CALIBRATION_MD);
    crate::files::write_atomic(&path, md.as_bytes())?;
    Ok(path)
}
