//! Distributed load: `proxybench agent` processes that each run an exact share of a load, the
//! coordinator that splits the work, synchronises their start and collects their results, and
//! the exact merge of result files (`proxybench merge`) that both use.

#![warn(missing_docs)]

pub mod coordinator;
pub mod merge;
pub mod proto;
pub mod server;
