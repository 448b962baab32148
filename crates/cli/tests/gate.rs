//! `proxybench compare ... --gate`, `--calibrate`, `run --repeat --interleave` and `--junit`
//! end to end, on real runs (real nginx, real backends on loopback, 3-second open-loop loads):
//! three identical runs a side pass every gate at a zero bound; three runs of a backend 2 ms
//! slower fail them; one run a side still works and says what it cannot see; a backend
//! answering 5% of requests with 503 fails the failures gate; a partial run, a short one and an
//! unusable one are refused; bad gates and runs of different things are exit 2. Every JUnit file written is
//! validated against the JUnit schema CI systems read (Jenkins' xUnit plugin's junit-10.xsd)
//! with xmllint. A timing comparison may be attempted three times, each on fresh runs, never
//! with a wider bound.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

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

/// The scenario with the backends' profile, extra checks and load length filled in. Its name
/// is the same for every variant: they are runs of one scenario against backends that behave
/// differently.
fn scenario_of(profile: &str, checks: &str, duration: &str) -> String {
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
duration = "{duration}"
"#
    )
}

fn scenario(profile: &str, checks: &str) -> String {
    scenario_of(profile, checks, "3s")
}

const BASE: &str = "latency=1ms";
/// 2 ms more latency in every backend.
const SLOW: &str = "latency=3ms";
/// The base profile with 5% of answers 503.
const ERRORS: &str = "latency=1ms; status=503:5%";

/// The only directory under `dir`.
fn only_dir(dir: &Path, out: &Output) -> PathBuf {
    fs::read_dir(dir)
        .unwrap_or_else(|_| panic!("no results in {}: {}", dir.display(), text(out)))
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap_or_else(|| panic!("no results in {}: {}", dir.display(), text(out)))
}

/// Writes `toml` as `root/NAME/FILE.toml` and returns its path.
fn file(root: &Path, name: &str, file: &str, toml: &str) -> PathBuf {
    let d = root.join(name);
    fs::create_dir_all(&d).unwrap();
    let f = d.join(file);
    fs::write(&f, toml).unwrap();
    f
}

/// Held while a run plays: the tests of this binary run in parallel, and two runs at real-time
/// priority on 2 cores would measure each other.
static PLAYING: Mutex<()> = Mutex::new(());

fn playing() -> std::sync::MutexGuard<'static, ()> {
    PLAYING.lock().unwrap_or_else(|e| e.into_inner())
}

/// `proxybench run FILE --results root/NAME/results ARGS...`: the run's (or set's) directory
/// and output. The run (its load, backends and nginx) inherits real-time priority, so a 2 ms
/// change in the tail is measured against the scheduler of a busy shared machine as little as
/// can be, and no other run of this binary plays at the same time.
fn run(root: &Path, name: &str, toml: &str, extra: &[&str]) -> (PathBuf, Output) {
    let f = file(root, name, "scenario.toml", toml);
    let results = root.join(name).join("results");
    let _one = playing();
    let _rt = testkit::Realtime::enter();
    let out = Command::new(bin())
        .arg("run")
        .arg(&f)
        .arg("--no-progress")
        .arg("--results")
        .arg(&results)
        .args(extra)
        .output()
        .unwrap();
    let dir = only_dir(&results.join("gate"), &out);
    (dir, out)
}

/// A set of 3 runs of `a` interleaved with 3 of `b` (a-1, b-1, a-2...): `run --repeat 3
/// --interleave`.
fn interleaved(root: &Path, name: &str, a: &str, b: &str) -> PathBuf {
    let other = file(root, name, "other.toml", b);
    let (set, out) = run(
        root,
        name,
        a,
        &["--repeat", "3", "--interleave", other.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    set
}

struct Runs {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    /// Three runs of the base a side, interleaved.
    same: PathBuf,
    /// Three runs of the base interleaved with three of the slow backends.
    slow_set: PathBuf,
    errors: PathBuf,
    /// `run --junit` of the errors run.
    errors_junit: PathBuf,
}

impl Runs {
    /// One run of the base.
    fn base(&self) -> PathBuf {
        self.same.join("a-1")
    }
    /// One run with the backends 2 ms slower.
    fn slow(&self) -> PathBuf {
        self.slow_set.join("b-1")
    }
}

/// The runs every test compares, made once per test binary.
fn runs() -> &'static Runs {
    static RUNS: OnceLock<Runs> = OnceLock::new();
    RUNS.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let ok = r#""coffee.failure_rate <= 1%""#;
        let same = interleaved(&root, "same", &scenario(BASE, ok), &scenario(BASE, ok));
        let slow_set = interleaved(&root, "slow", &scenario(BASE, ok), &scenario(SLOW, ok));
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
            same,
            slow_set,
            errors,
            errors_junit: junit,
        }
    })
}

fn compare(args: &[&Path], extra: &[&str]) -> Output {
    Command::new(bin())
        .arg("compare")
        .args(args)
        .args(extra)
        .output()
        .unwrap()
}

/// The gates table's columns, as the tests read them.
const CHANGE: usize = 4;
const INTERVAL: usize = 5;
const DETECTABLE: usize = 6;
const FROM: usize = 7;
const VERDICT: usize = 8;
const RESULT: usize = 9;

/// The row of the gates (or calibration) table for `gate`, split into cells.
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

/// A percentage cell (`+12.30%`) as a number.
fn pct(cell: &str) -> f64 {
    cell.split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches('%')
        .parse()
        .unwrap_or_else(|_| panic!("not a percentage: {cell}"))
}

/// The lower end of an interval cell (`[+8.10%, +16.00%]`).
fn lower(cell: &str) -> f64 {
    pct(cell.trim_start_matches('[').split(',').next().unwrap())
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

const ZERO: [&str; 4] = [
    "coffee.p99 <= +0%",
    "coffee.p50 <= +0%",
    "coffee.mean <= +0%",
    "coffee.rps >= -0%",
];

fn gate_args<'a>(gates: &[&'a str]) -> Vec<&'a str> {
    gates.iter().flat_map(|g| ["--gate", g]).collect()
}

#[test]
fn three_identical_runs_a_side_pass_every_gate_at_a_zero_bound() {
    let r = runs();
    let mut attempt = 0;
    // A timing comparison on a shared 2-core machine: a later attempt runs a fresh set, with
    // the same zero bounds.
    testkit::in_one_of(3, || {
        attempt += 1;
        let set = if attempt == 1 {
            r.same.clone()
        } else {
            let base = scenario(BASE, "");
            interleaved(&r.root, &format!("same{attempt}"), &base, &base)
        };
        let junit = r.root.join(format!("same-junit-{attempt}.xml"));
        let mut args = gate_args(&ZERO);
        args.extend([
            "--gate",
            "failures == 0",
            "--junit",
            junit.to_str().unwrap(),
        ]);
        let out = compare(&[&set], &args);
        // Deterministic: the same runs give the same bytes.
        let again = compare(&[&set], &args);
        assert_eq!(out.stdout, again.stdout, "seeded bootstrap");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("Runs: 3 of A, 3 of B. Intervals: 95% interval of the change, Student's t on the log of B/A with the noise of each side from a hierarchical bootstrap"),
            "{stdout}"
        );
        assert!(!stdout.contains("lopsided") && !stdout.contains("One run a side"));
        validate(&junit);
        let xml = fs::read_to_string(&junit).unwrap();
        assert!(
            xml.contains("<property name=\"runs (A)\" value=\"3\"/>")
                && xml.contains("<property name=\"runs (B)\" value=\"3\"/>")
                && xml.contains("<property name=\"interval\" value=\"95% interval of the change"),
            "{xml}"
        );
        assert!(xml.contains("\nsmallest detectable change: +"), "{xml}");
        assert!(xml.contains("\nverdict: "), "{xml}");
        for g in ZERO {
            let cells = row(&out, g);
            assert_eq!(cells[FROM], "requests", "{cells:?}");
            assert!(cells[INTERVAL].starts_with('['), "an interval: {cells:?}");
            // A zero bound is inside any noise: the line says so, and the gate still decides.
            assert!(cells[DETECTABLE].contains("(bound inside)"), "{cells:?}");
            // In the gate's bad direction: up for latency, down (never below -100%) for the rate.
            let d = pct(&cells[DETECTABLE]);
            if g.contains(">=") {
                assert!(d < 0.0 && d > -100.0, "{cells:?}");
            } else {
                assert!(d > 0.0, "{cells:?}");
            }
        }
        for g in ZERO.iter().chain(&["failures == 0"]) {
            let cells = row(&out, g);
            if cells[RESULT] != "pass" {
                return Err(format!("{cells:?}; {}", text(&out)));
            }
        }
        if out.status.code() != Some(0) {
            return Err(text(&out));
        }
        assert!(xml.contains("failures=\"0\" errors=\"0\""), "{xml}");
        Ok(())
    });
}

#[test]
fn three_runs_of_a_backend_two_ms_slower_fail_the_gates_at_a_zero_bound() {
    let r = runs();
    let mut attempt = 0;
    testkit::in_one_of(3, || {
        attempt += 1;
        let set = if attempt == 1 {
            r.slow_set.clone()
        } else {
            interleaved(
                &r.root,
                &format!("slow{attempt}"),
                &scenario(BASE, ""),
                &scenario(SLOW, ""),
            )
        };
        let junit = r.root.join(format!("slow-junit-{attempt}.xml"));
        let mut args = gate_args(&ZERO);
        args.extend([
            "--gate",
            "failures == 0",
            "--junit",
            junit.to_str().unwrap(),
        ]);
        let out = compare(&[&set], &args);
        validate(&junit);
        let xml = fs::read_to_string(&junit).unwrap();
        assert!(
            xml.contains("<testsuite name=\"gate: gates\" tests=\"5\""),
            "{xml}"
        );
        assert_eq!(row(&out, "failures == 0")[RESULT], "pass");
        // 1 ms to 3 ms of backend latency: the median and the mean up by more than half, each
        // interval clear of 0, whatever the machine's drift between runs. The tail, which a
        // neighbour's burst can swamp in a 3-second run, must not read as an improvement.
        for g in ["coffee.p50 <= +0%", "coffee.mean <= +0%"] {
            let cells = row(&out, g);
            if cells[VERDICT] != "regression" || pct(&cells[CHANGE]) <= 50.0 {
                return Err(format!("{cells:?}; {}", text(&out)));
            }
            assert!(lower(&cells[INTERVAL]) > 0.0, "{cells:?}");
            assert_eq!(cells[RESULT], "FAIL", "{cells:?}");
        }
        let p99 = row(&out, "coffee.p99 <= +0%");
        if p99[VERDICT] == "improvement" {
            return Err(format!("p99 {p99:?}; {}", text(&out)));
        }
        if out.status.code() != Some(1) {
            return Err(text(&out));
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("gate(s) failed"), "{stderr}");
        // compare.md in the set holds the same table.
        let md = fs::read_to_string(set.join("compare.md")).unwrap();
        assert!(
            md.contains("## Gates") && md.contains("| regression | FAIL |"),
            "{md}"
        );
        assert!(xml.contains("errors=\"0\""), "{xml}");
        assert!(
            xml.contains("<failure message=\"regression: expected change &lt;= +0.00%"),
            "{xml}"
        );
        Ok(())
    });
}

#[test]
fn one_run_a_side_still_gates_and_says_it_cannot_see_drift() {
    let r = runs();
    let mut attempt = 0;
    testkit::in_one_of(3, || {
        attempt += 1;
        let (base, slow) = if attempt == 1 {
            (r.base(), r.slow())
        } else {
            let set = interleaved(
                &r.root,
                &format!("one{attempt}"),
                &scenario(BASE, ""),
                &scenario(SLOW, ""),
            );
            (set.join("a-1"), set.join("b-1"))
        };
        let junit = r.root.join(format!("one-junit-{attempt}.xml"));
        let out = compare(
            &[&base, &slow],
            &[
                "--gate",
                "coffee.p99 <= +10%",
                "--gate",
                "failures == 0",
                "--junit",
                junit.to_str().unwrap(),
            ],
        );
        validate(&junit);
        let xml = fs::read_to_string(&junit).unwrap();
        assert!(
            xml.contains("expected: == 0\nactual: B 0 (A 0): holds"),
            "{xml}"
        );
        assert!(
            xml.contains("<property name=\"caveat\" value=\"One run a side"),
            "{xml}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("One run a side: the intervals see the noise within each run, not the drift between runs"),
            "{stdout}"
        );
        let p99 = row(&out, "coffee.p99 <= +10%");
        if out.status.code() != Some(1) || p99[VERDICT] != "regression" {
            return Err(format!("p99 {p99:?}; {}", text(&out)));
        }
        if pct(&p99[CHANGE]) <= 50.0 || lower(&p99[INTERVAL]) <= 10.0 {
            return Err(format!("p99 {p99:?}"));
        }
        // compare.md goes into B.
        let md = fs::read_to_string(slow.join("compare.md")).unwrap();
        assert!(md.contains("| regression | FAIL |"), "{md}");
        assert!(
            xml.contains(
                "<testcase name=\"coffee.p99 &lt;= +10%\" classname=\"proxybench.gate.main.coffee\">"
            ),
            "{xml}"
        );
        Ok(())
    });
}

#[test]
fn lopsided_sides_are_allowed_and_say_so() {
    let r = runs();
    let b: Vec<PathBuf> = (1..=3).map(|i| r.same.join(format!("b-{i}"))).collect();
    let a1 = r.same.join("a-1");
    let out = Command::new(bin())
        .args(["compare", "--gate", "coffee.p99 <= +50%"])
        .arg(&a1)
        .arg("--")
        .args(&b)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Runs: 1 of A, 3 of B.")
            && stdout.contains("The sides have 1 and 3 runs: the intervals are lopsided")
            && stdout.contains(
                "A's single run shows no drift of its own, so it is given B's run-to-run noise"
            ),
        "{}",
        text(&out)
    );
    let p99 = row(&out, "coffee.p99 <= +50%");
    // The smallest detectable change comes from A's single run: it cannot include drift.
    assert!(p99[DETECTABLE].contains("(A: 1 run)"), "{p99:?}");
    // The same with --a and --b.
    let mut cmd = Command::new(bin());
    cmd.arg("compare").arg("--a").arg(&a1);
    for d in &b {
        cmd.arg("--b").arg(d);
    }
    let flags = cmd
        .arg("--gate")
        .arg("coffee.p99 <= +50%")
        .output()
        .unwrap();
    assert_eq!(flags.stdout, out.stdout, "{}", text(&flags));
    // compare.md goes into the last B.
    assert!(b[2].join("compare.md").is_file());
}

#[test]
fn calibration_prints_the_smallest_detectable_change_from_a_alone() {
    let r = runs();
    let out = Command::new(bin())
        .args(["compare", "--calibrate"])
        .arg(&r.same)
        .args(["--gate", "coffee.p99 <= +0%", "--gate", "rps >= -90%"])
        .args(["--gate", "failures == 0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The A runs of the interleaved set, alone.
    assert!(
        stdout.contains("Runs of A: 3 of scenario `gate` (full form)"),
        "{stdout}"
    );
    assert!(!stdout.contains("b-1"), "{stdout}");
    let p99 = row(&out, "coffee.p99 <= +0%");
    // Gate, load, each run's value, run-to-run and within-run noise, then the smallest
    // detectable change with 3, 5 and 10 runs a side: fewer runs, a larger change.
    assert_eq!(p99[1], "coffee");
    assert_eq!(p99[2].split(", ").count(), 3, "{p99:?}");
    assert!(
        p99[3].starts_with('±') && p99[4].starts_with('±'),
        "{p99:?}"
    );
    assert!(p99[5].contains("(bound inside)"), "{p99:?}");
    let (d3, d5, d10) = (pct(&p99[5]), pct(&p99[6]), pct(&p99[7]));
    assert!(d3 > d5 && d5 > d10 && d10 > 0.0, "{p99:?}");
    // A -90% bound on the rate is far outside the noise.
    let rps = row(&out, "rps >= -90%");
    assert!(
        !rps[5].contains("bound inside") && pct(&rps[5]) < 0.0,
        "{rps:?}"
    );
    assert!(
        stdout.contains("Gates with an absolute bound (`failures == 0`) are checked exactly on B"),
        "{stdout}"
    );
    assert!(r.same.join("calibration.md").is_file());
    // One run cannot show the noise between runs.
    let out = compare(&[&r.base()], &["--calibrate"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with(
            "proxybench: --calibrate: 1 run given; the noise between runs needs at least 2"
        ),
        "{}",
        text(&out)
    );
}

#[test]
fn injected_failures_fail_the_failures_gate() {
    let r = runs();
    let out = compare(
        &[&r.base(), &r.errors],
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
        (f[2].as_str(), f[VERDICT].as_str(), f[RESULT].as_str()),
        ("0", "breached", "FAIL"),
        "{f:?}"
    );
    let n: u64 = f[3].parse().unwrap();
    // 5% of 3000 requests: a binomial count, far from 0 and from 3000.
    assert!((70..=260).contains(&n), "{f:?}");
    assert_eq!(row(&out, "coffee.status_503 <= 10")[VERDICT], "breached");
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

/// A run of the base scenario with a 30-second load, interrupted by SIGINT once its load has
/// run for a second: partial results, exit 130.
fn interrupted(root: &Path, name: &str) -> PathBuf {
    let f = file(root, name, "scenario.toml", &scenario_of(BASE, "", "30s"));
    let results = root.join(name).join("results");
    let _one = playing();
    let child = Command::new(bin())
        .arg("run")
        .arg(&f)
        .arg("--no-progress")
        .arg("--results")
        .arg(&results)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The load has started once the run's request records are being written.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !results.join("gate").is_dir() {
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill(2) takes no pointers; the pid is our child's, not yet waited for.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    only_dir(&results.join("gate"), &out)
}

#[test]
fn a_partial_run_and_a_short_one_are_refused_by_the_gate() {
    let r = runs();
    let partial = interrupted(&r.root, "partial");
    let junit = r.root.join("partial-junit.xml");
    let out = compare(
        &[&r.base(), &partial],
        &[
            "--gate",
            "coffee.p99 <= +10%",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "proxybench: cannot gate B ({}): the run is partial (interrupted): a run cut short is not comparable",
            partial.display()
        )),
        "{err}"
    );
    // CI reads why: the JUnit file is one error, not a stale or missing file.
    validate(&junit);
    let xml = fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"0\" errors=\"1\""), "{xml}");
    assert!(xml.contains("the run is partial (interrupted)"), "{xml}");
    // Among several runs, it is named by its place; calibration refuses it too.
    let out = compare(&[&r.same.join("a-1"), &partial], &["--calibrate"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("proxybench: cannot gate A run 2 ("),
        "{}",
        text(&out)
    );
    // A copy of a run whose load ran 1 s of its planned 3 s (a dead run that was not marked
    // partial).
    let short = r.root.join("short");
    fs::create_dir_all(&short).unwrap();
    let data = fs::read_to_string(r.slow().join("data.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&data).unwrap();
    let elapsed = v["cases"][0]["loads"][0]["elapsed_s"].to_string();
    let needle = format!("\"elapsed_s\": {elapsed}");
    assert!(data.contains(&needle), "{needle}");
    fs::write(
        short.join("data.json"),
        data.replacen(&needle, "\"elapsed_s\": 1.0", 1),
    )
    .unwrap();
    let out = compare(&[&r.base(), &short], &["--gate", "failures == 0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("load 'coffee' of case 'main' ran 1.0 s of its planned 3 s"),
        "{}",
        text(&out)
    );
    // A run whose target was unusable (every request answered 503: exit 3) has no rate or
    // latency to compare: refused, never read as "0 -> 0".
    let (unusable, out) = run(
        &r.root,
        "unusable",
        &scenario("latency=1ms; status=503:100%", ""),
        &[],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let out = compare(&[&r.base(), &unusable], &["--gate", "coffee.rps >= -5%"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("every request failed in main/coffee (the target was unusable: exit 3)"),
        "{}",
        text(&out)
    );
    // Without gates, compare still sets a partial run beside another.
    let out = compare(&[&r.base(), &partial], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("| Outcome | complete | PARTIAL |"));
}

#[test]
fn bad_gates_and_runs_of_different_things_are_bad_input() {
    let r = runs();
    let (base, slow) = (r.base(), r.slow());
    let out = compare(&[&base, &slow], &["--gate", "coffee.p99 <= +10"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("proxybench: --gate 'coffee.p99 <= +10': column 15: '+10' is not a change"),
        "{err}"
    );
    let out = compare(&[&base, &slow], &["--gate", "tea.p99 <= +10%"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no load 'tea' in these runs (loads: coffee)"),
        "{}",
        text(&out)
    );
    let out = compare(
        &[&base, &slow],
        &["--gate", "rps >= -5%", "--confidence", "95"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    // Three directories and no `--`: which side is which is not said.
    let out = compare(&[&base, &slow, &r.errors], &["--gate", "failures == 0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("3 directories and no `--`"),
        "{}",
        text(&out)
    );

    // Copies of B that ran another scenario, another proxy, and a load with other connections.
    let edit = |name: &str, from: &str, to: &str| -> PathBuf {
        let d = r.root.join(name);
        fs::create_dir_all(&d).unwrap();
        let data = fs::read_to_string(slow.join("data.json")).unwrap();
        assert!(data.contains(from), "{from}");
        fs::write(d.join("data.json"), data.replacen(from, to, 1)).unwrap();
        d
    };
    let other = edit(
        "other-scenario",
        "\"scenario\": \"gate\"",
        "\"scenario\": \"spread\"",
    );
    let out = compare(&[&base, &other], &["--gate", "failures == 0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("A ran scenario 'gate', B ran 'spread'"),
        "{}",
        text(&out)
    );
    let other = edit(
        "other-proxy",
        "\"proxy_kind\": \"nginx\"",
        "\"proxy_kind\": \"haproxy\"",
    );
    let out = compare(&[&base, &other], &["--gate", "failures == 0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("A ran proxy nginx, B ran haproxy"),
        "{}",
        text(&out)
    );
    let other = edit("other-load", "\"connections\": 16", "\"connections\": 32");
    let out = compare(&[&base, &other], &["--gate", "failures == 0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("case 'main', load 'coffee': connections 16 in A, 32 in B"),
        "{}",
        text(&out)
    );
    // Within a side, the first difference names the runs (options come before `--`: what
    // follows it is B's directories).
    let out = Command::new(bin())
        .arg("compare")
        .args(["--gate", "failures == 0"])
        .arg(&base)
        .arg(&other)
        .arg("--")
        .arg(&slow)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("case 'main', load 'coffee': connections 16 in A run 1, 32 in A run 2"),
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
        let (base, slow) = if attempt == 1 {
            (r.base(), r.slow())
        } else {
            let set = interleaved(
                &r.root,
                &format!("old{attempt}"),
                &scenario(BASE, ""),
                &scenario(SLOW, ""),
            );
            (set.join("a-1"), set.join("b-1"))
        };
        // B as an old run would be: data.json alone, no requests/.
        let old = r.root.join(format!("old-slow-{attempt}"));
        fs::create_dir_all(&old).unwrap();
        fs::copy(slow.join("data.json"), old.join("data.json")).unwrap();
        let out = compare(
            &[&base, &old],
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
            mean[VERDICT].starts_with("not measurable: 'mean' needs request records"),
            "{mean:?}"
        );
        assert_eq!(mean[RESULT], "FAIL");
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        // The median of each second, 1 ms to 3 ms of backend latency: a regression from the
        // seconds alone (the tail is the p99 test's, above, on the records).
        let p50 = row(&out, "coffee.p50 <= +10%");
        assert_eq!(p50[FROM], "seconds [1]", "{p50:?}");
        if p50[VERDICT] != "regression" {
            return Err(format!("p50 {p50:?}"));
        }
        Ok(())
    });
}
