//! The fuzzing loop: seeds first, then mutated corpus entries until the time is up; panics are
//! caught, hangs are seen by a watchdog, and an input with a new outcome joins the corpus.

use crate::mutate::mutate;
use crate::{escape, hash, Rng, Target};
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

/// How long and how a fuzzing run goes.
#[derive(Debug, Clone)]
pub struct Config {
    /// Wall-clock length of the mutation phase (the seeds always run).
    pub duration: Duration,
    /// Stop after this many mutated inputs, whatever the time (for reproducible runs).
    pub max_runs: Option<u64>,
    /// Seed of the mutator's generator.
    pub seed: u64,
    /// One input taking longer than this is a hang.
    pub budget: Duration,
    /// Where a crashing input is written (`<dir>/<target>-<hash>`); `None` writes nothing.
    pub crash_dir: Option<PathBuf>,
    /// The corpus stops growing at this many entries (new finds then replace random ones).
    pub max_corpus: usize,
    /// The process's resident memory may not pass this many MiB while an input runs.
    pub rss_limit_mb: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            duration: Duration::from_secs(10),
            max_runs: None,
            seed: 1,
            budget: Duration::from_secs(2),
            crash_dir: Some(default_crash_dir()),
            max_corpus: 20_000,
            rss_limit_mb: 2048,
        }
    }
}

/// `crates/fuzz/crashes/`, ignored by git.
pub fn default_crash_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crashes")
}

/// What went wrong with an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashKind {
    /// The target panicked.
    Panic,
    /// The target returned, but an invariant did not hold.
    Violation,
    /// One input ran past the time budget.
    Hang,
    /// The process's memory passed the limit while one input ran.
    Memory,
}

/// An input that made a target fail, and how.
#[derive(Debug, Clone)]
pub struct Crash {
    /// The target's name.
    pub target: &'static str,
    /// Panic, broken invariant or hang.
    pub kind: CrashKind,
    /// The panic message (with its location) or the invariant that broke.
    pub message: String,
    /// The input itself.
    pub input: Vec<u8>,
    /// Where the input was written, if it was.
    pub file: Option<PathBuf>,
}

impl fmt::Display for Crash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} {:?}: {}",
            self.target,
            self.kind,
            self.message.trim_end()
        )?;
        write!(
            f,
            "input ({} bytes): b\"{}\"",
            self.input.len(),
            escape(&self.input)
        )?;
        if let Some(p) = &self.file {
            write!(f, "\nwritten to {}", p.display())?;
        }
        Ok(())
    }
}

/// Counters of a finished run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Inputs executed (seeds included).
    pub execs: u64,
    /// Time the run took.
    pub elapsed: Duration,
    /// Corpus size at the end.
    pub corpus: usize,
    /// Distinct outcomes seen.
    pub outcomes: usize,
}

impl Stats {
    /// Inputs per second.
    pub fn rate(&self) -> f64 {
        self.execs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

thread_local! {
    /// Set while this thread runs a target: the panic hook stores the message here instead
    /// of printing it.
    static CAPTURE: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Installs (once) a panic hook that keeps caught target panics quiet and records their
/// message and place; panics of other threads still reach the previous hook.
fn install_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let captured = CAPTURE.with(|c| {
                let mut c = c.borrow_mut();
                match c.as_mut() {
                    Some(slot) => {
                        let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                            (*s).to_string()
                        } else if let Some(s) = info.payload().downcast_ref::<String>() {
                            s.clone()
                        } else {
                            "(non-string panic payload)".to_string()
                        };
                        *slot = match info.location() {
                            Some(l) => format!("panicked at {}:{}: {msg}", l.file(), l.line()),
                            None => format!("panicked: {msg}"),
                        };
                        true
                    }
                    None => false,
                }
            });
            if !captured {
                previous(info);
            }
        }));
    });
}

/// Runs one input through a target, turning a panic into an error. `Ok` carries the outcome
/// fingerprint.
pub fn run_one(target: &dyn Target, input: &[u8]) -> Result<u64, (CrashKind, String)> {
    install_hook();
    CAPTURE.with(|c| *c.borrow_mut() = Some(String::new()));
    let r = panic::catch_unwind(AssertUnwindSafe(|| target.run(input)));
    let msg = CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default();
    match r {
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(violation)) => Err((CrashKind::Violation, violation.0)),
        Err(_) => Err((CrashKind::Panic, msg)),
    }
}

/// What the fuzzing thread shows the watchdog.
struct Shared {
    /// The input being run.
    current: Mutex<Vec<u8>>,
    /// When it started, in ns since `base` plus one; 0 between inputs.
    started: AtomicU64,
    base: Instant,
}

/// Fuzzes `target` from `seeds` under `cfg`. Returns the run's counters, or the first crash
/// (written to `cfg.crash_dir`).
pub fn fuzz(
    target: &'static dyn Target,
    seeds: Vec<Vec<u8>>,
    cfg: &Config,
) -> Result<Stats, Box<Crash>> {
    let shared = Arc::new(Shared {
        current: Mutex::new(Vec::new()),
        started: AtomicU64::new(0),
        base: Instant::now(),
    });
    let worker = {
        let shared = shared.clone();
        let cfg = cfg.clone();
        std::thread::Builder::new()
            .name(format!("fuzz-{}", target.name()))
            .spawn(move || fuzz_loop(target, seeds, &cfg, &shared))
            .expect("spawn the fuzzing thread")
    };
    loop {
        if worker.is_finished() {
            return match worker.join() {
                Ok(r) => r.map_err(|c| Box::new(save(c, cfg))),
                Err(_) => Err(Box::new(save(
                    Crash {
                        target: target.name(),
                        kind: CrashKind::Panic,
                        message: "the fuzzing loop itself panicked".into(),
                        input: Vec::new(),
                        file: None,
                    },
                    cfg,
                ))),
            };
        }
        let started = shared.started.load(Ordering::Acquire);
        let rss = rss_mb();
        if started != 0 && rss > cfg.rss_limit_mb {
            let input = shared.current.lock().map(|g| g.clone()).unwrap_or_default();
            return Err(Box::new(save(
                Crash {
                    target: target.name(),
                    kind: CrashKind::Memory,
                    message: format!(
                        "resident memory reached {rss} MiB (limit {} MiB) while one input ran",
                        cfg.rss_limit_mb
                    ),
                    input,
                    file: None,
                },
                cfg,
            )));
        }
        if started != 0 {
            let now = shared.base.elapsed().as_nanos() as u64 + 1;
            let ran = Duration::from_nanos(now.saturating_sub(started));
            if ran > cfg.budget {
                // The worker is stuck inside the target; it cannot be stopped, only left.
                let input = shared.current.lock().map(|g| g.clone()).unwrap_or_default();
                return Err(Box::new(save(
                    Crash {
                        target: target.name(),
                        kind: CrashKind::Hang,
                        message: format!(
                            "one input ran {:.1} s (budget {:.1} s)",
                            ran.as_secs_f64(),
                            cfg.budget.as_secs_f64()
                        ),
                        input,
                        file: None,
                    },
                    cfg,
                )));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn fuzz_loop(
    target: &'static dyn Target,
    seeds: Vec<Vec<u8>>,
    cfg: &Config,
    shared: &Shared,
) -> Result<Stats, Crash> {
    let begin = Instant::now();
    let mut rng = Rng::new(cfg.seed);
    let mut seen = HashSet::new();
    let mut corpus: Vec<Vec<u8>> = Vec::new();
    let mut execs = 0u64;
    let exec = |input: &[u8], execs: &mut u64| -> Result<u64, Crash> {
        {
            let mut cur = shared.current.lock().unwrap_or_else(|e| e.into_inner());
            cur.clear();
            cur.extend_from_slice(input);
        }
        let t = shared.base.elapsed().as_nanos() as u64 + 1;
        shared.started.store(t, Ordering::Release);
        let r = run_one(target, input);
        shared.started.store(0, Ordering::Release);
        *execs += 1;
        r.map_err(|(kind, message)| Crash {
            target: target.name(),
            kind,
            message,
            input: input.to_vec(),
            file: None,
        })
    };
    for s in seeds {
        let mut s = s;
        s.truncate(target.max_len());
        let outcome = exec(&s, &mut execs)?;
        seen.insert(outcome);
        corpus.push(s);
    }
    if corpus.is_empty() {
        corpus.push(Vec::new());
    }
    let deadline = begin + cfg.duration;
    let dict = target.dictionary();
    let mut runs = 0u64;
    let mut input = Vec::with_capacity(target.max_len());
    while Instant::now() < deadline && cfg.max_runs.is_none_or(|m| runs < m) {
        runs += 1;
        let parent = &corpus[rng.below(corpus.len())];
        let other = &corpus[rng.below(corpus.len())];
        input.clear();
        input.extend_from_slice(parent);
        mutate(&mut rng, &mut input, other, dict, target.max_len());
        let outcome = exec(&input, &mut execs)?;
        if seen.insert(outcome) {
            if corpus.len() < cfg.max_corpus {
                corpus.push(input.clone());
            } else {
                let i = rng.below(corpus.len());
                corpus[i] = input.clone();
            }
        }
    }
    Ok(Stats {
        execs,
        elapsed: begin.elapsed(),
        corpus: corpus.len(),
        outcomes: seen.len(),
    })
}

/// The process's resident memory in MiB (0 if /proc cannot say).
fn rss_mb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// Writes the crash's input to the crash directory (best effort) and records where.
fn save(mut c: Crash, cfg: &Config) -> Crash {
    if let Some(dir) = &cfg.crash_dir {
        let path = dir.join(format!("{}-{:016x}", c.target, hash(&c.input)));
        if std::fs::create_dir_all(dir).is_ok() && std::fs::write(&path, &c.input).is_ok() {
            c.file = Some(path);
        }
    }
    c
}
