//! The vegeta write-up's runs, to set beside ours in the cross-case table.

use super::DATA;
use scenario::{ArrivalsSpec, LoadSpec};
use setup::proxy::RateLimit;

/// One run of the vegeta write-up this scenario follows (from `crates/analysis/data/burst.toml`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Published {
    /// Attack rate over limit rate.
    rate_ratio: f64,
    /// The limit's burst.
    burst: u32,
    /// Attack length in limit periods.
    periods: f64,
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
    DATA.published
        .iter()
        .find(|p| is(p.rate_ratio, ratio) && p.burst == rl.burst && is(p.periods, periods))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_file_parses_and_has_every_text_the_code_uses() {
        assert_eq!(DATA.published.len(), 7);
        assert_eq!(DATA.tolerances.sigmas, 3.0);
        crate::analysis::common::assert_keys("burst", &DATA.text, &[include_str!("../burst.rs")]);
    }

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
            http: None,
            streams: None,
            agents: None,
            retry_idle_closed: false,
            resolve: None,
            cacert: None,
            insecure: false,
            sni: None,
            protocol: None,
            message_rate: None,
            message_size: None,
            ramp: None,
            reconnect: None,
            backoff: None,
            backoff_max: None,
            idle_timeout: None,
            ping: None,
            grpc_deadline: None,
            grpc_path: None,
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
