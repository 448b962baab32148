//! `proxybench`: argument parsing and dispatch, nothing else. Each subcommand's flags live in a
//! module of their own and hand a validated config to a library crate.

mod cmd_agent;
mod cmd_backend;
mod cmd_k8s;
mod cmd_load;
mod cmd_load_stream;
mod cmd_merge;
mod cmd_proxies;
mod cmd_run;
mod metrics;
mod outcome;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Why a command failed. Usage errors exit 2 with a one-line message; runtime failures exit 1.
#[derive(Debug)]
pub enum CliError {
    /// The input (a flag, a file, a spec) is wrong: exit 2.
    Usage(String),
    /// Something failed while running: exit 1.
    Runtime(String),
}

/// A scenario file that does not parse or validate is bad input.
impl From<scenario::layers::ScenarioError> for CliError {
    fn from(e: scenario::layers::ScenarioError) -> CliError {
        CliError::Usage(e.to_string())
    }
}

/// A scenario that cannot run as written is bad input; a run that cannot begin is a failure.
impl From<bench::runner::RunError> for CliError {
    fn from(e: bench::runner::RunError) -> CliError {
        if e.is_refusal() {
            CliError::Usage(e.to_string())
        } else {
            CliError::Runtime(e.to_string())
        }
    }
}

/// A load that cannot start: an engine failure (threads, epoll, files) is a runtime failure,
/// anything else (url, header, TLS files, values) is bad input.
impl From<load::Error> for CliError {
    fn from(e: load::Error) -> CliError {
        match e {
            load::Error::Io(m) => CliError::Runtime(m),
            other => CliError::Usage(other.to_string()),
        }
    }
}

/// A results directory that cannot be read, or a report that cannot be written there, is
/// reported as bad input (the directory given is the thing to check).
impl From<report::Error> for CliError {
    fn from(e: report::Error) -> CliError {
        CliError::Usage(e.to_string())
    }
}

impl CliError {
    /// Shorthand for a usage error.
    pub fn usage(msg: impl Into<String>) -> CliError {
        CliError::Usage(msg.into())
    }
    /// Shorthand for a runtime failure.
    pub fn runtime(msg: impl Into<String>) -> CliError {
        CliError::Runtime(msg.into())
    }
}

/// A testbench for HTTP reverse proxies and gateways.
#[derive(Parser)]
#[command(
    name = "proxybench",
    version,
    about,
    long_about = None,
    after_help = "Exit codes: 0 everything held; 1 a check or an action failed; 2 bad input; \
                  3 the target was unusable (every request of a load failed); 130 interrupted.\n\
                  `proxybench run --help` and `proxybench load --help` give the details."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate HTTP load against a URL (wrk-compatible output), or hold long-lived connections
    /// (WebSocket, gRPC, server-sent events) open against it.
    Load(Box<cmd_load::Args>),
    /// Run a fleet of emulated backends in the foreground.
    Backend(cmd_backend::Args),
    /// Run a scenario (default: the built-in default scenario) and write a results directory.
    Run(cmd_run::RunArgs),
    /// List the built-in scenarios.
    Scenarios(cmd_run::ScenariosArgs),
    /// Validate a scenario (a file or a built-in name) without running anything, like `nginx -t`.
    Check(cmd_run::CheckArgs),
    /// Rebuild report.md, report.html and charts from a results directory's data.json.
    Report(cmd_run::ReportArgs),
    /// Analyse a results directory's record again: data.json, CSVs, report.md and charts.
    Analyse(cmd_run::AnalyseArgs),
    /// Compare runs side by side; gate B against A (`--gate`), several runs a side; `--calibrate`.
    Compare(cmd_run::CompareArgs),
    /// Serve as a load agent for `proxybench load --agent-hosts` coordinators.
    Agent(cmd_agent::Args),
    /// Merge result files (`load --format json`) exactly: histograms and counts added.
    Merge(cmd_merge::Args),
    /// Print the capability table: what each proxy kind can express of the scenario model.
    Capabilities(cmd_proxies::CapabilitiesArgs),
    /// Kubernetes chores: `k8s clean` deletes what killed or kept runs left on a cluster.
    K8s(cmd_k8s::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind as K;
            if matches!(e.kind(), K::DisplayHelp | K::DisplayVersion)
                || e.kind() == K::DisplayHelpOnMissingArgumentOrSubcommand
            {
                let _ = e.print();
                return if e.kind() == K::DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::from(2)
                } else {
                    ExitCode::SUCCESS
                };
            }
            eprintln!("proxybench: {}", clap_one_line(&e));
            return ExitCode::from(2);
        }
    };
    let result = match cli.cmd {
        Cmd::Load(a) => cmd_load::main(*a),
        Cmd::Backend(a) => cmd_backend::main(a),
        Cmd::Run(a) => cmd_run::run(a),
        Cmd::Scenarios(a) => cmd_run::scenarios(a),
        Cmd::Check(a) => cmd_run::check(a),
        Cmd::Report(a) => cmd_run::report(a),
        Cmd::Analyse(a) => cmd_run::analyse(a),
        Cmd::Compare(a) => cmd_run::compare(a),
        Cmd::Capabilities(a) => cmd_proxies::capabilities(a),
        Cmd::Agent(a) => cmd_agent::main(a),
        Cmd::Merge(a) => cmd_merge::main(a),
        Cmd::K8s(a) => cmd_k8s::main(a),
    };
    match result {
        Ok(code) => code,
        Err(CliError::Usage(m)) => {
            eprintln!("proxybench: {m}");
            ExitCode::from(2)
        }
        Err(CliError::Runtime(m)) => {
            eprintln!("proxybench: {m}");
            ExitCode::from(1)
        }
    }
}

/// clap's first line without its `error: ` prefix, e.g. `unexpected argument '--foo' found`.
pub(crate) fn clap_one_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let first = rendered
        .lines()
        .next()
        .unwrap_or("invalid arguments")
        .trim();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}
