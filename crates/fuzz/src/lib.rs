//! Coverage-guided fuzzing of proxybench's parsers on stable Rust. The engine is libFuzzer
//! (vendored and built by the `libfuzzer-sys` crate), linked into `proxybench-fuzz-libfuzzer`,
//! which `make fuzz-build` compiles with LLVM's SanitizerCoverage (stable `-C passes=sancov-module`
//! and `-C llvm-args` flags): every edge of the code under test counts, and an input that reaches
//! new ones joins the corpus. The `proxybench-fuzz` driver ([`libfuzzer`]) runs it per target from
//! the checked-in corpus and reports executions per second and the edges reached.
//!
//! Each [`Target`] checks invariants beyond "does not crash": a broken one panics in the engine
//! (a crash libFuzzer saves the input of), like a real panic; a hang or memory growth is one too.
//! [`replay::run_one`] runs saved inputs in this process, without the engine.

#![warn(missing_docs)]

pub mod dict;
pub mod h2;
pub mod libfuzzer;
pub mod planted;
pub mod replay;
pub mod targets;

pub use libfuzzer::{fuzz, FuzzError, Options, Stats};
pub use replay::{run_one, Crash, CrashKind};
pub use targets::{by_name, Target, TARGETS};

/// An input that breaks one of a target's invariants (beyond not panicking); the message names
/// the invariant and what the input made of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Violation(pub String);

use std::path::{Path, PathBuf};

/// A seeded pseudo-random generator (SplitMix64): the targets' own choices (split points,
/// chunk sizes) are fixed by the input, so a replay does the same.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0);
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability 1/`n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// FNV-1a over `data`: deterministic per-input choices (split points) and crash file names.
pub fn hash(data: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Renders bytes as a Rust byte-string literal body, so a crashing input can be pasted into a
/// regression test as is.
pub fn escape(data: &[u8]) -> String {
    let mut s = String::with_capacity(data.len() + 2);
    for &b in data {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s
}

/// The checked-in seed corpus of a target: `crates/fuzz/corpus/<name>/`.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

/// Reads every file of a corpus directory, in name order (so runs are reproducible).
pub fn load_corpus(dir: &Path) -> std::io::Result<Vec<Vec<u8>>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    paths.retain(|p| p.is_file());
    paths.sort();
    paths.iter().map(std::fs::read).collect()
}
