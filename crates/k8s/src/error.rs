//! The one error type of this crate: every message is one line that names what was asked (the
//! kubeconfig file and context, the object, the manifest file and document) and what the API
//! server answered, verbatim.

use std::path::PathBuf;
use std::time::Duration;

/// What went wrong talking to a cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No usable kubeconfig or context: the message names the file (or `KUBECONFIG`) and context.
    #[error("{0}")]
    Config(String),
    /// The API server did not answer: the message names the server, context and kubeconfig.
    #[error("{0}")]
    Unreachable(String),
    /// The API server refused or failed a request; `message` is its own text.
    #[error("{what}: {message}")]
    Api {
        /// The request, as `verb kind/name in namespace`.
        what: String,
        /// The API server's message (its `Status.message`), or the transport error.
        message: String,
        /// The HTTP status code; 0 when there was no response.
        code: u16,
    },
    /// A manifest could not be read, parsed or applied.
    #[error("{}: document {doc} (line {line}{}): {message}", file.display(), object_part(object))]
    Manifest {
        /// The manifest file.
        file: PathBuf,
        /// The document's 1-based index in the file.
        doc: usize,
        /// The line the document starts on (1-based).
        line: usize,
        /// `Kind/name` when the document got that far; empty otherwise.
        object: String,
        /// The parser's or the API server's message.
        message: String,
    },
    /// A bounded wait ran out.
    #[error("{what}: not done after {after:?} ({state})")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The bound.
        after: Duration,
        /// The last state seen.
        state: String,
    },
    /// A pod cannot start, and waiting longer would not change it (its image cannot be had on
    /// this cluster): the message names the pod or image and the kubelet's reason.
    #[error("{0}")]
    Unstartable(String),
    /// A request that cannot be made of its object's kind, refused before the API is asked
    /// (scaling a DaemonSet, which has no replica count).
    #[error("{0}")]
    Refused(String),
    /// An object of the name a run would make exists and is not the run's (no
    /// `app.kubernetes.io/instance` label of the run): it is left alone, never overwritten.
    #[error("{0}")]
    NotOurs(String),
    /// A local file could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// The file and operation.
        what: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
}

fn object_part(object: &str) -> String {
    if object.is_empty() {
        String::new()
    } else {
        format!(", {object}")
    }
}

impl Error {
    /// An API error for `what` from a kube error, keeping the server's message and code.
    pub fn api(what: impl Into<String>, e: kube::Error) -> Error {
        let (message, code) = split(e);
        Error::Api {
            what: what.into(),
            message,
            code,
        }
    }

    /// True when the API server answered 404 (the object or the resource does not exist).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api { code: 404, .. })
    }

    /// An I/O error on a named file or operation.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

/// The API server's message and code of a kube error, or its transport error text and 0.
pub(crate) fn split(e: kube::Error) -> (String, u16) {
    match e {
        kube::Error::Api(s) => {
            let msg = if s.message.is_empty() {
                s.reason.clone()
            } else {
                s.message.clone()
            };
            (one_line(&msg), s.code)
        }
        other => (one_line(&chain(&other)), 0),
    }
}

/// An error and its sources on one line (`a: b: c`), without repeating a source already in the text.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s
}

/// Newlines folded so that a message stays one line.
pub(crate) fn one_line(s: &str) -> String {
    s.split('\n')
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" / ")
}
