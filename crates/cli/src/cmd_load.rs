//! `proxybench load`: flags and dispatch.

use crate::CliError;
use std::process::ExitCode;

/// Flags of `proxybench load`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `proxybench load`.
pub fn main(_args: Args) -> Result<ExitCode, CliError> {
    Err(CliError::runtime("'load' is being built"))
}
