//! The one chunked transfer-coding decoder (RFC 9112 section 7.1), used for response bodies by
//! the load engine and for request bodies by the backend. It is fed whatever bytes a read
//! returned, in any split, and keeps no more than a few integers of state: chunk data is handed
//! to the [`Sink`] in place, never copied. Only trailer lines are buffered (they are rare and
//! short), so that the sink can be shown each as a name and a value.
//!
//! Lines end in CRLF or a bare LF (RFC 9112 section 2.2 lets a recipient accept LF). A chunk
//! size is at most 15 hex digits; the size line, extensions included, at most
//! [`MAX_CHUNK_LINE`] bytes; the trailer section at most the budget given at construction.

use crate::Sink;

/// The longest chunk-size line accepted (size, extensions and line end).
pub const MAX_CHUNK_LINE: usize = 4 * 1024;
/// At most this many hex digits in a chunk size (so the size fits a u64 with room to spare).
const MAX_SIZE_DIGITS: u8 = 15;

/// Why chunked framing was refused. [`ChunkedError::message`] gives the load engine's wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkedError {
    /// The size is empty, not hex, or longer than 15 digits.
    BadSize,
    /// The size line (with extensions) is longer than [`MAX_CHUNK_LINE`].
    SizeLineTooLong,
    /// A chunk's data is not followed by a line end.
    DataTooLong,
    /// A trailer line's name is not a token.
    BadTrailerName,
    /// A trailer line has no colon.
    TrailerWithoutColon,
    /// The trailer section is longer than the decoder's budget.
    TrailersTooLong,
}

impl ChunkedError {
    /// A short description; the load engine reports it as a malformed response's reason.
    pub fn message(self) -> &'static str {
        match self {
            ChunkedError::BadSize => "bad chunk size",
            ChunkedError::SizeLineTooLong => "chunk-size line too long",
            ChunkedError::DataTooLong => "chunk data longer than its size",
            ChunkedError::BadTrailerName => "bad header name",
            ChunkedError::TrailerWithoutColon => "header line without a colon",
            ChunkedError::TrailersTooLong => "response head too long",
        }
    }
}

impl std::fmt::Display for ChunkedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for ChunkedError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Hex digits of a chunk size.
    Size,
    /// After the size: extensions (or whitespace) up to LF.
    Ext,
    /// CR after the size digits: LF must follow.
    SizeLf,
    /// Inside chunk data.
    Data,
    /// After chunk data: CR or LF.
    DataEnd,
    /// CR after chunk data: LF must follow.
    DataLf,
    /// At the start of a trailer line (or of the final empty line).
    TrailerStart,
    /// Inside a trailer name.
    TrailerName,
    /// CR inside a trailer name: only a line end could follow, and it would lack a colon.
    TrailerNameCr,
    /// Inside a trailer value, up to LF.
    TrailerValue,
    /// CR at the start of a line: the final LF must follow.
    FinalLf,
    /// The body has ended.
    Done,
}

/// An incremental chunked-body decoder. One per connection; [`ChunkedDecoder::reset`] per body.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    /// The size so far (in `Size`), or data bytes left (in `Data`).
    n: u64,
    /// Digits of the current size.
    digits: u8,
    /// Bytes of the current size line so far.
    line_len: usize,
    /// Trailer bytes (lines and the final empty line) so far.
    trailer_len: usize,
    /// The most trailer bytes accepted.
    trailer_budget: usize,
    /// The trailer line being read (allocated only if a body has trailers).
    trailer: Vec<u8>,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder::new(usize::MAX)
    }
}

impl ChunkedDecoder {
    /// A decoder at the start of a body that accepts at most `trailer_budget` bytes of trailer
    /// section (the trailer lines and the final empty line).
    pub fn new(trailer_budget: usize) -> ChunkedDecoder {
        ChunkedDecoder {
            state: State::Size,
            n: 0,
            digits: 0,
            line_len: 0,
            trailer_len: 0,
            trailer_budget,
            trailer: Vec::new(),
        }
    }

    /// Prepares for the next body, keeping the trailer buffer's allocation.
    pub fn reset(&mut self, trailer_budget: usize) {
        self.state = State::Size;
        self.n = 0;
        self.digits = 0;
        self.line_len = 0;
        self.trailer_len = 0;
        self.trailer_budget = trailer_budget;
        self.trailer.clear();
    }

    /// True once the final empty line has been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from the start of `input`: data goes to `sink.body`, each trailer line to
    /// `sink.header`. Returns how many bytes were consumed and whether the body ended; unless it
    /// ended, all of `input` was consumed. After the end, consumes nothing.
    pub fn feed<S: Sink + ?Sized>(
        &mut self,
        input: &[u8],
        sink: &mut S,
    ) -> Result<(usize, bool), ChunkedError> {
        if self.state == State::Done {
            return Ok((0, true));
        }
        let mut i = 0;
        while i < input.len() {
            if self.state == State::Data {
                let take = (input.len() - i).min(usize::try_from(self.n).unwrap_or(usize::MAX));
                sink.body(&input[i..i + take]);
                i += take;
                self.n -= take as u64;
                if self.n == 0 {
                    self.state = State::DataEnd;
                }
                continue;
            }
            let c = input[i];
            i += 1;
            if self.byte(c, sink)? {
                return Ok((i, true));
            }
        }
        Ok((i, self.state == State::Done))
    }

    /// One byte of framing; true when it ended the body.
    #[inline]
    fn byte<S: Sink + ?Sized>(&mut self, c: u8, sink: &mut S) -> Result<bool, ChunkedError> {
        match self.state {
            State::Size | State::Ext | State::SizeLf => {
                self.line_len += 1;
                if self.line_len > MAX_CHUNK_LINE {
                    return Err(ChunkedError::SizeLineTooLong);
                }
            }
            State::TrailerStart
            | State::TrailerName
            | State::TrailerNameCr
            | State::TrailerValue
            | State::FinalLf => {
                self.trailer_len += 1;
                if self.trailer_len > self.trailer_budget {
                    return Err(ChunkedError::TrailersTooLong);
                }
            }
            _ => {}
        }
        self.state = match self.state {
            State::Size => match c {
                b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                    if self.digits >= MAX_SIZE_DIGITS {
                        return Err(ChunkedError::BadSize);
                    }
                    self.digits += 1;
                    self.n = self.n * 16 + hex(c);
                    State::Size
                }
                b';' | b' ' | b'\t' if self.digits > 0 => State::Ext,
                b'\r' if self.digits > 0 => State::SizeLf,
                b'\n' if self.digits > 0 => self.size_done(),
                _ => return Err(ChunkedError::BadSize),
            },
            State::Ext => match c {
                b'\n' => self.size_done(),
                _ => State::Ext,
            },
            State::SizeLf => match c {
                b'\n' => self.size_done(),
                _ => return Err(ChunkedError::BadSize),
            },
            State::DataEnd => match c {
                b'\r' => State::DataLf,
                b'\n' => self.next_size(),
                _ => return Err(ChunkedError::DataTooLong),
            },
            State::DataLf => match c {
                b'\n' => self.next_size(),
                _ => return Err(ChunkedError::DataTooLong),
            },
            State::TrailerStart => match c {
                b'\r' => State::FinalLf,
                b'\n' => return Ok(self.finish()),
                b':' => return Err(ChunkedError::TrailerWithoutColon),
                c if crate::head::is_token(c) => {
                    self.trailer.clear();
                    self.trailer.push(c);
                    State::TrailerName
                }
                _ => return Err(ChunkedError::BadTrailerName),
            },
            State::TrailerName => match c {
                b':' => {
                    self.trailer.push(c);
                    State::TrailerValue
                }
                b'\r' => State::TrailerNameCr,
                b'\n' => return Err(ChunkedError::TrailerWithoutColon),
                c if crate::head::is_token(c) => {
                    self.trailer.push(c);
                    State::TrailerName
                }
                _ => return Err(ChunkedError::BadTrailerName),
            },
            State::TrailerNameCr => match c {
                b'\n' => return Err(ChunkedError::TrailerWithoutColon),
                _ => return Err(ChunkedError::BadTrailerName),
            },
            State::TrailerValue => match c {
                b'\n' => {
                    let line = self.trailer.strip_suffix(b"\r").unwrap_or(&self.trailer);
                    if let Some(colon) = memchr::memchr(b':', line) {
                        sink.header(&line[..colon], crate::head::trim(&line[colon + 1..]));
                    }
                    State::TrailerStart
                }
                c => {
                    self.trailer.push(c);
                    State::TrailerValue
                }
            },
            State::FinalLf => match c {
                b'\n' => return Ok(self.finish()),
                // "\rX": a line starting with CR, which is no header name.
                _ => return Err(ChunkedError::BadTrailerName),
            },
            State::Data | State::Done => unreachable!("handled in feed"),
        };
        Ok(false)
    }

    /// The size line has ended.
    fn size_done(&mut self) -> State {
        if self.n == 0 {
            State::TrailerStart
        } else {
            State::Data
        }
    }

    /// A chunk has ended: the next size line starts.
    fn next_size(&mut self) -> State {
        self.n = 0;
        self.digits = 0;
        self.line_len = 0;
        State::Size
    }

    fn finish(&mut self) -> bool {
        self.state = State::Done;
        true
    }
}

fn hex(c: u8) -> u64 {
    match c {
        b'0'..=b'9' => (c - b'0') as u64,
        b'a'..=b'f' => (c - b'a' + 10) as u64,
        _ => (c - b'A' + 10) as u64,
    }
}

/// Appends `data` as one chunk (nothing for empty data, which would end the body).
pub fn encode_chunk(data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Appends the last chunk and the trailer section that end a chunked body.
pub fn encode_end(trailers: &[(&[u8], &[u8])], out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n");
    for (name, value) in trailers {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Debug, PartialEq)]
    struct Keep {
        body: Vec<u8>,
        trailers: Vec<(Vec<u8>, Vec<u8>)>,
    }
    impl Sink for Keep {
        fn header(&mut self, n: &[u8], v: &[u8]) {
            self.trailers.push((n.to_vec(), v.to_vec()));
        }
        fn body(&mut self, d: &[u8]) {
            self.body.extend_from_slice(d);
        }
    }

    /// Decodes `bytes` cut at `cuts`: the body end offset (or None if more is needed), and what
    /// the sink saw; or the error.
    fn decode(bytes: &[u8], cuts: &[usize]) -> Result<(Option<usize>, Keep), ChunkedError> {
        let mut d = ChunkedDecoder::new(1024);
        let mut k = Keep::default();
        let mut off = 0;
        for &end in cuts.iter().chain([&bytes.len()]) {
            if end <= off {
                continue;
            }
            let (n, done) = d.feed(&bytes[off..end], &mut k)?;
            if done {
                return Ok((Some(off + n), k));
            }
            assert_eq!(n, end - off, "all input consumed unless done");
            off = end;
        }
        Ok((None, k))
    }

    const BODY: &[u8] = b"5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: yes \r\nY:\r\n\r\nNEXT";

    #[test]
    fn every_split_point_and_every_pair_decode_alike() {
        let end = BODY.len() - 4;
        let whole = decode(BODY, &[]).unwrap();
        assert_eq!(whole.0, Some(end));
        assert_eq!(whole.1.body, b"helloabcdefghijklmnopqrstuvwxyz");
        assert_eq!(
            whole.1.trailers,
            vec![
                (b"X-Trailer".to_vec(), b"yes".to_vec()),
                (b"Y".to_vec(), b"".to_vec())
            ]
        );
        for a in 0..=BODY.len() {
            for b in a..=BODY.len() {
                assert_eq!(decode(BODY, &[a, b]).unwrap(), whole, "cuts {a} {b}");
            }
        }
        let bytewise: Vec<usize> = (1..BODY.len()).collect();
        assert_eq!(decode(BODY, &bytewise).unwrap(), whole);
    }

    #[test]
    fn bare_newlines_and_sizes_split_across_reads() {
        let body = b"0000A\nabcdefghij\n10 ; x\n0123456789abcdef\n0\n\n";
        for cut in 0..=body.len() {
            let (end, k) = decode(body, &[cut]).unwrap();
            assert_eq!(end, Some(body.len()), "cut {cut}");
            assert_eq!(k.body, b"abcdefghij0123456789abcdef");
        }
    }

    #[test]
    fn incomplete_bodies_need_more() {
        for cut in 0..BODY.len() - 4 {
            assert_eq!(decode(&BODY[..cut], &[]).unwrap().0, None, "cut {cut}");
        }
    }

    #[test]
    fn bad_framing_is_refused_with_the_right_reason() {
        for (bad, why) in [
            (&b"x\r\n"[..], ChunkedError::BadSize),
            (b"\r\n", ChunkedError::BadSize),
            (b";ext\r\n", ChunkedError::BadSize),
            (b"5\rx", ChunkedError::BadSize),
            (b"-1\r\n", ChunkedError::BadSize),
            (b"fffffffffffffffff\r\n", ChunkedError::BadSize),
            (b"1000000000000000\r\n", ChunkedError::BadSize),
            (b"5\r\nhelloX", ChunkedError::DataTooLong),
            (b"2\r\nabc\r\n", ChunkedError::DataTooLong),
            (b"2\r\nab\rX", ChunkedError::DataTooLong),
            (b"0\r\nbad name: x\r\n", ChunkedError::BadTrailerName),
            (b"0\r\nno-colon\r\n", ChunkedError::TrailerWithoutColon),
            (b"0\r\nno-colon\n", ChunkedError::TrailerWithoutColon),
            (b"0\r\n: x\r\n", ChunkedError::TrailerWithoutColon),
            (b"0\r\n\rX", ChunkedError::BadTrailerName),
            (b"0\r\nX\rY", ChunkedError::BadTrailerName),
        ] {
            for cut in 0..=bad.len() {
                assert_eq!(
                    decode(bad, &[cut]).map(|r| r.0),
                    Err(why),
                    "{:?} cut {cut}",
                    String::from_utf8_lossy(bad)
                );
            }
        }
    }

    #[test]
    fn sizes_up_to_fifteen_digits_do_not_overflow() {
        let mut d = ChunkedDecoder::default();
        let (n, done) = d
            .feed(b"fffffffffffffff\r\nabc", &mut Keep::default())
            .unwrap();
        assert_eq!((n, done), (20, false));
    }

    #[test]
    fn long_lines_are_refused() {
        let mut line = b"1;".to_vec();
        line.resize(MAX_CHUNK_LINE - 1, b'x');
        line.push(b'\n');
        assert_eq!(decode(&line, &[]).unwrap().0, None, "exactly the limit");
        line.insert(2, b'x');
        assert_eq!(decode(&line, &[]), Err(ChunkedError::SizeLineTooLong));
        let mut trailers = b"0\r\n".to_vec();
        trailers.extend_from_slice(b"X: ");
        trailers.resize(3 + 1022, b'v');
        trailers.extend_from_slice(b"\n\n");
        assert_eq!(decode(&trailers, &[]).unwrap().0, Some(trailers.len()));
        trailers.insert(5, b'v');
        assert_eq!(decode(&trailers, &[]), Err(ChunkedError::TrailersTooLong));
    }

    #[test]
    fn encoder_round_trips_and_reset_reuses() {
        let mut out = Vec::new();
        encode_chunk(b"hello ", &mut out);
        encode_chunk(b"", &mut out);
        encode_chunk(&[7u8; 300], &mut out);
        encode_end(&[(b"T", b"1")], &mut out);
        let mut d = ChunkedDecoder::new(64);
        for _ in 0..2 {
            let mut k = Keep::default();
            assert_eq!(d.feed(&out, &mut k), Ok((out.len(), true)));
            assert_eq!(k.body.len(), 306);
            assert_eq!(k.trailers, vec![(b"T".to_vec(), b"1".to_vec())]);
            assert!(d.is_done());
            assert_eq!(d.feed(b"more", &mut k), Ok((0, true)));
            d.reset(64);
        }
    }
}
