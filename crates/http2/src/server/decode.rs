//! A request's header block decoded and checked against RFC 9113's rules for requests.

use super::*;

/// What decoding a request's header block found besides its fields.
pub(super) struct Decoded {
    /// Why the request is malformed (8.1.1, 8.2, 8.3), if it is.
    pub(super) reason: Option<&'static str>,
    /// The content-length field's value, if one was sent.
    pub(super) content_length: Option<u64>,
}

/// Decodes a request header block (or its trailers) into `head`, checking the rules of RFC 9113
/// 8.2 and 8.3 and the header list `limit`. An HPACK failure is a connection error
/// (COMPRESSION_ERROR); a malformed request is reported in [`Decoded::reason`], and nothing more
/// of it is kept.
pub(super) fn decode(
    decoder: &mut hpack::Decoder,
    block: &[u8],
    head: &mut RequestHead,
    trailers: bool,
    limit: u32,
) -> Result<Decoded, ConnError> {
    let mut bad: Option<&'static str> = None;
    let mut size = 0usize;
    let mut seen = 0u8;
    let mut regular = false;
    let mut content_length: Option<u64> = None;
    let mut connect = false;
    decoder
        .decode(block, |n, v| {
            if bad.is_some() {
                return;
            }
            size += n.len() + v.len() + 32;
            if size > limit as usize {
                bad = Some("a header list above SETTINGS_MAX_HEADER_LIST_SIZE");
                head.clear();
                return;
            }
            if v.iter().any(|&c| c == 0 || c == b'\r' || c == b'\n') {
                bad = Some("a header value with NUL, CR or LF");
                return;
            }
            if let Some(pseudo) = n.strip_prefix(b":") {
                let bit = match pseudo {
                    b"method" => 1,
                    b"scheme" => 2,
                    b"authority" => 4,
                    b"path" => 8,
                    _ => {
                        bad = Some("a pseudo-header a request cannot have");
                        return;
                    }
                };
                if trailers {
                    bad = Some("a pseudo-header in trailers");
                } else if regular {
                    bad = Some("a pseudo-header after a regular header");
                } else if seen & bit != 0 {
                    bad = Some("a pseudo-header twice");
                } else if bit == 8 && v.is_empty() {
                    bad = Some("an empty :path");
                } else if bit == 1 && (v.is_empty() || !v.iter().all(|&c| tchar(c))) {
                    bad = Some("a :method that is not a token");
                }
                seen |= bit;
                connect |= bit == 1 && v == b"CONNECT";
            } else {
                regular = true;
                if n.is_empty() || !n.iter().all(|&c| token_lower(c)) {
                    bad = Some("a header name that is empty, upper case or not a token");
                } else if matches!(
                    n,
                    b"connection"
                        | b"proxy-connection"
                        | b"keep-alive"
                        | b"transfer-encoding"
                        | b"upgrade"
                ) || (n == b"te" && v != b"trailers")
                {
                    bad = Some("a connection-specific header");
                } else if n == b"content-length" {
                    match parse_decimal(v) {
                        Some(cl) if content_length.is_none_or(|c| c == cl) => {
                            content_length = Some(cl)
                        }
                        _ => bad = Some("an invalid content-length"),
                    }
                }
            }
            if bad.is_none() {
                head.push(n, v);
            }
        })
        .map_err(|_| {
            err(
                code::COMPRESSION_ERROR,
                "a header block HPACK cannot decode",
            )
        })?;
    if bad.is_none() && !trailers {
        let need = if connect { 1 | 4 } else { 1 | 2 | 8 };
        if seen & need != need {
            bad = Some("a request without :method, :scheme or :path");
        } else if connect && seen & (2 | 8) != 0 {
            bad = Some("CONNECT with :scheme or :path");
        }
    }
    Ok(Decoded {
        reason: bad,
        content_length,
    })
}

/// A token character (RFC 9110 5.6.2).
// Called per byte of every field name and value checked: always inline (LLVM outlined it
// when it moved here from server.rs).
#[inline(always)]
fn tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
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
        )
}

/// A character an HTTP/2 field name may hold: a token character, not upper case (8.2.1).
// Per byte of every field name, as `tchar`.
#[inline(always)]
fn token_lower(c: u8) -> bool {
    tchar(c) && !c.is_ascii_uppercase()
}

/// A decimal number of at most 18 digits.
fn parse_decimal(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 18 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |a, &d| a * 10 + (d - b'0') as u64))
}
