//! The one error type of the crate: each variant says whose fault it is.

use std::fmt;

/// Why a proxy operation failed. `Display` prints a message fit for a terminal line (nginx's own
/// text is kept verbatim).
#[derive(Debug)]
pub enum Error {
    /// The config model is inconsistent (unknown names, duplicates, values nginx cannot express).
    Invalid(String),
    /// nginx refused the config or failed to start; the text is nginx's own output, verbatim.
    Nginx(String),
    /// An operating-system call failed; the first part says what we were doing.
    Io(String, std::io::Error),
    /// Something did not happen within its time bound.
    Timeout(String),
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub(crate) fn io(what: impl Into<String>, e: std::io::Error) -> Error {
        Error::Io(what.into(), e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid(m) | Error::Nginx(m) | Error::Timeout(m) => f.write_str(m),
            Error::Io(what, e) => write!(f, "{what}: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(_, e) => Some(e),
            _ => None,
        }
    }
}
