//! The client connection against hand-built server frames.

use crate::client::{ClientConn, Event, RECV_WINDOW};
use crate::frame::{self, code};
use crate::hpack;
use std::sync::Arc;

/// A server's frames: its SETTINGS (with `pairs`) then the ACK of ours.
fn server_preface(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::settings(&mut v, pairs);
    frame::settings_ack(&mut v);
    v
}

/// A response HEADERS frame with `:status` (literal, no indexing) and END_HEADERS.
fn response_headers(out: &mut Vec<u8>, stream: u32, status: &str, end_stream: bool) {
    let mut block = Vec::new();
    hpack::field(&mut block, ":status", status);
    hpack::field(&mut block, "server", "test");
    let flags = frame::END_HEADERS | if end_stream { frame::END_STREAM } else { 0 };
    frame::head(out, block.len(), frame::HEADERS, flags, stream);
    out.extend_from_slice(&block);
}

fn data(out: &mut Vec<u8>, stream: u32, body: &[u8], end: bool) {
    frame::head(
        out,
        body.len(),
        frame::DATA,
        if end { frame::END_STREAM } else { 0 },
        stream,
    );
    out.extend_from_slice(body);
}

fn req() -> Arc<hpack::RequestHeaders> {
    Arc::new(hpack::RequestHeaders::new(
        "GET",
        "http",
        "127.0.0.1",
        "/",
        &[],
    ))
}

#[test]
fn preface_settings_and_window() {
    let c = ClientConn::new(req(), None);
    assert!(c.out.starts_with(frame::PREFACE));
    let rest = &c.out[frame::PREFACE.len()..];
    let h = frame::Head::parse(rest).unwrap();
    assert_eq!((h.kind, h.len, h.stream), (frame::SETTINGS, 12, 0));
    let wu = frame::Head::parse(&rest[9 + 12..]).unwrap();
    assert_eq!(wu.kind, frame::WINDOW_UPDATE);
}

#[test]
fn a_response_split_at_every_byte() {
    let mut server = server_preface(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 100)]);
    response_headers(&mut server, 1, "200", false);
    data(&mut server, 1, b"hello", false);
    data(&mut server, 1, b" world", true);
    for split in 1..server.len() {
        let mut c = ClientConn::new(req(), None);
        assert_eq!(c.open(7), Some(1));
        c.feed(&server[..split]).unwrap();
        c.feed(&server[split..]).unwrap();
        assert!(c.events.contains(&Event::Response {
            slot: 7,
            status: 200,
            bytes: 11
        }));
        assert!(c.events.contains(&Event::SettingsAcked));
        assert_eq!(c.active(), 0);
        assert_eq!(c.buffered(), 0);
        assert_eq!(c.peer.max_concurrent, 100);
    }
}

#[test]
fn byte_by_byte_and_settings_ack_sent() {
    let mut server = server_preface(&[]);
    response_headers(&mut server, 1, "404", true);
    let mut c = ClientConn::new(req(), None);
    c.open(0);
    c.out.clear();
    for b in &server {
        c.feed(std::slice::from_ref(b)).unwrap();
    }
    assert_eq!(
        c.events,
        [
            Event::SettingsAcked,
            Event::Response {
                slot: 0,
                status: 404,
                bytes: 0
            }
        ]
    );
    // Our ACK of the server's SETTINGS.
    assert_eq!(c.out, [0, 0, 0, frame::SETTINGS, frame::ACK, 0, 0, 0, 0]);
}

#[test]
fn concurrency_limit_and_stream_ids() {
    let mut c = ClientConn::new(req(), None);
    c.feed(&server_preface(&[(
        frame::SETTINGS_MAX_CONCURRENT_STREAMS,
        2,
    )]))
    .unwrap();
    assert_eq!(c.open(0), Some(1));
    assert_eq!(c.open(1), Some(3));
    assert!(!c.can_open());
    assert_eq!(c.open(2), None);
    let mut s = Vec::new();
    response_headers(&mut s, 3, "200", true);
    c.feed(&s).unwrap();
    assert_eq!(c.open(2), Some(5));
}

#[test]
fn goaway_refuses_streams_above_last_id() {
    let mut c = ClientConn::new(req(), None);
    c.feed(&server_preface(&[])).unwrap();
    for slot in 0..3 {
        c.open(slot);
    }
    let mut s = Vec::new();
    frame::goaway(&mut s, 1, code::NO_ERROR);
    response_headers(&mut s, 1, "200", true);
    c.feed(&s).unwrap();
    assert!(c.events.contains(&Event::GoAway {
        last_stream: 1,
        code: 0
    }));
    let refused: Vec<u32> = c
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Refused { slot } => Some(*slot),
            _ => None,
        })
        .collect();
    assert_eq!(refused.len(), 2);
    assert!(c.events.contains(&Event::Response {
        slot: 0,
        status: 200,
        bytes: 0
    }));
    assert!(!c.can_open());
    assert!(c.finished());
}

#[test]
fn rst_stream_by_code() {
    let mut c = ClientConn::new(req(), None);
    c.feed(&server_preface(&[])).unwrap();
    c.open(4);
    let mut s = Vec::new();
    frame::rst_stream(&mut s, 1, code::REFUSED_STREAM);
    c.feed(&s).unwrap();
    assert_eq!(
        c.events.last(),
        Some(&Event::Reset {
            slot: 4,
            code: code::REFUSED_STREAM
        })
    );
    // A late frame on the closed stream is ignored, not an error.
    let mut s = Vec::new();
    data(&mut s, 1, b"late", true);
    c.feed(&s).unwrap();
}

#[test]
fn connection_errors() {
    // An HTTP/1.1 answer reads as a frame of 4.7 MB.
    let mut c = ClientConn::new(req(), None);
    let e = c.feed(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap_err();
    assert_eq!(e.code, code::FRAME_SIZE_ERROR);
    // A first frame other than SETTINGS.
    let mut c = ClientConn::new(req(), None);
    let e = c.feed(&[0, 0, 0, frame::PING, 0, 0, 0, 0, 0]).unwrap_err();
    assert_eq!(e.code, code::PROTOCOL_ERROR);
    assert!(c.is_dead());
    // GOAWAY(PROTOCOL_ERROR) queued.
    let tail = &c.out[c.out.len() - 17..];
    assert_eq!(frame::Head::parse(tail).unwrap().kind, frame::GOAWAY);

    // An oversized frame is refused from its header alone.
    let mut c = ClientConn::new(req(), None);
    c.feed(&server_preface(&[])).unwrap();
    let mut s = Vec::new();
    frame::head(&mut s, 20_000, frame::DATA, 0, 1);
    assert_eq!(c.feed(&s).unwrap_err().code, code::FRAME_SIZE_ERROR);

    // A bad HPACK block.
    let mut c = ClientConn::new(req(), None);
    c.feed(&server_preface(&[])).unwrap();
    c.open(0);
    let mut s = Vec::new();
    frame::head(&mut s, 1, frame::HEADERS, frame::END_HEADERS, 1);
    s.push(0xbf); // index 63: beyond the static table and an empty dynamic table
    assert_eq!(c.feed(&s).unwrap_err().code, code::COMPRESSION_ERROR);
    assert_eq!(c.open_slots().collect::<Vec<_>>(), [0]);

    // HEADERS on a stream never opened, and PUSH_PROMISE.
    let mut c = ClientConn::new(req(), None);
    c.feed(&server_preface(&[])).unwrap();
    let mut s = Vec::new();
    response_headers(&mut s, 5, "200", true);
    assert_eq!(c.feed(&s).unwrap_err().code, code::PROTOCOL_ERROR);
    let mut c = ClientConn::new(req(), None);
    c.feed(&server_preface(&[])).unwrap();
    let mut s = Vec::new();
    frame::head(&mut s, 4, frame::PUSH_PROMISE, frame::END_HEADERS, 1);
    s.extend_from_slice(&[0, 0, 0, 2]);
    assert_eq!(c.feed(&s).unwrap_err().code, code::PROTOCOL_ERROR);
}

#[test]
fn malformed_responses_reset_the_stream_only() {
    let mut c = ClientConn::new(req(), None);
    c.feed(&server_preface(&[])).unwrap();
    c.open(0);
    c.open(1);
    let mut s = Vec::new();
    data(&mut s, 1, b"x", true); // DATA before HEADERS
    response_headers(&mut s, 3, "2000", true); // bad status
    c.feed(&s).unwrap();
    let bad = c
        .events
        .iter()
        .filter(|e| matches!(e, Event::Malformed { .. }))
        .count();
    assert_eq!(bad, 2);
    assert!(!c.is_dead());
}

#[test]
fn informational_then_final_and_trailers() {
    let mut c = ClientConn::new(req(), None);
    c.feed(&server_preface(&[])).unwrap();
    c.open(0);
    let mut s = Vec::new();
    response_headers(&mut s, 1, "103", false);
    response_headers(&mut s, 1, "200", false);
    data(&mut s, 1, b"abc", false);
    let mut trailers = Vec::new();
    hpack::field(&mut trailers, "grpc-status", "0");
    frame::head(
        &mut s,
        trailers.len(),
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        1,
    );
    s.extend_from_slice(&trailers);
    c.feed(&s).unwrap();
    assert_eq!(
        c.events.last(),
        Some(&Event::Response {
            slot: 0,
            status: 200,
            bytes: 3
        })
    );
}

#[test]
fn continuation_and_padding() {
    let mut c = ClientConn::new(req(), None);
    c.feed(&server_preface(&[])).unwrap();
    c.open(0);
    let mut b = Vec::new();
    hpack::field(&mut b, ":status", "204");
    hpack::field(&mut b, "x-long", &"v".repeat(100));
    let (a, rest) = b.split_at(10);
    let mut s = Vec::new();
    // HEADERS, padded by 3, without END_HEADERS.
    frame::head(
        &mut s,
        a.len() + 4,
        frame::HEADERS,
        frame::PADDED | frame::END_STREAM,
        1,
    );
    s.push(3);
    s.extend_from_slice(a);
    s.extend_from_slice(&[0, 0, 0]);
    frame::head(
        &mut s,
        rest.len(),
        frame::CONTINUATION,
        frame::END_HEADERS,
        1,
    );
    s.extend_from_slice(rest);
    c.feed(&s).unwrap();
    assert_eq!(
        c.events.last(),
        Some(&Event::Response {
            slot: 0,
            status: 204,
            bytes: 0
        })
    );
    // A PING in the middle of a header block is a protocol error.
    let mut c = ClientConn::new(req(), None);
    c.feed(&server_preface(&[])).unwrap();
    c.open(0);
    let mut s = Vec::new();
    frame::head(&mut s, a.len(), frame::HEADERS, 0, 1);
    s.extend_from_slice(a);
    frame::head(&mut s, 8, frame::PING, 0, 0);
    s.extend_from_slice(&[0; 8]);
    assert_eq!(c.feed(&s).unwrap_err().code, code::PROTOCOL_ERROR);
}

#[test]
fn ping_is_answered() {
    let mut c = ClientConn::new(req(), None);
    c.feed(&server_preface(&[])).unwrap();
    c.out.clear();
    let mut s = Vec::new();
    frame::head(&mut s, 8, frame::PING, 0, 0);
    s.extend_from_slice(b"12345678");
    c.feed(&s).unwrap();
    let mut want = Vec::new();
    frame::ping_ack(&mut want, b"12345678");
    assert_eq!(c.out, want);
}

#[test]
fn receive_window_is_given_back() {
    let mut c = ClientConn::new(req(), None);
    c.feed(&server_preface(&[(frame::SETTINGS_MAX_FRAME_SIZE, 16_384)]))
        .unwrap();
    c.open(0);
    c.out.clear();
    let mut s = Vec::new();
    response_headers(&mut s, 1, "200", false);
    c.feed(&s).unwrap();
    // Half the window in 16 KiB frames makes us send WINDOW_UPDATEs for stream and connection.
    let chunk = vec![0u8; 16_384];
    let frames = (RECV_WINDOW / 2) as usize / chunk.len() + 1;
    for _ in 0..frames {
        let mut s = Vec::new();
        data(&mut s, 1, &chunk, false);
        c.feed(&s).unwrap();
    }
    let mut kinds = Vec::new();
    let mut p = 0;
    while let Some(h) = frame::Head::parse(&c.out[p..]) {
        kinds.push((h.kind, h.stream));
        p += 9 + h.len as usize;
    }
    assert!(kinds.contains(&(frame::WINDOW_UPDATE, 0)));
    assert!(kinds.contains(&(frame::WINDOW_UPDATE, 1)));
}

#[test]
fn bodies_wait_for_window_and_stall_is_reported() {
    let body: std::sync::Arc<[u8]> = vec![7u8; 100_000].into();
    let mut c = ClientConn::new(req(), Some(body));
    c.feed(&server_preface(&[])).unwrap();
    c.out.clear();
    c.open(9);
    assert!(c.events.contains(&Event::Stalled { slot: 9 }));
    let sent = |out: &[u8]| {
        let mut p = 0;
        let mut n = 0;
        while let Some(h) = frame::Head::parse(&out[p..]) {
            if h.kind == frame::DATA {
                n += h.len as usize;
            }
            p += 9 + h.len as usize;
        }
        n
    };
    assert_eq!(sent(&c.out), 65_535);
    let mut s = Vec::new();
    frame::window_update(&mut s, 0, 40_000);
    frame::window_update(&mut s, 1, 40_000);
    c.feed(&s).unwrap();
    assert_eq!(sent(&c.out), 100_000);
}

#[test]
fn settings_timeout_is_the_callers_connection_error() {
    let mut c = ClientConn::new(req(), None);
    c.open(0);
    assert!(!c.settings_acked());
    c.fail(code::SETTINGS_TIMEOUT);
    assert!(c.is_dead() && c.finished());
    assert_eq!(c.open_slots().count(), 1);
}

/// The header blocks in `out` (one per HEADERS frame; no CONTINUATION here), after the
/// connection preface if it is there.
fn header_blocks(out: &[u8]) -> Vec<Vec<u8>> {
    let out = out.strip_prefix(frame::PREFACE).unwrap_or(out);
    let mut v = Vec::new();
    let mut p = 0;
    while let Some(h) = frame::Head::parse(&out[p..]) {
        let end = p + 9 + h.len as usize;
        if h.kind == frame::HEADERS {
            v.push(out[p + 9..end].to_vec());
        }
        p = end;
    }
    v
}

#[test]
fn repeated_requests_name_their_fields_by_index() {
    let request = Arc::new(hpack::RequestHeaders::new(
        "GET",
        "http",
        "127.0.0.1:8080",
        "/",
        &[("User-Agent".to_string(), "proxybench".to_string())],
    ));
    let mut c = ClientConn::new(request, None);
    c.feed(&server_preface(&[])).unwrap();
    for slot in 0..4 {
        c.open(slot);
    }
    let blocks = header_blocks(&c.out);
    assert_eq!(blocks.len(), 4);
    // The first adds :authority and user-agent; the others are one byte a field, as h2load's.
    assert!(blocks[0].len() > 20);
    for b in &blocks[1..] {
        assert_eq!(b, &[0x82, 0x86, 0x80 | 63, 0x84, 0x80 | 62]);
    }
    // A server decoder sees the same five fields every time.
    let mut d = hpack::Decoder::new();
    let mut all = Vec::new();
    for b in &blocks {
        let mut f = Vec::new();
        d.decode(b, |n, v| f.push((n.to_vec(), v.to_vec())))
            .unwrap();
        all.push(f);
    }
    assert!(all.iter().all(|f| f == &all[0] && f.len() == 5));
}

#[test]
fn a_smaller_table_from_the_server_is_announced_and_the_request_indexed_again() {
    let mut c = ClientConn::new(req(), None);
    c.open(0);
    let mut d = hpack::Decoder::new();
    let want = {
        let mut f = Vec::new();
        let first = header_blocks(&c.out).remove(0);
        d.decode(&first, |n, v| f.push((n.to_vec(), v.to_vec())))
            .unwrap();
        f
    };
    c.out.clear();
    // The server allows 60 bytes: room for :authority (10 + 9 + 32) only.
    c.feed(&server_preface(&[(frame::SETTINGS_HEADER_TABLE_SIZE, 60)]))
        .unwrap();
    c.out.clear();
    c.open(1);
    c.open(2);
    let blocks = header_blocks(&c.out);
    // Size updates to 0 then 60 open the next block, and only it (RFC 7541 4.2, 6.3).
    assert_eq!(&blocks[0][..3], &[0x20, 0x3f, 60 - 31]);
    assert_ne!(blocks[1][0] & 0xe0, 0x20);
    assert_eq!(blocks[1], [0x82, 0x86, 0x80 | 62, 0x84]);
    for b in &blocks {
        let mut f = Vec::new();
        d.decode(b, |n, v| f.push((n.to_vec(), v.to_vec())))
            .unwrap();
        assert_eq!(f, want);
    }
    // No table at all: every block is the stateless encoding.
    c.feed(&server_preface(&[(frame::SETTINGS_HEADER_TABLE_SIZE, 0)]))
        .unwrap();
    c.out.clear();
    c.open(3);
    c.open(4);
    let blocks = header_blocks(&c.out);
    let stateless = hpack::request_block("GET", "http", "127.0.0.1", "/", &[]);
    assert_eq!(blocks[0][0], 0x20);
    assert_eq!(&blocks[0][1..], &stateless[..]);
    assert_eq!(blocks[1], stateless);
}

#[test]
fn grpc_messages_and_status_split_at_every_byte() {
    let mut server = server_preface(&[]);
    let mut block = Vec::new();
    hpack::field(&mut block, ":status", "200");
    hpack::field(&mut block, "content-type", "application/grpc");
    frame::head(
        &mut server,
        block.len(),
        frame::HEADERS,
        frame::END_HEADERS,
        1,
    );
    server.extend_from_slice(&block);
    let mut body = Vec::new();
    for len in [2u32, 0, 40] {
        crate::grpc::message(&mut body, len, |o| {
            o.extend(std::iter::repeat_n(1u8, len as usize))
        });
    }
    // The messages cut across two DATA frames.
    data(&mut server, 1, &body[..4], false);
    data(&mut server, 1, &body[4..], false);
    let mut trailers = Vec::new();
    hpack::field(&mut trailers, "grpc-status", "0");
    hpack::field(&mut trailers, "grpc-message", "");
    frame::head(
        &mut server,
        trailers.len(),
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        1,
    );
    server.extend_from_slice(&trailers);
    for split in 1..server.len() {
        let mut c = ClientConn::new(req(), None);
        c.set_grpc();
        c.open(3);
        c.feed(&server[..split]).unwrap();
        c.feed(&server[split..]).unwrap();
        let ev: Vec<Event> = c
            .events
            .iter()
            .copied()
            .filter(|e| *e != Event::SettingsAcked)
            .collect();
        assert_eq!(
            ev,
            [
                Event::Message { slot: 3, len: 2 },
                Event::Message { slot: 3, len: 0 },
                Event::Message { slot: 3, len: 40 },
                Event::GrpcStatus { slot: 3, code: 0 },
                Event::Response {
                    slot: 3,
                    status: 200,
                    bytes: 57
                }
            ],
            "split at {split}"
        );
    }
}

#[test]
fn grpc_trailers_only_and_plain_mode_ignore() {
    // Trailers-Only: the status in the one HEADERS frame that ends the stream.
    let mut server = server_preface(&[]);
    let mut block = Vec::new();
    hpack::field(&mut block, ":status", "200");
    hpack::field(&mut block, "grpc-status", "12");
    frame::head(
        &mut server,
        block.len(),
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        1,
    );
    server.extend_from_slice(&block);
    let mut c = ClientConn::new(req(), None);
    c.set_grpc();
    c.open(0);
    c.feed(&server).unwrap();
    assert!(c.events.contains(&Event::GrpcStatus { slot: 0, code: 12 }));
    // Without gRPC mode the same bytes are a plain response.
    let mut c = ClientConn::new(req(), None);
    c.open(0);
    c.feed(&server).unwrap();
    assert!(!c
        .events
        .iter()
        .any(|e| matches!(e, Event::GrpcStatus { .. } | Event::Message { .. })));
    // A compressed message is a malformed stream.
    let mut server = server_preface(&[]);
    response_headers(&mut server, 1, "200", false);
    data(&mut server, 1, &[1, 0, 0, 0, 1, 7], false);
    let mut c = ClientConn::new(req(), None);
    c.set_grpc();
    c.open(5);
    c.feed(&server).unwrap();
    assert!(c
        .events
        .iter()
        .any(|e| matches!(e, Event::Malformed { slot: 5, .. })));
}

#[test]
fn grpc_mode_reads_a_non_200_body_as_the_proxys_page_not_messages() {
    // nginx's own 404 (no route to the method yet): an HTML body, no grpc-status. A gRPC
    // client reads it by its status; its bytes are no messages and no malformed stream.
    let mut server = server_preface(&[]);
    response_headers(&mut server, 1, "404", false);
    data(&mut server, 1, b"<html>404 Not Found</html>", true);
    let mut c = ClientConn::new(req(), None);
    c.set_grpc();
    c.open(5);
    c.feed(&server).unwrap();
    assert!(
        c.events.contains(&Event::Response {
            slot: 5,
            status: 404,
            bytes: 26
        }),
        "{:?}",
        c.events
    );
    assert!(!c
        .events
        .iter()
        .any(|e| matches!(e, Event::Malformed { .. } | Event::Message { .. })));
}
