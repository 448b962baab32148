//! Response bytes: the head assembled from a pre-rendered prefix, and bodies cut from one
//! static pattern (so a 1 GiB body costs no memory).

use crate::compiled::Head;
use std::sync::OnceLock;

/// The body pattern repeats every 64 bytes: 63 printable characters and a newline.
const LINE: &[u8; 64] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-\n";
const PATTERN_LEN: usize = 64 * 1024;

fn pattern() -> &'static [u8] {
    static P: OnceLock<Box<[u8]>> = OnceLock::new();
    P.get_or_init(|| LINE.iter().copied().cycle().take(PATTERN_LEN).collect())
}

/// Body bytes from offset `off` on, at most `max` of them (at least one if `max > 0`).
#[inline]
pub(crate) fn body_chunk(off: u64, max: u64) -> &'static [u8] {
    let start = (off % 64) as usize;
    let len = max.min((PATTERN_LEN - 64) as u64) as usize;
    &pattern()[start..start + len]
}

/// How the response's connection header reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnHeader {
    /// No header (HTTP/1.1 keep-alive is the default).
    None,
    /// `Connection: close`: the connection ends after this response.
    Close,
    /// `Connection: keep-alive`, for HTTP/1.0 clients that asked for it.
    KeepAlive,
}

/// Appends `n` in decimal.
pub(crate) fn put_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Appends a complete response head to `out` (no allocation once `out` has grown).
/// `delay_ns` adds `X-Backend-Delay-Ns` (asked for with the `X-Backend-Debug` request header).
#[inline]
pub(crate) fn write_head(
    out: &mut Vec<u8>,
    head: &Head,
    body_len: u64,
    conn: ConnHeader,
    delay_ns: Option<u64>,
) {
    out.extend_from_slice(&head.prefix);
    if !head.bodyless {
        out.extend_from_slice(b"Content-Length: ");
        put_decimal(out, body_len);
        out.extend_from_slice(b"\r\n");
    }
    if let Some(d) = delay_ns {
        out.extend_from_slice(b"X-Backend-Delay-Ns: ");
        put_decimal(out, d);
        out.extend_from_slice(b"\r\n");
    }
    match conn {
        ConnHeader::None => {}
        ConnHeader::Close => out.extend_from_slice(b"Connection: close\r\n"),
        ConnHeader::KeepAlive => out.extend_from_slice(b"Connection: keep-alive\r\n"),
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_and_bodies() {
        let head = Head {
            code: 200,
            prefix: b"HTTP/1.1 200 OK\r\n".to_vec().into(),
            h2: Box::default(),
            bodyless: false,
        };
        let mut out = Vec::new();
        write_head(&mut out, &head, 1234567, ConnHeader::Close, None);
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nContent-Length: 1234567\r\nConnection: close\r\n\r\n"
        );
        out.clear();
        write_head(&mut out, &head, 0, ConnHeader::None, Some(10_000_000));
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Backend-Delay-Ns: 10000000\r\n\r\n"
        );
        assert_eq!(body_chunk(0, 3), b"abc");
        assert_eq!(body_chunk(62, 3), b"-\na");
        assert_eq!(body_chunk(64 * 1000 + 1, 2), b"bc");
        assert_eq!(body_chunk(0, u64::MAX).len(), PATTERN_LEN - 64);
    }
}
