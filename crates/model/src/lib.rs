//! The recorded data of a proxybench run: the one schema that the load engine, the backend fleet,
//! the proxy driver and the bench write, and that every reporter (wrk-style text, JSON, report.md,
//! charts, compare) reads. Nothing in here runs anything; it is data plus exact arithmetic on it.
//!
//! Changes are additive within a schema version. Renaming or removing a field bumps
//! [`SCHEMA_VERSION`].

#![warn(missing_docs)]

pub mod generation;
pub mod hdr;
pub mod ledger;
pub mod load;
pub mod measured;
pub mod metric;
pub mod record;
pub mod records;
pub mod reloads;
pub mod results_dir;
pub mod run;
pub mod schedule;
pub mod scrape;
pub mod stream;
pub mod table;
pub mod url;
pub mod workload;

pub use load::*;
pub use measured::*;
pub use record::{CaseRecord, MeasuredRun, RunRecord};
pub use reloads::ReloadStats;
pub use run::*;
pub use table::*;
pub use workload::WorkloadKind;

pub use results_dir::{RECORD_VERSION, SCHEMA_VERSION};
