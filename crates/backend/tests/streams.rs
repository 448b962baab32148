//! Long-lived connections at the backend, driven by plain clients: a WebSocket (tungstenite's
//! blocking client) echoes every message and pushes and pings at the profile's rates; an event
//! stream sends its events in chunks and ends at `push_count`; the control endpoint closes every
//! long-lived connection with a chosen code; a kill drops them. Each connection's counters say
//! what it carried and who ended it.

mod common;

use common::{fleet, Client as Http};
use model::stream::{BackendStreams, ClosedBy, StreamProtocol};
use proxybench_backend::control::{self, Client, Token};
use proxybench_backend::Fleet;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::frame::CloseFrame;
use tungstenite::{Message, WebSocket};

type Ws = WebSocket<TcpStream>;

fn ws(addr: SocketAddr) -> Ws {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (ws, resp) = tungstenite::client::client(format!("ws://{addr}/chat"), s).unwrap();
    assert_eq!(resp.status(), 101);
    assert_eq!(
        resp.headers().get("x-backend").unwrap().to_str().unwrap(),
        "backend-0"
    );
    ws
}

/// The instance's long-lived counters once `open` is 0 (each end is counted as it happens).
fn settled(f: &Fleet) -> BackendStreams {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = f.counters()[0].streams.clone().unwrap_or_default();
        if s.open == 0 || Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_websocket_echoes_pushes_and_pings_and_counts_each_way() {
    let (f, addr) = fleet(1, 1, "push=20; push_size=5; ping=50ms");
    let mut c = ws(addr);
    for i in 0..5u8 {
        c.send(Message::Binary(vec![i; 40].into())).unwrap();
    }
    let (mut echoes, mut pushes, mut pings) = (0, 0, 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    while (echoes < 5 || pushes < 3 || pings < 2) && Instant::now() < deadline {
        match c.read().unwrap() {
            Message::Binary(b) => {
                assert_eq!(b.len(), 40);
                assert_eq!(b[0], echoes as u8, "echoes come back in order");
                echoes += 1;
            }
            Message::Text(t) => {
                assert_eq!(t.as_str(), "xxxxx");
                pushes += 1;
            }
            // tungstenite answers with a pong on its own.
            Message::Ping(_) => pings += 1,
            m => panic!("unexpected {m:?}"),
        }
    }
    assert_eq!(echoes, 5);
    c.close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    }))
    .unwrap();
    // Read until the server's answer to our close and its FIN.
    while c.read().is_ok() {}
    let s = settled(&f);
    assert_eq!(
        (s.ws_opened, s.open, s.closed_by_client),
        (1, 0, 1),
        "{s:?}"
    );
    assert_eq!(s.messages_in, 5);
    assert_eq!(s.echoes, 5);
    assert!(s.messages_out >= 5 + 3, "{s:?}");
    assert!(s.pings >= 2 && s.pongs >= 1, "{s:?}");
    assert_eq!(s.close_codes_received.get(&1000), Some(&1));
    assert_eq!(s.lives.len(), 1);
    let l = &s.lives[0];
    assert_eq!(
        (l.protocol, l.by, l.messages_in),
        (StreamProtocol::WebSocket, ClosedBy::Client, 5)
    );
    assert_eq!(l.messages_out, s.messages_out);
    assert!(l.closed_ns.unwrap() > l.opened_ns);
    // The upgrade counts as a response (101).
    assert_eq!(f.counters()[0].by_status.get(&101), Some(&1));
}

#[test]
fn the_control_endpoint_closes_every_websocket_with_the_code_asked() {
    let (f, addr) = fleet(1, 2, "");
    let f = Arc::new(f);
    let token = Token::random().unwrap();
    let server = control::serve(f.clone(), "127.0.0.1:0".parse().unwrap(), token.clone()).unwrap();
    let ctl = Client::new(server.addr(), token);
    let mut socks: Vec<Ws> = (0..3).map(|_| ws(addr)).collect();
    // A plain keep-alive connection is left alone.
    let mut plain = Http::connect(addr).unwrap();
    assert_eq!(plain.get("/").unwrap().status, 200);
    let e = ctl.close_streams("backend-0", 1005, 14).unwrap_err();
    assert!(e.to_string().contains("cannot be sent"), "{e}");
    let e = ctl.close_streams("backend-0", 1000, 17).unwrap_err();
    assert!(e.to_string().contains("not a gRPC status"), "{e}");
    ctl.close_streams("backend-0", 4001, 14).unwrap();
    for c in &mut socks {
        match c.read().unwrap() {
            Message::Close(Some(frame)) => assert_eq!(u16::from(frame.code), 4001),
            m => panic!("expected the close frame, got {m:?}"),
        }
        // tungstenite answered; the server then closes.
        while c.read().is_ok() {}
    }
    let s = settled(&f);
    assert_eq!(
        (s.ws_opened, s.closed_by_server, s.dropped),
        (3, 3, 0),
        "{s:?}"
    );
    assert_eq!(s.close_codes_sent.get(&4001), Some(&3));
    assert_eq!(plain.get("/").unwrap().status, 200);
}

#[test]
fn a_kill_drops_every_websocket_and_a_client_gone_without_a_close_frame_is_a_drop() {
    let (f, addr) = fleet(1, 1, "");
    let mut socks: Vec<Ws> = (0..4).map(|_| ws(addr)).collect();
    // One client goes away without a close frame.
    drop(socks.pop());
    let s = settled_to(&f, 3);
    assert_eq!((s.ws_opened, s.dropped), (4, 1), "{s:?}");
    f.kill("backend-0").unwrap();
    for c in &mut socks {
        assert!(c.read().is_err(), "the kill reset every connection");
    }
    let s = settled(&f);
    assert_eq!(
        (s.dropped, s.closed_by_client, s.closed_by_server),
        (4, 0, 0),
        "{s:?}"
    );
    assert!(s.lives.iter().all(|l| l.by == ClosedBy::Dropped));
}

/// The counters once `open` is `n`.
fn settled_to(f: &Fleet, n: u64) -> BackendStreams {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = f.counters()[0].streams.clone().unwrap_or_default();
        if s.open == n || Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn an_event_stream_sends_chunked_events_and_ends_at_push_count() {
    let (f, addr) = fleet(1, 1, "push=50; push_size=3; push_count=3");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    std::io::Write::write_all(
        &mut s,
        b"GET /events HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n",
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let text = String::from_utf8(all).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Content-Type: text/event-stream"), "{head}");
    assert!(head.contains("Transfer-Encoding: chunked"), "{head}");
    let mut dec = http1::ChunkedDecoder::new(1024);
    struct Keep(Vec<u8>);
    impl http1::Sink for Keep {
        fn body(&mut self, d: &[u8]) {
            self.0.extend_from_slice(d);
        }
    }
    let mut k = Keep(Vec::new());
    let (_, end) = dec.feed(body.as_bytes(), &mut k).unwrap();
    assert!(end, "the stream ended with its last chunk");
    assert_eq!(
        String::from_utf8(k.0).unwrap(),
        "id: 1\ndata: xxx\n\nid: 2\ndata: xxx\n\nid: 3\ndata: xxx\n\n"
    );
    let c = settled(&f);
    assert_eq!(
        (c.sse_opened, c.messages_out, c.closed_by_server),
        (1, 3, 1),
        "{c:?}"
    );
    assert_eq!(c.lives[0].protocol, StreamProtocol::Sse);
}

#[test]
fn a_bad_upgrade_gets_400_and_a_draining_instance_refuses_new_streams() {
    let (f, addr) = fleet(1, 1, "");
    let mut c = Http::connect(addr).unwrap();
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n")
        .unwrap();
    assert_eq!(c.read_response(false).unwrap().status, 400);
    // An open WebSocket is closed with 1001 (going away) by a drain.
    let mut open = ws(addr);
    let drain = f.drain_async("backend-0").unwrap();
    match open.read().unwrap() {
        Message::Close(Some(frame)) => assert_eq!(u16::from(frame.code), 1001),
        m => panic!("expected the close frame, got {m:?}"),
    }
    while open.read().is_ok() {}
    assert!(drain.wait_timeout(Duration::from_secs(5)));
    let s = settled(&f);
    assert_eq!(
        (s.closed_by_server, s.close_codes_sent.get(&1001)),
        (1, Some(&1))
    );
}
