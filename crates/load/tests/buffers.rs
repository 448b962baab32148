//! io_uring with far fewer provided buffers than connections still counts exactly (a binary of
//! its own, since the buffer count comes from the environment).

use proxybench_load as load;
use std::time::{Duration, Instant};

fn settled_log_lines(ng: &testkit::Nginx, want_at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = ng.access_log_lines();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        let now = ng.access_log_lines();
        if now == last && now >= want_at_least {
            return now;
        }
        last = now;
    }
    last
}

#[test]
fn many_connections_count_exactly() {
    // More connections than io_uring's provided buffers (the env knob, set before any ring
    // exists in this test binary of its own, shrinks them to 8): receives run out of buffers,
    // stop with ENOBUFS and are re-armed; no response may be lost or counted twice.
    std::env::set_var("PROXYBENCH_URING_BUFFERS", "8");
    let ng = testkit::Nginx::return_200(1);
    let mut cfg = load::Config::new(&ng.url("/")).unwrap();
    cfg.io = load::IoMode::Uring;
    cfg.connections = 400;
    cfg.threads = 1;
    cfg.duration = None;
    cfg.requests = Some(40_000);
    let o = load::run(&cfg, &load::Control::new()).unwrap();
    assert_eq!(o.summary.requests, 40_000, "{:?}", o.summary.errors);
    assert_eq!(o.summary.connects, 400);
    assert_eq!(settled_log_lines(&ng, 40_000), 40_000);
}
