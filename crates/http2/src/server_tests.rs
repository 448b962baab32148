//! The server connection against hand-built client frames and against the crate's own client,
//! rule by rule of RFC 9113.

use crate::client::{ClientConn, Event};
use crate::frame::{self, code, Head};
use crate::hpack;
use crate::server::{ServerConn, ServerEvent, ServerSettings};

type Server = ServerConn<u8>;

/// Every frame in `out`: (header, payload).
fn frames(out: &[u8]) -> Vec<(Head, Vec<u8>)> {
    let mut v = Vec::new();
    let mut p = 0;
    while let Some(h) = Head::parse(&out[p..]) {
        let end = p + 9 + h.len as usize;
        v.push((h, out[p + 9..end].to_vec()));
        p = end;
    }
    assert_eq!(p, out.len(), "a partial frame in the output");
    v
}

/// The body bytes `fill` produces: byte `offset % 251`, so offsets can be checked.
fn fill(_: u8, off: u64, n: usize, out: &mut Vec<u8>) {
    out.extend((off..off + n as u64).map(|i| (i % 251) as u8));
}

/// The client's preface and an empty SETTINGS.
fn client_preface(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut v = frame::PREFACE.to_vec();
    frame::settings(&mut v, pairs);
    v
}

fn get_block(path: &str) -> Vec<u8> {
    hpack::request_block("GET", "http", "a.test", path, &[])
}

/// A GET of `path` as our client sends it (indexed after the first request).
fn get_req(path: &str) -> std::sync::Arc<hpack::RequestHeaders> {
    std::sync::Arc::new(hpack::RequestHeaders::new(
        "GET",
        "http",
        "a.test",
        path,
        &[],
    ))
}

/// A HEADERS frame carrying `block`.
fn headers(out: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool) {
    frame::header_frames(out, stream, block, end_stream, 16_384);
}

fn data(out: &mut Vec<u8>, stream: u32, body: &[u8], end: bool) {
    let flags = if end { frame::END_STREAM } else { 0 };
    frame::head(out, body.len(), frame::DATA, flags, stream);
    out.extend_from_slice(body);
}

/// A server that has taken the preface and SETTINGS, with its output and events cleared.
fn ready(settings: ServerSettings) -> Server {
    let mut s = Server::new(settings);
    s.feed(&client_preface(&[])).unwrap();
    s.out.clear();
    s.events.clear();
    s
}

/// The status line of a response block.
fn response_block(status: u16) -> Vec<u8> {
    let mut b = Vec::new();
    hpack::status(&mut b, status);
    hpack::field(&mut b, "server", "test");
    b
}

#[test]
fn settings_exchange_and_preface() {
    let mut s = Server::new(ServerSettings {
        max_concurrent: 7,
        ..ServerSettings::default()
    });
    let f = frames(&s.out);
    assert_eq!(f[0].0.kind, frame::SETTINGS);
    assert_eq!(
        f[0].1,
        [0, 3, 0, 0, 0, 7, 0, 6, 0, 1, 0, 0],
        "SETTINGS_MAX_CONCURRENT_STREAMS = 7, SETTINGS_MAX_HEADER_LIST_SIZE = 65,536"
    );
    assert_eq!((f[1].0.kind, f[1].0.stream), (frame::WINDOW_UPDATE, 0));
    s.out.clear();
    // The preface split anywhere, then SETTINGS and the ACK of ours.
    let mut c = client_preface(&[(frame::SETTINGS_MAX_FRAME_SIZE, 20_000)]);
    frame::settings_ack(&mut c);
    for b in &c {
        s.feed(std::slice::from_ref(b)).unwrap();
    }
    assert!(s.settings_acked());
    assert_eq!(s.out, [0, 0, 0, frame::SETTINGS, frame::ACK, 0, 0, 0, 0]);

    let mut s = Server::new(ServerSettings::default());
    let e = s.feed(b"GET / HTTP/1.1\r\n\r\n").unwrap_err();
    assert_eq!(e.code, code::PROTOCOL_ERROR);
    assert!(s.is_dead());
    let mut s = Server::new(ServerSettings::default());
    let mut c = frame::PREFACE.to_vec();
    frame::head(&mut c, 8, frame::PING, 0, 0);
    c.extend_from_slice(&[0; 8]);
    assert_eq!(s.feed(&c).unwrap_err().code, code::PROTOCOL_ERROR);
}

/// Runs our client against the server in memory: `n` GETs of `path`, each answered with a
/// `len`-byte body; the server's bytes reach the client cut at `cut` (0: whole).
fn round_trip(n: u32, len: u64, cut: usize) -> (Vec<Event>, Server) {
    let mut client = ClientConn::new(get_req("/p"), None);
    let mut server = Server::new(ServerSettings::default());
    for slot in 0..n {
        client.open(slot).unwrap();
    }
    let mut events = Vec::new();
    for _ in 0..20 {
        let to_server = std::mem::take(&mut client.out);
        server.feed(&to_server).unwrap();
        for e in std::mem::take(&mut server.events) {
            if let ServerEvent::Request { stream } = e {
                assert_eq!(server.head(stream).unwrap().path(), b"/p");
                assert!(server.respond(stream, &response_block(200), len, 0));
            }
        }
        server.pump(usize::MAX, fill);
        let to_client = std::mem::take(&mut server.out);
        if cut == 0 {
            client.feed(&to_client).unwrap();
        } else {
            for piece in to_client.chunks(cut) {
                client.feed(piece).unwrap();
            }
        }
        events.append(&mut client.events);
    }
    (events, server)
}

#[test]
fn our_client_gets_every_response_whatever_the_split() {
    for cut in [0, 1, 7, 100] {
        let (events, server) = round_trip(5, 3_000, cut);
        let done: Vec<_> = events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::Response {
                        status: 200,
                        bytes: 3_000,
                        ..
                    }
                )
            })
            .collect();
        assert_eq!(done.len(), 5, "cut {cut}: {events:?}");
        assert_eq!(server.active(), 0);
        assert!(!server.sending());
    }
}

#[test]
fn excess_streams_are_refused() {
    let mut s = ready(ServerSettings {
        max_concurrent: 2,
        ..ServerSettings::default()
    });
    let mut c = Vec::new();
    for id in [1, 3, 5] {
        headers(&mut c, id, &get_block("/"), true);
    }
    s.feed(&c).unwrap();
    assert_eq!(
        s.events,
        [
            ServerEvent::Request { stream: 1 },
            ServerEvent::Request { stream: 3 },
            ServerEvent::Refused { stream: 5 }
        ]
    );
    let f = frames(&s.out);
    assert_eq!((f[0].0.kind, f[0].0.stream), (frame::RST_STREAM, 5));
    assert_eq!(f[0].1, code::REFUSED_STREAM.to_be_bytes());
    // Once a stream closes, another may open.
    assert!(s.respond(1, &response_block(204), 0, 0));
    s.events.clear();
    let mut c = Vec::new();
    headers(&mut c, 7, &get_block("/"), true);
    s.feed(&c).unwrap();
    assert_eq!(s.events, [ServerEvent::Request { stream: 7 }]);
    assert_eq!(s.active(), 2);
}

#[test]
fn request_bodies_are_taken_and_their_windows_given_back() {
    let body: std::sync::Arc<[u8]> = vec![1u8; 200_000].into();
    let req = hpack::RequestHeaders::new(
        "POST",
        "http",
        "a",
        "/up",
        &[("content-length".into(), "200000".into())],
    );
    let mut client = ClientConn::new(std::sync::Arc::new(req), Some(body));
    let mut server = Server::new(ServerSettings::default());
    client.open(0).unwrap();
    let mut updates = 0;
    let mut got = None;
    for _ in 0..50 {
        server.feed(&std::mem::take(&mut client.out)).unwrap();
        for e in std::mem::take(&mut server.events) {
            if let ServerEvent::Request { stream } = e {
                got = Some(stream);
                server.respond(stream, &response_block(200), 2, 0);
            }
        }
        server.pump(usize::MAX, fill);
        let out = std::mem::take(&mut server.out);
        updates += frames(&out)
            .iter()
            .filter(|(h, _)| h.kind == frame::WINDOW_UPDATE && h.stream == 1)
            .count();
        client.feed(&out).unwrap();
    }
    assert_eq!(got, Some(1));
    // 200,000 bytes through a 65,535-byte stream window take several updates.
    assert!(updates >= 3, "{updates} stream WINDOW_UPDATEs");
    assert!(client.events.contains(&Event::Response {
        slot: 0,
        status: 200,
        bytes: 2
    }));
}

#[test]
fn response_bodies_wait_for_window_and_keep_to_the_frame_size() {
    let mut s = Server::new(ServerSettings::default());
    s.feed(&client_preface(&[(
        frame::SETTINGS_INITIAL_WINDOW_SIZE,
        1_000,
    )]))
    .unwrap();
    let mut c = Vec::new();
    headers(&mut c, 1, &get_block("/"), true);
    headers(&mut c, 3, &get_block("/"), true);
    s.feed(&c).unwrap();
    s.out.clear();
    assert!(s.respond(1, &response_block(200), 5_000, 0));
    assert!(s.respond(3, &response_block(200), 50_000, 0));
    s.pump(usize::MAX, fill);
    let sent = |out: &[u8], id| -> Vec<u32> {
        frames(out)
            .iter()
            .filter(|(h, _)| h.kind == frame::DATA && h.stream == id)
            .map(|(h, _)| h.len)
            .collect()
    };
    assert_eq!(sent(&s.out, 1), [1_000]);
    assert_eq!(sent(&s.out, 3), [1_000]);
    s.out.clear();
    // More window for stream 3: the rest of its body in frames of at most 16,384 bytes.
    let mut c = Vec::new();
    frame::window_update(&mut c, 3, 100_000);
    s.feed(&c).unwrap();
    s.pump(usize::MAX, fill);
    assert_eq!(sent(&s.out, 3), [16_384, 16_384, 16_232]);
    assert!(s.sending(), "stream 1 still waits");
    assert_eq!(s.active(), 1);
    // The connection window (65,535) has 14,535 left: stream 5's 21,000 bytes of window give
    // it only that much.
    s.out.clear();
    let mut c = Vec::new();
    headers(&mut c, 5, &get_block("/"), true);
    s.feed(&c).unwrap();
    s.respond(5, &response_block(200), 30_000, 0);
    let mut c = Vec::new();
    frame::window_update(&mut c, 5, 20_000);
    s.feed(&c).unwrap();
    s.pump(usize::MAX, fill);
    assert_eq!(sent(&s.out, 5), [14_535]);
    let mut c = Vec::new();
    frame::window_update(&mut c, 0, 100_000);
    frame::window_update(&mut c, 1, 4_000);
    s.feed(&c).unwrap();
    s.out.clear();
    s.pump(usize::MAX, fill);
    let f = frames(&s.out);
    let mut bodies: std::collections::BTreeMap<u32, Vec<u8>> = Default::default();
    for (h, p) in &f {
        if h.kind == frame::DATA {
            bodies.entry(h.stream).or_default().extend_from_slice(p);
        }
    }
    assert_eq!(bodies[&1].len(), 4_000);
    assert_eq!(
        bodies[&1][0],
        (1_000 % 251) as u8,
        "the body continues where it stopped"
    );
    let last = f.iter().rfind(|(h, _)| h.stream == 1).unwrap();
    assert_eq!(last.0.flags & frame::END_STREAM, frame::END_STREAM);
    assert_eq!(bodies[&5].len(), 21_000 - 14_535);
    assert_eq!(s.active(), 1);
}

#[test]
fn pump_stops_at_the_limit_and_resumes() {
    let mut s = ready(ServerSettings::default());
    let mut c = Vec::new();
    headers(&mut c, 1, &get_block("/"), true);
    s.feed(&c).unwrap();
    s.respond(1, &response_block(200), 40_000, 0);
    s.pump(10_000, fill);
    assert!(s.out.len() >= 10_000 && s.out.len() < 10_000 + 16_384 + 9);
    let first = s.out.len();
    s.out.clear();
    s.pump(usize::MAX, fill);
    assert!(first + s.out.len() > 40_000);
    assert_eq!(s.active(), 0);
}

#[test]
fn ping_is_answered_and_client_goaway_reported() {
    let mut s = ready(ServerSettings::default());
    let mut c = Vec::new();
    frame::head(&mut c, 8, frame::PING, 0, 0);
    c.extend_from_slice(b"pingpong");
    frame::head(&mut c, 8, frame::PING, frame::ACK, 0);
    c.extend_from_slice(b"ignored!");
    frame::goaway(&mut c, 0, code::NO_ERROR);
    s.feed(&c).unwrap();
    let mut want = Vec::new();
    frame::ping_ack(&mut want, b"pingpong");
    assert_eq!(s.out, want);
    assert_eq!(s.events, [ServerEvent::GoAway { code: 0 }]);
    assert!(s.finished());
}

#[test]
fn graceful_goaway_finishes_open_streams_and_ignores_later_ones() {
    let mut s = ready(ServerSettings::default());
    let mut c = Vec::new();
    headers(&mut c, 1, &get_block("/"), true);
    headers(&mut c, 3, &get_block("/"), false);
    s.feed(&c).unwrap();
    assert!(s.goaway());
    assert!(!s.goaway(), "one GOAWAY");
    let f = frames(&s.out);
    assert_eq!(f[0].0.kind, frame::GOAWAY);
    assert_eq!(
        f[0].1,
        [0, 0, 0, 3, 0, 0, 0, 0],
        "last-stream-id 3, NO_ERROR"
    );
    s.events.clear();
    // Stream 5 came too late; stream 3's body still completes.
    let mut c = Vec::new();
    headers(&mut c, 5, &get_block("/"), true);
    data(&mut c, 5, b"late", true);
    data(&mut c, 3, b"body", true);
    s.feed(&c).unwrap();
    assert_eq!(s.events, [ServerEvent::Request { stream: 3 }]);
    assert!(!s.finished());
    s.respond(1, &response_block(200), 3, 0);
    s.respond(3, &response_block(200), 0, 0);
    s.pump(usize::MAX, fill);
    assert!(s.finished());
    assert!(!s.is_dead());
    // No RST_STREAM for the ignored stream: the GOAWAY said it all.
    assert!(!frames(&s.out)
        .iter()
        .any(|(h, _)| h.kind == frame::RST_STREAM));
}

/// Feeds `frames` to a ready server; returns the connection error and checks the GOAWAY.
fn conn_error(setup: &[u8], bad: &[u8]) -> u32 {
    let mut s = ready(ServerSettings::default());
    s.feed(setup).unwrap();
    s.out.clear();
    let e = s.feed(bad).unwrap_err();
    assert!(s.is_dead());
    let f = frames(&s.out);
    let (h, p) = f.last().unwrap();
    assert_eq!(h.kind, frame::GOAWAY, "{e:?}");
    assert_eq!(u32::from_be_bytes([p[4], p[5], p[6], p[7]]), e.code);
    // Nothing more is taken.
    s.out.clear();
    s.feed(&client_preface(&[])).unwrap();
    assert!(s.out.is_empty());
    e.code
}

#[test]
fn connection_errors_get_goaway_with_their_code() {
    let one = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut v = Vec::new();
        f(&mut v);
        v
    };
    let open1 = one(&|v| headers(v, 1, &get_block("/"), false));
    let cases: Vec<(&str, Vec<u8>, Vec<u8>, u32)> = vec![
        (
            "DATA on stream 0",
            vec![],
            one(&|v| data(v, 0, b"x", true)),
            code::PROTOCOL_ERROR,
        ),
        (
            "HEADERS on an even id",
            vec![],
            one(&|v| headers(v, 2, &get_block("/"), true)),
            code::PROTOCOL_ERROR,
        ),
        (
            "a frame over 16 KiB",
            vec![],
            one(&|v| frame::head(v, 16_385, frame::DATA, 0, 1)),
            code::FRAME_SIZE_ERROR,
        ),
        (
            "bad HPACK",
            vec![],
            one(&|v| headers(v, 1, &[0xbf], true)),
            code::COMPRESSION_ERROR,
        ),
        (
            "a header block interrupted",
            vec![],
            one(&|v| {
                frame::head(v, 1, frame::HEADERS, 0, 1);
                v.push(0x82);
                frame::head(v, 8, frame::PING, 0, 0);
                v.extend_from_slice(&[0; 8]);
            }),
            code::PROTOCOL_ERROR,
        ),
        (
            "CONTINUATION alone",
            vec![],
            one(&|v| frame::head(v, 0, frame::CONTINUATION, frame::END_HEADERS, 1)),
            code::PROTOCOL_ERROR,
        ),
        (
            "WINDOW_UPDATE of 0 on the connection",
            vec![],
            one(&|v| frame::window_update(v, 0, 0)),
            code::PROTOCOL_ERROR,
        ),
        (
            "connection window overflow",
            vec![],
            one(&|v| frame::window_update(v, 0, frame::MAX_WINDOW)),
            code::FLOW_CONTROL_ERROR,
        ),
        (
            "SETTINGS of 5 bytes",
            vec![],
            one(&|v| {
                frame::head(v, 5, frame::SETTINGS, 0, 0);
                v.extend_from_slice(&[0; 5]);
            }),
            code::FRAME_SIZE_ERROR,
        ),
        (
            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
            vec![],
            one(&|v| frame::settings(v, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 1 << 31)])),
            code::FLOW_CONTROL_ERROR,
        ),
        (
            "PUSH_PROMISE",
            vec![],
            one(&|v| {
                frame::head(v, 4, frame::PUSH_PROMISE, frame::END_HEADERS, 1);
                v.extend_from_slice(&[0, 0, 0, 2]);
            }),
            code::PROTOCOL_ERROR,
        ),
        (
            "HEADERS on a closed stream",
            one(&|v| headers(v, 3, &get_block("/"), true)),
            one(&|v| headers(v, 1, &get_block("/"), true)),
            code::STREAM_CLOSED,
        ),
        (
            "RST_STREAM on an idle stream",
            vec![],
            one(&|v| frame::rst_stream(v, 9, code::CANCEL)),
            code::PROTOCOL_ERROR,
        ),
        (
            "DATA on an idle stream",
            vec![],
            one(&|v| data(v, 9, b"x", true)),
            code::PROTOCOL_ERROR,
        ),
        (
            "DATA beyond the connection window",
            open1.clone(),
            one(&|v| {
                for _ in 0..70 {
                    data(v, 1, &[0; 16_000], false);
                }
            }),
            code::FLOW_CONTROL_ERROR,
        ),
        (
            "PING of 7 bytes",
            vec![],
            one(&|v| {
                frame::head(v, 7, frame::PING, 0, 0);
                v.extend_from_slice(&[0; 7]);
            }),
            code::FRAME_SIZE_ERROR,
        ),
        (
            "a header block over the limit",
            vec![],
            one(&|v| {
                frame::head(v, 16_000, frame::HEADERS, 0, 1);
                v.extend_from_slice(&[0; 16_000]);
                for _ in 0..4 {
                    frame::head(v, 16_000, frame::CONTINUATION, 0, 1);
                    v.extend_from_slice(&[0; 16_000]);
                }
            }),
            code::ENHANCE_YOUR_CALM,
        ),
    ];
    for (what, setup, bad, want) in cases {
        assert_eq!(conn_error(&setup, &bad), want, "{what}");
    }
}

/// A ready server fed one HEADERS with `fields` on stream 1; returns its events.
fn request_events(fields: &[(&str, &str)], end_stream: bool, more: &[u8]) -> Vec<ServerEvent> {
    let mut s = ready(ServerSettings::default());
    let mut block = Vec::new();
    for (n, v) in fields {
        // Literal, name not indexed, so any bytes (upper case included) go through.
        block.push(0);
        hpack::string(&mut block, n.as_bytes());
        hpack::string(&mut block, v.as_bytes());
    }
    let mut c = Vec::new();
    headers(&mut c, 1, &block, end_stream);
    c.extend_from_slice(more);
    s.feed(&c).unwrap();
    assert!(!s.is_dead());
    s.events
}

#[test]
fn malformed_requests_reset_the_stream_only() {
    let base = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "a"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        v
    };
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (with(&[("X-Upper", "1")]), "upper case"),
        (with(&[("connection", "keep-alive")]), "connection-specific"),
        (with(&[("te", "gzip")]), "connection-specific"),
        (with(&[("x", "a\nb")]), "NUL, CR or LF"),
        (with(&[(":status", "200")]), "cannot have"),
        (with(&[("x", "1"), (":method", "GET")]), "after a regular"),
        (with(&[(":path", "/again")]), "twice"),
        (base[..2].to_vec(), "without :method, :scheme or :path"),
        (
            vec![(":method", ""), (":scheme", "http"), (":path", "/")],
            "not a token",
        ),
        (
            vec![(":method", "G T"), (":scheme", "http"), (":path", "/")],
            "not a token",
        ),
        (with(&[("content-length", "x")]), "invalid content-length"),
    ];
    for (fields, why) in cases {
        let ev = request_events(&fields, true, &[]);
        match ev.as_slice() {
            [ServerEvent::StreamError {
                stream: 1,
                code: code::PROTOCOL_ERROR,
                reason,
            }] => assert!(reason.contains(why), "{reason} for {fields:?}"),
            other => panic!("{fields:?}: {other:?}"),
        }
    }
    // te: trailers is allowed; a body must match its content-length.
    let ok = request_events(&with(&[("te", "trailers")]), true, &[]);
    assert_eq!(ok, [ServerEvent::Request { stream: 1 }]);
    let mut short = Vec::new();
    data(&mut short, 1, b"abc", true);
    let ev = request_events(&with(&[("content-length", "4")]), false, &short);
    assert!(
        matches!(ev[..], [ServerEvent::StreamError { reason, .. }] if reason.contains("shorter"))
    );
    let ev = request_events(&with(&[("content-length", "3")]), false, &short);
    assert_eq!(ev, [ServerEvent::Request { stream: 1 }]);
}

#[test]
fn stream_errors_by_state() {
    let mut s = ready(ServerSettings::default());
    let mut c = Vec::new();
    headers(&mut c, 1, &get_block("/"), true);
    data(&mut c, 1, b"after the end", false);
    headers(&mut c, 3, &get_block("/"), false);
    frame::window_update(&mut c, 3, 0);
    headers(&mut c, 5, &get_block("/"), false);
    frame::head(&mut c, 5, frame::PRIORITY, 0, 5);
    c.extend_from_slice(&[0, 0, 0, 5, 16]);
    s.feed(&c).unwrap();
    let errors: Vec<(u32, u32)> = s
        .events
        .iter()
        .filter_map(|e| match *e {
            ServerEvent::StreamError { stream, code, .. } => Some((stream, code)),
            _ => None,
        })
        .collect();
    assert_eq!(
        errors,
        [
            (1, code::STREAM_CLOSED),
            (3, code::PROTOCOL_ERROR),
            (5, code::PROTOCOL_ERROR)
        ]
    );
    assert_eq!(s.active(), 0);
    // Frames that cross our RST_STREAM are ignored, not errors.
    s.out.clear();
    let mut c = Vec::new();
    data(&mut c, 3, b"late", true);
    frame::window_update(&mut c, 3, 10);
    frame::rst_stream(&mut c, 5, code::CANCEL);
    s.feed(&c).unwrap();
    assert!(frames(&s.out)
        .iter()
        .all(|(h, _)| h.kind == frame::WINDOW_UPDATE));
    assert!(!s.is_dead());
}

#[test]
fn a_client_reset_drops_the_stream() {
    let mut s = ready(ServerSettings::default());
    let mut c = Vec::new();
    headers(&mut c, 1, &get_block("/"), true);
    frame::rst_stream(&mut c, 1, code::CANCEL);
    s.feed(&c).unwrap();
    assert_eq!(
        s.events,
        [
            ServerEvent::Request { stream: 1 },
            ServerEvent::Reset {
                stream: 1,
                code: code::CANCEL
            }
        ]
    );
    assert!(!s.respond(1, &response_block(200), 0, 0));
    assert_eq!(s.active(), 0);
}

#[test]
fn trailers_end_the_request_and_padding_and_continuation_are_read() {
    let mut s = ready(ServerSettings::default());
    let block = get_block("/padded");
    let (a, b) = block.split_at(3);
    let mut c = Vec::new();
    // HEADERS padded by 2, with a priority, without END_HEADERS; then a CONTINUATION.
    frame::head(
        &mut c,
        1 + 5 + a.len() + 2,
        frame::HEADERS,
        frame::PADDED | frame::PRIORITY_FLAG,
        1,
    );
    c.push(2);
    c.extend_from_slice(&[0, 0, 0, 0, 16]);
    c.extend_from_slice(a);
    c.extend_from_slice(&[0, 0]);
    frame::head(&mut c, b.len(), frame::CONTINUATION, frame::END_HEADERS, 1);
    c.extend_from_slice(b);
    data(&mut c, 1, b"body", false);
    let mut trailers = Vec::new();
    hpack::field(&mut trailers, "x-checksum", "1");
    headers(&mut c, 1, &trailers, true);
    s.feed(&c).unwrap();
    assert_eq!(s.events, [ServerEvent::Request { stream: 1 }]);
    assert_eq!(s.head(1).unwrap().path(), b"/padded");
    assert_eq!(s.head(1).unwrap().authority(), b"a.test");
}

#[test]
fn a_smaller_header_table_is_announced_in_the_next_block() {
    let mut client = ClientConn::new(get_req("/"), None);
    let mut s = Server::new(ServerSettings::default());
    let mut c = client_preface(&[(frame::SETTINGS_HEADER_TABLE_SIZE, 0)]);
    headers(&mut c, 1, &get_block("/"), true);
    headers(&mut c, 3, &get_block("/"), true);
    s.feed(&c).unwrap();
    client.open(0).unwrap();
    client.open(1).unwrap();
    s.out.clear();
    s.feed(&[]).unwrap();
    let mut server_preface = Vec::new();
    frame::settings(&mut server_preface, &[]);
    client.feed(&server_preface).unwrap();
    s.respond(1, &response_block(404), 0, 0);
    s.respond(3, &response_block(404), 0, 0);
    let f = frames(&s.out);
    assert_eq!(f[0].1[0], 0x20, "a size update to 0 opens the first block");
    assert_ne!(f[1].1[0], 0x20, "and only the first");
    client.feed(&s.out).unwrap();
    let n = client
        .events
        .iter()
        .filter(|e| matches!(e, Event::Response { status: 404, .. }))
        .count();
    assert_eq!(n, 2);
}

#[test]
fn the_outcome_does_not_depend_on_the_split() {
    let mut c = client_preface(&[]);
    for id in [1u32, 3, 5] {
        headers(&mut c, id, &get_block(&format!("/{id}")), id != 3);
    }
    data(&mut c, 3, &[7; 3000], true);
    frame::head(&mut c, 8, frame::PING, 0, 0);
    c.extend_from_slice(b"12345678");
    let whole = {
        let mut s = Server::new(ServerSettings::default());
        s.feed(&c).unwrap();
        (s.events.clone(), s.out.clone())
    };
    for cut in 1..c.len() {
        let mut s = Server::new(ServerSettings::default());
        s.feed(&c[..cut]).unwrap();
        s.feed(&c[cut..]).unwrap();
        assert_eq!((s.events.clone(), s.out.clone()), whole, "cut at {cut}");
        assert_eq!(s.buffered(), 0);
    }
}

#[test]
fn a_header_list_above_the_limit_is_reset_without_holding_it() {
    let mut s = ready(ServerSettings::default());
    // One 4,000-byte value in the dynamic table, then a block of a few hundred bytes that names
    // it 100 times: 400 kB decoded from a small block.
    let mut block = get_block("/");
    block.push(0x40);
    hpack::string(&mut block, b"x-big");
    hpack::string(&mut block, &[b'v'; 4_000]);
    let mut first = Vec::new();
    headers(&mut first, 1, &block, true);
    let mut bomb = get_block("/");
    bomb.extend(std::iter::repeat_n(0xbe, 100)); // index 62: the newest dynamic entry
    let mut c = first;
    headers(&mut c, 3, &bomb, true);
    s.feed(&c).unwrap();
    assert_eq!(s.events[0], ServerEvent::Request { stream: 1 });
    assert!(matches!(
        s.events[1],
        ServerEvent::StreamError { stream: 3, code: code::PROTOCOL_ERROR, reason }
            if reason.contains("MAX_HEADER_LIST_SIZE")
    ));
    // The HPACK context survived: a next request decodes.
    s.events.clear();
    let mut c = Vec::new();
    headers(&mut c, 5, &get_block("/after"), true);
    s.feed(&c).unwrap();
    assert_eq!(s.events, [ServerEvent::Request { stream: 5 }]);
    assert_eq!(s.head(5).unwrap().path(), b"/after");
}

/// The server's output fed to the client, both ways until neither has anything to say.
fn exchange(c: &mut ClientConn, s: &mut Server) {
    for _ in 0..8 {
        if !c.out.is_empty() {
            let out = std::mem::take(&mut c.out);
            s.feed(&out).unwrap();
        }
        s.pump(1 << 20, fill);
        if !s.out.is_empty() {
            let out = std::mem::take(&mut s.out);
            c.feed(&out).unwrap();
        }
    }
}

fn grpc_request() -> std::sync::Arc<hpack::RequestHeaders> {
    std::sync::Arc::new(hpack::RequestHeaders::new(
        "POST",
        "http",
        "a.test",
        "/proxybench.Bench/Stream",
        &[
            ("content-type".into(), crate::grpc::CONTENT_TYPE.into()),
            ("te".into(), "trailers".into()),
        ],
    ))
}

fn grpc_message(len: u32) -> Vec<u8> {
    let mut m = Vec::new();
    crate::grpc::message(&mut m, len, |o| {
        o.extend(std::iter::repeat_n(b'x', len as usize))
    });
    m
}

#[test]
fn an_open_ended_response_carries_grpc_messages_then_its_status() {
    let body: std::sync::Arc<[u8]> = grpc_message(10).into();
    let mut c = ClientConn::new(grpc_request(), Some(body));
    c.set_grpc();
    let mut s = Server::new(ServerSettings::default());
    assert_eq!(c.open(4), Some(1));
    exchange(&mut c, &mut s);
    assert!(s.events.contains(&ServerEvent::Request { stream: 1 }));
    assert_eq!(
        s.head(1).unwrap().get(b"content-type"),
        Some(&b"application/grpc"[..])
    );
    let mut head = response_block(200);
    hpack::field(&mut head, "content-type", "application/grpc");
    assert!(s.respond_open(1, &head));
    assert!(!s.respond_open(1, &head), "one response per stream");
    for len in [3, 0, 20_000] {
        assert!(s.send_data(1, &grpc_message(len)));
    }
    assert!(s.sending());
    exchange(&mut c, &mut s);
    let messages: Vec<u32> = c
        .events
        .iter()
        .filter_map(|e| match *e {
            Event::Message { slot: 4, len } => Some(len),
            _ => None,
        })
        .collect();
    assert_eq!(messages, [3, 0, 20_000]);
    assert_eq!(c.active(), 1, "no trailers yet: the call is open");
    assert!(!s.sending());
    let mut trailers = Vec::new();
    hpack::field(&mut trailers, "grpc-status", "14");
    assert!(s.send_data(1, &grpc_message(1)));
    assert!(s.send_trailers(1, &trailers));
    assert!(
        !s.send_data(1, &grpc_message(1)),
        "nothing after the trailers"
    );
    exchange(&mut c, &mut s);
    let tail: Vec<Event> = c.events.iter().rev().take(3).rev().copied().collect();
    assert_eq!(
        tail,
        [
            Event::Message { slot: 4, len: 1 },
            Event::GrpcStatus { slot: 4, code: 14 },
            Event::Response {
                slot: 4,
                status: 200,
                bytes: 20_024
            }
        ]
    );
    assert_eq!((c.active(), s.active()), (0, 0));
}

#[test]
fn an_open_ended_response_waits_for_window_and_dies_with_its_stream() {
    let mut c = ClientConn::new(grpc_request(), Some(grpc_message(0).into()));
    c.set_grpc();
    let mut s = Server::new(ServerSettings::default());
    c.open(0);
    c.open(1);
    let out = std::mem::take(&mut c.out);
    s.feed(&out).unwrap();
    // The client's windows as the protocol's defaults: 65,535 bytes.
    let mut s2 = ready(ServerSettings::default());
    let mut req = Vec::new();
    headers(
        &mut req,
        1,
        &hpack::request_block("POST", "http", "a", "/", &[]),
        true,
    );
    s2.feed(&req).unwrap();
    assert!(s2.respond_open(1, &response_block(200)));
    assert!(s2.send_data(1, &vec![0u8; 100_000]));
    s2.pump(1 << 20, fill);
    let sent: usize = frames(&s2.out)
        .iter()
        .filter(|(h, _)| h.kind == frame::DATA)
        .map(|(h, _)| h.len as usize)
        .sum();
    assert_eq!(sent, 65_535);
    assert_eq!(s2.queued(1), Some(100_000 - 65_535));
    assert!(s2.sending());
    let mut rst = Vec::new();
    frame::rst_stream(&mut rst, 1, code::CANCEL);
    s2.feed(&rst).unwrap();
    assert_eq!(s2.queued(1), None);
    assert!(!s2.send_data(1, b"x"));
    assert!(!s2.sending());
    assert_eq!(s2.active(), 0);
    // The first server saw both calls.
    assert_eq!(s.active(), 2);
}
