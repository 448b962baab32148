//! `proxybench merge`: reads result files from any machines and merges them exactly, printing
//! the wrk-style block of the total and a per-input table.

use crate::CliError;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags of `proxybench merge`.
#[derive(clap::Args)]
pub struct Args {
    /// Result files (`proxybench load --format json`, or an agent's saved result).
    #[arg(required = true, value_name = "FILE.json")]
    files: Vec<PathBuf>,
    /// Write the merged result here (the same format).
    #[arg(short = 'o', long = "output", value_name = "FILE.json")]
    output: Option<PathBuf>,
    /// Print the latency distribution.
    #[arg(long)]
    latency: bool,
}

/// Runs `proxybench merge`.
pub fn main(args: Args) -> Result<ExitCode, CliError> {
    let mut inputs = Vec::with_capacity(args.files.len());
    for f in &args.files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| CliError::usage(format!("cannot read {}: {e}", f.display())))?;
        let r = model::LoadResult::from_json(&text)
            .map_err(|e| CliError::usage(format!("{}:{}: {e}", f.display(), e.line())))?;
        inputs.push(r);
    }
    let merged = agent::merge::merge(&inputs).map_err(|e| CliError::usage(e.to_string()))?;
    if let Some(o) = &args.output {
        std::fs::write(o, merged.to_json_pretty())
            .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", o.display())))?;
    }
    let text = report::text::render(
        &merged.summary,
        &report::text::TextOptions {
            latency_distribution: args.latency,
            uncorrected: false,
        },
    ) + &agent::merge::agent_table(&merged.ext.agents);
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    Ok(ExitCode::SUCCESS)
}
