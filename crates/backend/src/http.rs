//! HTTP/1.1 request framing, kept apart from I/O so it can be tested without sockets: what the
//! fleet needs of a request head, on top of the workspace's one HTTP/1 module (`http1`), which
//! also decodes (and discards) bodies sent with Content-Length or chunked transfer coding.

pub use http1::request::{Decoder, Feed};
pub use http1::BodyKind;

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

/// Why a head was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// Malformed: 400.
    Bad,
    /// Too many headers (more than [`http1::head::MAX_REQUEST_HEADERS`]): 431.
    TooLarge,
}

/// What a request asks beyond one response: a WebSocket upgrade, or an event stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongLived {
    /// An ordinary request.
    No,
    /// A valid WebSocket upgrade (RFC 6455 4.2.1: `Upgrade: websocket`, `Connection: upgrade`,
    /// version 13) with its 24-character `Sec-WebSocket-Key`.
    WebSocket([u8; 24]),
    /// `Upgrade: websocket` without the rest of a valid upgrade: 400.
    BadUpgrade,
    /// `Accept: text/event-stream`: a server-sent event stream.
    EventStream,
}

/// Parses one request head from the start of `buf`: `Ok(None)` when more bytes are needed.
pub fn parse_head(buf: &[u8]) -> Result<Option<ReqHead>, HeadError> {
    parse_head_long(buf).map(|h| h.map(|(h, _)| h))
}

/// [`parse_head`], and whether the request opens a long-lived connection.
pub fn parse_head_long(buf: &[u8]) -> Result<Option<(ReqHead, LongLived)>, HeadError> {
    let mut debug = false;
    let mut upgrade_ws = false;
    let mut conn_upgrade = false;
    let mut key: Option<[u8; 24]> = None;
    let mut version13 = false;
    let mut event_stream = false;
    let head = http1::parse_request(buf, |name, value| {
        debug |= name.eq_ignore_ascii_case(b"x-backend-debug");
        match name.len() {
            7 if name.eq_ignore_ascii_case(b"upgrade") => {
                upgrade_ws |= value
                    .split(|&b| b == b',')
                    .any(|t| http1::head::trim(t).eq_ignore_ascii_case(b"websocket"));
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                conn_upgrade |= value
                    .split(|&b| b == b',')
                    .any(|t| http1::head::trim(t).eq_ignore_ascii_case(b"upgrade"));
            }
            17 if name.eq_ignore_ascii_case(b"sec-websocket-key") => {
                key = <[u8; 24]>::try_from(value).ok();
            }
            21 if name.eq_ignore_ascii_case(b"sec-websocket-version") => {
                version13 = value == b"13";
            }
            6 if name.eq_ignore_ascii_case(b"accept") => {
                event_stream |= value.split(|&b| b == b',').any(|t| {
                    let mime = t.split(|&b| b == b';').next().unwrap_or_default();
                    http1::head::trim(mime).eq_ignore_ascii_case(b"text/event-stream")
                });
            }
            _ => {}
        }
    })
    .map_err(|e| match e {
        http1::RequestError::Bad => HeadError::Bad,
        http1::RequestError::TooManyHeaders => HeadError::TooLarge,
    })?;
    Ok(head.map(|h| {
        let long = match (upgrade_ws, conn_upgrade && version13 && h.http11, key) {
            (true, true, Some(k)) => LongLived::WebSocket(k),
            (true, _, _) => LongLived::BadUpgrade,
            _ if event_stream => LongLived::EventStream,
            _ => LongLived::No,
        };
        (
            ReqHead {
                len: h.len,
                path: h.path,
                head_only: h.head_only,
                keep_alive: h.keep_alive,
                ka_header: h.ka_header,
                body: h.body,
                expect_continue: h.expect_continue,
                debug,
            },
            long,
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_carry_what_the_fleet_needs() {
        let h = parse_head(b"GET /x?y=1 HTTP/1.1\r\nHost: a\r\n\r\nGET")
            .unwrap()
            .unwrap();
        assert_eq!((h.len, h.path), (32, (4, 10)));
        assert!(h.keep_alive && !h.ka_header && !h.head_only && !h.debug);
        let h = parse_head(b"GET / HTTP/1.1\r\nX-Backend-Debug: 1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.debug);
        let h = parse_head(b"HEAD / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.keep_alive && h.ka_header && h.head_only);
        assert_eq!(parse_head(b"GET / HTTP/1.1\r\nHost: a\r\n"), Ok(None));
        assert_eq!(
            parse_head(b"\x01\x02 nonsense\r\n\r\n"),
            Err(HeadError::Bad)
        );
        let ws = b"GET /chat HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
        let (_, long) = parse_head_long(ws).unwrap().unwrap();
        assert_eq!(long, LongLived::WebSocket(*b"dGhlIHNhbXBsZSBub25jZQ=="));
        let old = b"GET /chat HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n";
        assert_eq!(
            parse_head_long(old).unwrap().unwrap().1,
            LongLived::BadUpgrade
        );
        let sse = b"GET /events HTTP/1.1\r\nAccept: text/html, text/event-stream;q=1\r\n\r\n";
        assert_eq!(
            parse_head_long(sse).unwrap().unwrap().1,
            LongLived::EventStream
        );
        let plain = b"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n";
        assert_eq!(parse_head_long(plain).unwrap().unwrap().1, LongLived::No);
        let many: String = (0..60).map(|i| format!("X-{i}: v\r\n")).collect();
        let req = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(parse_head(req.as_bytes()), Err(HeadError::TooLarge));
    }
}
