//! The HTTP/2 target: the load engine's client connection (`http2::ClientConn`) fed a server's
//! bytes. The first input byte says how many streams the client opens (1 to 8); the rest is
//! what the server sent. Invariants: the outcome (events, connection error, bytes queued) does
//! not depend on how the bytes were split; every stream ends at most once, and only streams
//! that were opened; a connection error leaves the connection dead.

use crate::{Rng, Violation};
use http2::{ClientConn, Event};
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
    let mut c = ClientConn::new(None);
    let block = http2::hpack::request_block("GET", "http", "a", "/", &[]);
    for slot in 0..streams {
        c.open(slot, &block);
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
