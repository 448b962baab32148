//! The record stage: plays a scenario (parsed by the `scenario` crate) against a real proxy. The
//! stage a case stands up on its platform ([`platform`], with [`grow`]), the runner
//! ([`runner`]) that records a run through the analysis crate's `record` module, the collectors
//! ([`procfs`], [`env`](mod@env)), where loads may connect ([`reach`]), and
//! [`analyse::analyse_dir`], which analyses a results directory and writes its report.
#![warn(missing_docs)]

pub mod analyse;
pub mod env;
pub mod error;
pub mod grow;
pub mod platform;
pub mod procfs;
pub mod progress;
pub mod rbac;
pub mod reach;
pub mod runner;
