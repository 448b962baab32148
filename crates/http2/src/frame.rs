//! HTTP/2 frames (RFC 9113 section 4 and 6): the 9-byte header, the type, flag, setting and
//! error-code numbers, the encoders, and the payload checks both ends share (padding, SETTINGS,
//! WINDOW_UPDATE, PING). No I/O: encoders append to a `Vec<u8>`.

/// The client connection preface (RFC 9113 3.4), sent before the first SETTINGS.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Length of a frame header.
pub const HEAD_LEN: usize = 9;
/// The default (and smallest allowed) SETTINGS_MAX_FRAME_SIZE.
pub const DEFAULT_MAX_FRAME: u32 = 16_384;
/// The default SETTINGS_INITIAL_WINDOW_SIZE and connection window.
pub const DEFAULT_WINDOW: u32 = 65_535;
/// The largest flow-control window (2^31 - 1).
pub const MAX_WINDOW: u32 = 0x7fff_ffff;
/// The largest stream identifier.
pub const MAX_STREAM_ID: u32 = 0x7fff_ffff;

/// DATA frame type.
pub const DATA: u8 = 0x0;
/// HEADERS frame type.
pub const HEADERS: u8 = 0x1;
/// PRIORITY frame type.
pub const PRIORITY: u8 = 0x2;
/// RST_STREAM frame type.
pub const RST_STREAM: u8 = 0x3;
/// SETTINGS frame type.
pub const SETTINGS: u8 = 0x4;
/// PUSH_PROMISE frame type.
pub const PUSH_PROMISE: u8 = 0x5;
/// PING frame type.
pub const PING: u8 = 0x6;
/// GOAWAY frame type.
pub const GOAWAY: u8 = 0x7;
/// WINDOW_UPDATE frame type.
pub const WINDOW_UPDATE: u8 = 0x8;
/// CONTINUATION frame type.
pub const CONTINUATION: u8 = 0x9;

/// END_STREAM flag (DATA, HEADERS).
pub const END_STREAM: u8 = 0x1;
/// ACK flag (SETTINGS, PING).
pub const ACK: u8 = 0x1;
/// END_HEADERS flag (HEADERS, CONTINUATION).
pub const END_HEADERS: u8 = 0x4;
/// PADDED flag (DATA, HEADERS).
pub const PADDED: u8 = 0x8;
/// PRIORITY flag (HEADERS).
pub const PRIORITY_FLAG: u8 = 0x20;

/// SETTINGS_HEADER_TABLE_SIZE.
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
/// SETTINGS_ENABLE_PUSH.
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
/// SETTINGS_MAX_CONCURRENT_STREAMS.
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
/// SETTINGS_INITIAL_WINDOW_SIZE.
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
/// SETTINGS_MAX_FRAME_SIZE.
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
/// SETTINGS_MAX_HEADER_LIST_SIZE.
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// HTTP/2 error codes (RFC 9113 section 7).
pub mod code {
    /// Graceful shutdown, or no error.
    pub const NO_ERROR: u32 = 0x0;
    /// A protocol error was detected.
    pub const PROTOCOL_ERROR: u32 = 0x1;
    /// An implementation fault.
    pub const INTERNAL_ERROR: u32 = 0x2;
    /// Flow-control limits were violated.
    pub const FLOW_CONTROL_ERROR: u32 = 0x3;
    /// SETTINGS were not acknowledged in time.
    pub const SETTINGS_TIMEOUT: u32 = 0x4;
    /// A frame arrived on a half-closed stream.
    pub const STREAM_CLOSED: u32 = 0x5;
    /// A frame had an invalid size.
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    /// The stream was refused before any processing.
    pub const REFUSED_STREAM: u32 = 0x7;
    /// The stream is no longer needed.
    pub const CANCEL: u32 = 0x8;
    /// The header compression context cannot be kept.
    pub const COMPRESSION_ERROR: u32 = 0x9;
    /// A CONNECT tunnel failed.
    pub const CONNECT_ERROR: u32 = 0xa;
    /// The peer is generating excessive load.
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
    /// The transport's security is insufficient.
    pub const INADEQUATE_SECURITY: u32 = 0xc;
    /// HTTP/1.1 is required.
    pub const HTTP_1_1_REQUIRED: u32 = 0xd;
}

/// The RFC name of an error code (`unknown` for codes it does not define), for reports.
pub fn code_name(c: u32) -> &'static str {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    NAMES.get(c as usize).copied().unwrap_or("UNKNOWN")
}

/// A connection error: the code sent in our GOAWAY and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnError {
    /// The HTTP/2 error code.
    pub code: u32,
    /// What the peer did.
    pub reason: &'static str,
}

/// A connection error with `code` because of `reason`.
pub(crate) fn err(code: u32, reason: &'static str) -> ConnError {
    ConnError { code, reason }
}

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Payload length (24 bits).
    pub len: u32,
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier (the reserved bit cleared).
    pub stream: u32,
}

impl Head {
    /// Decodes the first 9 bytes of `b`, or `None` when there are fewer.
    #[inline]
    pub fn parse(b: &[u8]) -> Option<Head> {
        if b.len() < HEAD_LEN {
            return None;
        }
        Some(Head {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & MAX_STREAM_ID,
        })
    }

    /// Appends this header to `out`.
    #[inline]
    pub fn write(&self, out: &mut Vec<u8>) {
        let l = self.len.to_be_bytes();
        out.extend_from_slice(&[l[1], l[2], l[3], self.kind, self.flags]);
        out.extend_from_slice(&self.stream.to_be_bytes());
    }
}

/// Appends a frame header.
#[inline]
pub fn head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    Head {
        len: len as u32,
        kind,
        flags,
        stream,
    }
    .write(out)
}

/// Appends a SETTINGS frame with these (identifier, value) pairs.
pub fn settings(out: &mut Vec<u8>, pairs: &[(u16, u32)]) {
    head(out, pairs.len() * 6, SETTINGS, 0, 0);
    for (id, v) in pairs {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Appends a SETTINGS acknowledgement.
pub fn settings_ack(out: &mut Vec<u8>) {
    head(out, 0, SETTINGS, ACK, 0);
}

/// Appends a WINDOW_UPDATE.
pub fn window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    head(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// Appends an RST_STREAM.
pub fn rst_stream(out: &mut Vec<u8>, stream: u32, error: u32) {
    head(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&error.to_be_bytes());
}

/// Appends a GOAWAY without debug data.
pub fn goaway(out: &mut Vec<u8>, last_stream: u32, error: u32) {
    head(out, 8, GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&error.to_be_bytes());
}

/// Appends a PING acknowledgement echoing `data`.
pub fn ping_ack(out: &mut Vec<u8>, data: &[u8; 8]) {
    head(out, 8, PING, ACK, 0);
    out.extend_from_slice(data);
}

/// Appends a header block as HEADERS and, when it exceeds `max_frame`, CONTINUATION frames
/// (RFC 9113 4.3); END_STREAM goes on the HEADERS frame when `end_stream`.
pub fn header_frames(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: u32,
) {
    let max = max_frame as usize;
    let end_stream = if end_stream { END_STREAM } else { 0 };
    if block.len() <= max {
        head(out, block.len(), HEADERS, END_HEADERS | end_stream, stream);
        out.extend_from_slice(block);
        return;
    }
    let mut chunks = block.chunks(max).peekable();
    let mut first = true;
    while let Some(c) = chunks.next() {
        let kind = if first { HEADERS } else { CONTINUATION };
        let mut flags = if first { end_stream } else { 0 };
        if chunks.peek().is_none() {
            flags |= END_HEADERS;
        }
        head(out, c.len(), kind, flags, stream);
        out.extend_from_slice(c);
        first = false;
    }
}

/// The payload of a DATA or HEADERS frame without its padding (6.1, 6.2).
pub fn unpad(h: Head, p: &[u8]) -> Result<&[u8], ConnError> {
    if h.flags & PADDED == 0 {
        return Ok(p);
    }
    let Some((&pad, rest)) = p.split_first() else {
        return Err(err(
            code::FRAME_SIZE_ERROR,
            "PADDED frame without a pad length",
        ));
    };
    if pad as usize > rest.len() {
        return Err(err(code::PROTOCOL_ERROR, "padding longer than the payload"));
    }
    Ok(&rest[..rest.len() - pad as usize])
}

/// Checks a SETTINGS frame that is not an acknowledgement (6.5) and calls `f(id, value)` for
/// each setting, in order, once the whole frame has proved valid: values out of their range are
/// connection errors (ENABLE_PUSH above 1, INITIAL_WINDOW_SIZE above 2^31-1, MAX_FRAME_SIZE
/// outside 16,384..16,777,215).
pub fn settings_each(
    h: Head,
    p: &[u8],
    mut f: impl FnMut(u16, u32) -> Result<(), ConnError>,
) -> Result<(), ConnError> {
    if h.stream != 0 {
        return Err(err(code::PROTOCOL_ERROR, "SETTINGS on a stream"));
    }
    if p.len() % 6 != 0 {
        return Err(err(
            code::FRAME_SIZE_ERROR,
            "SETTINGS length not a multiple of 6",
        ));
    }
    let pairs = || {
        p.chunks_exact(6).map(|s| {
            (
                u16::from_be_bytes([s[0], s[1]]),
                u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
            )
        })
    };
    for (id, v) in pairs() {
        match id {
            SETTINGS_ENABLE_PUSH if v > 1 => {
                return Err(err(code::PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH above 1"))
            }
            SETTINGS_INITIAL_WINDOW_SIZE if v > MAX_WINDOW => {
                return Err(err(
                    code::FLOW_CONTROL_ERROR,
                    "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                ))
            }
            SETTINGS_MAX_FRAME_SIZE if !(DEFAULT_MAX_FRAME..=0xff_ffff).contains(&v) => {
                return Err(err(
                    code::PROTOCOL_ERROR,
                    "SETTINGS_MAX_FRAME_SIZE out of range",
                ))
            }
            _ => {}
        }
    }
    pairs().try_for_each(|(id, v)| f(id, v))
}

/// Checks a SETTINGS acknowledgement (6.5): on stream 0, without a payload.
pub fn settings_ack_ok(h: Head, p: &[u8]) -> Result<(), ConnError> {
    if h.stream != 0 {
        return Err(err(code::PROTOCOL_ERROR, "SETTINGS on a stream"));
    }
    if !p.is_empty() {
        return Err(err(code::FRAME_SIZE_ERROR, "SETTINGS ACK with a payload"));
    }
    Ok(())
}

/// The increment of a WINDOW_UPDATE (6.9), reserved bit cleared; 0 is the caller's to judge
/// (a connection error on stream 0, a stream error on a stream).
pub fn window_increment(p: &[u8]) -> Result<u32, ConnError> {
    let Ok(b) = <[u8; 4]>::try_from(p) else {
        return Err(err(code::FRAME_SIZE_ERROR, "WINDOW_UPDATE not 4 bytes"));
    };
    Ok(u32::from_be_bytes(b) & MAX_WINDOW)
}

/// The ordering rules both endpoints check before dispatching a frame: the peer's first frame
/// is its SETTINGS (3.4; `first` says whose), and a header block's CONTINUATION frames follow it
/// on its stream (`continuing`) with no other frame in between (6.10).
pub fn order(
    h: Head,
    got_settings: bool,
    continuing: Option<u32>,
    first: &'static str,
) -> Result<(), ConnError> {
    if !got_settings && (h.kind != SETTINGS || h.flags & ACK != 0) {
        return Err(err(code::PROTOCOL_ERROR, first));
    }
    match continuing {
        Some(stream) if h.kind != CONTINUATION || h.stream != stream => Err(err(
            code::PROTOCOL_ERROR,
            "a header block interrupted by another frame",
        )),
        _ => Ok(()),
    }
}

/// Answers a PING (6.7): checks it and queues the acknowledgement of one that asks for it.
pub fn ping(out: &mut Vec<u8>, h: Head, p: &[u8]) -> Result<(), ConnError> {
    if h.stream != 0 {
        return Err(err(code::PROTOCOL_ERROR, "PING on a stream"));
    }
    let Ok(data) = <[u8; 8]>::try_from(p) else {
        return Err(err(code::FRAME_SIZE_ERROR, "PING not 8 bytes"));
    };
    if h.flags & ACK == 0 {
        ping_ack(out, &data);
    }
    Ok(())
}

/// The (last-stream-id, error code) of a GOAWAY (6.8).
pub fn goaway_fields(h: Head, p: &[u8]) -> Result<(u32, u32), ConnError> {
    if h.stream != 0 {
        return Err(err(code::PROTOCOL_ERROR, "GOAWAY on a stream"));
    }
    if p.len() < 8 {
        return Err(err(code::FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes"));
    }
    Ok((
        u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & MAX_STREAM_ID,
        u32::from_be_bytes([p[4], p[5], p[6], p[7]]),
    ))
}

/// The error code of an RST_STREAM (6.4), which must be on a stream and 4 bytes long.
pub fn rst_code(h: Head, p: &[u8]) -> Result<u32, ConnError> {
    if h.stream == 0 {
        return Err(err(code::PROTOCOL_ERROR, "RST_STREAM on stream 0"));
    }
    let Ok(b) = <[u8; 4]>::try_from(p) else {
        return Err(err(code::FRAME_SIZE_ERROR, "RST_STREAM not 4 bytes"));
    };
    Ok(u32::from_be_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let mut out = Vec::new();
        head(&mut out, 0x01_02_03, HEADERS, END_HEADERS | END_STREAM, 7);
        assert_eq!(out, [1, 2, 3, 1, 5, 0, 0, 0, 7]);
        let h = Head::parse(&out).unwrap();
        assert_eq!(
            h,
            Head {
                len: 0x01_02_03,
                kind: HEADERS,
                flags: 5,
                stream: 7
            }
        );
        // The reserved bit is ignored on receipt (RFC 9113 4.1).
        let r = Head::parse(&[0, 0, 0, 0, 0, 0x80, 0, 0, 1]).unwrap();
        assert_eq!(r.stream, 1);
        assert!(Head::parse(&out[..8]).is_none());
    }

    #[test]
    fn control_frames() {
        let mut out = Vec::new();
        settings(&mut out, &[(SETTINGS_ENABLE_PUSH, 0)]);
        assert_eq!(out, [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0]);
        out.clear();
        goaway(&mut out, 5, code::PROTOCOL_ERROR);
        assert_eq!(out, [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1]);
        assert_eq!(code_name(code::REFUSED_STREAM), "REFUSED_STREAM");
        assert_eq!(code_name(99), "UNKNOWN");
    }
}
