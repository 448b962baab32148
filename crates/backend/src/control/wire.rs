//! The JSON bodies of the control endpoint and the server's reading of a request.

use serde::{Deserialize, Serialize};
use setup::profile::Profile;

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

/// One request as the control endpoint needs it.
pub(crate) struct Message {
    /// The request line.
    pub line: String,
    /// The `Authorization` header's value, if any.
    pub authorization: Option<String>,
    /// The body, Content-Length bytes.
    pub body: Vec<u8>,
}

/// The longest request head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// The longest request body accepted.
const MAX_BODY: u64 = 1 << 20;

/// Reads one request head (parsed by the workspace's `http1`) and its Content-Length body
/// (at most 1 MiB) from `r`.
pub(crate) fn read_message(r: &mut impl std::io::Read) -> std::io::Result<Message> {
    use std::io::{Error, ErrorKind};
    let bad = |msg: &str| Error::new(ErrorKind::InvalidData, msg.to_string());
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let mut authorization = None;
    let head = loop {
        let parsed = http1::parse_request(&buf, |name, value| {
            if name.eq_ignore_ascii_case(b"authorization") {
                authorization = Some(String::from_utf8_lossy(value).into_owned());
            }
        });
        match parsed {
            Ok(Some(h)) => break h,
            Ok(None) => {}
            Err(http1::RequestError::Bad) => return Err(bad("malformed request head")),
            Err(http1::RequestError::TooManyHeaders) => return Err(bad("too many headers")),
        }
        if buf.len() > MAX_HEAD {
            return Err(bad("message head too large"));
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
    let len = match head.body {
        http1::BodyKind::None => 0,
        http1::BodyKind::Length(n) if n <= MAX_BODY => n as usize,
        http1::BodyKind::Length(_) => return Err(bad("body too large")),
        http1::BodyKind::Chunked => return Err(bad("send the body with Content-Length")),
    };
    let line_end = buf.iter().position(|&b| b == b'\n').unwrap_or(head.len);
    let line = String::from_utf8_lossy(&buf[..line_end])
        .trim_end()
        .to_string();
    let mut body = buf[head.len..].to_vec();
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
        line,
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
        let raw = b"GET /counters HTTP/1.1\r\nHost: x\r\n\r\n";
        let m = read_message(&mut &raw[..]).unwrap();
        assert_eq!(
            (m.line.as_str(), m.body.len()),
            ("GET /counters HTTP/1.1", 0)
        );
        assert!(m.authorization.is_none());
        for bad in [
            &b"GET / HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            b"\x01 nonsense\r\n\r\n",
        ] {
            let e = read_message(&mut &bad[..]).err().unwrap();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        }
        let e = read_message(&mut &b"GET / HTTP/1.1\r\n"[..]).err().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
