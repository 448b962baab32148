//! The engine: libFuzzer's own `main` (from `libfuzzer-sys`), calling the target named by
//! `PROXYBENCH_FUZZ_TARGET` on every input (`proxybench_fuzz::libfuzzer::engine_input`).
//! `make fuzz-build` compiles it with coverage instrumentation; the `proxybench-fuzz` driver
//! runs it with the right flags.

#![no_main]

use proxybench_fuzz::libfuzzer::{engine_input, engine_target};
use proxybench_fuzz::Target;
use std::sync::OnceLock;

static TARGET: OnceLock<&'static dyn Target> = OnceLock::new();

libfuzzer_sys::fuzz_target!(
    init: {
        let _ = TARGET.set(engine_target());
    },
    |data: &[u8]| {
        if let Some(t) = TARGET.get() {
            engine_input(*t, data);
        }
    }
);
