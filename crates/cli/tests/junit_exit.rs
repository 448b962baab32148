//! The JUnit file agrees with the exit code: every non-zero exit of `run` and `compare` leaves
//! a file (valid against the JUnit schema CI systems read) that counts at least one failure or
//! error, and an exit of 0 one that counts none. Each path is a real run of a small scenario:
//! real nginx, real backends on loopback, 200 requests.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
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

/// A small scenario: two backends with `profile`, one listener, `load` (its length), the
/// checks, then `extra`.
fn small(profile: &str, checks: &str, load: &str, extra: &str) -> String {
    format!(
        r#"name = "small"
checks = [{checks}]
[[backends]]
name = "cafe"
count = 2
profile = "{profile}"
[proxy]
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
[[proxy.routes]]
path = "/"
upstream = "cafe"
[[loads]]
name = "coffee"
url = "http://cafe.example.com/"
connections = 2
{load}
{extra}"#
    )
}

/// 200 requests: a run of a second or so.
const SHORT: &str = "requests = 200\nduration = \"30s\"";

/// The schema CI systems read, as committed with its source.
fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/schema/junit-10.xsd")
}

/// What a JUnit file says, from `<testsuites>`: tests, failures, errors. The file is validated
/// against the schema first.
fn counts(file: &Path) -> (usize, usize, usize, String) {
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(schema())
        .arg(file)
        .output()
        .expect("xmllint (Debian's libxml2-utils; make test-deps installs it)");
    let xml = fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: no JUnit file: {e}", file.display()));
    assert!(
        out.status.success(),
        "does not validate: {}\n{xml}",
        text(&out)
    );
    let head = xml
        .lines()
        .find(|l| l.starts_with("<testsuites "))
        .unwrap_or_else(|| panic!("no <testsuites>: {xml}"));
    let attr = |name: &str| -> usize {
        let at = head
            .find(&format!(" {name}=\""))
            .unwrap_or_else(|| panic!("no {name}: {head}"));
        let rest = &head[at + name.len() + 3..];
        rest[..rest.find('"').unwrap()].parse().unwrap()
    };
    (attr("tests"), attr("failures"), attr("errors"), xml)
}

/// Runs `proxybench run FILE --junit J` for `toml` in `root/NAME`: the output, the JUnit file
/// and the results directory (when one was written).
fn run(root: &Path, name: &str, toml: &str, extra: &[&str]) -> (Output, PathBuf, Option<PathBuf>) {
    let d = root.join(name);
    fs::create_dir_all(&d).unwrap();
    let file = d.join("scenario.toml");
    fs::write(&file, toml).unwrap();
    let junit = d.join("junit.xml");
    let results = d.join("results");
    let out = Command::new(bin())
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .arg("--results")
        .arg(&results)
        .arg("--junit")
        .arg(&junit)
        .args(extra)
        .output()
        .unwrap();
    (out, junit, newest(&results.join("small")))
}

/// The newest directory under `dir`, if any.
fn newest(dir: &Path) -> Option<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v.pop()
}

/// Asserts the exit code, and that the file's failures and errors agree with it: none for 0,
/// at least one otherwise. Returns (failures, errors, xml).
fn agrees(what: &str, out: &Output, code: i32, junit: &Path) -> (usize, usize, String) {
    assert_eq!(out.status.code(), Some(code), "{what}: {}", text(out));
    let (tests, f, e, xml) = counts(junit);
    assert!(tests > 0, "{what}: {xml}");
    if code == 0 {
        assert_eq!(
            f + e,
            0,
            "{what}: exit 0 but {f} failures, {e} errors: {xml}"
        );
    } else {
        assert!(
            f + e > 0,
            "{what}: exit {code} but no failure or error: {xml}"
        );
    }
    (f, e, xml)
}

#[test]
fn every_exit_of_run_leaves_a_junit_file_that_agrees() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();

    // 0: everything held.
    let (out, junit, _) = run(
        root,
        "ok",
        &small("", r#""coffee.failure_rate <= 1%""#, SHORT, ""),
        &[],
    );
    let (_, _, xml) = agrees("ok", &out, 0, &junit);
    assert!(xml.contains("<testcase name=\"run: complete\""), "{xml}");

    // 1: a check failed.
    let (out, junit, _) = run(
        root,
        "check",
        &small("", r#""coffee.p99 <= 1us""#, SHORT, ""),
        &[],
    );
    let (f, e, _) = agrees("a failed check", &out, 1, &junit);
    assert_eq!((f, e), (1, 0));

    // 1: a check the run could not measure (cluster.* off Kubernetes): an error, not a skip.
    let (out, junit, _) = run(
        root,
        "unmeasured",
        &small("", r#""cluster.restarts == 0""#, SHORT, ""),
        &[],
    );
    let (f, e, xml) = agrees("a check not measurable", &out, 1, &junit);
    assert_eq!((f, e), (0, 1), "{xml}");
    assert!(
        xml.contains("<error message=\"not measurable: the case ran on no Kubernetes cluster"),
        "{xml}"
    );
    assert!(!xml.contains("<skipped"), "{xml}");

    // 1: an action failed (killing an instance that does not exist); no check failed.
    let (out, junit, _) = run(
        root,
        "action",
        &small(
            "",
            "",
            SHORT,
            "[[actions]]\nat = \"0s\"\nkill_backend = \"cafe-7\"\n",
        ),
        &[],
    );
    let (f, e, xml) = agrees("a failed action", &out, 1, &junit);
    assert_eq!((f, e), (1, 0), "{xml}");
    assert!(
        xml.contains("<testcase name=\"action kill_backend cafe-7"),
        "{xml}"
    );

    // 3: every request failed (each backend answers 503): the target was unusable.
    let (out, junit, _) = run(
        root,
        "unusable",
        &small("status=503:100%", "", SHORT, ""),
        &[],
    );
    let (f, _, xml) = agrees("an unusable target", &out, 3, &junit);
    assert!(f >= 1, "{xml}");
    assert!(
        xml.contains("every request of load main/coffee failed: the target was unusable"),
        "{xml}"
    );

    // 2: bad input (a check on a metric that does not exist): no run, and a file of one error.
    let (out, junit, dir) = run(
        root,
        "bad",
        &small("", r#""coffee.speed <= 1""#, SHORT, ""),
        &[],
    );
    let (f, e, xml) = agrees("bad input", &out, 2, &junit);
    assert_eq!((f, e), (0, 1), "{xml}");
    assert!(dir.is_none());
    // The file carries the message the terminal shows.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("speed") && xml.contains("speed"),
        "{err}\n{xml}"
    );

    // 1 for each proxy kind of `--proxy nginx,haproxy` whose check fails: one suite per kind.
    let (out, junit, _) = run(
        root,
        "kinds",
        &small("", r#""coffee.p99 <= 1us""#, SHORT, ""),
        &["--proxy", "nginx,haproxy"],
    );
    let (f, _, xml) = agrees("--proxy nginx,haproxy", &out, 1, &junit);
    assert_eq!(f, 2, "{xml}");
    assert!(
        xml.contains("<testsuite name=\"small (haproxy): checks\""),
        "{xml}"
    );

    // 1 for each run of `--repeat 2` whose check fails: one suite per run.
    let (out, junit, _) = run(
        root,
        "repeat",
        &small("", r#""coffee.p99 <= 1us""#, SHORT, ""),
        &["--repeat", "2"],
    );
    let (f, _, xml) = agrees("--repeat 2", &out, 1, &junit);
    assert_eq!(f, 2, "{xml}");
    assert!(
        xml.contains("<testsuite name=\"small (a-2): checks\""),
        "{xml}"
    );

    // 130: interrupted (SIGINT) during a 30-second load.
    let d = root.join("interrupted");
    fs::create_dir_all(&d).unwrap();
    let file = d.join("scenario.toml");
    fs::write(&file, small("", "", "duration = \"30s\"", "")).unwrap();
    let junit = d.join("junit.xml");
    let results = d.join("results");
    let child = Command::new(bin())
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .arg("--results")
        .arg(&results)
        .arg("--junit")
        .arg(&junit)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !results.join("small").is_dir() {
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill(2) takes no pointers; the pid is our child's, not yet waited for.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let (f, e, xml) = agrees("interrupted", &out, 130, &junit);
    assert_eq!((f, e), (0, 1), "{xml}");
    assert!(
        xml.contains("<error message=\"interrupted: the run is partial\""),
        "{xml}"
    );
}

#[test]
fn every_exit_of_compare_leaves_a_junit_file_that_agrees() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let scn = small("", "", SHORT, "");
    let (_, _, a) = run(root, "a", &scn, &[]);
    let (_, _, b) = run(root, "b", &scn, &[]);
    let (a, b) = (a.expect("a ran"), b.expect("b ran"));
    let junit = root.join("compare.xml");
    let compare = |dirs: &[&Path], gates: &[&str]| -> Output {
        let mut cmd = Command::new(bin());
        cmd.arg("compare").args(dirs);
        for g in gates {
            cmd.args(["--gate", g]);
        }
        cmd.arg("--junit").arg(&junit).output().unwrap()
    };

    // 0: an absolute bound that holds.
    let out = compare(&[&a, &b], &["failures == 0"]);
    agrees("a gate held", &out, 0, &junit);

    // 1: an absolute bound broken.
    let out = compare(&[&a, &b], &["coffee.p99 <= 1us"]);
    let (f, e, _) = agrees("a gate breached", &out, 1, &junit);
    assert_eq!((f, e), (1, 0));

    // 1: a gate the runs cannot measure (B without request records has no mean): an error.
    let old = root.join("old");
    fs::create_dir_all(&old).unwrap();
    fs::copy(b.join("data.json"), old.join("data.json")).unwrap();
    let out = compare(&[&a, &old], &["coffee.mean <= +10%"]);
    let (f, e, xml) = agrees("a gate not measurable", &out, 1, &junit);
    assert_eq!((f, e), (0, 1), "{xml}");
    assert!(
        xml.contains("<error message=\"not measurable: &apos;mean&apos; needs request records"),
        "{xml}"
    );

    // 2: a gate that does not parse, and runs that cannot be gated: one error each.
    let out = compare(&[&a, &b], &["coffee.p99 <= +10"]);
    let (f, e, xml) = agrees("a bad gate", &out, 2, &junit);
    assert_eq!((f, e), (0, 1), "{xml}");
    assert!(xml.contains("column 15"), "{xml}");
    let other = root.join("other");
    fs::create_dir_all(&other).unwrap();
    let data = fs::read_to_string(b.join("data.json")).unwrap();
    fs::write(
        other.join("data.json"),
        data.replacen("\"scenario\": \"small\"", "\"scenario\": \"big\"", 1),
    )
    .unwrap();
    let out = compare(&[&a, &other], &["failures == 0"]);
    let (_, e, xml) = agrees("runs of different things", &out, 2, &junit);
    assert_eq!(e, 1, "{xml}");
    assert!(
        xml.contains("A ran scenario &apos;small&apos;, B ran &apos;big&apos;"),
        "{xml}"
    );
}
