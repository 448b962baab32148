//! Scenarios and the runner that plays them against a real proxy.
#![warn(missing_docs)]

pub mod checks;
pub mod env;
pub mod layers;
pub mod procfs;
pub mod theory;
