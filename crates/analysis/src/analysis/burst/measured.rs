//! What the client saw, per request, in intended-send order.

use model::RequestRecord;
use std::collections::BTreeMap;

/// Per-request facts of one load, in intended-send order.
pub(super) struct Measured {
    /// Intended send times (µs from the case origin), sorted.
    pub(super) intended: Vec<u64>,
    /// Completion times (µs), sorted.
    pub(super) completed: Vec<u64>,
    /// Whether each request (intended order) was accepted (2xx).
    pub(super) accepted: Vec<bool>,
    /// Completion time of each accepted request (µs), sorted.
    pub(super) ok_times: Vec<u64>,
    /// Answers with the limit's status.
    pub(super) limited: u64,
    /// Other statuses and failures below HTTP.
    pub(super) other: u64,
    /// Status counts.
    pub(super) status: BTreeMap<u16, u64>,
}

impl Measured {
    /// Sorts the records by intended send time (`t_us - latency_us`) and counts them.
    pub(super) fn new(recs: &[RequestRecord], limit_status: u16) -> Measured {
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
        let mut status = BTreeMap::new();
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

    /// Requests recorded.
    pub(super) fn n(&self) -> u64 {
        self.intended.len() as u64
    }

    /// 2xx answers.
    pub(super) fn ok(&self) -> u64 {
        self.ok_times.len() as u64
    }

    /// Requests sent (intended) by `t_us` and not yet answered.
    pub(super) fn in_flight_at(&self, t_us: u64) -> u64 {
        let sent = self.intended.partition_point(|&x| x <= t_us);
        let done = self.completed.partition_point(|&x| x <= t_us);
        sent.saturating_sub(done) as u64
    }

    /// The most requests in flight at once.
    pub(super) fn max_in_flight(&self) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(intended_ms: u64, latency_ms: u64, status: u16) -> RequestRecord {
        RequestRecord {
            t_us: (intended_ms + latency_ms) * 1000,
            latency_us: (latency_ms * 1000) as u32,
            status,
            error: None,
            ..Default::default()
        }
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
}
