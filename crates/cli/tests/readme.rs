//! The README's worked example, run: every command of its `console` blocks (the lines that start
//! with `$ `) runs, in order, in one bash in a scratch directory with the built binary first on
//! PATH, and must print what the README shows under it. Numbers a run measures (a load line's
//! counts, rates and p99, a check's actual value, the results directory's time stamp) may differ;
//! every other line must be the same, the checks' PASS lines and the exit code included. The files
//! docs/results.md lists in the results directory must be there too. Needs nginx, as the other
//! end-to-end tests do (`make test` installs it).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The README, read at compile time, so editing the example edits this test.
const README: &str = include_str!("../../../README.md");
/// The results page, whose listing of the results directory is checked against a real run.
const RESULTS_MD: &str = include_str!("../../../docs/results.md");

/// One `$ ` command of the example and the lines the README shows it printing.
#[derive(Debug)]
struct Step {
    cmd: String,
    expected: Vec<String>,
}

/// The lines of the README section whose heading starts with `heading`, up to the next `## `.
fn section<'a>(doc: &'a str, heading: &str) -> Vec<&'a str> {
    let mut lines = doc.lines().skip_while(|l| !l.starts_with(heading));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("no section `{heading}`"));
    std::iter::once(first)
        .chain(lines.take_while(|l| !l.starts_with("## ")))
        .collect()
}

/// The commands of the `console` blocks of `lines`, each with its expected output.
fn steps(lines: &[&str]) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut in_console = false;
    for l in lines {
        if l.starts_with("```") {
            in_console = !in_console && l.trim() == "```console";
            continue;
        }
        if !in_console {
            continue;
        }
        if let Some(cmd) = l.strip_prefix("$ ") {
            steps.push(Step {
                cmd: cmd.to_string(),
                expected: Vec::new(),
            });
        } else {
            let step = steps
                .last_mut()
                .unwrap_or_else(|| panic!("README: output before any `$ ` command: {l}"));
            step.expected.push(l.to_string());
        }
    }
    steps
}

/// The first fenced block of `lines`.
fn first_block<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    lines
        .iter()
        .skip_while(|l| !l.starts_with("```"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .copied()
        .collect()
}

/// `s` with its runs of whitespace made one space.
fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `s` with every number (`83,230`, `2773.40`, `0`) replaced by `#`.
fn mask_numbers(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_ascii_digit() {
            out.push(c);
            continue;
        }
        out.push('#');
        loop {
            match chars.peek() {
                Some(d) if d.is_ascii_digit() => {
                    chars.next();
                }
                Some(',' | '.') => {
                    let mut ahead = chars.clone();
                    ahead.next();
                    if ahead.peek().is_some_and(|d| d.is_ascii_digit()) {
                        chars.next();
                    } else {
                        break;
                    }
                }
                _ => break,
            }
        }
    }
    out
}

/// A check line with its measured value (`(actual X, expected ...)`) taken out.
fn mask_actual(s: &str) -> String {
    match (s.find("(actual "), s.find(", expected ")) {
        (Some(a), Some(e)) if a < e => format!("{}(actual *{}", &s[..a], &s[e..]),
        _ => s.to_string(),
    }
}

/// Whether `actual` is what the README line `expected` shows, up to what a run measures.
fn line_matches(expected: &str, actual: &str) -> bool {
    let (e, a) = (squeeze(expected), squeeze(actual));
    if e == a {
        return true;
    }
    if e.contains(" requests ") && e.contains(" req/s ") {
        // A load's line: its counts, rate, failures and p99 are measured.
        return mask_numbers(&e) == mask_numbers(&a);
    }
    if e.starts_with("PASS ") || e.starts_with("FAIL ") {
        return mask_actual(&e) == mask_actual(&a);
    }
    if let (Some(ep), Some(ap)) = (e.strip_prefix("results: "), a.strip_prefix("results: ")) {
        // The results directory: an absolute path ending in results/<scenario>/<UTC stamp>.
        let tail = |p: &str| p.rsplit_once("/results/").map(|(_, t)| mask_numbers(t));
        return Path::new(ap).is_dir() && tail(ep).is_some() && tail(ep) == tail(ap);
    }
    false
}

/// Runs every step in one bash in `dir`; returns each step's output lines and exit code.
fn run_steps(steps: &[Step], dir: &Path) -> Vec<(Vec<String>, i32)> {
    const END: &str = "@@readme-step-end@@";
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_proxybench"))
        .parent()
        .unwrap()
        .to_path_buf();
    let mut script = String::from("exec 2>&1\n");
    for s in steps {
        // Each command's exit status is printed with the marker and then restored, so that a
        // following `echo $?` sees it as a terminal would.
        script.push_str(&format!(
            "{}\n__rc=$?\nprintf '\\n{END} %d\\n' \"$__rc\"\n(exit \"$__rc\")\n",
            s.cmd
        ));
    }
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(dir)
        .env("PATH", path)
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut results = Vec::new();
    let mut rest = text.as_str();
    for _ in steps {
        let at = rest
            .find(&format!("\n{END} "))
            .unwrap_or_else(|| panic!("the example's commands stopped early:\n{text}"));
        let output = &rest[..at];
        let after = &rest[at + END.len() + 2..];
        let (code, next) = after.split_once('\n').unwrap_or((after, ""));
        let lines = if output.is_empty() {
            Vec::new()
        } else {
            output.lines().map(str::to_string).collect()
        };
        results.push((lines, code.trim().parse().unwrap()));
        rest = next;
    }
    results
}

/// What differs between the README's lines and a run's, one message per difference.
fn differences(steps: &[Step], got: &[(Vec<String>, i32)]) -> Vec<String> {
    let mut diffs = Vec::new();
    for (s, (lines, _)) in steps.iter().zip(got) {
        if s.expected.len() != lines.len() {
            diffs.push(format!(
                "`{}`: the README shows {} lines, the run printed {}:\n{}",
                s.cmd,
                s.expected.len(),
                lines.len(),
                lines.join("\n")
            ));
            continue;
        }
        for (e, a) in s.expected.iter().zip(lines) {
            if !line_matches(e, a) {
                diffs.push(format!("`{}`:\n  README: {e}\n  run:    {a}", s.cmd));
            }
        }
    }
    diffs
}

/// The one results directory under `root/results/<scenario>/`.
fn results_dir(root: &Path) -> PathBuf {
    let scenarios: Vec<PathBuf> = fs::read_dir(root.join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(scenarios.len(), 1, "{scenarios:?}");
    let runs: Vec<PathBuf> = fs::read_dir(&scenarios[0])
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

/// The file and directory names docs/results.md lists in its results directory block.
fn listed_files() -> Vec<String> {
    let block = first_block(&section(RESULTS_MD, "## The results directory"));
    block
        .iter()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|t| t.ends_with('/') || t.contains('.'))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_worked_example_prints_what_the_readme_shows() {
    let steps = steps(&section(README, "## Worked example"));
    assert!(
        steps.iter().any(|s| s.cmd.starts_with("proxybench run")),
        "the worked example runs no `proxybench run`: {steps:?}"
    );
    let listed = listed_files();
    assert!(listed.len() >= 10, "docs/results.md lists {listed:?}");
    // The default scenario's checks bound latency; on a busy machine one of three attempts must
    // pass them (a failed check exits 1), never with a looser bound.
    let mut failures = Vec::new();
    for attempt in 1..=3 {
        let tmp = tempfile::tempdir().unwrap();
        let got = run_steps(&steps, tmp.path());
        let diffs = differences(&steps, &got);
        if diffs.is_empty() {
            let dir = results_dir(tmp.path());
            for f in &listed {
                assert!(
                    dir.join(f.trim_end_matches('/')).exists(),
                    "docs/results.md lists {f}, which the run did not write in {}",
                    dir.display()
                );
            }
            return;
        }
        let check_failed = got.iter().any(|(_, code)| *code == 1);
        failures.push(format!("attempt {attempt}:\n{}", diffs.join("\n")));
        eprintln!("{}", failures.last().unwrap());
        assert!(check_failed, "{}", failures.join("\n"));
    }
    panic!("{}", failures.join("\n"));
}

#[test]
fn numbers_and_paths_are_masked_only_where_a_run_measures_them() {
    assert_eq!(
        slug("Live metrics (`--metrics-listen`)"),
        "live-metrics---metrics-listen"
    );
    assert_eq!(
        links("see [a](b.md#c) and [d](#e), not `[x](y)`?"),
        ["b.md#c", "#e", "y"]
    );
    assert_eq!(
        mask_numbers("coffee  83,230 requests  2773.40 req/s  p99 11.79ms."),
        "coffee  # requests  # req/s  p# #ms."
    );
    let load = "    coffee  83,230 requests  2773.40 req/s  failed 0 (0 ppm)  p99 11.79ms";
    assert!(line_matches(
        load,
        "    coffee  9,001 requests  300.00 req/s  failed 2 (222 ppm)  p99 9.01ms"
    ));
    assert!(!line_matches(
        load,
        "    tea  9,001 requests  300.00 req/s  failed 2 (222 ppm)  p99 9.01ms"
    ));
    let pass = "    PASS [main] tea.p99 <= 250ms  (actual 54.11ms, expected <= 250.00ms)";
    assert!(line_matches(
        pass,
        "    PASS [main] tea.p99 <= 250ms  (actual 9.00ms, expected <= 250.00ms)"
    ));
    assert!(!line_matches(
        pass,
        "    FAIL [main] tea.p99 <= 250ms  (actual 300.00ms, expected <= 250.00ms)"
    ));
    // Everything else is exact: the number of checks that passed is not a measurement.
    assert!(!line_matches(
        "  checks: 5/5 passed",
        "  checks: 4/5 passed"
    ));
    let s = steps(&[
        "```console",
        "$ proxybench run",
        "default: 1 case",
        "$ echo $?",
        "0",
        "```",
        "```",
        "$ not a command",
        "```",
    ]);
    assert_eq!(s.len(), 2, "{s:?}");
    assert_eq!(s[1].cmd, "echo $?");
    assert_eq!(s[1].expected, ["0"]);
}

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown file's headings (outside code fences).
fn anchors(text: &str) -> Vec<String> {
    let mut fence = false;
    let mut out = Vec::new();
    for l in text.lines() {
        if l.starts_with("```") {
            fence = !fence;
        } else if !fence && l.starts_with('#') {
            let title = l.trim_start_matches('#');
            if title.starts_with(' ') {
                out.push(slug(title));
            }
        }
    }
    out
}

/// The targets of a markdown file's inline links `[text](target)` (outside code fences).
fn links(text: &str) -> Vec<String> {
    let mut fence = false;
    let mut out = Vec::new();
    for l in text.lines() {
        if l.starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        let mut rest = l;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_link_between_the_readme_and_docs_reaches_a_file_and_heading() {
    let root = repo();
    let mut pages = vec![root.join("README.md")];
    for e in fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            pages.push(p);
        }
    }
    assert!(pages.len() >= 10, "{pages:?}");
    let mut broken = Vec::new();
    for page in &pages {
        let text = fs::read_to_string(page).unwrap();
        for link in links(&text) {
            if link.starts_with("http://") || link.starts_with("https://") {
                continue;
            }
            let (file, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !target.exists() {
                broken.push(format!("{}: {link}: no such file", page.display()));
            } else if !anchor.is_empty() {
                let doc = fs::read_to_string(&target).unwrap();
                if !anchors(&doc).iter().any(|a| a == anchor) {
                    broken.push(format!("{}: {link}: no such heading", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_readme_catalogue_has_one_row_per_built_in_scenario() {
    let out = Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .arg("scenarios")
        .output()
        .unwrap();
    assert!(out.status.success());
    let listed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(listed.len() >= 6, "{listed:?}");
    let rows: Vec<String> = section(README, "## Scenario catalogue")
        .iter()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name.to_string()))
        .collect();
    assert_eq!(rows, listed, "README rows against `proxybench scenarios`");
    for f in fs::read_dir(repo().join("scenarios")).unwrap() {
        let name = f.unwrap().file_name().to_string_lossy().into_owned();
        let stem = name.trim_end_matches(".toml");
        assert!(
            rows.iter().any(|r| r == stem) || README.contains(&format!("`scenarios/{name}`")),
            "scenarios/{name} is not in the README's catalogue"
        );
    }
}

#[test]
fn the_default_scenario_shown_in_full_is_the_file() {
    // docs/scenarios.md says of its first TOML block: "This is the default scenario, in full".
    let page = fs::read_to_string(repo().join("docs/scenarios.md")).unwrap();
    let lines: Vec<&str> = page.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.ends_with("This is the default scenario, in full:"))
        .expect("docs/scenarios.md shows the default scenario");
    let block = first_block(&lines[start..]);
    assert_eq!(lines[start + 2], "```toml");
    let file = fs::read_to_string(repo().join("scenarios/default.toml")).unwrap();
    assert_eq!(block.join("\n") + "\n", file);
}
