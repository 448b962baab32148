//! Distributed load: `proxybench agent` processes that each run an exact share of a load, the
//! coordinator that splits the work, synchronises their start and collects their results, and
//! the exact merge of result files (`proxybench merge`) that both use, and the file that travels
//! beside the engine config a coordinator sends ([`files`]).

#![warn(missing_docs)]

pub mod coordinator;
pub mod error;
pub mod files;
pub mod merge;
pub mod proto;
pub mod server;

pub use error::Error;
