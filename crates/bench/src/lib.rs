//! Scenarios and the runner that plays them against a real proxy: the scenario file format
//! ([`scenario`]), the stack a case stands up ([`stack`]), the runner ([`runner`]), the collectors
//! ([`procfs`]), checks ([`checks`]) and the theory the catalogue checks against ([`theory`]).
#![warn(missing_docs)]

pub mod analysis;
pub mod catalogue;
pub mod checks;
pub mod env;
pub mod error;
pub mod layers;
pub mod paths;
pub mod procfs;
pub mod progress;
pub mod reach;
pub mod runner;
pub mod scenario;
pub mod stack;
pub mod theory;
