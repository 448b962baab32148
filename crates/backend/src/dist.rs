//! The fast samplers of a profile's distributions ([`Dist`], the data, is in the setup crate).

use setup::profile::Dist;

use rand::rngs::SmallRng;
use rand::RngExt;
use rand_distr::{Distribution, Exp, LogNormal, Normal};

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
