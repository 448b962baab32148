//! Live OpenMetrics for a run while it goes on (`--metrics-listen ADDR` on `run`, `load` and
//! `agent`), so Prometheus can scrape a long run and Grafana can watch it.
//!
//! Nothing here touches a request: the [`Registry`] is fed once a second from the load engine's
//! merged timeline row and that second's histogram (`load::Config::on_second_hdr`, the rows an
//! agent coordinator merges), and by the runner as each step of a case starts and ends. Counts
//! are the engine's own, so at the end of a run the totals served equal the run's summary.
//!
//! - [`listen`]: the `--metrics-listen` address (loopback unless `--metrics-allow-remote`), bound
//!   before the run starts;
//! - [`registry`]: the state and its OpenMetrics text exposition;
//! - [`server`]: a small HTTP/1.1 server for `/metrics` on the workspace's `http1` parser, and
//!   the linger that keeps the final values up until a scrape has read them.
//!
//! Latency is a histogram with the fixed buckets [`BUCKETS_S`] (seconds), the same on every
//! process, so Prometheus can add agents' buckets and compute quantiles over them.

#![warn(missing_docs)]

pub mod listen;
pub mod registry;
pub mod server;
mod text;

pub use listen::{bind, parse_listen, ListenError};
pub use registry::{CaseFeed, Info, LoadFeed, Registry, Scope};
pub use server::{serve, Server};

/// The latency histogram's bucket bounds (`le`), in seconds: 25 µs to 60 s, a 1-2.5-5 series.
/// Fixed and documented, so histograms from every agent and every run add up.
pub const BUCKETS_S: [f64; 20] = [
    0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// [`BUCKETS_S`] in whole microseconds, the unit the engine records latency in.
pub const BUCKETS_US: [u64; 20] = [
    25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// The content type `/metrics` answers with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_bucket_tables_agree() {
        for (s, us) in BUCKETS_S.iter().zip(BUCKETS_US) {
            assert_eq!((s * 1e6).round() as u64, us);
        }
        assert!(BUCKETS_US.windows(2).all(|w| w[0] < w[1]));
    }
}
