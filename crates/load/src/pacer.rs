//! Open-loop schedules: the intended send time of every request. One global sequence of
//! arrivals (evenly spaced, or Poisson from a seeded generator) is dealt round-robin to the
//! threads, so the aggregate holds the rate exactly and a seed gives the same arrival times
//! whatever the thread count.

use model::Arrivals;

/// xoshiro256++ seeded through SplitMix64: small, fast, and ours, so a seed keeps meaning the
/// same arrivals across dependency upgrades.
#[derive(Debug, Clone)]
pub struct Rng([u64; 4]);

impl Rng {
    /// A generator from a 64-bit seed.
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng([next(), next(), next(), next()])
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// An exponential gap with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -(1.0 - self.next_f64()).ln() * mean
    }
}

/// How many evenly spaced arrivals at `rate` per second fall before `window_ns` (defined in the
/// model, which the scenario language and the agents' coordinator share with the engine).
pub use model::schedule::even_arrivals;

/// One thread's share of the schedule: global arrivals `thread`, `thread + threads`, ...
#[derive(Debug, Clone)]
pub struct Pacer {
    start_ns: f64,
    interval_ns: f64,
    arrivals: Arrivals,
    threads: u64,
    rng: Rng,
    /// Global index of this thread's next arrival.
    k: u64,
    /// Its intended time in ns since the origin (Poisson: accumulated).
    t_ns: f64,
    limit: Option<u64>,
    /// The intended time of global arrival `limit` (the first one the limit keeps back), once
    /// the walk has reached it: when a schedule cut by its limit stopped sending.
    limit_t: Option<u64>,
}

impl Pacer {
    /// The schedule of `thread` of `threads` at `rate` per second from `start_ns`, for at most
    /// `limit` arrivals in total across threads.
    pub fn new(
        start_ns: u64,
        rate: f64,
        arrivals: Arrivals,
        seed: u64,
        thread: usize,
        threads: usize,
        limit: Option<u64>,
    ) -> Pacer {
        let mut p = Pacer {
            start_ns: start_ns as f64,
            interval_ns: 1e9 / rate,
            arrivals,
            threads: threads as u64,
            rng: Rng::new(seed),
            k: 0,
            t_ns: start_ns as f64,
            limit,
            limit_t: None,
        };
        if limit == Some(0) {
            p.limit_t = Some(start_ns);
        }
        // Walk the shared sequence to this thread's first arrival.
        for _ in 0..thread {
            p.step_one();
        }
        p
    }

    fn step_one(&mut self) {
        self.k += 1;
        match self.arrivals {
            Arrivals::Even => self.t_ns = self.start_ns + self.k as f64 * self.interval_ns,
            Arrivals::Poisson => self.t_ns += self.rng.exp(self.interval_ns),
        }
        if Some(self.k) == self.limit {
            self.limit_t = Some(self.t_ns as u64);
        }
    }

    /// When a schedule cut by its request limit ended: the intended time of the first arrival
    /// the limit kept back (the same for every thread); `None` before the limit is reached. A
    /// run's achieved rate counts its sends over the schedule up to then.
    pub fn limit_end(&self) -> Option<u64> {
        self.limit_t
    }

    /// The intended time of the next arrival (ns since the origin), or `None` when the request
    /// limit is reached.
    #[inline]
    pub fn next(&self) -> Option<u64> {
        match self.limit {
            Some(l) if self.k >= l => None,
            _ => Some(self.t_ns as u64),
        }
    }

    /// Moves to this thread's following arrival.
    pub fn advance(&mut self) {
        for _ in 0..self.threads {
            self.step_one();
        }
    }

    /// Counts the arrivals left before `end_ns` (and within the limit), consuming them: the
    /// intended sends that a run ending at `end_ns` never made.
    pub fn drain_before(&mut self, end_ns: u64) -> u64 {
        let mut n = 0;
        while let Some(t) = self.next() {
            if t >= end_ns {
                break;
            }
            n += 1;
            self.advance();
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(arrivals: Arrivals, seed: u64, threads: usize, n: u64) -> Vec<u64> {
        let mut all: Vec<u64> = (0..threads)
            .flat_map(|th| {
                let mut p = Pacer::new(1_000, 1000.0, arrivals, seed, th, threads, Some(n));
                let mut v = Vec::new();
                while let Some(t) = p.next() {
                    v.push(t);
                    p.advance();
                }
                v
            })
            .collect();
        all.sort();
        all
    }

    #[test]
    fn even_spacing_is_exact_and_split() {
        let t = times(Arrivals::Even, 1, 3, 10);
        assert_eq!(t.len(), 10);
        let want: Vec<u64> = (0..10).map(|k| 1_000 + k * 1_000_000).collect();
        assert_eq!(t, want);
    }

    #[test]
    fn poisson_repeats_with_a_seed_whatever_the_threads() {
        let a = times(Arrivals::Poisson, 42, 1, 20_000);
        let b = times(Arrivals::Poisson, 42, 4, 20_000);
        assert_eq!(a, b);
        assert_ne!(a, times(Arrivals::Poisson, 43, 1, 20_000));
        // Mean gap 1 ms within 2% over 20000 arrivals (stdev of the mean is 0.7%).
        let mean = (a[a.len() - 1] - 1_000) as f64 / a.len() as f64;
        assert!((mean - 1e6).abs() < 2e4, "mean gap {mean}");
        // Exponential: the share of gaps above the mean is about e^-1.
        let above = a.windows(2).filter(|w| (w[1] - w[0]) as f64 > 1e6).count();
        let share = above as f64 / (a.len() - 1) as f64;
        assert!((share - (-1f64).exp()).abs() < 0.02, "share {share}");
    }

    #[test]
    fn even_arrivals_counts_the_schedule_before_the_end() {
        for (rate, window) in [
            (1000.0, 10_000_000),
            (3.0, 1_000_000_000),
            (4000.0, 30_000_000_000),
            (7.0, 1_500_000_000),
            (1333.3, 2_345_678_901),
        ] {
            let mut p = Pacer::new(0, rate, Arrivals::Even, 1, 0, 1, None);
            assert_eq!(
                even_arrivals(rate, window),
                p.drain_before(window),
                "{rate}/s"
            );
        }
        assert_eq!(even_arrivals(1000.0, 10_000_000), 10);
        assert_eq!(even_arrivals(3.0, 1_000_000_000), 3);
        assert_eq!(even_arrivals(7.0, 1_500_000_000), 11);
    }

    #[test]
    fn a_limit_ends_the_schedule_at_its_first_kept_back_arrival() {
        for threads in 1..=3 {
            let mut ends = Vec::new();
            for th in 0..threads {
                let mut p = Pacer::new(500, 1000.0, Arrivals::Even, 1, th, threads, Some(10));
                while p.next().is_some() {
                    assert_eq!(p.limit_end(), None);
                    p.advance();
                }
                ends.push(p.limit_end());
            }
            // Arrival 10 was due at 10 ms: the 10 sends span 10 ms, whatever the threads.
            assert!(ends.iter().all(|e| *e == Some(10_000_500)), "{ends:?}");
        }
    }

    #[test]
    fn drain_counts_missed_arrivals() {
        let mut p = Pacer::new(0, 1000.0, Arrivals::Even, 1, 0, 1, None);
        assert_eq!(p.drain_before(10_000_000), 10);
    }
}
