//! What nginx itself logged about the limited requests: when it read each one (`$msec -
//! $request_time`, millisecond resolution) and what limit_req decided. The verdict's model runs
//! on these arrival times, so a stall of the client or of nginx's worker shows up in the
//! prediction instead of failing the comparison.

use model::LogSummary;

/// The access log's rate-limited requests, in the order nginx read them.
pub(super) struct Logged {
    /// When nginx read each request (µs), on the client's time base: the first logged arrival
    /// is placed at the first intended send. Sorted; whole milliseconds where nginx read a
    /// request later than its send time, the send time's sub-millisecond part where not.
    pub(super) arrivals_us: Vec<u64>,
    /// Whether limit_req let each one through (same order; within a millisecond the accepted
    /// come first, as the limiter decides them at one clock reading).
    pub(super) accepted: Vec<bool>,
    /// When nginx logged each accepted request (µs, same base), sorted: a queued request's
    /// release plus its upstream time.
    pub(super) ok_end_us: Vec<u64>,
    /// How much later than its intended send nginx read each arrival (ms), pairing the two
    /// by rank and taking out the least (the clocks' offset): the generator's and the
    /// machine's drift as nginx saw it.
    pub(super) delay_ms: Vec<u64>,
}

/// Why nginx's access log gives no arrivals to judge the limit by: the sentence the model note,
/// the table and the checks show in their place (`no data: ...`, `not measurable: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(super) struct Unlogged(pub(super) String);

impl Logged {
    /// The logged arrivals, or why there are none to judge by (`no data: ...`).
    pub(super) fn new(
        logs: &LogSummary,
        intended_us: &[u64],
        start_us: u64,
    ) -> Result<Logged, Unlogged> {
        let lines = &logs.limit_req_lines;
        let limited: u64 = logs
            .limit_req_status
            .iter()
            .filter(|(k, _)| k.as_str() != "-")
            .map(|(_, v)| v)
            .sum();
        if lines.is_empty() {
            return Err(Unlogged(format!(
                "no data: the access log holds no rate-limited line with $msec ({} access lines \
                 read, {limited} with a $limit_req_status)",
                logs.access_lines
            )));
        }
        if (lines.len() as u64) < limited {
            return Err(Unlogged(format!(
                "no data: only {} of the {limited} rate-limited access-log lines carry $msec",
                lines.len()
            )));
        }
        let mut rows: Vec<(u64, bool, u64)> = lines
            .iter()
            .map(|l| (l.start_ms, l.accepted(), l.end_ms))
            .collect();
        rows.sort_by_key(|&(t, ok, _)| (t, !ok));
        let first = rows[0].0;
        let at = |ms: u64| start_us + (ms - first) * 1000;
        let arrivals_us: Vec<u64> = rows.iter().map(|r| at(r.0)).collect();
        let mut ok_end_us: Vec<u64> = rows
            .iter()
            .filter(|r| r.1)
            .map(|r| at(r.2.max(first)))
            .collect();
        ok_end_us.sort_unstable();
        let gaps: Vec<i64> = arrivals_us
            .iter()
            .zip(intended_us)
            .map(|(&a, &i)| a as i64 - i as i64)
            .collect();
        let least = gaps.iter().copied().min().unwrap_or(0);
        // The log truncates each arrival to its millisecond. Where it agrees with the send time
        // (moved by the clocks' offset) within that millisecond, the send time's sub-millisecond
        // part is kept: evenly paced arrivals stay evenly paced instead of drawing a random
        // part each. Where nginx read a request later than that, the logged time stands.
        // The offset is the largest gap among those arrivals, so each lands inside the
        // millisecond nginx logged, never before it; and never earlier than the arrival before
        // it, so the order nginx logged stays.
        let on_time = |g: i64| g - least < 1000;
        let offset = gaps
            .iter()
            .copied()
            .filter(|&g| on_time(g))
            .max()
            .unwrap_or(0);
        let mut prev = 0;
        let arrivals_us = arrivals_us
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let t = match (gaps.get(i), intended_us.get(i)) {
                    (Some(&g), Some(&sent)) if on_time(g) => (sent as i64 + offset).max(0) as u64,
                    _ => a,
                };
                prev = t.max(prev);
                prev
            })
            .collect();
        Ok(Logged {
            accepted: rows.iter().map(|r| r.1).collect(),
            delay_ms: gaps.iter().map(|g| ((g - least) / 1000) as u64).collect(),
            arrivals_us,
            ok_end_us,
        })
    }

    /// Requests nginx logged.
    pub(super) fn n(&self) -> u64 {
        self.arrivals_us.len() as u64
    }

    /// Arrivals nginx read less than `gap_us` after the one before.
    pub(super) fn closer_than(&self, gap_us: u64) -> u64 {
        self.arrivals_us
            .windows(2)
            .filter(|w| w[1] - w[0] < gap_us)
            .count() as u64
    }

    /// The first to the last arrival nginx read (s).
    pub(super) fn span_s(&self) -> f64 {
        match (self.arrivals_us.first(), self.arrivals_us.last()) {
            (Some(a), Some(b)) => (b - a) as f64 / 1e6,
            _ => 0.0,
        }
    }

    /// The largest delay from intended send to nginx's read (ms).
    pub(super) fn max_delay_ms(&self) -> u64 {
        self.delay_ms.iter().copied().max().unwrap_or(0)
    }

    /// Arrivals nginx read more than `ms` later than intended (relative to the least delay).
    pub(super) fn delayed_beyond(&self, ms: u64) -> u64 {
        self.delay_ms.iter().filter(|&&d| d > ms).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::LimitReqLine;

    fn line(start_ms: u64, took_ms: u64, limit: &str) -> LimitReqLine {
        LimitReqLine {
            start_ms,
            end_ms: start_ms + took_ms,
            status: if limit == "REJECTED" { 503 } else { 200 },
            limit: limit.into(),
        }
    }

    #[test]
    fn logged_arrivals_sort_on_nginx_clock_and_show_the_drift() {
        // Intended sends 0, 10, 20, 30 ms; a 17 ms stall: nginx read the third and fourth
        // together at 37 ms and refused one of them. Log order is completion order.
        let logs = LogSummary {
            limit_req_lines: vec![
                line(5_000_000, 1, "PASSED"),
                line(5_000_037, 0, "REJECTED"),
                line(5_000_010, 500, "DELAYED"),
                line(5_000_037, 2, "PASSED"),
            ],
            limit_req_status: [("PASSED", 2), ("DELAYED", 1), ("REJECTED", 1)]
                .map(|(k, v)| (k.to_string(), v))
                .into_iter()
                .collect(),
            ..LogSummary::default()
        };
        let intended = [1_000_000, 1_010_000, 1_020_000, 1_030_000];
        let l = Logged::new(&logs, &intended, 1_000_000).unwrap();
        assert_eq!(
            l.arrivals_us,
            vec![1_000_000, 1_010_000, 1_037_000, 1_037_000]
        );
        assert_eq!(l.accepted, vec![true, true, true, false]);
        assert_eq!(l.ok_end_us, vec![1_001_000, 1_039_000, 1_510_000]);
        assert_eq!(l.delay_ms, vec![0, 0, 17, 7]);
        assert_eq!((l.max_delay_ms(), l.delayed_beyond(4)), (17, 2));
        assert_eq!(l.closer_than(10_000), 1);
        assert!((l.span_s() - 0.037).abs() < 1e-9);
    }

    #[test]
    fn missing_or_partial_logs_are_no_data() {
        let mut logs = LogSummary {
            access_lines: 3,
            ..LogSummary::default()
        };
        logs.limit_req_status.insert("PASSED".into(), 3);
        let e = Logged::new(&logs, &[0], 0).err().unwrap().0;
        assert!(
            e.starts_with("no data: ") && e.contains("3 access lines"),
            "{e}"
        );
        logs.limit_req_lines = vec![line(1, 0, "PASSED")];
        let e = Logged::new(&logs, &[0], 0).err().unwrap().0;
        assert!(e.starts_with("no data: only 1 of the 3"), "{e}");
    }
}
