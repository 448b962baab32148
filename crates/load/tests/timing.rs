//! Latency against known truth: a server with a fixed delay, and a server that stalls for a
//! second in the middle of an open-loop run (coordinated omission, corrected and not). Runs on both I/O backends.

mod common;

/// Timing tests run one at a time: on two cores, a second one running beside would be the
/// noise they measure.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

mod epoll {
    const IO: proxybench_load::IoMode = proxybench_load::IoMode::Epoll;
    include!("cases/timing.rs");
}

mod uring {
    const IO: proxybench_load::IoMode = proxybench_load::IoMode::Uring;
    include!("cases/timing.rs");
}
