//! `proxybench-fuzz TARGET|all [--seconds N] [--seed S] [--runs N] [--timeout S] [--engine PATH]
//! [--work DIR]` fuzzes parsers with the coverage-guided engine (libFuzzer, built by
//! `make fuzz-build`) from the checked-in corpus and the work corpus;
//! `proxybench-fuzz TARGET --replay FILE...` runs saved inputs in this process.

use proxybench_fuzz::libfuzzer::{default_work_dir, ENGINE_ENV};
use proxybench_fuzz::targets::find;
use proxybench_fuzz::{by_name, corpus_dir, fuzz, run_one, FuzzError, Options, Target, TARGETS};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: proxybench-fuzz TARGET|all [--seconds N] [--seed S] [--runs N] [--timeout S] [--engine PATH] [--work DIR] [--replay FILE...]";

fn bad(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("proxybench-fuzz: {msg}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = Options {
        seconds: 60,
        work: default_work_dir(),
        ..Options::default()
    };
    let mut engine = std::env::var_os(ENGINE_ENV).map(PathBuf::from);
    let mut target = None;
    let mut replay = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let value = |i: usize| args.get(i + 1).map(String::as_str);
        match a {
            "-h" | "--help" => {
                println!("{USAGE}\ntargets: {}", names());
                return ExitCode::SUCCESS;
            }
            "--seconds" | "--seed" | "--runs" | "--timeout" | "--engine" | "--work" => {
                let Some(v) = value(i) else {
                    return bad(format!("{a} needs a value"));
                };
                let ok = match a {
                    "--seconds" => v.parse().ok().filter(|&s| s > 0).map(|s| opts.seconds = s),
                    "--seed" => v.parse().ok().map(|s| opts.seed = s),
                    "--runs" => v.parse().ok().map(|r| opts.runs = Some(r)),
                    "--timeout" => v
                        .parse()
                        .ok()
                        .filter(|&s| s > 0)
                        .map(|s| opts.timeout_secs = s),
                    "--engine" => {
                        engine = Some(PathBuf::from(v));
                        Some(())
                    }
                    _ => {
                        opts.work = PathBuf::from(v);
                        Some(())
                    }
                };
                if ok.is_none() {
                    return bad(format!("{a}: '{v}' is not a valid number"));
                }
                i += 1;
            }
            "--replay" => {
                replay.extend(args[i + 1..].iter().cloned());
                if replay.is_empty() {
                    return bad("--replay needs at least one file");
                }
                break;
            }
            _ if a.starts_with('-') => return bad(format!("unknown option '{a}'; {USAGE}")),
            _ if target.is_none() => target = Some(a.to_string()),
            _ => return bad(format!("unexpected argument '{a}'; {USAGE}")),
        }
        i += 1;
    }
    let Some(target) = target else {
        return bad(USAGE);
    };
    let chosen: Vec<_> = if target == "all" {
        TARGETS.to_vec()
    } else {
        match find(&target) {
            Some(t) => vec![t],
            None => {
                return bad(format!(
                    "unknown target '{target}' (known: {}, all)",
                    names()
                ))
            }
        }
    };
    if !replay.is_empty() {
        return replay_files(&chosen, &replay);
    }
    let Some(engine) = engine else {
        return bad(format!(
            "no engine: build it with `make fuzz-build`, then pass --engine PATH or set {ENGINE_ENV}"
        ));
    };
    fuzz_each(&engine, chosen, &opts)
}

/// Runs each saved input through each chosen target in this process; fails when any input does.
fn replay_files(chosen: &[&'static dyn Target], replay: &[String]) -> ExitCode {
    let mut failed = false;
    for file in replay {
        let input = match std::fs::read(file) {
            Ok(d) => d,
            Err(e) => return bad(format!("{file}: {e}")),
        };
        for t in chosen {
            match run_one(*t, &input) {
                Ok(()) => println!("{}: {file}: ok", t.name()),
                Err((kind, msg)) => {
                    failed = true;
                    println!("{}: {file}: {kind:?}: {msg}", t.name());
                }
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Fuzzes each chosen target with the engine in turn, from its checked-in corpus; stops at the
/// first crash or error.
fn fuzz_each(engine: &Path, chosen: Vec<&'static dyn Target>, opts: &Options) -> ExitCode {
    for t in chosen {
        // The planted target has no checked-in corpus: it starts from an empty input.
        let seeds: Vec<PathBuf> = Some(corpus_dir(t.name()))
            .filter(|d| by_name(t.name()).is_some() && d.is_dir())
            .into_iter()
            .collect();
        match fuzz(engine, t, &seeds, opts) {
            Ok(s) => println!(
                "{}: {} execs in {:.1} s ({:.0}/s), edges {} (seeds {}), corpus {} (+{} new), peak RSS {} MiB",
                t.name(),
                s.execs,
                s.elapsed.as_secs_f64(),
                s.rate(),
                s.edges,
                s.seed_edges,
                s.corpus,
                s.new_inputs,
                s.peak_rss_mb
            ),
            Err(FuzzError::Crash(c)) => {
                eprintln!("{c}");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("proxybench-fuzz: {}: {e}", t.name());
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

fn names() -> String {
    TARGETS
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}
