//! Request and response heads, parsed with `httparse` from the start of a buffer: what the
//! callers need for framing (status, Content-Length, chunked, Connection) and nothing more.
//! Both parsers say `Ok(None)` when the head is not complete yet; the caller keeps the bytes and
//! parses again when more arrive.

use crate::Sink;
use std::mem::MaybeUninit;

/// The longest response head (status line, headers, 1xx interims, trailers) accepted.
pub const MAX_HEAD: usize = 64 * 1024;
/// At most this many request headers; more is [`RequestError::TooManyHeaders`] (the backend
/// answers 431).
pub const MAX_REQUEST_HEADERS: usize = 48;
/// Response heads with up to this many headers parse without allocating.
const RESPONSE_HEADERS: usize = 64;

/// The bytes are not a valid HTTP/1.x response; the message names what was wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Malformed {}

/// What framing needs from one response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHead {
    /// Bytes the head took, the empty line included.
    pub len: usize,
    /// The status code, 100 to 599.
    pub status: u16,
    /// HTTP/1.0 (keep-alive only when asked for).
    pub http10: bool,
    /// What `Connection` said: `Some(false)` for close, `Some(true)` for keep-alive.
    pub connection: Option<bool>,
    /// The Content-Length, if sent (several equal ones count as one).
    pub content_length: Option<u64>,
    /// A Transfer-Encoding header was sent.
    pub transfer_encoding: bool,
    /// The final transfer coding is chunked.
    pub chunked: bool,
}

impl ResponseHead {
    /// A 1xx response other than 101: the final response follows it.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }

    /// Whether the connection may carry another request once this response ends.
    pub fn keep_alive(&self) -> bool {
        self.connection.unwrap_or(!self.http10)
            && !(self.transfer_encoding && self.content_length.is_some())
    }
}

/// Parses one response head from the start of `buf`; `Ok(None)` when more bytes are needed.
/// The headers of a final response (200 to 599, or 101) are shown to `sink`, trimmed.
pub fn parse_response<S: Sink + ?Sized>(
    buf: &[u8],
    sink: &mut S,
) -> Result<Option<ResponseHead>, Malformed> {
    let mut headers = [MaybeUninit::<httparse::Header>::uninit(); RESPONSE_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    let r = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        buf,
        &mut headers,
    );
    match r {
        Err(httparse::Error::TooManyHeaders) => {
            // Rare: size the array by the lines there are (every header takes one).
            let lines = memchr::memchr_iter(b'\n', buf).count() + 1;
            let mut headers = vec![httparse::EMPTY_HEADER; lines];
            let mut resp = httparse::Response::new(&mut headers);
            let r = resp.parse(buf);
            response_outcome(r, &resp, buf, sink)
        }
        r => response_outcome(r, &resp, buf, sink),
    }
}

/// What one httparse attempt means. A status code out of range is refused as soon as it has
/// been read, whatever follows, so that the verdict does not depend on how much had arrived.
fn response_outcome<S: Sink + ?Sized>(
    r: httparse::Result<usize>,
    resp: &httparse::Response,
    buf: &[u8],
    sink: &mut S,
) -> Result<Option<ResponseHead>, Malformed> {
    if resp.code.is_some_and(|c| !(100..=599).contains(&c)) {
        return Err(Malformed("status code out of range"));
    }
    match r {
        Ok(httparse::Status::Complete(len)) => response_head(resp, len, sink).map(Some),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(response_error(e, buf)),
    }
}

fn response_head<S: Sink + ?Sized>(
    resp: &httparse::Response,
    len: usize,
    sink: &mut S,
) -> Result<ResponseHead, Malformed> {
    let status = resp.code.unwrap_or(0);
    let mut head = ResponseHead {
        len,
        status,
        http10: resp.version == Some(0),
        connection: None,
        content_length: None,
        transfer_encoding: false,
        chunked: false,
    };
    let show = (200..=599).contains(&status) || status == 101;
    // httparse has trimmed the values already.
    for h in resp.headers.iter() {
        let (name, value) = (h.name.as_bytes(), h.value);
        response_header(&mut head, name, value)?;
        if show {
            sink.header(name, value);
        }
    }
    Ok(head)
}

#[inline]
fn response_header(head: &mut ResponseHead, name: &[u8], value: &[u8]) -> Result<(), Malformed> {
    // Only three names matter for framing; most headers fail the length test at once.
    if !matches!(name.len(), 10 | 14 | 17) || !matches!(name[0] | 0x20, b'c' | b't') {
        return Ok(());
    }
    if eq_lower(name, b"content-length") {
        let n = parse_decimal(value).ok_or(Malformed("bad Content-Length"))?;
        if head.content_length.is_some_and(|c| c != n) {
            return Err(Malformed("conflicting Content-Length headers"));
        }
        head.content_length = Some(n);
    } else if eq_lower(name, b"transfer-encoding") {
        head.transfer_encoding = true;
        // Only the final coding decides the framing.
        head.chunked = last_coding_is_chunked(value);
    } else if eq_lower(name, b"connection") {
        // The usual single token first.
        if eq_lower(value, b"keep-alive") {
            head.connection.get_or_insert(true);
            return Ok(());
        }
        for token in value.split(|&b| b == b',').map(trim) {
            if token.eq_ignore_ascii_case(b"close") {
                head.connection = Some(false);
            } else if token.eq_ignore_ascii_case(b"keep-alive") && head.connection.is_none() {
                head.connection = Some(true);
            }
        }
    }
    Ok(())
}

/// Names what httparse refused, in the words the load engine has always reported.
fn response_error(e: httparse::Error, buf: &[u8]) -> Malformed {
    Malformed(match e {
        httparse::Error::Version => {
            if buf.len() > 7 && buf.starts_with(b"HTTP/1.") && !matches!(buf[7], b'0' | b'1') {
                "unsupported HTTP version"
            } else if buf.starts_with(b"HTTP/1.") {
                "bad status line"
            } else {
                "not an HTTP/1.x status line"
            }
        }
        httparse::Error::Status => {
            let code = buf.get(9..12).unwrap_or_default();
            let three = code.len() == 3 && code.iter().all(u8::is_ascii_digit);
            if three && matches!(buf.get(12), Some(b' ' | b'\r' | b'\n')) {
                // The code is fine: the reason phrase or the line end is not.
                "bad status line"
            } else {
                "status code is not three digits"
            }
        }
        httparse::Error::HeaderName | httparse::Error::Token => "bad header name",
        httparse::Error::HeaderValue => "bad header value",
        httparse::Error::NewLine => "bad line ending",
        httparse::Error::TooManyHeaders => "too many headers",
    })
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

/// What a server needs from a request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHead {
    /// Bytes the head took, the empty line included.
    pub len: usize,
    /// Byte range of the request target within the parsed buffer.
    pub path: (usize, usize),
    /// HEAD: answer without a body.
    pub head_only: bool,
    /// HTTP/1.1 (else 1.0).
    pub http11: bool,
    /// The connection may carry another request after this one.
    pub keep_alive: bool,
    /// HTTP/1.0 with `Connection: keep-alive`: the response must say so too.
    pub ka_header: bool,
    /// How the body is framed.
    pub body: BodyKind,
    /// `Expect: 100-continue` was sent with a body on HTTP/1.1.
    pub expect_continue: bool,
}

/// Why a request head was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestError {
    /// Malformed (a server answers 400).
    Bad,
    /// More than [`MAX_REQUEST_HEADERS`] headers (a server answers 431).
    TooManyHeaders,
}

/// Parses one request head from the start of `buf`: `Ok(None)` when more bytes are needed.
/// Every header is also shown to `other` (name, trimmed value), for the ones a server reads
/// beyond framing.
pub fn parse_request(
    buf: &[u8],
    mut other: impl FnMut(&[u8], &[u8]),
) -> Result<Option<RequestHead>, RequestError> {
    let mut headers = [MaybeUninit::<httparse::Header>::uninit(); MAX_REQUEST_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut req,
        buf,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(RequestError::TooManyHeaders),
        Err(_) => return Err(RequestError::Bad),
    };
    let path = req.path.unwrap_or("/");
    let start = path.as_ptr() as usize - buf.as_ptr() as usize;
    let http11 = req.version == Some(1);
    let mut conn_close = false;
    let mut conn_keep = false;
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut expect_continue = false;
    // httparse has trimmed the values already.
    for h in req.headers.iter() {
        let (name, value) = (h.name.as_bytes(), h.value);
        if eq_lower(name, b"content-length") {
            let v = parse_decimal(value).ok_or(RequestError::Bad)?;
            if length.is_some_and(|l| l != v) {
                return Err(RequestError::Bad);
            }
            length = Some(v);
        } else if eq_lower(name, b"transfer-encoding") {
            if !last_coding_is_chunked(value) {
                return Err(RequestError::Bad);
            }
            chunked = true;
        } else if eq_lower(name, b"connection") {
            for tok in value.split(|&c| c == b',').map(trim) {
                conn_close |= tok.eq_ignore_ascii_case(b"close");
                conn_keep |= tok.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case(b"expect") {
            expect_continue = value.eq_ignore_ascii_case(b"100-continue");
        }
        other(name, value);
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
    Ok(Some(RequestHead {
        len,
        path: (start, start + path.len()),
        head_only: req.method == Some("HEAD"),
        http11,
        keep_alive,
        ka_header: keep_alive && !http11,
        body,
        expect_continue: expect_continue && http11 && body != BodyKind::None,
    }))
}

fn last_coding_is_chunked(value: &[u8]) -> bool {
    let last = value.rsplit(|&b| b == b',').next().unwrap_or_default();
    trim(last).eq_ignore_ascii_case(b"chunked")
}

/// `s` equals `lower` (lowercase letters and `-`) ignoring ASCII case, for a header name or a
/// value httparse admitted. Setting bit 5 maps only `A-Z` onto `a-z`, and only CR (which
/// neither can contain) onto `-`, so the test is exact; without branches it is also quick.
#[inline]
fn eq_lower(s: &[u8], lower: &[u8]) -> bool {
    s.len() == lower.len()
        && s.iter()
            .zip(lower)
            .fold(0u8, |diff, (&a, &b)| diff | ((a | 0x20) ^ b))
            == 0
}

/// `s` without leading and trailing spaces and tabs.
pub fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// A Content-Length value: 1 to 18 decimal digits, nothing else.
pub fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 18 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |n, &d| n * 10 + (d - b'0') as u64))
}

/// RFC 9110 token characters, as a table: trailer names are checked byte by byte.
static TOKEN: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        i += 1;
    }
    t
};

/// True if `b` may appear in a header name.
#[inline]
pub fn is_token(b: u8) -> bool {
    TOKEN[b as usize]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Discard;

    fn response(buf: &[u8]) -> Result<Option<ResponseHead>, Malformed> {
        parse_response(buf, &mut Discard)
    }

    #[test]
    fn response_heads() {
        let h = response(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.len, 38);
        assert_eq!((h.status, h.content_length), (200, Some(6)));
        assert!(h.keep_alive() && !h.is_interim());
        let h = response(b"HTTP/1.0 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.chunked && h.transfer_encoding && !h.keep_alive());
        let h = response(b"HTTP/1.1 103 Early\r\n\r\n").unwrap().unwrap();
        assert!(h.is_interim());
        assert_eq!(response(b"HTTP/1.1 200 OK\r\nServer: x\r\n"), Ok(None));
        assert_eq!(response(b"HTTP/1.1 2"), Ok(None));
        // Many headers take the slow path and still parse.
        let many: String = (0..300).map(|i| format!("X-{i}: v\r\n")).collect();
        let r = format!("HTTP/1.1 204 No Content\r\n{many}\r\n");
        assert_eq!(response(r.as_bytes()).unwrap().unwrap().len, r.len());
        assert_eq!(response(&r.as_bytes()[..r.len() - 1]), Ok(None));
    }

    #[test]
    fn response_errors_keep_their_words() {
        for (bad, why) in [
            (&b"garbage\r\n"[..], "not an HTTP/1.x status line"),
            (b"HTTP/2 200 OK\r\n", "not an HTTP/1.x status line"),
            (b"HTTP/1.2 200 OK\r\n", "unsupported HTTP version"),
            (b"HTTP/1.1x200 OK\r\n", "bad status line"),
            (b"HTTP/1.1 20 OK\r\n", "status code is not three digits"),
            (b"HTTP/1.1 2000 OK\r\n", "status code is not three digits"),
            (b"HTTP/1.1 200 O\x01K\r\n", "bad status line"),
            (b"HTTP/1.1 099 x\r\n", "status code out of range"),
            (
                b"HTTP/1.1 600 x\r\nbad name\r\n",
                "status code out of range",
            ),
            (b"HTTP/1.1 200 OK\r\nbad name: x\r\n", "bad header name"),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
                "bad Content-Length",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                "conflicting Content-Length headers",
            ),
        ] {
            assert_eq!(
                response(bad),
                Err(Malformed(why)),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn eq_lower_is_exact_for_names_and_values() {
        // Every byte a header name or an httparse-admitted value may hold, against every byte
        // of the patterns compared with.
        let admitted = |b: u8| b == b'\t' || b >= b' ' && b != 0x7f;
        for b in (0..=255u8).filter(|&b| is_token(b) || admitted(b)) {
            for c in (b'a'..=b'z').chain([b'-']) {
                assert_eq!(
                    eq_lower(&[b], &[c]),
                    b.eq_ignore_ascii_case(&c),
                    "{b:#x} {c}"
                );
            }
        }
        assert!(eq_lower(b"Content-LENGTH", b"content-length"));
        assert!(!eq_lower(b"Content-Lengt", b"content-length"));
        assert!(!eq_lower(b"Content_Length", b"content-length"));
    }

    #[test]
    fn request_heads_of_every_shape() {
        let none = |_: &[u8], _: &[u8]| {};
        let h = parse_request(b"GET /x?y=1 HTTP/1.1\r\nHost: a\r\n\r\nGET", none)
            .unwrap()
            .unwrap();
        assert_eq!(h.len, 32);
        assert_eq!(h.path, (4, 10));
        assert!(h.keep_alive && !h.ka_header && !h.head_only && h.http11);
        assert_eq!(h.body, BodyKind::None);
        let mut seen = Vec::new();
        parse_request(b"GET / HTTP/1.1\r\nX-Backend-Debug:  1 \r\n\r\n", |n, v| {
            seen.push((n.to_vec(), v.to_vec()))
        })
        .unwrap()
        .unwrap();
        assert_eq!(seen, vec![(b"X-Backend-Debug".to_vec(), b"1".to_vec())]);
        let h = parse_request(b"HEAD / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", none)
            .unwrap()
            .unwrap();
        assert!(h.keep_alive && h.ka_header && h.head_only);
        let h = parse_request(b"GET / HTTP/1.0\r\n\r\n", none)
            .unwrap()
            .unwrap();
        assert!(!h.keep_alive);
        let h = parse_request(b"GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n", none)
            .unwrap()
            .unwrap();
        assert!(!h.keep_alive);
        let h = parse_request(
            b"POST / HTTP/1.1\r\nContent-Length: 12\r\nExpect: 100-continue\r\n\r\n",
            none,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.body, BodyKind::Length(12));
        assert!(h.expect_continue);
        let h = parse_request(
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n",
            none,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.body, BodyKind::Chunked);
        assert_eq!(
            parse_request(b"GET / HTTP/1.1\r\nHost: a\r\n", none),
            Ok(None)
        );
        for bad in [
            &b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"\x01\x02 nonsense\r\n\r\n",
        ] {
            assert_eq!(parse_request(bad, none), Err(RequestError::Bad));
        }
        let many: String = (0..60).map(|i| format!("X-{i}: v\r\n")).collect();
        let req = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(
            parse_request(req.as_bytes(), none),
            Err(RequestError::TooManyHeaders)
        );
    }
}
