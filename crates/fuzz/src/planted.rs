//! Targets with planted bugs, so the engine's tests can show that each way of failing is
//! caught and reported with its input: a panic, a hang and memory growth behind short prefixes
//! (`planted`), and a broken invariant that only coverage feedback reaches (six nested byte
//! comparisons, no dictionary; in `planted-hidden`, which has nothing else, so the engine's
//! comparison tracing cannot stop at the shorter traps first). They are not in
//! [`crate::TARGETS`]: `make fuzz` never runs them; the engine and the driver find them by name.

use crate::{Target, Violation};
use std::time::Duration;

/// A planted-bug target (see the module documentation).
pub struct Planted {
    name: &'static str,
    /// Whether the panic, hang and memory traps are armed.
    traps: bool,
}

/// Every trap and the hidden invariant.
pub static PLANTED: Planted = Planted {
    name: "planted",
    traps: true,
};

/// The hidden invariant alone.
pub static PLANTED_HIDDEN: Planted = Planted {
    name: "planted-hidden",
    traps: false,
};

/// Both planted targets, for [`crate::targets::find`].
pub static ALL: [&Planted; 2] = [&PLANTED, &PLANTED_HIDDEN];

/// The input prefix behind six nested comparisons that breaks the planted invariant.
pub const HIDDEN: &[u8] = b"FUZZED";

impl Target for Planted {
    fn name(&self) -> &'static str {
        self.name
    }
    fn dictionary(&self) -> &'static [&'static [u8]] {
        &[]
    }
    fn max_len(&self) -> usize {
        64
    }
    fn run(&self, input: &[u8]) -> Result<(), Violation> {
        if self.traps {
            traps(input);
        }
        hidden(input)
    }
}

/// A panic, a hang and memory growth, behind `BOOM`, `HANG` and `EAT`.
fn traps(input: &[u8]) {
    if input.starts_with(b"BOOM") {
        let v: Vec<u8> = std::hint::black_box(Vec::new());
        let _ = v[input.len()]; // index out of bounds
    }
    if input.starts_with(b"HANG") {
        loop {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    if input.starts_with(b"EAT") {
        // Bounded, so the process survives even if the limit were not enforced.
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
}

/// The broken invariant behind [`HIDDEN`].
fn hidden(input: &[u8]) -> Result<(), Violation> {
    // One branch per byte, each a new edge: a blind mutator needs about 256^6 tries, a
    // coverage-guided one a few thousand per byte. The black boxes keep the compiler from
    // merging the comparisons into one.
    let at = |i: usize| std::hint::black_box(input.get(i).copied());
    if at(0) == Some(HIDDEN[0])
        && at(1) == Some(HIDDEN[1])
        && at(2) == Some(HIDDEN[2])
        && at(3) == Some(HIDDEN[3])
        && at(4) == Some(HIDDEN[4])
        && at(5) == Some(HIDDEN[5])
    {
        return Err(Violation(format!(
            "the input starts with {:?}",
            String::from_utf8_lossy(HIDDEN)
        )));
    }
    Ok(())
}
