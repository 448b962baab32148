//! The `burst` analysis (scenario `burst-handling`): nginx's `limit_req` under an open-loop
//! attack, measured against the leaky-bucket model of [`crate::theory::limit_req`].
//!
//! Every request of an open-loop load carries its intended send time (`t_us - latency_us`,
//! since open-loop latency counts from it). Those times go through the model at every phase of
//! nginx's coarse clock (the on-time range) and with random arrival jitter (each arrival read up
//! to a tick late, and the schedule's late sends), which gives the range of accepted counts the
//! algorithm allows for these arrivals; the measured 2xx count must fall in it, give or take
//! what an unseen stall of nginx's worker can move. The report per case is the
//! vegeta write-up's block (requests, rate, throughput, durations, latencies, success, status
//! codes), a predicted-vs-measured table explained from the mechanism, and the queue depth over
//! time (measured: sent and not yet answered; predicted: delayed inside nginx).

use super::Records;
use crate::scenario::{ArrivalsSpec, Case, LoadSpec, Scenario};
use crate::theory::limit_req::{self, Limit, Outcome, Simulation};
use model::{CaseResult, CheckResult, LoadSummary, RequestRecord, RunResults, Series, Table};
use proxy::config::RateLimit;
use std::fmt::Write;

/// Tick phases the prediction is simulated at (a quarter millisecond apart on a 4 ms clock).
const PHASES: u32 = 16;
/// Points in each queue-depth series.
const SERIES_POINTS: u64 = 300;
/// Title suffix of the vegeta-style table (the cross-case summary reads its cells back).
const REPORT: &str = "report (vegeta's block)";
/// Title suffix of the predicted-vs-measured table.
const MODEL: &str = "limit_req model vs measured";
/// A stall of nginx's worker the checks allow for (s): the client cannot see it, and the
/// busy shared 2-core machine has kept nginx off the CPU for 36 ms at a case's first request.
const NGINX_STALL_S: f64 = 0.1;
/// Draws of arrival jitter in the prediction's envelope.
const JITTER_RUNS: u32 = 48;
/// Standard deviations of the binomial spread allowed between a Poisson case's success ratio
/// and the closed form.
const SIGMAS: f64 = 3.0;

/// Runs the analysis on one case: tables, series, findings and checks for its attack load.
pub fn case(
    _scn: &Scenario,
    case: &Case,
    result: &mut CaseResult,
    records: &Records,
) -> Vec<CheckResult> {
    let Some(rl) = limited(case) else {
        result.findings.push(
            "burst analysis: no route of this case has a rate limit; nothing to model.".into(),
        );
        return Vec::new();
    };
    let Some(spec) = case.loads.iter().find(|l| l.rate.is_some()) else {
        result
            .findings
            .push("burst analysis: no open-loop load in this case; nothing to model.".into());
        return Vec::new();
    };
    if case.loads.len() > 1 {
        result.findings.push(format!(
            "burst analysis: only load '{}' is modelled; other loads share the limiter and \
             make the prediction approximate.",
            spec.name
        ));
    }
    let (Some(recs), Some(summary)) = (
        records.get(&spec.name),
        result.loads.iter().find(|l| l.name == spec.name).cloned(),
    ) else {
        result.findings.push(format!(
            "burst analysis: load '{}' left no per-request records.",
            spec.name
        ));
        return Vec::new();
    };
    let a = Analysis::new(spec, &summary, rl, recs, limit_req::nginx_clock_tick_us());
    result.tables.push(a.report_table(&case.name));
    result.tables.push(a.model_table(&case.name, &result.logs));
    result.series.extend(a.series());
    result.findings.extend(a.findings());
    a.checks(&case.name, &result.logs)
}

/// Adds the cross-case summary (one row per case, the write-up's numbers beside ours) to the
/// last case, and the run's findings.
pub fn finish(scn: &Scenario, results: &mut RunResults) {
    let mut t = Table {
        title: "All cases: burst handling at a glance".into(),
        columns: [
            "Case",
            "Arrivals",
            "Limit",
            "Burst",
            "Requests",
            "Rate",
            "Throughput",
            "Success",
            "Status codes",
            "Total / attack",
            "Latency mean / p50 / p95 / p99 / max",
            "Model: accepted",
            "Measured: accepted",
            "Published run",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
        notes: Vec::new(),
    };
    for c in &results.cases {
        let Some(spec) = scn.cases.iter().find(|s| s.name == c.name) else {
            continue;
        };
        let (Some(rl), Some(load)) = (limited(spec), spec.loads.iter().find(|l| l.rate.is_some()))
        else {
            continue;
        };
        let report = |row: &str| cell(c, REPORT, row, 1);
        let model = |row: &str| cell(c, MODEL, row, 1);
        let measured = |row: &str| cell(c, MODEL, row, 2);
        t.rows.push(vec![
            c.name.clone(),
            match load.arrivals {
                ArrivalsSpec::Even => "even".into(),
                ArrivalsSpec::Poisson => "Poisson".into(),
            },
            format!("{} r/s", fmt_rate(rl.rate.0)),
            rl.burst.to_string(),
            report("Requests [total, rate, throughput]")
                .split(", ")
                .next()
                .unwrap_or("-")
                .to_string(),
            format!("{:.2}", load.rate.map(|r| r.0).unwrap_or(0.0)),
            measured("Throughput (2xx per second of total)"),
            report("Success [ratio]"),
            report("Status Codes [code:count]"),
            {
                let d = report("Duration [total, attack, wait]");
                let mut p = d.split(", ");
                format!("{} / {}", p.next().unwrap_or("-"), p.next().unwrap_or("-"))
            },
            report("Latencies [mean, 50, 95, 99, max]").replace(", ", " / "),
            model("Accepted (2xx)"),
            measured("Accepted (2xx)"),
            published(rl, load)
                .map(|p| format!("{} of {}", p.accepted, p.requests))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    if t.rows.is_empty() {
        return;
    }
    t.notes.push(
        "Model: the limit_req algorithm replayed over each case's own intended send times at every \
         phase of nginx's 4 ms clock and with arrival jitter (a range when the phase matters). \
         Published run: the counts of \
         the vegeta write-up this scenario follows, for the case with the same rate multiple, burst \
         and length in limit-periods (the quick form keeps them)."
            .into(),
    );
    for c in &scn.cases {
        let (Some(rl), Some(load)) = (limited(c), c.loads.iter().find(|l| l.rate.is_some())) else {
            continue;
        };
        let Some(p) = published(rl, load) else {
            continue;
        };
        let attack = load.duration.map_or(0.0, |d| d.0.as_secs_f64());
        let periods = (attack * rl.rate.0).round() as u64;
        let (ok, n) = (p.accepted, p.requests);
        if rl.burst > 0 && ok < n && ok != periods + u64::from(rl.burst) {
            let eff = ok.saturating_sub(periods);
            // The published runs were at 3 r/s against 9 r/s for 60 s.
            t.notes.push(format!(
                "The published burst-{} run accepted {ok} of {n} in {:.1} s: the model gives that \
                 for burst {eff} ({periods} limit periods + {eff}), whose queue also drains in \
                 {:.1} s after a 60 s attack ({:.1} s in all). That run behaved as if its queue held \
                 {eff}, not {}.",
                rl.burst,
                p.total_s,
                eff as f64 / 3.0,
                60.0 + eff as f64 / 3.0,
                rl.burst
            ));
        }
        if rl.burst == 0 && load.rate.is_some_and(|r| r.0 > rl.rate.0) {
            t.notes.push(format!(
                "The published burst-0 run at {}x the limit accepted {ok} of {n} ({:.2} r/s over \
                 its {:.1} s) but shows answers for only {} of its {n} requests; its acceptance \
                 rate is the jittered model's (every 3rd or 4th arrival, one boundary in three \
                 going the early way: 9/3.67 = 2.45 r/s).",
                (load.rate.map_or(0.0, |r| r.0) / rl.rate.0).round(),
                ok as f64 / p.total_s,
                p.total_s,
                p.answered
            ));
        }
    }
    t.notes.push(
        "How to read it: below the limit every request passes. At and above it with burst 0 the \
         limiter judges each gap, not the mean rate: a request is refused when it comes sooner than \
         ceil(1000/rate) ms after the last accepted one, so even spacing at the limit passes 2 in 3 \
         (3 in 5 when jitter scrambles the phase against nginx's 4 ms clock) and Poisson spacing \
         about half. A burst queue turns refusals into waits: the queue fills at \
         (attack - limit) per second, drains at the limit, and overflows once the excess of the whole \
         attack exceeds the burst; the queue must be sized for the peak's excess times its duration."
            .into(),
    );
    if let Some(last) = results.cases.last_mut() {
        last.tables.push(t);
    }
    results.findings.push(
        "burst-handling: the cross-case table is at the end of the last case's section.".into(),
    );
    let by_name = |n: &str| results.cases.iter().find(|c| c.name == n);
    let ok = |c: &CaseResult| {
        format!(
            "{} of {}",
            cell(c, MODEL, "Accepted (2xx)", 2),
            cell(c, MODEL, "Requests", 2)
        )
    };
    let ratio = |c: &CaseResult| cell(c, REPORT, "Success [ratio]", 1);
    if let (Some(a), Some(b)) = (by_name("3rps-even"), by_name("3rps-poisson")) {
        results.findings.push(format!(
            "At the limit's own mean rate, evenly paced arrivals passed {} ({}) and Poisson arrivals \
             {} ({}): limit_req judges the gap between requests, not their mean rate.",
            ratio(a),
            ok(a),
            ratio(b),
            ok(b)
        ));
    }
    if let (Some(a), Some(b)) = (by_name("9rps-burst400"), by_name("9rps-burst400-120s")) {
        results.findings.push(format!(
            "Burst 400 absorbed 60 s of a 3x overload ({} accepted) but not 120 s ({}): the queue must \
             hold the overload's excess for its whole duration.",
            ok(a),
            ok(b)
        ));
    }
}

/// The rate limit of the first rate-limited route of the case's proxy config.
fn limited(case: &Case) -> Option<&RateLimit> {
    let cfg = case.proxy.as_ref()?;
    let name = cfg.routes.iter().find_map(|r| r.rate_limit.as_deref())?;
    cfg.rate_limit(name)
}

/// The model's view of a configured limit.
fn model_limit(rl: &RateLimit) -> Limit {
    Limit {
        rate: rl.rate.0,
        burst: u64::from(rl.burst),
        delay: if rl.nodelay {
            u64::from(rl.burst)
        } else {
            u64::from(rl.delay.unwrap_or(0))
        },
    }
}

/// A cell of a table whose title ends with `suffix`, in the row whose first cell is `row`.
fn cell(c: &CaseResult, suffix: &str, row: &str, col: usize) -> String {
    c.tables
        .iter()
        .find(|t| t.title.ends_with(suffix))
        .and_then(|t| t.rows.iter().find(|r| r.first().is_some_and(|f| f == row)))
        .and_then(|r| r.get(col).cloned())
        .unwrap_or_else(|| "-".into())
}

/// One run of the vegeta write-up this scenario follows.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Published {
    /// 2xx answers.
    accepted: u64,
    /// Requests sent.
    requests: u64,
    /// Requests that got any HTTP answer (the rest were client errors in that run).
    answered: u64,
    /// vegeta's total duration, seconds.
    total_s: f64,
}

/// The published vegeta run with the same shape (attack/limit rate ratio, burst, attack length
/// in limit periods, even arrivals).
fn published(rl: &RateLimit, load: &LoadSpec) -> Option<Published> {
    if load.arrivals != ArrivalsSpec::Even {
        return None;
    }
    let ratio = load.rate?.0 / rl.rate.0;
    let periods = load.duration?.0.as_secs_f64() * rl.rate.0;
    let is = |a: f64, b: f64| (a - b).abs() < 1e-6;
    // (rate ratio, burst, limit periods, accepted, requests, answered, total seconds)
    let table: [(f64, u32, f64, u64, u64, u64, f64); 7] = [
        (2.0 / 3.0, 0, 180.0, 120, 120, 120, 59.504),
        (1.0, 0, 180.0, 119, 180, 180, 59.669),
        (3.0, 0, 180.0, 145, 540, 184, 59.890),
        (3.0, 100, 180.0, 230, 540, 540, 76.337),
        (3.0, 300, 180.0, 280, 540, 540, 93.008),
        (3.0, 400, 180.0, 540, 540, 540, 179.673),
        (3.0, 400, 360.0, 760, 1080, 1080, 253.002),
    ];
    table
        .iter()
        .find(|(r, b, p, ..)| is(*r, ratio) && *b == rl.burst && is(*p, periods))
        .map(|&(.., accepted, requests, answered, total_s)| Published {
            accepted,
            requests,
            answered,
            total_s,
        })
}

/// Per-request facts of one load, in intended-send order.
struct Measured {
    /// Intended send times (µs from the case origin), sorted.
    intended: Vec<u64>,
    /// Completion times (µs), sorted.
    completed: Vec<u64>,
    /// Whether each request (intended order) was accepted (2xx).
    accepted: Vec<bool>,
    /// Completion time of each accepted request (µs), sorted.
    ok_times: Vec<u64>,
    /// Answers with the limit's status.
    limited: u64,
    /// Other statuses and failures below HTTP.
    other: u64,
    /// Status counts.
    status: std::collections::BTreeMap<u16, u64>,
}

impl Measured {
    fn new(recs: &[RequestRecord], limit_status: u16) -> Measured {
        let mut rows: Vec<(u64, &RequestRecord)> = recs
            .iter()
            .map(|r| (r.t_us.saturating_sub(u64::from(r.latency_us)), r))
            .collect();
        rows.sort_by_key(|(t, r)| (*t, r.t_us));
        let mut completed: Vec<u64> = recs.iter().map(|r| r.t_us).collect();
        completed.sort_unstable();
        let mut ok_times: Vec<u64> = recs
            .iter()
            .filter(|r| (200..300).contains(&r.status))
            .map(|r| r.t_us)
            .collect();
        ok_times.sort_unstable();
        let mut status = std::collections::BTreeMap::new();
        for r in recs.iter().filter(|r| r.error.is_none()) {
            *status.entry(r.status).or_insert(0) += 1;
        }
        let limited = recs.iter().filter(|r| r.status == limit_status).count() as u64;
        Measured {
            intended: rows.iter().map(|(t, _)| *t).collect(),
            accepted: rows
                .iter()
                .map(|(_, r)| (200..300).contains(&r.status))
                .collect(),
            completed,
            other: recs.len() as u64 - ok_times.len() as u64 - limited,
            ok_times,
            limited,
            status,
        }
    }

    fn n(&self) -> u64 {
        self.intended.len() as u64
    }

    fn ok(&self) -> u64 {
        self.ok_times.len() as u64
    }

    /// Requests sent (intended) by `t_us` and not yet answered.
    fn in_flight_at(&self, t_us: u64) -> u64 {
        let sent = self.intended.partition_point(|&x| x <= t_us);
        let done = self.completed.partition_point(|&x| x <= t_us);
        sent.saturating_sub(done) as u64
    }

    /// The most requests in flight at once.
    fn max_in_flight(&self) -> u64 {
        let (mut i, mut j, mut cur, mut max) = (0, 0, 0i64, 0i64);
        while i < self.intended.len() {
            if j < self.completed.len() && self.completed[j] < self.intended[i] {
                cur -= 1;
                j += 1;
            } else {
                cur += 1;
                i += 1;
                max = max.max(cur);
            }
        }
        max.max(0) as u64
    }
}

/// The model's prediction for one arrival sequence.
struct Prediction {
    /// Fewest and most accepted over the clock's phases, arrivals exactly on time.
    lo: u64,
    hi: u64,
    /// Fewest and most accepted over the on-time range and [`JITTER_RUNS`] draws of each of
    /// two jitter models: the clock's (each arrival read up to a tick late), and the clock's
    /// plus the schedule's (that share of sends late by up to the lateness measured).
    env_lo: u64,
    env_hi: u64,
    /// The lateness bound the envelope used (µs): the tick, or the schedule's 99th percentile.
    jitter_us: u64,
    /// The simulation at phase 0 and its arrival times on nginx's clock (ms).
    sim: Simulation,
    arrivals_ms: Vec<u64>,
    /// How many measured decisions (accept or refuse) differ from the on-time model at the
    /// phase that matches them best: the decisions jitter moved.
    best_mismatch: u64,
    /// Earliest and latest drain over the phases (ms after the first arrival).
    drained_ms: (u64, u64),
}

impl Prediction {
    fn new(
        limit: Limit,
        arrivals_us: &[u64],
        tick_us: u64,
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
                    let mut d = phase + rng.below(tick);
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
        let jitter_us = tick.max(late.p99_us);
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

    fn delayed(&self) -> u64 {
        self.sim
            .outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Delayed(_)))
            .count() as u64
    }

    /// Requests the model holds in nginx's queue at `t_us`.
    fn queue_at(&self, t_us: u64) -> u64 {
        self.sim.queue_depth_at(&self.arrivals_ms, t_us / 1000)
    }

    /// The deepest the model's queue gets (just after some arrival).
    fn max_queue(&self) -> u64 {
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
struct Lateness {
    /// Share of sends later than `threshold_us`, in parts per million.
    share_ppm: u64,
    /// The schedule's lateness threshold (µs).
    threshold_us: u64,
    /// 99th percentile of lateness (µs).
    p99_us: u64,
}

impl Lateness {
    fn of(s: Option<&model::Schedule>) -> Lateness {
        s.map_or(Lateness::default(), |s| Lateness {
            share_ppm: s.late * 1_000_000 / s.sent.max(1),
            threshold_us: s.late_threshold_us,
            p99_us: s.late_p99_us,
        })
    }
}

/// A small seeded generator (SplitMix64) for the jitter draws.
struct SplitMix(u64);

impl SplitMix {
    /// Uniform in `0..n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// Arrival times as nginx's clock reads them: shifted by `offset_us`, floored to the tick, in ms.
fn on_clock(arrivals_us: &[u64], tick_us: u64, offset_us: u64) -> Vec<u64> {
    arrivals_us
        .iter()
        .map(|&t| (t + offset_us) / tick_us * tick_us / 1000)
        .collect()
}

/// One case's measurements and prediction, with what the report and the checks need.
struct Analysis<'a> {
    spec: &'a LoadSpec,
    summary: &'a LoadSummary,
    rl: &'a RateLimit,
    limit: Limit,
    tick_us: u64,
    m: Measured,
    p: Prediction,
    /// Planned attack length (s).
    attack_s: f64,
    /// First intended send (µs from the origin).
    start_us: u64,
    /// From the first intended send to the last answer (s).
    total_s: f64,
}

impl<'a> Analysis<'a> {
    fn new(
        spec: &'a LoadSpec,
        summary: &'a LoadSummary,
        rl: &'a RateLimit,
        recs: &[RequestRecord],
        tick_us: u64,
    ) -> Analysis<'a> {
        let limit = model_limit(rl);
        let m = Measured::new(recs, rl.status);
        // Each arrival reaches the limiter some unknown time after its intended send: nginx
        // reads its coarse clock up to a tick late, and some sends left late.
        let late = Lateness::of(summary.schedule.as_ref());
        let p = Prediction::new(limit, &m.intended, tick_us, late, &m.accepted);
        let start_us = m
            .intended
            .first()
            .copied()
            .unwrap_or((spec.start.0.as_secs_f64() * 1e6) as u64);
        let last_us = m.completed.last().copied().unwrap_or(start_us);
        let attack_s = spec
            .duration
            .map(|d| d.0.as_secs_f64())
            .or(summary.planned_s)
            .unwrap_or(summary.elapsed_s);
        Analysis {
            spec,
            summary,
            rl,
            limit,
            tick_us,
            total_s: (last_us.saturating_sub(start_us)) as f64 / 1e6,
            m,
            p,
            attack_s,
            start_us,
        }
    }

    fn attack_rate(&self) -> f64 {
        self.spec.rate.map(|r| r.0).unwrap_or(0.0)
    }

    fn poisson(&self) -> bool {
        self.spec.arrivals == ArrivalsSpec::Poisson
    }

    /// Sends that left later than the load's lateness threshold (1 ms).
    fn late(&self) -> u64 {
        self.summary.schedule.as_ref().map_or(0, |s| s.late)
    }

    /// An upper bound on the sends that left more than `threshold_us` late, from the schedule's
    /// summary: none past the largest lateness, at most 1% past its 99th percentile, at most the
    /// late count past its 1 ms threshold, otherwise all of them.
    fn late_beyond(&self, threshold_us: f64) -> u64 {
        let n = self.m.n();
        let Some(s) = self.summary.schedule.as_ref() else {
            return 0;
        };
        if threshold_us >= s.late_max_us as f64 {
            0
        } else if threshold_us >= s.late_p99_us as f64 && threshold_us >= s.late_threshold_us as f64
        {
            n.div_ceil(100).min(s.late)
        } else if threshold_us >= s.late_threshold_us as f64 {
            s.late
        } else {
            n
        }
    }

    /// Decisions an unseen stall of nginx's worker can move: while the bucket is empty, a
    /// worker kept off the CPU for [`NGINX_STALL_S`] reads the arrivals of that time together,
    /// and the leak it could not count (rate x stall) is lost.
    fn stall_slack(&self) -> u64 {
        (self.limit.rate * NGINX_STALL_S).ceil() as u64
    }

    /// Slack on the model's envelope: one request, one decision per send later than the
    /// envelope's jitter bound, and what a stall of nginx's worker can move.
    fn slack(&self) -> (u64, u64) {
        let late = self.late_beyond(self.p.jitter_us as f64);
        (1 + late + self.stall_slack(), late)
    }

    /// Predicted total length (s): from the first arrival until the last accepted request
    /// leaves the queue (or the last arrival, when nothing waits).
    fn predicted_total_s(&self) -> (f64, f64) {
        let last = self.last_arrival_s();
        let (a, b) = self.p.drained_ms;
        ((a as f64 / 1000.0).max(last), (b as f64 / 1000.0).max(last))
    }

    fn last_arrival_s(&self) -> f64 {
        self.m
            .intended
            .last()
            .map_or(0.0, |&t| (t - self.start_us) as f64 / 1e6)
    }

    /// Throughput from the first to the last accepted answer (r/s), the rate the queue drains at.
    fn queued_throughput(&self) -> Option<f64> {
        let (first, last) = (self.m.ok_times.first()?, self.m.ok_times.last()?);
        (last > first).then(|| (self.m.ok() - 1) as f64 / ((last - first) as f64 / 1e6))
    }

    fn latency_cells(&self) -> String {
        let l = &self.summary.latency;
        let p = |q: f64| {
            l.percentile(q)
                .map(|v| units::fmt_us(v as f64))
                .unwrap_or_else(|| "-".into())
        };
        format!(
            "{}, {}, {}, {}, {}",
            units::fmt_us(l.mean_us),
            p(50.0),
            p(95.0),
            p(99.0),
            units::fmt_us(l.max_us as f64)
        )
    }

    fn report_table(&self, case: &str) -> Table {
        let n = self.m.n();
        let wait = (self.total_s - self.attack_s).max(0.0);
        let codes: Vec<String> = self
            .m
            .status
            .iter()
            .map(|(s, c)| format!("{s}:{c}"))
            .chain(
                self.summary
                    .errors
                    .iter()
                    .map(|(k, c)| format!("{}:{c}", k.name())),
            )
            .collect();
        let row = |a: &str, b: String| vec![a.to_string(), b];
        Table {
            title: format!("{case}: {REPORT}"),
            columns: vec!["Metric".into(), "Value".into()],
            rows: vec![
                row(
                    "Requests [total, rate, throughput]",
                    format!(
                        "{n}, {:.2}, {:.2}",
                        n as f64 / self.attack_s.max(1e-9),
                        self.m.ok() as f64 / self.total_s.max(1e-9)
                    ),
                ),
                row(
                    "Duration [total, attack, wait]",
                    format!(
                        "{}, {}, {}",
                        secs(self.total_s),
                        secs(self.attack_s),
                        secs(wait)
                    ),
                ),
                row("Latencies [mean, 50, 95, 99, max]", self.latency_cells()),
                row("Success [ratio]", format!("{:.2}%", pct(self.m.ok(), n))),
                row("Status Codes [code:count]", codes.join("  ")),
            ],
            notes: vec![format!(
                "As vegeta reports it: rate is requests per second of the planned attack, \
                 throughput is 2xx answers per second of the total (first send to last answer), \
                 wait is what the total runs past the attack. Latency counts from each request's \
                 intended send time."
            )],
        }
    }

    fn model_table(&self, case: &str, logs: &model::LogSummary) -> Table {
        let n = self.m.n();
        let (plo, phi) = (self.p.env_lo, self.p.env_hi);
        let range = |a: String, b: String| if a == b { a } else { format!("{a} .. {b}") };
        let nginx_ok = log_count(logs, "PASSED") + log_count(logs, "DELAYED");
        let (tlo, thi) = self.predicted_total_s();
        let row = |q: &str, pr: String, me: String, ng: String| vec![q.to_string(), pr, me, ng];
        let mut rows = vec![
            row(
                "Requests",
                n.to_string(),
                n.to_string(),
                logs.access_lines.to_string(),
            ),
            row(
                "Accepted (2xx)",
                range(plo.to_string(), phi.to_string()),
                self.m.ok().to_string(),
                format!(
                    "{nginx_ok} (PASSED {}, DELAYED {})",
                    log_count(logs, "PASSED"),
                    log_count(logs, "DELAYED")
                ),
            ),
            row(
                "Accepted, arrivals exactly on time",
                range(self.p.lo.to_string(), self.p.hi.to_string()),
                "-".into(),
                "-".into(),
            ),
            row(
                &format!("Rejected ({})", self.rl.status),
                range((n - phi).to_string(), (n - plo).to_string()),
                self.m.limited.to_string(),
                log_count(logs, "REJECTED").to_string(),
            ),
            row(
                "Success ratio",
                range(
                    format!("{:.2}%", pct(plo, n)),
                    format!("{:.2}%", pct(phi, n)),
                ),
                format!("{:.2}%", pct(self.m.ok(), n)),
                "-".into(),
            ),
            row(
                "Throughput (2xx per second of total)",
                range(
                    format!("{:.2}", plo as f64 / thi.max(1e-9)),
                    format!("{:.2}", phi as f64 / tlo.max(1e-9)),
                ),
                format!("{:.2}", self.m.ok() as f64 / self.total_s.max(1e-9)),
                "-".into(),
            ),
            row(
                "Total (first send to last answer)",
                range(secs(tlo), secs(thi)),
                secs(self.total_s),
                "-".into(),
            ),
            row(
                "Drain after the attack",
                range(
                    secs((tlo - self.attack_s).max(0.0)),
                    secs((thi - self.attack_s).max(0.0)),
                ),
                secs((self.total_s - self.attack_s).max(0.0)),
                "-".into(),
            ),
            row(
                "Deepest queue",
                self.p.max_queue().to_string(),
                format!("{} in flight", self.m.max_in_flight()),
                "-".into(),
            ),
        ];
        if self.p.delayed() > 0 {
            rows.push(row(
                "Throughput first to last 2xx",
                format!("{:.2}", self.limit.rate),
                self.queued_throughput()
                    .map(|t| format!("{t:.3}"))
                    .unwrap_or_else(|| "-".into()),
                "-".into(),
            ));
        }
        if self.poisson() && self.limit.burst == 0 {
            let p = limit_req::poisson_burst0_ratio(self.limit.rate, self.attack_rate());
            rows.push(row(
                "Poisson closed form 1/(1 + rate x gap)",
                format!("{:.2}% ± {:.2}%", p * 100.0, SIGMAS * sigma(p, n) * 100.0),
                format!("{:.2}%", pct(self.m.ok(), n)),
                "-".into(),
            ));
        }
        if self.limit.burst == 0 && !self.poisson() && self.attack_rate() >= self.limit.rate {
            let (_, mean) = mixed_cycle(self.attack_rate(), self.limit.rate, self.tick_us);
            rows.push(row(
                "Accepted, phase fully jittered (closed form)",
                format!("{:.1}", n as f64 / mean),
                self.m.ok().to_string(),
                "-".into(),
            ));
        }
        if self.limit.burst == 0 {
            let model: Vec<bool> = self
                .p
                .sim
                .outcomes
                .iter()
                .map(|o| !matches!(o, Outcome::Rejected))
                .collect();
            rows.push(row(
                "Arrivals per accepted request (cycles)",
                format!("{} (on time, phase 0)", cycles(&model)),
                cycles(&self.m.accepted),
                "-".into(),
            ));
        }
        rows.push(row(
            "Decisions unlike the best-matching phase",
            "0".into(),
            format!("{} of {n}", self.p.best_mismatch),
            "-".into(),
        ));
        let mut notes = vec![format!(
            "Predicted: the limit_req algorithm (rate {} r/s, burst {}, {}) replayed over these {n} \
             requests' intended send times on nginx's clock, which moves in {} ms ticks. On time, \
             at {PHASES} phases of the tick, it accepts {}; with jitter ({JITTER_RUNS} random \
             draws of each arrival read up to a tick late, and as many with the schedule's share of \
             late sends, each up to its 99th-percentile lateness of {} ms, later), {}. The schedule \
             had {} sends over 1 ms late. The decisions row \
             counts requests whose fate differs from the on-time model at its best-matching phase: \
             jitter against the tick. nginx's own view is its access log's $limit_req_status.",
            fmt_rate(self.limit.rate),
            self.limit.burst,
            if self.limit.delay == 0 {
                "queued requests delayed".to_string()
            } else {
                format!("delay {}", self.limit.delay)
            },
            fmt_ms(self.tick_us),
            range(self.p.lo.to_string(), self.p.hi.to_string()),
            fmt_ms(self.p.jitter_us),
            range(self.p.env_lo.to_string(), self.p.env_hi.to_string()),
            self.late()
        )];
        notes.push(self.explain());
        Table {
            title: format!("{case}: {MODEL}"),
            columns: ["Quantity", "Predicted", "Measured", "nginx log"]
                .map(String::from)
                .to_vec(),
            rows,
            notes,
        }
    }

    /// Why this case came out as it did, from the algorithm.
    fn explain(&self) -> String {
        let rate = self.limit.rate;
        let arr = self.attack_rate();
        let gap_ms = limit_req::min_gap_ms(rate);
        let tick_ms = self.tick_us as f64 / 1000.0;
        let k = (gap_ms as f64 / tick_ms).ceil();
        let clock_gap = k * tick_ms;
        let burst = self.limit.burst;
        if burst == 0 && !self.poisson() {
            let g = 1000.0 / arr;
            if g >= clock_gap + tick_ms {
                return format!(
                    "Arrivals {g:.1} ms apart are always further apart than the {gap_ms} ms \
                     (ceil(1000/rate)) the limiter needs between accepted requests, even read on a \
                     {} ms clock: every request passes.",
                    fmt_ms(self.tick_us)
                );
            }
            let (jmin, jmax) = even_cycle(arr, rate, self.tick_us);
            let at_limit = (arr - rate).abs() < 1e-9;
            let mut s = format!(
                "With burst 0 nginx refuses a request that comes sooner than {gap_ms} ms \
                 (ceil(1000/rate)) after the last accepted one, and a refusal leaves its state \
                 untouched. Its clock moves in {} ms ticks, so a real gap of {g:.1} ms reads as a \
                 multiple of {} and must read {clock_gap:.0} ms: after each accepted arrival the \
                 {} one passes or, when the tick boundaries fall the other way, the {} one. \
                 Between every {} and every {} arrival passes, {:.2} to {:.2} r/s.",
                fmt_ms(self.tick_us),
                fmt_ms(self.tick_us),
                ordinal(jmin),
                ordinal(jmax),
                ordinal(jmin),
                ordinal(jmax),
                arr / jmax as f64,
                arr / jmin as f64,
            );
            let (q, mean) = mixed_cycle(arr, rate, self.tick_us);
            let _ = write!(
                s,
                " Held still against the tick, the phase settles into a fixed pattern (the on-time \
                 range). Jittered by a tick or more, which nginx's coarse clock on a busy machine \
                 does on its own, each boundary falls the early way with probability {:.2}: \
                 {mean:.2} arrivals per accepted request, {:.2} r/s, a success ratio of {:.2}%.",
                q,
                arr / mean,
                100.0 / mean
            );
            if at_limit {
                s.push_str(
                    " At exactly the limit's rate the still phase passes 2 in 3 (the write-up's \
                     66.11%) and full jitter 3 in 5; a generator that reports 100% at the limit is \
                     hitting a location answered by `return`, which runs in the rewrite phase, \
                     before limit_req, and is never limited.",
                );
            } else {
                s.push_str(" The write-up's run at 9 r/s saw 2.42 r/s.");
            }
            return s;
        }
        if burst == 0 {
            let p = limit_req::poisson_burst0_ratio(rate, arr);
            return format!(
                "Poisson arrivals, burst 0: after each accepted request the limiter refuses \
                 everything for {gap_ms} ms (on average {:.0} ms on the {} ms clock: \
                 (ceil(gap/tick) - 1/2) ticks), then the next arrival comes an exponential wait \
                 later (mean {:.0} ms). Accepted per second = 1/(gap + 1/rate) = {:.2} r/s, a \
                 success ratio of {:.2}%, whatever the evenly paced case gets at the same mean \
                 rate: the limiter judges gaps, not averages.",
                (k - 0.5) * tick_ms,
                fmt_ms(self.tick_us),
                1000.0 / arr,
                p * arr,
                p * 100.0
            );
        }
        let excess = (arr - rate).max(0.0);
        let whole = excess * self.attack_s;
        if whole <= burst as f64 {
            format!(
                "The queue grows at {:.0} - {} = {:.0} r/s for {} and holds {:.0} requests at the \
                 end, under the burst of {burst}: nothing overflows and every request passes, but \
                 nginx releases queued requests at {} r/s, so the last one waits {:.0} s and the \
                 run lasts about {:.0} s; throughput is the limit's rate the whole time.",
                arr,
                fmt_rate(rate),
                excess,
                secs(self.attack_s),
                whole,
                fmt_rate(rate),
                whole / rate,
                self.attack_s + whole / rate
            )
        } else {
            format!(
                "The queue grows at {:.0} - {} = {:.0} r/s and is full ({burst}) after {:.1} s; \
                 from then on an arrival finds room only when one has left, at {} r/s, and the \
                 rest are refused. Accepted = rate x attack + burst = {:.0} x {} + {burst} = {:.0}; \
                 the queue drains {:.1} s after the attack, so successes = rate x (attack + \
                 drain) and throughput is the limit's rate throughout.",
                arr,
                fmt_rate(rate),
                excess,
                burst as f64 / excess.max(1e-9),
                fmt_rate(rate),
                rate,
                secs(self.attack_s),
                rate * self.attack_s + burst as f64,
                burst as f64 / rate
            )
        }
    }

    fn series(&self) -> Vec<Series> {
        let end_us = self.m.completed.last().copied().unwrap_or(self.start_us);
        let span = end_us.saturating_sub(self.start_us).max(1);
        let step = (span / SERIES_POINTS).max(1000);
        let mut times: Vec<u64> = (0..=span / step)
            .map(|i| self.start_us + i * step)
            .collect();
        times.push(end_us);
        vec![
            Series {
                name: "queue depth measured (sent, not yet answered)".into(),
                unit: "requests".into(),
                points: times
                    .iter()
                    .map(|&t| (t as f64 / 1e6, self.m.in_flight_at(t) as f64))
                    .collect(),
            },
            Series {
                name: "queue depth predicted (held by limit_req)".into(),
                unit: "requests".into(),
                points: times
                    .iter()
                    .map(|&t| (t as f64 / 1e6, self.p.queue_at(t) as f64))
                    .collect(),
            },
        ]
    }

    fn findings(&self) -> Vec<String> {
        let n = self.m.n();
        let range = |a: u64, b: u64| {
            if a == b {
                a.to_string()
            } else {
                format!("{a} to {b}")
            }
        };
        let mut f = vec![format!(
            "{} of {n} requests passed ({:.2}%); the limit_req model gives {} for these arrival \
             times on time and {} with up to {} ms of arrival jitter.",
            self.m.ok(),
            pct(self.m.ok(), n),
            range(self.p.lo, self.p.hi),
            range(self.p.env_lo, self.p.env_hi),
            fmt_ms(self.p.jitter_us)
        )];
        if self.p.delayed() > 0 {
            f.push(format!(
                "The queue drained {} after the {} attack; 2xx answers came at {} r/s from first \
                 to last (limit {} r/s).",
                secs((self.total_s - self.attack_s).max(0.0)),
                secs(self.attack_s),
                self.queued_throughput()
                    .map(|t| format!("{t:.3}"))
                    .unwrap_or_else(|| "-".into()),
                fmt_rate(self.limit.rate)
            ));
        }
        f
    }

    /// The clock gap burst 0 needs between accepted requests, in µs: `ceil(gap/tick)` ticks.
    fn clock_gap_us(&self) -> f64 {
        let tick = self.tick_us.max(1) as f64;
        (limit_req::min_gap_ms(self.limit.rate) as f64 * 1000.0 / tick).ceil() * tick
    }

    fn checks(&self, case: &str, logs: &model::LogSummary) -> Vec<CheckResult> {
        let n = self.m.n();
        let ok = self.m.ok();
        let mut out = Vec::new();
        let mut push = |name: String, expected: String, actual: String, pass: bool| {
            out.push(CheckResult {
                name,
                case: Some(case.to_string()),
                expected,
                actual,
                pass,
            })
        };
        push(
            format!(
                "every request answered 2xx or {} (no timeout, no failure)",
                self.rl.status
            ),
            "0 others".into(),
            format!("{} others", self.m.other),
            self.m.other == 0 && n > 0,
        );
        let (slack, late) = self.slack();
        let (lo, hi) = (self.p.env_lo.saturating_sub(slack), self.p.env_hi + slack);
        push(
            "accepted count within the limit_req model's range for these arrivals".into(),
            format!(
                "{}..{} (tick phases, arrival jitter up to {} ms) ± {slack} (1, {late} sends \
                 later than that, {} for a {} ms nginx stall)",
                self.p.env_lo,
                self.p.env_hi,
                fmt_ms(self.p.jitter_us),
                self.stall_slack(),
                (NGINX_STALL_S * 1000.0).round()
            ),
            ok.to_string(),
            (lo..=hi).contains(&ok),
        );
        let passed = log_count(logs, "PASSED") + log_count(logs, "DELAYED");
        let rejected = log_count(logs, "REJECTED");
        push(
            "nginx's $limit_req_status agrees with the client's counts".into(),
            format!("PASSED+DELAYED {ok}, REJECTED {}", self.m.limited),
            format!("PASSED+DELAYED {passed}, REJECTED {rejected}"),
            passed == ok && rejected == self.m.limited,
        );
        if self.p.lo == n && self.limit.burst > 0 {
            push(
                "every request passes (the queue never overflows)".into(),
                format!("{n} of {n} (100%)"),
                format!("{ok} of {n} ({:.2}%)", pct(ok, n)),
                ok == n,
            );
        } else if self.p.lo == n && !self.poisson() {
            // Below the limit a request is refused only when it reaches nginx sooner than the
            // clock gap after the previous one: its predecessor must have left that much late.
            // A stall of nginx's worker reads the arrivals of its length together, and all but
            // the first of them are refused.
            let g = 1e6 / self.attack_rate();
            let margin = g - self.clock_gap_us();
            let late = self.late_beyond(margin);
            let stall = (NGINX_STALL_S * 1e6 / g).floor() as u64;
            let allowed = late + stall;
            push(
                format!(
                    "every request passes, but for sends over {} ms late or an nginx stall",
                    fmt_ms(margin.max(0.0) as u64)
                ),
                format!(
                    "at most {allowed} refused ({late} late sends, {stall} for a {} ms stall)",
                    (NGINX_STALL_S * 1000.0).round()
                ),
                format!("{} refused ({ok} of {n} passed)", n - ok),
                n - ok <= allowed,
            );
        }
        if self.p.delayed() > 0 {
            // While the queue is non-empty nginx releases one request per 1/rate: the answers
            // from the first to the last 2xx come at the limit's rate.
            if let (Some(&first), Some(&last)) = (self.m.ok_times.first(), self.m.ok_times.last()) {
                let span = (last - self.start_us) as f64 / 1e6;
                let want = 1.0 + self.limit.rate * span;
                let tol = 2.0 + 0.01 * want;
                push(
                    "successes = 1 + rate x (attack + drain): the queue drains at the limit's rate"
                        .into(),
                    format!(
                        "{want:.1} ± {tol:.1} (1 + {} r/s x {})",
                        fmt_rate(self.limit.rate),
                        secs(span)
                    ),
                    format!(
                        "{ok} ({:.3} r/s from first to last 2xx)",
                        (ok.saturating_sub(1)) as f64 / ((last - first).max(1) as f64 / 1e6)
                    ),
                    (ok as f64 - want).abs() <= tol,
                );
            }
            if self.p.hi < n {
                let want = self.limit.rate * self.attack_s + self.limit.burst as f64;
                let tol = 3.0 + 0.01 * want;
                push(
                    "the queue overflows: accepted = rate x attack + burst".into(),
                    format!(
                        "{want:.0} ± {tol:.0} ({} x {} + {})",
                        fmt_rate(self.limit.rate),
                        secs(self.attack_s),
                        self.limit.burst
                    ),
                    ok.to_string(),
                    (ok as f64 - want).abs() <= tol && ok < n,
                );
            }
        }
        if self.limit.burst == 0 && !self.poisson() && self.attack_rate() > self.limit.rate {
            let (jmin, jmax) = even_cycle(self.attack_rate(), self.limit.rate, self.tick_us);
            let g = 1e6 / self.attack_rate();
            let k = self.clock_gap_us();
            let tick = self.tick_us as f64;
            // A cycle leaves these bounds only when a send leaves late by more than the room
            // the clock leaves: the jmax-th arrival reads short, or the (jmin-1)-th reads long.
            let margin = (jmax as f64 * g - k).min(k - tick - (jmin - 1) as f64 * g);
            let extra = self.late_beyond(margin) + self.stall_slack();
            let (tmin, tmax) = (
                self.attack_rate() / jmax as f64,
                self.attack_rate() / jmin as f64,
            );
            // One request either side: the first arrival always passes, the last cycle is cut.
            let slack = (1 + extra) as f64 / self.attack_s;
            let t = ok as f64 / self.attack_s;
            push(
                format!(
                    "burst 0, even arrivals: every {} to every {} arrival passes",
                    ordinal(jmin),
                    ordinal(jmax)
                ),
                format!(
                    "{tmin:.2}..{tmax:.2} r/s ± {slack:.2} (1 + {extra}: sends over {} ms late, \
                     an nginx stall)",
                    fmt_ms(margin.max(0.0) as u64)
                ),
                format!("{t:.3} r/s ({ok} in {})", secs(self.attack_s)),
                t >= tmin - slack && t <= tmax + slack,
            );
        }
        if self.limit.burst == 0 && self.poisson() {
            let p = limit_req::poisson_burst0_ratio(self.limit.rate, self.attack_rate());
            let s = sigma(p, n);
            let r = ok as f64 / n.max(1) as f64;
            push(
                "Poisson success ratio = 1/(1 + arrival rate x ceil(1000/limit) ms)".into(),
                format!(
                    "{:.2}% ± {:.2}% ({SIGMAS} binomial sigmas, n = {n})",
                    p * 100.0,
                    SIGMAS * s * 100.0
                ),
                format!("{:.2}%", r * 100.0),
                (r - p).abs() <= SIGMAS * s,
            );
        }
        out
    }
}

/// Even arrivals at `arrival_rate` against burst 0 at `limit_rate` on a `tick_us` clock: after an
/// accepted arrival, the next accepted one is the `jmin`th or `jmax`th after it, depending on
/// where the tick boundaries fall. The clock must advance `k = ceil(gap/tick)` ticks, which a
/// real gap does when it exceeds `(k-1)` ticks (with luck) and always when it reaches `k` ticks.
fn even_cycle(arrival_rate: f64, limit_rate: f64, tick_us: u64) -> (u64, u64) {
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
fn mixed_cycle(arrival_rate: f64, limit_rate: f64, tick_us: u64) -> (f64, f64) {
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

/// How many arrivals separate consecutive accepted requests, as `length: count` pairs.
fn cycles(accepted: &[bool]) -> String {
    let mut counts = std::collections::BTreeMap::new();
    let mut last = None;
    for (i, _) in accepted.iter().enumerate().filter(|(_, &a)| a) {
        if let Some(l) = last {
            *counts.entry(i - l).or_insert(0u64) += 1;
        }
        last = Some(i);
    }
    if counts.is_empty() {
        return "-".into();
    }
    counts
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The binomial standard deviation of a success ratio `p` over `n` trials. Acceptances under
/// burst 0 are more regular than independent coin flips (each accepted request blocks the next
/// `gap` ms), so the real spread is smaller and this bound is conservative.
fn sigma(p: f64, n: u64) -> f64 {
    (p * (1.0 - p) / n.max(1) as f64).sqrt()
}

fn log_count(logs: &model::LogSummary, key: &str) -> u64 {
    logs.limit_req_status.get(key).copied().unwrap_or(0)
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn secs(s: f64) -> String {
    format!("{s:.2}s")
}

fn fmt_rate(r: f64) -> String {
    if (r - r.round()).abs() < 1e-9 {
        format!("{}", r.round() as i64)
    } else {
        format!("{r:.2}")
    }
}

fn fmt_ms(us: u64) -> String {
    if us % 1000 == 0 {
        (us / 1000).to_string()
    } else {
        format!("{:.3}", us as f64 / 1000.0)
    }
}

fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(intended_ms: u64, latency_ms: u64, status: u16) -> RequestRecord {
        RequestRecord {
            t_us: (intended_ms + latency_ms) * 1000,
            latency_us: (latency_ms * 1000) as u32,
            status,
            error: None,
        }
    }

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
    fn measured_orders_by_intended_time_and_counts_in_flight() {
        // Three requests intended at 0, 100, 200 ms; the second waits 500 ms in a queue.
        let recs = vec![rec(0, 1, 200), rec(200, 1, 503), rec(100, 500, 200)];
        let mut sorted = recs.clone();
        sorted.sort_by_key(|r| r.t_us);
        let m = Measured::new(&sorted, 503);
        assert_eq!(m.intended, vec![0, 100_000, 200_000]);
        assert_eq!(m.accepted, vec![true, true, false]);
        assert_eq!((m.ok(), m.limited, m.other), (2, 1, 0));
        assert_eq!(m.in_flight_at(150_000), 1);
        assert_eq!(m.in_flight_at(200_000), 2);
        assert_eq!(m.in_flight_at(700_000), 0);
        assert_eq!(m.max_in_flight(), 2);
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

    #[test]
    fn ordinals_read_as_english() {
        let v: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21].map(ordinal).to_vec();
        assert_eq!(
            v,
            ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st"]
        );
    }
}
