//! Latency profiles read back from the client side (see `common::poll` for how: CLOCK_MONOTONIC
//! before each write, to the kernel's receive stamp of the response, and to the parsed
//! response). With the `X-Backend-Debug` request header the server also reports the delay it
//! drew for each response: the distribution tests check those draws against theory (exact
//! sampling) and the measured latency against the draws (timing: never early, small overshoot).
//! The tests in this file run one at a time so they do not disturb each other's timing.

mod common;

use common::{one, poll};
use proxybench_backend::{Dist, Profile};
use std::sync::Mutex;
use testkit::{in_one_of, KeepAwake, Realtime};

static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn fixed_10ms_reads_back_with_p50_within_2_percent() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The backend's loop thread and the client start under real-time priority, with the CPUs
    // kept awake, so the scheduler of a busy 2-core machine does not become the measurement.
    let _awake = KeepAwake::start();
    let _rt = Realtime::enter();
    let (fleet, addr) = one("latency=10ms");
    in_one_of(3, || {
        let run = poll::run(addr, 16, 4000, "/");
        assert_eq!(run.status.get(&200), Some(&4000));
        let h = &run.wire;
        let p50 = h.value_at_quantile(0.5) as f64;
        let a = &run.app;
        eprintln!(
            "fixed 10ms, client side to the response's arrival: min {}us p50 {p50}us p90 {}us p99 {}us max {}us; \
             to the parsed response: p50 {}us p99 {}us",
            h.min(),
            h.value_at_quantile(0.9),
            h.value_at_quantile(0.99),
            h.max(),
            a.value_at_quantile(0.5),
            a.value_at_quantile(0.99),
        );
        assert_eq!(run.early, 0, "a response came before its 10 ms");
        assert!(h.min() >= 10_000, "a response came early: {}us", h.min());
        assert!(a.min() >= 10_000, "a response came early: {}us", a.min());
        if (p50 - 10_000.0).abs() <= 200.0 {
            Ok(())
        } else {
            Err(format!("p50 {p50}us is not within 2% of 10ms"))
        }
    });
    fleet.shutdown();
}

/// 20k requests against `spec`: the drawn delays' mean and p90 against theory, and the
/// client-side latency against the draws.
fn check(spec: &str) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _awake = KeepAwake::start();
    let _rt = Realtime::enter();
    let profile: Profile = spec.parse().unwrap();
    let (fleet, addr) = one(spec);
    let run = poll::run(addr, 100, 20_000, "/");
    fleet.shutdown();
    assert_eq!(run.status.get(&200), Some(&20_000));
    let (mean_th, p90_th) = theory(&profile);
    let d = &run.drawn;
    let (mean, p90) = (d.mean(), d.value_at_quantile(0.9) as f64);
    let (cmean, cp90) = (run.wire.mean(), run.wire.value_at_quantile(0.9) as f64);
    let o = &run.overshoot;
    eprintln!(
        "{spec}: drawn mean {mean:.0}us (theory {mean_th:.0}us, {:+.2}%) p90 {p90:.0}us (theory {p90_th:.0}us, {:+.2}%); \
         client mean {cmean:.0}us ({:+.2}%) p90 {cp90:.0}us ({:+.2}%); overshoot p50 {}us p99 {}us",
        (mean / mean_th - 1.0) * 100.0,
        (p90 / p90_th - 1.0) * 100.0,
        (cmean / mean_th - 1.0) * 100.0,
        (cp90 / p90_th - 1.0) * 100.0,
        o.value_at_quantile(0.5),
        o.value_at_quantile(0.99),
    );
    assert!(
        (mean / mean_th - 1.0).abs() < 0.03,
        "{spec}: drawn mean {mean:.0}us vs theory {mean_th:.0}us"
    );
    assert!(
        (p90 / p90_th - 1.0).abs() < 0.03,
        "{spec}: drawn p90 {p90:.0}us vs theory {p90_th:.0}us"
    );
    assert_eq!(
        run.early, 0,
        "{spec}: a response came before its drawn delay"
    );
    // Timing: half the responses within 1 ms of their draw even on a busy machine.
    assert!(
        o.value_at_quantile(0.5) < 1000,
        "{spec}: overshoot p50 {}us",
        o.value_at_quantile(0.5)
    );
}

/// Mean and p90 in microseconds of the profile's latency (with spikes mixed in).
fn theory(p: &Profile) -> (f64, f64) {
    let base = p.base.latency.unwrap_or(Dist::Fixed(0));
    let spikes = p.base.spikes.clone().unwrap_or_default();
    let base_share = 1.0 - spikes.iter().map(|s| s.share.fraction()).sum::<f64>();
    let mean = base.mean() * base_share
        + spikes
            .iter()
            .map(|s| s.latency.mean() * s.share.fraction())
            .sum::<f64>();
    // The p90 of the mixture: bisect its CDF, each part's CDF from its quantile function.
    let cdf = |x: f64, d: &Dist| {
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            if d.quantile(mid.clamp(1e-12, 1.0 - 1e-12)) <= x {
                lo = mid
            } else {
                hi = mid
            }
        }
        lo
    };
    let mix = |x: f64| {
        cdf(x, &base) * base_share
            + spikes
                .iter()
                .map(|s| cdf(x, &s.latency) * s.share.fraction())
                .sum::<f64>()
    };
    let (mut lo, mut hi) = (0.0f64, 1e13);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if mix(mid) < 0.9 {
            lo = mid
        } else {
            hi = mid
        }
    }
    (mean / 1000.0, lo / 1000.0)
}

#[test]
fn uniform_reads_back() {
    check("latency=uniform(min=5ms,max=15ms)");
}

#[test]
fn normal_reads_back() {
    check("latency=normal(mean=10ms,sd=2ms)");
}

#[test]
fn lognormal_reads_back() {
    check("latency=lognormal(median=8ms,sigma=0.5)");
}

#[test]
fn exponential_reads_back() {
    check("latency=exponential(mean=8ms)");
}

#[test]
fn spike_mix_reads_back() {
    // 80% take 5ms, 20% take 30ms: mean 10ms, p90 30ms.
    check("latency=5ms; spike=30ms:20%");
}
