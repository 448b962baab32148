//! Distributions of a duration or a byte size, and their fast samplers.

use rand::rngs::SmallRng;
use rand::RngExt;
use rand_distr::{Distribution, Exp, LogNormal, Normal};

/// A distribution of non-negative integers: nanoseconds for latency and CPU cost, bytes for sizes.
/// Integers keep a profile printable and re-parsable without rounding drift.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dist {
    /// Always this value.
    Fixed(u64),
    /// Uniform between `min` and `max`, both included.
    Uniform {
        /// Smallest value.
        min: u64,
        /// Largest value.
        max: u64,
    },
    /// Normal (Gaussian); draws below zero become zero.
    Normal {
        /// Mean.
        mean: u64,
        /// Standard deviation.
        sd: u64,
    },
    /// Log-normal: half the draws fall below `median`; `sigma` is the spread of the logarithm.
    LogNormal {
        /// Median (e^mu).
        median: u64,
        /// Standard deviation of the logarithm.
        sigma: f64,
    },
    /// Exponential (memoryless), the service time of an M/M/1 server.
    Exponential {
        /// Mean.
        mean: u64,
    },
}

impl Dist {
    /// The theoretical mean, in the distribution's unit, so tests and reports can check draws.
    /// (For `normal` the clamp at zero is ignored; it matters only when `sd` is near `mean`.)
    pub fn mean(&self) -> f64 {
        match *self {
            Dist::Fixed(v) => v as f64,
            Dist::Uniform { min, max } => (min as f64 + max as f64) / 2.0,
            Dist::Normal { mean, .. } | Dist::Exponential { mean } => mean as f64,
            Dist::LogNormal { median, sigma } => median as f64 * (sigma * sigma / 2.0).exp(),
        }
    }

    /// The theoretical `q`-quantile (0 < q < 1), in the distribution's unit, for checks.
    pub fn quantile(&self, q: f64) -> f64 {
        match *self {
            Dist::Fixed(v) => v as f64,
            Dist::Uniform { min, max } => min as f64 + (max as f64 - min as f64) * q,
            Dist::Normal { mean, sd } => {
                (mean as f64 + sd as f64 * std_normal_quantile(q)).max(0.0)
            }
            Dist::LogNormal { median, sigma } => {
                median as f64 * (sigma * std_normal_quantile(q)).exp()
            }
            Dist::Exponential { mean } => -(mean as f64) * (1.0 - q).ln(),
        }
    }

    /// True when every draw is zero (the loop can skip sampling and timers).
    pub fn is_zero(&self) -> bool {
        matches!(self, Dist::Fixed(0))
    }
}

/// The standard normal quantile (Acklam's rational approximation, relative error below 1.2e-9).
fn std_normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.383_577_518_672_69e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    let p_low = 0.02425;
    if p < p_low {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - p_low {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -std_normal_quantile(1.0 - p)
    }
}

/// A [`Dist`] made ready to draw from: the parameters are converted once, not per request.
#[derive(Debug, Clone)]
pub(crate) enum Sampler {
    Fixed(u64),
    Uniform(u64, u64),
    Normal(Normal<f64>),
    LogNormal(LogNormal<f64>),
    Exp(Exp<f64>),
}

impl Sampler {
    /// Prepares `d`; the parser has already checked its parameters.
    pub(crate) fn new(d: &Dist) -> Sampler {
        match *d {
            Dist::Fixed(v) => Sampler::Fixed(v),
            Dist::Uniform { min, max } => Sampler::Uniform(min, max),
            Dist::Normal { mean, sd } => Normal::new(mean as f64, sd as f64)
                .map(Sampler::Normal)
                .unwrap_or(Sampler::Fixed(mean)),
            Dist::LogNormal { median, sigma } => LogNormal::new((median.max(1) as f64).ln(), sigma)
                .map(Sampler::LogNormal)
                .unwrap_or(Sampler::Fixed(median)),
            Dist::Exponential { mean } => Exp::new(1.0 / mean.max(1) as f64)
                .map(Sampler::Exp)
                .unwrap_or(Sampler::Fixed(mean)),
        }
    }

    /// One draw, clamped to `0..=cap`.
    #[inline]
    pub(crate) fn sample(&self, rng: &mut SmallRng, cap: u64) -> u64 {
        let v = match self {
            Sampler::Fixed(v) => return (*v).min(cap),
            Sampler::Uniform(lo, hi) => return rng.random_range(*lo..=*hi).min(cap),
            Sampler::Normal(d) => d.sample(rng),
            Sampler::LogNormal(d) => d.sample(rng),
            Sampler::Exp(d) => d.sample(rng),
        };
        if v.is_nan() || v <= 0.0 {
            0
        } else if v >= cap as f64 {
            cap
        } else {
            v.round() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn quantiles_match_known_values() {
        assert!((std_normal_quantile(0.9) - 1.2815515655446004).abs() < 1e-8);
        assert!((std_normal_quantile(0.5)).abs() < 1e-12);
        assert!((std_normal_quantile(0.01) + 2.3263478740408408).abs() < 1e-8);
        let e = Dist::Exponential { mean: 1000 };
        assert!((e.quantile(0.9) - 2302.585).abs() < 0.01);
        let l = Dist::LogNormal {
            median: 10_000,
            sigma: 0.5,
        };
        assert!((l.mean() - 11331.48).abs() < 0.01);
    }

    #[test]
    fn draws_have_the_theoretical_mean() {
        let mut rng = SmallRng::seed_from_u64(7);
        for d in [
            Dist::Uniform {
                min: 1000,
                max: 3000,
            },
            Dist::Normal {
                mean: 10_000,
                sd: 1000,
            },
            Dist::LogNormal {
                median: 10_000,
                sigma: 0.5,
            },
            Dist::Exponential { mean: 5000 },
        ] {
            let s = Sampler::new(&d);
            let n = 200_000;
            let sum: f64 = (0..n).map(|_| s.sample(&mut rng, u64::MAX) as f64).sum();
            let mean = sum / n as f64;
            assert!(
                (mean / d.mean() - 1.0).abs() < 0.01,
                "{d:?}: {mean} vs {}",
                d.mean()
            );
        }
        assert_eq!(Sampler::new(&Dist::Fixed(5)).sample(&mut rng, 3), 3);
    }
}
