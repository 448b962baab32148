//! The vegeta write-up's runs, to set beside ours in the cross-case table.

use crate::scenario::{ArrivalsSpec, LoadSpec};
use proxy::config::RateLimit;

/// One run of the vegeta write-up this scenario follows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Published {
    /// 2xx answers.
    pub(super) accepted: u64,
    /// Requests sent.
    pub(super) requests: u64,
    /// Requests that got any HTTP answer (the rest were client errors in that run).
    pub(super) answered: u64,
    /// vegeta's total duration, seconds.
    pub(super) total_s: f64,
}

/// The published vegeta run with the same shape (attack/limit rate ratio, burst, attack length
/// in limit periods, even arrivals).
pub(super) fn published(rl: &RateLimit, load: &LoadSpec) -> Option<Published> {
    if load.arrivals != ArrivalsSpec::Even {
        return None;
    }
    let ratio = load.rate?.0 / rl.rate.0;
    let periods = load.duration?.0.as_secs_f64() * rl.rate.0;
    let is = |a: f64, b: f64| (a - b).abs() < 1e-6;
    // (rate ratio, burst, limit periods, accepted, requests, answered, total seconds)
    let table: [(f64, u32, f64, u64, u64, u64, f64); 7] = [
        (2.0 / 3.0, 0, 180.0, 120, 120, 120, 59.504),
        (1.0, 0, 180.0, 119, 180, 180, 59.669),
        (3.0, 0, 180.0, 145, 540, 184, 59.890),
        (3.0, 100, 180.0, 230, 540, 540, 76.337),
        (3.0, 300, 180.0, 280, 540, 540, 93.008),
        (3.0, 400, 180.0, 540, 540, 540, 179.673),
        (3.0, 400, 360.0, 760, 1080, 1080, 253.002),
    ];
    table
        .iter()
        .find(|(r, b, p, ..)| is(*r, ratio) && *b == rl.burst && is(*p, periods))
        .map(|&(.., accepted, requests, answered, total_s)| Published {
            accepted,
            requests,
            answered,
            total_s,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_runs_are_found_by_shape_in_both_forms() {
        let rl = |rate: f64, burst: u32| {
            let mut r = RateLimit::new("limit", rate);
            r.burst = burst;
            r
        };
        let load = |rate: f64, secs: u64, arrivals: ArrivalsSpec| LoadSpec {
            name: "attack".into(),
            url: "http://h/".into(),
            via: None,
            connections: 1,
            threads: 1,
            start: units::Dur(std::time::Duration::ZERO),
            duration: Some(units::Dur(std::time::Duration::from_secs(secs))),
            requests: None,
            rate: Some(units::Rate(rate)),
            arrivals,
            seed: 1,
            timeout: units::Dur(std::time::Duration::from_secs(1)),
            method: "GET".into(),
            headers: Default::default(),
            body: None,
        };
        let counts = |p: Option<Published>| p.map(|p| (p.accepted, p.requests));
        assert_eq!(
            counts(published(
                &rl(3.0, 400),
                &load(9.0, 120, ArrivalsSpec::Even)
            )),
            Some((760, 1080))
        );
        assert_eq!(
            counts(published(
                &rl(60.0, 400),
                &load(180.0, 6, ArrivalsSpec::Even)
            )),
            Some((760, 1080))
        );
        assert_eq!(
            counts(published(&rl(30.0, 0), &load(30.0, 6, ArrivalsSpec::Even))),
            Some((119, 180))
        );
        assert_eq!(
            published(&rl(3.0, 0), &load(3.0, 60, ArrivalsSpec::Poisson)),
            None
        );
    }
}
