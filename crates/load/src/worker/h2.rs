//! HTTP/2 in the worker: each connection carries `-m` request slots, a slot is a stream in
//! flight (or a request waiting for its connection or for the server's concurrency limit), and
//! the frames come from `http2::ClientConn`. The accounting is the HTTP/1.1 one: every request
//! ends once, as a response or as one error kind, with its latency from its intended time.
//!
//! Closed loop: a freed slot goes back on the retry queue and the main loop issues the next
//! request on it. Open loop: a freed slot joins the free list (one entry per free stream), so
//! an intended request takes a connection with a free stream, and waits (counted in its
//! latency) when none has one. Writes are batched: whatever a loop turn queued on a connection
//! leaves in one write at the end of the turn.

use super::{Why, Worker, H2_HOLD_NS};
use crate::conn::{State, Step, TlsFail, H2};
use crate::stats::H2Counts;
use http2::frame::code;
use http2::{ClientConn, Event};
use model::ErrorKind;

impl Worker<'_> {
    /// Starts a request on connection `i` (HTTP/2): takes a free slot, opens its stream when
    /// the session can, connects when there is no socket.
    pub(super) fn h2_issue(&mut self, i: usize, intended: u64, now: u64) {
        let streams = self.sh.streams.unwrap_or(1);
        let c = &mut self.conns[i];
        let h = c.h2.get_or_insert_with(|| Box::new(H2::new(streams)));
        let Some(s) = h.free.pop() else {
            // No free slot: the caller's bookkeeping went wrong; drop the request unsent
            // rather than overfill the connection.
            return;
        };
        self.issued += 1;
        self.in_flight += 1;
        let slot = &mut h.slots[s as usize];
        slot.busy = true;
        slot.opened = false;
        slot.intended = intended;
        slot.issued = now;
        slot.deadline = now + self.sh.timeout_ns;
        h.pending.push_back(s);
        match c.state {
            State::Closed | State::Backoff => self.connect(i, now),
            State::Connecting | State::Handshake => {}
            State::Idle | State::Writing | State::Reading => self.h2_pump(i, now),
        }
    }

    /// The socket (and TLS) is up: checks ALPN, starts the session and opens the waiting
    /// streams.
    pub(super) fn h2_ready(&mut self, i: usize, now: u64) {
        let streams = self.sh.streams.unwrap_or(1);
        let c = &mut self.conns[i];
        if let Some(tls) = &mut c.tls {
            if tls.alpn_protocol() != Some(b"h2") {
                self.fail(
                    i,
                    now,
                    ErrorKind::Tls,
                    Why::Text("the server did not offer h2 in ALPN (HTTP/2 over TLS needs it)"),
                );
                return;
            }
            // Frames of many streams go through the TLS buffer; never refuse them.
            tls.set_buffer_limit(None);
        }
        let h = c.h2.get_or_insert_with(|| Box::new(H2::new(streams)));
        let request = (self.sh.target.h2_request.clone())
            .expect("an HTTP/2 load has its request's fields (Target::new)");
        h.codec = Some(ClientConn::new(request, self.sh.target.h2_body.clone()));
        h.wpos = 0;
        h.settings_deadline = now + self.sh.timeout_ns;
        c.state = State::Idle;
        self.h2c.connections += 1;
        if h.settings_deadline < self.next_scan {
            self.next_scan = h.settings_deadline;
        }
        self.h2_pump(i, now);
    }

    /// Opens waiting streams while the session allows; closes a session that has nothing more
    /// to give (GOAWAY and no stream left), reconnecting when requests wait. Marks the
    /// connection for the end-of-turn flush.
    pub(super) fn h2_pump(&mut self, i: usize, now: u64) {
        let c = &mut self.conns[i];
        let Some(h) = c.h2.as_deref_mut() else {
            return;
        };
        let Some(codec) = h.codec.as_mut() else {
            return;
        };
        if codec.finished() {
            let waiting = !h.pending.is_empty();
            // Send what is queued (a GOAWAY of ours) before closing, if the socket takes it.
            self.h2_flush(i, now);
            if self.conns[i].state == State::Closed {
                return;
            }
            self.conns[i].close();
            if waiting {
                self.connect(i, now);
            }
            return;
        }
        while let Some(&s) = h.pending.front() {
            if !codec.can_open() {
                break;
            }
            h.pending.pop_front();
            codec.open(s);
            h.slots[s as usize].opened = true;
            self.h2c.streams += 1;
            if h.queued == 0 {
                h.queued_since = now;
            }
            h.queued += 1;
        }
        self.h2c.max_concurrent = self.h2c.max_concurrent.max(codec.active() as u32);
        if !codec.out.is_empty() && !h.dirty {
            h.dirty = true;
            self.h2_dirty.push(i);
        }
    }

    /// Writes every connection's queued frames (once per loop turn), except those of
    /// connections that [`Worker::h2_hold`] keeps for a fuller write; returns the earliest
    /// time one of those must leave (`u64::MAX` when none is held).
    pub(super) fn h2_flush_dirty(&mut self, now: u64) -> u64 {
        let mut dirty = std::mem::take(&mut self.h2_dirty);
        let mut until = u64::MAX;
        dirty.retain(|&i| {
            let Some(h) = self.conns[i].h2.as_deref_mut() else {
                return false;
            };
            if !h.dirty {
                return false;
            }
            if let Some(t) = self.h2_hold(i, now) {
                until = until.min(t);
                return true;
            }
            if let Some(h) = self.conns[i].h2.as_deref_mut() {
                h.dirty = false;
            }
            self.h2_flush(i, now);
            false
        });
        // Connections marked during the flushes (none today) keep their place after the held.
        dirty.append(&mut self.h2_dirty);
        self.h2_dirty = dirty;
        until
    }

    /// Whether connection `i`'s queued requests wait for more, and until when. Every flush is
    /// a write the server reads on its own (and over TLS a record it decrypts and
    /// authenticates), and on loopback each segment also costs both sides a trip through the
    /// network stack: a client that sends each request the moment a response frees its stream
    /// makes the server pay a read per request. Measured against nginx at `-c50 -m10`: over
    /// TLS 0.73 records per request and 35 bytes in, where h2load's 0.14 records carry 18
    /// bytes; over h2c 0.95 writes and 1.58 segments per request, 0.20 and 1.16 when held
    /// (bench/vs-h2load.sh, 2026-11-29). In closed loop the requests of freed
    /// streams are held while fewer are queued than there are responses still due on the
    /// connection (with `-m10` and every stream open, until five are queued; under a server's
    /// lower stream limit, half of that), for at most [`H2_HOLD_NS`] after the first; their
    /// latency counts from when they were issued, so the hold is measured, not hidden. Open
    /// loop never holds (requests leave at their times), nor do `-m` below 3 or control frames
    /// alone.
    fn h2_hold(&self, i: usize, now: u64) -> Option<u64> {
        let c = &self.conns[i];
        if self.pacer.is_some() || self.draining {
            return None;
        }
        let h = c.h2.as_deref()?;
        let codec = h.codec.as_ref()?;
        let queued = h.queued as usize;
        let due = codec.active().saturating_sub(queued);
        let until = h.queued_since + H2_HOLD_NS;
        (queued > 0 && queued < due && now < until).then_some(until)
    }

    /// Writes connection `i`'s queued frames as far as the socket takes them.
    pub(super) fn h2_flush(&mut self, i: usize, now: u64) {
        let c = &mut self.conns[i];
        let Some(h) = c.h2.as_deref_mut() else {
            return;
        };
        let Some(codec) = h.codec.as_mut() else {
            return;
        };
        h.queued = 0;
        let mut out = std::mem::take(&mut codec.out);
        let step = match &mut c.tls {
            Some(tls) => {
                use std::io::Write;
                let r = tls.writer().write_all(&out);
                self.bytes_written += out.len() as u64;
                out.clear();
                match r {
                    Err(e) => Step::Tls(TlsFail::Io(e)),
                    Ok(()) => {
                        c.wpos = 0;
                        c.send(&[])
                    }
                }
            }
            None => {
                let mut step = Step::Done;
                if let Some(sock) = &c.sock {
                    while h.wpos < out.len() {
                        match sock.write(&out[h.wpos..]) {
                            Ok(n) => h.wpos += n,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                                step = Step::Again;
                                break;
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => {
                                step = Step::Failed(e);
                                break;
                            }
                        }
                    }
                }
                if matches!(step, Step::Done) {
                    self.bytes_written += out.len() as u64;
                    out.clear();
                    h.wpos = 0;
                }
                step
            }
        };
        let c = &mut self.conns[i];
        if let Some(codec) = c.h2.as_deref_mut().and_then(|h| h.codec.as_mut()) {
            // Frames queued while `out` was out keep their order after it.
            out.append(&mut codec.out);
            codec.out = out;
        }
        match step {
            Step::Done => c.state = State::Idle,
            Step::Again => c.state = State::Writing,
            Step::Failed(e) => self.fail(i, now, ErrorKind::Write, Why::Io(e)),
            Step::Tls(t) => self.fail(i, now, ErrorKind::Tls, Why::Tls(t)),
        }
    }

    /// Bytes from the server on connection `i`. Returns false when the connection was closed
    /// or replaced.
    pub(super) fn h2_on_data(&mut self, i: usize, data: &[u8]) -> bool {
        self.cur.bytes += data.len() as u64;
        let c = &mut self.conns[i];
        let gen = c.gen;
        let Some(codec) = c.h2.as_deref_mut().and_then(|h| h.codec.as_mut()) else {
            c.close();
            return false;
        };
        let fed = codec.feed(data);
        let now = self.arrival();
        self.h2_events(i, now);
        if let Err(e) = fed {
            self.h2c.conn_errors[H2Counts::bucket(e.code)] += 1;
            // Our GOAWAY goes out if the socket takes it; the streams are lost.
            self.h2_flush(i, now);
            self.h2_conn_failed(i, now, ErrorKind::Malformed, Why::Text(e.reason), true);
            return false;
        }
        if self.conns[i].gen != gen {
            return false;
        }
        self.h2_pump(i, now);
        self.conns[i].gen == gen
    }

    /// Accounts the events the session produced.
    fn h2_events(&mut self, i: usize, now: u64) {
        let Some(codec) = self.conns[i]
            .h2
            .as_deref_mut()
            .and_then(|h| h.codec.as_mut())
        else {
            return;
        };
        let mut events = std::mem::take(&mut codec.events);
        for e in events.drain(..) {
            match e {
                Event::Response {
                    slot,
                    status,
                    bytes,
                } => self.h2_complete(i, slot, now, status, bytes),
                Event::Reset { slot, code: c } => {
                    self.h2c.rst[H2Counts::bucket(c)] += 1;
                    let (kind, what) = if c == code::REFUSED_STREAM {
                        (
                            ErrorKind::ReadIdleClosed,
                            "the server refused the stream (RST_STREAM)",
                        )
                    } else {
                        (
                            ErrorKind::ReadReset,
                            "the server reset the stream (RST_STREAM)",
                        )
                    };
                    self.h2_stream_failed(i, slot, now, kind, Why::H2(what, c));
                }
                Event::Refused { slot } => {
                    self.h2c.refused += 1;
                    self.h2_stream_failed(
                        i,
                        slot,
                        now,
                        ErrorKind::ReadIdleClosed,
                        Why::Text("the stream is above the server's GOAWAY last-stream-id (refused, never processed)"),
                    );
                }
                Event::Malformed { slot, reason } => {
                    self.h2_stream_failed(i, slot, now, ErrorKind::Malformed, Why::Text(reason))
                }
                Event::GoAway { code: c, .. } => self.h2c.goaways[H2Counts::bucket(c)] += 1,
                Event::Stalled { .. } => self.h2c.stalls += 1,
                // gRPC mode's events: this connection's codec is not in it.
                Event::SettingsAcked | Event::Message { .. } | Event::GrpcStatus { .. } => {}
            }
        }
        if let Some(codec) = self.conns[i]
            .h2
            .as_deref_mut()
            .and_then(|h| h.codec.as_mut())
        {
            if codec.events.is_empty() {
                codec.events = events;
            }
        }
    }

    /// A response completed on slot `s` of connection `i`.
    fn h2_complete(&mut self, i: usize, s: u32, now: u64, status: u16, bytes: u64) {
        if now >= self.next_boundary {
            self.rotate(now);
        }
        let Some(h) = self.conns[i].h2.as_deref_mut() else {
            return;
        };
        let slot = h.slots[s as usize];
        if !slot.busy {
            return;
        }
        let bytes = bytes.min(u32::MAX as u64) as u32;
        self.account_response(i, now, status, slot.intended, slot.issued, bytes);
        self.h2_release(i, s);
    }

    /// Slot `s` of connection `i` failed as `kind` (its stream is already closed, or was never
    /// opened).
    fn h2_stream_failed(&mut self, i: usize, s: u32, now: u64, kind: ErrorKind, why: Why) {
        let Some(h) = self.conns[i].h2.as_deref_mut() else {
            return;
        };
        let slot = h.slots[s as usize];
        if !slot.busy {
            return;
        }
        self.account_failure(i, now, kind, why, slot.intended, 0);
        self.h2_release(i, s);
    }

    /// Frees slot `s` and hands it to the schedule: the retry queue (closed loop) or the free
    /// list (open loop).
    fn h2_release(&mut self, i: usize, s: u32) {
        let Some(h) = self.conns[i].h2.as_deref_mut() else {
            return;
        };
        let slot = &mut h.slots[s as usize];
        slot.busy = false;
        slot.opened = false;
        h.free.push(s);
        self.in_flight -= 1;
        if self.pacer.is_some() {
            self.free.push_back(i);
        } else {
            self.retry.push_back(i);
        }
    }

    /// Connection `i` failed as a whole (connect, TLS, a write, a connection error): every
    /// busy slot fails as `kind`, or with `opened_only`, only the slots whose stream was open
    /// (the others wait for the next connection). The socket is closed.
    pub(super) fn h2_conn_failed(
        &mut self,
        i: usize,
        now: u64,
        kind: ErrorKind,
        why: Why,
        opened_only: bool,
    ) {
        if now >= self.next_boundary {
            self.rotate(now);
        }
        let mut why = Some(why);
        let n = self.conns[i].h2.as_ref().map_or(0, |h| h.slots.len());
        for s in 0..n {
            let Some(h) = self.conns[i].h2.as_deref() else {
                break;
            };
            let slot = h.slots[s];
            if !slot.busy || (opened_only && !slot.opened) {
                continue;
            }
            let w = why.take().unwrap_or(Why::Text("(same failure)"));
            self.account_failure(i, now, kind, w, slot.intended, 0);
            let h = self.conns[i].h2.as_deref_mut().expect("checked");
            if let Some(p) = h.pending.iter().position(|&x| x == s as u32) {
                h.pending.remove(p);
            }
            self.h2_release(i, s as u32);
        }
        let c = &mut self.conns[i];
        c.close();
        let waiting = c.h2.as_ref().is_some_and(|h| !h.pending.is_empty());
        let connect_failed = matches!(
            kind,
            ErrorKind::ConnectRefused | ErrorKind::ConnectTimeout | ErrorKind::ConnectOther
        );
        if connect_failed && self.sh.backoff_ns > 0 && self.pacer.is_none() {
            // The retried requests wait for the backoff: take them off the retry queue.
            self.retry.retain(|&x| x != i);
            c.state = State::Backoff;
            c.deadline = now + self.sh.backoff_ns;
            if c.deadline < self.next_scan {
                self.next_scan = c.deadline;
            }
        } else if waiting {
            self.connect(i, now);
        }
    }

    /// The peer closed connection `i` (or reset it): open streams fail, waiting requests go to
    /// a new connection.
    pub(super) fn h2_on_closed(&mut self, i: usize, kind: ErrorKind, why: Why) {
        let now = self.arrival();
        let any_open = self.conns[i]
            .h2
            .as_ref()
            .is_some_and(|h| h.slots.iter().any(|s| s.busy && s.opened));
        if !any_open {
            let c = &mut self.conns[i];
            c.close();
            if c.h2.as_ref().is_some_and(|h| !h.pending.is_empty()) {
                self.connect(i, now);
            }
            return;
        }
        self.h2_conn_failed(i, now, kind, why, true);
    }

    /// Timeouts and backoffs of HTTP/2 connections; returns the earliest deadline left.
    pub(super) fn h2_scan(&mut self, now: u64) -> u64 {
        let mut next = now + self.sh.timeout_ns;
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if c.state == State::Backoff {
                if now >= c.deadline {
                    self.conns[i].state = State::Closed;
                    let free = self.conns[i].h2.as_ref().map_or(0, |h| h.free.len());
                    for _ in 0..free {
                        if self.may_issue() {
                            self.issue(i, now, now);
                        }
                    }
                } else {
                    next = next.min(c.deadline);
                }
                continue;
            }
            let Some(h) = c.h2.as_deref() else {
                continue;
            };
            let live = h.codec.as_ref();
            if let Some(codec) = live {
                if !codec.settings_acked() {
                    if now >= h.settings_deadline {
                        self.h2c.settings_timeouts += 1;
                        self.h2c.conn_errors[code::SETTINGS_TIMEOUT as usize] += 1;
                        if let Some(codec) = self.conns[i]
                            .h2
                            .as_deref_mut()
                            .and_then(|h| h.codec.as_mut())
                        {
                            codec.fail(code::SETTINGS_TIMEOUT);
                        }
                        self.h2_flush(i, now);
                        self.h2_conn_failed(
                            i,
                            now,
                            ErrorKind::Timeout,
                            Why::Late("the server's SETTINGS acknowledgement"),
                            false,
                        );
                        continue;
                    }
                    next = next.min(h.settings_deadline);
                }
            }
            let state = c.state;
            for s in 0..h.slots.len() {
                let Some(h) = self.conns[i].h2.as_deref_mut() else {
                    break;
                };
                let slot = h.slots[s];
                if !slot.busy {
                    continue;
                }
                if now < slot.deadline {
                    next = next.min(slot.deadline);
                    continue;
                }
                if slot.opened {
                    if let Some(codec) = h.codec.as_mut() {
                        codec.cancel(s as u32);
                    }
                    self.h2_stream_failed(
                        i,
                        s as u32,
                        now,
                        ErrorKind::Timeout,
                        Why::Late("no complete response"),
                    );
                    self.h2_pump(i, now);
                    continue;
                }
                match state {
                    State::Connecting | State::Closed => {
                        self.h2_conn_failed(
                            i,
                            now,
                            ErrorKind::ConnectTimeout,
                            Why::Late("no TCP connection"),
                            false,
                        );
                        break;
                    }
                    State::Handshake => {
                        self.h2_conn_failed(
                            i,
                            now,
                            ErrorKind::Tls,
                            Why::Late("TLS handshake not finished"),
                            false,
                        );
                        break;
                    }
                    _ => {
                        if let Some(p) = h.pending.iter().position(|&x| x == s as u32) {
                            h.pending.remove(p);
                        }
                        self.h2_stream_failed(
                            i,
                            s as u32,
                            now,
                            ErrorKind::Timeout,
                            Why::Late("no free stream on the connection"),
                        );
                    }
                }
            }
        }
        next
    }

    /// The thread's HTTP/2 counts, for its final report.
    pub(super) fn h2_final(&mut self) -> Option<H2Counts> {
        self.sh.streams.map(|_| std::mem::take(&mut self.h2c))
    }
}
