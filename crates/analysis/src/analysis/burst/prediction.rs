//! What the limit_req model predicts for the arrivals: the on-time range over the clock's
//! phases, the jitter envelope, the queue over time, and closed forms for even arrivals.

use super::{JITTER_RUNS, PHASES};
use crate::theory::limit_req::{self, Limit, Outcome, Simulation};

/// The model's prediction for one arrival sequence.
pub(super) struct Prediction {
    /// Fewest and most accepted over the clock's phases, arrivals exactly on time.
    pub(super) lo: u64,
    pub(super) hi: u64,
    /// Fewest and most accepted over the on-time range and [`JITTER_RUNS`] draws of each of
    /// two jitter models: the clock's (each arrival read up to a tick late), and the clock's
    /// plus the schedule's (that share of sends late by up to the lateness measured).
    pub(super) env_lo: u64,
    pub(super) env_hi: u64,
    /// The lateness bound the envelope used (µs): the read jitter, or the schedule's 99th
    /// percentile.
    pub(super) jitter_us: u64,
    /// The simulation at phase 0 and its arrival times on nginx's clock (ms).
    pub(super) sim: Simulation,
    pub(super) arrivals_ms: Vec<u64>,
    /// How many measured decisions (accept or refuse) differ from the on-time model at the
    /// phase that matches them best: the decisions jitter moved.
    pub(super) best_mismatch: u64,
    /// Earliest and latest drain over the phases (ms after the first arrival).
    pub(super) drained_ms: (u64, u64),
}

impl Prediction {
    /// Replays `arrivals_us` through the model on time at every phase and with jitter: each
    /// arrival read up to `read_us` after its given time (a tick for send times; the
    /// millisecond nginx's log truncates for logged arrivals), plus `late` sends.
    pub(super) fn new(
        limit: Limit,
        arrivals_us: &[u64],
        tick_us: u64,
        read_us: u64,
        late: Lateness,
        measured: &[bool],
    ) -> Prediction {
        let (lo, hi, sim) = limit_req::predict(limit, arrivals_us, tick_us, PHASES);
        let tick = tick_us.max(1);
        let (mut env_lo, mut env_hi) = (lo, hi);
        let mut rng = SplitMix(0x62_7572_7374); // fixed: the same data gives the same report
        let mut jittered = Vec::with_capacity(arrivals_us.len());
        let late_span = late.p99_us.saturating_sub(late.threshold_us);
        for with_sends in [false, true] {
            if with_sends && (late.share_ppm == 0 || late_span == 0) {
                continue;
            }
            for _ in 0..JITTER_RUNS {
                let phase = rng.below(tick);
                jittered.clear();
                for &t in arrivals_us {
                    let mut d = phase + rng.below(read_us.max(1));
                    if with_sends && rng.below(1_000_000) < late.share_ppm {
                        d += late.threshold_us + rng.below(late_span + 1);
                    }
                    jittered.push(t + d);
                }
                jittered.sort_unstable();
                let a = limit_req::simulate(limit, &on_clock(&jittered, tick, 0)).accepted;
                env_lo = env_lo.min(a);
                env_hi = env_hi.max(a);
            }
        }
        let jitter_us = read_us.max(late.p99_us);
        let mut best_mismatch = u64::MAX;
        let mut drained = (u64::MAX, 0);
        for i in 0..PHASES {
            let ms = on_clock(arrivals_us, tick, u64::from(i) * tick / u64::from(PHASES));
            let s = limit_req::simulate(limit, &ms);
            let miss = s
                .outcomes
                .iter()
                .zip(measured)
                .filter(|(o, &m)| matches!(o, Outcome::Rejected) == m)
                .count() as u64;
            best_mismatch = best_mismatch.min(miss);
            drained = (drained.0.min(s.drained_ms), drained.1.max(s.drained_ms));
        }
        Prediction {
            lo,
            hi,
            env_lo,
            env_hi,
            jitter_us,
            arrivals_ms: on_clock(arrivals_us, tick, 0),
            sim,
            best_mismatch,
            drained_ms: drained,
        }
    }

    /// Arrivals the phase-0 model delays (queues).
    pub(super) fn delayed(&self) -> u64 {
        self.sim
            .outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Delayed(_)))
            .count() as u64
    }

    /// How long the phase-0 model's queue stood empty between its first and last release
    /// (ms): each gap between two consecutive releases beyond the limit's interval and the
    /// millisecond the model's whole-ms delays round it by. Zero while
    /// arrivals keep the queue busy; a stall that delays arrivals past the queue's drain shows
    /// here, so the drain claim counts only the time the queue had work.
    pub(super) fn idle_ms(&self, rate: f64) -> f64 {
        let mut releases: Vec<u64> = self
            .sim
            .outcomes
            .iter()
            .zip(&self.arrivals_ms)
            .filter_map(|(o, &a)| match o {
                Outcome::Passed => Some(a),
                Outcome::Delayed(d) => Some(a + d),
                Outcome::Rejected => None,
            })
            .collect();
        releases.sort_unstable();
        let interval = 1000.0 / rate.max(1e-9);
        releases
            .windows(2)
            .map(|w| ((w[1] - w[0]) as f64 - interval - 1.0).max(0.0))
            .sum()
    }

    /// Requests the model holds in nginx's queue at `t_us`.
    pub(super) fn queue_at(&self, t_us: u64) -> u64 {
        self.sim.queue_depth_at(&self.arrivals_ms, t_us / 1000)
    }

    /// The deepest the model's queue gets (just after some arrival).
    pub(super) fn max_queue(&self) -> u64 {
        let mut ends: Vec<u64> = self
            .sim
            .outcomes
            .iter()
            .zip(&self.arrivals_ms)
            .filter_map(|(o, &a)| match o {
                Outcome::Delayed(d) => Some(a + d),
                _ => None,
            })
            .collect();
        ends.sort_unstable();
        let mut max = 0;
        let mut queued = 0u64;
        for (o, &a) in self.sim.outcomes.iter().zip(&self.arrivals_ms) {
            if matches!(o, Outcome::Delayed(_)) {
                queued += 1;
                let left = ends.partition_point(|&e| e <= a) as u64;
                max = max.max(queued - left.min(queued));
            }
        }
        max
    }
}

/// How late the load's sends left, from its schedule summary.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Lateness {
    /// Share of sends later than `threshold_us`, in parts per million.
    pub(super) share_ppm: u64,
    /// The schedule's lateness threshold (µs).
    pub(super) threshold_us: u64,
    /// 99th percentile of lateness (µs).
    pub(super) p99_us: u64,
}

impl Lateness {
    /// The lateness of a schedule (none when there is no schedule).
    pub(super) fn of(s: Option<&model::Schedule>) -> Lateness {
        s.map_or(Lateness::default(), |s| Lateness {
            share_ppm: s.late * 1_000_000 / s.sent.max(1),
            threshold_us: s.late_threshold_us,
            p99_us: s.late_p99_us,
        })
    }
}

/// A small seeded generator (SplitMix64) for the jitter draws.
pub(super) struct SplitMix(u64);

impl SplitMix {
    /// Uniform in `0..n` (`n` > 0).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// Arrival times as nginx's clock reads them: shifted by `offset_us`, floored to the tick, in ms.
pub(super) fn on_clock(arrivals_us: &[u64], tick_us: u64, offset_us: u64) -> Vec<u64> {
    arrivals_us
        .iter()
        .map(|&t| (t + offset_us) / tick_us * tick_us / 1000)
        .collect()
}

/// Even arrivals at `arrival_rate` against burst 0 at `limit_rate` on a `tick_us` clock: after an
/// accepted arrival, the next accepted one is the `jmin`th or `jmax`th after it, depending on
/// where the tick boundaries fall. The clock must advance `k = ceil(gap/tick)` ticks, which a
/// real gap does when it exceeds `(k-1)` ticks (with luck) and always when it reaches `k` ticks.
pub(super) fn even_cycle(arrival_rate: f64, limit_rate: f64, tick_us: u64) -> (u64, u64) {
    let g = 1e6 / arrival_rate;
    let tick = tick_us.max(1) as f64;
    let k = (limit_req::min_gap_ms(limit_rate) as f64 * 1000.0 / tick).ceil();
    let jmin = (((k - 1.0) * tick / g).floor() + 1.0).max(1.0);
    let jmax = (k * tick / g).ceil().max(jmin);
    (jmin as u64, jmax as u64)
}

/// Even arrivals against burst 0 when each arrival's phase against the tick is random (jitter of
/// a tick or more): the probability `q` that the `jmin`th arrival after an accepted one reads a
/// long enough gap (its real gap beyond `(k-1)` ticks, as a share of a tick), and the mean
/// number of arrivals per accepted request, `jmin q + jmax (1 - q)`.
pub(super) fn mixed_cycle(arrival_rate: f64, limit_rate: f64, tick_us: u64) -> (f64, f64) {
    let (jmin, jmax) = even_cycle(arrival_rate, limit_rate, tick_us);
    let g = 1e6 / arrival_rate;
    let tick = tick_us.max(1) as f64;
    let k = (limit_req::min_gap_ms(limit_rate) as f64 * 1000.0 / tick).ceil();
    let q = if jmax == jmin {
        1.0
    } else {
        ((jmin as f64 * g - (k - 1.0) * tick) / tick).clamp(0.0, 1.0)
    };
    (q, jmin as f64 * q + jmax as f64 * (1.0 - q))
}

/// The binomial standard deviation of a success ratio `p` over `n` trials. Acceptances under
/// burst 0 are more regular than independent coin flips (each accepted request blocks the next
/// `gap` ms), so the real spread is smaller and this bound is conservative.
pub(super) fn sigma(p: f64, n: u64) -> f64 {
    (p * (1.0 - p) / n.max(1) as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_cycle_is_third_or_fourth_at_three_times_the_limit() {
        // 9 r/s against 3 r/s: 111 ms gaps; the clock must move 336 ms (84 ticks of 4 ms).
        assert_eq!(even_cycle(9.0, 3.0, 4000), (3, 4));
        // The quick form (x10) keeps the same cycle on the same 4 ms clock: 36 ms = 9 ticks.
        assert_eq!(even_cycle(90.0, 30.0, 4000), (3, 4));
        // At the limit: the next or the one after.
        assert_eq!(even_cycle(3.0, 3.0, 4000), (1, 2));
        assert_eq!(even_cycle(3.0, 3.0, 1000), (1, 2));
    }

    #[test]
    fn full_jitter_gives_three_in_five_at_the_limit_and_2_45_at_three_times() {
        let (q, mean) = mixed_cycle(3.0, 3.0, 4000);
        assert!((q - 1.0 / 3.0).abs() < 1e-3 && (1.0 / mean - 0.6).abs() < 1e-3);
        let (_, mean) = mixed_cycle(9.0, 3.0, 4000);
        assert!((9.0 / mean - 2.4545).abs() < 1e-3, "{}", 9.0 / mean);
        // The quick form's x10 keeps it: 1.33 ms of a 4 ms tick either way.
        let (_, quick) = mixed_cycle(90.0, 30.0, 4000);
        assert!((quick - mean).abs() < 1e-6);
    }

    #[test]
    fn prediction_matches_the_published_burst_runs() {
        // The write-up's 9 r/s, 60 s attack with burst 400: all 540 pass, the queue peaks near 360.
        let arr = limit_req::even_arrivals_us(9.0, 540);
        let all = vec![true; arr.len()];
        let p = Prediction::new(
            Limit::queued(3.0, 400),
            &arr,
            4000,
            4000,
            Lateness::default(),
            &all,
        );
        assert_eq!((p.lo, p.hi), (540, 540));
        assert_eq!(p.best_mismatch, 0);
        assert!((355..=362).contains(&p.max_queue()), "{}", p.max_queue());
        // Mid-attack (30 s) the queue holds about 6 x 30 = 180.
        assert!(p.queue_at(30_000_000).abs_diff(180) <= 2);
        assert!((178_000..=181_000).contains(&p.drained_ms.1));
    }

    #[test]
    fn a_stall_read_in_nginx_arrivals_moves_the_prediction() {
        // Quick burst 0 at 3x: 90 r/s against 30 r/s for 6 s, as nginx's log gives arrivals
        // (whole ms, on a ms clock). A 150 ms stall delivers 14 arrivals at once: nginx accepts
        // one of them, where the even schedule gave every 3rd or 4th (about 4). The model on
        // the stalled arrivals predicts the loss.
        let even = limit_req::even_arrivals_us(90.0, 540);
        let mut stalled = even.clone();
        let (from, to) = (270_usize, 284_usize);
        for t in &mut stalled[from..to] {
            *t = even[to - 1];
        }
        let ms = |v: &[u64]| v.iter().map(|t| t / 1000 * 1000).collect::<Vec<_>>();
        let all = vec![true; even.len()];
        let limit = Limit::queued(30.0, 0);
        let read = |arr: &[u64]| {
            let p = Prediction::new(limit, &ms(arr), 1000, 1000, Lateness::default(), &all);
            (p.env_lo, p.env_hi, p.jitter_us)
        };
        let (even_lo, even_hi, jitter) = read(&even);
        let (lo, hi, _) = read(&stalled);
        assert!(135 <= even_lo && even_hi <= 180, "{even_lo}..{even_hi}");
        assert_eq!(jitter, 1000);
        let lost = (even_lo - lo, even_hi - hi);
        assert!(
            (2..=5).contains(&lost.0) && (2..=5).contains(&lost.1),
            "{lost:?}: {even_lo}..{even_hi} vs {lo}..{hi}"
        );
    }

    #[test]
    fn a_stall_past_the_drain_leaves_the_queue_idle_and_the_model_says_how_long() {
        // The quick burst-400 case: 90 r/s for 6 s against 60 r/s. On time, the queue never
        // empties. When a stall holds the last 240 arrivals back 7.8 s (as nginx's log showed on
        // a machine at load 11), the queue drains first and idles until they come.
        let on_time = limit_req::even_arrivals_us(90.0, 540);
        let all = vec![true; on_time.len()];
        let limit = Limit::queued(60.0, 400);
        let idle = |arr: &[u64]| {
            Prediction::new(limit, arr, 1000, 1000, Lateness::default(), &all).idle_ms(60.0)
        };
        assert_eq!(idle(&on_time), 0.0);
        let mut stalled = on_time.clone();
        for t in &mut stalled[300..] {
            *t += 7_800_000;
        }
        // 300 accepted by 3.3 s drain by 3.3 + 299/60 - 3.3 = about 5 s after the first; the
        // rest arrive from 11.13 s: about 6.1 s idle, within a request either way.
        let gap = idle(&stalled);
        let want = 300.0 / 90.0 * 1000.0 + 7800.0 - 299.0 / 60.0 * 1000.0;
        assert!((gap - want).abs() <= 1000.0 / 60.0 + 2.0, "{gap} vs {want}");
    }
}
