//! A connection that ends under a worker: the peer closed it or a read failed; the request in
//! flight is sent again later, or counted as a failure by its cause.

use super::*;

impl Worker<'_> {
    /// The peer closed connection `i`.
    pub(super) fn on_eof(&mut self, i: usize) {
        if self.sh.streams.is_some() {
            self.h2_on_closed(
                i,
                ErrorKind::ReadReset,
                Why::Text("the server closed the connection with streams open"),
            );
            return;
        }
        if !self.conns[i].busy {
            self.drop_idle(i);
            return;
        }
        let now = self.arrival();
        let c = &mut self.conns[i];
        match c.parser.eof() {
            Eof::Done(resp) => self.complete(i, now, resp.status, false),
            Eof::Empty if c.reused && self.sh.retry_idle_closed => self.resend_later(i, now),
            Eof::Empty if c.reused => self.fail(
                i,
                now,
                ErrorKind::ReadIdleClosed,
                Why::Text("the server closed a reused keep-alive connection before answering"),
            ),
            Eof::Empty => self.fail(
                i,
                now,
                ErrorKind::ReadReset,
                Why::Text("the server closed the connection before answering"),
            ),
            Eof::Truncated => self.fail(
                i,
                now,
                ErrorKind::ReadReset,
                Why::Text("the server closed the connection in the middle of a response"),
            ),
        }
    }

    /// Reading connection `i` failed (a reset, or the TLS layer).
    pub(super) fn on_read_failed(&mut self, i: usize, why: Why) {
        if self.sh.streams.is_some() {
            let kind = if matches!(why, Why::Tls(_)) {
                ErrorKind::Tls
            } else {
                ErrorKind::ReadReset
            };
            self.h2_on_closed(i, kind, why);
            return;
        }
        let c = &self.conns[i];
        if !c.busy {
            self.drop_idle(i);
            return;
        }
        let kind = if matches!(why, Why::Tls(_)) {
            ErrorKind::Tls
        } else if c.reused && !c.parser.started() {
            ErrorKind::ReadIdleClosed
        } else {
            ErrorKind::ReadReset
        };
        let now = self.arrival();
        if kind == ErrorKind::ReadIdleClosed && self.sh.retry_idle_closed {
            self.resend_later(i, now);
        } else {
            self.fail(i, now, kind, why);
        }
    }

    /// The server closed the reused keep-alive connection `i` before any byte of the answer
    /// to its request: close it and send the request again from the main loop on a new
    /// connection (never from inside an I/O callback). The request stays in flight with its
    /// intended time and deadline, so its latency and timeout cover both attempts; the new
    /// connection is not reused yet, so a second such close is a failure, never a loop.
    fn resend_later(&mut self, i: usize, now: u64) {
        if now >= self.next_boundary {
            self.rotate(now);
        }
        self.cur.retried += 1;
        let c = &mut self.conns[i];
        c.close();
        c.issued = now;
        c.read_bytes = 0;
        self.resend.push_back(i);
    }

    /// An idle connection was closed by the server (or sent stray bytes): close it quietly.
    /// No request was in flight, so nothing failed.
    pub(super) fn drop_idle(&mut self, i: usize) {
        self.conns[i].close();
    }
}
