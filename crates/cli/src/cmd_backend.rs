//! `proxybench backend`: flags and dispatch.

use crate::CliError;
use std::process::ExitCode;

/// Flags of `proxybench backend`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `proxybench backend`.
pub fn main(_args: Args) -> Result<ExitCode, CliError> {
    Err(CliError::runtime("'backend' is being built"))
}
