//! `proxybench agent`: listens for coordinators (`load --agent-hosts`) that present the token,
//! and runs the share of a load each one gives it.

use crate::CliError;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags of `proxybench agent`.
#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on, e.g. 0.0.0.0:7070 (port 0: the OS picks; the address is printed).
    #[arg(long, value_name = "ADDR")]
    listen: String,
    /// File holding the shared token a coordinator must present.
    #[arg(long = "token-file", value_name = "FILE")]
    token_file: PathBuf,
    #[command(flatten)]
    metrics: crate::metrics::MetricsFlags,
}

/// Runs `proxybench agent` until killed.
pub fn main(args: Args) -> Result<ExitCode, CliError> {
    let token =
        agent::proto::read_token(&args.token_file).map_err(|e| CliError::usage(e.to_string()))?;
    let listener = std::net::TcpListener::bind(&args.listen)
        .map_err(|e| CliError::usage(format!("--listen {}: {e}", args.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| CliError::runtime(e.to_string()))?;
    let live = args.metrics.start(
        openmetrics::Info {
            command: "agent".to_string(),
            scenario: None,
            agent: Some(format!("{}:{}", host_name(), addr.port())),
        },
        None,
    )?;
    println!("proxybench agent listening on {addr}");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    agent::server::serve(listener, token, live.as_ref().map(|l| l.registry.clone()))
        .map_err(|e| CliError::runtime(e.to_string()))?;
    Ok(ExitCode::SUCCESS)
}

/// This machine's (or pod's) host name, for the `agent` label of its metrics.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}
