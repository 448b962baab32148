//! HTTP/1.1 request framing, kept apart from I/O so it can be tested without sockets: the
//! request head (what the fleet needs of it) and a body decoder that discards bodies sent with
//! Content-Length or chunked transfer coding.

/// At most this many request headers; more is answered 431.
const MAX_HEADERS: usize = 48;

/// What the fleet needs from a request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReqHead {
    /// Bytes the head took, CRLFCRLF included.
    pub len: usize,
    /// Byte range of the request target within the parsed buffer.
    pub path: (usize, usize),
    /// HEAD: answer without a body.
    pub head_only: bool,
    /// The connection may carry another request after this one.
    pub keep_alive: bool,
    /// HTTP/1.0 with `Connection: keep-alive`: the response must say so too.
    pub ka_header: bool,
    /// How the body is framed.
    pub body: BodyKind,
    /// `Expect: 100-continue` was sent.
    pub expect_continue: bool,
    /// `X-Backend-Debug` was sent: the response reports the emulated delay it was given.
    pub debug: bool,
}

/// How a request body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    None,
    /// Exactly this many bytes (Content-Length).
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
}

/// Why a head was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// Malformed: 400.
    Bad,
    /// Too many headers: 431.
    TooLarge,
}

/// Parses one request head from the start of `buf`: `Ok(None)` when more bytes are needed.
pub fn parse_head(buf: &[u8]) -> Result<Option<ReqHead>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
        Err(_) => return Err(HeadError::Bad),
    };
    let path = req.path.unwrap_or("/");
    let start = path.as_ptr() as usize - buf.as_ptr() as usize;
    let http11 = req.version == Some(1);
    let mut conn_close = false;
    let mut conn_keep = false;
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut expect_continue = false;
    let mut debug = false;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let v = parse_decimal(h.value).ok_or(HeadError::Bad)?;
            if length.is_some_and(|l| l != v) {
                return Err(HeadError::Bad);
            }
            length = Some(v);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            let last = h.value.rsplit(|&c| c == b',').next().unwrap_or(b"");
            if !trim(last).eq_ignore_ascii_case(b"chunked") {
                return Err(HeadError::Bad);
            }
            chunked = true;
        } else if name.eq_ignore_ascii_case(b"connection") {
            for tok in h.value.split(|&c| c == b',') {
                let tok = trim(tok);
                conn_close |= tok.eq_ignore_ascii_case(b"close");
                conn_keep |= tok.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case(b"expect") {
            expect_continue = trim(h.value).eq_ignore_ascii_case(b"100-continue");
        } else if name.eq_ignore_ascii_case(b"x-backend-debug") {
            debug = true;
        }
    }
    let body = if chunked {
        BodyKind::Chunked
    } else {
        match length {
            Some(0) | None => BodyKind::None,
            Some(n) => BodyKind::Length(n),
        }
    };
    let keep_alive = !conn_close && (http11 || conn_keep);
    Ok(Some(ReqHead {
        len,
        path: (start, start + path.len()),
        head_only: req.method == Some("HEAD"),
        keep_alive,
        ka_header: keep_alive && !http11,
        body,
        expect_continue: expect_continue && http11 && body != BodyKind::None,
        debug,
    }))
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn parse_decimal(v: &[u8]) -> Option<u64> {
    let v = trim(v);
    if v.is_empty() || v.len() > 18 {
        return None;
    }
    let mut n = 0u64;
    for &c in v {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + (c - b'0') as u64;
    }
    Some(n)
}

/// Progress of a body decoder over some bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// All these bytes were body; more is needed.
    More(usize),
    /// The body ended after this many bytes.
    Done(usize),
    /// The chunked framing is broken.
    Invalid,
}

/// Reads past a request body without keeping it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoder {
    /// No body (or it has ended).
    Done,
    /// This many bytes remain.
    Length(u64),
    /// Chunked, in this state.
    Chunked(Chunk),
}

/// Where a chunked decoder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk {
    /// Reading hex digits of a chunk size (value so far, digits seen).
    Size(u64, u8),
    /// Skipping a chunk extension up to CR.
    Ext(u64),
    /// Expecting LF after the size line.
    SizeLf(u64),
    /// Inside chunk data with this many bytes left.
    Data(u64),
    /// Expecting CR after chunk data.
    DataCr,
    /// Expecting LF after chunk data.
    DataLf,
    /// At the start of a trailer line.
    TrailerStart,
    /// Inside a trailer line.
    TrailerLine,
    /// Expecting the final LF.
    FinalLf,
}

impl Decoder {
    /// A decoder for a body framed as `kind`.
    pub fn new(kind: BodyKind) -> Decoder {
        match kind {
            BodyKind::None => Decoder::Done,
            BodyKind::Length(n) => Decoder::Length(n),
            BodyKind::Chunked => Decoder::Chunked(Chunk::Size(0, 0)),
        }
    }

    /// Consumes body bytes from the start of `data`.
    pub fn feed(&mut self, data: &[u8]) -> Feed {
        match self {
            Decoder::Done => Feed::Done(0),
            Decoder::Length(left) => {
                let take = (*left).min(data.len() as u64);
                *left -= take;
                if *left == 0 {
                    *self = Decoder::Done;
                    Feed::Done(take as usize)
                } else {
                    Feed::More(take as usize)
                }
            }
            Decoder::Chunked(st) => {
                let mut i = 0;
                while i < data.len() {
                    let c = data[i];
                    *st = match *st {
                        Chunk::Data(left) => {
                            let take = left.min((data.len() - i) as u64);
                            i += take as usize;
                            if left == take {
                                Chunk::DataCr
                            } else {
                                Chunk::Data(left - take)
                            }
                        }
                        s => {
                            i += 1;
                            match step(s, c) {
                                Some(Some(next)) => next,
                                Some(None) => {
                                    *self = Decoder::Done;
                                    return Feed::Done(i);
                                }
                                None => return Feed::Invalid,
                            }
                        }
                    };
                }
                Feed::More(i)
            }
        }
    }
}

/// One byte of chunked framing: `None` is an error, `Some(None)` the end of the body.
fn step(s: Chunk, c: u8) -> Option<Option<Chunk>> {
    let next = match s {
        Chunk::Size(n, digits) => match c {
            b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                if digits >= 15 {
                    return None;
                }
                let d = (c as char).to_digit(16)? as u64;
                Chunk::Size(n * 16 + d, digits + 1)
            }
            b';' | b' ' | b'\t' if digits > 0 => Chunk::Ext(n),
            b'\r' if digits > 0 => Chunk::SizeLf(n),
            _ => return None,
        },
        Chunk::Ext(n) => match c {
            b'\r' => Chunk::SizeLf(n),
            b'\n' => return None,
            _ => Chunk::Ext(n),
        },
        Chunk::SizeLf(n) => match (c, n) {
            (b'\n', 0) => Chunk::TrailerStart,
            (b'\n', n) => Chunk::Data(n),
            _ => return None,
        },
        Chunk::DataCr => match c {
            b'\r' => Chunk::DataLf,
            _ => return None,
        },
        Chunk::DataLf => match c {
            b'\n' => Chunk::Size(0, 0),
            _ => return None,
        },
        Chunk::TrailerStart => match c {
            b'\r' => Chunk::FinalLf,
            b'\n' => return None,
            _ => Chunk::TrailerLine,
        },
        Chunk::TrailerLine => match c {
            b'\n' => Chunk::TrailerStart,
            _ => Chunk::TrailerLine,
        },
        Chunk::FinalLf => match c {
            b'\n' => return Some(None),
            _ => return None,
        },
        Chunk::Data(_) => unreachable!("data is consumed in bulk"),
    };
    Some(Some(next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_of_every_shape() {
        let h = parse_head(b"GET /x?y=1 HTTP/1.1\r\nHost: a\r\n\r\nGET")
            .unwrap()
            .unwrap();
        assert_eq!(h.len, 32);
        assert_eq!(h.path, (4, 10));
        assert!(h.keep_alive && !h.ka_header && !h.head_only && !h.debug);
        assert_eq!(h.body, BodyKind::None);
        let h = parse_head(b"GET / HTTP/1.1\r\nX-Backend-Debug: 1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.debug);
        let h = parse_head(b"HEAD / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.keep_alive && h.ka_header && h.head_only);
        let h = parse_head(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!h.keep_alive);
        let h = parse_head(b"GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!h.keep_alive);
        let h =
            parse_head(b"POST / HTTP/1.1\r\nContent-Length: 12\r\nExpect: 100-continue\r\n\r\n")
                .unwrap()
                .unwrap();
        assert_eq!(h.body, BodyKind::Length(12));
        assert!(h.expect_continue);
        let h = parse_head(
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.body, BodyKind::Chunked);
        assert_eq!(parse_head(b"GET / HTTP/1.1\r\nHost: a\r\n"), Ok(None));
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
            Err(HeadError::Bad)
        );
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            Err(HeadError::Bad)
        );
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            Err(HeadError::Bad)
        );
        assert_eq!(
            parse_head(b"\x01\x02 nonsense\r\n\r\n"),
            Err(HeadError::Bad)
        );
        let many: String = (0..60).map(|i| format!("X-{i}: v\r\n")).collect();
        let req = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(parse_head(req.as_bytes()), Err(HeadError::TooLarge));
    }

    #[test]
    fn length_bodies() {
        let mut d = Decoder::new(BodyKind::Length(10));
        assert_eq!(d.feed(b"12345"), Feed::More(5));
        assert_eq!(d.feed(b"67890GET"), Feed::Done(5));
        assert_eq!(d, Decoder::Done);
    }

    #[test]
    fn chunked_bodies_byte_by_byte_and_whole() {
        let body: &[u8] =
            b"5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nTrailer: x\r\n\r\nNEXT";
        let end = body.len() - 4;
        let mut d = Decoder::new(BodyKind::Chunked);
        assert_eq!(d.feed(body), Feed::Done(end));
        let mut d = Decoder::new(BodyKind::Chunked);
        for (i, b) in body.iter().enumerate() {
            match d.feed(std::slice::from_ref(b)) {
                Feed::More(1) => assert!(i < end - 1),
                Feed::Done(1) => {
                    assert_eq!(i, end - 1);
                    break;
                }
                other => panic!("byte {i}: {other:?}"),
            }
        }
        let mut d = Decoder::new(BodyKind::Chunked);
        assert_eq!(d.feed(b"0\r\n\r\n"), Feed::Done(5));
        for bad in [
            &b"x\r\n"[..],
            b"5\r\nhelloX",
            b"\r\n",
            b"5\n",
            b"fffffffffffffffff\r\n",
        ] {
            let mut d = Decoder::new(BodyKind::Chunked);
            assert_eq!(
                d.feed(bad),
                Feed::Invalid,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
