//! `proxybench-fuzz TARGET|all [--seconds N] [--seed S] [--runs N] [--budget-ms N]` fuzzes a
//! parser from its checked-in corpus; `proxybench-fuzz TARGET --replay FILE...` runs saved inputs.

use proxybench_fuzz::{by_name, corpus_dir, fuzz, load_corpus, run_one, Config, TARGETS};
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: proxybench-fuzz TARGET|all [--seconds N] [--seed S] [--runs N] [--budget-ms N] [--replay FILE...]";

fn bad(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("proxybench-fuzz: {msg}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut cfg = Config {
        duration: Duration::from_secs(60),
        ..Config::default()
    };
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
            "--seconds" | "--seed" | "--runs" | "--budget-ms" => {
                let Some(v) = value(i) else {
                    return bad(format!("{a} needs a value"));
                };
                let ok = match a {
                    "--seconds" => v
                        .parse::<f64>()
                        .ok()
                        .filter(|s| s.is_finite() && *s >= 0.0)
                        .map(|s| cfg.duration = Duration::from_secs_f64(s)),
                    "--seed" => v.parse().ok().map(|s| cfg.seed = s),
                    "--runs" => v.parse().ok().map(|r| cfg.max_runs = Some(r)),
                    _ => v
                        .parse()
                        .ok()
                        .filter(|&ms| ms > 0)
                        .map(|ms| cfg.budget = Duration::from_millis(ms)),
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
        match by_name(&target) {
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
        let mut failed = false;
        for file in &replay {
            let input = match std::fs::read(file) {
                Ok(d) => d,
                Err(e) => return bad(format!("{file}: {e}")),
            };
            for t in &chosen {
                match run_one(*t, &input) {
                    Ok(_) => println!("{}: {file}: ok", t.name()),
                    Err((kind, msg)) => {
                        failed = true;
                        println!("{}: {file}: {kind:?}: {msg}", t.name());
                    }
                }
            }
        }
        return if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    }
    for t in chosen {
        let dir = corpus_dir(t.name());
        let seeds = match load_corpus(&dir) {
            Ok(s) => s,
            Err(e) => return bad(format!("{}: {e}", dir.display())),
        };
        match fuzz(t, seeds, &cfg) {
            Ok(s) => println!(
                "{}: {} execs in {:.1} s ({:.0}/s), corpus {}, outcomes {}",
                t.name(),
                s.execs,
                s.elapsed.as_secs_f64(),
                s.rate(),
                s.corpus,
                s.outcomes
            ),
            Err(c) => {
                eprintln!("{c}");
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
