//! A small blocking HTTP/1.1 client for tests and control traffic (the backend's control
//! client, nginx's admin server, fixture checks). Not for load: the engine has its own loop.
//! Responses are framed by the same [`ResponseParser`] the engine uses, so Content-Length,
//! chunked and close-delimited bodies all read in full.

use crate::response::{Eof, Progress, ResponseParser};
use crate::Sink;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One response as the client read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The final status code.
    pub status: u16,
    /// Header lines of the final response (and trailers), in order, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The decoded body.
    pub body: Vec<u8>,
    /// Bytes the response took on the wire (heads and framing included).
    pub wire: usize,
}

impl Reply {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// What to send: a method, a target, extra headers and a body. `Host` is added unless given,
/// and `Content-Length` whenever there is a body or the method usually carries one.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The method (`GET`, `POST`...).
    pub method: &'a str,
    /// The request target (`/path?query`).
    pub path: &'a str,
    /// Extra header lines, name and value.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body (empty for none).
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    /// A GET of `path` with no extra headers.
    pub fn get(path: &'a str) -> Request<'a> {
        Request {
            method: "GET",
            path,
            headers: &[],
            body: &[],
        }
    }

    /// The request's bytes, with `Host: host` unless a Host header is given, and
    /// `Connection: close` if `close`.
    pub fn encode(&self, host: &str, close: bool) -> Vec<u8> {
        let mut out = format!("{} {} HTTP/1.1\r\n", self.method, self.path);
        let has = |n: &str| self.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
        if !has("host") {
            out.push_str(&format!("Host: {host}\r\n"));
        }
        for (k, v) in self.headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        let wants_length = matches!(self.method, "POST" | "PUT" | "PATCH");
        if (!self.body.is_empty() || wants_length) && !has("content-length") {
            out.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        if close && !has("connection") {
            out.push_str("Connection: close\r\n");
        }
        out.push_str("\r\n");
        let mut out = out.into_bytes();
        out.extend_from_slice(self.body);
        out
    }
}

/// Keeps what the parser shows (header lines as text, the decoded body): the sink of every
/// one-shot client, this one and the load engine's probe.
#[derive(Debug, Default)]
pub struct Keep {
    /// Header lines (and trailers), in order.
    pub headers: Vec<(String, String)>,
    /// The decoded body.
    pub body: Vec<u8>,
}

impl Sink for Keep {
    fn header(&mut self, name: &[u8], value: &[u8]) {
        self.headers.push((
            String::from_utf8_lossy(name).into_owned(),
            String::from_utf8_lossy(value).into_owned(),
        ));
    }
    fn body(&mut self, data: &[u8]) {
        self.body.extend_from_slice(data);
    }
}

/// A connection that can carry several requests in turn (keep-alive, or pipelined with
/// [`Conn::send`] and [`Conn::read_response`]).
pub struct Conn {
    stream: TcpStream,
    host: String,
    /// Bytes read but not yet parsed (the start of the next response).
    buf: Vec<u8>,
    parser: ResponseParser,
}

impl Conn {
    /// Connects to `addr` within `timeout`; reads and writes then time out after `timeout` too.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(Conn {
            stream,
            host: addr.to_string(),
            buf: Vec::new(),
            parser: ResponseParser::new(),
        })
    }

    /// The socket, to change its timeouts or look at it.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Sends `req` (keep-alive) without reading the answer.
    pub fn send(&mut self, req: &Request) -> io::Result<()> {
        let bytes = req.encode(&self.host, false);
        self.stream.write_all(&bytes)
    }

    /// Sends bytes as they are: for tests that mean to send something odd.
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends `req` and reads its response.
    pub fn request(&mut self, req: &Request) -> io::Result<Reply> {
        self.send(req)?;
        self.read_response(req.method.eq_ignore_ascii_case("HEAD"))
    }

    /// Sends `req` with `Connection: close` and reads its response: the connection's last.
    pub fn request_once(mut self, req: &Request) -> io::Result<Reply> {
        let bytes = req.encode(&self.host, true);
        self.stream.write_all(&bytes)?;
        self.read_response(req.method.eq_ignore_ascii_case("HEAD"))
    }

    /// Reads the next response in full; `head_request` says it answers a HEAD (no body).
    /// Interim 1xx responses are skipped. Bytes after it stay for the next call.
    pub fn read_response(&mut self, head_request: bool) -> io::Result<Reply> {
        self.parser.reset(head_request);
        let mut keep = Keep::default();
        let mut wire = 0;
        let mut pending = std::mem::take(&mut self.buf);
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            if !pending.is_empty() {
                let (n, progress) = self
                    .parser
                    .feed(&pending, &mut keep)
                    .map_err(|m| io::Error::new(io::ErrorKind::InvalidData, m.0))?;
                wire += n;
                if let Progress::Done(r) = progress {
                    self.buf = pending.split_off(n);
                    return Ok(reply(r.status, keep, wire));
                }
                pending.clear();
            }
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return match self.parser.eof() {
                    Eof::Done(r) => Ok(reply(r.status, keep, wire)),
                    Eof::Empty => Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed before a response",
                    )),
                    Eof::Truncated => Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed mid-response",
                    )),
                };
            }
            pending.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Parses one whole response from `bytes` (read until the server closed, say, or from a TLS
/// stream the client drove itself); `head_request` says it answers a HEAD.
pub fn parse_reply(bytes: &[u8], head_request: bool) -> io::Result<Reply> {
    let mut p = ResponseParser::new();
    p.reset(head_request);
    let mut keep = Keep::default();
    let (n, progress) = p
        .feed(bytes, &mut keep)
        .map_err(|m| io::Error::new(io::ErrorKind::InvalidData, m.0))?;
    let status = match progress {
        Progress::Done(r) => r.status,
        Progress::More => match p.eof() {
            Eof::Done(r) => r.status,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the bytes end mid-response",
                ))
            }
        },
    };
    Ok(reply(status, keep, n))
}

fn reply(status: u16, keep: Keep, wire: usize) -> Reply {
    Reply {
        status,
        headers: keep.headers,
        body: keep.body,
        wire,
    }
}

/// Sends one request on a fresh connection (`Connection: close`) and reads the response; the
/// connect and every read and write time out after `timeout`.
pub fn request(addr: SocketAddr, req: &Request, timeout: Duration) -> io::Result<Reply> {
    Conn::connect(addr, timeout)?.request_once(req)
}

/// GETs `path` from `addr` on a fresh connection: [`request`] for the common case.
pub fn get(addr: SocketAddr, path: &str, timeout: Duration) -> io::Result<Reply> {
    request(addr, &Request::get(path), timeout)
}
