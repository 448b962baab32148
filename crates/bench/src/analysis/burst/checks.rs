//! The theory checks of one case, judged on the arrival times nginx logged: the model's range,
//! nginx's own counts, the queue's drain rate, overflow, the even burst-0 cycle and the Poisson
//! closed form (the last two moved by what the drift from the send times moved in the model).

use super::analysis::Analysis;
use super::prediction::{even_cycle, sigma};
use super::text::{fmt_ms, fmt_rate, log_count, ordinal, pct, secs};
use super::{LOG_CLOCK_US, SIGMAS};
use crate::theory::limit_req;
use model::CheckResult;

impl Analysis<'_> {
    /// The case's theory checks.
    pub(super) fn checks(&self, case: &str, logs: &model::LogSummary) -> Vec<CheckResult> {
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
        // The verdict's model runs on nginx's logged arrivals; without them, it cannot pass.
        let (logged, p) = match &self.nginx {
            Ok((l, p)) => (l, p),
            Err(e) => {
                push(
                    "accepted count within the limit_req model's range for nginx's logged \
                     arrivals"
                        .into(),
                    "the model on the arrival times nginx logged ($msec - $request_time)".into(),
                    e.clone(),
                    false,
                );
                let passed = log_count(logs, "PASSED") + log_count(logs, "DELAYED");
                let rejected = log_count(logs, "REJECTED");
                push(
                    "nginx's $limit_req_status agrees with the client's counts".into(),
                    format!("PASSED+DELAYED {ok}, REJECTED {}", self.m.limited),
                    format!("PASSED+DELAYED {passed}, REJECTED {rejected}"),
                    passed == ok && rejected == self.m.limited,
                );
                return out;
            }
        };
        // The phases and the log's millisecond are sampled, not enumerated: one either side.
        let (lo, hi) = (p.env_lo.saturating_sub(1), p.env_hi + 1);
        push(
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
        );
        let passed = log_count(logs, "PASSED") + log_count(logs, "DELAYED");
        let rejected = log_count(logs, "REJECTED");
        push(
            "nginx's $limit_req_status agrees with the client's counts".into(),
            format!("PASSED+DELAYED {ok}, REJECTED {}", self.m.limited),
            format!("PASSED+DELAYED {passed}, REJECTED {rejected}"),
            passed == ok && rejected == self.m.limited && logged.n() == n,
        );
        let (dlo, dhi) = self.drift();
        if p.lo == n && self.limit.burst > 0 {
            push(
                "every request passes (the queue never overflows)".into(),
                format!("{n} of {n} (100%)"),
                format!("{ok} of {n} ({:.2}%)", pct(ok, n)),
                ok == n,
            );
        } else if self.sent.lo == n && !self.poisson() {
            // Below the limit a request is refused only when nginx reads it sooner than the
            // limit's gap after the last accepted one, so sooner still after the one before:
            // under the gap plus the millisecond the two clocks' truncations can differ by.
            let close_us = limit_req::min_gap_ms(self.limit.rate) * 1000 + LOG_CLOCK_US;
            let allowed = logged.closer_than(close_us);
            push(
                format!(
                    "every request passes, but for arrivals nginx read under {} ms apart",
                    fmt_ms(close_us)
                ),
                format!("at most {allowed} refused (arrivals nginx read that close)"),
                format!("{} refused ({ok} of {n} passed)", n - ok),
                n - ok <= allowed,
            );
        }
        if p.delayed() > 0 {
            // While the queue is non-empty nginx releases one request per 1/rate: from the
            // first arrival to the last 2xx it logged, answers come at the limit's rate.
            if let (Some(&first), Some(&last)) =
                (logged.arrivals_us.first(), logged.ok_end_us.last())
            {
                let span = last.saturating_sub(first) as f64 / 1e6;
                let want = 1.0 + self.limit.rate * span;
                let tol = 2.0 + 0.01 * want;
                push(
                    "successes = 1 + rate x (first arrival to last 2xx, nginx's clock): the \
                     queue drains at the limit's rate"
                        .into(),
                    format!(
                        "{want:.1} ± {tol:.1} (1 + {} r/s x {})",
                        fmt_rate(self.limit.rate),
                        secs(span)
                    ),
                    format!(
                        "{ok} ({:.3} r/s from first arrival to last 2xx)",
                        (ok.saturating_sub(1)) as f64 / span.max(1e-6)
                    ),
                    (ok as f64 - want).abs() <= tol,
                );
            }
            if p.hi < n {
                // Full from some point on, the queue lets in one request per 1/rate: the first
                // arrival, rate x the arrivals' span, and the burst it ends holding.
                let span = logged.span_s();
                let want = self.limit.rate * span + self.limit.burst as f64;
                let tol = 3.0 + 0.01 * want;
                push(
                    "the queue overflows: accepted = rate x arrival span (nginx's clock) + burst"
                        .into(),
                    format!(
                        "{want:.0} ± {tol:.0} ({} x {} + {})",
                        fmt_rate(self.limit.rate),
                        secs(span),
                        self.limit.burst
                    ),
                    ok.to_string(),
                    (ok as f64 - want).abs() <= tol && ok < n,
                );
            }
        }
        if self.limit.burst == 0 && !self.poisson() && self.attack_rate() > self.limit.rate {
            // The cycle describes the intended, even arrivals; what nginx's arrivals moved in
            // the model (the drift) moves the bounds with it. One request either side: the
            // first arrival always passes, the last cycle is cut.
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
            push(
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
            );
        }
        if self.limit.burst == 0 && self.poisson() {
            let pr = limit_req::poisson_burst0_ratio(self.limit.rate, self.attack_rate());
            let s = sigma(pr, n);
            let r = ok as f64 / n.max(1) as f64;
            let nf = n.max(1) as f64;
            // The closed form is for the generator's arrivals: what nginx's moved in the model
            // moves it too (the drift's middle), and its spread widens the band.
            let shift = (dlo + dhi) as f64 / 2.0 / nf;
            let want = pr + shift;
            let tol = SIGMAS * s + (dhi - dlo) as f64 / 2.0 / nf;
            push(
                "Poisson success ratio = 1/(1 + arrival rate x ceil(1000/limit) ms)".into(),
                format!(
                    "{:.2}% ± {:.2}% ({SIGMAS} binomial sigmas, n = {n}; {:+.2}% for the drift)",
                    want * 100.0,
                    tol * 100.0,
                    shift * 100.0
                ),
                format!("{:.2}%", r * 100.0),
                (r - want).abs() <= tol,
            );
        }
        out
    }
}
