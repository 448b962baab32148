//! With the engine: a few seconds of coverage-guided fuzzing per target from the checked-in
//! corpus, and the planted-bug target showing that a panic, a broken invariant only coverage
//! feedback reaches, a hang and memory growth are each caught and reported with their input.
//! They need the instrumented engine, so they are ignored in a plain `cargo test`:
//! `make fuzz-smoke` (part of `make test`) builds it and runs them with
//! `PROXYBENCH_FUZZ_ENGINE` set. A crash of a real target is saved under `crates/fuzz/crashes/`
//! and printed with the command that replays it.

use proxybench_fuzz::libfuzzer::{default_crash_dir, ENGINE_ENV};
use proxybench_fuzz::planted::{Planted, HIDDEN, PLANTED, PLANTED_HIDDEN};
use proxybench_fuzz::{
    by_name, corpus_dir, fuzz, load_corpus, Crash, CrashKind, FuzzError, Options, Target,
};
use std::path::PathBuf;

fn engine() -> PathBuf {
    match std::env::var_os(ENGINE_ENV) {
        Some(p) => PathBuf::from(p),
        None => panic!(
            "set {ENGINE_ENV} to the engine `make fuzz-build` builds (`make fuzz-smoke` does)"
        ),
    }
}

/// Per target; `FUZZ_SMOKE_SECONDS` overrides.
fn smoke_seconds() -> u64 {
    std::env::var("FUZZ_SMOKE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

fn smoke(name: &str) {
    let target = by_name(name).expect("target exists");
    let seeds = load_corpus(&corpus_dir(name)).expect("corpus directory");
    let work = tempfile::tempdir().expect("temp dir");
    let opts = Options {
        seconds: smoke_seconds(),
        seed: 0x5eed,
        // Generous: other builds share the machine; a real hang runs forever.
        timeout_secs: 10,
        work: work.path().to_path_buf(),
        crash_dir: default_crash_dir(),
        ..Options::default()
    };
    match fuzz(&engine(), target, &[corpus_dir(name)], &opts) {
        Ok(s) => {
            eprintln!(
                "{name}: {} execs in {:.1} s ({:.0}/s), edges {} (seeds {}), corpus {} (+{} new)",
                s.execs,
                s.elapsed.as_secs_f64(),
                s.rate(),
                s.edges,
                s.seed_edges,
                s.corpus,
                s.new_inputs
            );
            assert!(s.execs > seeds.len() as u64, "{name}: no mutated input ran");
            assert!(s.seed_edges > 0, "{name}: the engine saw no coverage");
            assert!(
                s.edges >= s.seed_edges,
                "{name}: coverage fell from {} to {}",
                s.seed_edges,
                s.edges
            );
            assert!(
                s.new_inputs > 0,
                "{name}: no input reached new coverage in {} s",
                opts.seconds
            );
        }
        Err(e) => panic!("fuzz {name}:\n{e}"),
    }
}

#[test]
#[ignore = "needs the instrumented engine: make fuzz-smoke"]
fn engine_codec() {
    smoke("codec");
}

#[test]
#[ignore = "needs the instrumented engine: make fuzz-smoke"]
fn engine_chunked() {
    smoke("chunked");
}

#[test]
#[ignore = "needs the instrumented engine: make fuzz-smoke"]
fn engine_request() {
    smoke("request");
}

#[test]
#[ignore = "needs the instrumented engine: make fuzz-smoke"]
fn engine_scenario() {
    smoke("scenario");
}

#[test]
#[ignore = "needs the instrumented engine: make fuzz-smoke"]
fn engine_h2() {
    smoke("h2");
}

#[test]
#[ignore = "needs the instrumented engine: make fuzz-smoke"]
fn engine_h2_server() {
    smoke("h2-server");
}

/// Fuzzes the planted target from `seeds` (written as files) until it fails; returns how.
fn planted_crash(target: &'static Planted, seeds: &[&[u8]], opts: Options) -> Crash {
    let dir = tempfile::tempdir().expect("temp dir");
    let seed_dir = dir.path().join("seeds");
    std::fs::create_dir(&seed_dir).unwrap();
    for (i, s) in seeds.iter().enumerate() {
        std::fs::write(seed_dir.join(format!("seed-{i}")), s).unwrap();
    }
    let opts = Options {
        work: dir.path().join("work"),
        crash_dir: dir.path().join("crashes"),
        ..opts
    };
    let target: &'static dyn Target = target;
    match fuzz(&engine(), target, &[seed_dir], &opts) {
        Err(FuzzError::Crash(c)) => {
            let file = c.file.clone().expect("the crash input was saved");
            assert_eq!(std::fs::read(&file).unwrap(), c.input, "{c}");
            *c
        }
        other => panic!("expected a crash, got {other:?}"),
    }
}

fn planted_opts() -> Options {
    Options {
        seconds: 120,
        seed: 3,
        timeout_secs: 1,
        ..Options::default()
    }
}

#[test]
#[ignore = "needs the instrumented engine: make fuzz-smoke"]
fn engine_reports_a_panic_with_its_input() {
    let c = planted_crash(&PLANTED, &[b"ok", b"BOOM!"], planted_opts());
    assert_eq!(c.kind, CrashKind::Panic, "{c}");
    assert_eq!(c.input, b"BOOM!");
    assert!(c.message.contains("index out of bounds"), "{c}");
    assert!(c.message.contains("planted.rs"), "{c}");
}

#[test]
#[ignore = "needs the instrumented engine: make fuzz-smoke"]
fn engine_reaches_a_broken_invariant_behind_six_comparisons() {
    // No seed and no dictionary token starts like the hidden prefix: only coverage feedback
    // (each comparison that passes is a new edge) leads there.
    let c = planted_crash(&PLANTED_HIDDEN, &[b"xyz"], planted_opts());
    assert_eq!(c.kind, CrashKind::Violation, "{c}");
    assert!(c.input.starts_with(HIDDEN), "{c}");
    assert!(c.message.starts_with("the input starts with"), "{c}");
}

#[test]
#[ignore = "needs the instrumented engine: make fuzz-smoke"]
fn engine_reports_a_hang() {
    let c = planted_crash(&PLANTED, &[b"HANG"], planted_opts());
    assert_eq!(c.kind, CrashKind::Hang, "{c}");
    assert_eq!(c.input, b"HANG");
}

#[test]
#[ignore = "needs the instrumented engine: make fuzz-smoke"]
fn engine_reports_memory_growth() {
    let opts = Options {
        timeout_secs: 60,
        rss_limit_mb: 200,
        ..planted_opts()
    };
    let c = planted_crash(&PLANTED, &[b"EAT"], opts);
    assert_eq!(c.kind, CrashKind::Memory, "{c}");
    assert_eq!(c.input, b"EAT");
}
