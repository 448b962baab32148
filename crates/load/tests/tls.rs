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
    assert_eq!(tls_message(&s), "invalid peer certificate: UnknownIssuer");
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
    // nginx answers the ClientHello with a plain-HTTP 400.
    assert_eq!(
        tls_message(&s),
        "received corrupt message of type InvalidContentType"
    );
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

/// `openssl req -x509` as a user runs it: a self-signed certificate for cafe.example.com and
/// 127.0.0.1. openssl marks it CA:TRUE by default (webpki alone rejects that as a server
/// certificate); with `ca` false it says CA:FALSE.
fn openssl_self_signed(dir: &Path, stem: &str, ca: bool) -> (PathBuf, PathBuf) {
    let cert = dir.join(format!("{stem}.pem"));
    let key = dir.join(format!("{stem}.key"));
    let mut cmd = std::process::Command::new("openssl");
    cmd.args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=cafe.example.com"])
        .args([
            "-addext",
            "subjectAltName=DNS:cafe.example.com,IP:127.0.0.1",
        ]);
    if !ca {
        cmd.args(["-addext", "basicConstraints=critical,CA:FALSE"]);
    }
    let out = cmd.arg("-keyout").arg(&key).arg("-out").arg(&cert).output();
    let out = out.expect("openssl is installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The certificate says what this test claims it says.
    let text = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(&cert)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains(if ca { "CA:TRUE" } else { "CA:FALSE" }),
        "{text}"
    );
    (cert, key)
}

fn nginx_serving(cert: &Path, key: &Path) -> testkit::Nginx {
    let body = format!(
        "  server {{\n    listen 127.0.0.1:{{port}} ssl;\n    ssl_certificate {};\n    \
         ssl_certificate_key {};\n    location / {{ return 200 \"hello\\n\"; }}\n  }}\n",
        cert.display(),
        key.display()
    );
    testkit::Nginx::start(1, &body)
}

/// What curl says of the same server and CA file: the truth this engine must match.
fn curl_ok(port: u16, ca: &Path) -> bool {
    std::process::Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "--max-time", "5", "--resolve"])
        .arg(format!("cafe.example.com:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(ca)
        .arg(format!("https://cafe.example.com:{port}/"))
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn tls_message(s: &model::LoadSummary) -> String {
    s.error_messages
        .get(&ErrorKind::Tls)
        .cloned()
        .unwrap_or_default()
}

#[test]
fn an_openssl_self_signed_certificate_is_trusted_as_curl_trusts_it() {
    let dir = tempfile::tempdir().unwrap();
    for ca in [true, false] {
        let (cert, key) = openssl_self_signed(dir.path(), &format!("self-{ca}"), ca);
        let ng = nginx_serving(&cert, &key);
        assert!(curl_ok(ng.port, &cert), "curl trusts it (CA:{ca})");
        let url = format!("https://cafe.example.com:{}/", ng.port);
        let s = run(&cfg(&url, 30, Some(ng.port), Some(&cert)));
        assert_eq!(s.status.get(&200).copied(), Some(30), "CA:{ca}: {s:?}");
        assert_eq!(s.error_total(), 0, "CA:{ca}: {:?}", s.error_messages);
        // The IP address in its names is checked as an IP.
        let ip = format!("https://127.0.0.1:{}/", ng.port);
        let s = run(&cfg(&ip, 5, None, Some(&cert)));
        assert_eq!(s.status.get(&200).copied(), Some(5), "CA:{ca}");
        // Listed in the CA file is not a licence for any name.
        let wrong = format!("https://wrong.example.com:{}/", ng.port);
        let s = run(&cfg(&wrong, 4, Some(ng.port), Some(&cert)));
        assert_eq!(s.errors.get(&ErrorKind::Tls).copied(), Some(4), "CA:{ca}");
        assert_eq!(s.requests, 0);
        let msg = tls_message(&s);
        assert!(
            msg.starts_with(
                "invalid peer certificate: certificate not valid for name \"wrong.example.com\""
            ),
            "CA:{ca}: {msg}"
        );
        // Nor is another certificate with the same name and a different key.
        let (other, _) = openssl_self_signed(dir.path(), &format!("other-{ca}"), false);
        assert!(!curl_ok(ng.port, &other), "curl refuses it");
        let s = run(&cfg(&url, 3, Some(ng.port), Some(&other)));
        assert_eq!(s.errors.get(&ErrorKind::Tls).copied(), Some(3), "CA:{ca}");
        assert_eq!(
            tls_message(&s),
            if ca {
                // webpki stops at the CA flag before looking for an issuer.
                "invalid peer certificate: CaUsedAsEndEntity"
            } else {
                // The listed certificate has the same subject, so it is tried as the issuer.
                "invalid peer certificate: BadSignature"
            }
        );
    }
}

#[test]
fn a_bundle_of_ca_intermediate_and_self_signed_leaf_trusts_each_server() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    // Root CA -> intermediate CA -> leaf for cafe.example.com, and an openssl self-signed leaf.
    let ca_params = |cn: &str| {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params
    };
    let root =
        CertifiedIssuer::self_signed(ca_params("Test Root"), KeyPair::generate().unwrap()).unwrap();
    let mid_params = ca_params("Test Intermediate");
    let mid = CertifiedIssuer::signed_by(mid_params, KeyPair::generate().unwrap(), &root).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["cafe.example.com".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &mid)
        .unwrap();
    std::fs::write(p("leaf.pem"), leaf.pem()).unwrap();
    std::fs::write(p("leaf.key"), leaf_key.serialize_pem()).unwrap();
    let (self_cert, self_key) = openssl_self_signed(dir.path(), "self", true);
    let bundle = p("bundle.pem");
    let self_pem = std::fs::read_to_string(&self_cert).unwrap();
    std::fs::write(&bundle, format!("{}{}{}", root.pem(), self_pem, mid.pem())).unwrap();

    for (what, ng) in [
        ("self-signed", nginx_serving(&self_cert, &self_key)),
        ("chained", nginx_serving(&p("leaf.pem"), &p("leaf.key"))),
    ] {
        assert!(curl_ok(ng.port, &bundle), "curl trusts the {what} server");
        let url = format!("https://cafe.example.com:{}/", ng.port);
        let s = run(&cfg(&url, 20, Some(ng.port), Some(&bundle)));
        assert_eq!(
            s.status.get(&200).copied(),
            Some(20),
            "{what}: {:?}",
            s.error_messages
        );
        assert_eq!(s.error_total(), 0, "{what}");
    }
}

#[test]
fn a_listed_but_expired_certificate_fails_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut params = CertificateParams::new(vec!["cafe.example.com".to_string()]).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (cert_path, key_path) = (dir.path().join("old.pem"), dir.path().join("old.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let ng = nginx_serving(&cert_path, &key_path);
    assert!(!curl_ok(ng.port, &cert_path), "curl refuses it");
    let url = format!("https://cafe.example.com:{}/", ng.port);
    let s = run(&cfg(&url, 5, Some(ng.port), Some(&cert_path)));
    assert_eq!(s.errors.get(&ErrorKind::Tls).copied(), Some(5));
    let msg = tls_message(&s);
    assert!(
        msg.starts_with("invalid peer certificate: certificate expired: verification time"),
        "{msg}"
    );
}
