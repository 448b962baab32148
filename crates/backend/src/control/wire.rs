//! The JSON bodies of the control endpoint and the bits of HTTP both sides share.

use crate::profile::Profile;
use serde::{Deserialize, Serialize};

/// `PUT /instances/NAME/profile`.
#[derive(Serialize, Deserialize)]
pub(crate) struct ProfileBody {
    pub profile: Profile,
}

/// Answer to `POST /instances`.
#[derive(Serialize, Deserialize)]
pub(crate) struct Added {
    pub name: String,
    pub addr: std::net::SocketAddr,
}

/// Every error answer.
#[derive(Serialize, Deserialize)]
pub(crate) struct ErrorBody {
    pub error: String,
}

/// Percent-encodes an instance name for a URL path segment.
pub(crate) fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes a percent-encoded path segment; `None` if malformed.
pub(crate) fn decode(seg: &str) -> Option<String> {
    let b = seg.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = seg.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// One HTTP message as the control endpoint needs it.
pub(crate) struct Message {
    /// The request or status line.
    pub line: String,
    /// The `Authorization` header's value, if any.
    pub authorization: Option<String>,
    /// The body, Content-Length bytes.
    pub body: Vec<u8>,
}

/// Reads one HTTP message head and its Content-Length body from `r` (at most 1 MiB).
pub(crate) fn read_message(r: &mut impl std::io::Read) -> std::io::Result<Message> {
    use std::io::{Error, ErrorKind};
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 * 1024 {
            return Err(Error::new(ErrorKind::InvalidData, "message head too large"));
        }
        let n = r.read(&mut chunk)?;
        if n == 0 {
            return Err(Error::new(
                ErrorKind::UnexpectedEof,
                "connection closed mid-message",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let first = head.lines().next().unwrap_or("").to_string();
    let mut len = 0usize;
    let mut authorization = None;
    for line in head.lines().skip(1) {
        if let Some((k, v)) = line.split_once(':') {
            if k.trim().eq_ignore_ascii_case("authorization") {
                authorization = Some(v.trim().to_string());
            } else if k.trim().eq_ignore_ascii_case("content-length") {
                len = v
                    .trim()
                    .parse()
                    .map_err(|_| Error::new(ErrorKind::InvalidData, "bad Content-Length"))?;
            }
        }
    }
    if len > 1 << 20 {
        return Err(Error::new(ErrorKind::InvalidData, "body too large"));
    }
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = r.read(&mut chunk)?;
        if n == 0 {
            return Err(Error::new(
                ErrorKind::UnexpectedEof,
                "connection closed mid-body",
            ));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(len);
    Ok(Message {
        line: first,
        authorization,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_survive_the_url() {
        for n in ["backend-0", "a/b?c d%", "x.y_z~"] {
            assert_eq!(decode(&encode(n)).as_deref(), Some(n));
        }
        assert_eq!(decode("%4"), None);
    }

    #[test]
    fn messages_are_framed_by_content_length() {
        let raw = b"POST /x HTTP/1.1\r\nContent-Length: 5\r\nauthorization:  Bearer ab \r\n\r\nhelloEXTRA";
        let m = read_message(&mut &raw[..]).unwrap();
        assert_eq!(m.line, "POST /x HTTP/1.1");
        assert_eq!(m.body, b"hello");
        assert_eq!(m.authorization.as_deref(), Some("Bearer ab"));
    }
}
