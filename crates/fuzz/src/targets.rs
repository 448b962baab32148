//! The targets: the response codec (http1's, which the load engine uses; heads by httparse),
//! the one chunked decoder (round trip, and raw framing alone and inside both users: response
//! framing and the backend's request bodies), the backend's request parser (http1's request
//! heads), the scenario parser, and both HTTP/2 connections (`crate::h2`: the load engine's
//! client, the backend's server). Each checks invariants beyond "no panic": a broken one is
//! reported like a crash.

use crate::dict::{HTTP_TOKENS, TOML_TOKENS};
use crate::{hash, Rng, Violation};
use backend::http::{parse_head, HeadError, ReqHead};
use http1::request::{Decoder, Feed};
use http1::response::{Eof, Progress, ResponseParser};
use http1::{BodyKind, ChunkedDecoder, ChunkedError, Sink};

/// One parser under fuzzing.
pub trait Target: Sync {
    /// The name used on the command line and for the corpus directory.
    fn name(&self) -> &'static str;
    /// Tokens the mutator inserts.
    fn dictionary(&self) -> &'static [&'static [u8]];
    /// Inputs are cut to this length.
    fn max_len(&self) -> usize;
    /// Runs one input: `Err` names a broken invariant. Must not panic or hang.
    fn run(&self, input: &[u8]) -> Result<(), Violation>;
}

/// Every target, in the order `make fuzz` runs them.
pub static TARGETS: &[&dyn Target] = &[&Codec, &Chunked, &Request, &Scenario, &H2, &H2Server];

/// The target called `name`.
pub fn by_name(name: &str) -> Option<&'static dyn Target> {
    TARGETS.iter().copied().find(|t| t.name() == name)
}

/// The target called `name` among [`TARGETS`] and the planted-bug ones the engine's tests use
/// ([`crate::planted`]): what the engine and `--replay` accept.
pub fn find(name: &str) -> Option<&'static dyn Target> {
    by_name(name).or_else(|| {
        crate::planted::ALL
            .iter()
            .find(|t| t.name() == name)
            .map(|&t| t as &'static dyn Target)
    })
}

/// The HTTP/2 client connection of the load engine (`crate::h2`).
pub struct H2;

impl Target for H2 {
    fn name(&self) -> &'static str {
        "h2"
    }
    fn dictionary(&self) -> &'static [&'static [u8]] {
        crate::h2::H2_TOKENS
    }
    fn max_len(&self) -> usize {
        4096
    }
    fn run(&self, input: &[u8]) -> Result<(), Violation> {
        crate::h2::run(input)
    }
}

/// The HTTP/2 server connection of the backend (`crate::h2::run_server`).
pub struct H2Server;

impl Target for H2Server {
    fn name(&self) -> &'static str {
        "h2-server"
    }
    fn dictionary(&self) -> &'static [&'static [u8]] {
        crate::h2::H2_SERVER_TOKENS
    }
    fn max_len(&self) -> usize {
        4096
    }
    fn run(&self, input: &[u8]) -> Result<(), Violation> {
        crate::h2::run_server(input)
    }
}

/// Returns `Err` with the formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(Violation(format!($($msg)+)));
        }
    };
}

/// Cut points for feeding `len` bytes in pieces, fixed by `seed` (so a replay splits alike).
fn cuts(seed: u64, len: usize) -> Vec<usize> {
    let mut rng = Rng::new(seed);
    let mut c: Vec<usize> = (0..rng.below(8)).map(|_| rng.below(len + 1)).collect();
    if rng.one_in(8) {
        // Now and then byte by byte, the hardest split.
        c = (1..len).collect();
    }
    c.push(len);
    c.sort_unstable();
    c.dedup();
    c
}

/// A header line: name and value.
pub type Header = (Vec<u8>, Vec<u8>);

/// Keeps what a [`Sink`] is shown.
#[derive(Default)]
struct Keep {
    headers: Vec<Header>,
    body: Vec<u8>,
}

impl Sink for Keep {
    fn header(&mut self, name: &[u8], value: &[u8]) {
        self.headers.push((name.to_vec(), value.to_vec()));
    }
    fn body(&mut self, data: &[u8]) {
        self.body.extend_from_slice(data);
    }
}

/// What the response parser made of one response of a stream.
#[derive(Debug, PartialEq, Eq)]
enum Event {
    /// A response completed; `end` is the stream offset after it.
    Done {
        status: u16,
        keep_alive: bool,
        headers: Vec<Header>,
        body: Vec<u8>,
        end: usize,
    },
    /// The bytes were refused.
    Malformed(&'static str),
    /// The stream ended.
    Eof(Eof, Vec<u8>),
}

/// Parses `input` as a stream of pipelined responses fed in the pieces ending at `ends`,
/// checking the codec's contract on every call: all input consumed unless a response is
/// done, and a done response consumed at least one byte and no more than it was given.
fn responses(input: &[u8], ends: &[usize], head: bool) -> Result<Vec<Event>, Violation> {
    let mut p = ResponseParser::new();
    p.reset(head);
    let mut sink = Keep::default();
    let mut events = Vec::new();
    let mut off = 0;
    let mut k = 0;
    while off < input.len() {
        while ends[k] <= off {
            k += 1;
        }
        let end = ends[k];
        let given = end - off;
        match p.feed(&input[off..end], &mut sink) {
            Err(e) => {
                events.push(Event::Malformed(e.0));
                return Ok(events);
            }
            Ok((n, Progress::More)) => {
                ensure!(
                    n == given,
                    "feed said More after consuming {n} of {given} bytes at offset {off}"
                );
                ensure!(p.started(), "bytes were consumed but started() is false");
                off = end;
            }
            Ok((n, Progress::Done(r))) => {
                ensure!(
                    n > 0 && n <= given,
                    "feed said Done after consuming {n} of {given} bytes at offset {off}"
                );
                off += n;
                let s = std::mem::take(&mut sink);
                events.push(Event::Done {
                    status: r.status,
                    keep_alive: r.keep_alive,
                    headers: s.headers,
                    body: s.body,
                    end: off,
                });
                p.reset(head);
            }
        }
    }
    let eof = p.eof();
    if let (Eof::Empty, false) = (eof, sink.body.is_empty()) {
        return Err(Violation(
            "eof() says Empty but body bytes were delivered".into(),
        ));
    }
    events.push(Event::Eof(eof, sink.body));
    Ok(events)
}

/// Runs `input` whole and split; both must give the same events.
fn responses_any_split(input: &[u8], head: bool) -> Result<Vec<Event>, Violation> {
    let whole = responses(input, &[input.len()], head)?;
    let split_at = cuts(hash(input), input.len());
    let split = responses(input, &split_at, head)?;
    ensure!(
        whole == split,
        "split at {split_at:?} the parser saw\n{split:?}\nbut whole it saw\n{whole:?}"
    );
    Ok(whole)
}

/// The load generator's HTTP/1 response codec on arbitrary bytes, pipelined responses and
/// all, as a GET or HEAD response (chosen by the input's hash).
pub struct Codec;

impl Target for Codec {
    fn name(&self) -> &'static str {
        "codec"
    }
    fn dictionary(&self) -> &'static [&'static [u8]] {
        HTTP_TOKENS
    }
    fn max_len(&self) -> usize {
        4096
    }
    fn run(&self, input: &[u8]) -> Result<(), Violation> {
        let head = hash(input) % 8 == 0;
        let events = responses_any_split(input, head)?;
        for e in &events {
            check_length(e, head)?;
        }
        Ok(())
    }
}

/// A completed response framed by Content-Length alone has exactly that many body bytes.
fn check_length(e: &Event, head: bool) -> Result<(), Violation> {
    let Event::Done {
        status,
        headers,
        body,
        ..
    } = e
    else {
        return Ok(());
    };
    let named = |n: &[u8]| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(n));
    if head || matches!(status, 101 | 204 | 304) || named(b"transfer-encoding").is_some() {
        return Ok(());
    }
    let Some((_, v)) = named(b"content-length") else {
        return Ok(());
    };
    let Some(n) = std::str::from_utf8(v)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        return Err(Violation(format!(
            "a response completed with Content-Length {:?}",
            crate::escape(v)
        )));
    };
    ensure!(
        body.len() == n,
        "a {status} response with Content-Length {n} completed with {} body bytes",
        body.len()
    );
    Ok(())
}

/// The response head a chunked body is parsed under.
const CHUNKED_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
/// Bytes after an encoded body: the next pipelined message, which neither decoder may take.
const NEXT: &[u8] = b"NEXT";

/// Encodes `body` in chunked coding with sizes, hex case, leading zeros, extensions and
/// trailers drawn from `rng`; returns the encoding and the trailers it wrote.
pub fn encode_chunked(body: &[u8], rng: &mut Rng) -> (Vec<u8>, Vec<Header>) {
    let mut out = Vec::with_capacity(body.len() * 2 + 32);
    let cap = if rng.one_in(2) { 8 } else { 512 };
    let max_chunk = 1 + rng.below(cap);
    let size_line = |out: &mut Vec<u8>, n: usize, rng: &mut Rng| {
        let zeros = if rng.one_in(4) { rng.below(4) } else { 0 };
        out.extend(std::iter::repeat_n(b'0', zeros));
        let hex = if rng.one_in(2) {
            format!("{n:x}")
        } else {
            format!("{n:X}")
        };
        out.extend_from_slice(hex.as_bytes());
        match rng.below(6) {
            0 => out.extend_from_slice(b";ext"),
            1 => out.extend_from_slice(b";name=value;q=\"quoted; \\\"string\\\"\""),
            2 => out.extend_from_slice(b" ;spaced = 1"),
            _ => {}
        }
        out.extend_from_slice(b"\r\n");
    };
    let mut rest = body;
    while !rest.is_empty() {
        let n = (1 + rng.below(max_chunk)).min(rest.len());
        size_line(&mut out, n, rng);
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    size_line(&mut out, 0, rng);
    let mut trailers = Vec::new();
    for i in 0..rng.below(3) {
        let name = format!("X-Trailer-{i}").into_bytes();
        let value = format!("v{}", rng.next_u64()).into_bytes();
        out.extend_from_slice(&name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(&value);
        out.extend_from_slice(b"\r\n");
        trailers.push((name, value));
    }
    out.extend_from_slice(b"\r\n");
    (out, trailers)
}

/// Where the backend decoder ended a body (`Ok(Some(end))`), that it needs more (`Ok(None)`),
/// or the offset of the piece it was refused in (`Err`).
type BodyEnd = Result<Option<usize>, usize>;

/// Feeds `data` to a fresh backend body decoder in the pieces ending at `ends`; returns where
/// the body ended (`Ok(Some)`), `Ok(None)` if more is needed, or the offset it was refused at.
fn backend_body(kind: BodyKind, data: &[u8], ends: &[usize]) -> Result<BodyEnd, Violation> {
    let mut d = Decoder::new(kind);
    let mut off = 0;
    for &end in ends {
        if end <= off {
            continue;
        }
        let given = end - off;
        match d.feed(&data[off..end]) {
            Feed::More(n) => {
                ensure!(
                    n == given,
                    "backend decoder said More({n}) for {given} bytes at offset {off}"
                );
                off = end;
            }
            Feed::Done(n) => {
                ensure!(
                    n <= given,
                    "backend decoder said Done({n}) for {given} bytes at offset {off}"
                );
                return Ok(Ok(Some(off + n)));
            }
            Feed::Invalid => return Ok(Err(off)),
        }
    }
    if matches!(d, Decoder::Done) && off == 0 && kind == BodyKind::None {
        return Ok(Ok(Some(0)));
    }
    Ok(Ok(None))
}

/// What the one chunked decoder made of some bytes: where the body ended (`Ok(Some)`), that it
/// needs more (`Ok(None)`), or why it refused them; with what the sink was shown.
type ChunkedOutcome = (Result<Option<usize>, ChunkedError>, Keep);

/// Feeds `data` to a fresh chunked decoder in the pieces ending at `ends`, checking its
/// contract on every call: all input consumed unless the body ended, and no more than given.
fn chunked(data: &[u8], ends: &[usize]) -> Result<ChunkedOutcome, Violation> {
    let mut d = ChunkedDecoder::new(http1::MAX_HEAD);
    let mut keep = Keep::default();
    let mut off = 0;
    for &end in ends {
        if end <= off {
            continue;
        }
        let given = end - off;
        match d.feed(&data[off..end], &mut keep) {
            Ok((n, true)) => {
                ensure!(
                    n <= given && d.is_done(),
                    "chunked decoder ended after {n} of {given} bytes at offset {off}"
                );
                return Ok((Ok(Some(off + n)), keep));
            }
            Ok((n, false)) => {
                ensure!(
                    n == given,
                    "chunked decoder wants more after consuming {n} of {given} bytes at offset {off}"
                );
                off = end;
            }
            Err(e) => return Ok((Err(e), keep)),
        }
    }
    Ok((Ok(None), keep))
}

/// The one chunked decoder. The input is used twice: as a body, encoded with random chunking,
/// extensions and trailers, that must decode exactly in any split, alone and inside both of its
/// users (round trip); and as raw chunked framing, whose verdict (ended where, needs more, or
/// refused and why) must not depend on the split, and on which both users must agree with it.
pub struct Chunked;

impl Target for Chunked {
    fn name(&self) -> &'static str {
        "chunked"
    }
    fn dictionary(&self) -> &'static [&'static [u8]] {
        HTTP_TOKENS
    }
    fn max_len(&self) -> usize {
        4096
    }
    fn run(&self, input: &[u8]) -> Result<(), Violation> {
        // Round trip: the decoder alone...
        let mut rng = Rng::new(hash(input));
        let (encoded, trailers) = encode_chunked(input, &mut rng);
        let mut data = encoded.clone();
        data.extend_from_slice(NEXT);
        for ends in [vec![data.len()], cuts(rng.next_u64(), data.len())] {
            let (end, keep) = chunked(&data, &ends)?;
            ensure!(
                end == Ok(Some(encoded.len())) && keep.body == input && keep.headers == trailers,
                "round trip (pieces {ends:?}): ended {end:?} of {} with {} body bytes of {} and trailers {:?} (sent {trailers:?}); encoding b\"{}\"",
                encoded.len(),
                keep.body.len(),
                input.len(),
                keep.headers,
                crate::escape(&encoded)
            );
            // ... in the backend's request bodies...
            let r = backend_body(BodyKind::Chunked, &data, &ends)?;
            ensure!(
                r == Ok(Some(encoded.len())),
                "round trip: request body decoder gave {r:?} for {} encoded bytes (pieces {ends:?}); encoding b\"{}\"",
                encoded.len(),
                crate::escape(&encoded)
            );
        }
        // ... and in response framing.
        let mut stream = CHUNKED_HEAD.to_vec();
        stream.extend_from_slice(&data);
        let events = responses_any_split(&stream, false)?;
        match events.first() {
            Some(Event::Done {
                status: 200,
                keep_alive: true,
                headers,
                body,
                end,
            }) => {
                ensure!(
                    body == input && *end == stream.len() - NEXT.len(),
                    "round trip in a response: {} body bytes of {}, ended at {end} of {}",
                    body.len(),
                    input.len(),
                    stream.len() - NEXT.len()
                );
                ensure!(
                    headers.get(1..) == Some(&trailers[..]),
                    "round trip in a response: trailers {headers:?}, sent {trailers:?}"
                );
            }
            other => {
                return Err(Violation(format!(
                    "round trip: a valid chunked response gave {other:?}; encoding b\"{}\"",
                    crate::escape(&encoded)
                )))
            }
        }

        // Raw framing: alone, whole and split...
        let (whole, keep) = chunked(input, &[input.len()])?;
        let split_at = cuts(hash(input) ^ 1, input.len());
        let (split, split_keep) = chunked(input, &split_at)?;
        ensure!(
            whole == split && keep.body == split_keep.body && keep.headers == split_keep.headers,
            "chunked decoder: whole {whole:?}, split at {split_at:?} {split:?}"
        );
        // ... in a response...
        let mut stream = CHUNKED_HEAD.to_vec();
        stream.extend_from_slice(input);
        let events = responses_any_split(&stream, false)?;
        let in_response = match events.first() {
            Some(Event::Done { end, .. }) => Ok(Some(end - CHUNKED_HEAD.len())),
            Some(Event::Malformed(m)) => Err(*m),
            _ => Ok(None),
        };
        ensure!(
            in_response == whole.map_err(ChunkedError::message),
            "in a response the body gave {in_response:?}, alone {whole:?}"
        );
        // ... and as a request body.
        let backend = backend_body(BodyKind::Chunked, input, &[input.len()])?;
        ensure!(
            backend.is_ok() == whole.is_ok() && backend.ok() == whole.ok(),
            "as a request body the framing gave {backend:?}, alone {whole:?}"
        );
        Ok(())
    }
}

/// The backend's request parser on a stream of pipelined requests with bodies, processed as
/// its connections do; heads and bodies are also re-parsed from prefixes and in pieces. The
/// input also becomes a valid request whose parse must match what was built.
pub struct Request;

/// Builds a valid request from `input` (its path from the input's URL-safe bytes, the body the
/// input itself, everything else drawn from its hash), parses it, and checks every field of the
/// head against what was built and that the body ends exactly where its encoding does.
fn request_round_trip(input: &[u8]) -> Result<(), Violation> {
    let mut rng = Rng::new(hash(input) ^ 0x0072_6571_7565_7374);
    let method = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"][rng.below(6)];
    let path: String = std::iter::once('/')
        .chain(
            input
                .iter()
                .filter(|b| b.is_ascii_alphanumeric() || b"/-._~?=&%".contains(b))
                .take(200)
                .map(|&b| b as char),
        )
        .collect();
    let http11 = !rng.one_in(4);
    let mut head = format!("{method} {path} HTTP/1.{}\r\nHost: a\r\n", u8::from(http11));
    let conn = rng.below(4);
    match conn {
        1 => head.push_str("Connection: close\r\n"),
        2 => head.push_str("Connection: keep-alive\r\n"),
        3 => head.push_str("Connection: foo,  Keep-Alive \r\n"),
        _ => {}
    }
    let expect = rng.one_in(3);
    if expect {
        head.push_str("Expect: 100-continue\r\n");
    }
    let debug = rng.one_in(4);
    if debug {
        head.push_str("X-Backend-Debug: yes\r\n");
    }
    for i in 0..rng.below(5) {
        head.push_str(&format!("X-Filler-{i}: {}\r\n", rng.next_u64()));
    }
    let (kind, body) = match rng.below(3) {
        0 => (BodyKind::None, Vec::new()),
        1 => {
            head.push_str(&format!("Content-Length: {}\r\n", input.len()));
            let kind = if input.is_empty() {
                BodyKind::None
            } else {
                BodyKind::Length(input.len() as u64)
            };
            (kind, input.to_vec())
        }
        _ => {
            head.push_str("Transfer-Encoding: chunked\r\n");
            (BodyKind::Chunked, encode_chunked(input, &mut rng).0)
        }
    };
    head.push_str("\r\n");
    let keep_alive = conn != 1 && (http11 || conn >= 2);
    let want = ReqHead {
        len: head.len(),
        path: (method.len() + 1, method.len() + 1 + path.len()),
        head_only: method == "HEAD",
        keep_alive,
        ka_header: keep_alive && !http11,
        body: kind,
        expect_continue: expect && http11 && kind != BodyKind::None,
        debug,
    };
    let mut stream = head.clone().into_bytes();
    stream.extend_from_slice(&body);
    stream.extend_from_slice(NEXT);
    let got = parse_head(&stream);
    ensure!(
        got == Ok(Some(want)),
        "valid request parsed as {got:?}, built as {want:?}: b\"{}\"",
        crate::escape(&head.into_bytes())
    );
    let rest = &stream[want.len..];
    let ends = cuts(rng.next_u64(), rest.len());
    let end = backend_body(kind, rest, &ends)?;
    ensure!(
        end == Ok(Some(body.len())),
        "valid request body of {} bytes ({kind:?}) ended at {end:?} (pieces {ends:?})",
        body.len()
    );
    Ok(())
}

impl Target for Request {
    fn name(&self) -> &'static str {
        "request"
    }
    fn dictionary(&self) -> &'static [&'static [u8]] {
        HTTP_TOKENS
    }
    fn max_len(&self) -> usize {
        4096
    }
    fn run(&self, input: &[u8]) -> Result<(), Violation> {
        request_round_trip(input)?;
        let mut pos = 0;
        let mut rng = Rng::new(hash(input));
        // A bound on the pipeline, so one input's work stays small.
        for _ in 0..64 {
            if pos >= input.len() {
                break;
            }
            let rest = &input[pos..];
            match parse_head(rest) {
                Ok(Some(h)) => {
                    ensure!(
                        h.len > 0 && h.len <= rest.len(),
                        "head of {} bytes parsed from {} at offset {pos}",
                        h.len,
                        rest.len()
                    );
                    ensure!(
                        h.path.0 <= h.path.1 && h.path.1 <= h.len,
                        "path {:?} outside the head of {} bytes at offset {pos}",
                        h.path,
                        h.len
                    );
                    let again = parse_head(&rest[..h.len]);
                    ensure!(
                        again == Ok(Some(h)),
                        "the head alone parses as {again:?}, within more bytes as {h:?}"
                    );
                    // The same head arriving in two reads: the first part needs more bytes.
                    for k in [h.len - 1, rng.below(h.len)] {
                        let part = parse_head(&rest[..k]);
                        ensure!(
                            part == Ok(None),
                            "a {k}-byte prefix of a {}-byte head at offset {pos} parses as {part:?}",
                            h.len
                        );
                    }
                    pos += h.len;
                    let body = &input[pos..];
                    let whole = backend_body(h.body, body, &[body.len()])?;
                    let split_at = cuts(rng.next_u64(), body.len());
                    let split = backend_body(h.body, body, &split_at)?;
                    ensure!(
                        whole.is_ok() == split.is_ok() && whole.ok() == split.ok(),
                        "body at offset {pos}: whole {whole:?}, split at {split_at:?} {split:?}"
                    );
                    match whole {
                        Ok(Some(n)) => pos += n,
                        Ok(None) | Err(_) => break,
                    }
                }
                // Needs more bytes, or refused: either way the stream ends here.
                Ok(None) | Err(HeadError::Bad | HeadError::TooLarge) => break,
            }
        }
        Ok(())
    }
}

/// The file name scenario errors are reported under.
const SCENARIO_FILE: &str = "fuzz.toml";

/// The scenario parser, plain and `--quick`, on arbitrary text (bytes made UTF-8 lossily).
/// An error must be one line, start with the file name, and a line number, if any, must be
/// one of the text's lines.
pub struct Scenario;

impl Target for Scenario {
    fn name(&self) -> &'static str {
        "scenario"
    }
    fn dictionary(&self) -> &'static [&'static [u8]] {
        TOML_TOKENS
    }
    fn max_len(&self) -> usize {
        16 * 1024
    }
    fn run(&self, input: &[u8]) -> Result<(), Violation> {
        let src = scenario::layers::Source {
            file: SCENARIO_FILE.to_string(),
            text: String::from_utf8_lossy(input).into_owned(),
        };
        // Lines as an editor numbers them: a final line break does not open a new line.
        let lines = src.text.lines().count().max(1);
        let opts = analysis::parse_options();
        for quick in [false, true] {
            match scenario::Scenario::parse_with(&src, quick, &opts) {
                Ok(_) => {}
                Err(e) => {
                    let shown = e.to_string();
                    ensure!(
                        !shown.contains(['\n', '\r']),
                        "error is not one line: {shown:?}"
                    );
                    ensure!(
                        e.file == SCENARIO_FILE && shown.starts_with(&format!("{SCENARIO_FILE}:")),
                        "error does not start with the file name: {shown:?}"
                    );
                    ensure!(
                        !e.message.trim().is_empty(),
                        "empty error message: {shown:?}"
                    );
                    if let Some(l) = e.line {
                        ensure!(
                            (1..=lines).contains(&l),
                            "error points at line {l} of a {lines}-line text: {shown:?}"
                        );
                    }
                }
            }
        }
        Ok(())
    }
}
