//! One client connection: its socket, optional TLS session, response parser and the request
//! in flight. The worker drives the state machine; this file holds the I/O steps, each a
//! non-blocking system call or two that report what happened without deciding what it means.

use crate::codec::ResponseParser;
use crate::sys::Socket;
use rustls::ClientConnection;
use std::io::{self, Read, Write};

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No socket.
    Closed,
    /// Waiting before reconnecting after a failed connect (closed loop).
    Backoff,
    /// TCP connect in progress.
    Connecting,
    /// TLS handshake in progress.
    Handshake,
    /// Connected, nothing in flight.
    Idle,
    /// Sending the request (part of it did not fit in the socket buffer).
    Writing,
    /// Request sent, reading the response.
    Reading,
}

/// What a receive step produced.
#[derive(Debug)]
pub enum Recv {
    /// Bytes of the response (plaintext) in the buffer.
    Data(usize),
    /// Nothing more until the next readiness event.
    Again,
    /// The peer closed the stream.
    Eof,
    /// The socket failed (reset...).
    Failed,
    /// The TLS layer failed.
    Tls,
}

/// What a send or handshake step produced.
#[derive(Debug)]
pub enum Step {
    /// Finished.
    Done,
    /// Blocked: wait for the next readiness event.
    Again,
    /// The socket failed.
    Failed,
    /// The TLS layer failed.
    Tls,
}

/// A socket as `Read + Write` for rustls, noting whether the last read drained it.
struct SockIo<'a> {
    sock: &'a Socket,
    short: bool,
}

impl Read for SockIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

impl Write for SockIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One connection slot. It keeps its parser (and the parser's line buffer) across reconnects.
#[derive(Debug)]
pub struct Conn {
    /// The socket, when open.
    pub sock: Option<Socket>,
    /// The TLS session, for https.
    pub tls: Option<Box<ClientConnection>>,
    /// Bumped whenever the socket changes, so stale readiness events are ignored.
    pub gen: u32,
    /// Life-cycle state.
    pub state: State,
    /// A response already completed on this socket (it is a reused keep-alive connection).
    pub reused: bool,
    /// A request is in flight on this slot (possibly waiting for the connect).
    pub busy: bool,
    /// Bytes of the request written so far (plain text).
    pub wpos: usize,
    /// The response parser.
    pub parser: ResponseParser,
    /// Intended send time, ns since the origin (the issue time in closed loop).
    pub intended: u64,
    /// When the engine issued the request, ns since the origin.
    pub issued: u64,
    /// Timeout or backoff deadline, ns since the origin.
    pub deadline: u64,
    /// The socket has no more bytes until the next readiness event.
    pub drained: bool,
    /// The last readiness event said the peer closed or the socket failed: read to the end.
    pub hup: bool,
    /// Shut the socket down before closing it (io_uring: ends the multishot receive, which
    /// holds its own reference to the socket).
    pub shutdown_on_close: bool,
}

impl Conn {
    /// A closed slot.
    pub fn new() -> Conn {
        Conn {
            sock: None,
            tls: None,
            gen: 0,
            state: State::Closed,
            reused: false,
            busy: false,
            wpos: 0,
            parser: ResponseParser::new(),
            intended: 0,
            issued: 0,
            deadline: 0,
            drained: false,
            hup: false,
            shutdown_on_close: false,
        }
    }

    /// Closes the socket (if any) and forgets the TLS session.
    pub fn close(&mut self) {
        if self.shutdown_on_close {
            if let Some(s) = &self.sock {
                s.shutdown();
            }
        }
        self.sock = None;
        self.tls = None;
        self.gen = self.gen.wrapping_add(1);
        self.state = State::Closed;
        self.reused = false;
        self.drained = false;
        self.hup = false;
    }

    /// Drives the TLS handshake as far as the socket allows.
    pub fn handshake(&mut self) -> Step {
        let (Some(sock), Some(tls)) = (&self.sock, &mut self.tls) else {
            return Step::Failed;
        };
        let mut io = SockIo { sock, short: false };
        loop {
            while tls.wants_write() {
                match tls.write_tls(&mut io) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Again,
                    Err(_) => return Step::Tls,
                }
            }
            if !tls.is_handshaking() {
                return Step::Done;
            }
            match tls.read_tls(&mut io) {
                Ok(0) => return Step::Tls,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Again,
                Err(_) => return Step::Tls,
            }
            if tls.process_new_packets().is_err() {
                // Send the alert if the socket takes it; the connection is done either way.
                let _ = tls.write_tls(&mut io);
                return Step::Tls;
            }
        }
    }

    /// Sends `req` from `wpos` on (plain) or hands it to TLS and flushes.
    #[inline]
    pub fn send(&mut self, req: &[u8]) -> Step {
        let Some(sock) = &self.sock else {
            return Step::Failed;
        };
        match &mut self.tls {
            None => {
                while self.wpos < req.len() {
                    match sock.write(&req[self.wpos..]) {
                        Ok(n) => self.wpos += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Again,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => return Step::Failed,
                    }
                }
                Step::Done
            }
            Some(tls) => {
                if self.wpos == 0 {
                    if tls.writer().write_all(req).is_err() {
                        return Step::Tls;
                    }
                    self.wpos = req.len();
                }
                let mut io = SockIo { sock, short: false };
                while tls.wants_write() {
                    match tls.write_tls(&mut io) {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Again,
                        Err(_) => return Step::Failed,
                    }
                }
                Step::Done
            }
        }
    }

    /// Reads the next piece of response bytes into `buf`. Returns [`Recv::Again`] without a
    /// system call once the socket is known to be drained (edge-triggered readiness).
    #[inline]
    pub fn recv(&mut self, buf: &mut [u8]) -> Recv {
        let Some(sock) = &self.sock else {
            return Recv::Again;
        };
        match &mut self.tls {
            None => loop {
                if self.drained {
                    return Recv::Again;
                }
                return match sock.read(buf) {
                    Ok(0) => Recv::Eof,
                    Ok(n) => {
                        self.drained = n < buf.len() && !self.hup;
                        Recv::Data(n)
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.drained = true;
                        Recv::Again
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => Recv::Failed,
                };
            },
            Some(tls) => loop {
                match tls.reader().read(buf) {
                    Ok(0) => return Recv::Eof,
                    Ok(n) => return Recv::Data(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Recv::Eof,
                    Err(_) => return Recv::Failed,
                }
                if self.drained {
                    return Recv::Again;
                }
                let mut io = SockIo { sock, short: false };
                match tls.read_tls(&mut io) {
                    Ok(0) => self.drained = true,
                    Ok(_) => self.drained = io.short && !self.hup,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.drained = true;
                        return Recv::Again;
                    }
                    Err(_) => return Recv::Failed,
                }
                if tls.process_new_packets().is_err() {
                    let _ = tls.write_tls(&mut io);
                    return Recv::Tls;
                }
                // Post-handshake messages (key updates) may need an answer.
                while tls.wants_write() {
                    if tls.write_tls(&mut io).is_err() {
                        break;
                    }
                }
            },
        }
    }
}
