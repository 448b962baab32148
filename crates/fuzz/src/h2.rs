//! The HTTP/2 targets. `h2`: the load engine's client connection (`http2::ClientConn`) fed a
//! server's bytes. The first input byte says how many streams the client opens (1 to 8); the
//! rest is what the server sent. Invariants: the outcome (events, connection error, bytes
//! queued) does not depend on how the bytes were split; every stream ends at most once, and only
//! streams that were opened; a connection error leaves the connection dead. `h2-server`: the
//! backend's server connection (`http2::ServerConn`) fed a client's bytes ([`run_server`]).

use crate::{Rng, Violation};
use http2::frame;
use http2::{ClientConn, Event, ServerConn, ServerEvent, ServerSettings};
use std::hash::{DefaultHasher, Hash, Hasher};

/// Tokens for HTTP/2: frame headers of each type, a server SETTINGS, HPACK bytes.
pub const H2_TOKENS: &[&[u8]] = &[
    b"\x00\x00\x00\x04\x00\x00\x00\x00\x00",
    b"\x00\x00\x00\x04\x01\x00\x00\x00\x00",
    b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64",
    b"\x00\x00\x01\x01\x05\x00\x00\x00\x01\x88",
    b"\x00\x00\x01\x01\x04\x00\x00\x00\x03\x8d",
    b"\x00\x00\x05\x00\x01\x00\x00\x00\x01hello",
    b"\x00\x00\x04\x03\x00\x00\x00\x00\x01\x00\x00\x00\x07",
    b"\x00\x00\x08\x07\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00",
    b"\x00\x00\x08\x06\x00\x00\x00\x00\x00abcdefgh",
    b"\x00\x00\x04\x08\x00\x00\x00\x00\x00\x00\x01\x00\x00",
    b"\x00\x00\x00\x09\x04\x00\x00\x00\x01",
    b"\x00\x40\x00",
    b"\x00\x40\x01",
    b"\x48\x03\x33\x30\x32",
    b"\x0f\x10",
    b"\x3f\xe1\x1f",
    b"\x82",
    b"\x88",
    b"\x00\x00\x00\x01",
    b"\x7f\xff\xff\xff",
];

/// What one run made of the input: the events, the error, and how many bytes were queued.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Outcome {
    events: Vec<Event>,
    error: Option<(u32, &'static str)>,
    queued: usize,
    open: Vec<u32>,
}

fn run_split(streams: u32, server: &[u8], cuts: &[usize]) -> Outcome {
    let request = http2::hpack::RequestHeaders::new("GET", "http", "a", "/", &[]);
    let mut c = ClientConn::new(std::sync::Arc::new(request), None);
    for slot in 0..streams {
        c.open(slot);
    }
    let mut events = Vec::new();
    let mut error = None;
    let mut at = 0;
    for &cut in cuts {
        if let Err(e) = c.feed(&server[at..cut]) {
            error.get_or_insert((e.code, e.reason));
        }
        events.append(&mut c.events);
        at = cut;
    }
    let mut open: Vec<u32> = c.open_slots().collect();
    open.sort_unstable();
    Outcome {
        events,
        error,
        queued: c.out.len(),
        open,
    }
}

/// Runs one input (see the module documentation).
pub fn run(input: &[u8]) -> Result<u64, Violation> {
    let Some((&n, server)) = input.split_first() else {
        return Ok(0);
    };
    let streams = u32::from(n % 8) + 1;
    let whole = run_split(streams, server, &[server.len()]);
    let mut rng = Rng::new(crate::hash(input));
    let mut cuts: Vec<usize> = (0..rng.below(6))
        .map(|_| rng.below(server.len() + 1))
        .collect();
    if rng.one_in(8) {
        cuts = (1..server.len()).collect();
    }
    cuts.push(server.len());
    cuts.sort_unstable();
    cuts.dedup();
    let split = run_split(streams, server, &cuts);
    if whole != split {
        return Err(Violation(format!(
            "the outcome depends on the split at {cuts:?}: {whole:?} vs {split:?}"
        )));
    }
    let mut ended = vec![false; streams as usize];
    for e in &whole.events {
        let slot = match *e {
            Event::Response { slot, .. }
            | Event::Reset { slot, .. }
            | Event::Refused { slot }
            | Event::Malformed { slot, .. } => slot,
            _ => continue,
        };
        let Some(done) = ended.get_mut(slot as usize) else {
            return Err(Violation(format!(
                "an event for stream slot {slot} never opened"
            )));
        };
        if *done {
            return Err(Violation(format!("stream slot {slot} ended twice")));
        }
        *done = true;
    }
    for &s in &whole.open {
        if ended[s as usize] {
            return Err(Violation(format!("stream slot {s} ended but still open")));
        }
    }
    let kinds: Vec<_> = whole
        .events
        .iter()
        .take(4)
        .map(std::mem::discriminant)
        .collect();
    let mut h = DefaultHasher::new();
    (kinds, whole.error, whole.open.len()).hash(&mut h);
    Ok(h.finish())
}

/// Tokens for the server side: client frames of each type, request header blocks, HPACK bytes.
pub const H2_SERVER_TOKENS: &[&[u8]] = &[
    // SETTINGS, its ACK, a SETTINGS with INITIAL_WINDOW_SIZE 1 and with HEADER_TABLE_SIZE 0
    b"\x00\x00\x00\x04\x00\x00\x00\x00\x00",
    b"\x00\x00\x00\x04\x01\x00\x00\x00\x00",
    b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x01",
    b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00",
    // HEADERS GET / (END_STREAM, END_HEADERS) on stream 1 and 3; without END_STREAM on 5
    b"\x00\x00\x04\x01\x05\x00\x00\x00\x01\x82\x86\x84\x81",
    b"\x00\x00\x04\x01\x05\x00\x00\x00\x03\x82\x86\x84\x81",
    b"\x00\x00\x04\x01\x04\x00\x00\x00\x05\x83\x86\x84\x81",
    // DATA on 5 with END_STREAM, RST_STREAM CANCEL on 1, WINDOW_UPDATE on 0 and on 1
    b"\x00\x00\x05\x00\x01\x00\x00\x00\x05hello",
    b"\x00\x00\x04\x03\x00\x00\x00\x00\x01\x00\x00\x00\x08",
    b"\x00\x00\x04\x08\x00\x00\x00\x00\x00\x00\x01\x00\x00",
    b"\x00\x00\x04\x08\x00\x00\x00\x00\x01\x00\x01\x00\x00",
    // PING, GOAWAY, CONTINUATION, PRIORITY
    b"\x00\x00\x08\x06\x00\x00\x00\x00\x00abcdefgh",
    b"\x00\x00\x08\x07\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
    b"\x00\x00\x00\x09\x04\x00\x00\x00\x01",
    b"\x00\x00\x05\x02\x00\x00\x00\x00\x03\x00\x00\x00\x01\x10",
    // HPACK: content-length literal, a table size update, upper case and te literals
    b"\x0f\x0d\x01\x33",
    b"\x3f\xe1\x1f",
    b"\x00\x01X\x01y",
    b"\x00\x02te\x04gzip",
    b"\x82",
    b"\x84",
    b"\x7f\xff\xff\xff",
];

/// The body length the first input byte picks.
const BODIES: [u64; 8] = [0, 1, 10, 100, 1_000, 20_000, 70_000, 200_000];

/// What one run of the server made of the client's bytes, answering at the end only.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ServerOutcome {
    events: Vec<ServerEvent>,
    error: Option<(u32, &'static str)>,
    out: Vec<u8>,
}

fn settings_of(opt: u8) -> ServerSettings {
    ServerSettings {
        max_concurrent: 1 + u32::from(opt & 7),
        ..ServerSettings::default()
    }
}

/// Feeds the preface and `client` cut at `cuts`, answering nothing until every byte is in.
fn server_split(opt: u8, client: &[u8], cuts: &[usize]) -> ServerOutcome {
    let mut s: ServerConn<()> = ServerConn::new(settings_of(opt));
    let mut error = None;
    if let Err(e) = s.feed(frame::PREFACE) {
        error = Some((e.code, e.reason));
    }
    let mut at = 0;
    for &cut in cuts {
        if let Err(e) = s.feed(&client[at..cut]) {
            error.get_or_insert((e.code, e.reason));
        }
        at = cut;
    }
    ServerOutcome {
        events: std::mem::take(&mut s.events),
        error,
        out: std::mem::take(&mut s.out),
    }
}

/// Runs one input of the `h2-server` target: the first byte picks the server's stream limit
/// (1 to 8, bits 0-2), the response body length (bits 3-5) and whether to send GOAWAY after
/// the first request (bit 6); the rest is what a client sent after its preface. Invariants: the
/// events, connection error and output do not depend on how the bytes were split; answered as
/// they come, every request is answered once (unless a reset or a connection error came with
/// it), no stream ends twice, the open streams never exceed the limit, every response body is
/// sent whole in DATA frames no larger than the client's frame size, and the output is whole
/// frames.
pub fn run_server(input: &[u8]) -> Result<u64, Violation> {
    let Some((&opt, client)) = input.split_first() else {
        return Ok(0);
    };
    let whole = server_split(opt, client, &[client.len()]);
    let mut rng = Rng::new(crate::hash(input));
    let mut cuts: Vec<usize> = (0..rng.below(6))
        .map(|_| rng.below(client.len() + 1))
        .collect();
    if rng.one_in(8) {
        cuts = (1..client.len()).collect();
    }
    cuts.push(client.len());
    cuts.sort_unstable();
    cuts.dedup();
    let split = server_split(opt, client, &cuts);
    if whole != split {
        return Err(Violation(format!(
            "the server's outcome depends on the split at {cuts:?}: {whole:?} vs {split:?}"
        )));
    }
    let body = BODIES[usize::from(opt >> 3 & 7)];
    let answered = serve_as_it_comes(opt, client, &cuts, body)?;
    let kinds: Vec<_> = whole
        .events
        .iter()
        .take(4)
        .map(std::mem::discriminant)
        .collect();
    let mut h = DefaultHasher::new();
    (kinds, whole.error.map(|e| e.1), answered.min(3)).hash(&mut h);
    Ok(h.finish())
}

/// Feeds the client's bytes in pieces, answering each request at once with `body` bytes and
/// pumping bodies after each piece, and checks the invariants on the events and the output.
/// Returns how many requests were answered.
fn serve_as_it_comes(
    opt: u8,
    client: &[u8],
    cuts: &[usize],
    body: u64,
) -> Result<usize, Violation> {
    let settings = settings_of(opt);
    let mut s: ServerConn<u64> = ServerConn::new(settings);
    let _ = s.feed(frame::PREFACE);
    let mut ended = std::collections::HashSet::new();
    let mut answered = 0;
    let mut at = 0;
    let mut out = std::mem::take(&mut s.out);
    let mut block = Vec::new();
    for &cut in cuts {
        let _ = s.feed(&client[at..cut]);
        at = cut;
        let events = std::mem::take(&mut s.events);
        for (i, e) in events.iter().copied().enumerate() {
            match e {
                ServerEvent::Request { stream } => {
                    if !ended.insert(stream) {
                        return Err(Violation(format!("stream {stream} ended twice")));
                    }
                    let Some(head) = s.head(stream) else {
                        // Reset in the same bytes: the reset must follow.
                        let reset = events[i..].iter().any(|e| {
                            matches!(*e, ServerEvent::Reset { stream: r, .. }
                                | ServerEvent::StreamError { stream: r, .. } if r == stream)
                        });
                        if !reset {
                            return Err(Violation(format!(
                                "request {stream} without a head nor a reset"
                            )));
                        }
                        continue;
                    };
                    if head.method().is_empty() {
                        return Err(Violation(format!("request {stream} without a method")));
                    }
                    block.clear();
                    http2::hpack::status(&mut block, 200);
                    if !s.respond(stream, &block, body, 7) {
                        // Only a connection error in the same bytes may stop an answer.
                        if !s.is_dead() {
                            return Err(Violation(format!(
                                "request {stream} could not be answered"
                            )));
                        }
                        continue;
                    }
                    answered += 1;
                    if opt & 0x40 != 0 {
                        s.goaway();
                    }
                }
                ServerEvent::Reset { stream, .. }
                | ServerEvent::Refused { stream }
                | ServerEvent::StreamError { stream, .. } => {
                    ended.insert(stream);
                }
                ServerEvent::GoAway { .. } => {}
            }
        }
        if s.active() > settings.max_concurrent as usize {
            return Err(Violation(format!(
                "{} streams open above the limit of {}",
                s.active(),
                settings.max_concurrent
            )));
        }
        s.pump(s.out.len() + 100_000, |tag, off, n, o| {
            debug_assert_eq!(tag, 7);
            o.extend(std::iter::repeat_n(b'x', n));
            let _ = off;
        });
        check_frame_sizes(&s.out, s.peer_max_frame())?;
        out.append(&mut s.out);
    }
    check_output(&out, body)?;
    Ok(answered)
}

/// No DATA frame is larger than the client's SETTINGS_MAX_FRAME_SIZE.
fn check_frame_sizes(out: &[u8], max: u32) -> Result<(), Violation> {
    let mut p = 0;
    while let Some(h) = frame::Head::parse(&out[p..]) {
        if h.kind == frame::DATA && h.len > max {
            return Err(Violation(format!(
                "a DATA frame of {} bytes, above the client's {max}",
                h.len
            )));
        }
        p += 9 + h.len as usize;
        if p > out.len() {
            break;
        }
    }
    Ok(())
}

/// The server's output is whole frames; response DATA never exceeds the body's length, and a
/// stream whose body ended got all of it.
fn check_output(out: &[u8], body: u64) -> Result<(), Violation> {
    let mut sent: std::collections::HashMap<u32, (u64, bool)> = Default::default();
    let mut p = 0;
    while let Some(h) = frame::Head::parse(&out[p..]) {
        let end = p + 9 + h.len as usize;
        if end > out.len() {
            return Err(Violation(format!(
                "a partial frame at byte {p} of the output"
            )));
        }
        if h.kind == frame::DATA {
            let e = sent.entry(h.stream).or_default();
            if e.1 {
                return Err(Violation(format!(
                    "DATA on stream {} after its end",
                    h.stream
                )));
            }
            e.0 += h.len as u64;
            e.1 = h.flags & frame::END_STREAM != 0;
            if e.0 > body || (e.1 && e.0 != body) {
                return Err(Violation(format!(
                    "stream {} sent {} body bytes of {body}",
                    h.stream, e.0
                )));
            }
        }
        p = end;
    }
    if p != out.len() {
        return Err(Violation(format!(
            "{} stray bytes at the end of the output",
            out.len() - p
        )));
    }
    Ok(())
}
