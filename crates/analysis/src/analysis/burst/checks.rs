//! The theory checks of one case, judged on the arrival times nginx logged: the model's range,
//! nginx's own counts, the queue's drain rate, overflow, the even burst-0 cycle and the Poisson
//! closed form (the last two moved by what the drift from the send times moved in the model).

use super::analysis::Analysis;
use super::logged::Logged;
use super::prediction::{even_cycle, sigma, Prediction};
use super::text::{fmt_ms, fmt_rate, log_count, ordinal, pct, secs};
use super::{sigmas, LOG_CLOCK_US};
use crate::theory::limit_req;
use model::CheckResult;

/// How many of [`Analysis::checks`]' checks come first and hold for any proxy (every request
/// answered 2xx or the limit's status); the rest judge nginx's limit_req model.
pub(super) const PROXY_NEUTRAL: usize = 1;

/// One check before its case is named: (name, expected, actual, pass).
type Row = (String, String, String, bool);

impl Analysis<'_> {
    /// The case's theory checks: [`PROXY_NEUTRAL`] for any proxy first, then nginx's model.
    pub(super) fn checks(
        &self,
        case: &str,
        logs: model::Measured<&model::LogSummary>,
    ) -> Vec<CheckResult> {
        let n = self.m.n();
        let mut rows = vec![(
            format!(
                "every request answered 2xx or {} (no timeout, no failure)",
                self.rl.status
            ),
            "0 others".into(),
            format!("{} others", self.m.other),
            self.m.other == 0 && n > 0,
        )];
        let agrees = self.agrees(logs);
        // The verdict's model runs on nginx's logged arrivals; without them, it cannot pass.
        match &self.nginx {
            Ok((logged, p)) => {
                rows.push(self.model_range(logged, p));
                rows.push(agrees);
                rows.extend(self.below_limit(logged, p));
                if p.delayed() > 0 {
                    rows.extend(self.queue_drains(logged, p));
                    rows.extend(self.queue_overflows(logged, p));
                }
                rows.extend(self.even_cycle());
                rows.extend(self.poisson_ratio());
            }
            Err(e) => {
                rows.push((
                    "accepted count within the limit_req model's range for nginx's logged \
                     arrivals"
                        .into(),
                    "the model on the arrival times nginx logged ($msec - $request_time)".into(),
                    e.to_string(),
                    false,
                ));
                rows.push(agrees);
            }
        }
        rows.into_iter()
            .map(|(name, expected, actual, pass)| CheckResult {
                name,
                case: Some(case.to_string()),
                expected,
                actual,
                pass,
            })
            .collect()
    }

    /// nginx's own count of what it passed and rejected, from its access log: not measurable
    /// when the logs were not read. When nginx's arrivals were read, each must be one of the
    /// client's requests.
    fn agrees(&self, logs: model::Measured<&model::LogSummary>) -> Row {
        let (n, ok) = (self.m.n(), self.m.ok());
        let all_logged = self.nginx.as_ref().map_or(true, |(l, _)| l.n() == n);
        let (actual, pass) = match logs.complete() {
            Ok(logs) => {
                let passed = log_count(logs, "PASSED") + log_count(logs, "DELAYED");
                let rejected = log_count(logs, "REJECTED");
                (
                    format!("PASSED+DELAYED {passed}, REJECTED {rejected}"),
                    passed == ok && rejected == self.m.limited && all_logged,
                )
            }
            Err(a) => (format!("not measurable: {a}"), false),
        };
        (
            "nginx's $limit_req_status agrees with the client's counts".to_string(),
            format!("PASSED+DELAYED {ok}, REJECTED {}", self.m.limited),
            actual,
            pass,
        )
    }

    /// The accepted count against the model run on nginx's logged arrivals. The phases and the
    /// log's millisecond are sampled, not enumerated: one either side.
    fn model_range(&self, logged: &Logged, p: &Prediction) -> Row {
        let ok = self.m.ok();
        let (lo, hi) = (p.env_lo.saturating_sub(1), p.env_hi + 1);
        (
            "accepted count within the limit_req model's range for nginx's logged arrivals".into(),
            format!(
                "{}..{} ± 1 (the model on the {} arrival times nginx logged, at every phase of \
                 limit_req's millisecond clock against them and with the log's millisecond of \
                 jitter)",
                p.env_lo,
                p.env_hi,
                logged.n(),
            ),
            ok.to_string(),
            (lo..=hi).contains(&ok),
        )
    }

    /// When the queue never overflows, every request passes; below the limit, only arrivals
    /// nginx read closer than the limit's gap may be refused.
    fn below_limit(&self, logged: &Logged, p: &Prediction) -> Option<Row> {
        let (n, ok) = (self.m.n(), self.m.ok());
        if p.lo == n && self.limit.burst > 0 {
            Some((
                "every request passes (the queue never overflows)".into(),
                format!("{n} of {n} (100%)"),
                format!("{ok} of {n} ({:.2}%)", pct(ok, n)),
                ok == n,
            ))
        } else if self.sent.lo == n && !self.poisson() {
            // Below the limit a request is refused only when nginx reads it sooner than the
            // limit's gap after the last accepted one, so sooner still after the one before:
            // under the gap plus the millisecond the two clocks' truncations can differ by.
            let close_us = limit_req::min_gap_ms(self.limit.rate) * 1000 + LOG_CLOCK_US;
            let allowed = logged.closer_than(close_us);
            Some((
                format!(
                    "every request passes, but for arrivals nginx read under {} ms apart",
                    fmt_ms(close_us)
                ),
                format!("at most {allowed} refused (arrivals nginx read that close)"),
                format!("{} refused ({ok} of {n} passed)", n - ok),
                n - ok <= allowed,
            ))
        } else {
            None
        }
    }

    /// While the queue is non-empty nginx releases one request per 1/rate: from the first
    /// arrival to the last 2xx it logged, answers come at the limit's rate, less any time the
    /// model on nginx's arrivals finds the queue empty (arrivals a stall held back until the
    /// queue had drained).
    fn queue_drains(&self, logged: &Logged, p: &Prediction) -> Option<Row> {
        let ok = self.m.ok();
        let (&first, &last) = (logged.arrivals_us.first()?, logged.ok_end_us.last()?);
        let span = last.saturating_sub(first) as f64 / 1e6;
        let idle = (p.idle_ms(self.limit.rate) / 1e3).min(span);
        let want = 1.0 + self.limit.rate * (span - idle);
        let tol = 2.0 + 0.01 * want;
        let idle_note = if idle > 0.0 {
            format!(
                ", less {} the model finds the queue empty on nginx's arrivals",
                secs(idle)
            )
        } else {
            String::new()
        };
        Some((
            "successes = 1 + rate x (first arrival to last 2xx, nginx's clock): the queue \
             drains at the limit's rate"
                .into(),
            format!(
                "{want:.1} ± {tol:.1} (1 + {} r/s x {}{idle_note})",
                fmt_rate(self.limit.rate),
                secs(span)
            ),
            format!(
                "{ok} ({:.3} r/s from first arrival to last 2xx)",
                (ok.saturating_sub(1)) as f64 / span.max(1e-6)
            ),
            (ok as f64 - want).abs() <= tol,
        ))
    }

    /// Full from some point on, the queue lets in one request per 1/rate: the first arrival,
    /// rate x the arrivals' span, and the burst it ends holding.
    fn queue_overflows(&self, logged: &Logged, p: &Prediction) -> Option<Row> {
        let (n, ok) = (self.m.n(), self.m.ok());
        if p.hi >= n {
            return None;
        }
        let span = logged.span_s();
        let want = self.limit.rate * span + self.limit.burst as f64;
        let tol = 3.0 + 0.01 * want;
        Some((
            "the queue overflows: accepted = rate x arrival span (nginx's clock) + burst".into(),
            format!(
                "{want:.0} ± {tol:.0} ({} x {} + {})",
                fmt_rate(self.limit.rate),
                secs(span),
                self.limit.burst
            ),
            ok.to_string(),
            (ok as f64 - want).abs() <= tol && ok < n,
        ))
    }

    /// Burst 0 and even arrivals above the limit: one arrival in every j passes. The cycle
    /// describes the intended, even arrivals; what nginx's arrivals moved in the model (the
    /// drift) moves the bounds with it. One request either side: the first arrival always
    /// passes, the last cycle is cut.
    fn even_cycle(&self) -> Option<Row> {
        if self.limit.burst != 0 || self.poisson() || self.attack_rate() <= self.limit.rate {
            return None;
        }
        let ok = self.m.ok();
        let (dlo, dhi) = self.drift();
        let (jmin, jmax) = even_cycle(self.attack_rate(), self.limit.rate, self.tick_us);
        let (tmin, tmax) = (
            self.attack_rate() / jmax as f64,
            self.attack_rate() / jmin as f64,
        );
        let t = ok as f64 / self.attack_s;
        let (blo, bhi) = (
            tmin + (dlo - 1) as f64 / self.attack_s,
            tmax + (dhi + 1) as f64 / self.attack_s,
        );
        Some((
            format!(
                "burst 0, even arrivals: every {} to every {} arrival passes",
                ordinal(jmin),
                ordinal(jmax)
            ),
            format!(
                "{tmin:.2}..{tmax:.2} r/s, moved by the drift {dlo:+}..{dhi:+} and ± 1 \
                 request: {blo:.3}..{bhi:.3} r/s"
            ),
            format!("{t:.3} r/s ({ok} in {})", secs(self.attack_s)),
            t >= blo && t <= bhi,
        ))
    }

    /// Burst 0 and Poisson arrivals: the closed form's success ratio. It is for the
    /// generator's arrivals: what nginx's moved in the model moves it too (the drift's
    /// middle), and its spread widens the band.
    fn poisson_ratio(&self) -> Option<Row> {
        if self.limit.burst != 0 || !self.poisson() {
            return None;
        }
        let (n, ok) = (self.m.n(), self.m.ok());
        let (dlo, dhi) = self.drift();
        let pr = limit_req::poisson_burst0_ratio(self.limit.rate, self.attack_rate());
        let s = sigma(pr, n);
        let r = ok as f64 / n.max(1) as f64;
        let nf = n.max(1) as f64;
        let shift = (dlo + dhi) as f64 / 2.0 / nf;
        let want = pr + shift;
        let tol = sigmas() * s + (dhi - dlo) as f64 / 2.0 / nf;
        Some((
            "Poisson success ratio = 1/(1 + arrival rate x ceil(1000/limit) ms)".into(),
            format!(
                "{:.2}% ± {:.2}% ({} binomial sigmas, n = {n}; {:+.2}% for the drift)",
                want * 100.0,
                tol * 100.0,
                sigmas(),
                shift * 100.0
            ),
            format!("{:.2}%", r * 100.0),
            (r - want).abs() <= tol,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::theory::limit_req::{Limit, Outcome};
    use model::{LimitReqLine, LoadMode, LoadSummary, LogSummary, RequestRecord};
    use scenario::{ArrivalsSpec, LoadSpec};
    use setup::proxy::RateLimit;
    use std::time::Duration;
    use units::{Dur, Rate};

    /// The quick burst-0 case: 90 r/s for 6 s against 30 r/s.
    fn spec() -> LoadSpec {
        LoadSpec {
            name: "attack".into(),
            url: "http://h/".into(),
            via: None,
            connections: 50,
            threads: 1,
            start: Dur(Duration::ZERO),
            duration: Some(Dur(Duration::from_secs(6))),
            requests: None,
            rate: Some(Rate(90.0)),
            arrivals: ArrivalsSpec::Even,
            seed: 1,
            timeout: Dur(Duration::from_secs(60)),
            method: "GET".into(),
            headers: Default::default(),
            body: None,
            http: None,
            streams: None,
            agents: None,
            retry_idle_closed: false,
            resolve: None,
            cacert: None,
            insecure: false,
            sni: None,
            protocol: None,
            message_rate: None,
            message_size: None,
            ramp: None,
            reconnect: None,
            backoff: None,
            backoff_max: None,
            idle_timeout: None,
            ping: None,
            grpc_deadline: None,
            grpc_path: None,
        }
    }

    fn summary(requests: u64) -> LoadSummary {
        LoadSummary {
            schema: model::SCHEMA_VERSION,
            name: "attack".into(),
            url: "http://h/".into(),
            method: "GET".into(),
            mode: LoadMode::Open {
                rate: 90.0,
                arrivals: model::Arrivals::Even,
                seed: 1,
            },
            threads: 1,
            connections: 50,
            start_s: 0.0,
            planned_s: Some(6.0),
            elapsed_s: 6.0,
            timeout_ms: 60_000,
            requests,
            bytes_read: 0,
            bytes_written: 0,
            status: Default::default(),
            errors: Default::default(),
            error_messages: Default::default(),
            connects: 50,
            retried: 0,
            latency: Default::default(),
            latency_uncorrected: None,
            req_per_sec: Default::default(),
            schedule: None,
            timeline: vec![],
            http2: None,
        }
    }

    /// A run in which a 1 s stall held back 90 arrivals until the last of them: nginx read
    /// them together and let one through. Returns the client's records and nginx's log, whose
    /// decisions are limit_req's on the arrivals as nginx read them.
    fn stalled_run() -> (Vec<RequestRecord>, LogSummary) {
        let sent = limit_req::even_arrivals_us(90.0, 540);
        let mut read = sent.clone();
        for t in &mut read[200..290] {
            *t = sent[289];
        }
        let epoch_ms = 1_764_000_000_000;
        let ms: Vec<u64> = read.iter().map(|t| t / 1000).collect();
        let sim = limit_req::simulate(Limit::queued(30.0, 0), &ms);
        let mut recs = Vec::new();
        let mut logs = LogSummary::default();
        for ((&s, &r), o) in sent.iter().zip(&read).zip(&sim.outcomes) {
            let ok = !matches!(o, Outcome::Rejected);
            let status = if ok { 200 } else { 503 };
            recs.push(RequestRecord {
                t_us: r + 1000,
                latency_us: (r + 1000 - s) as u32,
                status,
                error: None,
                ..Default::default()
            });
            logs.limit_req_lines.push(LimitReqLine {
                start_ms: epoch_ms + r / 1000,
                end_ms: epoch_ms + r / 1000 + 1,
                status,
                limit: if ok { "PASSED" } else { "REJECTED" }.into(),
            });
            *logs
                .limit_req_status
                .entry(if ok { "PASSED" } else { "REJECTED" }.into())
                .or_insert(0) += 1;
        }
        logs.access_lines = recs.len() as u64;
        recs.sort_by_key(|r| r.t_us);
        (recs, logs)
    }

    fn verdict(checks: &[CheckResult], prefix: &str) -> Option<(bool, String)> {
        checks
            .iter()
            .find(|k| k.name.starts_with(prefix))
            .map(|k| (k.pass, k.actual.clone()))
    }

    #[test]
    fn a_stall_moves_the_prediction_not_the_verdict() {
        let (recs, logs) = stalled_run();
        let (spec, rl) = (spec(), RateLimit::new("limit", 30.0));
        let sum = summary(recs.len() as u64);
        let a = Analysis::new(
            &spec,
            &sum,
            &rl,
            &recs,
            model::Measured::Complete(&logs),
            4000,
        );
        let checks = a.checks("c", model::Measured::Complete(&logs));
        let ok = a.m.ok();
        // The send-time model, blind to the stall, expects more than passed...
        assert!(a.sent.env_lo > ok + 1, "{} vs {ok}", a.sent.env_lo);
        // ...the model on nginx's arrivals expects what passed, and every check holds.
        let failed: Vec<_> = checks.iter().filter(|k| !k.pass).collect();
        assert!(failed.is_empty(), "{failed:?}");
        let (pass, actual) = verdict(&checks, "accepted count within").unwrap();
        assert!(pass && actual == ok.to_string());
        let (dlo, dhi) = a.drift();
        assert!(dlo < -2 && dhi < 0, "{dlo}..{dhi}");
        assert!(verdict(&checks, "burst 0, even arrivals").is_some_and(|v| v.0));
        // The drift table shows the stall: arrivals up to ~989 ms later than intended.
        let (l, _) = a.nginx.as_ref().unwrap();
        assert!(
            (985..=995).contains(&l.max_delay_ms()),
            "{}",
            l.max_delay_ms()
        );
    }

    #[test]
    fn without_nginx_arrivals_the_model_check_fails_with_no_data() {
        let (recs, _) = stalled_run();
        let (spec, rl) = (spec(), RateLimit::new("limit", 30.0));
        let sum = summary(recs.len() as u64);
        let logs = LogSummary::default();
        let a = Analysis::new(
            &spec,
            &sum,
            &rl,
            &recs,
            model::Measured::Complete(&logs),
            4000,
        );
        let checks = a.checks("c", model::Measured::Complete(&logs));
        let (pass, actual) = verdict(&checks, "accepted count within").unwrap();
        assert!(!pass && actual.starts_with("no data: "), "{actual}");
        // No closed-form check is judged on the send times instead.
        assert!(verdict(&checks, "burst 0, even arrivals").is_none());
        assert!(checks.iter().filter(|k| k.pass).count() <= 1, "{checks:?}");
        let t = a.model_table("c", model::Measured::Complete(&logs));
        assert!(t.notes[0].contains("no data: "), "{}", t.notes[0]);
    }
}
