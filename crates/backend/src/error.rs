//! What can go wrong when parsing a profile or operating the fleet.

use setup::profile::SpecError;

/// Why a fleet operation failed; every message is one line for the person at the terminal.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No instance has that name.
    #[error("no backend instance named '{0}'")]
    UnknownInstance(String),
    /// An instance with that name exists already.
    #[error("a backend instance named '{0}' exists already")]
    Duplicate(String),
    /// The operation does not apply in the instance's current state (e.g. restart while running).
    #[error("{name} is {state}: cannot {op} it")]
    State {
        /// Instance name.
        name: String,
        /// Its state (`running`, `draining`, `stopped`, `killed`).
        state: String,
        /// The refused operation.
        op: &'static str,
    },
    /// A profile spec did not parse.
    #[error("{0}")]
    Spec(#[from] SpecError),
    /// A socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, e.g. `backend-0: cannot listen on 127.0.0.1:8081`.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The fleet has been shut down.
    #[error("the backend fleet is shut down")]
    Stopped,
    /// A control request failed (transport error or an error answer from the control endpoint).
    #[error("control: {0}")]
    Control(String),
    /// A control request the endpoint cannot take as asked (an unknown parameter, a value that
    /// is not a number): the endpoint answers 400 with this message.
    #[error("{0}")]
    BadRequest(String),
}

impl Error {
    /// Wraps an I/O error with what was being attempted.
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    /// The HTTP status the control endpoint answers this error with.
    pub(crate) fn http_status(&self) -> u16 {
        match self {
            Error::UnknownInstance(_) => 404,
            Error::Duplicate(_) | Error::State { .. } => 409,
            Error::Spec(_) | Error::BadRequest(_) => 400,
            Error::Io { .. } | Error::Control(_) => 500,
            Error::Stopped => 503,
        }
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        match e {
            Error::Io { what, source } => {
                std::io::Error::new(source.kind(), format!("{what}: {source}"))
            }
            Error::Duplicate(_) => {
                std::io::Error::new(std::io::ErrorKind::AlreadyExists, e.to_string())
            }
            Error::Spec(_) => std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()),
            other => std::io::Error::other(other.to_string()),
        }
    }
}
