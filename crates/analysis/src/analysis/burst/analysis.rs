//! One case's measurements beside the model: the vegeta block, the predicted-vs-measured
//! table with its explanation, the queue-depth series and the findings.

use super::logged::{Logged, Unlogged};
use super::measured::Measured;
use super::prediction::{even_cycle, mixed_cycle, sigma, Lateness, Prediction};
use super::text::{cycles, fmt_ms, fmt_rate, log_count, ordinal, pct, secs};
use super::{
    model_limit, sigmas, DRIFT, JITTER_RUNS, LOG_CLOCK_US, MODEL, PHASES, REPORT, SERIES_POINTS,
};
use crate::theory::limit_req::{self, Limit, Outcome};
use model::{Cell, LoadSummary, LogSummary, RequestRecord, Series, Table};
use scenario::{ArrivalsSpec, LoadSpec};
use setup::proxy::RateLimit;

/// One case's measurements and prediction, with what the report and the checks need.
pub(super) struct Analysis<'a> {
    /// The attack load as the scenario wrote it.
    pub(super) spec: &'a LoadSpec,
    /// What the load recorded (schedule, latency, errors).
    pub(super) summary: &'a LoadSummary,
    /// The route's rate limit as configured.
    pub(super) rl: &'a RateLimit,
    /// The same limit as the model takes it.
    pub(super) limit: Limit,
    /// nginx's clock resolution on this machine (µs).
    pub(super) tick_us: u64,
    /// What the client saw.
    pub(super) m: Measured,
    /// What the model predicts for the intended send times (informative: beside the verdict's
    /// prediction it shows how far the generator and the machine drifted).
    pub(super) sent: Prediction,
    /// nginx's logged arrivals and the model's prediction on them, which the checks judge
    /// by; or why there are none (`no data: ...`).
    pub(super) nginx: Result<(Logged, Prediction), Unlogged>,
    /// Planned attack length (s).
    pub(super) attack_s: f64,
    /// First intended send (µs from the origin).
    pub(super) start_us: u64,
    /// From the first intended send to the last answer (s).
    pub(super) total_s: f64,
}

impl<'a> Analysis<'a> {
    /// Measures the records, replays their arrivals through the model, and keeps both.
    pub(super) fn new(
        spec: &'a LoadSpec,
        summary: &'a LoadSummary,
        rl: &'a RateLimit,
        recs: &[RequestRecord],
        logs: model::Measured<&LogSummary>,
        tick_us: u64,
    ) -> Analysis<'a> {
        let limit = model_limit(rl);
        let m = Measured::new(recs, rl.status);
        // Each arrival reaches the limiter some unknown time after its intended send: nginx
        // reads its coarse clock up to a tick late, and some sends left late.
        let late = Lateness::of(summary.schedule.as_ref());
        let sent = Prediction::new(limit, &m.intended, tick_us, tick_us, late, &m.accepted);
        let start_us = m
            .intended
            .first()
            .copied()
            .unwrap_or((spec.start.0.as_secs_f64() * 1e6) as u64);
        // limit_req reads nginx's millisecond monotonic clock in the event-loop turn whose
        // wall-clock time the log gives, truncated to the millisecond. The two clocks' offset
        // has an unknown sub-millisecond part (the phase) and each arrival's own sub-millisecond
        // part is lost (the jitter), so both stay in the envelope.
        // Arrivals from part of the log would replay a different bucket: complete logs only.
        let nginx = logs
            .complete()
            .map_err(|a| Unlogged(format!("not measurable: {a}")))
            .and_then(|logs| Logged::new(logs, &m.intended, start_us))
            .map(|l| {
                let p = Prediction::new(
                    limit,
                    &l.arrivals_us,
                    LOG_CLOCK_US,
                    LOG_CLOCK_US,
                    Lateness::default(),
                    &l.accepted,
                );
                (l, p)
            });
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
            sent,
            nginx,
            attack_s,
            start_us,
        }
    }

    /// The prediction the verdict uses: on nginx's logged arrivals, or on the send times when
    /// the log gave none (the checks then fail with "no data").
    pub(super) fn p(&self) -> &Prediction {
        match &self.nginx {
            Ok((_, p)) => p,
            Err(_) => &self.sent,
        }
    }

    /// nginx's logged arrivals, when the access log had them.
    pub(super) fn logged(&self) -> Option<&Logged> {
        self.nginx.as_ref().ok().map(|(l, _)| l)
    }

    /// Accepted requests the drift from the intended send times to nginx's arrivals moved in
    /// the model: (low end, high end) of the nginx envelope less the send-time one's.
    pub(super) fn drift(&self) -> (i64, i64) {
        let (s, n) = (&self.sent, self.p());
        let lo = n.env_lo as i64 - s.env_lo as i64;
        let hi = n.env_hi as i64 - s.env_hi as i64;
        (lo.min(hi), lo.max(hi))
    }

    /// The attack's planned rate (r/s).
    pub(super) fn attack_rate(&self) -> f64 {
        self.spec.rate.map(|r| r.0).unwrap_or(0.0)
    }

    /// Whether arrivals are Poisson (else evenly paced).
    pub(super) fn poisson(&self) -> bool {
        self.spec.arrivals == ArrivalsSpec::Poisson
    }

    /// Sends that left later than the load's lateness threshold (1 ms).
    pub(super) fn late(&self) -> u64 {
        self.summary.schedule.as_ref().map_or(0, |s| s.late)
    }

    /// Predicted total length (s): from the first arrival until the last accepted request
    /// leaves the queue (or the last arrival, when nothing waits).
    pub(super) fn predicted_total_s(&self) -> (f64, f64) {
        let last = self.last_arrival_s();
        let (a, b) = self.p().drained_ms;
        ((a as f64 / 1000.0).max(last), (b as f64 / 1000.0).max(last))
    }

    /// The last arrival the verdict's model saw (nginx's, else the last intended send),
    /// seconds after the first.
    pub(super) fn last_arrival_s(&self) -> f64 {
        let arrivals = self.logged().map_or(&self.m.intended, |l| &l.arrivals_us);
        arrivals
            .last()
            .map_or(0.0, |&t| t.saturating_sub(self.start_us) as f64 / 1e6)
    }

    /// Throughput from the first to the last accepted answer (r/s), the rate the queue drains at.
    pub(super) fn queued_throughput(&self) -> Option<f64> {
        let (first, last) = (self.m.ok_times.first()?, self.m.ok_times.last()?);
        (last > first).then(|| (self.m.ok() - 1) as f64 / ((last - first) as f64 / 1e6))
    }

    /// vegeta's latency cell: mean, p50, p95, p99, max.
    pub(super) fn latency_cells(&self) -> Cell {
        let l = &self.summary.latency;
        let p = |q: f64| {
            l.percentile(q)
                .map_or_else(Cell::dash, |v| Cell::Us(v as f64))
        };
        Cell::list(
            [
                Cell::Us(l.mean_us),
                p(50.0),
                p(95.0),
                p(99.0),
                Cell::Us(l.max_us as f64),
            ],
            ", ",
        )
    }

    /// The vegeta write-up's block for this case.
    pub(super) fn report_table(&self, case: &str) -> Table {
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
        let row = |a: &str, b: Cell| vec![Cell::text(a), b];
        let secs = |s: f64| Cell::num_unit(s, 2, "s");
        Table {
            title: format!("{case}: {REPORT}"),
            columns: vec!["Metric".into(), "Value".into()],
            rows: vec![
                row(
                    REQUESTS_ROW,
                    Cell::list(
                        [
                            Cell::Int(n as i64),
                            Cell::num(n as f64 / self.attack_s.max(1e-9), 2),
                            Cell::num(self.m.ok() as f64 / self.total_s.max(1e-9), 2),
                        ],
                        ", ",
                    ),
                ),
                row(
                    DURATION_ROW,
                    Cell::list([secs(self.total_s), secs(self.attack_s), secs(wait)], ", "),
                ),
                row(LATENCY_ROW, self.latency_cells()),
                row(SUCCESS_ROW, Cell::num_unit(pct(self.m.ok(), n), 2, "%")),
                row(CODES_ROW, Cell::text(codes.join("  "))),
            ],
            notes: vec![text("report_note").into()],
        }
    }

    /// Predicted vs measured vs nginx's log, with the notes that explain them.
    pub(super) fn model_table(&self, case: &str, logs: model::Measured<&LogSummary>) -> Table {
        let mut rows = self.model_rows(logs);
        rows.extend(self.model_cases());
        Table {
            title: format!("{case}: {MODEL}"),
            columns: ["Quantity", "Predicted", "Measured", "nginx log"]
                .map(String::from)
                .to_vec(),
            rows,
            notes: vec![self.model_note(), self.explain()],
        }
    }

    /// The rows every case has: counts, ratios, throughput, times and the deepest queue.
    fn model_rows(&self, logs: model::Measured<&LogSummary>) -> Vec<Vec<Cell>> {
        let n = self.m.n();
        let (plo, phi) = (self.p().env_lo, self.p().env_hi);
        // nginx's column, from its access log: "not sampled" when the logs were not read.
        let logged = |f: &dyn Fn(&LogSummary) -> Cell| Cell::measured(&logs, |l| f(l));
        let (tlo, thi) = self.predicted_total_s();
        vec![
            row4(
                "Requests",
                Cell::Int(n as i64),
                Cell::Int(n as i64),
                logged(&|l| Cell::Int(l.access_lines as i64)),
            ),
            row4(
                ACCEPTED_ROW,
                range(plo.to_string(), phi.to_string()),
                Cell::Int(self.m.ok() as i64),
                logged(&|l| {
                    Cell::text(format!(
                        "{} (PASSED {}, DELAYED {})",
                        log_count(l, "PASSED") + log_count(l, "DELAYED"),
                        log_count(l, "PASSED"),
                        log_count(l, "DELAYED")
                    ))
                }),
            ),
            row4(
                "Accepted, arrivals exactly on time",
                range(self.p().lo.to_string(), self.p().hi.to_string()),
                "-",
                "-",
            ),
            row4(
                &format!("Rejected ({})", self.rl.status),
                range((n - phi).to_string(), (n - plo).to_string()),
                self.m.limited.to_string(),
                logged(&|l| Cell::Int(log_count(l, "REJECTED") as i64)),
            ),
            row4(
                "Success ratio",
                range(
                    format!("{:.2}%", pct(plo, n)),
                    format!("{:.2}%", pct(phi, n)),
                ),
                format!("{:.2}%", pct(self.m.ok(), n)),
                "-",
            ),
            row4(
                THROUGHPUT_ROW,
                range(
                    format!("{:.2}", plo as f64 / thi.max(1e-9)),
                    format!("{:.2}", phi as f64 / tlo.max(1e-9)),
                ),
                format!("{:.2}", self.m.ok() as f64 / self.total_s.max(1e-9)),
                "-",
            ),
            row4(
                "Total (first send to last answer)",
                range(secs(tlo), secs(thi)),
                secs(self.total_s),
                "-",
            ),
            row4(
                "Drain after the attack",
                range(
                    secs((tlo - self.attack_s).max(0.0)),
                    secs((thi - self.attack_s).max(0.0)),
                ),
                secs((self.total_s - self.attack_s).max(0.0)),
                "-",
            ),
            row4(
                "Deepest queue",
                self.p().max_queue().to_string(),
                format!("{} in flight", self.m.max_in_flight()),
                "-",
            ),
        ]
    }

    /// The rows that hold for this case's limit and arrivals only (a queue that delayed, a
    /// Poisson or even burst 0), and the phase mismatch.
    fn model_cases(&self) -> Vec<Vec<Cell>> {
        let n = self.m.n();
        let mut rows = Vec::new();
        if self.p().delayed() > 0 {
            rows.push(row4(
                "Throughput first to last 2xx",
                format!("{:.2}", self.limit.rate),
                self.queued_throughput()
                    .map(|t| format!("{t:.3}"))
                    .unwrap_or_else(|| "-".into()),
                "-",
            ));
        }
        if self.poisson() && self.limit.burst == 0 {
            let p = limit_req::poisson_burst0_ratio(self.limit.rate, self.attack_rate());
            rows.push(row4(
                "Poisson closed form 1/(1 + rate x gap)",
                format!("{:.2}% ± {:.2}%", p * 100.0, sigmas() * sigma(p, n) * 100.0),
                format!("{:.2}%", pct(self.m.ok(), n)),
                "-",
            ));
        }
        if self.limit.burst == 0 && !self.poisson() && self.attack_rate() >= self.limit.rate {
            let (_, mean) = mixed_cycle(self.attack_rate(), self.limit.rate, self.tick_us);
            rows.push(row4(
                "Accepted, phase fully jittered (closed form)",
                format!("{:.1}", n as f64 / mean),
                self.m.ok().to_string(),
                "-",
            ));
        }
        if self.limit.burst == 0 {
            let model: Vec<bool> = self
                .p()
                .sim
                .outcomes
                .iter()
                .map(|o| !matches!(o, Outcome::Rejected))
                .collect();
            rows.push(row4(
                "Arrivals per accepted request (cycles)",
                format!("{} (on time, phase 0)", cycles(&model)),
                cycles(self.logged().map_or(&self.m.accepted, |l| &l.accepted)),
                "-",
            ));
        }
        rows.push(row4(
            "Decisions unlike the best-matching phase",
            "0",
            format!("{} of {n}", self.p().best_mismatch),
            "-",
        ));
        rows
    }

    /// The note that says what the prediction is: the limit, the arrivals it ran on, the
    /// clock, the phases and the jitter.
    fn model_note(&self) -> String {
        let n = self.m.n();
        let what = match &self.nginx {
            Ok(_) => fill("what_logged", &[("n", &n)]),
            Err(e) => fill("what_sent", &[("n", &n), ("error", e)]),
        };
        let jitter = match &self.nginx {
            Ok(_) => text("jitter_logged").to_string(),
            Err(_) => fill("jitter_sent", &[("jitter", &fmt_ms(self.p().jitter_us))]),
        };
        let clock = match &self.nginx {
            Ok(_) => text("clock_logged").to_string(),
            Err(_) => fill("clock_sent", &[("tick", &fmt_ms(self.tick_us))]),
        };
        fill(
            "predicted",
            &[
                ("rate", &fmt_rate(self.limit.rate)),
                ("burst", &self.limit.burst),
                (
                    "delay",
                    &if self.limit.delay == 0 {
                        text("queued_delayed").to_string()
                    } else {
                        format!("delay {}", self.limit.delay)
                    },
                ),
                ("what", &what),
                ("clock", &clock),
                ("phases", &PHASES),
                (
                    "on_time",
                    &range(self.p().lo.to_string(), self.p().hi.to_string()),
                ),
                ("runs", &JITTER_RUNS),
                ("jitter", &jitter),
                (
                    "jittered",
                    &range(self.p().env_lo.to_string(), self.p().env_hi.to_string()),
                ),
            ],
        )
    }

    /// The model on the intended send times beside the model on nginx's arrivals: how far the
    /// generator and the machine drifted, and what that drift did to the prediction.
    pub(super) fn drift_table(&self, case: &str) -> Table {
        let n = self.m.n();
        let s = &self.sent;
        let range = |a: u64, b: u64| {
            if a == b {
                a.to_string()
            } else {
                format!("{a} .. {b}")
            }
        };
        let dash = || "-".to_string();
        let mut rows = vec![row4(
            ACCEPTED_ROW,
            range(s.env_lo, s.env_hi),
            self.nginx
                .as_ref()
                .map_or_else(|e| e.to_string(), |(_, p)| range(p.env_lo, p.env_hi)),
            self.m.ok().to_string(),
        )];
        if let Ok((l, p)) = &self.nginx {
            let (dlo, dhi) = self.drift();
            let tick_ms = self.tick_us.div_ceil(1000);
            rows.extend([
                row4(
                    "Accepted, arrivals exactly on time",
                    range(s.lo, s.hi),
                    range(p.lo, p.hi),
                    dash(),
                ),
                row4(
                    "Decisions unlike the best-matching phase",
                    format!("{} of {n}", s.best_mismatch),
                    format!("{} of {}", p.best_mismatch, l.n()),
                    dash(),
                ),
                row4(
                    "Prediction moved by the drift (nginx less send times)",
                    dash(),
                    if dlo == dhi {
                        format!("{dlo:+}")
                    } else {
                        format!("{dlo:+} .. {dhi:+}")
                    },
                    dash(),
                ),
                row4(
                    "Arrival delay after the intended send, largest (ms)",
                    dash(),
                    l.max_delay_ms().to_string(),
                    dash(),
                ),
                row4(
                    &format!("Arrivals delayed over a tick ({tick_ms} ms)"),
                    format!("{} sends over 1 ms late", self.late()),
                    l.delayed_beyond(tick_ms).to_string(),
                    dash(),
                ),
            ]);
        }
        Table {
            title: format!("{case}: {DRIFT}"),
            columns: [
                "Quantity",
                "Model at send times",
                "Model at nginx's arrivals",
                "Measured",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            notes: vec![text("drift_note").into()],
        }
    }

    /// Why this case came out as it did, from the algorithm.
    pub(super) fn explain(&self) -> String {
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
                return fill(
                    "explain_all_pass",
                    &[
                        ("g", &Cell::num(g, 1)),
                        ("gap_ms", &gap_ms),
                        ("tick", &fmt_ms(self.tick_us)),
                    ],
                );
            }
            let (jmin, jmax) = even_cycle(arr, rate, self.tick_us);
            let at_limit = (arr - rate).abs() < 1e-9;
            let mut s = fill(
                "explain_even",
                &[
                    ("gap_ms", &gap_ms),
                    ("tick", &fmt_ms(self.tick_us)),
                    ("g", &Cell::num(g, 1)),
                    ("clock_gap", &Cell::num(clock_gap, 0)),
                    ("jmin", &ordinal(jmin)),
                    ("jmax", &ordinal(jmax)),
                    ("lo", &Cell::num(arr / jmax as f64, 2)),
                    ("hi", &Cell::num(arr / jmin as f64, 2)),
                ],
            );
            let (q, mean) = mixed_cycle(arr, rate, self.tick_us);
            s.push_str(&fill(
                "explain_jitter",
                &[
                    ("q", &Cell::num(q, 2)),
                    ("mean", &Cell::num(mean, 2)),
                    ("rate", &Cell::num(arr / mean, 2)),
                    ("ratio", &Cell::num(100.0 / mean, 2)),
                ],
            ));
            if at_limit {
                s.push_str(text("explain_at_limit"));
            } else {
                s.push_str(text("explain_write_up"));
            }
            return s;
        }
        if burst == 0 {
            let p = limit_req::poisson_burst0_ratio(rate, arr);
            return fill(
                "explain_poisson",
                &[
                    ("gap_ms", &gap_ms),
                    ("avg", &Cell::num((k - 0.5) * tick_ms, 0)),
                    ("tick", &fmt_ms(self.tick_us)),
                    ("wait", &Cell::num(1000.0 / arr, 0)),
                    ("accepted", &Cell::num(p * arr, 2)),
                    ("ratio", &Cell::num(p * 100.0, 2)),
                ],
            );
        }
        let excess = (arr - rate).max(0.0);
        let whole = excess * self.attack_s;
        if whole <= burst as f64 {
            fill(
                "explain_queue_holds",
                &[
                    ("arr", &Cell::num(arr, 0)),
                    ("rate", &fmt_rate(rate)),
                    ("excess", &Cell::num(excess, 0)),
                    ("attack", &secs(self.attack_s)),
                    ("whole", &Cell::num(whole, 0)),
                    ("burst", &burst),
                    ("wait", &Cell::num(whole / rate, 0)),
                    ("total", &Cell::num(self.attack_s + whole / rate, 0)),
                ],
            )
        } else {
            fill(
                "explain_queue_overflows",
                &[
                    ("arr", &Cell::num(arr, 0)),
                    ("rate", &fmt_rate(rate)),
                    ("excess", &Cell::num(excess, 0)),
                    ("burst", &burst),
                    ("full", &Cell::num(burst as f64 / excess.max(1e-9), 1)),
                    ("rate_num", &Cell::num(rate, 0)),
                    ("attack", &secs(self.attack_s)),
                    (
                        "accepted",
                        &Cell::num(rate * self.attack_s + burst as f64, 0),
                    ),
                    ("drain", &Cell::num(burst as f64 / rate, 1)),
                ],
            )
        }
    }

    /// Queue depth over time: measured (sent, not answered) and predicted (held by nginx).
    pub(super) fn series(&self) -> Vec<Series> {
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
                chart: Some("queue depth".into()),
                unit: "requests".into(),
                points: times
                    .iter()
                    .map(|&t| (t as f64 / 1e6, self.m.in_flight_at(t) as f64))
                    .collect(),
                ..Default::default()
            },
            Series {
                name: "queue depth predicted (held by limit_req)".into(),
                chart: Some("queue depth".into()),
                unit: "requests".into(),
                points: times
                    .iter()
                    .map(|&t| (t as f64 / 1e6, self.p().queue_at(t) as f64))
                    .collect(),
                ..Default::default()
            },
        ]
    }

    /// One-sentence findings for the case.
    pub(super) fn findings(&self) -> Vec<String> {
        let n = self.m.n();
        let range = |a: u64, b: u64| {
            if a == b {
                a.to_string()
            } else {
                format!("{a} to {b}")
            }
        };
        let pct_ok = Cell::num(pct(self.m.ok(), n), 2);
        let mut f = vec![match &self.nginx {
            Ok((l, p)) => fill(
                "finding_case",
                &[
                    ("ok", &self.m.ok()),
                    ("n", &n),
                    ("pct", &pct_ok),
                    ("model", &range(p.env_lo, p.env_hi)),
                    ("sent", &range(self.sent.env_lo, self.sent.env_hi)),
                    ("delay", &l.max_delay_ms()),
                ],
            ),
            Err(e) => fill(
                "finding_case_no_log",
                &[
                    ("ok", &self.m.ok()),
                    ("n", &n),
                    ("pct", &pct_ok),
                    ("error", e),
                ],
            ),
        }];
        if self.p().delayed() > 0 {
            f.push(fill(
                "finding_drained",
                &[
                    ("wait", &secs((self.total_s - self.attack_s).max(0.0))),
                    ("attack", &secs(self.attack_s)),
                    (
                        "throughput",
                        &self
                            .queued_throughput()
                            .map(|t| format!("{t:.3}"))
                            .unwrap_or_else(|| "-".into()),
                    ),
                    ("limit", &fmt_rate(self.limit.rate)),
                ],
            ));
        }
        f
    }
}

/// A prose template of the analysis (`crates/analysis/data/burst.toml`).
fn text(key: &str) -> &'static str {
    super::text(key)
}

/// A prose template filled from the run.
fn fill(key: &str, args: &[(&str, &dyn std::fmt::Display)]) -> String {
    super::fill(key, args)
}

/// Row labels the cross-case summary reads back (typed cells, never parsed).
pub(super) const REQUESTS_ROW: &str = "Requests [total, rate, throughput]";
/// vegeta's duration row.
pub(super) const DURATION_ROW: &str = "Duration [total, attack, wait]";
/// vegeta's latency row.
pub(super) const LATENCY_ROW: &str = "Latencies [mean, 50, 95, 99, max]";
/// vegeta's success row.
pub(super) const SUCCESS_ROW: &str = "Success [ratio]";
/// vegeta's status-code row.
pub(super) const CODES_ROW: &str = "Status Codes [code:count]";
/// The accepted row of the model and drift tables.
pub(super) const ACCEPTED_ROW: &str = "Accepted (2xx)";
/// The throughput row of the model table.
pub(super) const THROUGHPUT_ROW: &str = "Throughput (2xx per second of total)";

/// A row of a label and three cells.
fn row4(q: &str, a: impl Into<Cell>, b: impl Into<Cell>, c: impl Into<Cell>) -> Vec<Cell> {
    vec![Cell::text(q), a.into(), b.into(), c.into()]
}

/// A predicted range as `a .. b`, or `a` when both ends are one.
fn range(a: String, b: String) -> String {
    if a == b {
        a
    } else {
        format!("{a} .. {b}")
    }
}
