//! `proxybench run`, `scenarios`, `report` and `compare`: flags and dispatch.

use crate::CliError;
use std::process::ExitCode;

/// Flags of `proxybench run`.
#[derive(clap::Args)]
pub struct RunArgs {}

/// Flags of `proxybench scenarios`.
#[derive(clap::Args)]
pub struct ScenariosArgs {}

/// Flags of `proxybench report`.
#[derive(clap::Args)]
pub struct ReportArgs {}

/// Flags of `proxybench compare`.
#[derive(clap::Args)]
pub struct CompareArgs {}

/// Runs `proxybench run`.
pub fn run(_a: RunArgs) -> Result<ExitCode, CliError> {
    Err(CliError::runtime("'run' is being built"))
}

/// Runs `proxybench scenarios`.
pub fn scenarios(_a: ScenariosArgs) -> Result<ExitCode, CliError> {
    Err(CliError::runtime("'scenarios' is being built"))
}

/// Runs `proxybench report`.
pub fn report(_a: ReportArgs) -> Result<ExitCode, CliError> {
    Err(CliError::runtime("'report' is being built"))
}

/// Runs `proxybench compare`.
pub fn compare(_a: CompareArgs) -> Result<ExitCode, CliError> {
    Err(CliError::runtime("'compare' is being built"))
}
