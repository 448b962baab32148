//! The bootstrap behind `compare --gate`: how sure a relative change between two runs is.
//!
//! Each run's load is cut into whole seconds (blocks). A resample draws as many seconds as the
//! run has, with replacement, and computes the statistic (a percentile, a mean, a count, a rate)
//! over what they hold; the change is B's statistic over A's, minus one, with A and B resampled
//! independently. The interval is the central `confidence` share of the resampled changes (the
//! percentile method). Resampling whole seconds rather than single requests keeps what requests
//! of one second share (a slow second, a burst of failures at an action), so a burst is not
//! mistaken for many independent events and the interval is not too narrow.
//!
//! The generator is SplitMix64 seeded by the caller: the same inputs give the same interval on
//! any machine, in any version of any dependency.

/// A statistic of one run, over its blocks, as the bootstrap evaluates it under block weights
/// (how many times each block was drawn).
#[derive(Debug, Clone, PartialEq)]
pub enum Stat {
    /// `Σ w·num / Σ w·den` (den absent: `Σ w·num`, a count). Rates, shares and means.
    Ratio {
        /// Per block numerator.
        num: Vec<f64>,
        /// Per block denominator; `None` for a plain sum.
        den: Option<Vec<f64>>,
    },
    /// The largest per-block value among the blocks drawn (a block with no value holds
    /// `f64::NEG_INFINITY`).
    Max(Vec<f64>),
    /// The `q` quantile (0 < q <= 1) of the values, each tagged with its block, sorted
    /// ascending: the `ceil(q·n)`-th smallest of the drawn values.
    Quantile {
        /// The quantile, as a fraction.
        q: f64,
        /// (value, block) pairs in ascending order of value.
        sorted: Vec<(u32, u32)>,
        /// Values per block, so a resample's size costs one step per block.
        counts: Vec<u64>,
    },
}

impl Stat {
    /// A quantile over `values` given as (value, block), sorted here.
    pub fn quantile(q: f64, mut values: Vec<(u32, u32)>) -> Stat {
        values.sort_unstable();
        let blocks = values
            .iter()
            .map(|&(_, b)| b as usize + 1)
            .max()
            .unwrap_or(0);
        let mut counts = vec![0u64; blocks];
        for &(_, b) in &values {
            counts[b as usize] += 1;
        }
        Stat::Quantile {
            q,
            sorted: values,
            counts,
        }
    }

    /// The statistic under `w` (one weight per block); `None` when it is undefined there (no
    /// value drawn, a zero denominator).
    pub fn eval(&self, w: &[u32]) -> Option<f64> {
        match self {
            Stat::Ratio { num, den } => {
                let n: f64 = num.iter().zip(w).map(|(x, &k)| x * f64::from(k)).sum();
                match den {
                    None => Some(n),
                    Some(den) => {
                        let d: f64 = den.iter().zip(w).map(|(x, &k)| x * f64::from(k)).sum();
                        (d > 0.0).then(|| n / d)
                    }
                }
            }
            // A block with nothing in it holds -inf, so it never is the largest.
            Stat::Max(v) => v
                .iter()
                .zip(w)
                .filter(|(x, &k)| k > 0 && x.is_finite())
                .map(|(x, _)| *x)
                .reduce(f64::max),
            Stat::Quantile { q, sorted, counts } => {
                let total: u64 = counts.iter().zip(w).map(|(c, &k)| c * u64::from(k)).sum();
                if total == 0 {
                    return None;
                }
                // The rank-th smallest drawn value, rank = ceil(q * total), at least 1.
                let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
                if rank * 2 <= total {
                    let mut seen = 0u64;
                    for &(v, b) in sorted {
                        seen += u64::from(w[b as usize]);
                        if seen >= rank {
                            return Some(f64::from(v));
                        }
                    }
                } else {
                    // From the top: the (total - rank + 1)-th largest, few steps for a tail.
                    let from_top = total - rank + 1;
                    let mut seen = 0u64;
                    for &(v, b) in sorted.iter().rev() {
                        seen += u64::from(w[b as usize]);
                        if seen >= from_top {
                            return Some(f64::from(v));
                        }
                    }
                }
                None
            }
        }
    }
}

/// SplitMix64: a tiny, fixed, well-mixed generator, so a seed means the same draws forever.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer below `n` (n > 0), by Lemire's multiply (bias below 2^-40 for any n
    /// a run can have).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A uniform number in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

/// A 64-bit FNV-1a hash: the seed of a gate from its text and place, stable across builds.
pub fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// A relative change of B against A with its interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// A's statistic over all its blocks.
    pub a: f64,
    /// B's statistic over all its blocks.
    pub b: f64,
    /// `b / a - 1` (0 when both are 0).
    pub change: f64,
    /// Lower end of the interval of the change.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
    /// Resamples drawn.
    pub resamples: usize,
}

/// Why no interval can be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootstrapError {
    /// Too few blocks to resample.
    #[error("{side} has {blocks} second(s) of data; at least 2 are needed to resample")]
    TooShort {
        /// `A` or `B`.
        side: &'static str,
        /// Blocks it has.
        blocks: usize,
    },
    /// The statistic has no value on a run as a whole.
    #[error("{side} has no value for it (nothing to measure it on)")]
    Undefined {
        /// `A` or `B`.
        side: &'static str,
    },
    /// A is zero and B is not: a relative change has no size.
    #[error(
        "A is 0 and B is not, so a relative change has no size; gate it with an absolute value"
    )]
    FromZero,
}

/// `b / a - 1`, with 0 for 0 → 0 and an infinity of B's sign for a change from 0.
fn rel(a: f64, b: f64) -> f64 {
    if a == 0.0 {
        if b == 0.0 {
            0.0
        } else {
            f64::INFINITY.copysign(b)
        }
    } else {
        b / a - 1.0
    }
}

/// Draws one resample's weights for `n` blocks into `w`.
fn draw(rng: &mut SplitMix64, n: usize, w: &mut [u32]) {
    w.fill(0);
    for _ in 0..n {
        w[rng.below(n)] += 1;
    }
}

/// The central `confidence` interval of the relative change of `b`'s statistic against `a`'s,
/// from `resamples` resamples seeded with `seed`.
pub fn relative_change(
    a: &Stat,
    b: &Stat,
    blocks_a: usize,
    blocks_b: usize,
    confidence: f64,
    resamples: usize,
    seed: u64,
) -> Result<Interval, BootstrapError> {
    for (side, n) in [("A", blocks_a), ("B", blocks_b)] {
        if n < 2 {
            return Err(BootstrapError::TooShort { side, blocks: n });
        }
    }
    let va = a
        .eval(&vec![1; blocks_a])
        .ok_or(BootstrapError::Undefined { side: "A" })?;
    let vb = b
        .eval(&vec![1; blocks_b])
        .ok_or(BootstrapError::Undefined { side: "B" })?;
    if va == 0.0 && vb != 0.0 {
        return Err(BootstrapError::FromZero);
    }
    let mut rng = SplitMix64::new(seed);
    let (mut wa, mut wb) = (vec![0u32; blocks_a], vec![0u32; blocks_b]);
    let mut changes = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        draw(&mut rng, blocks_a, &mut wa);
        draw(&mut rng, blocks_b, &mut wb);
        // A resample where the statistic is undefined (no answer among the seconds drawn)
        // says nothing about the change; it is left out.
        if let (Some(x), Some(y)) = (a.eval(&wa), b.eval(&wb)) {
            changes.push(rel(x, y));
        }
    }
    changes.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    Ok(Interval {
        a: va,
        b: vb,
        change: rel(va, vb),
        lo: quantile_sorted(&changes, tail),
        hi: quantile_sorted(&changes, 1.0 - tail),
        resamples,
    })
}

/// The `p` quantile of sorted values, interpolated between neighbours (NaN when empty).
fn quantile_sorted(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let x = p.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (i, f) = (x.floor() as usize, x - x.floor());
    if i + 1 < v.len() && f > 0.0 && v[i].is_finite() && v[i + 1].is_finite() {
        v[i] + (v[i + 1] - v[i]) * f
    } else {
        v[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` values per block for `blocks` blocks, drawn by `f`.
    fn sample(
        blocks: usize,
        n: usize,
        rng: &mut SplitMix64,
        f: impl Fn(&mut SplitMix64) -> f64,
    ) -> Vec<(u32, u32)> {
        (0..blocks)
            .flat_map(|b| (0..n).map(move |_| b as u32))
            .map(|b| (f(rng).round() as u32, b))
            .collect()
    }

    fn exponential(mean: f64) -> impl Fn(&mut SplitMix64) -> f64 {
        move |r| -mean * r.unit().ln()
    }

    fn normal(mean: f64, sd: f64) -> impl Fn(&mut SplitMix64) -> f64 {
        move |r| {
            let (u, v) = (r.unit(), r.unit());
            mean + sd * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }

    fn mean_stat(values: &[(u32, u32)], blocks: usize) -> Stat {
        let (mut num, mut den) = (vec![0.0; blocks], vec![0.0; blocks]);
        for &(v, b) in values {
            num[b as usize] += f64::from(v);
            den[b as usize] += 1.0;
        }
        Stat::Ratio {
            num,
            den: Some(den),
        }
    }

    #[test]
    fn quantiles_and_weights() {
        // Values 1..=100 in 10 blocks of 10.
        let v: Vec<(u32, u32)> = (1..=100).map(|i| (i, (i - 1) / 10)).collect();
        let p99 = Stat::quantile(0.99, v.clone());
        assert_eq!(p99.eval(&[1; 10]), Some(99.0));
        let p50 = Stat::quantile(0.5, v.clone());
        assert_eq!(p50.eval(&[1; 10]), Some(50.0));
        // Block 9 (91..=100) drawn twice, block 0 never: 100 values, 20 of them 91..=100.
        let mut w = [1u32; 10];
        w[0] = 0;
        w[9] = 2;
        assert_eq!(Stat::quantile(1.0, v.clone()).eval(&w), Some(100.0));
        assert_eq!(p50.eval(&w), Some(60.0));
        assert_eq!(Stat::quantile(0.001, v).eval(&w), Some(11.0));
        assert_eq!(p99.eval(&[0; 10]), None);
        let max = Stat::Max(vec![3.0, 9.0, 4.0]);
        assert_eq!(max.eval(&[1, 0, 2]), Some(4.0));
    }

    #[test]
    fn the_same_distribution_gives_intervals_around_zero_about_as_often_as_promised() {
        // 200 pairs of samples from one exponential distribution (20 seconds of 500 values
        // each): the 90% interval of the p99's change and of the mean's holds 0 in about 90%
        // of pairs. A binomial(200, 0.9) falls in 160..=194 with probability > 0.999.
        let mut rng = SplitMix64::new(7);
        let (mut p99_hits, mut mean_hits) = (0, 0);
        for i in 0..200 {
            let a = sample(20, 500, &mut rng, exponential(2000.0));
            let b = sample(20, 500, &mut rng, exponential(2000.0));
            let q = relative_change(
                &Stat::quantile(0.99, a.clone()),
                &Stat::quantile(0.99, b.clone()),
                20,
                20,
                0.90,
                400,
                i,
            )
            .unwrap();
            p99_hits += usize::from(q.lo <= 0.0 && 0.0 <= q.hi);
            let m = relative_change(&mean_stat(&a, 20), &mean_stat(&b, 20), 20, 20, 0.90, 400, i)
                .unwrap();
            mean_hits += usize::from(m.lo <= 0.0 && 0.0 <= m.hi);
        }
        assert!(
            (160..=194).contains(&p99_hits),
            "p99 coverage {p99_hits}/200"
        );
        assert!(
            (160..=194).contains(&mean_hits),
            "mean coverage {mean_hits}/200"
        );
    }

    #[test]
    fn a_known_shift_is_found_and_its_size_is_inside_the_interval() {
        // B is A's distribution scaled by 1.2: every quantile and the mean are 20% higher.
        // Over 20 pairs of runs, each 95% interval excludes 0, and holds +20% in 15 or more
        // (a binomial(20, 0.95) is below 15 with probability < 0.0003).
        let mut rng = SplitMix64::new(11);
        let mut held = [0usize; 3];
        for k in 0..20 {
            let a = sample(30, 500, &mut rng, exponential(1000.0));
            let b = sample(30, 500, &mut rng, exponential(1200.0));
            for (n, q) in [0.5, 0.9, 0.99].into_iter().enumerate() {
                let i = relative_change(
                    &Stat::quantile(q, a.clone()),
                    &Stat::quantile(q, b.clone()),
                    30,
                    30,
                    0.95,
                    500,
                    k,
                )
                .unwrap();
                assert!(i.lo > 0.0, "q{q}: {i:?} should exclude 0");
                held[n] += usize::from(i.lo <= 0.2 && 0.2 <= i.hi);
            }
        }
        assert!(held.iter().all(|&h| h >= 15), "+20% held in {held:?} of 20");
    }

    #[test]
    fn the_mean_interval_has_the_width_theory_gives() {
        // Normal(10000, 1000), 40 seconds of 250 values per run: the change of the means has
        // a standard error of sqrt(2/10000)*0.1 = 0.1414%, so a 95% interval about 0.554% wide.
        let mut rng = SplitMix64::new(3);
        let a = sample(40, 250, &mut rng, normal(10_000.0, 1000.0));
        let b = sample(40, 250, &mut rng, normal(10_000.0, 1000.0));
        let i = relative_change(
            &mean_stat(&a, 40),
            &mean_stat(&b, 40),
            40,
            40,
            0.95,
            2000,
            5,
        )
        .unwrap();
        let width = i.hi - i.lo;
        assert!(
            (0.0045..0.0066).contains(&width),
            "width {width} (theory 0.00554)"
        );
    }

    #[test]
    fn counts_of_rare_failures_need_many_to_be_significant() {
        // 1% failures in 20 seconds of 2000 attempts against 1.5%: a 50% rise, significant.
        let counts = |share: f64, rng: &mut SplitMix64| -> Vec<f64> {
            (0..20)
                .map(|_| (0..2000).filter(|_| rng.unit() <= share).count() as f64)
                .collect()
        };
        let mut rng = SplitMix64::new(5);
        let sum = |v: Vec<f64>| Stat::Ratio { num: v, den: None };
        let i = relative_change(
            &sum(counts(0.01, &mut rng)),
            &sum(counts(0.015, &mut rng)),
            20,
            20,
            0.95,
            2000,
            9,
        )
        .unwrap();
        assert!(i.lo > 0.0 && i.change > 0.3, "{i:?}");
    }

    #[test]
    fn seeded_and_deterministic_and_honest_about_what_it_cannot_do() {
        let mut rng = SplitMix64::new(1);
        let a = sample(20, 100, &mut rng, exponential(100.0));
        let s = Stat::quantile(0.9, a);
        let one = relative_change(&s, &s, 20, 20, 0.95, 500, 42).unwrap();
        assert_eq!(one, relative_change(&s, &s, 20, 20, 0.95, 500, 42).unwrap());
        assert_eq!(one.change, 0.0);
        assert_ne!(one, relative_change(&s, &s, 20, 20, 0.95, 500, 43).unwrap());
        assert_eq!(
            relative_change(&s, &s, 1, 5, 0.95, 10, 1),
            Err(BootstrapError::TooShort {
                side: "A",
                blocks: 1
            })
        );
        let zero = Stat::Ratio {
            num: vec![0.0, 0.0],
            den: None,
        };
        let some = Stat::Ratio {
            num: vec![0.0, 3.0],
            den: None,
        };
        assert_eq!(
            relative_change(&zero, &some, 2, 2, 0.95, 10, 1),
            Err(BootstrapError::FromZero)
        );
        let same = relative_change(&zero, &zero, 2, 2, 0.95, 10, 1).unwrap();
        assert_eq!((same.change, same.lo, same.hi), (0.0, 0.0, 0.0));
        assert_eq!(fnv1a(&["a", "b"]), fnv1a(&["a", "b"]));
        assert_ne!(fnv1a(&["ab", ""]), fnv1a(&["a", "b"]));
    }
}
