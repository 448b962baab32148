//! The control endpoint: every operation over HTTP + JSON, through the client and raw; requests
//! without the bearer token are refused, and only loopback addresses are served.

mod common;

use common::{fleet, Client as Http};
use proxybench_backend::control::{self, Client, Token};
use proxybench_backend::InstanceConfig;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// Sends `req` as is (add the Authorization header yourself); returns status and body.
fn raw(addr: std::net::SocketAddr, req: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let r = http1::client::parse_reply(&out, false).unwrap();
    (r.status, r.text())
}

#[test]
fn every_operation_over_http_json() {
    let (f, addr0) = fleet(2, 1, "");
    let f = Arc::new(f);
    let token = Token::random().unwrap();
    let server = control::serve(f.clone(), "127.0.0.1:0".parse().unwrap(), token.clone()).unwrap();
    let ctl = Client::new(server.addr(), token.clone());
    let auth = format!("Authorization: Bearer {}", token.as_str());

    let mut c = Http::connect(addr0).unwrap();
    assert_eq!(c.get("/").unwrap().status, 200);
    let counters = ctl.counters().unwrap();
    assert_eq!(counters.len(), 2);
    assert_eq!(
        (counters[0].name.as_str(), counters[0].requests),
        ("backend-0", 1)
    );
    assert_eq!(counters[0].addr, addr0.to_string());

    // set_profile
    ctl.set_profile("backend-0", &"status=503".parse().unwrap())
        .unwrap();
    assert_eq!(c.get("/").unwrap().status, 503);
    let insts = ctl.instances().unwrap();
    assert_eq!(insts[0].profile.to_string(), "status=503:100%");
    let e = ctl.set_profile("nope", &"".parse().unwrap()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "control: 404: no backend instance named 'nope'"
    );

    // add
    let added = ctl
        .add(&InstanceConfig {
            name: "backend-2".into(),
            addr: "127.0.0.1:0".parse().unwrap(),
            profile: "size=3".parse().unwrap(),
        })
        .unwrap();
    let mut c2 = Http::connect(added).unwrap();
    let r = c2.get("/").unwrap();
    assert_eq!((r.backend(), r.body.len()), ("backend-2", 3));
    drop(c2);

    // drain (waits), then restart
    drop(c);
    ctl.drain("backend-0").unwrap();
    assert_eq!(ctl.counters().unwrap()[0].state, "stopped");
    let e = TcpStream::connect(addr0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    let e = ctl.drain("backend-0").unwrap_err();
    assert_eq!(
        e.to_string(),
        "control: 409: backend-0 is stopped: cannot drain it"
    );
    ctl.restart("backend-0").unwrap();
    assert_eq!(Http::connect(addr0).unwrap().get("/").unwrap().status, 503);

    // kill, restart
    ctl.kill("backend-1").unwrap();
    assert_eq!(ctl.counters().unwrap()[1].state, "killed");
    ctl.restart("backend-1").unwrap();
    assert_eq!(ctl.counters().unwrap()[1].state, "running");

    // drain without waiting
    ctl.drain_async("backend-2").unwrap();
    assert!(common::eventually(Duration::from_secs(5), || {
        ctl.counters().unwrap()[2].state == "stopped"
    }));

    // Raw requests: bad JSON, bad spec, unknown endpoint, wrong method.
    let a = server.addr();
    let bad = "{\"profile\":\"latency=lognorml(1ms,1)\"}";
    let (s, body) = raw(
        a,
        &format!(
            "PUT /instances/backend-0/profile HTTP/1.1\r\n{auth}\r\nContent-Length: {}\r\n\r\n{bad}",
            bad.len()
        ),
    );
    assert_eq!(s, 400);
    assert!(
        body.contains("latency: unknown distribution 'lognorml'"),
        "{body}"
    );
    let (s, body) = raw(
        a,
        &format!("POST /instances HTTP/1.1\r\n{auth}\r\nContent-Length: 2\r\n\r\n{{}}"),
    );
    assert_eq!(s, 400);
    assert!(body.starts_with("{\"error\":\"bad instance"), "{body}");
    let (s, _) = raw(a, &format!("GET /nothing HTTP/1.1\r\n{auth}\r\n\r\n"));
    assert_eq!(s, 404);
    let (s, _) = raw(
        a,
        &format!("GET /instances/backend-0/kill HTTP/1.1\r\n{auth}\r\n\r\n"),
    );
    assert_eq!(s, 405);
    let (s, body) = raw(a, &format!("GET /counters HTTP/1.1\r\n{auth}\r\n\r\n"));
    assert_eq!(s, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);

    server.stop();
    f.close(Duration::from_secs(5));
    assert!(ctl
        .counters()
        .unwrap_err()
        .to_string()
        .contains("127.0.0.1"));
}

#[test]
fn a_client_of_nothing_says_where_it_tried() {
    let port = testkit::free_port();
    let ctl = Client::new(
        format!("127.0.0.1:{port}").parse().unwrap(),
        Token::random().unwrap(),
    );
    let e = ctl.counters().unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("control: GET /counters at 127.0.0.1:{port}:")),
        "{e}"
    );
}

#[test]
fn requests_without_the_token_get_401_and_change_nothing() {
    let (f, addr0) = fleet(1, 1, "");
    let f = Arc::new(f);
    let token = Token::random().unwrap();
    let server = control::serve(f.clone(), "127.0.0.1:0".parse().unwrap(), token.clone()).unwrap();
    let a = server.addr();
    let other = Token::random().unwrap();
    let refused = [
        String::new(),
        format!("Authorization: Bearer {}\r\n", other.as_str()),
        format!("Authorization: Basic {}\r\n", token.as_str()),
        format!("Authorization: {}\r\n", token.as_str()),
        format!("Authorization: Bearer {}x\r\n", token.as_str()),
    ];
    for hdr in &refused {
        for req in [
            format!("GET /counters HTTP/1.1\r\n{hdr}\r\n"),
            format!("POST /instances/backend-0/kill HTTP/1.1\r\n{hdr}\r\n"),
            format!("GET /nothing HTTP/1.1\r\n{hdr}\r\n"),
        ] {
            let (s, body) = raw(a, &req);
            assert_eq!(s, 401, "{req:?}: {body}");
            assert!(body.contains("missing or wrong token"), "{body}");
            assert!(!body.contains(token.as_str()));
        }
    }
    // The kills above did nothing: the instance still serves.
    let mut c = Http::connect(addr0).unwrap();
    assert_eq!(c.get("/").unwrap().status, 200);
    let e = Client::new(a, other).counters().unwrap_err().to_string();
    assert!(e.starts_with("control: 401: missing or wrong token"), "{e}");
    let ok = Client::new(a, token).counters().unwrap();
    assert_eq!((ok[0].state.as_str(), ok[0].requests), ("running", 1));
    server.stop();
    f.close(Duration::from_secs(5));
}

#[test]
fn only_loopback_addresses_are_served() {
    let (f, _) = fleet(1, 1, "");
    let f = Arc::new(f);
    for addr in ["0.0.0.0:0", "[::]:0", "192.0.2.1:0"] {
        let e = control::serve(f.clone(), addr.parse().unwrap(), Token::random().unwrap())
            .err()
            .unwrap_or_else(|| panic!("{addr} was served"));
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{addr}");
        assert!(e.to_string().contains("is not a loopback address"), "{e}");
    }
    for addr in ["127.0.0.1:0", "127.0.0.2:0"] {
        let s = control::serve(f.clone(), addr.parse().unwrap(), Token::random().unwrap()).unwrap();
        assert!(s.addr().ip().is_loopback());
        s.stop();
    }
    f.close(Duration::from_secs(5));
}
