//! Distributions of a duration or a byte size, as data: their mean and quantiles. The backend
//! draws from them (its samplers live beside its event loop).

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
