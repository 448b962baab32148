//! What a finished run leaves on the command line: its exit code (the same for `run`, each run
//! of `run --proxy a,b` and `analyse`) and the JUnit file CI reads.

use crate::CliError;

/// Writes a JUnit file; a path that cannot be written is a failure of the run's output (exit
/// 1), with the path named.
pub(crate) fn write_junit(path: &std::path::Path, xml: &str) -> Result<(), CliError> {
    report::write_junit(path, xml).map_err(|e| CliError::runtime(format!("--junit: {e}")))?;
    println!("junit: {}", path.display());
    Ok(())
}

/// Passes `result` on; when it is an error and `junit` names a file, first writes the file as
/// one error testcase with the message ([`report::junit::stopped`]), so that CI reads why the
/// command stopped rather than a stale or missing file. A file that cannot be written changes
/// nothing: the error the command stopped on is the one reported.
pub(crate) fn junit_on_stop(
    command: &str,
    junit: Option<&std::path::Path>,
    result: Result<std::process::ExitCode, CliError>,
) -> Result<std::process::ExitCode, CliError> {
    if let (Err(e), Some(path)) = (&result, junit) {
        let msg = match e {
            CliError::Usage(m) | CliError::Runtime(m) => m,
        };
        if !msg.starts_with("--junit:") {
            let _ = report::write_junit(path, &report::junit::stopped(command, msg));
        }
    }
    result
}

/// The exit code of a finished run (see [`EXIT_CODES`]), with the reason on stderr when it is
/// not 0.
pub(crate) fn exit_code(r: &model::RunResults) -> u8 {
    if r.partial && r.abort_reason.as_deref() == Some("interrupted") {
        eprintln!("proxybench: interrupted; partial results kept");
        return 130;
    }
    let unusable = r.unusable_loads();
    if !unusable.is_empty() {
        eprintln!(
            "proxybench: the target was unusable: every request failed in {}",
            unusable.join(", ")
        );
        return 3;
    }
    let mut code = 0;
    if r.partial {
        eprintln!(
            "proxybench: partial results ({})",
            r.abort_reason.as_deref().unwrap_or("stopped")
        );
        code = 1;
    }
    let failed_checks = r.checks.iter().filter(|c| !c.pass).count();
    if failed_checks > 0 {
        eprintln!("proxybench: {failed_checks} check(s) failed");
        code = 1;
    }
    let actions = r.failed_actions();
    if !actions.is_empty() {
        let (case, first) = actions[0];
        eprintln!(
            "proxybench: {} action(s) failed; first: [{case}] {} {} at {:.2}s: {}",
            actions.len(),
            first.action,
            first.detail,
            first.t_s,
            first.error.as_deref().unwrap_or_default()
        );
        code = 1;
    }
    code
}

/// The exit codes of `proxybench run`, for `--help` and the README.
pub const EXIT_CODES: &str = "Exit codes:\n  \
    0    every check passed and every action succeeded\n  \
    1    a check failed, an action failed (or never ran), or the run stopped on a failure\n  \
    2    bad input: a flag, or a scenario error (file:line), including one nginx -t found\n  \
    3    the target was unusable: every request of some load failed\n  \
    130  interrupted (Ctrl-C); the partial results are written";
