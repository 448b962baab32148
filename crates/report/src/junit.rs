//! JUnit XML, the test-report format CI systems display (Jenkins, GitLab, GitHub Actions
//! reporters): `run --junit FILE` writes one testcase per scenario check and one for the run's
//! outcome, `compare --junit FILE` one per gate and load. The file agrees with the exit code:
//! whenever the command exits non-zero, the file counts at least one failure or error.
//!
//! - a failed check or gate is a `<failure>`;
//! - a check or gate the run could not measure is an `<error>` (counted in `errors=`): it
//!   fails the run, as its exit code says, since a claim without evidence is not a pass;
//! - what fails a run besides its checks is a testcase too: the run cut short (`run: complete`,
//!   an `<error>`: interrupted, a case aborted), a load whose every request failed (the target
//!   was unusable: a `<failure>`), an action that failed, a run of `--proxy a,b` or
//!   `--repeat N` that could not run or was not run;
//! - a command that stopped on bad input or could not start writes a file of one `<error>`
//!   ([`stopped`]), so that no stale green file is left where CI looks.
//!
//! Each testcase carries its expected and actual values in its `<system-out>`. The layout
//! follows the JUnit schema of Jenkins' xUnit plugin (`crates/report/schema/junit-10.xsd`),
//! which the tests validate every file against.

use crate::gate::{GateResult, Method, Verdict};
use model::RunResults;
use std::fmt::Write;

/// Escapes text for an XML attribute or element, dropping characters XML 1.0 cannot carry.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// How a testcase came out.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Pass,
    /// A `<failure>` with its message: the claim was measured and does not hold.
    Failure(String),
    /// An `<error>` with its message: the claim could not be measured, or the run did not
    /// complete.
    Error(String),
}

/// One testcase before it is written.
struct Case {
    name: String,
    classname: String,
    /// What its `<system-out>` holds, one `key: value` per line (`expected`, `actual`...).
    out: String,
    outcome: Outcome,
}

/// One `<testsuite>`: its name, timestamp, properties and testcases.
struct Suite<'a> {
    name: String,
    timestamp: &'a str,
    props: Vec<(&'static str, String)>,
    cases: Vec<Case>,
}

/// Counts of failures and errors in `cases`.
fn counts(cases: &[Case]) -> (usize, usize) {
    let f = cases
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Failure(_)))
        .count();
    let e = cases
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Error(_)))
        .count();
    (f, e)
}

/// A whole file: `<testsuites>` around `suites`.
fn document(name: &str, suites: &[Suite<'_>]) -> String {
    let tests: usize = suites.iter().map(|s| s.cases.len()).sum();
    let (failures, errors) = suites.iter().fold((0, 0), |(f, e), s| {
        let (sf, se) = counts(&s.cases);
        (f + sf, e + se)
    });
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">",
        esc(name)
    );
    for s in suites {
        let (f, e) = counts(&s.cases);
        let _ = write!(
            x,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{f}\" errors=\"{e}\" skipped=\"0\"",
            esc(&s.name),
            s.cases.len(),
        );
        if !s.timestamp.is_empty() {
            let _ = write!(x, " timestamp=\"{}\"", esc(s.timestamp));
        }
        x.push_str(">\n    <properties>\n");
        for (k, v) in &s.props {
            let _ = writeln!(
                x,
                "      <property name=\"{}\" value=\"{}\"/>",
                esc(k),
                esc(v)
            );
        }
        x.push_str("    </properties>\n");
        for c in &s.cases {
            let _ = writeln!(
                x,
                "    <testcase name=\"{}\" classname=\"{}\">",
                esc(&c.name),
                esc(&c.classname)
            );
            match &c.outcome {
                Outcome::Pass => {}
                Outcome::Failure(msg) => {
                    let _ = writeln!(
                        x,
                        "      <failure message=\"{}\" type=\"proxybench\">{}</failure>",
                        esc(msg),
                        esc(&c.out)
                    );
                }
                Outcome::Error(msg) => {
                    let _ = writeln!(
                        x,
                        "      <error message=\"{}\" type=\"proxybench\">{}</error>",
                        esc(msg),
                        esc(&c.out)
                    );
                }
            }
            let _ = writeln!(x, "      <system-out>{}</system-out>", esc(&c.out));
            x.push_str("    </testcase>\n");
        }
        x.push_str("  </testsuite>\n");
    }
    x.push_str("</testsuites>\n");
    x
}

/// `expected: ...\nactual: ...`.
fn values(expected: &str, actual: &str) -> String {
    format!("expected: {expected}\nactual: {actual}")
}

/// The testcases of what fails a run besides its checks: `run: complete` (an error when the
/// run was cut short), each load whose every request failed, each action that failed.
fn outcome_cases(r: &RunResults, base: &str) -> Vec<Case> {
    let mut out = Vec::new();
    let (actual, outcome) = match (r.partial, r.abort_reason.as_deref()) {
        (false, _) => ("complete".to_string(), Outcome::Pass),
        (true, Some("interrupted")) => (
            "interrupted (Ctrl-C or SIGTERM); partial results kept".to_string(),
            Outcome::Error("interrupted: the run is partial".into()),
        ),
        (true, why) => {
            let why = why.unwrap_or("it stopped early");
            (
                format!("partial: {why}"),
                Outcome::Error(format!("the run is partial: {why}")),
            )
        }
    };
    out.push(Case {
        name: "run: complete".into(),
        classname: base.to_string(),
        out: values("every case run to its end", &actual),
        outcome,
    });
    for place in r.unusable_loads() {
        let (case, load) = place.split_once('/').unwrap_or(("", &place));
        out.push(Case {
            name: format!("load {load}: the target answered"),
            classname: format!("{base}.{case}"),
            out: values(
                "some request answered",
                "every request failed: the target was unusable",
            ),
            outcome: Outcome::Failure(format!(
                "every request of load {place} failed: the target was unusable"
            )),
        });
    }
    for (case, e) in r.failed_actions() {
        let name = format!("action {} {} at {:.2}s", e.action, e.detail, e.t_s);
        let why = e.error.clone().unwrap_or_default();
        out.push(Case {
            name,
            classname: format!("{base}.{case}"),
            out: values("the action succeeds", &format!("failed: {why}")),
            outcome: Outcome::Failure(format!("the action failed: {why}")),
        });
    }
    out
}

/// The suite of one run's checks and outcome; `label` names the run when a command made
/// several (a proxy kind of `--proxy a,b`, a run of `--repeat N`).
fn check_suite<'a>(r: &'a RunResults, label: Option<&str>) -> Suite<'a> {
    let base = match label {
        Some(k) => format!("proxybench.{}.{k}", r.scenario),
        None => format!("proxybench.{}", r.scenario),
    };
    let mut cases: Vec<Case> = r
        .checks
        .iter()
        .map(|c| {
            let classname = match &c.case {
                Some(k) => format!("{base}.{k}"),
                None => base.clone(),
            };
            let outcome = match (c.pass, c.not_measurable()) {
                (true, _) => Outcome::Pass,
                (false, Some(why)) => Outcome::Error(why.to_string()),
                (false, None) => {
                    Outcome::Failure(format!("expected {}, measured {}", c.expected, c.actual))
                }
            };
            Case {
                name: c.name.clone(),
                classname,
                out: values(&c.expected, &c.actual),
                outcome,
            }
        })
        .collect();
    cases.extend(outcome_cases(r, &base));
    let outcome = match (&r.partial, &r.abort_reason) {
        (false, _) => "complete".to_string(),
        (true, Some(why)) => format!("partial: {why}"),
        (true, None) => "partial".to_string(),
    };
    Suite {
        name: match label {
            Some(k) => format!("{} ({k}): checks", r.scenario),
            None => format!("{}: checks", r.scenario),
        },
        timestamp: &r.started_at,
        props: vec![
            ("scenario", r.scenario.clone()),
            ("form", if r.quick { "quick" } else { "full" }.to_string()),
            ("proxy", crate::fmt::proxy_name(&r.env).to_string()),
            (
                "proxy version",
                r.env.proxy.lines().next().unwrap_or("").to_string(),
            ),
            ("proxybench", r.env.proxybench.clone()),
            ("outcome", outcome),
        ],
        cases,
    }
}

/// `run --junit`: one testcase per check of the run, classname `proxybench.SCENARIO.CASE`, and
/// the run's outcome ([`outcome_cases`]).
pub fn checks(r: &RunResults) -> String {
    document(
        &format!("proxybench run {}", r.scenario),
        &[check_suite(r, None)],
    )
}

/// One run of a command that makes several (`run --proxy a,b`, `run --repeat N`), as the
/// JUnit file lists it.
#[derive(Debug, Clone, Copy)]
pub enum Labelled<'a> {
    /// It ran: its checks and outcome.
    Ran(&'a RunResults),
    /// It could not run (why): an error.
    Failed(&'a str),
    /// It was never started (why: the command was interrupted before): an error.
    NotRun(&'a str),
}

/// `run --proxy a,b --junit` and `run --repeat N --junit`: one suite per run, named by its
/// label (the proxy kind, `a-1`...), classname `proxybench.SCENARIO.LABEL.CASE`; a run that
/// could not run or was not run is a suite of one error.
pub fn checks_by_label(scenario: &str, runs: &[(&str, Labelled<'_>)]) -> String {
    let suites: Vec<Suite<'_>> = runs
        .iter()
        .map(|(label, r)| match r {
            Labelled::Ran(r) => check_suite(r, Some(label)),
            Labelled::Failed(why) | Labelled::NotRun(why) => {
                let verb = if matches!(r, Labelled::Failed(_)) {
                    "could not run"
                } else {
                    "was not run"
                };
                Suite {
                    name: format!("{scenario} ({label}): checks"),
                    timestamp: "",
                    props: vec![
                        ("scenario", scenario.to_string()),
                        ("outcome", why.to_string()),
                    ],
                    cases: vec![Case {
                        name: "run: complete".into(),
                        classname: format!("proxybench.{scenario}.{label}"),
                        out: values("the run completes", &format!("{verb}: {why}")),
                        outcome: Outcome::Error(format!("the run {verb}: {why}")),
                    }],
                }
            }
        })
        .collect();
    document(&format!("proxybench run {scenario}"), &suites)
}

/// A command that stopped before it had anything to report (bad input, a run that could not
/// start, runs that cannot be gated): one testcase, an `<error>` with the message, so CI shows
/// why rather than a stale or missing file. `command` is `run`, `compare`...
pub fn stopped(command: &str, message: &str) -> String {
    let suite = Suite {
        name: format!("proxybench {command}"),
        timestamp: "",
        props: vec![("outcome", format!("stopped: {message}"))],
        cases: vec![Case {
            name: format!("{command}: started"),
            classname: format!("proxybench.{command}"),
            out: values("the command runs", &format!("stopped: {message}")),
            outcome: Outcome::Error(message.to_string()),
        }],
    };
    document(&format!("proxybench {command}"), &[suite])
}

/// `compare --junit`: one testcase per gate and load, classname
/// `proxybench.SCENARIO.CASE.LOAD`; `a` and `b` name the sides (their directories), `method`
/// says how many runs each side had and how the intervals were made. Each testcase's
/// `<system-out>` holds the expected and actual values, the smallest change the runs can tell
/// from noise, and the verdict.
pub fn gates(
    scenario: &str,
    (a, b): (&str, &str),
    method: &Method,
    results: &[GateResult],
) -> String {
    let cases: Vec<Case> = results
        .iter()
        .map(|g| {
            let actual = match &g.verdict {
                Verdict::NotMeasurable(why) => format!("not measurable: {why}"),
                v if g.interval.is_empty() => format!("B {} (A {}): {v}", g.b, g.a),
                v => format!(
                    "change {} {} (A {}, B {}, from {}): {v}",
                    g.change, g.interval, g.a, g.b, g.from
                ),
            };
            let mut out = values(&g.expected, &actual);
            if !g.detectable.is_empty() {
                let _ = write!(out, "\nsmallest detectable change: {}", g.detectable);
            }
            if let Some(t) = &g.tighter {
                let _ = write!(out, " ({t})");
            }
            let _ = write!(out, "\nverdict: {}", g.verdict);
            let outcome = match &g.verdict {
                Verdict::NotMeasurable(why) => Outcome::Error(format!("not measurable: {why}")),
                v if !g.pass() => {
                    Outcome::Failure(format!("{v}: expected {}, measured {actual}", g.expected))
                }
                _ => Outcome::Pass,
            };
            Case {
                name: g.gate.clone(),
                classname: format!("proxybench.{scenario}.{}.{}", g.case, g.load),
                out,
                outcome,
            }
        })
        .collect();
    let mut props = vec![
        ("scenario", scenario.to_string()),
        ("baseline (A)", a.to_string()),
        ("candidate (B)", b.to_string()),
        ("runs (A)", method.runs_a.to_string()),
        ("runs (B)", method.runs_b.to_string()),
        ("confidence", crate::gate::fmt_conf(method.confidence) + "%"),
        ("interval", method.interval()),
    ];
    for c in method.caveats() {
        props.push(("caveat", c));
    }
    let suite = Suite {
        name: format!("{scenario}: gates"),
        timestamp: "",
        props,
        cases,
    };
    document("proxybench compare", &[suite])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_control_characters_dropped() {
        assert_eq!(
            esc("a <= b & \"c\" 'd'\u{1}\n"),
            "a &lt;= b &amp; &quot;c&quot; &apos;d&apos;\n"
        );
    }

    #[test]
    fn a_stopped_command_is_one_error() {
        let x = stopped(
            "compare",
            "cannot gate B (x): the run is partial (interrupted)",
        );
        assert!(
            x.contains(
                "<testsuites name=\"proxybench compare\" tests=\"1\" failures=\"0\" errors=\"1\">"
            ),
            "{x}"
        );
        assert!(
            x.contains("<error message=\"cannot gate B (x): the run is partial"),
            "{x}"
        );
    }
}
