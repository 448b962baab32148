//! HTTP/1.x response framing, kept apart from any I/O (hyper's lesson) so it can be tested and
//! fuzzed without sockets. The parser is fed whatever bytes a read returned, in any split, and
//! says when one response is complete. Bodies are counted, never copied: a [`Sink`] sees header
//! lines and body bytes only if it wants them (the probe does; the engine does not).

/// The longest response head (status line, headers, 1xx interims, trailers) accepted.
pub const MAX_HEAD: usize = 64 * 1024;
/// The longest chunk-size line accepted.
const MAX_CHUNK_LINE: usize = 4 * 1024;

/// Receives the parts of a response that the caller wants to keep.
pub trait Sink {
    /// A header line of the final response (or of a trailer), name and trimmed value.
    fn header(&mut self, _name: &[u8], _value: &[u8]) {}
    /// A piece of the decoded body.
    fn body(&mut self, _data: &[u8]) {}
}

/// A sink that keeps nothing: what the load engine uses.
pub struct Discard;
impl Sink for Discard {}

/// A complete response as far as the engine cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// The final status code (interim 1xx responses are skipped).
    pub status: u16,
    /// Whether the connection may carry another request.
    pub keep_alive: bool,
}

/// Progress after feeding bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The response is not complete yet: feed more bytes (all input was consumed).
    More,
    /// The response is complete; bytes after the returned count belong to no request.
    Done(Response),
}

/// What the end of the stream means for the response being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eof {
    /// Not a byte of a response had arrived.
    Empty,
    /// A close-delimited body ended: the response is complete.
    Done(Response),
    /// The stream ended inside a response.
    Truncated,
}

/// The bytes are not a valid HTTP/1.x response; the message names what was wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    StatusLine,
    Headers,
    Body,
    ChunkSize,
    ChunkData,
    ChunkEnd,
    Trailers,
    UntilClose,
    Done,
}

/// An incremental HTTP/1.x response parser. One per connection, reset per request; it owns a
/// small line buffer (allocated once) for lines split across reads.
#[derive(Debug)]
pub struct ResponseParser {
    state: State,
    no_body: bool,
    status: u16,
    http10: bool,
    keep_alive: Option<bool>,
    content_length: Option<u64>,
    chunked: bool,
    transfer_encoding: bool,
    remaining: u64,
    head_bytes: usize,
    consumed_any: bool,
    line: Vec<u8>,
}

impl Default for ResponseParser {
    fn default() -> Self {
        ResponseParser::new()
    }
}

impl ResponseParser {
    /// A parser waiting for the response to a request that is not HEAD.
    pub fn new() -> ResponseParser {
        ResponseParser {
            state: State::StatusLine,
            no_body: false,
            status: 0,
            http10: false,
            keep_alive: None,
            content_length: None,
            chunked: false,
            transfer_encoding: false,
            remaining: 0,
            head_bytes: 0,
            consumed_any: false,
            line: Vec::new(),
        }
    }

    /// Prepares for the next response. `head_request` means the request was HEAD, so the
    /// response has no body whatever its headers say.
    pub fn reset(&mut self, head_request: bool) {
        self.state = State::StatusLine;
        self.no_body = head_request;
        self.consumed_any = false;
        self.head_bytes = 0;
        self.line.clear();
        self.reset_head();
    }

    fn reset_head(&mut self) {
        self.status = 0;
        self.http10 = false;
        self.keep_alive = None;
        self.content_length = None;
        self.chunked = false;
        self.transfer_encoding = false;
        self.remaining = 0;
    }

    /// True once any byte of the current response has been consumed.
    pub fn started(&self) -> bool {
        self.consumed_any
    }

    /// The stream ended (the peer closed): what that means for the current response.
    pub fn eof(&mut self) -> Eof {
        match self.state {
            State::UntilClose => {
                self.state = State::Done;
                Eof::Done(Response {
                    status: self.status,
                    keep_alive: false,
                })
            }
            _ if !self.consumed_any => Eof::Empty,
            _ => Eof::Truncated,
        }
    }

    /// Feeds `input`. Returns how many bytes were consumed and whether the response is complete.
    /// Unless the response completed, all of `input` is consumed.
    pub fn feed<S: Sink>(
        &mut self,
        input: &[u8],
        sink: &mut S,
    ) -> Result<(usize, Progress), Malformed> {
        let mut pos = 0;
        if !input.is_empty() {
            self.consumed_any = true;
        }
        while pos < input.len() {
            match self.state {
                State::Body => {
                    let n = (input.len() - pos).min(self.remaining as usize);
                    sink.body(&input[pos..pos + n]);
                    pos += n;
                    self.remaining -= n as u64;
                    if self.remaining == 0 {
                        return Ok((pos, self.done()));
                    }
                }
                State::ChunkData => {
                    let n = (input.len() - pos).min(self.remaining as usize);
                    sink.body(&input[pos..pos + n]);
                    pos += n;
                    self.remaining -= n as u64;
                    if self.remaining == 0 {
                        self.state = State::ChunkEnd;
                    }
                }
                State::UntilClose => {
                    sink.body(&input[pos..]);
                    pos = input.len();
                }
                State::Done => return Err(Malformed("data after a complete response")),
                _ => {
                    // Line-oriented states: find the end of the line.
                    let rest = &input[pos..];
                    let limit = if matches!(self.state, State::ChunkSize | State::ChunkEnd) {
                        MAX_CHUNK_LINE
                    } else {
                        MAX_HEAD.saturating_sub(self.head_bytes)
                    };
                    match memchr::memchr(b'\n', rest) {
                        None => {
                            if self.line.len() + rest.len() > limit {
                                return Err(self.too_long());
                            }
                            self.line.extend_from_slice(rest);
                            pos = input.len();
                        }
                        Some(i) => {
                            let taken = i + 1;
                            if self.line.len() + taken > limit {
                                return Err(self.too_long());
                            }
                            pos += taken;
                            if self.is_head_state() {
                                self.head_bytes += self.line.len() + taken;
                            }
                            let progress = if self.line.is_empty() {
                                self.line_done(&rest[..i], sink)?
                            } else {
                                let mut line = std::mem::take(&mut self.line);
                                line.extend_from_slice(&rest[..i]);
                                let r = self.line_done(&line, sink);
                                line.clear();
                                self.line = line;
                                r?
                            };
                            if let Progress::Done(_) = progress {
                                return Ok((pos, progress));
                            }
                        }
                    }
                }
            }
        }
        Ok((pos, Progress::More))
    }

    fn is_head_state(&self) -> bool {
        matches!(
            self.state,
            State::StatusLine | State::Headers | State::Trailers
        )
    }

    fn too_long(&self) -> Malformed {
        match self.state {
            State::ChunkSize | State::ChunkEnd => Malformed("chunk-size line too long"),
            _ => Malformed("response head too long"),
        }
    }

    fn done(&mut self) -> Progress {
        self.state = State::Done;
        let keep_alive = self.keep_alive.unwrap_or(!self.http10)
            && !(self.transfer_encoding && self.content_length.is_some());
        Progress::Done(Response {
            status: self.status,
            keep_alive,
        })
    }

    /// Handles one line (without its `\n`; a trailing `\r` is stripped here).
    fn line_done<S: Sink>(&mut self, line: &[u8], sink: &mut S) -> Result<Progress, Malformed> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match self.state {
            State::StatusLine => {
                self.status_line(line)?;
                self.state = State::Headers;
                Ok(Progress::More)
            }
            State::Headers => {
                if line.is_empty() {
                    return self.head_done();
                }
                let (name, value) = split_header(line)?;
                self.header(name, value)?;
                if (200..=599).contains(&self.status) || self.status == 101 {
                    sink.header(name, value);
                }
                Ok(Progress::More)
            }
            State::ChunkSize => {
                let size = parse_chunk_size(line)?;
                if size == 0 {
                    self.state = State::Trailers;
                } else {
                    self.remaining = size;
                    self.state = State::ChunkData;
                }
                Ok(Progress::More)
            }
            State::ChunkEnd => {
                if !line.is_empty() {
                    return Err(Malformed("chunk data longer than its size"));
                }
                self.state = State::ChunkSize;
                Ok(Progress::More)
            }
            State::Trailers => {
                if line.is_empty() {
                    return Ok(self.done());
                }
                let (name, value) = split_header(line)?;
                sink.header(name, value);
                Ok(Progress::More)
            }
            State::Body | State::ChunkData | State::UntilClose | State::Done => {
                unreachable!("not a line state")
            }
        }
    }

    fn status_line(&mut self, line: &[u8]) -> Result<(), Malformed> {
        // HTTP/1.x SP 3DIGIT [SP reason]
        if line.len() < 12 || &line[..7] != b"HTTP/1." {
            return Err(Malformed("not an HTTP/1.x status line"));
        }
        self.http10 = match line[7] {
            b'0' => true,
            b'1' => false,
            _ => return Err(Malformed("unsupported HTTP version")),
        };
        if line[8] != b' ' {
            return Err(Malformed("bad status line"));
        }
        let code = &line[9..12];
        if !code.iter().all(u8::is_ascii_digit) {
            return Err(Malformed("status code is not three digits"));
        }
        if line.len() > 12 && line[12] != b' ' {
            return Err(Malformed("status code is not three digits"));
        }
        let status =
            (code[0] - b'0') as u16 * 100 + (code[1] - b'0') as u16 * 10 + (code[2] - b'0') as u16;
        if !(100..=599).contains(&status) {
            return Err(Malformed("status code out of range"));
        }
        self.status = status;
        Ok(())
    }

    #[inline]
    fn header(&mut self, name: &[u8], value: &[u8]) -> Result<(), Malformed> {
        // Only three names matter for framing; most headers fail the length test at once.
        if !matches!(name.len(), 10 | 14 | 17) || !matches!(name[0] | 0x20, b'c' | b't') {
            return Ok(());
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = parse_decimal(value).ok_or(Malformed("bad Content-Length"))?;
            if self.content_length.is_some_and(|c| c != n) {
                return Err(Malformed("conflicting Content-Length headers"));
            }
            self.content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            self.transfer_encoding = true;
            // Only the final coding decides the framing.
            let last = value
                .rsplit(|&b| b == b',')
                .next()
                .map(trim)
                .unwrap_or_default();
            self.chunked = last.eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in value.split(|&b| b == b',').map(trim) {
                if token.eq_ignore_ascii_case(b"close") {
                    self.keep_alive = Some(false);
                } else if token.eq_ignore_ascii_case(b"keep-alive") && self.keep_alive.is_none() {
                    self.keep_alive = Some(true);
                }
            }
        }
        Ok(())
    }

    fn head_done(&mut self) -> Result<Progress, Malformed> {
        let status = self.status;
        if (100..200).contains(&status) && status != 101 {
            // An interim response: the final one follows.
            self.reset_head();
            self.state = State::StatusLine;
            return Ok(Progress::More);
        }
        if status == 101 {
            // We never ask to switch protocols; the connection cannot carry HTTP/1 any more.
            self.keep_alive = Some(false);
            return Ok(self.done());
        }
        if self.no_body || status == 204 || status == 304 {
            return Ok(self.done());
        }
        if self.transfer_encoding {
            if self.chunked {
                self.state = State::ChunkSize;
            } else {
                self.state = State::UntilClose;
            }
            return Ok(Progress::More);
        }
        match self.content_length {
            Some(0) => Ok(self.done()),
            Some(n) => {
                self.remaining = n;
                self.state = State::Body;
                Ok(Progress::More)
            }
            None => {
                self.state = State::UntilClose;
                Ok(Progress::More)
            }
        }
    }
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |i| i + 1);
    &s[start..end]
}

/// RFC 9110 token characters, as a table: header names are checked byte by byte.
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

/// Splits `name: value`, checking the name is a token. The value is only trimmed: a stray CR
/// or NUL inside it may be treated as a space (RFC 9112 section 5.1 lets a recipient do that),
/// and framing never looks at values other than the three it parses strictly.
#[inline]
fn split_header(line: &[u8]) -> Result<(&[u8], &[u8]), Malformed> {
    let mut i = 0;
    while i < line.len() && TOKEN[line[i] as usize] {
        i += 1;
    }
    if i == 0 || i == line.len() || line[i] != b':' {
        return Err(Malformed(if i < line.len() && line[i] != b':' {
            "bad header name"
        } else {
            "header line without a colon"
        }));
    }
    Ok((&line[..i], trim(&line[i + 1..])))
}

fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 18 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |n, &d| n * 10 + (d - b'0') as u64))
}

fn parse_chunk_size(line: &[u8]) -> Result<u64, Malformed> {
    let end = line
        .iter()
        .position(|&b| b == b';' || b == b' ' || b == b'\t')
        .unwrap_or(line.len());
    let hex = &line[..end];
    if hex.is_empty() || hex.len() > 15 {
        return Err(Malformed("bad chunk size"));
    }
    let mut n = 0u64;
    for &b in hex {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return Err(Malformed("bad chunk size")),
        };
        n = n * 16 + d as u64;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Default)]
    struct Keep {
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    }
    impl Sink for Keep {
        fn header(&mut self, n: &[u8], v: &[u8]) {
            self.headers.push((
                String::from_utf8_lossy(n).into(),
                String::from_utf8_lossy(v).into(),
            ));
        }
        fn body(&mut self, d: &[u8]) {
            self.body.extend_from_slice(d);
        }
    }

    /// Feeds `bytes` in pieces of `step`, returning the response, the body and the unconsumed tail.
    fn parse_split(
        bytes: &[u8],
        step: usize,
        head: bool,
    ) -> Result<(Option<Response>, Vec<u8>, usize), Malformed> {
        let mut p = ResponseParser::new();
        p.reset(head);
        let mut sink = Keep::default();
        let mut off = 0;
        while off < bytes.len() {
            let end = (off + step).min(bytes.len());
            let (n, prog) = p.feed(&bytes[off..end], &mut sink)?;
            if let Progress::Done(r) = prog {
                return Ok((Some(r), sink.body, bytes.len() - (off + n)));
            }
            assert_eq!(n, end - off, "all input consumed unless done");
            off = end;
        }
        match p.eof() {
            Eof::Done(r) => Ok((Some(r), sink.body, 0)),
            _ => Ok((None, sink.body, 0)),
        }
    }

    fn every_split(bytes: &[u8]) -> (Option<Response>, Vec<u8>, usize) {
        let whole = parse_split(bytes, bytes.len().max(1), false).unwrap();
        for step in 1..bytes.len() {
            assert_eq!(
                parse_split(bytes, step, false).unwrap(),
                whole,
                "step {step}"
            );
        }
        whole
    }

    #[test]
    fn content_length() {
        let r = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 6\r\n\r\nhello\nEXTRA";
        let (resp, body, tail) = every_split(r);
        assert_eq!(
            resp,
            Some(Response {
                status: 200,
                keep_alive: true
            })
        );
        assert_eq!(body, b"hello\n");
        assert_eq!(tail, 5);
    }

    #[test]
    fn chunked_with_extensions_and_trailers() {
        let r = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: gzip, chunked\r\n\r\n\
                  5;ext=1\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: yes\r\n\r\n";
        let (resp, body, tail) = every_split(r);
        assert_eq!(resp.unwrap().status, 201);
        assert_eq!(body, b"hello world!");
        assert_eq!(tail, 0);
    }

    #[test]
    fn close_delimited_and_http10() {
        let r = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nbody until close";
        let (resp, body, _) = every_split(r);
        assert_eq!(
            resp,
            Some(Response {
                status: 200,
                keep_alive: false
            })
        );
        assert_eq!(body, b"body until close");
        // HTTP/1.0 with an explicit keep-alive and a length keeps the connection.
        let r = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok";
        assert!(every_split(r).0.unwrap().keep_alive);
        // HTTP/1.0 with a length but no keep-alive closes.
        let r = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert!(!every_split(r).0.unwrap().keep_alive);
    }

    #[test]
    fn connection_close_and_interim_and_no_body() {
        let r = b"HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            every_split(r).0,
            Some(Response {
                status: 503,
                keep_alive: false
            })
        );
        let r = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nLink: x\r\n\r\n\
                  HTTP/1.1 204 No Content\r\nContent-Length: 99\r\n\r\n";
        let (resp, body, _) = every_split(r);
        assert_eq!(resp.unwrap().status, 204);
        assert!(body.is_empty());
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
        let (resp, _, _) = parse_split(r, r.len(), true).unwrap();
        assert_eq!(resp.unwrap().status, 200);
    }

    #[test]
    fn bare_newlines_are_accepted() {
        let r = b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok";
        assert_eq!(every_split(r).1, b"ok");
    }

    #[test]
    fn truncated_and_empty_eof() {
        let mut p = ResponseParser::new();
        assert_eq!(p.eof(), Eof::Empty);
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
        let (n, prog) = p.feed(r, &mut Discard).unwrap();
        assert_eq!((n, prog), (r.len(), Progress::More));
        assert_eq!(p.eof(), Eof::Truncated);
        p.reset(false);
        p.feed(b"HTTP/1.1 2", &mut Discard).unwrap();
        assert_eq!(p.eof(), Eof::Truncated);
    }

    #[test]
    fn garbage_is_malformed() {
        for bad in [
            &b"garbage\r\n"[..],
            b"HTTP/2 200 OK\r\n",
            b"HTTP/1.1 20 OK\r\n",
            b"HTTP/1.1 2000 OK\r\n",
            b"HTTP/1.1 099 x\r\n",
            b"HTTP/1.1 200 OK\r\nno colon here\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n",
            b"HTTP/1.1 200 OK\r\nbad name: x\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
        ] {
            let mut p = ResponseParser::new();
            assert!(
                p.feed(bad, &mut Discard).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn head_limit() {
        let mut p = ResponseParser::new();
        p.feed(b"HTTP/1.1 200 OK\r\n", &mut Discard).unwrap();
        let filler = vec![b'a'; 1024];
        let mut err = None;
        for _ in 0..100 {
            if let Err(e) = p.feed(&filler, &mut Discard) {
                err = Some(e);
                break;
            }
        }
        assert_eq!(err, Some(Malformed("response head too long")));
    }

    #[test]
    fn headers_reach_the_sink() {
        let r = b"HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\nHTTP/1.1 200 OK\r\nX-Config-Gen: 7\r\nContent-Length: 0\r\n\r\n";
        let mut p = ResponseParser::new();
        let mut k = Keep::default();
        let (_, prog) = p.feed(r, &mut k).unwrap();
        assert!(matches!(prog, Progress::Done(_)));
        assert_eq!(
            k.headers,
            vec![
                ("X-Config-Gen".to_string(), "7".to_string()),
                ("Content-Length".to_string(), "0".to_string())
            ]
        );
    }

    /// The parser's verdict on a whole input fed in the given pieces.
    #[derive(Debug, PartialEq)]
    enum Verdict {
        Done(Response, Vec<u8>, usize),
        Err(Malformed),
        Eof(Eof, Vec<u8>),
    }

    fn verdict(bytes: &[u8], cuts: &[usize]) -> Verdict {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.push(bytes.len());
        cuts.sort();
        let mut p = ResponseParser::new();
        p.reset(false);
        let mut sink = Keep::default();
        let mut off = 0;
        for &end in &cuts {
            if end <= off {
                continue;
            }
            match p.feed(&bytes[off..end], &mut sink) {
                Ok((n, Progress::Done(r))) => return Verdict::Done(r, sink.body, off + n),
                Ok((n, Progress::More)) => assert_eq!(n, end - off),
                Err(e) => return Verdict::Err(e),
            }
            off = end;
        }
        Verdict::Eof(p.eof(), sink.body)
    }

    fn response_strategy() -> impl Strategy<Value = (Vec<u8>, u16, Vec<u8>, u8)> {
        (
            prop::sample::select(vec![200u16, 201, 204, 301, 404, 500, 503]),
            prop::collection::vec(any::<u8>(), 0..300),
            0u8..3,
            prop::collection::vec(("[A-Za-z][A-Za-z0-9-]{0,12}", "[ -~]{0,20}"), 0..5),
            1usize..64,
        )
            .prop_map(|(status, body, framing, headers, chunk)| {
                let mut r = format!("HTTP/1.1 {status} Reason\r\n").into_bytes();
                for (n, v) in &headers {
                    let lower = n.to_ascii_lowercase();
                    if ["content-length", "transfer-encoding", "connection"]
                        .contains(&lower.as_str())
                    {
                        continue;
                    }
                    r.extend_from_slice(format!("{n}: {}\r\n", v.trim()).as_bytes());
                }
                let body = if status == 204 { Vec::new() } else { body };
                match framing {
                    0 => {
                        r.extend_from_slice(
                            format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(),
                        );
                        r.extend_from_slice(&body);
                    }
                    1 if status != 204 => {
                        r.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                        for piece in body.chunks(chunk) {
                            r.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                            r.extend_from_slice(piece);
                            r.extend_from_slice(b"\r\n");
                        }
                        r.extend_from_slice(b"0\r\n\r\n");
                    }
                    _ => {
                        r.extend_from_slice(b"Connection: close\r\n\r\n");
                        r.extend_from_slice(&body);
                    }
                }
                (r, status, body, framing)
            })
    }

    proptest! {
        // 2000 cases per property in the suite; `PROPTEST_CASES=500000` for a long fuzzing run.
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000),
            ..ProptestConfig::default()
        })]

        #[test]
        fn random_bytes_never_panic_and_do_not_depend_on_splits(
            bytes in prop::collection::vec(any::<u8>(), 0..400),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            prop_assert_eq!(verdict(&bytes, &cuts), verdict(&bytes, &[]));
        }

        #[test]
        fn random_bytes_after_a_valid_head_never_panic(
            tail in prop::collection::vec(any::<u8>(), 0..400),
            framing in prop::sample::select(vec![
                "Content-Length: 10\r\n\r\n", "Transfer-Encoding: chunked\r\n\r\n", "\r\n",
            ]),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let mut bytes = format!("HTTP/1.1 200 OK\r\n{framing}").into_bytes();
            bytes.extend_from_slice(&tail);
            prop_assert_eq!(verdict(&bytes, &cuts), verdict(&bytes, &[]));
        }

        #[test]
        fn valid_responses_parse_exactly_in_any_split(
            (bytes, status, body, framing) in response_strategy(),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            match verdict(&bytes, &cuts) {
                Verdict::Done(r, got, used) => {
                    prop_assert_eq!(r.status, status);
                    prop_assert_eq!(got, body);
                    prop_assert_eq!(used, bytes.len());
                    prop_assert!(framing != 2 || status == 204);
                }
                Verdict::Eof(Eof::Done(r), got) => {
                    prop_assert_eq!(framing, 2);
                    prop_assert_eq!(r.status, status);
                    prop_assert_eq!(got, body);
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }

        #[test]
        fn truncated_responses_are_never_complete(
            (bytes, _status, _body, framing) in response_strategy(),
            cut in any::<usize>(),
        ) {
            if framing == 2 {
                // Close-delimited: any prefix is a complete response at EOF.
                return Ok(());
            }
            let cut = cut % bytes.len();
            match verdict(&bytes[..cut], &[]) {
                Verdict::Eof(Eof::Truncated, _) => prop_assert!(cut > 0),
                Verdict::Eof(Eof::Empty, _) => prop_assert_eq!(cut, 0),
                other => prop_assert!(false, "cut {}: {:?}", cut, other),
            }
        }

        #[test]
        fn flipped_bytes_never_panic(
            (bytes, _s, _b, _f) in response_strategy(),
            flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..6),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let mut bytes = bytes;
            for (i, b) in flips {
                let i = i % bytes.len();
                bytes[i] = b;
            }
            prop_assert_eq!(verdict(&bytes, &cuts), verdict(&bytes, &[]));
        }
    }
}
