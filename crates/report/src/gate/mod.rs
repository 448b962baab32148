//! `proxybench compare A... -- B... --gate EXPR`: a regression gate for CI. A gate is one line
//! in the scenario checks' vocabulary ([`model::metric`]) with either an absolute bound, checked
//! exactly on every run of B (`failures == 0`, `coffee.p99 <= 250ms`), or a bound on the
//! relative change from A to B (`coffee.p99 <= +10%`, `rps >= -5%`), which fails only when the
//! change is significantly beyond it: when the whole interval ([`bootstrap`]) lies past the
//! bound. Each side is one or more runs; the interval comes from a hierarchical bootstrap (runs,
//! then seconds within each run), so it sees the drift between runs as well as the noise within
//! them, and each gate says the smallest change its runs can tell from noise ([`calibrate`]
//! prints it from the baseline's runs alone).
//!
//! `LOAD.METRIC` gates one load (in every case that has it), `all.METRIC` every load of a case
//! summed (as checks read `all`), and a bare `METRIC` each load on its own.

pub mod bootstrap;
pub mod calibrate;
mod data;
pub mod set;
pub mod sides;
mod student;

use crate::Error;
use bootstrap::{fnv1a, relative_change, Runs, Stat};
use data::Loaded;
use model::metric::{self, MetricKind};
pub use sides::{check_comparable, Run};
use std::fmt;

/// The confidence level of a gate's interval unless `--confidence` says otherwise.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;
/// Resamples per gate: enough that the ends of a 95% interval move by well under its width
/// from one seed to another.
pub const RESAMPLES: usize = 2000;

/// Subjects of checks that are not loads: a gate reads load metrics only.
const CHECK_ONLY_SUBJECTS: [&str; 5] = ["backends", "proxy", "nginx", "reloads", "cluster"];

/// A gate as written on the command line, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// The expression as written.
    pub text: String,
    subject: Option<String>,
    metric: String,
    kind: MetricKind,
    op: Op,
    bound: Bound,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Le,
    Lt,
    Ge,
    Gt,
    Eq,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Le => "<=",
            Op::Lt => "<",
            Op::Ge => ">=",
            Op::Gt => ">",
            Op::Eq => "==",
        })
    }
}

impl Op {
    /// True when a higher value is the bad direction (latency, failures).
    fn up_is_worse(self) -> bool {
        matches!(self, Op::Le | Op::Lt)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Bound {
    /// A relative change, as a fraction (`+10%` is 0.10).
    Relative(f64),
    /// A value of the metric, checked on B.
    Absolute(f64),
}

/// A gate that does not parse: where (1-based column in the expression) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--gate '{text}': column {column}: {msg}")]
pub struct GateSyntaxError {
    /// The expression as written.
    pub text: String,
    /// 1-based column (in characters) of the bad part.
    pub column: usize,
    /// What is wrong there.
    pub msg: String,
}

impl Gate {
    /// Parses `[LOAD.]METRIC OP VALUE`, VALUE being a signed percentage (`+10%`, `-5%`: a
    /// relative change) or a value of the metric (`0`, `250ms`, `1%`).
    pub fn parse(text: &str) -> Result<Gate, GateSyntaxError> {
        let err = |byte: usize, msg: String| GateSyntaxError {
            text: text.to_string(),
            column: text[..byte.min(text.len())].chars().count() + 1,
            msg,
        };
        let Some(at) = text.find(['<', '>', '=']) else {
            return Err(err(
                text.len(),
                "no comparison: write LOAD.METRIC OP VALUE with OP one of <=, <, >=, >, ==".into(),
            ));
        };
        let rest = &text[at..];
        let (op, len) = if rest.starts_with("<=") {
            (Op::Le, 2)
        } else if rest.starts_with(">=") {
            (Op::Ge, 2)
        } else if rest.starts_with("==") {
            (Op::Eq, 2)
        } else if rest.starts_with('<') {
            (Op::Lt, 1)
        } else if rest.starts_with('>') {
            (Op::Gt, 1)
        } else {
            return Err(err(at, "'=' is not a comparison; write ==".into()));
        };
        let lhs = &text[..at];
        let lhs_start = lhs.len() - lhs.trim_start().len();
        let lhs = lhs.trim();
        if lhs.is_empty() {
            return Err(err(
                lhs_start,
                "expected METRIC or LOAD.METRIC before the comparison".into(),
            ));
        }
        // `p99.9` is a metric with a dot in it; `coffee.p99.9` a load's.
        let (subject, metric, metric_at) = if metric::load_metric_kind(lhs, None).is_ok() {
            (None, lhs, lhs_start)
        } else {
            match lhs.split_once('.') {
                Some((s, m)) => (Some(s.trim()), m.trim(), lhs_start + s.len() + 1),
                None => (None, lhs, lhs_start),
            }
        };
        if let Some(s) = subject {
            if s.is_empty() || s.contains(char::is_whitespace) {
                return Err(err(lhs_start, format!("'{s}' is not a load name")));
            }
            if CHECK_ONLY_SUBJECTS.contains(&s) {
                return Err(err(
                    lhs_start,
                    format!(
                        "a gate reads a load's metrics ('{s}' is a subject of scenario checks \
                         only): write LOAD.METRIC, all.METRIC or METRIC"
                    ),
                ));
            }
        }
        let metric_col =
            metric_at + (text[metric_at..].len() - text[metric_at..].trim_start().len());
        let kind = metric::load_metric_kind(metric, subject).map_err(|e| err(metric_col, e.0))?;
        let rhs_raw = &text[at + len..];
        let rhs_at = at + len + (rhs_raw.len() - rhs_raw.trim_start().len());
        let rhs = rhs_raw.trim();
        if rhs.is_empty() {
            return Err(err(rhs_at, format!("expected a value after '{op}'")));
        }
        if rhs.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return Err(err(
                rhs_at,
                "a gate compares with a value (0, 250ms, 1%) or a change from A (+10%, -5%), \
                 not with another metric"
                    .into(),
            ));
        }
        let bound = if rhs.starts_with(['+', '-']) {
            let pct = rhs
                .strip_suffix('%')
                .and_then(|n| n.trim().parse::<f64>().ok())
                .filter(|v| v.is_finite())
                .ok_or_else(|| {
                    err(
                        rhs_at,
                        format!("'{rhs}' is not a change; write a signed percentage such as +10% or -5%"),
                    )
                })?;
            if op == Op::Eq {
                return Err(err(
                    at,
                    "a change from A needs <= or >= (== holds for no interval)".into(),
                ));
            }
            if matches!(metric, "late_sends" | "late_max") {
                return Err(err(
                    metric_col,
                    format!(
                        "'{metric}' is kept only as a total, with nothing to resample; gate it \
                         with an absolute value"
                    ),
                ));
            }
            Bound::Relative(pct / 100.0)
        } else {
            Bound::Absolute(
                metric::parse_value(rhs, kind)
                    .map_err(|e| err(rhs_at, format!("value '{rhs}' {e}")))?,
            )
        };
        Ok(Gate {
            text: text.trim().to_string(),
            subject: subject.map(str::to_string),
            metric: metric.to_string(),
            kind,
            op,
            bound,
        })
    }

    /// True when the gate bounds the change from A (and so is decided by the bootstrap).
    pub fn is_relative(&self) -> bool {
        matches!(self.bound, Bound::Relative(_))
    }

    fn expected(&self) -> String {
        match self.bound {
            Bound::Relative(r) => format!("change {} {}", self.op, pct(r)),
            Bound::Absolute(v) => format!("{} {}", self.op, metric::show(v, self.kind)),
        }
    }
}

/// How a gate came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The change is significantly beyond the bound: the gate fails.
    Regression,
    /// The change is significantly in the good direction.
    Improvement,
    /// The interval holds no change at all.
    NoSignificantChange,
    /// The change is significantly in the bad direction, but not significantly beyond the
    /// bound: the gate holds.
    WorseWithinBound,
    /// An absolute bound that B meets.
    Holds,
    /// An absolute bound that B breaks: the gate fails.
    Breached,
    /// The runs cannot give the metric (why): the gate fails, as a check would, and JUnit
    /// counts it as an error.
    NotMeasurable(String),
}

impl Verdict {
    /// True when the gate holds.
    pub fn pass(&self) -> bool {
        matches!(
            self,
            Verdict::Improvement
                | Verdict::NoSignificantChange
                | Verdict::WorseWithinBound
                | Verdict::Holds
        )
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Regression => f.write_str("regression"),
            Verdict::Improvement => f.write_str("improvement"),
            Verdict::NoSignificantChange => f.write_str("no significant change"),
            Verdict::WorseWithinBound => f.write_str("worse, within the bound"),
            Verdict::Holds => f.write_str("holds"),
            Verdict::Breached => f.write_str("breached"),
            Verdict::NotMeasurable(why) => write!(f, "not measurable: {why}"),
        }
    }
}

/// One gate evaluated on one load (or on a case's loads summed).
#[derive(Debug, Clone, PartialEq)]
pub struct GateResult {
    /// The gate as written.
    pub gate: String,
    /// The case.
    pub case: String,
    /// The load (`all` for every load of the case summed).
    pub load: String,
    /// A's value, as printed (`-` when it has none).
    pub a: String,
    /// B's value, as printed.
    pub b: String,
    /// The relative change (`+12.30%`), or `exact` for an absolute bound.
    pub change: String,
    /// The interval of the change (`[+8.10%, +16.00%]`), empty for an absolute bound.
    pub interval: String,
    /// The smallest change these runs can tell from noise, in the gate's bad direction
    /// (`+8.10%`), from A's runs alone; empty for an absolute bound.
    pub detectable: String,
    /// When the bound is inside the smallest detectable change: what that means for the gate
    /// (which still gives its verdict).
    pub tighter: Option<String>,
    /// Where the numbers came from: `requests` (per-request records), `seconds` (per-second
    /// values), `data.json` (the exact totals).
    pub from: String,
    /// Why the per-second values were used, or how a percentile was read from them.
    pub note: Option<String>,
    /// What the gate asks, for JUnit's expected value.
    pub expected: String,
    /// The outcome.
    pub verdict: Verdict,
}

impl GateResult {
    /// True when the gate holds.
    pub fn pass(&self) -> bool {
        self.verdict.pass()
    }

    /// `case/load`, or the load alone when the runs have one case.
    pub fn place(&self, cases: usize) -> String {
        if cases == 1 {
            self.load.clone()
        } else {
            format!("{}/{}", self.case, self.load)
        }
    }
}

/// How gates are evaluated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateOptions {
    /// The interval's confidence level (0.5 to 0.9999).
    pub confidence: f64,
    /// Resamples per gate.
    pub resamples: usize,
}

impl Default for GateOptions {
    fn default() -> GateOptions {
        GateOptions {
            confidence: DEFAULT_CONFIDENCE,
            resamples: RESAMPLES,
        }
    }
}

/// How a comparison's intervals were made: what compare.md and the JUnit file say of the method.
#[derive(Debug, Clone, PartialEq)]
pub struct Method {
    /// Runs of A.
    pub runs_a: usize,
    /// Runs of B.
    pub runs_b: usize,
    /// The intervals' confidence level.
    pub confidence: f64,
    /// Resamples of each kind per side and gate.
    pub resamples: usize,
}

impl Method {
    /// The method of a comparison of `runs_a` runs with `runs_b`, as `opts` sets it.
    pub fn new(runs_a: usize, runs_b: usize, opts: &GateOptions) -> Method {
        Method {
            runs_a,
            runs_b,
            confidence: opts.confidence,
            resamples: opts.resamples,
        }
    }

    /// `3 of A, 3 of B`.
    pub fn runs(&self) -> String {
        format!("{} of A, {} of B", self.runs_a, self.runs_b)
    }

    /// The interval's method in one sentence.
    pub fn interval(&self) -> String {
        let resample = if self.runs_a.max(self.runs_b) > 1 {
            "hierarchical bootstrap: the runs drawn with replacement, then whole seconds within \
             each run drawn"
        } else {
            "bootstrap of whole seconds of each run"
        };
        format!(
            "{}% interval of the change, Student's t on the log of B/A with the noise of each \
             side from a {resample} ({} resamples), corrected for few runs",
            fmt_conf(self.confidence),
            self.resamples
        )
    }

    /// What the reader must know about these intervals: one run a side sees no drift; sides of
    /// different sizes give lopsided intervals.
    pub fn caveats(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.runs_a == 1 && self.runs_b == 1 {
            out.push(
                "One run a side: the intervals see the noise within each run, not the drift \
                 between runs (another job's CPU, a neighbour's cache), which on a shared machine \
                 is often larger. Run each side several times (`proxybench run --repeat N`, \
                 `--interleave`) to see it."
                    .to_string(),
            );
        } else if self.runs_a != self.runs_b {
            let single = match (self.runs_a, self.runs_b) {
                (1, n) => format!(
                    " A's single run shows no drift of its own, so it is given B's run-to-run \
                     noise (from {n} runs)."
                ),
                (n, 1) => format!(
                    " B's single run shows no drift of its own, so it is given A's run-to-run \
                     noise (from {n} runs)."
                ),
                _ => String::new(),
            };
            out.push(format!(
                "The sides have {} and {} runs: the intervals are lopsided, as sure as the side \
                 with fewer runs allows.{single}",
                self.runs_a, self.runs_b
            ));
        }
        out
    }
}

/// Evaluates `gates` on the runs of side `a` (the baseline) and side `b`, each one or more
/// `(directory, data.json)`, which must be fit for gating and comparable ([`sides::check`]). A
/// gate naming a load that no case has is an error.
pub fn evaluate(
    gates: &[Gate],
    a: &[Run<'_>],
    b: &[Run<'_>],
    opts: &GateOptions,
) -> Result<Vec<GateResult>, Error> {
    sides::check(a, b)?;
    let mut la: Vec<Loaded<'_>> = a.iter().map(|(d, r)| Loaded::new(d, r)).collect();
    let mut lb: Vec<Loaded<'_>> = b.iter().map(|(d, r)| Loaded::new(d, r)).collect();
    let first = a[0].1;
    let mut out = Vec::new();
    for g in gates {
        check_subject(g, first)?;
        for (ci, case) in first.cases.iter().enumerate() {
            for (load, idx) in targets(g, case) {
                out.push(one(g, ci, &case.name, &load, &idx, &mut la, &mut lb, opts));
            }
        }
    }
    Ok(out)
}

/// Refuses a gate naming a load the runs do not have.
fn check_subject(g: &Gate, run: &model::RunResults) -> Result<(), Error> {
    if let Some(s) = g.subject.as_deref().filter(|s| *s != "all") {
        if !run
            .cases
            .iter()
            .any(|c| c.loads.iter().any(|l| l.name == s))
        {
            let mut known: Vec<&str> = Vec::new();
            for l in run.cases.iter().flat_map(|c| &c.loads) {
                if !known.contains(&l.name.as_str()) {
                    known.push(&l.name);
                }
            }
            return Err(Error::Mismatch(format!(
                "gate '{}': no load '{s}' in these runs (loads: {})",
                g.text,
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// The loads of `case` a gate reads: (its name in the table, the loads' indices).
fn targets(g: &Gate, case: &model::CaseResult) -> Vec<(String, Vec<usize>)> {
    match g.subject.as_deref() {
        None => case
            .loads
            .iter()
            .enumerate()
            .map(|(i, l)| (l.name.clone(), vec![i]))
            .collect(),
        Some("all") => vec![("all".into(), (0..case.loads.len()).collect())],
        Some(s) => case
            .loads
            .iter()
            .position(|l| l.name == s)
            .map(|i| vec![(s.to_string(), vec![i])])
            .unwrap_or_default(),
    }
}

/// One gate on loads `idx` of case `ci`.
#[allow(clippy::too_many_arguments)]
fn one(
    g: &Gate,
    ci: usize,
    case: &str,
    load: &str,
    idx: &[usize],
    la: &mut [Loaded<'_>],
    lb: &mut [Loaded<'_>],
    opts: &GateOptions,
) -> GateResult {
    let mut r = GateResult {
        gate: g.text.clone(),
        case: case.to_string(),
        load: load.to_string(),
        a: "-".into(),
        b: "-".into(),
        change: String::new(),
        interval: String::new(),
        detectable: String::new(),
        tighter: None,
        from: String::new(),
        note: None,
        expected: g.expected(),
        verdict: Verdict::Holds,
    };
    match g.bound {
        Bound::Absolute(limit) => {
            r.change = "exact".into();
            r.from = model::results_dir::DATA_JSON.into();
            if lb.len() > 1 {
                r.note = Some(format!(
                    "an absolute bound is checked on every run of B ({}); B shows its worst \
                     run, A its worst for reference",
                    lb.len()
                ));
            }
            if let Ok(Some(v)) = worst(g, limit, "A", la, ci, idx) {
                r.a = metric::show(v, g.kind);
            }
            r.verdict = match worst(g, limit, "B", lb, ci, idx) {
                Err(why) => Verdict::NotMeasurable(why.0),
                Ok(None) => Verdict::NotMeasurable("B has no run".into()),
                Ok(Some(v)) => {
                    r.b = metric::show(v, g.kind);
                    if holds(g.op, v, limit) {
                        Verdict::Holds
                    } else {
                        Verdict::Breached
                    }
                }
            };
        }
        Bound::Relative(bound) => {
            let source = data::source(la, lb, ci, idx);
            r.from = source.label().into();
            r.note = match (source.note(), data::how(&g.metric, &source)) {
                (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                (a, b) => a.or(b),
            };
            let side = |runs: &mut [Loaded<'_>]| -> Result<Runs, data::Unmeasurable> {
                let parts = runs
                    .iter_mut()
                    .map(|l| data::stat(l, ci, idx, &g.metric, &source).map(|b| (b.stat, b.blocks)))
                    .collect::<Result<Vec<(Stat, usize)>, _>>()?;
                Ok(Runs::new(parts))
            };
            let (sa, sb) = match (side(la), side(lb)) {
                (Ok(x), Ok(y)) => (x, y),
                (Err(why), _) | (_, Err(why)) => {
                    r.verdict = Verdict::NotMeasurable(why.0);
                    return r;
                }
            };
            let seed = fnv1a(&[&g.text, case, load]);
            match relative_change(&sa, &sb, opts.confidence, opts.resamples, seed) {
                Err(e) => r.verdict = Verdict::NotMeasurable(e.to_string()),
                Ok(i) => {
                    r.a = metric::show(i.a, g.kind);
                    r.b = metric::show(i.b, g.kind);
                    r.change = pct(i.change);
                    r.interval = format!("[{}, {}]", pct(i.lo), pct(i.hi));
                    r.verdict = relative_verdict(g.op, bound, i.lo, i.hi);
                    let up = g.op.up_is_worse();
                    let (d, beyond) = if up {
                        (
                            i.detectable.exp() - 1.0,
                            (1.0 + bound) * i.detectable.exp() - 1.0,
                        )
                    } else {
                        (
                            (-i.detectable).exp() - 1.0,
                            (1.0 + bound) * (-i.detectable).exp() - 1.0,
                        )
                    };
                    r.detectable = pct(d);
                    if i.within_only && lb.len() > 1 {
                        r.detectable.push_str(" (A: 1 run)");
                    }
                    let inside = if up { bound < d } else { bound > d };
                    if inside && i.detectable > 0.0 {
                        r.tighter = Some(format!(
                            "the bound {} is inside the smallest change these runs can tell \
                             from noise ({}): it fails only on a change beyond about {}",
                            pct(bound),
                            pct(d),
                            pct(beyond)
                        ));
                    }
                }
            }
        }
    }
    r
}

/// True when `v` meets the absolute bound `op limit`.
fn holds(op: Op, v: f64, limit: f64) -> bool {
    match op {
        Op::Le => v <= limit,
        Op::Lt => v < limit,
        Op::Ge => v >= limit,
        Op::Gt => v > limit,
        Op::Eq => (v - limit).abs() <= 1e-9 * v.abs().max(limit.abs()).max(1.0),
    }
}

/// The exact value of the gate's metric on the side's run farthest on the bad side of `limit`
/// (the largest for `<=`, the smallest for `>=`, the farthest from it for `==`); `Err` naming
/// the run when one cannot give it.
fn worst(
    g: &Gate,
    limit: f64,
    side: &str,
    runs: &[Loaded<'_>],
    ci: usize,
    idx: &[usize],
) -> Result<Option<f64>, data::Unmeasurable> {
    let mut out: Option<f64> = None;
    for (k, l) in runs.iter().enumerate() {
        let loads: Vec<&model::LoadSummary> =
            idx.iter().map(|&i| &l.run.cases[ci].loads[i]).collect();
        let v = metric::load_metric(&loads, &g.metric).map_err(|e| {
            data::Unmeasurable(format!("{}: {}", sides::who(side, k, runs.len()), e.0))
        })?;
        let badness = |x: f64| match g.op {
            Op::Le | Op::Lt => x,
            Op::Ge | Op::Gt => -x,
            Op::Eq => (x - limit).abs(),
        };
        if out.is_none_or(|w| badness(v) > badness(w)) {
            out = Some(v);
        }
    }
    Ok(out)
}

/// The verdict of an interval `[lo, hi]` of the change against a bound on it.
fn relative_verdict(op: Op, bound: f64, lo: f64, hi: f64) -> Verdict {
    let (beyond, better, worse) = if op.up_is_worse() {
        (lo > bound, hi < 0.0, lo > 0.0)
    } else {
        (hi < bound, lo > 0.0, hi < 0.0)
    };
    if beyond {
        Verdict::Regression
    } else if better {
        Verdict::Improvement
    } else if worse {
        Verdict::WorseWithinBound
    } else {
        Verdict::NoSignificantChange
    }
}

/// A signed percentage with two decimals (`+12.30%`), `+inf%` for a change from zero.
fn pct(f: f64) -> String {
    if f.is_infinite() {
        return if f > 0.0 { "+inf%" } else { "-inf%" }.into();
    }
    format!("{:+.2}%", f * 100.0)
}

/// The gates section of compare.md: the runs and the method, one row per gate and load, the
/// notes, and a closing count.
pub fn render(results: &[GateResult], cases: usize, method: &Method) -> String {
    let mut t = crate::fmt::Table::new(&[
        "Gate",
        "Load",
        ">A",
        ">B",
        ">Change",
        &format!(">{}% interval", fmt_conf(method.confidence)),
        ">Smallest detectable",
        "From",
        "Verdict",
        "Result",
    ]);
    let mut notes: Vec<String> = Vec::new();
    let mark = |n: &str, notes: &mut Vec<String>| -> usize {
        if !notes.iter().any(|x| x == n) {
            notes.push(n.to_string());
        }
        notes.iter().position(|x| x == n).expect("just pushed") + 1
    };
    for r in results {
        let from = match &r.note {
            Some(n) => format!("{} [{}]", r.from, mark(n, &mut notes)),
            None => r.from.clone(),
        };
        let detectable = match &r.tighter {
            Some(why) => {
                let n = format!("`{}` on {}: {why}", r.gate, r.place(cases));
                format!("{} (bound inside) [{}]", r.detectable, mark(&n, &mut notes))
            }
            None if r.detectable.is_empty() => "-".into(),
            None => r.detectable.clone(),
        };
        t.row([
            format!("`{}`", r.gate),
            r.place(cases),
            r.a.clone(),
            r.b.clone(),
            r.change.clone(),
            if r.interval.is_empty() {
                "-".into()
            } else {
                r.interval.clone()
            },
            detectable,
            from,
            r.verdict.to_string(),
            if r.pass() { "pass" } else { "FAIL" }.into(),
        ]);
    }
    let mut out = String::from("## Gates\n\n");
    out.push_str(&format!(
        "Runs: {}. Intervals: {}.\n\n",
        method.runs(),
        method.interval()
    ));
    for c in method.caveats() {
        out.push_str(&c);
        out.push_str("\n\n");
    }
    out.push_str(&t.render());
    out.push('\n');
    for (i, n) in notes.iter().enumerate() {
        out.push_str(&format!("[{}] {n}\n", i + 1));
    }
    if !notes.is_empty() {
        out.push('\n');
    }
    out.push_str(&format!(
        "A change counts only when it is significant: a gate on a change from A fails when its \
         whole {conf}% interval lies beyond the bound. The smallest detectable change is the \
         change these runs can tell from noise at {conf}%, from A's runs alone: a change of that \
         size is called about half the time, one of twice that size almost always. Intervals \
         are seeded by the gate and load, so the same runs give the same numbers (`requests`: \
         the per-request records; `seconds`: the per-second values). Gates with an absolute \
         bound are checked exactly on every run of B.\n\n",
        conf = fmt_conf(method.confidence),
    ));
    let failed = results.iter().filter(|r| !r.pass()).count();
    out.push_str(&format!(
        "Gates: {} held, {failed} failed.\n",
        results.len() - failed
    ));
    out
}

/// The confidence level as a percentage without needless decimals (95, 99.5).
pub fn fmt_conf(c: f64) -> String {
    let p = c * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{}", p.round() as i64)
    } else {
        format!("{}", (p * 1000.0).round() / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(text: &str) -> (usize, String) {
        let e = Gate::parse(text).unwrap_err();
        (e.column, e.msg)
    }

    #[test]
    fn gates_parse_in_the_checks_vocabulary() {
        let g = Gate::parse("coffee.p99 <= +10%").unwrap();
        assert_eq!(
            (g.subject.as_deref(), g.metric.as_str(), g.op, g.bound),
            (Some("coffee"), "p99", Op::Le, Bound::Relative(0.10))
        );
        let g = Gate::parse("failures == 0").unwrap();
        assert_eq!((g.subject, g.bound), (None, Bound::Absolute(0.0)));
        let g = Gate::parse(" rps >= -5% ").unwrap();
        assert_eq!(
            (g.text.as_str(), g.bound),
            ("rps >= -5%", Bound::Relative(-0.05))
        );
        let g = Gate::parse("p99.9 <= +0%").unwrap();
        assert_eq!((g.subject, g.metric.as_str()), (None, "p99.9"));
        let g = Gate::parse("tea.p99.9<=250ms").unwrap();
        assert_eq!(
            (g.subject.as_deref(), g.metric.as_str(), g.bound),
            (Some("tea"), "p99.9", Bound::Absolute(250_000.0))
        );
        let g = Gate::parse("all.failure_rate <= 0.5%").unwrap();
        assert_eq!(g.bound, Bound::Absolute(0.005));
        assert!(Gate::parse("coffee.status_503 == 0").is_ok());
        assert!(Gate::parse("error_read_reset <= +50%").is_ok());
    }

    #[test]
    fn bad_gates_say_where() {
        assert_eq!(bad("coffee.p99 +10%").0, 16);
        assert_eq!(
            bad("coffee.p99 = +10%"),
            (12, "'=' is not a comparison; write ==".into())
        );
        assert_eq!(bad("<= 5").0, 1);
        let (col, msg) = bad("coffee.p999 <= +10%");
        assert_eq!(col, 8);
        assert!(msg.contains("p99.9"), "{msg}");
        let (col, msg) = bad("coffee.speed <= +10%");
        assert_eq!(col, 8);
        assert!(
            msg.starts_with("unknown metric 'speed' for 'coffee'"),
            "{msg}"
        );
        assert_eq!(bad("coffee.p99 <= ").0, 15);
        let (col, msg) = bad("coffee.p99 <= +10");
        assert_eq!(col, 15);
        assert!(msg.contains("+10%"), "{msg}");
        let (col, msg) = bad("coffee.p99 <= tea.p99");
        assert_eq!(col, 15);
        assert!(msg.contains("not with another metric"), "{msg}");
        assert_eq!(bad("coffee.p99 <= 10 parsecs").0, 15);
        assert_eq!(bad("coffee.p99 == +10%").0, 12);
        assert!(bad("all.p99 <= +10%").1.contains("name the load"));
        assert!(bad("backends.spread <= 1%")
            .1
            .contains("subject of scenario checks"));
        assert_eq!(bad("tea.late_max <= +10%").0, 5);
        let e = Gate::parse("coffee.p99 <== +10%").unwrap_err();
        assert!(
            e.to_string().starts_with(
                "--gate 'coffee.p99 <== +10%': column 14: value '= +10%' is not a number"
            ),
            "{e}"
        );
    }

    #[test]
    fn verdicts_follow_the_interval_and_the_direction() {
        use Verdict::*;
        // Latency (up is worse) with a +10% bound.
        assert_eq!(relative_verdict(Op::Le, 0.10, 0.12, 0.30), Regression);
        assert_eq!(relative_verdict(Op::Le, 0.10, 0.05, 0.30), WorseWithinBound);
        assert_eq!(
            relative_verdict(Op::Le, 0.10, -0.02, 0.03),
            NoSignificantChange
        );
        assert_eq!(relative_verdict(Op::Le, 0.10, -0.20, -0.05), Improvement);
        // Throughput (down is worse) with a -5% bound.
        assert_eq!(relative_verdict(Op::Ge, -0.05, -0.20, -0.08), Regression);
        assert_eq!(
            relative_verdict(Op::Ge, -0.05, -0.06, -0.01),
            WorseWithinBound
        );
        assert_eq!(relative_verdict(Op::Ge, -0.05, 0.01, 0.04), Improvement);
        assert!(!Regression.pass() && !Breached.pass() && !NotMeasurable("x".into()).pass());
        assert_eq!(fmt_conf(0.95), "95");
        assert_eq!(fmt_conf(0.995), "99.5");
        assert_eq!(pct(0.1234), "+12.34%");
        assert_eq!(pct(-0.05), "-5.00%");
    }
}
