//! Facts about a load's schedule and requests that the engine, the scenario language and the
//! coordinator of agents must agree on, kept here without any system dependency.

/// How many evenly spaced arrivals at `rate` per second fall before `window_ns` (the schedule
/// of a run from its start: arrival k at k/rate, kept while before the end). A distributed
/// load splits exactly this many among its agents.
pub fn even_arrivals(rate: f64, window_ns: u64) -> u64 {
    let interval = 1e9 / rate;
    let at = |k: u64| (k as f64 * interval) as u64;
    let mut k = (window_ns as f64 / interval).ceil() as u64;
    while k > 0 && at(k - 1) >= window_ns {
        k -= 1;
    }
    while at(k) < window_ns {
        k += 1;
    }
    k
}

/// Whether a request with `method` (and no body) is safe to send twice, so that a load may
/// resend it when a keep-alive connection was closed idle: the methods Go's net/http replays.
pub fn replayable(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS" | "TRACE")
}
