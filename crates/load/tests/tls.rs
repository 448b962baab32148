//! HTTPS against a real nginx with a certificate made in the test: a CA file, a wrong name, no
//! verification, `--resolve` keeping SNI, and TLS to a plain port.

use model::ErrorKind;
use proxybench_load as load;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

/// A CA and a certificate for cafe.example.com signed by it, as PEM files.
fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["cafe.example.com".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let p = |name: &str| dir.path().join(name);
    std::fs::write(p("ca.pem"), ca.pem()).unwrap();
    std::fs::write(p("cert.pem"), leaf.pem()).unwrap();
    std::fs::write(p("key.pem"), key.serialize_pem()).unwrap();
    Pki {
        ca: p("ca.pem"),
        cert: p("cert.pem"),
        key: p("key.pem"),
        _dir: dir,
    }
}

fn nginx_tls(pki: &Pki) -> testkit::Nginx {
    let body = format!(
        "  server {{\n    listen 127.0.0.1:{{port}} ssl;\n    ssl_certificate {};\n    \
         ssl_certificate_key {};\n    location / {{ return 200 \"hello\\n\"; }}\n  }}\n",
        pki.cert.display(),
        pki.key.display()
    );
    testkit::Nginx::start(1, &body)
}

fn cfg(url: &str, n: u64, resolve_port: Option<u16>, ca: Option<&Path>) -> load::Config {
    let mut c = load::Config::new(url).unwrap();
    c.connections = 2;
    c.threads = 1;
    c.duration = None;
    c.requests = Some(n);
    if let Some(port) = resolve_port {
        for host in ["cafe.example.com", "wrong.example.com"] {
            c.resolve
                .push(load::Resolve::parse(&format!("{host}:{port}:127.0.0.1")).unwrap());
        }
    }
    c.cacert = ca.map(Path::to_path_buf);
    c
}

fn run(c: &load::Config) -> model::LoadSummary {
    load::run(c, &load::Control::new()).unwrap().summary
}

#[test]
fn cacert_and_resolve_keep_sni_and_verify() {
    let pki = pki();
    let ng = nginx_tls(&pki);
    let url = format!("https://cafe.example.com:{}/tea", ng.port);
    let s = run(&cfg(&url, 200, Some(ng.port), Some(&pki.ca)));
    assert_eq!(s.status.get(&200).copied(), Some(200));
    assert_eq!(s.error_total(), 0);
    assert_eq!(s.connects, 2, "keep-alive over TLS");
    // The probe speaks TLS the same way.
    let r = load::probe::fetch(&cfg(&url, 1, Some(ng.port), Some(&pki.ca))).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello\n"[..]));
    // An IP URL with a Host override verifies against the override.
    let mut c = cfg(
        &format!("https://127.0.0.1:{}/", ng.port),
        10,
        None,
        Some(&pki.ca),
    );
    c.host = Some("cafe.example.com".to_string());
    assert_eq!(run(&c).status.get(&200).copied(), Some(10));
}

#[test]
fn wrong_name_or_unknown_ca_fails_as_tls_and_insecure_passes() {
    let pki = pki();
    let ng = nginx_tls(&pki);
    let wrong = format!("https://wrong.example.com:{}/", ng.port);
    let s = run(&cfg(&wrong, 6, Some(ng.port), Some(&pki.ca)));
    assert_eq!(s.errors.get(&ErrorKind::Tls).copied(), Some(6));
    assert_eq!(s.requests, 0);
    // Without the CA file the web roots do not know our CA.
    let right = format!("https://cafe.example.com:{}/", ng.port);
    let s = run(&cfg(&right, 4, Some(ng.port), None));
    assert_eq!(s.errors.get(&ErrorKind::Tls).copied(), Some(4));
    // --insecure accepts anything.
    let mut c = cfg(&wrong, 50, Some(ng.port), None);
    c.insecure = true;
    let s = run(&c);
    assert_eq!(s.status.get(&200).copied(), Some(50));
    let err = load::probe::fetch(&cfg(&wrong, 1, Some(ng.port), Some(&pki.ca))).unwrap_err();
    assert_eq!(err.0, ErrorKind::Tls);
}

#[test]
fn tls_to_a_plain_port_and_plain_to_a_tls_port() {
    let pki = pki();
    let tls = nginx_tls(&pki);
    let plain = testkit::Nginx::return_200(1);
    let mut c = cfg(&format!("https://127.0.0.1:{}/", plain.port), 3, None, None);
    c.insecure = true;
    c.timeout = Duration::from_secs(1);
    let s = run(&c);
    assert_eq!(s.errors.get(&ErrorKind::Tls).copied(), Some(3));
    // nginx answers plain HTTP on a TLS port with a 400.
    let s = run(&cfg(
        &format!("http://127.0.0.1:{}/", tls.port),
        3,
        None,
        None,
    ));
    assert_eq!(s.status.get(&400).copied(), Some(3));
}

#[test]
fn a_bad_ca_file_is_a_setup_error() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(
        "https://127.0.0.1:1/",
        1,
        None,
        Some(&dir.path().join("missing.pem")),
    );
    assert!(matches!(
        load::run(&c, &load::Control::new()),
        Err(load::Error::Tls(_))
    ));
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a pem\n").unwrap();
    let c = cfg("https://127.0.0.1:1/", 1, None, Some(&empty));
    let err = load::run(&c, &load::Control::new()).unwrap_err();
    assert!(err.to_string().contains("no PEM certificates"), "{err}");
}
