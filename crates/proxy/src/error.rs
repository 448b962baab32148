//! The one error type of the crate: each variant says whose fault it is.

/// Why a proxy operation failed. `Display` prints a message fit for a terminal line (nginx's own
/// text is kept verbatim).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config model is inconsistent (unknown names, duplicates, values the proxy cannot express).
    #[error("{0}")]
    Invalid(String),
    /// The proxy refused the config or failed to start; the text is the proxy's own output,
    /// verbatim.
    #[error("{0}")]
    Refused(String),
    /// An operating-system call failed; the first part says what we were doing.
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// Something did not happen within its time bound.
    #[error("{0}")]
    Timeout(String),
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub(crate) fn io(what: impl Into<String>, e: std::io::Error) -> Error {
        Error::Io(what.into(), e)
    }
}

impl From<setup::proxy::Invalid> for Error {
    fn from(e: setup::proxy::Invalid) -> Error {
        Error::Invalid(e.0)
    }
}
