//! HTTP/1.x response framing, kept apart from any I/O (hyper's lesson) so it can be tested and
//! fuzzed without sockets. The parser is fed whatever bytes a read returned, in any split, and
//! says when one response is complete. Bodies are counted, never copied: a [`Sink`] sees header
//! lines and body bytes only if it wants them (a probe or the client does; the load engine does
//! not). Heads are parsed by httparse, straight from the caller's bytes when a head arrives in
//! one read (nearly always); only a head split across reads is copied, into a buffer allocated
//! once per parser.

use crate::chunked::ChunkedDecoder;
use crate::head::{parse_response, ResponseHead, MAX_HEAD};
use crate::Sink;

pub use crate::head::Malformed;

/// A complete response as far as framing cares.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Body,
    Chunked,
    UntilClose,
    Done,
}

/// An incremental HTTP/1.x response parser. One per connection, reset per request.
#[derive(Debug)]
pub struct ResponseParser {
    state: State,
    no_body: bool,
    consumed_any: bool,
    /// Bytes of heads (interims included) of the current response so far.
    head_bytes: usize,
    status: u16,
    keep_alive: bool,
    /// Body bytes left (Content-Length framing).
    remaining: u64,
    /// A head split across reads, kept until it is complete.
    buf: Vec<u8>,
    chunked: ChunkedDecoder,
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
            state: State::Head,
            no_body: false,
            consumed_any: false,
            head_bytes: 0,
            status: 0,
            keep_alive: false,
            remaining: 0,
            buf: Vec::new(),
            chunked: ChunkedDecoder::new(MAX_HEAD),
        }
    }

    /// Prepares for the next response. `head_request` means the request was HEAD, so the
    /// response has no body whatever its headers say.
    pub fn reset(&mut self, head_request: bool) {
        self.state = State::Head;
        self.no_body = head_request;
        self.consumed_any = false;
        self.head_bytes = 0;
        self.status = 0;
        self.keep_alive = false;
        self.remaining = 0;
        self.buf.clear();
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
    pub fn feed<S: Sink + ?Sized>(
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
                State::Head => {
                    let Some((head, used)) = self.head(&input[pos..], sink)? else {
                        return Ok((input.len(), Progress::More));
                    };
                    pos += used;
                    if let Some(done) = self.head_done(head) {
                        return Ok((pos, done));
                    }
                }
                State::Body => {
                    let n = (input.len() - pos)
                        .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
                    sink.body(&input[pos..pos + n]);
                    pos += n;
                    self.remaining -= n as u64;
                    if self.remaining == 0 {
                        return Ok((pos, self.done()));
                    }
                }
                State::Chunked => {
                    let (n, end) = self
                        .chunked
                        .feed(&input[pos..], sink)
                        .map_err(|e| Malformed(e.message()))?;
                    pos += n;
                    if end {
                        return Ok((pos, self.done()));
                    }
                }
                State::UntilClose => {
                    sink.body(&input[pos..]);
                    pos = input.len();
                }
                State::Done => return Err(Malformed("data after a complete response")),
            }
        }
        Ok((pos, Progress::More))
    }

    /// Parses a head from `rest` (after any bytes kept from earlier reads): the head and how
    /// many bytes of `rest` it took, or `None` when all of `rest` was kept for later.
    fn head<S: Sink + ?Sized>(
        &mut self,
        rest: &[u8],
        sink: &mut S,
    ) -> Result<Option<(ResponseHead, usize)>, Malformed> {
        const TOO_LONG: Malformed = Malformed("response head too long");
        let budget = MAX_HEAD - self.head_bytes;
        let (head, used) = if self.buf.is_empty() {
            // The usual case: the whole head is in this read.
            match parse_response(rest, sink)? {
                Some(h) => (h, h.len),
                None => {
                    if rest.len() > budget {
                        return Err(TOO_LONG);
                    }
                    self.buf.extend_from_slice(rest);
                    return Ok(None);
                }
            }
        } else {
            let old = self.buf.len();
            let take = rest.len().min(budget + 1 - old);
            self.buf.extend_from_slice(&rest[..take]);
            match parse_response(&self.buf, sink)? {
                Some(h) => {
                    self.buf.clear();
                    (h, h.len - old)
                }
                None => {
                    if self.buf.len() > budget {
                        return Err(TOO_LONG);
                    }
                    return Ok(None);
                }
            }
        };
        if head.len > budget {
            return Err(TOO_LONG);
        }
        self.head_bytes += head.len;
        Ok(Some((head, used)))
    }

    /// A head is complete: the response is done, or its body (or the final head) follows.
    fn head_done(&mut self, h: ResponseHead) -> Option<Progress> {
        if h.is_interim() {
            // An interim response: the final one follows.
            return None;
        }
        self.status = h.status;
        self.keep_alive = h.keep_alive();
        if h.status == 101 {
            // We never ask to switch protocols; the connection cannot carry HTTP/1 any more.
            self.keep_alive = false;
            return Some(self.done());
        }
        if self.no_body || h.status == 204 || h.status == 304 {
            return Some(self.done());
        }
        if h.transfer_encoding {
            if h.chunked {
                self.chunked.reset(MAX_HEAD - self.head_bytes);
                self.state = State::Chunked;
            } else {
                self.state = State::UntilClose;
            }
            return None;
        }
        match h.content_length {
            Some(0) => Some(self.done()),
            Some(n) => {
                self.remaining = n;
                self.state = State::Body;
                None
            }
            None => {
                self.state = State::UntilClose;
                None
            }
        }
    }

    fn done(&mut self) -> Progress {
        self.state = State::Done;
        Progress::Done(Response {
            status: self.status,
            keep_alive: self.keep_alive,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Discard;
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
            // Header values are judged once the head is complete.
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
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
