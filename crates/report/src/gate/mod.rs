//! `proxybench compare A B --gate EXPR`: a regression gate for CI. A gate is one line in the
//! scenario checks' vocabulary ([`model::metric`]) with either an absolute bound, checked
//! exactly on B (`failures == 0`, `coffee.p99 <= 250ms`), or a bound on the relative change from
//! A to B (`coffee.p99 <= +10%`, `rps >= -5%`), which fails only when the change is
//! significantly beyond it: when the whole bootstrap interval ([`bootstrap`]) lies past the
//! bound.
//!
//! `LOAD.METRIC` gates one load (in every case that has it), `all.METRIC` every load of a case
//! summed (as checks read `all`), and a bare `METRIC` each load on its own.

pub mod bootstrap;
mod data;

use crate::Error;
use bootstrap::{fnv1a, relative_change};
use data::Loaded;
use model::metric::{self, MetricKind};
use model::RunResults;
use std::fmt;
use std::path::Path;

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
    /// lists it as skipped.
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

/// Refuses to gate runs that are not of the same thing: another scenario, another form, other
/// cases, other loads, or loads run differently. The message names the first difference.
pub fn check_comparable(a: &RunResults, b: &RunResults) -> Result<(), Error> {
    let differ = |what: String| Err(Error::Mismatch(what));
    if a.scenario != b.scenario {
        return differ(format!(
            "A ran scenario '{}', B ran '{}'",
            a.scenario, b.scenario
        ));
    }
    if a.quick != b.quick {
        let form = |r: &RunResults| if r.quick { "--quick" } else { "full" };
        return differ(format!(
            "A ran the {} form, B the {} form",
            form(a),
            form(b)
        ));
    }
    let names = |r: &RunResults| r.cases.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    if names(a) != names(b) {
        return differ(format!(
            "A ran cases {}, B ran {}",
            names(a).join(", "),
            names(b).join(", ")
        ));
    }
    for (ca, cb) in a.cases.iter().zip(&b.cases) {
        let loads =
            |c: &model::CaseResult| c.loads.iter().map(|l| l.name.clone()).collect::<Vec<_>>();
        if loads(ca) != loads(cb) {
            return differ(format!(
                "case '{}': A ran loads {}, B ran {}",
                ca.name,
                loads(ca).join(", "),
                loads(cb).join(", ")
            ));
        }
        for (la, lb) in ca.loads.iter().zip(&cb.loads) {
            let path =
                |u: &str| model::url::Url::parse(u).map_or_else(|_| "/".to_string(), |u| u.path);
            let mode = |l: &model::LoadSummary| match &l.mode {
                model::LoadMode::Closed => "closed loop".to_string(),
                model::LoadMode::Open { rate, .. } => format!("open loop at {rate}/s"),
            };
            let planned = |l: &model::LoadSummary| match l.planned_s {
                Some(s) => format!("{s}s"),
                None => "a request count".into(),
            };
            let facts: [(&str, String, String); 6] = [
                ("method", la.method.clone(), lb.method.clone()),
                ("path", path(&la.url), path(&lb.url)),
                ("mode", mode(la), mode(lb)),
                (
                    "connections",
                    la.connections.to_string(),
                    lb.connections.to_string(),
                ),
                ("threads", la.threads.to_string(), lb.threads.to_string()),
                ("length", planned(la), planned(lb)),
            ];
            for (what, x, y) in facts {
                if x != y {
                    return differ(format!(
                        "case '{}', load '{}': {what} {x} in A, {y} in B",
                        ca.name, la.name
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Evaluates `gates` on runs `a` (the baseline, read from `dir_a`) and `b`, which must be
/// comparable ([`check_comparable`]). A gate naming a load that no case has is an error.
pub fn evaluate(
    gates: &[Gate],
    (dir_a, a): (&Path, &RunResults),
    (dir_b, b): (&Path, &RunResults),
    opts: &GateOptions,
) -> Result<Vec<GateResult>, Error> {
    check_comparable(a, b)?;
    let mut la = Loaded::new(dir_a, a);
    let mut lb = Loaded::new(dir_b, b);
    let mut out = Vec::new();
    for g in gates {
        if let Some(s) = g.subject.as_deref().filter(|s| *s != "all") {
            if !a.cases.iter().any(|c| c.loads.iter().any(|l| l.name == s)) {
                let mut known: Vec<&str> = Vec::new();
                for l in a.cases.iter().flat_map(|c| &c.loads) {
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
        for (ci, case) in a.cases.iter().enumerate() {
            let targets: Vec<(String, Vec<usize>)> = match g.subject.as_deref() {
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
            };
            for (load, idx) in targets {
                out.push(one(g, ci, &case.name, &load, &idx, &mut la, &mut lb, opts));
            }
        }
    }
    Ok(out)
}

/// One gate on loads `idx` of case `ci`.
#[allow(clippy::too_many_arguments)]
fn one(
    g: &Gate,
    ci: usize,
    case: &str,
    load: &str,
    idx: &[usize],
    la: &mut Loaded<'_>,
    lb: &mut Loaded<'_>,
    opts: &GateOptions,
) -> GateResult {
    let exact = |l: &Loaded<'_>| -> Result<f64, String> {
        let loads: Vec<&model::LoadSummary> =
            idx.iter().map(|&i| &l.run.cases[ci].loads[i]).collect();
        metric::load_metric(&loads, &g.metric).map_err(|e| e.0)
    };
    let mut r = GateResult {
        gate: g.text.clone(),
        case: case.to_string(),
        load: load.to_string(),
        a: "-".into(),
        b: "-".into(),
        change: String::new(),
        interval: String::new(),
        from: String::new(),
        note: None,
        expected: g.expected(),
        verdict: Verdict::Holds,
    };
    match g.bound {
        Bound::Absolute(limit) => {
            r.change = "exact".into();
            r.from = "data.json".into();
            if let Ok(v) = exact(la) {
                r.a = metric::show(v, g.kind);
            }
            r.verdict = match exact(lb) {
                Err(why) => Verdict::NotMeasurable(format!("B: {why}")),
                Ok(v) => {
                    r.b = metric::show(v, g.kind);
                    let holds = match g.op {
                        Op::Le => v <= limit,
                        Op::Lt => v < limit,
                        Op::Ge => v >= limit,
                        Op::Gt => v > limit,
                        Op::Eq => (v - limit).abs() <= 1e-9 * v.abs().max(limit.abs()).max(1.0),
                    };
                    if holds {
                        Verdict::Holds
                    } else {
                        Verdict::Breached
                    }
                }
            };
        }
        Bound::Relative(bound) => {
            let source = data::source(la, lb, ci, idx);
            let (sa, sb) = match (
                data::stat(la, ci, idx, &g.metric, &source),
                data::stat(lb, ci, idx, &g.metric, &source),
            ) {
                (Ok(x), Ok(y)) => (x, y),
                (Err(why), _) | (_, Err(why)) => {
                    r.from = source.label().into();
                    r.note = source.note();
                    r.verdict = Verdict::NotMeasurable(why);
                    return r;
                }
            };
            r.from = source.label().into();
            r.note = match (source.note(), data::how(&g.metric, &source)) {
                (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                (a, b) => a.or(b),
            };
            let seed = fnv1a(&[&g.text, case, load]);
            match relative_change(
                &sa.stat,
                &sb.stat,
                sa.blocks,
                sb.blocks,
                opts.confidence,
                opts.resamples,
                seed,
            ) {
                Err(e) => r.verdict = Verdict::NotMeasurable(e.to_string()),
                Ok(i) => {
                    r.a = metric::show(i.a, g.kind);
                    r.b = metric::show(i.b, g.kind);
                    r.change = pct(i.change);
                    r.interval = format!("[{}, {}]", pct(i.lo), pct(i.hi));
                    r.verdict = relative_verdict(g.op, bound, i.lo, i.hi);
                }
            }
        }
    }
    r
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

/// The gates section of compare.md: one row per gate and load, the notes, and a closing count.
pub fn render(results: &[GateResult], cases: usize, opts: &GateOptions) -> String {
    let mut t = crate::fmt::Table::new(&[
        "Gate",
        "Load",
        ">A",
        ">B",
        ">Change",
        &format!(">{}% interval", fmt_conf(opts.confidence)),
        "From",
        "Verdict",
        "Result",
    ]);
    let mut notes: Vec<String> = Vec::new();
    for r in results {
        let from = match &r.note {
            Some(n) => {
                if !notes.contains(n) {
                    notes.push(n.clone());
                }
                let k = notes.iter().position(|x| x == n).expect("just pushed") + 1;
                format!("{} [{k}]", r.from)
            }
            None => r.from.clone(),
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
            from,
            r.verdict.to_string(),
            if r.pass() { "pass" } else { "FAIL" }.into(),
        ]);
    }
    let mut out = String::from("## Gates\n\n");
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
         whole {}% interval lies beyond the bound. Intervals are percentile bootstraps of {} \
         resamples of whole seconds of each run (`requests`: the per-request records; \
         `seconds`: the per-second values), seeded by the gate and load, so the same runs give \
         the same numbers. Gates with an absolute bound are checked exactly on B.\n\n",
        fmt_conf(opts.confidence),
        opts.resamples
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
