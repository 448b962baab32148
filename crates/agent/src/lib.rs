//! Distributed load: `proxybench agent` processes that each run an exact share of a load, the
//! coordinator that splits the work, synchronises their start and collects their results, and
//! the exact merge of result files (`proxybench merge`) that both use, and the `load` arguments
//! a coordinator holding an engine config sends ([`argv`]).

#![warn(missing_docs)]

pub mod argv;
pub mod coordinator;
pub mod error;
pub mod merge;
pub mod proto;
pub mod server;

pub use error::Error;
