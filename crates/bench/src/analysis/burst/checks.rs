//! The theory checks of one case: the model's range, nginx's own counts, the queue's drain
//! rate, overflow, the even burst-0 cycle and the Poisson closed form.

use super::analysis::Analysis;
use super::prediction::{even_cycle, sigma};
use super::text::{fmt_ms, fmt_rate, log_count, ordinal, pct, secs};
use super::{NGINX_STALL_S, SIGMAS};
use crate::theory::limit_req;
use model::CheckResult;

impl Analysis<'_> {
    /// The clock gap burst 0 needs between accepted requests, in µs: `ceil(gap/tick)` ticks.
    pub(super) fn clock_gap_us(&self) -> f64 {
        let tick = self.tick_us.max(1) as f64;
        (limit_req::min_gap_ms(self.limit.rate) as f64 * 1000.0 / tick).ceil() * tick
    }

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
