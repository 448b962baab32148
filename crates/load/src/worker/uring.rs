//! The io_uring side of a worker (plain HTTP). Each loop turn is one `io_uring_enter` that
//! submits the sends queued since the last turn and reaps every completion: bytes from the
//! connections' multishot receives (parsed straight out of the provided buffers, which go
//! back at once), finished sends, finished connects. Connections whose response completed go
//! on only after the whole batch is in, so a close that arrived with a response is seen before
//! the connection would be reused, as with epoll.

use super::{connect_kind, now_ns, Io, Waited, Why, Worker};
use crate::conn::State;
use crate::uring::{token, untoken, Op};
use model::ErrorKind;
use std::io;
use std::os::fd::RawFd;

impl Worker<'_> {
    /// Submits, waits, and handles every completion (the completion queue is emptied, so
    /// never `full`).
    pub(super) fn uring_wait(&mut self, timeout_ns: u64) -> io::Result<Waited> {
        let Io::Uring { ring, done, .. } = &mut self.io else {
            unreachable!("uring worker");
        };
        ring.wait(timeout_ns, done)?;
        let woke = now_ns(&self.sh.origin);
        self.batch_now = Some(woke);
        let n = done.len();
        let reads = done
            .iter()
            .filter(|d| untoken(d.user_data).0 == Op::Recv as u8)
            .count();
        for k in 0..n {
            let Io::Uring { done, .. } = &self.io else {
                unreachable!("uring worker");
            };
            let d = done[k];
            let (op, gen, i) = untoken(d.user_data);
            let current = self
                .conns
                .get(i)
                .is_some_and(|c| c.sock.is_some() && c.gen & 0xff_ffff == gen);
            if op == Op::Recv as u8 {
                self.recv_done(i, current, d.res, d.more(), d.buffer());
            } else if op == Op::Send as u8 && current {
                self.send_done(i, d.res);
            } else if op == Op::Connect as u8 && current {
                self.connect_done(i);
            }
        }
        self.batch_now = None;
        // Connections that completed a response in this batch go on now: their requests are
        // timed from here, just before the enter that sends them.
        let now = now_ns(&self.sh.origin);
        loop {
            let Io::Uring { deferred, .. } = &mut self.io else {
                unreachable!("uring worker");
            };
            let Some(i) = deferred.pop() else {
                break;
            };
            self.proceed(i, now);
        }
        Ok(Waited {
            handled: n,
            reads,
            full: false,
            woke,
        })
    }

    fn recv_done(&mut self, i: usize, current: bool, res: i32, more: bool, bid: Option<u16>) {
        if current {
            if res > 0 {
                let data: &[u8] = match (&self.io, bid) {
                    (Io::Uring { ring, .. }, Some(b)) => {
                        let bytes = ring.bytes(b, res as usize);
                        // SAFETY: the kernel filled buffer `b` with `res` bytes and leaves it
                        // alone until it is recycled, which happens only below, after
                        // `on_data` is done with the slice. The memory belongs to the ring,
                        // boxed in `self.io`, which `on_data` neither replaces nor drops.
                        unsafe { &*bytes }
                    }
                    _ => &[][..],
                };
                let alive = self.on_data(i, data, false);
                if alive && !more {
                    self.rearm(i);
                }
            } else if res == 0 {
                self.on_eof(i);
            } else if res == -libc::ENOBUFS {
                // Every buffer was in use: the receive stopped; start it again.
                self.rearm(i);
            } else {
                self.on_read_failed(i, Why::Io(io::Error::from_raw_os_error(-res)));
            }
        }
        if let (Io::Uring { ring, .. }, Some(b)) = (&mut self.io, bid) {
            ring.recycle(b);
        }
    }

    fn rearm(&mut self, i: usize) {
        if let Err(e) = self.uring_arm_recv(i) {
            self.on_read_failed(i, Why::Io(e));
        }
    }

    fn send_done(&mut self, i: usize, res: i32) {
        let now = now_ns(&self.sh.origin);
        if self.conns[i].state != State::Writing {
            return;
        }
        if res < 0 {
            let e = io::Error::from_raw_os_error(-res);
            self.fail(i, now, ErrorKind::Write, Why::Io(e));
            return;
        }
        self.conns[i].wpos += res as usize;
        if self.conns[i].wpos < self.sh.target.request.len() {
            self.uring_write(i, now);
        } else {
            self.conns[i].state = State::Reading;
        }
    }

    fn connect_done(&mut self, i: usize) {
        if self.conns[i].state != State::Connecting {
            return;
        }
        let now = now_ns(&self.sh.origin);
        match self.conns[i].sock.as_ref().map(|s| s.take_error()) {
            Some(Ok(())) => self.connected(i, now),
            Some(Err(e)) => self.fail(i, now, connect_kind(&e), Why::Connect(e)),
            None => {}
        }
    }

    /// Asks the ring to report when the connect of connection `i` finishes.
    pub(super) fn uring_watch_connect(&mut self, i: usize, fd: RawFd) -> io::Result<()> {
        let user_data = token(Op::Connect, self.conns[i].gen, i);
        let Io::Uring { ring, .. } = &mut self.io else {
            unreachable!("uring worker");
        };
        ring.connect_done(fd, user_data)
    }

    /// Arms the multishot receive of connection `i`.
    pub(super) fn uring_arm_recv(&mut self, i: usize) -> io::Result<()> {
        let c = &self.conns[i];
        let Some(fd) = c.sock.as_ref().map(|s| s.fd()) else {
            return Ok(());
        };
        let user_data = token(Op::Recv, c.gen, i);
        let Io::Uring { ring, .. } = &mut self.io else {
            unreachable!("uring worker");
        };
        ring.recv(fd, user_data)
    }

    /// Queues a send of the rest of the request.
    pub(super) fn uring_write(&mut self, i: usize, now: u64) {
        let c = &self.conns[i];
        let Some(fd) = c.sock.as_ref().map(|s| s.fd()) else {
            return;
        };
        let req = &self.sh.target.request[c.wpos..];
        let user_data = token(Op::Send, c.gen, i);
        let Io::Uring { ring, .. } = &mut self.io else {
            unreachable!("uring worker");
        };
        // SAFETY: the request bytes live in `Shared`, which the worker borrows shared (so
        // nobody mutates it) for its whole life: they outlive every send and the ring itself.
        if let Err(e) = unsafe { ring.send(fd, req.as_ptr(), req.len(), user_data) } {
            self.fail(i, now, ErrorKind::Write, Why::Io(e));
        }
    }
}
