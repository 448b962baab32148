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

/// Parses one request head from the start of `buf`: `Ok(None)` when more bytes are needed.
pub fn parse_head(buf: &[u8]) -> Result<Option<ReqHead>, HeadError> {
    let mut debug = false;
    let head = http1::parse_request(buf, |name, _| {
        debug |= name.eq_ignore_ascii_case(b"x-backend-debug");
    })
    .map_err(|e| match e {
        http1::RequestError::Bad => HeadError::Bad,
        http1::RequestError::TooManyHeaders => HeadError::TooLarge,
    })?;
    Ok(head.map(|h| ReqHead {
        len: h.len,
        path: h.path,
        head_only: h.head_only,
        keep_alive: h.keep_alive,
        ka_header: h.ka_header,
        body: h.body,
        expect_continue: h.expect_continue,
        debug,
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
        let many: String = (0..60).map(|i| format!("X-{i}: v\r\n")).collect();
        let req = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(parse_head(req.as_bytes()), Err(HeadError::TooLarge));
    }
}
