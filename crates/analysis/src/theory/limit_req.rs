//! nginx's `limit_req` as arithmetic, so a run's outcome can be predicted from its arrival times.
//!
//! The model follows ngx_http_limit_req_module (1.18 to 1.22): per key, state is `excess` (in
//! thousandths of a request) and `last` (the millisecond clock at the last accepted request). An
//! arrival at millisecond `now` computes `e = max(0, excess - rate*(now-last)/1000 + 1000)` with the
//! rate in thousandths per second; `e > burst*1000` rejects it (state untouched), otherwise it is
//! accepted (`excess = e`, and `last = now` when `now != last`) and delayed by
//! `(e - delay*1000) / rate` seconds when `e` exceeds the `delay` threshold (`nodelay` means never).
//!
//! nginx's clock is `ngx_current_msec`, cached once per event-loop turn. nginx 1.22 on Linux reads
//! it from CLOCK_MONOTONIC right after `gettimeofday` (the disassembly of Debian's binary passes
//! clock id 1), so the arrival times its access log gives (`$msec - $request_time`) are the
//! limiter's `now` up to a constant offset and a millisecond of truncation. Seen from the client's
//! send times, decisions fall on a coarser grid (the turns come late on a busy worker), which the
//! send-time model takes as the coarse clock's tick (4 ms with HZ=250). Either way the outcome
//! depends on where arrivals fall against the grid, a phase no one can see; [`predict`] simulates
//! the run at evenly spaced phases across one tick and reports the range of outcomes.
//!
//! It is nginx's algorithm, not a proxy-neutral one: another kind limits its own way (HAProxy's
//! stick-table rates, for one), and the burst analysis says so before showing this model beside
//! such a run.

/// A `limit_req` configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    /// Requests per second (`rate=3r/s`).
    pub rate: f64,
    /// Burst queue size (`burst=N`).
    pub burst: u64,
    /// Requests beyond which arrivals are delayed: 0 without `nodelay` (every excess request
    /// waits), `burst` with `nodelay` (none waits), or `delay=N`.
    pub delay: u64,
}

impl Limit {
    /// `rate` and `burst` without `nodelay` (nginx's default: every queued request is delayed).
    pub fn queued(rate: f64, burst: u64) -> Limit {
        Limit {
            rate,
            burst,
            delay: 0,
        }
    }
}

/// What happened to one arrival.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// Accepted without delay.
    Passed,
    /// Accepted and held for this many milliseconds before being proxied.
    Delayed(u64),
    /// Rejected with `limit_req_status`.
    Rejected,
}

/// The outcome of a whole arrival sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct Simulation {
    /// One outcome per arrival, in arrival order.
    pub outcomes: Vec<Outcome>,
    /// Accepted arrivals.
    pub accepted: u64,
    /// Rejected arrivals.
    pub rejected: u64,
    /// When the last accepted request leaves the queue, in ms after the first arrival.
    pub drained_ms: u64,
}

impl Simulation {
    /// Accepted share of arrivals.
    pub fn success_ratio(&self) -> f64 {
        let n = self.accepted + self.rejected;
        if n == 0 {
            0.0
        } else {
            self.accepted as f64 / n as f64
        }
    }

    /// Requests waiting in the limiter's queue at `t_ms` (accepted, delay not yet over).
    pub fn queue_depth_at(&self, arrivals_ms: &[u64], t_ms: u64) -> u64 {
        self.outcomes
            .iter()
            .zip(arrivals_ms)
            .filter(|(o, &a)| matches!(o, Outcome::Delayed(d) if a <= t_ms && t_ms < a + d))
            .count() as u64
    }
}

/// Runs the algorithm over arrival times given in nginx's whole milliseconds (non-decreasing).
pub fn simulate(limit: Limit, arrivals_ms: &[u64]) -> Simulation {
    let rate = (limit.rate * 1000.0).round() as i64; // thousandths of a request per second
    let burst = limit.burst as i64 * 1000;
    let delay = limit.delay as i64 * 1000;
    let mut excess: i64 = 0;
    let mut last: Option<u64> = None;
    let mut outcomes = Vec::with_capacity(arrivals_ms.len());
    let (mut accepted, mut rejected, mut drained) = (0u64, 0u64, 0u64);
    let first = arrivals_ms.first().copied().unwrap_or(0);
    for &now in arrivals_ms {
        let e = match last {
            // The first request creates the node with excess 0 and is accepted.
            None => 0,
            Some(l) => {
                let ms = now.saturating_sub(l) as i64;
                (excess - rate * ms / 1000 + 1000).max(0)
            }
        };
        if e > burst {
            rejected += 1;
            outcomes.push(Outcome::Rejected);
            continue;
        }
        accepted += 1;
        excess = e;
        if last != Some(now) {
            last = Some(now);
        }
        let o = if e > delay {
            let d = ((e - delay) * 1000 / rate) as u64;
            drained = drained.max(now - first + d);
            Outcome::Delayed(d)
        } else {
            drained = drained.max(now - first);
            Outcome::Passed
        };
        outcomes.push(o);
    }
    Simulation {
        outcomes,
        accepted,
        rejected,
        drained_ms: drained,
    }
}

/// Simulates one arrival sequence (microseconds, any origin) as nginx would see it through a
/// clock that advances every `tick_us`, at `phases` evenly spaced offsets of the tick boundary.
/// Returns (fewest accepted, most accepted, the simulation at phase 0).
pub fn predict(
    limit: Limit,
    arrivals_us: &[u64],
    tick_us: u64,
    phases: u32,
) -> (u64, u64, Simulation) {
    let phases = phases.max(1);
    let tick = tick_us.max(1);
    let mut lo = u64::MAX;
    let mut hi = 0;
    let mut first = None;
    for i in 0..phases {
        let off = u64::from(i) * tick / u64::from(phases);
        let ms: Vec<u64> = arrivals_us
            .iter()
            .map(|&t| (t + off) / tick * tick / 1000)
            .collect();
        let sim = simulate(limit, &ms);
        lo = lo.min(sim.accepted);
        hi = hi.max(sim.accepted);
        first.get_or_insert(sim);
    }
    (lo, hi, first.unwrap_or_else(|| simulate(limit, &[])))
}

/// Evenly spaced arrivals: `n` requests at `rate` per second, in microseconds from 0.
pub fn even_arrivals_us(rate: f64, n: u64) -> Vec<u64> {
    (0..n)
        .map(|i| (i as f64 * 1e6 / rate).round() as u64)
        .collect()
}

/// Closed-form success ratio for Poisson arrivals at `arrival_rate` against `burst=0`: after each
/// accepted request the limiter refuses everything for `ceil(1000/rate)` ms (the first whole
/// millisecond gap that refills one request), then the wait for the next arrival is exponential, so
/// accepted per second = 1 / (gap + 1/arrival_rate).
pub fn poisson_burst0_ratio(limit_rate: f64, arrival_rate: f64) -> f64 {
    let gap_s = min_gap_ms(limit_rate) as f64 / 1000.0;
    let accepted_rate = 1.0 / (gap_s + 1.0 / arrival_rate);
    accepted_rate / arrival_rate
}

/// The smallest whole-millisecond gap after an accepted request that nginx accepts with burst 0:
/// the least `ms` with `rate*ms/1000 >= 1000` in thousandths, i.e. `ceil(1000/rate)` ms.
pub fn min_gap_ms(limit_rate: f64) -> u64 {
    let rate = (limit_rate * 1000.0).round() as u64;
    1_000_000_u64.div_ceil(rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(us: &[u64]) -> Vec<u64> {
        us.iter().map(|t| t / 1000).collect()
    }

    #[test]
    fn min_gap_is_334ms_at_3rps() {
        assert_eq!(min_gap_ms(3.0), 334);
        assert_eq!(min_gap_ms(30.0), 34);
        assert_eq!(min_gap_ms(10.0), 100);
    }

    #[test]
    fn even_3rps_with_burst_0_passes_two_in_three() {
        // 333.33 ms gaps read as 333, 333, 334 ms: one gap in three is long enough.
        let arr = even_arrivals_us(3.0, 180);
        let (lo, hi, _) = predict(Limit::queued(3.0, 0), &arr, 1000, 20);
        assert!(
            (119..=121).contains(&lo) && (119..=121).contains(&hi),
            "{lo}..{hi}"
        );
    }

    #[test]
    fn even_9rps_with_burst_0_lands_between_every_third_and_fourth() {
        let arr = even_arrivals_us(9.0, 540);
        let (lo, hi, _) = predict(Limit::queued(3.0, 0), &arr, 1000, 20);
        // 60 s at 9 r/s: every 3rd arrival would be 180, every 4th 135.
        assert!(lo >= 135 && hi <= 180, "{lo}..{hi}");
    }

    #[test]
    fn burst_queue_overflows_at_rate_times_attack_plus_burst() {
        // 9 r/s for 60 s against 3 r/s: the queue fills at 6 r/s, then only 3 r/s get in, so
        // accepted = 3 x 60 + burst until the burst covers the whole excess (burst 400 > 360).
        let arr = ms(&even_arrivals_us(9.0, 540));
        for (burst, want) in [(100, 280), (300, 480), (400, 540)] {
            let sim = simulate(Limit::queued(3.0, burst), &arr);
            assert!(
                sim.accepted.abs_diff(want) <= 2,
                "burst {burst}: {}",
                sim.accepted
            );
        }
        // The published 120 s run: 1080 arrivals, 3 x 120 + 400 = 760 accepted.
        let long = ms(&even_arrivals_us(9.0, 1080));
        let sim = simulate(Limit::queued(3.0, 400), &long);
        assert!(sim.accepted.abs_diff(760) <= 2, "{}", sim.accepted);
        // Burst 400 for 60 s: 360 queued at the end, drained at 3 r/s: done near 180 s.
        let sim = simulate(Limit::queued(3.0, 400), &arr);
        assert!(
            (178_000..=181_000).contains(&sim.drained_ms),
            "{}",
            sim.drained_ms
        );
        // Throughput while the queue is non-empty is the limit rate: accepted / (attack + drain).
        let tput = sim.accepted as f64 / (sim.drained_ms as f64 / 1000.0);
        assert!((tput - 3.0).abs() < 0.02, "{tput}");
    }

    #[test]
    fn a_coarse_clock_keeps_two_in_three_at_3rps() {
        // With 4 ms ticks the gaps read 332 or 336 ms: still one long-enough gap in three.
        let arr = even_arrivals_us(3.0, 180);
        let (lo, hi, _) = predict(Limit::queued(3.0, 0), &arr, 4000, 16);
        assert!(lo >= 118 && hi <= 122, "{lo}..{hi}");
    }

    #[test]
    fn nodelay_passes_without_waiting() {
        let arr = ms(&even_arrivals_us(9.0, 90));
        let sim = simulate(
            Limit {
                rate: 3.0,
                burst: 10,
                delay: 10,
            },
            &arr,
        );
        assert!(sim
            .outcomes
            .iter()
            .all(|o| !matches!(o, Outcome::Delayed(_))));
        assert!(sim.accepted > 10 && sim.rejected > 0);
    }

    #[test]
    fn poisson_formula_agrees_with_simulation() {
        // Exponential gaps from a fixed LCG: the closed form and the simulation meet within 2%.
        let mut x: u64 = 42;
        let mut t = 0f64;
        let mut arr = Vec::new();
        for _ in 0..200_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            t += -u.ln() / 3.0 * 1e6;
            arr.push(t as u64);
        }
        let sim = simulate(Limit::queued(3.0, 0), &ms(&arr));
        let formula = poisson_burst0_ratio(3.0, 3.0);
        assert!((formula - 0.4995).abs() < 0.001, "{formula}");
        assert!(
            (sim.success_ratio() - formula).abs() < 0.01,
            "{}",
            sim.success_ratio()
        );
    }

    #[test]
    fn queue_depth_counts_waiting_requests() {
        let arr = ms(&even_arrivals_us(9.0, 9));
        let sim = simulate(Limit::queued(3.0, 100), &arr);
        assert_eq!(sim.accepted, 9);
        // Arrival k (111 ms apart) waits 222k ms and leaves at 333k ms: at 888 ms, k = 3..8 wait.
        assert_eq!(sim.queue_depth_at(&arr, arr[8]), 6);
    }
}
