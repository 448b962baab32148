//! One connection's byte stream, plain or under TLS, as non-blocking `Read + Write`: what the
//! protocols of a stream load (tungstenite's WebSocket context, the SSE and HTTP/2 parsers)
//! read from and write to. A read or write that would block is `WouldBlock`; under TLS, bytes
//! rustls cannot hand to the socket yet stay in its buffer until [`Transport::flush_tls`].

use crate::conn::TlsFail;
use crate::sys::Socket;
use rustls::ClientConnection;
use std::io::{self, Read, Write};

/// A connected socket and, for `wss://` and gRPC over TLS, its TLS session.
#[derive(Debug)]
pub struct Transport {
    /// The socket.
    pub sock: Socket,
    /// The TLS session, when the URL says so.
    pub tls: Option<Box<ClientConnection>>,
    /// The peer's FIN was read (under TLS: the socket's end).
    pub eof: bool,
}

/// What a step of the TLS handshake produced.
#[derive(Debug)]
pub enum Handshake {
    /// Done: the session is ready.
    Done,
    /// Blocked: wait for readiness.
    Again,
    /// It failed.
    Failed(TlsFail),
}

impl Transport {
    /// A plain connection.
    pub fn plain(sock: Socket) -> Transport {
        Transport {
            sock,
            tls: None,
            eof: false,
        }
    }

    /// Drives the TLS handshake as far as the socket allows.
    pub fn handshake(&mut self) -> Handshake {
        let Some(tls) = self.tls.as_deref_mut() else {
            return Handshake::Done;
        };
        let mut io = SockIo(&self.sock);
        loop {
            while tls.wants_write() {
                match tls.write_tls(&mut io) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Handshake::Again,
                    Err(e) => return Handshake::Failed(TlsFail::Io(e)),
                }
            }
            if !tls.is_handshaking() {
                // Frames of many messages go through the TLS buffer; never refuse them.
                tls.set_buffer_limit(None);
                return Handshake::Done;
            }
            match tls.read_tls(&mut io) {
                Ok(0) => return Handshake::Failed(TlsFail::Eof),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Handshake::Again,
                Err(e) => return Handshake::Failed(TlsFail::Io(e)),
            }
            if let Err(e) = tls.process_new_packets() {
                let _ = tls.write_tls(&mut io);
                return Handshake::Failed(TlsFail::Rustls(e));
            }
        }
    }

    /// Writes what TLS holds for the socket, as far as it takes it.
    pub fn flush_tls(&mut self) -> io::Result<()> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return Ok(());
        };
        let mut io = SockIo(&self.sock);
        while tls.wants_write() {
            tls.write_tls(&mut io)?;
        }
        Ok(())
    }

    /// The ALPN protocol the server chose.
    pub fn alpn(&self) -> Option<&[u8]> {
        self.tls.as_ref().and_then(|t| t.alpn_protocol())
    }
}

/// The socket as `Read + Write` for rustls.
struct SockIo<'a>(&'a Socket);

impl Read for SockIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for SockIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for Transport {
    /// Plaintext bytes; `Ok(0)` at the peer's end, `WouldBlock` when nothing more is there.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return loop {
                match self.sock.read(buf) {
                    Ok(0) => {
                        self.eof = true;
                        break Ok(0);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => break r,
                }
            };
        };
        let mut io = SockIo(&self.sock);
        loop {
            match tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    // The peer closed without close_notify: as a FIN for the protocol above.
                    self.eof = true;
                    return Ok(0);
                }
                Err(e) => return Err(e),
            }
            match tls.read_tls(&mut io) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(0);
                }
                Ok(_) => {}
                Err(e) => return Err(e),
            }
            if let Err(e) = tls.process_new_packets() {
                let _ = tls.write_tls(&mut io);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    TlsFail::Rustls(e).to_string(),
                ));
            }
            // Post-handshake messages (key updates) may need an answer.
            while tls.wants_write() {
                if tls.write_tls(&mut io).is_err() {
                    break;
                }
            }
        }
    }
}

impl Write for Transport {
    /// Plain: one `send`. TLS: into the session (always whole), then as much to the socket as
    /// it takes; the rest waits for [`Transport::flush_tls`].
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.tls.as_deref_mut() {
            None => loop {
                match self.sock.write(buf) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => break r,
                }
            },
            Some(tls) => {
                tls.writer().write_all(buf)?;
                match self.flush_tls() {
                    Ok(()) => Ok(buf.len()),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(buf.len()),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Under TLS, what the session holds must reach the socket: `WouldBlock` until it has.
    fn flush(&mut self) -> io::Result<()> {
        self.flush_tls()
    }
}
