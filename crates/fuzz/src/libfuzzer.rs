//! The driver side of the engine: runs `proxybench-fuzz-libfuzzer` (libFuzzer with one of our
//! targets, instrumented for coverage) on one target for a time, from the checked-in corpus
//! plus a work corpus it grows, and reads back what libFuzzer printed: executions, the edges
//! covered by the seeds and at the end, the corpus, or the crash with its saved input.

use crate::replay::{Crash, CrashKind};
use crate::Target;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The environment variable the engine reads its target's name from.
pub const TARGET_ENV: &str = "PROXYBENCH_FUZZ_TARGET";

/// The environment variable naming the engine binary (`make fuzz-build` prints where it is).
pub const ENGINE_ENV: &str = "PROXYBENCH_FUZZ_ENGINE";

/// What the engine's panic message starts with when a target's invariant broke (rather than
/// the code under test panicking).
pub const VIOLATION_MARK: &str = "broken invariant: ";

/// The engine's start-up: the target named by [`TARGET_ENV`]; a missing or unknown name ends
/// the process with exit 2 and a one-line message.
pub fn engine_target() -> &'static dyn Target {
    let name = std::env::var(TARGET_ENV).unwrap_or_default();
    match crate::targets::find(&name) {
        Some(t) => t,
        None => {
            eprintln!("proxybench-fuzz-libfuzzer: {TARGET_ENV}='{name}' names no target");
            std::process::exit(2);
        }
    }
}

/// One input in the engine: cut to the target's `max_len` and run; a broken invariant panics
/// with [`VIOLATION_MARK`] before its message, so libFuzzer reports it like a panic of the code
/// under test and the driver still tells the two apart.
pub fn engine_input(target: &dyn Target, data: &[u8]) {
    let data = &data[..data.len().min(target.max_len())];
    if let Err(v) = target.run(data) {
        panic!("{}: {VIOLATION_MARK}{v}", target.name());
    }
}

/// How long and how one target is fuzzed.
#[derive(Debug, Clone)]
pub struct Options {
    /// Wall-clock length of the run, in whole seconds (libFuzzer's `-max_total_time`; at least 1).
    pub seconds: u64,
    /// Stop after this many inputs, seeds included, whatever the time (`-runs`).
    pub runs: Option<u64>,
    /// Seed of libFuzzer's generator (`-seed`; 0 lets it pick one).
    pub seed: u64,
    /// One input running longer than this many seconds is a hang (`-timeout`).
    pub timeout_secs: u64,
    /// The process's resident memory may not pass this many MiB (`-rss_limit_mb`).
    pub rss_limit_mb: u64,
    /// The work directory: `corpus/<target>/` keeps what the engine found (and is read back as
    /// seeds next time), `<target>.dict` its dictionary.
    pub work: PathBuf,
    /// Where a crashing input is written (`<dir>/<target>-crash-<sha1>`, `-timeout-`, `-oom-`).
    pub crash_dir: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            seconds: 10,
            runs: None,
            seed: 1,
            timeout_secs: 2,
            rss_limit_mb: 2048,
            work: default_work_dir(),
            crash_dir: default_crash_dir(),
        }
    }
}

/// `target/fuzz/` of the workspace: the engine's work corpus and dictionaries.
pub fn default_work_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/fuzz")
}

/// `crates/fuzz/crashes/`, ignored by git.
pub fn default_crash_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crashes")
}

/// Counters of a finished run, as libFuzzer printed them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Inputs executed, seeds included (`stat::number_of_executed_units`).
    pub execs: u64,
    /// Wall-clock time of the engine process, start-up and seeds included.
    pub elapsed: Duration,
    /// Edges covered once the seeds had run (`cov:` of the `INITED` line).
    pub seed_edges: u64,
    /// Edges covered at the end (`cov:` of the last status line).
    pub edges: u64,
    /// libFuzzer's features at the end (`ft:`: edges with hit-count buckets, and more).
    pub features: u64,
    /// Inputs in libFuzzer's corpus at the end (`corp:`).
    pub corpus: u64,
    /// Inputs this run added to the work corpus (`stat::new_units_added`).
    pub new_inputs: u64,
    /// Peak resident memory of the engine, MiB (`stat::peak_rss_mb`).
    pub peak_rss_mb: u64,
}

impl Stats {
    /// Inputs per second over the whole run.
    pub fn rate(&self) -> f64 {
        self.execs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Why a fuzzing run has no [`Stats`].
#[derive(Debug, thiserror::Error)]
pub enum FuzzError {
    /// A work or crash directory could not be prepared.
    #[error("{path}: {source}")]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The engine binary could not be started.
    #[error("cannot start the engine {path}: {source} (build it with `make fuzz-build`)")]
    Spawn {
        /// The engine binary.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// An input made the target fail: the point of fuzzing.
    #[error("{0}")]
    Crash(Box<Crash>),
    /// The engine stopped without a crash report or without its final counters.
    #[error("the engine {status} without {what}; its last lines:\n{tail}")]
    Engine {
        /// How the process ended.
        status: String,
        /// What was missing.
        what: &'static str,
        /// The end of what it printed.
        tail: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FuzzError + '_ {
    move |source| FuzzError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Fuzzes `target` with the engine at `engine` for `opts.seconds`, from the inputs in `seeds`
/// (directories the engine only reads) and the work corpus, which it grows.
pub fn fuzz(
    engine: &Path,
    target: &'static dyn Target,
    seeds: &[PathBuf],
    opts: &Options,
) -> Result<Stats, FuzzError> {
    let corpus = opts.work.join("corpus").join(target.name());
    std::fs::create_dir_all(&corpus).map_err(io(&corpus))?;
    std::fs::create_dir_all(&opts.crash_dir).map_err(io(&opts.crash_dir))?;
    let mut cmd = Command::new(engine);
    cmd.env(TARGET_ENV, target.name())
        .arg(format!("-max_total_time={}", opts.seconds.max(1)))
        .arg(format!("-seed={}", opts.seed))
        .arg(format!("-timeout={}", opts.timeout_secs.max(1)))
        .arg(format!("-rss_limit_mb={}", opts.rss_limit_mb))
        .arg(format!("-max_len={}", target.max_len()))
        .arg(format!(
            "-artifact_prefix={}/{}-",
            opts.crash_dir.display(),
            target.name()
        ))
        .arg("-print_final_stats=1");
    if let Some(runs) = opts.runs {
        cmd.arg(format!("-runs={runs}"));
    }
    if !target.dictionary().is_empty() {
        let dict = opts.work.join(format!("{}.dict", target.name()));
        std::fs::write(&dict, crate::dict::libfuzzer_dict(target.dictionary()))
            .map_err(io(&dict))?;
        cmd.arg(format!("-dict={}", dict.display()));
    }
    cmd.arg(&corpus).args(seeds);
    let start = Instant::now();
    let out = cmd.output().map_err(|source| FuzzError::Spawn {
        path: engine.to_path_buf(),
        source,
    })?;
    let elapsed = start.elapsed();
    let log = String::from_utf8_lossy(&out.stderr);
    if let Some(crash) = crash_of(target.name(), &log) {
        return Err(FuzzError::Crash(Box::new(crash)));
    }
    let status = out.status;
    let stats = parse_stats(&log, elapsed);
    match stats {
        Some(s) if status.success() => Ok(s),
        _ => Err(FuzzError::Engine {
            status: status.to_string(),
            what: if status.success() {
                "its final counters"
            } else {
                "a crash report"
            },
            tail: tail(&log, 20),
        }),
    }
}

/// The last `n` lines of `log`.
fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The number after `key` in `line` (`cov: 812` → 812; `corp: 12/3Kb` → 12).
fn number_after(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Reads the counters out of libFuzzer's output; `None` if its final statistics are missing.
pub fn parse_stats(log: &str, elapsed: Duration) -> Option<Stats> {
    let mut s = Stats {
        execs: 0,
        elapsed,
        seed_edges: 0,
        edges: 0,
        features: 0,
        corpus: 0,
        new_inputs: 0,
        peak_rss_mb: 0,
    };
    let mut finished = false;
    for line in log.lines() {
        if line.starts_with('#') && line.contains(" cov: ") {
            let cov = number_after(line, " cov: ")?;
            if line.contains("INITED") {
                s.seed_edges = cov;
            }
            s.edges = cov;
            s.features = number_after(line, " ft: ").unwrap_or(s.features);
            s.corpus = number_after(line, " corp: ").unwrap_or(s.corpus);
        } else if let Some(v) = line.strip_prefix("stat::number_of_executed_units:") {
            s.execs = v.trim().parse().ok()?;
            finished = true;
        } else if let Some(v) = line.strip_prefix("stat::new_units_added:") {
            s.new_inputs = v.trim().parse().ok()?;
        } else if let Some(v) = line.strip_prefix("stat::peak_rss_mb:") {
            s.peak_rss_mb = v.trim().parse().ok()?;
        }
    }
    finished.then_some(s)
}

/// The crash libFuzzer reported in `log`, if any: its kind, the panic message or libFuzzer's
/// words, and the input it saved.
pub fn crash_of(target: &'static str, log: &str) -> Option<Crash> {
    let file = log.lines().find_map(|l| {
        l.split_once("Test unit written to ")
            .map(|(_, p)| PathBuf::from(p.trim()))
    })?;
    let error = log
        .lines()
        .find_map(|l| l.split_once("ERROR: libFuzzer: ").map(|(_, e)| e.trim()))
        .unwrap_or("");
    let (kind, message) = if error.starts_with("timeout") {
        (CrashKind::Hang, error.to_string())
    } else if error.starts_with("out-of-memory") {
        (CrashKind::Memory, error.to_string())
    } else {
        match panic_message(log) {
            Some(m) => match m.split_once(VIOLATION_MARK) {
                Some((_, v)) => (CrashKind::Violation, v.to_string()),
                None => (CrashKind::Panic, m),
            },
            None => (CrashKind::Panic, error.to_string()),
        }
    };
    let input = std::fs::read(&file).unwrap_or_default();
    Some(Crash {
        target,
        kind,
        message,
        input,
        file: Some(file),
    })
}

/// Rust's panic report in `log`: `panicked at FILE:LINE:COL:` and the message lines after it,
/// up to the backtrace note or libFuzzer's next words.
fn panic_message(log: &str) -> Option<String> {
    let mut lines = log.lines().skip_while(|l| !l.contains(" panicked at "));
    let first = lines.next()?;
    let place = first[first.find(" panicked at ")? + 1..].trim_end_matches(':');
    let message: Vec<&str> = lines
        .take_while(|l| !l.starts_with("note: ") && !l.starts_with("==") && !l.is_empty())
        .collect();
    Some(format!("{place}: {}", message.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "INFO: Running with entropic power schedule (0xFF, 100).
INFO: Seed: 1
INFO: Loaded 1 modules   (21911 inline 8-bit counters): 21911 [0x5, 0x6),
#14\tINITED cov: 812 ft: 1503 corp: 13/2441b exec/s: 0 rss: 38Mb
#15\tNEW    cov: 815 ft: 1510 corp: 14/2500b lim: 4096 exec/s: 0 rss: 38Mb L: 59/4096 MS: 1 ChangeBit-
#262144\tpulse  cov: 900 ft: 2200 corp: 120/9Kb lim: 4096 exec/s: 87381 rss: 60Mb
#300001\tDONE   cov: 901 ft: 2210 corp: 121/9Kb lim: 4096 exec/s: 100000 rss: 61Mb
Done 300001 runs in 3 second(s)
stat::number_of_executed_units: 300001
stat::average_exec_per_sec:     100000
stat::new_units_added:          108
stat::slowest_unit_time_sec:    0
stat::peak_rss_mb:              61
";

    #[test]
    fn the_final_counters_are_read() {
        let s = parse_stats(RUN, Duration::from_secs(3)).unwrap();
        assert_eq!(
            s,
            Stats {
                execs: 300_001,
                elapsed: Duration::from_secs(3),
                seed_edges: 812,
                edges: 901,
                features: 2210,
                corpus: 121,
                new_inputs: 108,
                peak_rss_mb: 61,
            }
        );
        assert!((s.rate() - 100_000.33).abs() < 0.01);
        assert!(crash_of("codec", RUN).is_none());
    }

    #[test]
    fn a_run_cut_short_has_no_counters() {
        let cut = &RUN[..RUN.find("Done").unwrap()];
        assert_eq!(parse_stats(cut, Duration::from_secs(1)), None);
    }

    #[test]
    fn a_broken_invariant_and_a_panic_are_told_apart() {
        let violation = "#2\tINITED cov: 3 ft: 3 corp: 1/1b exec/s: 0 rss: 30Mb

thread '<unnamed>' panicked at crates/fuzz/src/bin/libfuzzer.rs:30:13:
planted: broken invariant: the input starts with \"FUZZED\"
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace
==123== ERROR: libFuzzer: deadly signal
artifact_prefix='/nonexistent/planted-'; Test unit written to /nonexistent/planted-crash-0a1b
";
        let c = crash_of("planted", violation).unwrap();
        assert_eq!(c.kind, CrashKind::Violation);
        assert_eq!(c.message, "the input starts with \"FUZZED\"");
        assert_eq!(
            c.file.as_deref(),
            Some(Path::new("/nonexistent/planted-crash-0a1b"))
        );
        let panic = violation.replace(
            "planted: broken invariant: the input starts with \"FUZZED\"",
            "index out of bounds: the len is 0 but the index is 4",
        );
        let c = crash_of("planted", &panic).unwrap();
        assert_eq!(c.kind, CrashKind::Panic);
        assert_eq!(
            c.message,
            "panicked at crates/fuzz/src/bin/libfuzzer.rs:30:13: index out of bounds: the len is 0 but the index is 4"
        );
    }

    #[test]
    fn hangs_and_memory_are_named_by_libfuzzer() {
        let hang = "ALARM: working on the last Unit for 2 seconds
==9== ERROR: libFuzzer: timeout after 2 seconds
artifact_prefix='c/p-'; Test unit written to c/p-timeout-ff
";
        let c = crash_of("planted", hang).unwrap();
        assert_eq!(
            (c.kind, c.message.as_str()),
            (CrashKind::Hang, "timeout after 2 seconds")
        );
        let oom = "==9== ERROR: libFuzzer: out-of-memory (used: 260Mb; exceeds: 200Mb)
artifact_prefix='c/p-'; Test unit written to c/p-oom-ff
";
        let c = crash_of("planted", oom).unwrap();
        assert_eq!(c.kind, CrashKind::Memory);
        assert!(
            c.message.starts_with("out-of-memory (used: 260Mb"),
            "{}",
            c.message
        );
    }
}
