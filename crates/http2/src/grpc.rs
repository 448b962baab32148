//! gRPC's wire shape over HTTP/2 (grpc/doc/PROTOCOL-HTTP2.md), without I/O and without a
//! schema, as a proxy sees it: messages are opaque bytes in length-prefixed frames (a
//! compressed-flag byte, a 4-byte big-endian length, the payload), a call's deadline travels as
//! `grpc-timeout`, and its outcome as `grpc-status` in the trailers. The load engine's client
//! counts the messages of a response with a [`Deframer`]; the backend's service writes them
//! with [`message`].

use std::time::Duration;

/// Bytes before each message's payload: the compressed flag and the length.
pub const PREFIX: usize = 5;
/// The content type every gRPC request and response carries.
pub const CONTENT_TYPE: &str = "application/grpc";
/// The largest message a [`Deframer`] accepts (gRPC's own default receive limit is 4 MiB).
pub const MAX_MESSAGE: u32 = 16 << 20;

/// Appends one uncompressed message of `len` bytes, its payload written by `fill` (which must
/// append exactly `len` bytes).
pub fn message(out: &mut Vec<u8>, len: u32, fill: impl FnOnce(&mut Vec<u8>)) {
    out.push(0);
    out.extend_from_slice(&len.to_be_bytes());
    let before = out.len();
    fill(out);
    debug_assert_eq!(
        out.len() - before,
        len as usize,
        "fill wrote the wrong length"
    );
    out.resize(before + len as usize, 0);
}

/// Why a response's body is not a sequence of gRPC messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// A message longer than [`MAX_MESSAGE`].
    TooLarge,
    /// The compressed flag is set, and no compression was negotiated.
    Compressed,
}

/// Splits a response body, in whatever pieces it arrives, into gRPC messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deframer {
    /// Prefix bytes collected of the current message (0 to 5).
    head: [u8; PREFIX],
    head_len: u8,
    /// Payload bytes of the current message still to come.
    left: u32,
    /// The current message's length.
    len: u32,
    /// A prefix was read and its payload is not complete.
    in_message: bool,
}

impl Deframer {
    /// A deframer at the start of a body.
    pub fn new() -> Deframer {
        Deframer::default()
    }

    /// Takes in the next piece of the body; calls `done(len)` for each message it completes.
    pub fn feed(&mut self, mut data: &[u8], mut done: impl FnMut(u32)) -> Result<(), FrameError> {
        while !data.is_empty() {
            if !self.in_message {
                let n = (PREFIX - self.head_len as usize).min(data.len());
                let at = self.head_len as usize;
                self.head[at..at + n].copy_from_slice(&data[..n]);
                self.head_len += n as u8;
                data = &data[n..];
                if (self.head_len as usize) < PREFIX {
                    return Ok(());
                }
                if self.head[0] != 0 {
                    return Err(FrameError::Compressed);
                }
                let len =
                    u32::from_be_bytes([self.head[1], self.head[2], self.head[3], self.head[4]]);
                if len > MAX_MESSAGE {
                    return Err(FrameError::TooLarge);
                }
                self.head_len = 0;
                self.len = len;
                self.left = len;
                self.in_message = true;
            }
            let n = (self.left as usize).min(data.len());
            self.left -= n as u32;
            data = &data[n..];
            if self.left == 0 {
                self.in_message = false;
                done(self.len);
            }
        }
        Ok(())
    }

    /// True between messages (the body may end here).
    pub fn at_boundary(&self) -> bool {
        !self.in_message && self.head_len == 0
    }
}

/// A `grpc-timeout` value for `d`: the finest unit (n, u, m, S, M, H) whose count fits the
/// protocol's eight digits, rounded up so the deadline is never shorter than asked.
pub fn timeout_value(d: Duration) -> String {
    const UNITS: [(u128, char); 6] = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ];
    let ns = d.as_nanos();
    for (per, unit) in UNITS {
        let n = ns.div_ceil(per);
        if n <= 99_999_999 {
            return format!("{n}{unit}");
        }
    }
    "99999999H".to_string()
}

/// Reads a `grpc-timeout` value (`100m`, `5S`...).
pub fn parse_timeout(v: &[u8]) -> Option<Duration> {
    let (&unit, digits) = v.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits.iter().fold(0u64, |a, &d| a * 10 + (d - b'0') as u64);
    let ns: u64 = match unit {
        b'n' => 1,
        b'u' => 1_000,
        b'm' => 1_000_000,
        b'S' => 1_000_000_000,
        b'M' => 60_000_000_000,
        b'H' => 3_600_000_000_000,
        _ => return None,
    };
    Some(Duration::from_nanos(n.saturating_mul(ns)))
}

/// Reads a `grpc-status` value: a decimal code of at most 5 digits.
pub fn parse_status(v: &[u8]) -> Option<u16> {
    if v.is_empty() || v.len() > 5 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = v.iter().fold(0u32, |a, &d| a * 10 + (d - b'0') as u32);
    u16::try_from(n).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_split_anywhere_deframe_alike() {
        let mut body = Vec::new();
        for len in [0u32, 1, 300, 5] {
            message(&mut body, len, |o| {
                o.extend(std::iter::repeat_n(7u8, len as usize))
            });
        }
        for cut in 0..body.len() {
            let mut d = Deframer::new();
            let mut got = Vec::new();
            d.feed(&body[..cut], |n| got.push(n)).unwrap();
            for b in &body[cut..] {
                d.feed(std::slice::from_ref(b), |n| got.push(n)).unwrap();
            }
            assert_eq!(got, [0, 1, 300, 5], "cut at {cut}");
            assert!(d.at_boundary());
        }
        let mut d = Deframer::new();
        assert_eq!(
            d.feed(&[1, 0, 0, 0, 1, 9], |_| {}),
            Err(FrameError::Compressed)
        );
        let mut d = Deframer::new();
        assert_eq!(
            d.feed(&[0, 0xff, 0, 0, 0], |_| {}),
            Err(FrameError::TooLarge)
        );
    }

    #[test]
    fn timeouts_round_up_and_read_back() {
        assert_eq!(timeout_value(Duration::from_millis(250)), "250000u");
        assert_eq!(timeout_value(Duration::from_millis(25)), "25000000n");
        assert_eq!(timeout_value(Duration::from_secs(5)), "5000000u");
        assert_eq!(timeout_value(Duration::from_secs(3600)), "3600000m");
        assert_eq!(
            timeout_value(Duration::from_nanos(1_500_000_001)),
            "1500001u"
        );
        for v in ["1n", "250m", "5S", "2M", "1H", "99999999u"] {
            let d = parse_timeout(v.as_bytes()).unwrap();
            assert_eq!(parse_timeout(timeout_value(d).as_bytes()), Some(d), "{v}");
        }
        assert_eq!(parse_timeout(b"123456789S"), None);
        assert_eq!(parse_timeout(b"5s"), None);
        assert_eq!(parse_timeout(b"S"), None);
        assert_eq!(parse_status(b"14"), Some(14));
        assert_eq!(parse_status(b"x"), None);
        assert_eq!(parse_status(b""), None);
    }
}
