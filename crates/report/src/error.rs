//! The one error type of the report crate, with messages written for the person at the terminal.

use std::path::PathBuf;

/// Why reading, writing or rendering a results directory failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The directory holds no data.json, so it is not a results directory.
    #[error("{}: no data.json here; is this a proxybench results directory?", dir.display())]
    MissingData {
        /// The directory that was given.
        dir: PathBuf,
    },
    /// data.json was written by a proxybench with another schema version.
    #[error("{}: schema version {found}, but this proxybench reads version {expected}", path.display())]
    Schema {
        /// The data.json file.
        path: PathBuf,
        /// The version found in the file (`none` when the field is missing).
        found: String,
        /// The version this build reads.
        expected: u32,
    },
    /// data.json is not valid JSON for the schema.
    #[error("{}: not a valid results file: {msg}", path.display())]
    Parse {
        /// The data.json file.
        path: PathBuf,
        /// The parser's message (with line and column).
        msg: String,
    },
    /// Two runs that cannot be gated against each other (another scenario, other loads), or a
    /// gate that names no load of theirs: what differs.
    #[error("cannot gate these runs: {0}")]
    Mismatch(String),
    /// A run that is not fit to be gated: cut short, its target unusable, or a load that ran
    /// far less than planned.
    #[error("cannot gate {who} ({}): {why}", dir.display())]
    Unfit {
        /// Which run (`A`, `B run 2`).
        who: String,
        /// Its results directory.
        dir: PathBuf,
        /// Why it is not comparable.
        why: String,
    },
    /// `compare --calibrate` given runs it cannot calibrate on.
    #[error("--calibrate: {0}")]
    Calibration(String),
    /// A chart could not be drawn or encoded.
    #[error("chart {}: {msg}", path.display())]
    Chart {
        /// The chart file.
        path: PathBuf,
        /// What plotters said.
        msg: String,
    },
}

/// What plotters said when a chart could not be drawn (its errors are generic over the drawing
/// backend, so the text is what is kept).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DrawError(pub String);

impl DrawError {
    /// Keeps the text of a drawing backend's error.
    pub(crate) fn of(e: impl std::fmt::Display) -> DrawError {
        DrawError(e.to_string())
    }
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
