//! The epoll side of a worker (also the TLS path). Sockets are registered once, edge-triggered
//! for both directions; the next request is written straight from the read handler, so the hot
//! path is one `read` and one `send` per request and never an `epoll_ctl` (wrk re-arms EPOLLOUT
//! twice per request).

use super::{connect_kind, now_ns, Io, Waited, Why, Worker};
use crate::conn::{Recv, State, Step, TlsFail};
use crate::sys::{self, Socket};
use model::ErrorKind;
use std::io;

impl Worker<'_> {
    /// Waits for readiness and handles every event.
    pub(super) fn epoll_wait(&mut self, timeout_ns: u64) -> io::Result<Waited> {
        let Io::Epoll { epoll, events, .. } = &mut self.io else {
            unreachable!("epoll worker");
        };
        let n = epoll.wait(events, timeout_ns)?;
        let waited = Waited {
            handled: n,
            reads: events[..n]
                .iter()
                .filter(|e| { e.flags }.bits() & sys::IN != 0)
                .count(),
            full: n == events.len(),
            woke: now_ns(&self.sh.origin),
        };
        for k in 0..n {
            let Io::Epoll { events, .. } = &self.io else {
                unreachable!("epoll worker");
            };
            let ev = events[k];
            // The event is packed (the kernel's layout): its fields are copied out, not borrowed.
            let (token, flags) = ({ ev.data }.u64(), { ev.flags }.bits());
            self.event((token & 0xffff_ffff) as usize, (token >> 32) as u32, flags);
        }
        Ok(waited)
    }

    /// Registers a new socket for connection `i`.
    pub(super) fn epoll_watch(&mut self, i: usize) -> io::Result<()> {
        let Io::Epoll { epoll, .. } = &self.io else {
            unreachable!("epoll worker");
        };
        let c = &self.conns[i];
        let Some(sock) = &c.sock else {
            return Ok(());
        };
        epoll.add(sock, ((c.gen as u64) << 32) | i as u64)
    }

    /// Writes (the rest of) the request.
    #[inline]
    pub(super) fn epoll_write(&mut self, i: usize, now: u64) {
        if self.sh.streams.is_some() {
            self.h2_flush(i, now);
            return;
        }
        match self.conns[i].send(&self.sh.target.request) {
            Step::Done => self.conns[i].state = State::Reading,
            Step::Again => {}
            Step::Failed(e) => self.fail(i, now, ErrorKind::Write, Why::Io(e)),
            Step::Tls(t) => self.fail(i, now, ErrorKind::Tls, Why::Tls(t)),
        }
    }

    /// Drives the TLS handshake of connection `i`.
    pub(super) fn handshake(&mut self, i: usize, now: u64) {
        match self.conns[i].handshake() {
            Step::Done => self.ready(i, now),
            Step::Again => {}
            Step::Failed(e) => {
                self.fail(i, now, ErrorKind::Tls, Why::Tls(TlsFail::Io(e)));
            }
            Step::Tls(t) => self.fail(i, now, ErrorKind::Tls, Why::Tls(t)),
        }
    }

    fn event(&mut self, i: usize, gen: u32, events: u32) {
        let Some(c) = self.conns.get_mut(i) else {
            return;
        };
        if c.gen != gen || c.sock.is_none() {
            return;
        }
        c.drained = false;
        c.hup = events & sys::HUP != 0;
        match c.state {
            State::Connecting => {
                if events & (sys::OUT | sys::IN) != 0 {
                    let now = now_ns(&self.sh.origin);
                    match c.sock.as_ref().map(Socket::take_error) {
                        Some(Ok(())) => {
                            self.connected(i, now);
                            self.h2_read_early(i, gen);
                        }
                        Some(Err(e)) => self.fail(i, now, connect_kind(&e), Why::Connect(e)),
                        None => {}
                    }
                }
            }
            State::Handshake => {
                let now = now_ns(&self.sh.origin);
                self.handshake(i, now);
                self.h2_read_early(i, gen);
            }
            State::Writing => {
                if events & sys::OUT != 0 {
                    let now = now_ns(&self.sh.origin);
                    self.epoll_write(i, now);
                }
                if events & sys::IN != 0 && self.conns[i].gen == gen {
                    self.read(i);
                }
            }
            State::Reading | State::Idle => {
                if events & sys::IN != 0 {
                    self.read(i);
                }
            }
            State::Closed | State::Backoff => {}
        }
    }

    /// HTTP/2: the server speaks first (its SETTINGS), and its bytes may have come with the
    /// readiness that finished the connect or the handshake (or sit in the TLS buffer): read
    /// them now, as no new edge will announce them.
    fn h2_read_early(&mut self, i: usize, gen: u32) {
        if self.sh.streams.is_none() {
            return;
        }
        let c = &self.conns[i];
        if c.gen == gen && matches!(c.state, State::Idle | State::Writing) {
            self.read(i);
        }
    }

    /// Reads everything the socket has, completing responses as they end.
    fn read(&mut self, i: usize) {
        let Io::Epoll { buf, .. } = &mut self.io else {
            unreachable!("epoll worker");
        };
        // The shared read buffer leaves `self` while the bytes are handled.
        let mut buf = std::mem::take(buf);
        let gen = self.conns[i].gen;
        loop {
            let c = &mut self.conns[i];
            if c.gen != gen {
                break;
            }
            let hup = c.hup;
            match c.recv(&mut buf) {
                Recv::Again => break,
                Recv::Data(n) => {
                    if !self.on_data(i, &buf[..n], hup) {
                        break;
                    }
                }
                Recv::Eof => {
                    self.on_eof(i);
                    break;
                }
                Recv::Failed(e) => {
                    self.on_read_failed(i, Why::Io(e));
                    break;
                }
                Recv::Tls(t) => {
                    self.on_read_failed(i, Why::Tls(t));
                    break;
                }
            }
        }
        if let Io::Epoll { buf: slot, .. } = &mut self.io {
            *slot = buf;
        }
    }
}
