//! Results-path safety: names a scenario chooses (its own name, its cases' names) become
//! directory names under the results directory (`<root>/<scenario>/<stamp>/{configs,logs}/<case>`,
//! the case's work directory). None of them may climb out (`..`), replace the base (an absolute
//! path) or reach into a subdirectory (`/`). The scenario parser rejects such names with
//! `file:line`; the runner joins through [`join_plain`] all the same.

use crate::error::PathError;
use std::path::{Path, PathBuf};

pub use model::results_dir::{plain_name_problem, MAX_NAME};

/// `base/name`, refusing (with a one-line reason) a `name` that is not one plain component, so
/// nothing is ever written outside `base`.
pub fn join_plain(base: &Path, what: &str, name: &str) -> Result<PathBuf, PathError> {
    match plain_name_problem(name) {
        None => Ok(base.join(name)),
        Some(why) => Err(PathError {
            what: what.to_string(),
            name: name.to_string(),
            why,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_join() {
        let base = Path::new("/r/s/t");
        for ok in ["main", "3rps-even", "a.b", "..a", "a..", "with space", "é"] {
            assert_eq!(join_plain(base, "case", ok).unwrap(), base.join(ok), "{ok}");
        }
        for (bad, why) in [
            ("", "case '' is empty"),
            ("..", "case '..' is not a name (it means this or the parent directory)"),
            (".", "case '.' is not a name (it means this or the parent directory)"),
            (
                "../x",
                "case '../x' must not contain '/' (it becomes a directory name under the results)",
            ),
            (
                "/etc",
                "case '/etc' must not contain '/' (it becomes a directory name under the results)",
            ),
            (
                "a\\..\\b",
                "case 'a\\\\..\\\\b' must not contain '\\\\' (it becomes a directory name under the results)",
            ),
            (
                "a\0b",
                "case 'a\\0b' must not contain '\\0' (it becomes a directory name under the results)",
            ),
        ] {
            assert_eq!(
                join_plain(base, "case", bad).unwrap_err().to_string(),
                why,
                "{bad:?}"
            );
        }
        let long = "x".repeat(MAX_NAME + 1);
        assert!(join_plain(base, "case", &long)
            .unwrap_err()
            .to_string()
            .ends_with("is longer than 100 bytes"));
        assert!(join_plain(base, "case", &long[1..]).is_ok());
    }

    fn parse(text: &str) -> Result<crate::Scenario, crate::layers::ScenarioError> {
        let src = crate::layers::Source {
            file: "escape.toml".into(),
            text: text.into(),
        };
        crate::Scenario::parse(&src, false)
    }

    #[test]
    fn the_parser_refuses_case_names_that_leave_the_results_with_file_and_line() {
        assert_eq!(
            parse(&testkit::two_cases_scenario("escape", "ok"))
                .unwrap()
                .cases
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            ["first", "ok"]
        );
        for (name, why) in [
            (
                "../x",
                "must not contain '/' (it becomes a directory name under the results)",
            ),
            (
                "/tmp/x",
                "must not contain '/' (it becomes a directory name under the results)",
            ),
            (
                "..",
                "is not a name (it means this or the parent directory)",
            ),
        ] {
            let e = parse(&testkit::two_cases_scenario("escape", name))
                .unwrap_err()
                .to_string();
            // Line 24 is the second `[[cases]]`.
            assert_eq!(e, format!("escape.toml:24: case name '{name}' {why}"));
        }
        let e = parse(&testkit::two_cases_scenario("..", "ok"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "escape.toml:1: scenario name '..' must be letters, digits, '-', '_' or '.', and not only dots"
        );
    }
}
