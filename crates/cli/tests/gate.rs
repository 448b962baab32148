//! `proxybench compare A B --gate ...` and `--junit` end to end, on real runs (real nginx, real
//! backends on loopback, 4-second open-loop loads): two runs of the same scenario pass every
//! bounded gate; a backend 2 ms slower fails the p99 gate; a backend answering 5% of
//! requests with 503 fails the failures gate; bad gates and runs of different things are exit 2.
//! Every JUnit file written is validated against the JUnit schema CI systems read (Jenkins'
//! xUnit plugin's junit-10.xsd) with xmllint.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_proxybench")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The scenario with the backends' profile and extra checks filled in. Its name is the same
/// for every variant: they are runs of one scenario against backends that behave differently.
fn scenario(profile: &str, checks: &str) -> String {
    format!(
        r#"
name = "gate"
description = "Two backends behind nginx, open-loop load"
checks = [{checks}]

[[backends]]
name = "app"
count = 2
profile = "{profile}"

[proxy]
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "app"
backends = "app"
keepalive = 16
[[proxy.routes]]
path = "/"
upstream = "app"

[[loads]]
name = "coffee"
url = "http://localhost/coffee"
rate = 1000
connections = 16
duration = "4s"
"#
    )
}

const BASE: &str = "latency=1ms";
/// 2 ms more latency in every backend.
const SLOW: &str = "latency=3ms";
/// The base profile with 5% of answers 503.
const ERRORS: &str = "latency=1ms; status=503:5%";

/// Runs a scenario file into `root/NAME` and returns the run's directory and output.
fn run(root: &Path, name: &str, toml: &str, extra: &[&str]) -> (PathBuf, Output) {
    let d = root.join(name);
    fs::create_dir_all(&d).unwrap();
    let file = d.join("scenario.toml");
    fs::write(&file, toml).unwrap();
    // The run (its load, backends and nginx) inherits real-time priority, so a 2 ms change in
    // the tail is measured against the scheduler of a busy shared machine as little as can be.
    let _rt = testkit::Realtime::enter();
    let out = Command::new(bin())
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .arg("--results")
        .arg(d.join("results"))
        .args(extra)
        .output()
        .unwrap();
    let scn = d.join("results").join("gate");
    let stamp = fs::read_dir(&scn)
        .unwrap_or_else(|_| panic!("no results: {}", text(&out)))
        .flatten()
        .next()
        .unwrap()
        .path();
    (stamp, out)
}

struct Runs {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    base: PathBuf,
    slow: PathBuf,
    errors: PathBuf,
    /// `run --junit` of the errors run.
    errors_junit: PathBuf,
}

/// The three runs every test compares, made once per test binary.
fn runs() -> &'static Runs {
    static RUNS: OnceLock<Runs> = OnceLock::new();
    RUNS.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let ok = r#""coffee.failure_rate <= 1%""#;
        let (base, out) = run(&root, "base", &scenario(BASE, ok), &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let (slow, out) = run(&root, "slow", &scenario(SLOW, ok), &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let junit = root.join("run-junit.xml");
        let checks = r#""coffee.failure_rate <= 1%", "coffee.p99 <= 1s", "cluster.restarts == 0""#;
        let (errors, out) = run(
            &root,
            "errors",
            &scenario(ERRORS, checks),
            &["--junit", junit.to_str().unwrap()],
        );
        // A failed check (5% of 503s) and one not measurable off Kubernetes: exit 1.
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        Runs {
            _tmp: tmp,
            root,
            base,
            slow,
            errors,
            errors_junit: junit,
        }
    })
}

/// A baseline and a run with backends 2 ms slower: the shared ones on the first attempt, a fresh
/// pair on later ones (a neighbour's burst on a shared machine can swamp one run's tail).
fn slow_pair(attempt: usize, tag: &str) -> (PathBuf, PathBuf) {
    let r = runs();
    if attempt == 1 {
        return (r.base.clone(), r.slow.clone());
    }
    let a = run(
        &r.root,
        &format!("{tag}-base{attempt}"),
        &scenario(BASE, ""),
        &[],
    )
    .0;
    let b = run(
        &r.root,
        &format!("{tag}-slow{attempt}"),
        &scenario(SLOW, ""),
        &[],
    )
    .0;
    (a, b)
}

fn compare(a: &Path, b: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("compare")
        .arg(a)
        .arg(b)
        .args(args)
        .output()
        .unwrap()
}

/// The row of the gates table for `gate`, split into cells.
fn row(out: &Output, gate: &str) -> Vec<String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("| `{gate}`")))
        .unwrap_or_else(|| panic!("no row for {gate}: {}", text(out)));
    line.trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

/// The schema CI systems read, as committed with its source.
fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/schema/junit-10.xsd")
}

/// Validates `file` against the JUnit schema with xmllint (libxml2-utils).
fn validate(file: &Path) {
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(schema())
        .arg(file)
        .output()
        .expect("xmllint (Debian's libxml2-utils; make test-deps installs it)");
    assert!(
        out.status.success(),
        "{} does not validate: {}\n{}",
        file.display(),
        text(&out),
        fs::read_to_string(file).unwrap()
    );
}

#[test]
fn two_runs_of_the_same_scenario_pass_every_bounded_gate() {
    let r = runs();
    let gates = [
        "coffee.p99 <= +10%",
        "coffee.p50 <= +10%",
        "rps >= -5%",
        "failures == 0",
    ];
    let mut attempt = 0;
    // Latency on a shared 2-core machine: a neighbour's burst can land in one run only.
    testkit::in_one_of(3, || {
        attempt += 1;
        let a = if attempt == 1 {
            r.base.clone()
        } else {
            run(
                &r.root,
                &format!("again-a{attempt}"),
                &scenario(BASE, ""),
                &[],
            )
            .0
        };
        let (b, _) = run(
            &r.root,
            &format!("again-b{attempt}"),
            &scenario(BASE, ""),
            &[],
        );
        let mut args = Vec::new();
        for g in gates {
            args.extend(["--gate", g]);
        }
        let out = compare(&a, &b, &args);
        // Deterministic: the same runs give the same bytes.
        let again = compare(&a, &b, &args);
        assert_eq!(out.stdout, again.stdout, "seeded bootstrap");
        let failures = row(&out, "failures == 0");
        assert_eq!(failures[7], "holds", "{failures:?}");
        assert_eq!(failures[4], "exact", "{failures:?}");
        for g in ["coffee.p99 <= +10%", "coffee.p50 <= +10%", "rps >= -5%"] {
            let cells = row(&out, g);
            assert_eq!(
                cells[6], "requests",
                "bootstrap over the records: {cells:?}"
            );
            assert!(cells[5].starts_with('['), "an interval: {cells:?}");
        }
        // The interval covers each run's own noise, not the drift between two runs (see
        // docs/gates-and-reports.md: a quarter of identical pairs measured there show a
        // significant change of a few percent), so any verdict short of a failure is right.
        for g in gates {
            let cells = row(&out, g);
            if cells[8] != "pass" {
                return Err(format!("{cells:?}; {}", text(&out)));
            }
        }
        if out.status.code() != Some(0) {
            return Err(text(&out));
        }
        Ok(())
    });
}

#[test]
fn a_backend_two_ms_slower_fails_the_p99_gate_and_junit_says_so() {
    let r = runs();
    let mut attempt = 0;
    testkit::in_one_of(3, || {
        attempt += 1;
        let (base, slow) = slow_pair(attempt, "p99");
        let junit = r.root.join(format!("slow-junit-{attempt}.xml"));
        let out = compare(
            &base,
            &slow,
            &[
                "--gate",
                "coffee.p99 <= +10%",
                "--gate",
                "failures == 0",
                "--junit",
                junit.to_str().unwrap(),
            ],
        );
        // Whatever the verdict, the file is written and valid, one testcase per gate.
        validate(&junit);
        let xml = fs::read_to_string(&junit).unwrap();
        assert!(
            xml.contains("<testsuite name=\"gate: gates\" tests=\"2\""),
            "{xml}"
        );
        assert!(
            xml.contains("expected: == 0\nactual: B 0 (A 0): holds"),
            "{xml}"
        );
        assert_eq!(row(&out, "failures == 0")[8], "pass");
        let p99 = row(&out, "coffee.p99 <= +10%");
        if out.status.code() != Some(1) || p99[7] != "regression" {
            return Err(format!("p99 {p99:?}; {}", text(&out)));
        }
        assert_eq!(p99[8], "FAIL", "{p99:?}");
        // 1 ms to 3 ms of backend latency: p99 up by more than half, the interval past +10%.
        let change: f64 = p99[4].trim_end_matches('%').parse().unwrap();
        let lo: f64 = p99[5]
            .trim_start_matches('[')
            .split(',')
            .next()
            .unwrap()
            .trim_end_matches('%')
            .parse()
            .unwrap();
        if change <= 50.0 || lo <= 10.0 {
            return Err(format!("p99 {p99:?}"));
        }
        assert!(String::from_utf8_lossy(&out.stderr).contains("1 gate(s) failed"));
        // compare.md in B holds the same table.
        let md = fs::read_to_string(slow.join("compare.md")).unwrap();
        assert!(
            md.contains("## Gates") && md.contains("| regression | FAIL |"),
            "{md}"
        );
        assert!(xml.contains("failures=\"1\""), "{xml}");
        assert!(
            xml.contains(
                "<testcase name=\"coffee.p99 &lt;= +10%\" classname=\"proxybench.gate.main.coffee\">"
            ),
            "{xml}"
        );
        assert!(
            xml.contains("<failure message=\"regression: expected change &lt;= +10.00%"),
            "{xml}"
        );
        Ok(())
    });
}

#[test]
fn injected_failures_fail_the_failures_gate() {
    let r = runs();
    let out = compare(
        &r.base,
        &r.errors,
        &[
            "--gate",
            "failures == 0",
            "--gate",
            "coffee.status_503 <= 10",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let f = row(&out, "failures == 0");
    assert_eq!(
        (f[2].as_str(), f[7].as_str(), f[8].as_str()),
        ("0", "breached", "FAIL"),
        "{f:?}"
    );
    let n: u64 = f[3].parse().unwrap();
    // 5% of 4000 requests: a binomial count, far from 0 and from 4000.
    assert!((100..=350).contains(&n), "{f:?}");
    assert_eq!(row(&out, "coffee.status_503 <= 10")[7], "breached");
}

#[test]
fn run_junit_lists_each_check_and_the_outcome_with_failures_and_errors() {
    let r = runs();
    validate(&r.errors_junit);
    let xml = fs::read_to_string(&r.errors_junit).unwrap();
    // Three checks and the run's outcome: one failed, one not measurable (an error, as the
    // exit code 1 says), and the run complete.
    assert!(
        xml.contains(
            "<testsuite name=\"gate: checks\" tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"0\""
        ),
        "{xml}"
    );
    assert!(
        xml.contains("<testcase name=\"coffee.failure_rate &lt;= 1%\" classname=\"proxybench.gate.main\">\n      <failure message=\"expected &lt;= 1.000%, measured"),
        "{xml}"
    );
    assert!(
        xml.contains("<error message=\"not measurable: the case ran on no Kubernetes cluster"),
        "{xml}"
    );
    assert!(
        xml.contains("<testcase name=\"run: complete\" classname=\"proxybench.gate\">\n      <system-out>expected: every case run to its end\nactual: complete</system-out>"),
        "{xml}"
    );
    assert!(xml.contains("expected: &lt;= 1.00s\nactual: "), "{xml}");
}

#[test]
fn bad_gates_and_runs_of_different_things_are_bad_input() {
    let r = runs();
    let out = compare(&r.base, &r.slow, &["--gate", "coffee.p99 <= +10"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("proxybench: --gate 'coffee.p99 <= +10': column 15: '+10' is not a change"),
        "{err}"
    );
    let out = compare(&r.base, &r.slow, &["--gate", "tea.p99 <= +10%"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no load 'tea' in these runs (loads: coffee)"),
        "{}",
        text(&out)
    );
    let out = compare(
        &r.base,
        &r.slow,
        &["--gate", "rps >= -5%", "--confidence", "95"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    // A copy of B that ran another scenario, and one whose load ran with other connections.
    let edit = |name: &str, from: &str, to: &str| -> PathBuf {
        let d = r.root.join(name);
        fs::create_dir_all(&d).unwrap();
        let data = fs::read_to_string(r.slow.join("data.json")).unwrap();
        assert!(data.contains(from), "{from}");
        fs::write(d.join("data.json"), data.replacen(from, to, 1)).unwrap();
        d
    };
    let other = edit(
        "other-scenario",
        "\"scenario\": \"gate\"",
        "\"scenario\": \"spread\"",
    );
    let out = compare(&r.base, &other, &["--gate", "failures == 0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("A ran scenario 'gate', B ran 'spread'"),
        "{}",
        text(&out)
    );
    let other = edit("other-load", "\"connections\": 16", "\"connections\": 32");
    let out = compare(&r.base, &other, &["--gate", "failures == 0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("case 'main', load 'coffee': connections 16 in A, 32 in B"),
        "{}",
        text(&out)
    );
}

#[test]
fn without_request_records_the_gate_falls_back_to_per_second_values_and_says_so() {
    let r = runs();
    let mut attempt = 0;
    testkit::in_one_of(3, || {
        attempt += 1;
        let (base, slow) = slow_pair(attempt, "old");
        // B as an old run would be: data.json alone, no requests/.
        let old = r.root.join(format!("old-slow-{attempt}"));
        fs::create_dir_all(&old).unwrap();
        fs::copy(slow.join("data.json"), old.join("data.json")).unwrap();
        let out = compare(
            &base,
            &old,
            &[
                "--gate",
                "coffee.p50 <= +10%",
                "--gate",
                "coffee.mean <= +10%",
            ],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("[1] per-second values: B has no request records for load 'coffee'"),
            "{stdout}"
        );
        // The mean has no per-second value: not measurable, never a guess.
        let mean = row(&out, "coffee.mean <= +10%");
        assert!(
            mean[7].starts_with("not measurable: 'mean' needs request records"),
            "{mean:?}"
        );
        assert_eq!(mean[8], "FAIL");
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        // The median of each second, 1 ms to 3 ms of backend latency: a regression from the
        // seconds alone (the tail is the p99 test's, above, on the records).
        let p50 = row(&out, "coffee.p50 <= +10%");
        assert_eq!(p50[6], "seconds [1]", "{p50:?}");
        if p50[7] != "regression" {
            return Err(format!("p50 {p50:?}"));
        }
        Ok(())
    });
}
