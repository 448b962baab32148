//! `proxybench compare`: its flags, the sides (runs or sets of runs) it reads, the comparison
//! and its gates, and `--calibrate`.

use super::*;

/// Flags of `proxybench compare`.
#[derive(clap::Args)]
#[command(after_help = COMPARE_EXIT_CODES)]
pub struct CompareArgs {
    /// The baseline (A): results directories or sets of runs (`run --repeat`). Two directories
    /// and no `--` are A and B; one interleaved set (`run --repeat N --interleave OTHER`) holds
    /// both sides; several runs a side are written `A... -- B...`.
    #[arg(value_name = "A")]
    a: Vec<PathBuf>,
    /// After `--`: the candidate (B), one or more results directories or sets; compare.md is
    /// written into the last one.
    #[arg(last = true, value_name = "B")]
    b: Vec<PathBuf>,
    /// A run (or set of runs) of the baseline, repeatable: the same as `A... --` without
    /// positional directories.
    #[arg(long = "a", value_name = "DIR")]
    a_flag: Vec<PathBuf>,
    /// A run (or set of runs) of the candidate, repeatable.
    #[arg(long = "b", value_name = "DIR")]
    b_flag: Vec<PathBuf>,
    /// A gate on B (repeatable): `[LOAD.]METRIC OP VALUE` in the checks' vocabulary. A signed
    /// percentage bounds the change from A and fails only when the change is significantly
    /// beyond it (`coffee.p99 <= +10%`, `rps >= -5%`); any other value is checked exactly on
    /// every run of B (`failures == 0`). Without LOAD, each load is gated; `all.` sums a case's
    /// loads.
    #[arg(long = "gate", value_name = "EXPR")]
    gates: Vec<String>,
    /// Estimate this machine's run-to-run noise from A's runs alone (at least 2) and print,
    /// for each gated metric (or p50, p99, mean and rps when no --gate is given), the smallest
    /// change a gate can tell from it, with as many runs a side and with more.
    #[arg(long, conflicts_with = "junit")]
    calibrate: bool,
    /// The confidence level of the gates' intervals, between 0.5 and 0.9999.
    #[arg(long, value_name = "LEVEL", default_value_t = report::gate::DEFAULT_CONFIDENCE)]
    confidence: f64,
    /// Also write the gates as JUnit XML to FILE (one testcase per gate and load, with the runs
    /// a side, the interval's method, the smallest detectable change and the verdict).
    #[arg(long, value_name = "FILE", requires = "gates")]
    junit: Option<PathBuf>,
}

/// Runs `proxybench compare`: A against B with gates, or `--calibrate` on A's runs alone; the
/// exit code says whether every gate held ([`COMPARE_EXIT_CODES`]). With `--junit`, a compare
/// that stops on bad input still writes the file, as one error.
pub fn compare(a: CompareArgs) -> Result<ExitCode, CliError> {
    let junit = a.junit.clone();
    crate::outcome::junit_on_stop("compare", junit.as_deref(), compare_checked(a))
}

/// The two sides of a comparison as run directories, and where compare.md goes.
struct Sides {
    a: Vec<PathBuf>,
    b: Vec<PathBuf>,
    write_to: PathBuf,
}

/// Each directory given, expanded: a results directory is one run, a set (runs.json) its A
/// runs; an interleaved set (A and B inside) is refused on one side, unless `a_of_set` takes its
/// A runs (calibration).
fn expand(dirs: &[PathBuf], side: &str, a_of_set: bool) -> Result<Vec<PathBuf>, CliError> {
    let mut out = Vec::new();
    for d in dirs {
        match report::gate::set::expand(d)? {
            report::gate::set::Given::Run(p) => out.push(p),
            report::gate::set::Given::Set { a, b: None } => out.extend(a),
            report::gate::set::Given::Set { a, b: Some(_) } if a_of_set => out.extend(a),
            report::gate::set::Given::Set { b: Some(_), .. } => {
                return Err(CliError::usage(format!(
                    "{}: an interleaved set holds both sides; give it alone (`compare {}`), not \
                     as side {side}",
                    d.display(),
                    d.display()
                )))
            }
        }
    }
    Ok(out)
}

/// Reads the sides from the command line: `A B`, `A... -- B...`, `--a DIR... --b DIR...`, or
/// one interleaved set.
fn sides(a: &CompareArgs) -> Result<Sides, CliError> {
    let flags = !a.a_flag.is_empty() || !a.b_flag.is_empty();
    if flags && (!a.a.is_empty() || !a.b.is_empty()) {
        return Err(CliError::usage(
            "give the runs either as A... -- B... or with --a DIR and --b DIR, not both",
        ));
    }
    let two_sides = |a_dirs: &[PathBuf], b_dirs: &[PathBuf]| -> Result<Sides, CliError> {
        if a_dirs.is_empty() || b_dirs.is_empty() {
            return Err(CliError::usage(format!(
                "side {} has no run: compare needs runs of A and of B",
                if a_dirs.is_empty() { "A" } else { "B" }
            )));
        }
        Ok(Sides {
            a: expand(a_dirs, "A", false)?,
            b: expand(b_dirs, "B", false)?,
            write_to: b_dirs[b_dirs.len() - 1].clone(),
        })
    };
    if flags {
        return two_sides(&a.a_flag, &a.b_flag);
    }
    if !a.b.is_empty() {
        return two_sides(&a.a, &a.b);
    }
    match a.a.as_slice() {
        [] => Err(CliError::usage(
            "no runs given: compare A B, A... -- B..., or one set of `run --repeat N \
             --interleave OTHER`",
        )),
        [one] => match report::gate::set::expand(one)? {
            report::gate::set::Given::Set { a: ra, b: Some(rb) } => Ok(Sides {
                a: ra,
                b: rb,
                write_to: one.clone(),
            }),
            _ => Err(CliError::usage(format!(
                "{}: one directory is not two sides; compare A B, A... -- B..., or give one \
                 interleaved set (`run --repeat N --interleave OTHER`)",
                one.display()
            ))),
        },
        [x, y] => two_sides(std::slice::from_ref(x), std::slice::from_ref(y)),
        more => Err(CliError::usage(format!(
            "{} directories and no `--`: write the runs of each side as A... -- B... (or --a DIR \
             ... --b DIR ...)",
            more.len()
        ))),
    }
}

/// How a side is named in the JUnit file: its directory, or the first of several.
fn side_label(dirs: &[PathBuf]) -> String {
    match dirs {
        [one] => one.display().to_string(),
        [first, ..] => format!("{} and {} more", first.display(), dirs.len() - 1),
        [] => String::new(),
    }
}

fn compare_checked(a: CompareArgs) -> Result<ExitCode, CliError> {
    if !(0.5..=0.9999).contains(&a.confidence) {
        return Err(CliError::usage(format!(
            "--confidence {}: a level between 0.5 and 0.9999 (0.95 for 95%)",
            a.confidence
        )));
    }
    let gates = a
        .gates
        .iter()
        .map(|g| report::gate::Gate::parse(g))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::usage(e.to_string()))?;
    let opts = report::gate::GateOptions {
        confidence: a.confidence,
        ..Default::default()
    };
    if a.calibrate {
        return calibrate(&a, &gates, &opts);
    }
    let s = sides(&a)?;
    let out = report::compare_runs(&s.a, &s.b, &s.write_to, &gates, &opts)?;
    print!("{}", out.markdown);
    if let Some(path) = &a.junit {
        let xml = report::junit::gates(
            &out.scenario,
            (&side_label(&s.a), &side_label(&s.b)),
            &out.method,
            &out.gates,
        );
        write_junit(path, &xml)?;
    }
    let failed = out.gates.iter().filter(|g| !g.pass()).count();
    if failed > 0 {
        eprintln!("proxybench: {failed} gate(s) failed");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `compare --calibrate A...`: the noise of A's runs and the smallest detectable change of each
/// gated metric, printed and written to calibration.md.
fn calibrate(
    a: &CompareArgs,
    gates: &[report::gate::Gate],
    opts: &report::gate::GateOptions,
) -> Result<ExitCode, CliError> {
    if !a.b.is_empty() || !a.b_flag.is_empty() {
        return Err(CliError::usage(
            "--calibrate reads the baseline's runs alone: give no B",
        ));
    }
    let given: Vec<PathBuf> = a.a.iter().chain(&a.a_flag).cloned().collect();
    let Some(last) = given.last() else {
        return Err(CliError::usage(
            "--calibrate needs the baseline's runs: results directories or a set of `run \
             --repeat N`",
        ));
    };
    let dirs = expand(&given, "A", true)?;
    let runs = dirs
        .iter()
        .map(|d| report::read_results(d))
        .collect::<Result<Vec<_>, _>>()?;
    let side: Vec<report::gate::Run<'_>> =
        dirs.iter().map(PathBuf::as_path).zip(runs.iter()).collect();
    let c = report::gate::calibrate::calibrate(gates, &side, opts)?;
    let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let md = report::gate::calibrate::render(&c, &names);
    print!("{md}");
    let path =
        report::gate::calibrate::write(last, &md).map_err(|e| CliError::runtime(e.to_string()))?;
    println!("calibration: {}", path.display());
    Ok(ExitCode::SUCCESS)
}

/// The exit codes of `proxybench compare`, for `--help` and the docs.
pub const COMPARE_EXIT_CODES: &str = "Sides: `compare A B` (one run or set each), \
    `compare A... -- B...` or `--a DIR --b DIR` (several runs a side), `compare SET` (a set of \
    `run --repeat N --interleave OTHER`), `compare --calibrate A...` (the baseline's noise and \
    the smallest change each gate can detect).\n\n\
    Exit codes:\n  \
    0    every gate held (or none was given); --calibrate printed its table\n  \
    1    a gate failed: a significant change beyond its bound, an absolute bound broken, or a \
    gate the runs could not measure; or the JUnit file could not be written\n  \
    2    bad input: a gate that does not parse (with its column), a directory that is not a \
    results directory, runs that differ in scenario, form, cases, loads or proxy (named), or \
    a run not fit to be gated: partial (interrupted, a case aborted), its target unusable, or \
    a load that ran far less than planned";
