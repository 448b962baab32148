//! The bootstrap behind `compare --gate`: how sure a relative change between two sets of runs
//! is, when the runs differ from each other as well as from second to second.
//!
//! Each run's load is cut into whole seconds (blocks); a side is one or more runs, their seconds
//! laid end to end ([`Runs`]). The **hierarchical** resample (Kalibera and Jones, "Rigorous
//! Benchmarking in Reasonable Time", 2013) draws as many runs as the side has, with
//! replacement, then as many seconds of each drawn run as it has, with replacement, and computes
//! the statistic (a percentile, a mean, a count per run, a rate) over what was drawn. A second
//! resample keeps every run once and draws only seconds: the noise within runs alone.
//! Resampling whole seconds rather than single requests keeps what requests of one second share
//! (a slow second, a burst of failures at an action), so a burst is not mistaken for many
//! independent events.
//!
//! With few runs the hierarchical resample is too narrow where the runs differ (it can only
//! redraw the R runs it has: its spread between runs is (R-1)/R of theirs) and too wide where
//! they do not (it draws the seconds' noise twice, once inside each run and once in the run's
//! value). [`noise`] corrects both: the variance of a side's value is the hierarchical
//! variance less the within-run variance, scaled by R/(R-1), never below the within-run
//! variance, with R-1 degrees of freedom. The interval of the change is then read on the log of
//! B/A at Student's t with the Welch–Satterthwaite degrees of freedom: with 3 runs a side, about
//! 2.8 standard errors for 95% where the normal would say 1.96. A side with one run sees no
//! drift between runs; facing a side with several, it is given that side's run-to-run noise
//! (the intervals are then lopsided), and facing another single run, only the seconds' noise
//! (the interval then cannot see drift between runs, and says so).
//!
//! The unit tests check the interval's coverage against synthetic runs whose between-run
//! variance is set.
//!
//! The generator is SplitMix64 seeded by the caller: the same inputs give the same interval on
//! any machine, in any version of any dependency.

use super::student;

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

/// One side of a comparison: a statistic over the seconds of one or more runs, laid end to end
/// (run 2's blocks follow run 1's). Counts are per run (the mean of the runs' totals), the
/// largest latency is the mean of the runs' largest, and everything else is pooled over the
/// runs' seconds (a percentile over all their requests, a rate over all their whole seconds).
#[derive(Debug, Clone, PartialEq)]
pub struct Runs {
    stat: Stat,
    /// Blocks of each run.
    blocks: Vec<usize>,
    /// Index of each run's first block.
    starts: Vec<usize>,
}

impl Runs {
    /// A side of one run of `blocks` seconds.
    pub fn one(stat: Stat, blocks: usize) -> Runs {
        Runs {
            stat,
            blocks: vec![blocks],
            starts: vec![0],
        }
    }

    /// A side of several runs, each given as its own statistic over its own blocks (block 0 is
    /// the run's first second). Every part is of the same kind (all ratios with or without a
    /// denominator, all maxima, or all the same quantile): they are one metric of one load.
    pub fn new(parts: Vec<(Stat, usize)>) -> Runs {
        let mut blocks = Vec::with_capacity(parts.len());
        let mut starts = Vec::with_capacity(parts.len());
        let mut at = 0;
        for (_, n) in &parts {
            starts.push(at);
            blocks.push(*n);
            at += n;
        }
        let mut it = parts.into_iter();
        let Some((first, n0)) = it.next() else {
            return Runs {
                stat: Stat::Ratio {
                    num: Vec::new(),
                    den: None,
                },
                blocks,
                starts,
            };
        };
        let pad = |v: &mut Vec<f64>, n: usize, fill: f64| v.resize(n, fill);
        let stat = match first {
            Stat::Ratio { mut num, mut den } => {
                pad(&mut num, n0, 0.0);
                if let Some(d) = den.as_mut() {
                    pad(d, n0, 0.0);
                }
                for (s, n) in it {
                    let Stat::Ratio { num: mut x, den: y } = s else {
                        panic!("one metric's runs are all ratios");
                    };
                    pad(&mut x, n, 0.0);
                    num.extend(x);
                    if let (Some(d), Some(mut y)) = (den.as_mut(), y) {
                        pad(&mut y, n, 0.0);
                        d.extend(y);
                    }
                }
                Stat::Ratio { num, den }
            }
            Stat::Max(mut v) => {
                pad(&mut v, n0, f64::NEG_INFINITY);
                for (s, n) in it {
                    let Stat::Max(mut x) = s else {
                        panic!("one metric's runs are all maxima");
                    };
                    pad(&mut x, n, f64::NEG_INFINITY);
                    v.extend(x);
                }
                Stat::Max(v)
            }
            Stat::Quantile { q, sorted, .. } => {
                let mut values = sorted;
                let mut offset = n0 as u32;
                for (s, n) in it {
                    let Stat::Quantile { sorted: x, .. } = s else {
                        panic!("one metric's runs are all quantiles");
                    };
                    values.extend(x.into_iter().map(|(v, b)| (v, b + offset)));
                    offset += n as u32;
                }
                let mut s = Stat::quantile(q, values);
                if let Stat::Quantile { counts, .. } = &mut s {
                    counts.resize(at, 0);
                }
                s
            }
        };
        Runs {
            stat,
            blocks,
            starts,
        }
    }

    /// How many runs the side holds.
    pub fn runs(&self) -> usize {
        self.blocks.len()
    }

    /// Seconds of each run.
    pub fn blocks(&self) -> &[usize] {
        &self.blocks
    }

    fn total_blocks(&self) -> usize {
        self.blocks.iter().sum()
    }

    /// The statistic under block weights `w` over `runs` whole run-instances; `maxes` is the
    /// sum and count of the instances' largest values, for [`Stat::Max`].
    fn value_of(&self, w: &[u32], runs: usize, maxes: (f64, usize)) -> Option<f64> {
        match &self.stat {
            Stat::Max(_) => (maxes.1 > 0).then(|| maxes.0 / maxes.1 as f64),
            Stat::Ratio { den: None, .. } => self.stat.eval(w).map(|x| x / runs as f64),
            s => s.eval(w),
        }
    }

    /// The side's value over every run and second, each once.
    pub fn value(&self) -> Option<f64> {
        let w = vec![1u32; self.total_blocks()];
        let mut maxes = (0.0, 0);
        if let Stat::Max(v) = &self.stat {
            for r in 0..self.runs() {
                let m = self.run_max(v, r, |b| w[b]);
                if m.is_finite() {
                    maxes.0 += m;
                    maxes.1 += 1;
                }
            }
        }
        self.value_of(&w, self.runs(), maxes)
    }

    /// Run `r`'s own value (0-based), over its seconds alone.
    pub fn run_value(&self, r: usize) -> Option<f64> {
        let mut w = vec![0u32; self.total_blocks()];
        let (s, n) = (self.starts[r], self.blocks[r]);
        w[s..s + n].fill(1);
        let maxes = match &self.stat {
            Stat::Max(v) => {
                let m = self.run_max(v, r, |b| w[b]);
                if m.is_finite() {
                    (m, 1)
                } else {
                    (0.0, 0)
                }
            }
            _ => (0.0, 0),
        };
        self.value_of(&w, 1, maxes)
    }

    /// The largest value among run `r`'s blocks of non-zero weight.
    fn run_max(&self, v: &[f64], r: usize, w: impl Fn(usize) -> u32) -> f64 {
        let s = self.starts[r];
        (s..s + self.blocks[r])
            .filter(|&b| w(b) > 0)
            .map(|b| v[b])
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// One resample: the runs drawn with replacement (`across_runs`) or each run once, then
    /// each drawn run's seconds with replacement; `None` when the statistic is undefined over
    /// what was drawn.
    fn draw(&self, rng: &mut SplitMix64, across_runs: bool, w: &mut [u32]) -> Option<f64> {
        let r = self.runs();
        w.fill(0);
        let mut maxes = (0.0, 0usize);
        for k in 0..r {
            let run = if across_runs { rng.below(r) } else { k };
            let (s, n) = (self.starts[run], self.blocks[run]);
            if let Stat::Max(v) = &self.stat {
                let mut m = f64::NEG_INFINITY;
                for _ in 0..n {
                    m = m.max(v[s + rng.below(n)]);
                }
                if m.is_finite() {
                    maxes.0 += m;
                    maxes.1 += 1;
                }
            } else {
                for _ in 0..n {
                    w[s + rng.below(n)] += 1;
                }
            }
        }
        self.value_of(w, r, maxes)
    }
}

/// What a side's runs say about the noise of its value. Variances are of the value's natural
/// log (a relative scale, on which a run twice as slow and one half as slow are as far from
/// the rest: the noise of a machine is multiplicative), or, when some resample's value is 0 (a
/// count that can vanish), of the value relative to the side's (the delta method).
#[derive(Debug, Clone, PartialEq)]
pub struct Noise {
    /// The side's value over every run.
    pub value: f64,
    /// Runs.
    pub runs: usize,
    /// Relative variance of the side's value: between runs and within them, corrected for few
    /// runs.
    pub var: f64,
    /// Degrees of freedom of `var` (runs - 1; seconds - 1 for a single run).
    pub df: f64,
    /// Relative variance of the side's value from the noise within runs alone.
    pub within: f64,
    /// Relative variance of one run's value (`var` times the runs): what the next run will
    /// scatter by.
    pub per_run: f64,
    /// True when only the noise within a run could be seen (a single run).
    pub within_only: bool,
    /// The variance of the value itself (not relative), for a value of 0.
    pub absolute: f64,
}

/// The sample variance of `v` (0 for fewer than 2 values).
fn variance(v: &[f64]) -> f64 {
    let (mut n, mut mean, mut m2) = (0.0f64, 0.0f64, 0.0f64);
    for &x in v {
        // Welford's update: stable for values far from zero.
        n += 1.0;
        let d = x - mean;
        mean += d / n;
        m2 += d * (x - mean);
    }
    if n > 1.0 {
        m2 / (n - 1.0)
    } else {
        0.0
    }
}

/// The noise of a side's value from `resamples` hierarchical and `resamples` within-run
/// resamples. `name` names the side in errors (`A`, `B`).
pub fn noise(
    side: &Runs,
    name: &'static str,
    resamples: usize,
    rng: &mut SplitMix64,
) -> Result<Noise, BootstrapError> {
    for (i, &n) in side.blocks.iter().enumerate() {
        if n < 2 {
            return Err(BootstrapError::TooShort {
                side: name,
                run: (side.runs() > 1).then_some(i + 1),
                blocks: n,
            });
        }
    }
    let value = side
        .value()
        .ok_or(BootstrapError::Undefined { side: name })?;
    let r = side.runs();
    let mut w = vec![0u32; side.total_blocks()];
    // A resample where the statistic is undefined (no answer among the seconds drawn) says
    // nothing about the noise; it is left out.
    let mut draws = |across: bool| -> Vec<f64> {
        (0..resamples)
            .filter_map(|_| side.draw(rng, across, &mut w))
            .collect()
    };
    let within_draws = draws(false);
    let hier_draws = if r > 1 { draws(true) } else { Vec::new() };
    let log = value > 0.0 && within_draws.iter().chain(&hier_draws).all(|&x| x > 0.0);
    let rel = |v: &[f64]| -> f64 {
        if log {
            variance(&v.iter().map(|x| x.ln()).collect::<Vec<_>>())
        } else if value > 0.0 {
            variance(v) / (value * value)
        } else {
            0.0
        }
    };
    let within = rel(&within_draws);
    if r == 1 {
        // One run: its seconds are the units. n/(n-1) undoes the bootstrap's narrowing.
        let n = side.blocks[0] as f64;
        let var = within * n / (n - 1.0);
        return Ok(Noise {
            value,
            runs: 1,
            var,
            df: n - 1.0,
            within,
            per_run: var,
            within_only: true,
            absolute: variance(&within_draws) * n / (n - 1.0),
        });
    }
    let rf = r as f64;
    let var = ((rel(&hier_draws) - within) * rf / (rf - 1.0)).max(within);
    let absolute = ((variance(&hier_draws) - variance(&within_draws)) * rf / (rf - 1.0))
        .max(variance(&within_draws));
    Ok(Noise {
        value,
        runs: r,
        var,
        df: rf - 1.0,
        within,
        per_run: var * rf,
        within_only: false,
        absolute,
    })
}

/// The half-width, on the log of B/A, of an interval at two-sided `confidence` for two sides
/// with relative variances `a` and `b` and their degrees of freedom (Welch–Satterthwaite).
pub fn half_width(confidence: f64, (a, df_a): (f64, f64), (b, df_b): (f64, f64)) -> f64 {
    let total = a + b;
    if total <= 0.0 {
        return 0.0;
    }
    let df = total * total / (a * a / df_a + b * b / df_b);
    student::quantile(0.5 + confidence / 2.0, df) * total.sqrt()
}

/// The relative variance (and its degrees of freedom) of each side's value for the interval: a
/// single-run side facing several runs is given the other side's run-to-run noise, since its
/// own run cannot show any.
fn relative_noise(own: &Noise, other: &Noise) -> (f64, f64) {
    if own.runs == 1 && other.runs >= 2 {
        (own.var.max(other.per_run), other.df)
    } else {
        (own.var, own.df)
    }
}

/// The smallest change a comparison of `runs_a` runs with `runs_b` runs can tell from noise, as
/// a half-width on the log of B/A, when both sides scatter as `cal` (one side's noise) says.
pub fn detectable(cal: &Noise, runs_a: usize, runs_b: usize, confidence: f64) -> f64 {
    let c = cal.per_run;
    let df = |r: usize| if r >= 2 { r as f64 - 1.0 } else { cal.df };
    // A side of one run borrows the other side's degrees of freedom when it has runs to lend.
    let (da, db) = match (runs_a >= 2, runs_b >= 2) {
        (true, false) => (df(runs_a), df(runs_a)),
        (false, true) => (df(runs_b), df(runs_b)),
        _ => (df(runs_a), df(runs_b)),
    };
    half_width(confidence, (c / runs_a as f64, da), (c / runs_b as f64, db))
}

/// A relative change of B against A with its interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// A's statistic over all its runs.
    pub a: f64,
    /// B's statistic over all its runs.
    pub b: f64,
    /// `b / a - 1` (0 when both are 0).
    pub change: f64,
    /// Lower end of the interval of the change.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
    /// Degrees of freedom of the interval's t quantile.
    pub df: f64,
    /// The smallest change these runs can tell from noise, from A's noise alone (the
    /// calibration), as a half-width on the log of B/A.
    pub detectable: f64,
    /// True when A's noise is its seconds' alone (one run of A): the smallest detectable
    /// change then cannot include drift between runs.
    pub within_only: bool,
    /// Resamples drawn per side and kind.
    pub resamples: usize,
}

/// Why no interval can be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootstrapError {
    /// Too few blocks to resample.
    #[error("{side}{} has {blocks} second(s) of data; at least 2 are needed to resample", run.map(|r| format!(" run {r}")).unwrap_or_default())]
    TooShort {
        /// `A` or `B`.
        side: &'static str,
        /// The run (1-based) when the side has several.
        run: Option<usize>,
        /// Blocks it has.
        blocks: usize,
    },
    /// The statistic has no value on a side as a whole.
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

/// The interval at two-sided `confidence` of the relative change of `b`'s statistic against
/// `a`'s, from `resamples` resamples of each kind per side, seeded with `seed`.
pub fn relative_change(
    a: &Runs,
    b: &Runs,
    confidence: f64,
    resamples: usize,
    seed: u64,
) -> Result<Interval, BootstrapError> {
    let mut rng = SplitMix64::new(seed);
    let na = noise(a, "A", resamples, &mut rng)?;
    let nb = noise(b, "B", resamples, &mut rng)?;
    let (va, vb) = (na.value, nb.value);
    if va == 0.0 && vb != 0.0 {
        return Err(BootstrapError::FromZero);
    }
    let detect = detectable(&na, a.runs(), b.runs(), confidence);
    let mut out = Interval {
        a: va,
        b: vb,
        change: 0.0,
        lo: 0.0,
        hi: 0.0,
        df: f64::INFINITY,
        detectable: detect,
        within_only: na.within_only,
        resamples,
    };
    if va == 0.0 {
        // 0 → 0: no change, and nothing to be unsure about.
        return Ok(out);
    }
    let p = 0.5 + confidence / 2.0;
    if vb == 0.0 {
        // A change to nothing (no failure left): -100%, on the linear scale, since its log is
        // not finite.
        out.change = -1.0;
        out.lo = -1.0;
        out.df = nb.df;
        out.hi = -1.0 + student::quantile(p, nb.df) * nb.absolute.sqrt() / va;
        return Ok(out);
    }
    let (ca, cb) = (relative_noise(&na, &nb), relative_noise(&nb, &na));
    let total = ca.0 + cb.0;
    out.df = if total > 0.0 {
        total * total / (ca.0 * ca.0 / ca.1 + cb.0 * cb.0 / cb.1)
    } else {
        f64::INFINITY
    };
    let h = half_width(confidence, ca, cb);
    let l = (vb / va).ln();
    out.change = vb / va - 1.0;
    out.lo = (l - h).exp() - 1.0;
    out.hi = (l + h).exp() - 1.0;
    Ok(out)
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

    fn std_normal(r: &mut SplitMix64) -> f64 {
        normal(0.0, 1.0)(r)
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

    fn one(stat: Stat, blocks: usize) -> Runs {
        Runs::one(stat, blocks)
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
    fn several_runs_pool_percentiles_and_average_counts_and_maxima() {
        // Run 1: values 1..=10 in 2 seconds; run 2: 11..=20 in 2 seconds.
        let run = |from: u32| Stat::quantile(0.5, (0..10).map(|i| (from + i, i / 5)).collect());
        let side = Runs::new(vec![(run(1), 2), (run(11), 2)]);
        assert_eq!((side.runs(), side.blocks()), (2, &[2usize, 2][..]));
        // The median of all 20 values, and each run's own.
        assert_eq!(side.value(), Some(10.0));
        assert_eq!(side.run_value(0), Some(5.0));
        assert_eq!(side.run_value(1), Some(15.0));
        // A count is per run: 3 + 5 failures in run 1, 4 in run 2 → 6 a run.
        let count = |v: Vec<f64>| Stat::Ratio { num: v, den: None };
        let side = Runs::new(vec![(count(vec![3.0, 5.0]), 2), (count(vec![4.0, 0.0]), 2)]);
        assert_eq!(side.value(), Some(6.0));
        assert_eq!(side.run_value(1), Some(4.0));
        // The largest latency is the mean of the runs' largest: (9 + 4) / 2.
        let side = Runs::new(vec![
            (Stat::Max(vec![9.0, 2.0]), 2),
            (Stat::Max(vec![f64::NEG_INFINITY, 4.0]), 2),
        ]);
        assert_eq!(side.value(), Some(6.5));
        assert_eq!(side.run_value(0), Some(9.0));
    }

    /// One side of `runs` runs of `secs` seconds of `per` latencies each, from an exponential
    /// distribution of mean `mean` scaled in each run by exp(N(0, between)): a run-to-run drift
    /// of `between` on the log scale, as a busier or quieter machine gives.
    fn drifting(
        runs: usize,
        secs: usize,
        per: usize,
        mean: f64,
        between: f64,
        rng: &mut SplitMix64,
    ) -> Vec<Vec<(u32, u32)>> {
        (0..runs)
            .map(|_| {
                let m = mean * (between * std_normal(rng)).exp();
                sample(secs, per, rng, exponential(m))
            })
            .collect()
    }

    fn side_of(
        runs: &[Vec<(u32, u32)>],
        secs: usize,
        stat: impl Fn(&[(u32, u32)]) -> Stat,
    ) -> Runs {
        Runs::new(runs.iter().map(|r| (stat(r), secs)).collect())
    }

    /// How many of `trials` pairs of identical sides (`runs` runs each, drift `between`) give a
    /// `confidence` interval of the p99's change and of the mean's that holds 0.
    fn coverage(
        runs: usize,
        between: f64,
        confidence: f64,
        trials: u64,
        seed: u64,
    ) -> (usize, usize) {
        let mut rng = SplitMix64::new(seed);
        let (mut p99, mut mean) = (0, 0);
        for t in 0..trials {
            let a = drifting(runs, 6, 150, 2000.0, between, &mut rng);
            let b = drifting(runs, 6, 150, 2000.0, between, &mut rng);
            let q = |r: &[(u32, u32)]| Stat::quantile(0.99, r.to_vec());
            let m = |r: &[(u32, u32)]| mean_stat(r, 6);
            let i = relative_change(&side_of(&a, 6, q), &side_of(&b, 6, q), confidence, 300, t)
                .unwrap();
            p99 += usize::from(i.lo <= 0.0 && 0.0 <= i.hi);
            let i = relative_change(&side_of(&a, 6, m), &side_of(&b, 6, m), confidence, 300, t)
                .unwrap();
            mean += usize::from(i.lo <= 0.0 && 0.0 <= i.hi);
        }
        (p99, mean)
    }

    #[test]
    fn with_drift_between_runs_three_runs_a_side_cover_as_promised() {
        // Runs drift by 10% (log-normal) while a run's 6 seconds of 150 requests hold p99 to
        // about ±8% and the mean to ±3%: the drift dominates the mean. Over 200 pairs of
        // identical 3-run sides, the 90% interval holds 0 in about 90% of pairs or more (the
        // t quantile of 2 to 4 degrees of freedom errs on the wide side). A binomial(200, 0.9)
        // is below 166 with probability < 0.01.
        let (p99, mean) = coverage(3, 0.10, 0.90, 200, 21);
        assert!(p99 >= 166, "p99 coverage {p99}/200");
        assert!(mean >= 166, "mean coverage {mean}/200");
        // ...and not by being uselessly wide: not every pair.
        assert!(mean <= 198, "mean coverage {mean}/200");
        // At 95%, false "significant" calls (0 outside the interval) stay near 5%.
        let (p99, mean) = coverage(3, 0.10, 0.95, 200, 22);
        assert!(
            p99 >= 182 && mean >= 182,
            "95% coverage p99 {p99}, mean {mean}"
        );
    }

    #[test]
    fn without_drift_the_runs_do_not_make_the_interval_narrower_than_promised() {
        // No drift: every run from one distribution. The interval holds 0 at least as often as
        // promised.
        let (p99, mean) = coverage(3, 0.0, 0.90, 200, 23);
        assert!(p99 >= 166 && mean >= 166, "p99 {p99}, mean {mean}");
    }

    #[test]
    fn one_run_a_side_cannot_see_drift_and_misses_it() {
        // The same 10% drift with one run a side: the seconds' noise alone gives intervals that
        // miss 0 far more often than 10% of the time. This is what several runs a side fix.
        let (_, mean) = coverage(1, 0.10, 0.90, 200, 24);
        assert!(mean < 140, "mean coverage {mean}/200 with one run a side");
        // Without drift, one run a side is right again.
        let (p99, mean) = coverage(1, 0.0, 0.90, 200, 25);
        assert!(p99 >= 166 && mean >= 166, "p99 {p99}, mean {mean}");
    }

    #[test]
    fn a_known_shift_among_drifting_runs_is_found_with_three_runs_a_side() {
        // B is A's distribution scaled by 1.3 (every quantile and the mean 30% higher), runs
        // drifting by 5%. Over 40 pairs of 3-run sides, the 95% interval excludes 0 in most
        // and holds +30% in at least 34 (a binomial(40, 0.95) is below 34 with probability
        // < 0.01).
        let mut rng = SplitMix64::new(31);
        let (mut found, mut held) = (0, 0);
        let mut detect = Vec::new();
        for t in 0..40 {
            let a = drifting(3, 6, 150, 2000.0, 0.05, &mut rng);
            let b = drifting(3, 6, 150, 2600.0, 0.05, &mut rng);
            let m = |r: &[(u32, u32)]| mean_stat(r, 6);
            let i = relative_change(&side_of(&a, 6, m), &side_of(&b, 6, m), 0.95, 400, t).unwrap();
            found += usize::from(i.lo > 0.0);
            held += usize::from(i.lo <= 0.3 && 0.3 <= i.hi);
            detect.push(i.detectable);
        }
        // The smallest detectable change is what A's noise allows: one run's value scatters
        // by sqrt(5%² + 3.3%²) = 6% (drift, and 900 exponential values' mean), so with 3 runs
        // a side and t at 4 degrees of freedom, about 2.78 × 6% × sqrt(2/3) = 13.6%. Its
        // estimate from 3 runs scatters widely; its median stays near that.
        detect.sort_by(f64::total_cmp);
        let median = detect[detect.len() / 2];
        assert!(
            (0.08..0.2).contains(&median),
            "median detectable {median}: {detect:?}"
        );
        assert!(held >= 34, "+30% held in {held}/40");
        assert!(found >= 36, "found in {found}/40");
    }

    #[test]
    fn lopsided_sides_borrow_the_other_sides_drift() {
        // One run of A against five of B, runs drifting by 10%: A's single run shows no drift,
        // so it is given B's run-to-run noise, and coverage stays near what is promised.
        let mut rng = SplitMix64::new(41);
        let mut held = 0;
        for t in 0..200 {
            let a = drifting(1, 6, 150, 2000.0, 0.10, &mut rng);
            let b = drifting(5, 6, 150, 2000.0, 0.10, &mut rng);
            let m = |r: &[(u32, u32)]| mean_stat(r, 6);
            let i = relative_change(&side_of(&a, 6, m), &side_of(&b, 6, m), 0.90, 300, t).unwrap();
            held += usize::from(i.lo <= 0.0 && 0.0 <= i.hi);
        }
        assert!(held >= 166, "coverage {held}/200");
    }

    #[test]
    fn the_same_distribution_gives_intervals_around_zero_about_as_often_as_promised() {
        // One run a side, 200 pairs of samples from one exponential distribution (20 seconds
        // of 500 values each): the 90% interval of the p99's change and of the mean's holds 0
        // in about 90% of pairs. A binomial(200, 0.9) falls in 160..=194 with probability >
        // 0.999.
        let mut rng = SplitMix64::new(7);
        let (mut p99_hits, mut mean_hits) = (0, 0);
        for i in 0..200 {
            let a = sample(20, 500, &mut rng, exponential(2000.0));
            let b = sample(20, 500, &mut rng, exponential(2000.0));
            let q = relative_change(
                &one(Stat::quantile(0.99, a.clone()), 20),
                &one(Stat::quantile(0.99, b.clone()), 20),
                0.90,
                400,
                i,
            )
            .unwrap();
            p99_hits += usize::from(q.lo <= 0.0 && 0.0 <= q.hi);
            let m = relative_change(
                &one(mean_stat(&a, 20), 20),
                &one(mean_stat(&b, 20), 20),
                0.90,
                400,
                i,
            )
            .unwrap();
            mean_hits += usize::from(m.lo <= 0.0 && 0.0 <= m.hi);
            assert!(q.within_only && m.within_only);
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
                    &one(Stat::quantile(q, a.clone()), 30),
                    &one(Stat::quantile(q, b.clone()), 30),
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
        // a standard error of sqrt(2/10000)*0.1 = 0.1414%, so a 95% interval about 0.554% wide
        // (t with 78 degrees of freedom: 0.563%).
        let mut rng = SplitMix64::new(3);
        let a = sample(40, 250, &mut rng, normal(10_000.0, 1000.0));
        let b = sample(40, 250, &mut rng, normal(10_000.0, 1000.0));
        let i = relative_change(
            &one(mean_stat(&a, 40), 40),
            &one(mean_stat(&b, 40), 40),
            0.95,
            2000,
            5,
        )
        .unwrap();
        let width = i.hi - i.lo;
        assert!(
            (0.0045..0.0066).contains(&width),
            "width {width} (theory 0.00563)"
        );
        // The smallest detectable change is the half-width A's noise gives: about 0.28%.
        assert!((0.0022..0.0034).contains(&i.detectable), "{i:?}");
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
        let sum = |v: Vec<f64>| one(Stat::Ratio { num: v, den: None }, 20);
        let i = relative_change(
            &sum(counts(0.01, &mut rng)),
            &sum(counts(0.015, &mut rng)),
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
        let s = one(Stat::quantile(0.9, a), 20);
        let first = relative_change(&s, &s, 0.95, 500, 42).unwrap();
        assert_eq!(first, relative_change(&s, &s, 0.95, 500, 42).unwrap());
        assert_eq!(first.change, 0.0);
        assert_ne!(first, relative_change(&s, &s, 0.95, 500, 43).unwrap());
        let short = one(Stat::quantile(0.9, vec![(1, 0)]), 1);
        assert_eq!(
            relative_change(&short, &s, 0.95, 10, 1),
            Err(BootstrapError::TooShort {
                side: "A",
                run: None,
                blocks: 1
            })
        );
        let two = Runs::new(vec![
            (Stat::quantile(0.9, vec![(1, 0), (2, 1)]), 2),
            (Stat::quantile(0.9, vec![(1, 0)]), 1),
        ]);
        assert_eq!(
            relative_change(&s, &two, 0.95, 10, 1)
                .unwrap_err()
                .to_string(),
            "B run 2 has 1 second(s) of data; at least 2 are needed to resample"
        );
        let zero = one(
            Stat::Ratio {
                num: vec![0.0, 0.0],
                den: None,
            },
            2,
        );
        let some = one(
            Stat::Ratio {
                num: vec![0.0, 3.0],
                den: None,
            },
            2,
        );
        assert_eq!(
            relative_change(&zero, &some, 0.95, 10, 1),
            Err(BootstrapError::FromZero)
        );
        let same = relative_change(&zero, &zero, 0.95, 10, 1).unwrap();
        assert_eq!((same.change, same.lo, same.hi), (0.0, 0.0, 0.0));
        let gone = relative_change(&some, &zero, 0.95, 10, 1).unwrap();
        assert_eq!((gone.change, gone.lo, gone.hi), (-1.0, -1.0, -1.0));
        assert_eq!(fnv1a(&["a", "b"]), fnv1a(&["a", "b"]));
        assert_ne!(fnv1a(&["ab", ""]), fnv1a(&["a", "b"]));
    }
}
