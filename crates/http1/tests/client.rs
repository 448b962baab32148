//! The blocking client against real sockets: a std TcpListener thread plays a server that
//! answers each connection with canned bytes, and records what it was sent.

use http1::client::{get, parse_reply, request, Conn, Request};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

/// A server on a free loopback port that, for each of `answers` in turn, accepts a
/// connection, reads until the request head (and `Content-Length` body) is in, sends the
/// answer in small pieces and closes. The requests it read come back on the channel.
fn server(answers: Vec<Vec<u8>>) -> (SocketAddr, mpsc::Receiver<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for answer in answers {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(T)).unwrap();
            let req = read_request(&mut s);
            for piece in answer.chunks(7) {
                s.write_all(piece).unwrap();
                s.flush().unwrap();
            }
            drop(s);
            tx.send(req).unwrap();
        }
    });
    (addr, rx)
}

fn read_request(s: &mut std::net::TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut b = [0u8; 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + 4 + len {
                return buf;
            }
        }
        let n = s.read(&mut b).unwrap();
        if n == 0 {
            return buf;
        }
        buf.extend_from_slice(&b[..n]);
    }
}

#[test]
fn reads_length_chunked_and_close_delimited_bodies() {
    let (addr, rx) = server(vec![
        b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nX-A: 1\r\n\r\nhello\n".to_vec(),
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;x\r\n!\r\n0\r\nX-T: yes\r\n\r\n".to_vec(),
        b"HTTP/1.0 503 Busy\r\n\r\ngoing away".to_vec(),
    ]);
    let r = get(addr, "/a", T).unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "hello\n"));
    assert_eq!(r.header("x-a"), Some("1"));
    let sent = String::from_utf8(rx.recv().unwrap()).unwrap();
    assert!(sent.starts_with("GET /a HTTP/1.1\r\n"), "{sent}");
    assert!(sent.contains(&format!("Host: {addr}\r\n")), "{sent}");
    assert!(sent.contains("Connection: close\r\n"), "{sent}");

    let body = br#"{"x":1}"#;
    let r = request(
        addr,
        &Request {
            method: "POST",
            path: "/b",
            headers: &[("Authorization", "Bearer t"), ("Host", "h")],
            body,
        },
        T,
    )
    .unwrap();
    assert_eq!((r.status, r.text().as_str()), (201, "hello!"));
    assert_eq!(r.header("x-t"), Some("yes"));
    let sent = String::from_utf8(rx.recv().unwrap()).unwrap();
    assert!(sent.starts_with("POST /b HTTP/1.1\r\n"), "{sent}");
    assert!(
        sent.contains("Host: h\r\n") && !sent.contains(&addr.to_string()),
        "{sent}"
    );
    assert!(sent.contains("Authorization: Bearer t\r\n"), "{sent}");
    assert!(
        sent.ends_with("Content-Length: 7\r\nConnection: close\r\n\r\n{\"x\":1}"),
        "{sent}"
    );

    let r = get(addr, "/c", T).unwrap();
    assert_eq!((r.status, r.text().as_str()), (503, "going away"));
}

#[test]
fn truncated_and_malformed_answers_are_errors() {
    let (addr, _rx) = server(vec![
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".to_vec(),
        b"".to_vec(),
        b"SMTP ready\r\n".to_vec(),
    ]);
    let e = get(addr, "/", T).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
    assert!(e.to_string().contains("mid-response"), "{e}");
    let e = get(addr, "/", T).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
    let e = get(addr, "/", T).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidData);
    assert_eq!(e.to_string(), "not an HTTP/1.x status line");
}

#[test]
fn refused_connections_fail_at_once() {
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let e = get(addr, "/", T).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn a_keep_alive_connection_reads_pipelined_responses_in_turn() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut got = Vec::new();
        let mut b = [0u8; 1024];
        while got.windows(4).filter(|w| w == b"\r\n\r\n").count() < 3 {
            let n = s.read(&mut b).unwrap();
            got.extend_from_slice(&b[..n]);
        }
        // All three answers in one write: the client must split them.
        s.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nA\
              HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n\
              HTTP/1.1 204 No Content\r\n\r\n",
        )
        .unwrap();
        got
    });
    let mut c = Conn::connect(addr, T).unwrap();
    c.send(&Request::get("/1")).unwrap();
    c.send(&Request {
        method: "HEAD",
        ..Request::get("/2")
    })
    .unwrap();
    c.send(&Request::get("/3")).unwrap();
    let a = c.read_response(false).unwrap();
    assert_eq!((a.status, a.body.as_slice()), (200, &b"A"[..]));
    assert_eq!(a.wire, 39);
    let b = c.read_response(true).unwrap();
    assert_eq!((b.status, b.header("content-length")), (200, Some("100")));
    assert!(b.body.is_empty());
    assert_eq!(c.read_response(false).unwrap().status, 204);
    let sent = String::from_utf8(server.join().unwrap()).unwrap();
    assert!(!sent.contains("Connection: close"), "{sent}");
    assert!(sent.contains("HEAD /2 HTTP/1.1\r\n"), "{sent}");
}

#[test]
fn whole_responses_parse_from_bytes() {
    let r = parse_reply(b"HTTP/1.1 200 OK\r\nX-Backend: a\r\n\r\nuntil close", false).unwrap();
    assert_eq!(
        (r.status, r.header("X-BACKEND"), r.text().as_str()),
        (200, Some("a"), "until close")
    );
    let r = parse_reply(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true).unwrap();
    assert!(r.body.is_empty());
    let e = parse_reply(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
}
