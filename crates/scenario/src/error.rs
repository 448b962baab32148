//! The error types of the scenario language. Each message is one line written for the person at
//! the terminal; a scenario file's own errors ([`ScenarioError`]) add `file:line`. The one error
//! of where loads may send, `ReachError`, lives beside those rules, in [`crate::reach`].

/// An error in a scenario file, with the place it points at: `file:line: reason`, or
/// `file: reason` when it has no place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{}{message}", line.map_or(" ".to_string(), |l| format!("{l}: ")))]
pub struct ScenarioError {
    /// File name as given (or `<builtin>/NAME.toml`).
    pub file: String,
    /// 1-based line, when the error has a place.
    pub line: Option<usize>,
    /// One-line reason.
    pub message: String,
}

/// A value the scenario language refuses, before it is placed: one line, which the parser turns
/// into a [`ScenarioError`] at the line of the key it is about. The validators return it rather
/// than a bare string, so that a refusal cannot be mistaken for text, nor leave without a place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Invalid(pub(crate) String);

impl From<String> for Invalid {
    fn from(s: String) -> Invalid {
        Invalid(s)
    }
}

impl From<&str> for Invalid {
    fn from(s: &str) -> Invalid {
        Invalid(s.to_string())
    }
}

impl From<Invalid> for String {
    fn from(e: Invalid) -> String {
        e.0
    }
}

/// A command-line platform flag whose value is wrong on its own (`--namespace`, `--context`,
/// `--image`...): one line naming the flag, for exit 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FlagError(pub String);

/// A name (a scenario's, a case's) that cannot be one directory under the results directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} '{}' {why}", name.escape_debug())]
pub struct PathError {
    /// What the name names, e.g. `case name`.
    pub what: String,
    /// The name as given.
    pub name: String,
    /// Why it cannot be a directory name (see [`crate::paths::plain_name_problem`]).
    pub why: String,
}

/// A check that does not parse (the message names the bad part), or a metric a case did not
/// record (the reason a check reports as `no data: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CheckError(pub String);

impl From<String> for CheckError {
    fn from(s: String) -> CheckError {
        CheckError(s)
    }
}

impl From<&str> for CheckError {
    fn from(s: &str) -> CheckError {
        CheckError(s.to_string())
    }
}

/// A load metric's name, value or reading, in the vocabulary checks share with gates.
impl From<model::metric::MetricError> for CheckError {
    fn from(e: model::metric::MetricError) -> CheckError {
        CheckError(e.0)
    }
}
