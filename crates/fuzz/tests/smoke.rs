//! The seconds-long fuzzing run of `make test`: every target from its checked-in corpus with a
//! fixed seed. A crash fails the test, printing the input as an escaped byte string and the
//! file it was written to (`crates/fuzz/crashes/`); `proxybench-fuzz TARGET --replay FILE`
//! reruns it. Also checks that the engine itself notices panics, broken invariants and hangs.

use proxybench_fuzz::{
    by_name, corpus_dir, fuzz, load_corpus, Config, CrashKind, Target, Violation,
};
use std::io::Write;
use std::time::Duration;

/// Per target; `FUZZ_SMOKE_SECONDS` overrides.
fn smoke_seconds() -> f64 {
    std::env::var("FUZZ_SMOKE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.5)
}

fn smoke(name: &str) {
    let target = by_name(name).expect("target exists");
    let seeds = load_corpus(&corpus_dir(name)).expect("corpus directory");
    assert!(seeds.len() >= 6, "{name}: only {} seeds", seeds.len());
    let n = seeds.len() as u64;
    let cfg = Config {
        duration: Duration::from_secs_f64(smoke_seconds()),
        seed: 0x5eed,
        // Generous: other builds share the machine; a real hang runs forever.
        budget: Duration::from_secs(5),
        ..Config::default()
    };
    match fuzz(target, seeds, &cfg) {
        Ok(s) => {
            eprintln!(
                "{name}: {} execs in {:.1} s ({:.0}/s), corpus {}, outcomes {}",
                s.execs,
                s.elapsed.as_secs_f64(),
                s.rate(),
                s.corpus,
                s.outcomes
            );
            assert!(s.execs > n, "{name}: no mutated input ran");
            assert!(s.outcomes >= 2, "{name}: every input had the same outcome");
        }
        Err(c) if matches!(c.kind, CrashKind::Hang | CrashKind::Memory) => {
            // The stuck thread cannot be stopped and may be eating memory: end the process.
            // Straight to stderr: the harness's capture is lost when the process exits.
            let _ = std::io::stderr().write_all(format!("fuzz crash:\n{c}\n").as_bytes());
            std::process::exit(101);
        }
        Err(c) => panic!("fuzz crash:\n{c}"),
    }
}

#[test]
fn codec() {
    smoke("codec");
}

#[test]
fn h2() {
    smoke("h2");
}

#[test]
fn h2_server() {
    smoke("h2-server");
}

#[test]
fn chunked() {
    smoke("chunked");
}

#[test]
fn request() {
    smoke("request");
}

#[test]
fn scenario() {
    smoke("scenario");
}

/// A target with planted bugs, to show the engine finds and reports them.
struct Planted;

impl Target for Planted {
    fn name(&self) -> &'static str {
        "planted"
    }
    fn dictionary(&self) -> &'static [&'static [u8]] {
        &[b"GET"]
    }
    fn max_len(&self) -> usize {
        64
    }
    fn run(&self, input: &[u8]) -> Result<u64, Violation> {
        if input.starts_with(b"BOOM") {
            let v: Vec<u8> = Vec::new();
            return Ok(v[input.len()] as u64); // index out of bounds
        }
        if input.starts_with(b"HANG") {
            loop {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if input.starts_with(b"EAT") {
            // Bounded, so the test process survives even if the limit were not enforced.
            let mut hog = Vec::new();
            for _ in 0..24 {
                hog.push(vec![1u8; 16 << 20]);
                std::thread::sleep(Duration::from_millis(20));
            }
            loop {
                std::thread::sleep(Duration::from_millis(50));
                std::hint::black_box(&hog);
            }
        }
        if input.starts_with(b"GET") {
            return Err(Violation("starts with GET".into()));
        }
        Ok(input.len() as u64)
    }
}

static PLANTED: Planted = Planted;

fn planted_cfg() -> Config {
    Config {
        duration: Duration::from_secs(30),
        max_runs: Some(200_000),
        seed: 3,
        budget: Duration::from_millis(500),
        crash_dir: None,
        ..Config::default()
    }
}

#[test]
fn engine_reports_a_panicking_seed_with_its_input() {
    let c = fuzz(
        &PLANTED,
        vec![b"ok".to_vec(), b"BOOM!".to_vec()],
        &planted_cfg(),
    )
    .unwrap_err();
    assert_eq!(c.kind, CrashKind::Panic);
    assert_eq!(c.input, b"BOOM!");
    assert!(c.message.contains("index out of bounds"), "{}", c.message);
    assert!(c.message.contains("smoke.rs"), "{}", c.message);
    assert!(c.to_string().contains("b\"BOOM!\""), "{c}");
}

#[test]
fn engine_reports_a_hang() {
    let c = fuzz(&PLANTED, vec![b"HANG".to_vec()], &planted_cfg()).unwrap_err();
    assert_eq!(c.kind, CrashKind::Hang);
    assert_eq!(c.input, b"HANG");
}

#[test]
fn engine_reports_memory_growth() {
    let cfg = Config {
        budget: Duration::from_secs(60),
        rss_limit_mb: 200,
        ..planted_cfg()
    };
    let c = fuzz(&PLANTED, vec![b"EAT".to_vec()], &cfg).unwrap_err();
    assert_eq!(c.kind, CrashKind::Memory, "{c}");
    assert_eq!(c.input, b"EAT");
}

#[test]
fn mutations_reach_a_planted_violation() {
    // No seed starts with GET; the mutator must put its dictionary token in front.
    let c = fuzz(&PLANTED, vec![b"xyz".to_vec()], &planted_cfg()).unwrap_err();
    assert_eq!(c.kind, CrashKind::Violation);
    assert!(c.input.starts_with(b"GET"), "{c}");
    assert_eq!(c.message, "starts with GET");
}
