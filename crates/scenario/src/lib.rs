//! The scenario language: a scenario file's text resolved into runnable cases, every problem a
//! `file:line` error before anything runs. The layers a file merges ([`layers`]), the types it
//! resolves into ([`spec`]), where its cases run ([`platform`]), its timed actions (`action`), the
//! parser that builds and validates cases ([`parse`]), the checks a case may state ([`checks`]),
//! the names that become result directories ([`paths`]), where loads may send ([`reach`]), the
//! built-in catalogue ([`catalogue`]) and what it asks of a template engine ([`templating`]).
//!
//! It knows analyses by name only: a scenario's `analysis = "NAME"` is checked against
//! [`ParseOptions::analyses`], which the analysis crate fills from its registry.
#![warn(missing_docs)]

mod action;
pub mod catalogue;
pub mod checks;
pub mod error;
pub mod generators;
pub mod layers;
pub mod parse;
pub mod paths;
pub mod platform;
pub mod reach;
pub mod spec;
pub mod templating;

pub use error::{CheckError, FlagError, PathError, ScenarioError};
pub use parse::*;
pub use platform::*;
pub use reach::ReachError;
pub use spec::*;
pub use templating::{TemplateRefusal, Templates};
