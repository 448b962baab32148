//! The bench's gRPC probe (one unary call on a new connection) against real servers on
//! 127.0.0.1: the emulated backend's gRPC service directly, and through nginx's `grpc_pass`,
//! whose own 404 for a host it has no server for is what a GRPCRoute not yet propagated looks
//! like to a gRPC client (UNIMPLEMENTED, from the HTTP status).

use backend::{Fleet, FleetConfig, InstanceConfig};
use model::ErrorKind;
use proxybench_load as load;
use std::net::SocketAddr;
use std::time::Duration;

/// One backend instance with the default profile (unary calls answered OK).
fn backend() -> (Fleet, SocketAddr) {
    let f = Fleet::start(FleetConfig {
        instances: vec![InstanceConfig {
            name: "app-0".into(),
            addr: "127.0.0.1:0".parse().unwrap(),
            profile: "".parse().unwrap(),
        }],
        threads: 1,
        seed: 1,
    })
    .unwrap();
    let addr = f.addrs()[0].1;
    (f, addr)
}

/// The probe of `url`, with `host` as `:authority` when given.
fn probe(url: &str, host: Option<&str>) -> load::probe::GrpcProbe {
    let mut cfg = load::Config::new(url).unwrap();
    cfg.host = host.map(str::to_string);
    cfg.timeout = Duration::from_secs(2);
    load::probe::GrpcProbe::new(&cfg).unwrap()
}

#[test]
fn a_call_to_the_backend_reads_its_grpc_status_from_the_trailers() {
    let (_f, addr) = backend();
    let a = probe(&format!("http://{addr}/proxybench.Bench/Unary"), None)
        .call()
        .unwrap();
    assert_eq!(
        (a.http_status, a.grpc_status, a.code),
        (200, Some(load::probe::grpc::OK), load::probe::grpc::OK)
    );
    assert_eq!(a.messages, 1, "the unary call's one reply");
    // A method the service does not have: Trailers-Only, UNIMPLEMENTED.
    let a = probe(&format!("http://{addr}/proxybench.Bench/Nope"), None)
        .call()
        .unwrap();
    assert_eq!(
        (a.http_status, a.grpc_status, a.code, a.messages),
        (200, Some(12), load::probe::grpc::UNIMPLEMENTED, 0)
    );
}

#[test]
fn through_nginx_a_host_without_a_route_reads_as_unimplemented_from_its_404() {
    let (_f, addr) = backend();
    let ng = testkit::Nginx::start(
        1,
        &format!(
            "  server {{\n    listen 127.0.0.1:{{port}} http2 default_server;\n    \
             location / {{ return 404; }}\n  }}\n  server {{\n    listen 127.0.0.1:{{port}} \
             http2;\n    server_name r1.example;\n    location / {{ grpc_pass grpc://{addr}; }}\n  \
             }}\n"
        ),
    );
    let url = ng.url("/proxybench.Bench/Unary");
    let a = probe(&url, Some("r1.example")).call().unwrap();
    assert_eq!((a.http_status, a.grpc_status, a.code), (200, Some(0), 0));
    let a = probe(&url, Some("r2.example")).call().unwrap();
    assert_eq!(
        (a.http_status, a.grpc_status, a.code, a.messages),
        (404, None, load::probe::grpc::UNIMPLEMENTED, 0),
        "nginx's HTML 404 is no gRPC message and no malformed stream"
    );
}

#[test]
fn a_server_that_speaks_only_http1_or_nothing_is_an_error() {
    // nginx without http2 answers the HTTP/2 preface with an HTTP/1.1 400: not HTTP/2.
    let ng = testkit::Nginx::return_200(1);
    let e = probe(&ng.url("/proxybench.Bench/Unary"), None)
        .call()
        .unwrap_err();
    assert!(
        matches!(e.0, ErrorKind::Malformed | ErrorKind::ReadReset),
        "{e:?}"
    );
    let port = testkit::free_port();
    let e = probe(&format!("http://127.0.0.1:{port}/x.Y/Z"), None)
        .call()
        .unwrap_err();
    assert_eq!(e.0, ErrorKind::ConnectRefused, "{e:?}");
}

#[test]
fn over_tls_the_call_needs_alpn_h2() {
    let (_f, addr) = backend();
    let dir = tempfile::tempdir().unwrap();
    let made = rcgen::generate_simple_self_signed(vec!["g.example".to_string()]).unwrap();
    let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    // Two TLS listeners: one offers h2 by ALPN (and passes gRPC on), one only HTTP/1.1.
    let h1 = testkit::free_port();
    let ng = testkit::Nginx::start(
        1,
        &format!(
            "  server {{\n    listen 127.0.0.1:{{port}} ssl http2;\n    ssl_certificate {c};\n    \
             ssl_certificate_key {k};\n    location / {{ grpc_pass grpc://{addr}; }}\n  }}\n  \
             server {{\n    listen 127.0.0.1:{h1} ssl;\n    ssl_certificate {c};\n    \
             ssl_certificate_key {k};\n    location / {{ return 200; }}\n  }}\n",
            c = cert.display(),
            k = key.display(),
        ),
    );
    let mut cfg = load::Config::new(&format!(
        "https://g.example:{}/proxybench.Bench/Unary",
        ng.port
    ))
    .unwrap();
    cfg.resolve
        .push(load::Resolve::parse(&format!("g.example:{}:127.0.0.1", ng.port)).unwrap());
    cfg.insecure = true;
    cfg.timeout = Duration::from_secs(2);
    let a = load::probe::GrpcProbe::new(&cfg).unwrap().call().unwrap();
    assert_eq!((a.http_status, a.grpc_status, a.code), (200, Some(0), 0));
    // The HTTP/1.1-only listener.
    testkit::wait_listening(
        format!("127.0.0.1:{h1}").parse().unwrap(),
        Duration::from_secs(10),
    );
    cfg.url = format!("https://g.example:{h1}/proxybench.Bench/Unary");
    cfg.resolve = vec![load::Resolve::parse(&format!("g.example:{h1}:127.0.0.1")).unwrap()];
    let e = load::probe::GrpcProbe::new(&cfg)
        .unwrap()
        .call()
        .unwrap_err();
    // nginx's OpenSSL refuses an offer of h2 alone with the no_application_protocol alert; a
    // server that picks no protocol instead is refused by the probe itself.
    assert_eq!(e.0, ErrorKind::Tls, "{e:?}");
    assert!(
        e.1.contains("NoApplicationProtocol") || e.1.contains("ALPN h2"),
        "{e:?}"
    );
}
