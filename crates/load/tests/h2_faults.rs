//! HTTP/2 against raw TCP servers on 127.0.0.1 that break the protocol: garbage, truncated and
//! oversized frames, a bad HPACK block, no SETTINGS acknowledgement, silence, RST_STREAM on
//! every stream and a GOAWAY with an error. Each request ends exactly once, as the error its
//! fault makes; the run never crashes or hangs.

mod common;

use common::{cfg_n, run, TestServer};
use http2::frame::{self, code};
use model::ErrorKind;
use proxybench_load as load;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Reads the client's preface and frames, calling `on_headers(stream id)` for each HEADERS,
/// until the client closes or the server stops.
fn client_frames(
    s: &mut TcpStream,
    ctx: &common::Ctx,
    mut on_headers: impl FnMut(&mut TcpStream, u32),
) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut preface = false;
    loop {
        if !preface && buf.len() >= frame::PREFACE.len() {
            buf.drain(..frame::PREFACE.len());
            preface = true;
        }
        while preface && !buf.is_empty() {
            let Some(h) = frame::Head::parse(&buf) else {
                break;
            };
            let end = 9 + h.len as usize;
            if buf.len() < end {
                break;
            }
            buf.drain(..end);
            if h.kind == frame::HEADERS {
                on_headers(s, h.stream);
            }
        }
        if ctx.stop.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        match s.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return,
        }
    }
}

/// A server SETTINGS and the ACK of the client's.
fn preface() -> Vec<u8> {
    let mut v = Vec::new();
    frame::settings(&mut v, &[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 100)]);
    frame::settings_ack(&mut v);
    v
}

/// Runs `n` requests over 2 connections with 3 streams each against `srv`.
fn load(srv: &TestServer, n: u64) -> model::LoadSummary {
    let mut c = cfg_n(&srv.url("/"), n, 2);
    c.http2 = true;
    c.streams = 3;
    c.io = load::IoMode::Epoll;
    c.timeout = Duration::from_millis(300);
    c.reconnect_backoff = Duration::ZERO;
    run(&c).summary
}

/// Every one of `n` attempts failed, all as `kind`.
fn all_failed_as(s: &model::LoadSummary, n: u64, kind: ErrorKind) {
    assert_eq!(s.requests, 0, "{s:?}");
    assert_eq!(s.error_total(), n, "{:?} {:?}", s.errors, s.error_messages);
    assert_eq!(
        s.errors.get(&kind).copied(),
        Some(n),
        "{:?}",
        s.error_messages
    );
}

#[test]
fn garbage_is_a_connection_error() {
    let srv = TestServer::start(|mut s, ctx| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
        client_frames(&mut s, ctx, |_, _| {});
    });
    let s = load(&srv, 30);
    all_failed_as(&s, 30, ErrorKind::Malformed);
    let h = s.http2.unwrap();
    assert!(
        h.connection_errors.contains_key("FRAME_SIZE_ERROR"),
        "{h:?}"
    );
}

#[test]
fn oversized_and_bad_hpack_frames_are_connection_errors() {
    let big = TestServer::start(|mut s, ctx| {
        let mut v = preface();
        frame::head(&mut v, 1 << 20, frame::DATA, 0, 1);
        let _ = s.write_all(&v);
        client_frames(&mut s, ctx, |_, _| {});
    });
    let s = load(&big, 20);
    all_failed_as(&s, 20, ErrorKind::Malformed);
    assert!(s
        .http2
        .unwrap()
        .connection_errors
        .contains_key("FRAME_SIZE_ERROR"));

    let hpack = TestServer::start(|mut s, ctx| {
        let _ = s.write_all(&preface());
        client_frames(&mut s, ctx, |s, id| {
            let mut v = Vec::new();
            frame::head(&mut v, 1, frame::HEADERS, frame::END_HEADERS, id);
            v.push(0xbf);
            let _ = s.write_all(&v);
        });
    });
    let s = load(&hpack, 20);
    all_failed_as(&s, 20, ErrorKind::Malformed);
    assert!(s
        .http2
        .unwrap()
        .connection_errors
        .contains_key("COMPRESSION_ERROR"));
}

#[test]
fn truncated_frames_then_close_are_resets() {
    let srv = TestServer::start(|mut s, ctx| {
        let _ = s.write_all(&preface());
        let mut answered = false;
        client_frames(&mut s, ctx, |s, id| {
            if !answered {
                answered = true;
                let mut v = Vec::new();
                frame::head(&mut v, 100, frame::HEADERS, frame::END_HEADERS, id);
                v.extend_from_slice(&[0x88; 10]);
                let _ = s.write_all(&v);
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        });
    });
    let s = load(&srv, 24);
    all_failed_as(&s, 24, ErrorKind::ReadReset);
}

#[test]
fn no_settings_ack_and_silence_are_settings_timeouts() {
    for ack in [false, true] {
        let srv = TestServer::start(move |mut s, ctx| {
            if ack {
                // The server's own SETTINGS, but never the ACK of ours.
                let mut v = Vec::new();
                frame::settings(&mut v, &[]);
                let _ = s.write_all(&v);
            }
            client_frames(&mut s, ctx, |_, _| {});
        });
        let s = load(&srv, 12);
        all_failed_as(&s, 12, ErrorKind::Timeout);
        let h = s.http2.unwrap();
        assert!(h.settings_timeouts >= 1, "{h:?}");
        assert_eq!(
            h.connection_errors.get("SETTINGS_TIMEOUT").copied(),
            Some(h.settings_timeouts)
        );
    }
}

#[test]
fn rst_stream_and_goaway_with_errors_are_counted_by_code() {
    let rst = TestServer::start(|mut s, ctx| {
        let _ = s.write_all(&preface());
        client_frames(&mut s, ctx, |s, id| {
            let mut v = Vec::new();
            let c = if id % 4 == 1 {
                code::INTERNAL_ERROR
            } else {
                code::REFUSED_STREAM
            };
            frame::rst_stream(&mut v, id, c);
            let _ = s.write_all(&v);
        });
    });
    let s = load(&rst, 40);
    assert_eq!(s.requests, 0);
    assert_eq!(s.error_total(), 40);
    let h = s.http2.unwrap();
    let internal = h.rst_stream.get("INTERNAL_ERROR").copied().unwrap_or(0);
    let refused = h.rst_stream.get("REFUSED_STREAM").copied().unwrap_or(0);
    assert_eq!(internal + refused, 40, "{h:?}");
    assert_eq!(s.errors.get(&ErrorKind::ReadReset).copied(), Some(internal));
    assert_eq!(
        s.errors.get(&ErrorKind::ReadIdleClosed).copied(),
        Some(refused)
    );

    let goaway = TestServer::start(|mut s, ctx| {
        let mut v = preface();
        frame::goaway(&mut v, 0, code::ENHANCE_YOUR_CALM);
        let _ = s.write_all(&v);
        client_frames(&mut s, ctx, |_, _| {});
    });
    let s = load(&goaway, 18);
    all_failed_as(&s, 18, ErrorKind::ReadIdleClosed);
    let h = s.http2.unwrap();
    assert_eq!(h.refused, 18);
    assert!(h.goaways_error >= 1 && h.goaways_graceful == 0, "{h:?}");
    assert_eq!(
        h.goaway_codes.keys().collect::<Vec<_>>(),
        ["ENHANCE_YOUR_CALM"]
    );
}
