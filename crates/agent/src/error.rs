//! The agent library's error: each message is one line for the person at the terminal, and the
//! variant says whose fault it is (the user's load, an agent, the files given to merge).

/// Why a distributed load, an agent's job or a merge failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The load cannot be split over the agents (fewer connections or requests than agents): a
    /// usage error.
    #[error("{0}")]
    Split(String),
    /// An agent could not be reached, refused the token, or broke the protocol.
    #[error("{0}")]
    Agent(String),
    /// Results or histograms that cannot be merged (no wall-clock origin, a histogram that does
    /// not decode or has other bounds).
    #[error("{0}")]
    Merge(String),
    /// A token file that cannot be read or is empty.
    #[error("{0}")]
    Token(String),
    /// A job's load arguments do not make an engine config, or a file the load names (the CA
    /// file) cannot be read.
    #[error("{0}")]
    Config(String),
}
