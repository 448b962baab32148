//! JUnit XML, the test-report format CI systems display (Jenkins, GitLab, GitHub Actions
//! reporters): `run --junit FILE` writes one testcase per scenario check, `compare --junit FILE`
//! one per gate and load. A failed check or gate is a `<failure>`; one the run could not measure
//! is `<skipped>` with its reason. Each testcase carries its expected and actual values in its
//! `<system-out>`. The layout follows the JUnit schema of Jenkins' xUnit plugin
//! (`crates/report/schema/junit-10.xsd`), which the tests validate every file against.

use crate::gate::{GateResult, Verdict};
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

/// One testcase before it is written.
struct Case {
    name: String,
    classname: String,
    expected: String,
    actual: String,
    /// `Some(message)` for a failure.
    failure: Option<String>,
    /// `Some(reason)` for a testcase the run could not measure.
    skipped: Option<String>,
}

/// One `<testsuite>`: its name, timestamp, properties and testcases.
struct Suite<'a> {
    name: String,
    timestamp: &'a str,
    props: Vec<(&'static str, String)>,
    cases: Vec<Case>,
}

/// A whole file: `<testsuites>` around `suites`.
fn document(name: &str, suites: &[Suite<'_>]) -> String {
    let failed = |cs: &[Case]| cs.iter().filter(|c| c.failure.is_some()).count();
    let tests: usize = suites.iter().map(|s| s.cases.len()).sum();
    let failures: usize = suites.iter().map(|s| failed(&s.cases)).sum();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\">",
        esc(name)
    );
    for s in suites {
        let skipped = s.cases.iter().filter(|c| c.skipped.is_some()).count();
        let _ = write!(
            x,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{skipped}\"",
            esc(&s.name),
            s.cases.len(),
            failed(&s.cases)
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
            let values = format!("expected: {}\nactual: {}", c.expected, c.actual);
            if let Some(why) = &c.skipped {
                let _ = writeln!(x, "      <skipped message=\"{}\"/>", esc(why));
            } else if let Some(msg) = &c.failure {
                let _ = writeln!(
                    x,
                    "      <failure message=\"{}\" type=\"proxybench\">{}</failure>",
                    esc(msg),
                    esc(&values)
                );
            }
            let _ = writeln!(x, "      <system-out>{}</system-out>", esc(&values));
            x.push_str("    </testcase>\n");
        }
        x.push_str("  </testsuite>\n");
    }
    x.push_str("</testsuites>\n");
    x
}

/// The suite of one run's checks; `kind` names the proxy when a run compared several.
fn check_suite<'a>(r: &'a RunResults, kind: Option<&str>) -> Suite<'a> {
    let base = match kind {
        Some(k) => format!("proxybench.{}.{k}", r.scenario),
        None => format!("proxybench.{}", r.scenario),
    };
    let cases: Vec<Case> = r
        .checks
        .iter()
        .map(|c| {
            let classname = match &c.case {
                Some(k) => format!("{base}.{k}"),
                None => base.clone(),
            };
            let skipped = c.not_measurable().map(str::to_string);
            let failure = (!c.pass && skipped.is_none())
                .then(|| format!("expected {}, measured {}", c.expected, c.actual));
            Case {
                name: c.name.clone(),
                classname,
                expected: c.expected.clone(),
                actual: c.actual.clone(),
                failure,
                skipped,
            }
        })
        .collect();
    let outcome = match (&r.partial, &r.abort_reason) {
        (false, _) => "complete".to_string(),
        (true, Some(why)) => format!("partial: {why}"),
        (true, None) => "partial".to_string(),
    };
    Suite {
        name: match kind {
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

/// `run --junit`: one testcase per check of the run, classname `proxybench.SCENARIO.CASE`.
pub fn checks(r: &RunResults) -> String {
    document(
        &format!("proxybench run {}", r.scenario),
        &[check_suite(r, None)],
    )
}

/// `run --proxy a,b --junit`: one suite per proxy kind that ran, classname
/// `proxybench.SCENARIO.KIND.CASE`.
pub fn checks_by_proxy(scenario: &str, runs: &[(&str, &RunResults)]) -> String {
    let suites: Vec<Suite<'_>> = runs.iter().map(|(k, r)| check_suite(r, Some(k))).collect();
    document(&format!("proxybench run {scenario}"), &suites)
}

/// `compare --junit`: one testcase per gate and load, classname
/// `proxybench.SCENARIO.CASE.LOAD`; `a` and `b` name the runs (their directories).
pub fn gates(
    scenario: &str,
    (a, b): (&str, &str),
    confidence: f64,
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
            let skipped = match &g.verdict {
                Verdict::NotMeasurable(why) => Some(why.clone()),
                _ => None,
            };
            let failure = (!g.pass() && skipped.is_none())
                .then(|| format!("{}: expected {}, measured {actual}", g.verdict, g.expected));
            Case {
                name: g.gate.clone(),
                classname: format!("proxybench.{scenario}.{}.{}", g.case, g.load),
                expected: g.expected.clone(),
                actual,
                failure,
                skipped,
            }
        })
        .collect();
    let suite = Suite {
        name: format!("{scenario}: gates"),
        timestamp: "",
        props: vec![
            ("scenario", scenario.to_string()),
            ("baseline (A)", a.to_string()),
            ("candidate (B)", b.to_string()),
            ("confidence", crate::gate::fmt_conf(confidence) + "%"),
        ],
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
}
