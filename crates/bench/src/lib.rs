//! Scenarios and the runner that plays them against a real proxy: the scenario file format
//! ([`scenario`]), the stack a case stands up ([`stack`]), the runner ([`runner`]) that records
//! a run ([`record`]), the collectors ([`procfs`]), the analyse stage ([`analyse`]) with its
//! checks ([`checks`]), analyses ([`analysis`]) and the theory they check against ([`theory`]).
#![warn(missing_docs)]

pub mod analyse;
pub mod analysis;
pub mod catalogue;
pub mod checks;
pub mod env;
pub mod error;
pub mod grow;
pub mod layers;
pub mod paths;
pub mod platform;
pub mod procfs;
pub mod progress;
pub mod reach;
pub mod record;
pub mod runner;
pub mod scenario;
pub mod stack;
pub mod theory;
