//! A worker's books: each answer and failure counted into the current second's block, and
//! the blocks sealed as the seconds turn and at the end of the run.

use super::*;

impl Worker<'_> {
    #[inline]
    pub(super) fn complete(&mut self, i: usize, now: u64, status: u16, keep_alive: bool) {
        if now >= self.next_boundary {
            self.rotate(now);
        }
        let (intended, issued, bytes) = {
            let c = &self.conns[i];
            (c.intended, c.issued, c.read_bytes)
        };
        self.account_response(i, now, status, intended, issued, bytes);
        let c = &mut self.conns[i];
        c.busy = false;
        c.reused = true;
        self.in_flight -= 1;
        if keep_alive {
            c.state = State::Idle;
        } else {
            c.close();
        }
        self.next(i, now);
    }

    /// Counts a response on connection `i` (HTTP/1.1 or one HTTP/2 stream): its latency from
    /// the intended send (and from the actual one when uncorrected latency is kept), its status,
    /// and its record.
    #[inline]
    pub(super) fn account_response(
        &mut self,
        i: usize,
        now: u64,
        status: u16,
        intended: u64,
        issued: u64,
        bytes: u32,
    ) {
        let latency_us = now.saturating_sub(intended) / 1000;
        self.cur.requests += 1;
        self.cur.status_class[(status / 100 - 1) as usize] += 1;
        self.cur.latency.record(latency_us);
        if let Some(u) = &mut self.cur.uncorrected {
            u.record(now.saturating_sub(issued) / 1000);
        }
        self.status[status as usize] += 1;
        if self.sh.record {
            self.records.push(RequestRecord {
                t_us: now / 1000,
                latency_us: latency_us.min(u32::MAX as u64) as u32,
                conn: self.conn_base + i as u32,
                bytes,
                status,
                error: None,
            });
        }
    }

    pub(super) fn fail(&mut self, i: usize, now: u64, kind: ErrorKind, why: Why) {
        if self.sh.streams.is_some() {
            self.h2_conn_failed(i, now, kind, why, false);
            return;
        }
        if now >= self.next_boundary {
            self.rotate(now);
        }
        let (intended, bytes) = (self.conns[i].intended, self.conns[i].read_bytes);
        self.account_failure(i, now, kind, why, intended, bytes);
        let c = &mut self.conns[i];
        let was_busy = c.busy;
        c.busy = false;
        c.close();
        if was_busy {
            self.in_flight -= 1;
        }
        if self.pacer.is_some() {
            // Open loop: the connection waits for the schedule's next request.
            self.free.push_back(i);
            return;
        }
        let connect_failed = matches!(
            kind,
            ErrorKind::ConnectRefused | ErrorKind::ConnectTimeout | ErrorKind::ConnectOther
        );
        if connect_failed && self.sh.backoff_ns > 0 {
            c.state = State::Backoff;
            c.deadline = now + self.sh.backoff_ns;
            if c.deadline < self.next_scan {
                self.next_scan = c.deadline;
            }
        } else {
            // Retried from the main loop, never from here: a failure that repeats at once
            // (a refused connect) must not recurse.
            self.retry.push_back(i);
        }
    }

    /// Counts one failed attempt on connection `i` (intended at `intended`, `bytes` read).
    pub(super) fn account_failure(
        &mut self,
        i: usize,
        now: u64,
        kind: ErrorKind,
        why: Why,
        intended: u64,
        bytes: u32,
    ) {
        if now >= self.next_boundary {
            self.rotate(now);
        }
        let k = kind_index(kind);
        if self.first_errors[k].is_none() {
            self.first_errors[k] = Some((now, self.message(why)));
        }
        let latency_us = now.saturating_sub(intended) / 1000;
        self.cur.errors[k] += 1;
        if self.sh.record {
            self.records.push(RequestRecord {
                t_us: now / 1000,
                latency_us: latency_us.min(u32::MAX as u64) as u32,
                conn: self.conn_base + i as u32,
                bytes,
                status: 0,
                error: Some(kind),
            });
        }
    }

    /// The one-line message for a failure (only formatted for a thread's first of a kind).
    pub(super) fn message(&self, why: Why) -> String {
        match why {
            Why::Connect(e) => format!("connect to {}: {e}", self.sh.target.addr),
            Why::Io(e) => e.to_string(),
            Why::Tls(t) => t.to_string(),
            Why::Text(t) => t.to_string(),
            Why::H2(what, c) => format!("{what}: {}", http2::frame::code_name(c)),
            Why::Late(what) => format!(
                "{what} within the timeout ({:?})",
                std::time::Duration::from_nanos(self.sh.timeout_ns)
            ),
        }
    }

    /// Hands the finished second(s) to the aggregator and starts a fresh block.
    pub(super) fn rotate(&mut self, now: u64) {
        let t_now = (now / 1_000_000_000) as u32;
        while self.cur.t < t_now {
            let next_t = self.cur.t + 1;
            let fresh = self.fresh_block(next_t);
            let mut done = std::mem::replace(&mut self.cur, fresh);
            self.seal(&mut done);
            let _ = self.links.tx.send(Msg::Second(done));
        }
        self.next_boundary = (t_now as u64 + 1) * 1_000_000_000;
    }

    /// Stamps a finished second with the sends since the last one and the requests still in
    /// flight: two numbers per second, nothing per request.
    fn seal(&mut self, b: &mut SecondBlock) {
        b.sent = self.issued - self.issued_sealed;
        self.issued_sealed = self.issued;
        b.in_flight = self.in_flight as u64;
    }

    fn fresh_block(&mut self, t: u32) -> Box<SecondBlock> {
        let mut b = self
            .links
            .recycled
            .try_recv()
            .unwrap_or_else(|_| Box::new(SecondBlock::new(self.id, self.pacer.is_some())));
        b.t = t;
        b
    }

    pub(super) fn finish(&mut self, now: u64) {
        // Sending ended at the stop or the end; or, for a schedule cut by its request limit,
        // when the limit's first kept-back arrival was due: its achieved rate is the
        // schedule's, not stretched by the last responses (and the shares of a distributed
        // load, each cut by its limit, add up to the whole's rate).
        let end_ns = self.sh.end_ns.unwrap_or(u64::MAX);
        let end = match &self.pacer {
            _ if self.draining => self.drain_at.min(end_ns),
            Some(p) => p.limit_end().unwrap_or(now.min(end_ns)),
            None => now.min(end_ns),
        };
        let mut intended = self.issued;
        if let Some(p) = &mut self.pacer {
            intended += p.drain_before(end);
        }
        if now >= self.next_boundary {
            self.rotate(now);
        }
        let mut last = std::mem::replace(&mut self.cur, Box::new(SecondBlock::new(self.id, false)));
        self.seal(&mut last);
        let _ = self.links.tx.send(Msg::Second(last));
        let fin = ThreadFinal {
            thread: self.id,
            status: std::mem::take(&mut self.status),
            connects: self.connects,
            bytes_written: self.bytes_written,
            intended,
            sent: self.issued,
            late: self.late,
            lateness: self.lateness.take(),
            records: std::mem::take(&mut self.records),
            first_errors: std::mem::replace(&mut self.first_errors, std::array::from_fn(|_| None)),
            end_ns: now,
            send_end_ns: end,
            h2: self.h2_final(),
        };
        let _ = self.links.tx.send(Msg::Done(Box::new(fin)));
    }
}
