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
    Failed(io::Error),
    /// The TLS layer failed.
    Tls(TlsFail),
}

/// What a send or handshake step produced.
#[derive(Debug)]
pub enum Step {
    /// Finished.
    Done,
    /// Blocked: wait for the next readiness event.
    Again,
    /// The socket failed.
    Failed(io::Error),
    /// The TLS layer failed.
    Tls(TlsFail),
}

/// Why the TLS layer failed: kept as the values the libraries returned (no formatting, no
/// allocation), so the worker can turn the first one of a thread into a message.
#[derive(Debug)]
pub enum TlsFail {
    /// rustls refused (bad certificate, alert from the peer, protocol error...).
    Rustls(rustls::Error),
    /// The socket failed under TLS.
    Io(io::Error),
    /// The peer closed the connection before the handshake finished.
    Eof,
}

impl std::fmt::Display for TlsFail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // rustls prints webpki's errors wrapped as `Other(OtherError(..))`: unwrap them.
            TlsFail::Rustls(rustls::Error::InvalidCertificate(
                rustls::CertificateError::Other(o),
            )) => write!(f, "invalid peer certificate: {}", o.0),
            TlsFail::Rustls(rustls::Error::AlertReceived(
                rustls::AlertDescription::NoApplicationProtocol,
            )) => f.write_str(
                "the server does not offer h2 in ALPN (it answered the no_application_protocol alert)",
            ),
            TlsFail::Rustls(e) => write!(f, "{e}"),
            TlsFail::Io(e) => write!(f, "socket error under TLS: {e}"),
            TlsFail::Eof => f.write_str("peer closed the connection during the TLS handshake"),
        }
    }
}

/// The error `Step::Failed` reports when a slot has no socket (cannot happen in a run).
fn no_socket() -> io::Error {
    io::Error::from_raw_os_error(libc::EBADF)
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
    /// Response bytes read for the request in flight (for its per-request record).
    pub read_bytes: u32,
    /// Timeout or backoff deadline, ns since the origin.
    pub deadline: u64,
    /// The socket has no more bytes until the next readiness event.
    pub drained: bool,
    /// The last readiness event said the peer closed or the socket failed: read to the end.
    pub hup: bool,
    /// Shut the socket down before closing it (io_uring: ends the multishot receive, which
    /// holds its own reference to the socket).
    pub shutdown_on_close: bool,
    /// HTTP/2: the session and its stream slots (the slots outlive reconnects).
    pub h2: Option<Box<H2>>,
}

/// One request slot of an HTTP/2 connection: a stream in flight, or a request waiting for one.
#[derive(Debug, Clone, Copy, Default)]
pub struct Slot {
    /// A request occupies the slot.
    pub busy: bool,
    /// Its stream is open on the current session (else it waits for the connection or for
    /// the server's concurrency limit).
    pub opened: bool,
    /// Intended send time, ns since the origin.
    pub intended: u64,
    /// When the engine issued it, ns since the origin.
    pub issued: u64,
    /// Timeout deadline, ns since the origin.
    pub deadline: u64,
}

/// The HTTP/2 side of a connection slot.
#[derive(Debug)]
pub struct H2 {
    /// The session on the current socket (none before the TLS handshake or after a close).
    pub codec: Option<http2::ClientConn>,
    /// `-m` request slots.
    pub slots: Vec<Slot>,
    /// Free slot indices.
    pub free: Vec<u32>,
    /// Busy slots whose stream is not open yet, oldest first.
    pub pending: std::collections::VecDeque<u32>,
    /// The server must acknowledge our SETTINGS by then, ns since the origin.
    pub settings_deadline: u64,
    /// Bytes of the codec's output already written (plain text).
    pub wpos: usize,
    /// Output waits to be flushed at the end of the loop turn.
    pub dirty: bool,
    /// Streams opened since the last flush (their HEADERS wait in the codec's output).
    pub queued: u32,
    /// When the first of them was opened, ns since the origin (a held flush waits at most
    /// `worker::H2_HOLD_NS` from then).
    pub queued_since: u64,
}

impl H2 {
    /// `streams` free slots and no session.
    pub fn new(streams: u32) -> H2 {
        H2 {
            codec: None,
            slots: vec![Slot::default(); streams as usize],
            free: (0..streams).rev().collect(),
            pending: std::collections::VecDeque::with_capacity(streams as usize),
            settings_deadline: 0,
            wpos: 0,
            dirty: false,
            queued: 0,
            queued_since: 0,
        }
    }
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
            read_bytes: 0,
            deadline: 0,
            drained: false,
            hup: false,
            shutdown_on_close: false,
            h2: None,
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
        if let Some(h) = &mut self.h2 {
            h.codec = None;
            h.wpos = 0;
            h.dirty = false;
            h.queued = 0;
        }
    }

    /// Drives the TLS handshake as far as the socket allows.
    pub fn handshake(&mut self) -> Step {
        let (Some(sock), Some(tls)) = (&self.sock, &mut self.tls) else {
            return Step::Failed(no_socket());
        };
        let mut io = SockIo { sock, short: false };
        loop {
            while tls.wants_write() {
                match tls.write_tls(&mut io) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Again,
                    Err(e) => return Step::Tls(TlsFail::Io(e)),
                }
            }
            if !tls.is_handshaking() {
                return Step::Done;
            }
            match tls.read_tls(&mut io) {
                Ok(0) => return Step::Tls(TlsFail::Eof),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Again,
                Err(e) => return Step::Tls(TlsFail::Io(e)),
            }
            if let Err(e) = tls.process_new_packets() {
                // Send the alert if the socket takes it; the connection is done either way.
                let _ = tls.write_tls(&mut io);
                return Step::Tls(TlsFail::Rustls(e));
            }
        }
    }

    /// Sends `req` from `wpos` on (plain) or hands it to TLS and flushes.
    #[inline]
    pub fn send(&mut self, req: &[u8]) -> Step {
        let Some(sock) = &self.sock else {
            return Step::Failed(no_socket());
        };
        match &mut self.tls {
            None => {
                while self.wpos < req.len() {
                    match sock.write(&req[self.wpos..]) {
                        Ok(n) => self.wpos += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Again,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Step::Failed(e),
                    }
                }
                Step::Done
            }
            Some(tls) => {
                if self.wpos == 0 {
                    if let Err(e) = tls.writer().write_all(req) {
                        return Step::Tls(TlsFail::Io(e));
                    }
                    self.wpos = req.len();
                }
                let mut io = SockIo { sock, short: false };
                while tls.wants_write() {
                    match tls.write_tls(&mut io) {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Again,
                        Err(e) => return Step::Failed(e),
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
                    Err(e) => Recv::Failed(e),
                };
            },
            Some(tls) => loop {
                match tls.reader().read(buf) {
                    Ok(0) => return Recv::Eof,
                    Ok(n) => return Recv::Data(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Recv::Eof,
                    Err(e) => return Recv::Failed(e),
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
                    Err(e) => return Recv::Failed(e),
                }
                if let Err(e) = tls.process_new_packets() {
                    let _ = tls.write_tls(&mut io);
                    return Recv::Tls(TlsFail::Rustls(e));
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
