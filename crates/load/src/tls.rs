//! TLS client setup with rustls (ring provider): the web roots by default, a PEM CA file with
//! `--cacert`, or no verification at all with `--insecure`. One config is shared by every
//! connection, so reconnects resume sessions. The cipher suites are offered in the order
//! browsers and h2load offer them (AES-128-GCM first), so a server that follows the client's
//! order spends on our requests what it spends on theirs.
//!
//! A CA file is trusted as curl trusts it: every certificate in it is a trust anchor, and a
//! server certificate that is byte for byte one of them is trusted as it stands (a self-signed
//! leaf, whether or not it says CA:TRUE, which webpki alone rejects as `CaUsedAsEndEntity`),
//! provided its names cover the server name and it is within its validity period.

use crate::config::{Config, Error};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::sync::Arc;

/// Builds the shared client config for `cfg` (only called for https targets).
pub fn client_config(cfg: &Config) -> Result<Arc<ClientConfig>, Error> {
    let provider = Arc::new(provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(e.to_string()))?;
    let config = if cfg.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnything(provider)))
            .with_no_client_auth()
    } else {
        match &cfg.cacert {
            Some(path) => {
                let pem = std::fs::read(path)
                    .map_err(|e| Error::Tls(format!("cannot read {}: {e}", path.display())))?;
                let mut roots = RootCertStore::empty();
                let mut pinned = Vec::new();
                for cert in CertificateDer::pem_slice_iter(&pem) {
                    let cert =
                        cert.map_err(|e| Error::Tls(format!("{}: bad PEM: {e}", path.display())))?;
                    roots.add(cert.clone()).map_err(|e| {
                        Error::Tls(format!("{}: unusable certificate: {e}", path.display()))
                    })?;
                    pinned.push(cert);
                }
                if pinned.is_empty() {
                    return Err(Error::Tls(format!(
                        "{} holds no PEM certificates",
                        path.display()
                    )));
                }
                let webpki =
                    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                        .build()
                        .map_err(|e| Error::Tls(format!("{}: {e}", path.display())))?;
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(CurlTrust { webpki, pinned }))
                    .with_no_client_auth()
            }
            None => {
                let mut roots = RootCertStore::empty();
                roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
                builder.with_root_certificates(roots).with_no_client_auth()
            }
        }
    };
    let mut config = config;
    if cfg.http2 {
        // HTTP/2 over TLS is negotiated by ALPN alone (RFC 9113 3.2).
        config.alpn_protocols = vec![b"h2".to_vec()];
    }
    Ok(Arc::new(config))
}

/// The ring provider with its cipher suites in Mozilla's "intermediate" order, the one
/// browsers, curl and h2load (nghttp2) offer: AES-128-GCM, then AES-256-GCM, then
/// ChaCha20-Poly1305, in TLS 1.3 and in TLS 1.2. rustls's own order puts AES-256-GCM first
/// (14 AES rounds a block against 10), which a server that honours the client's preference
/// (nginx's default) then pays for on every byte.
fn provider() -> rustls::crypto::CryptoProvider {
    use rustls::crypto::ring::cipher_suite as cs;
    rustls::crypto::CryptoProvider {
        cipher_suites: vec![
            cs::TLS13_AES_128_GCM_SHA256,
            cs::TLS13_AES_256_GCM_SHA384,
            cs::TLS13_CHACHA20_POLY1305_SHA256,
            cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ],
        ..rustls::crypto::ring::default_provider()
    }
}

/// `--cacert` verification: webpki's chain check against the file's certificates, and when that
/// fails, curl's rule that a certificate listed in the file is trusted as a leaf (names and
/// validity still checked; the handshake signature is checked by webpki in every case).
#[derive(Debug)]
struct CurlTrust {
    webpki: Arc<WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for CurlTrust {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let chain_err =
            match self
                .webpki
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
            {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
        if !self
            .pinned
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            return Err(chain_err);
        }
        verify_listed_leaf(end_entity, server_name, now)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// The checks left for a server certificate the CA file lists verbatim: it parses, its subject
/// alternative names cover `name`, and `now` is within its validity period.
fn verify_listed_leaf(
    der: &CertificateDer<'_>,
    name: &ServerName<'_>,
    now: UnixTime,
) -> Result<(), rustls::Error> {
    let cert = webpki::EndEntityCert::try_from(der).map_err(|_| CertificateError::BadEncoding)?;
    cert.verify_is_valid_for_subject_name(name)
        .map_err(|e| match e {
            webpki::Error::CertNotValidForName(cx) => CertificateError::NotValidForNameContext {
                expected: cx.expected,
                presented: cx.presented,
            },
            _ => CertificateError::NotValidForName,
        })?;
    let (not_before, not_after) = validity(der.as_ref()).ok_or(CertificateError::BadEncoding)?;
    let t = now.as_secs() as i64;
    let unix =
        |secs: i64| UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs.max(0) as u64));
    if t < not_before {
        return Err(CertificateError::NotValidYetContext {
            time: now,
            not_before: unix(not_before),
        }
        .into());
    }
    if t > not_after {
        return Err(CertificateError::ExpiredContext {
            time: now,
            not_after: unix(not_after),
        }
        .into());
    }
    Ok(())
}

/// A certificate's notBefore and notAfter in seconds since the Unix epoch (RFC 5280 4.1.2.5),
/// read by x509-parser; `None` when the DER is not a certificate.
fn validity(der: &[u8]) -> Option<(i64, i64)> {
    use x509_parser::prelude::FromDer;
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(der).ok()?;
    let v = cert.validity();
    Some((v.not_before.timestamp(), v.not_after.timestamp()))
}

/// The server name for SNI and the certificate check; an IP address is checked as one.
pub fn server_name(name: &str) -> Result<ServerName<'static>, Error> {
    ServerName::try_from(name.to_string())
        .map_err(|_| Error::Tls(format!("'{name}' is not a valid TLS server name")))
}

/// `--insecure`: any certificate is accepted; handshake signatures are still checked so the
/// connection is a real TLS session.
#[derive(Debug)]
struct AcceptAnything(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cipher_suites_are_offered_aes128_first_and_all_kept() {
        let ours = provider().cipher_suites;
        let names: Vec<String> = ours.iter().map(|s| format!("{:?}", s.suite())).collect();
        assert_eq!(names[0], "TLS13_AES_128_GCM_SHA256");
        assert_eq!(names[3], "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256");
        assert_eq!(names[4], "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256");
        // The same suites as rustls's defaults, only reordered.
        let mut all: Vec<String> = rustls::crypto::ring::default_provider()
            .cipher_suites
            .iter()
            .map(|s| format!("{:?}", s.suite()))
            .collect();
        let mut mine = names.clone();
        all.sort();
        mine.sort();
        assert_eq!(mine, all);
    }

    /// Unix seconds of midnight UTC on a civil date.
    fn midnight(y: i16, m: i8, d: i8) -> i64 {
        jiff::civil::date(y, m, d)
            .to_zoned(jiff::tz::TimeZone::UTC)
            .unwrap()
            .timestamp()
            .as_second()
    }

    #[test]
    fn validity_of_generated_certificates() {
        // UTCTime before 2050, GeneralizedTime from 2050 on (RFC 5280 4.1.2.5), a leap day,
        // and a date before the epoch.
        for ((y1, m1, d1), (y2, m2, d2)) in [
            ((2001, 2, 3), (2061, 4, 5)),
            ((2000, 2, 29), (2049, 12, 31)),
            ((1969, 12, 31), (2050, 1, 1)),
        ] {
            let mut params = rcgen::CertificateParams::new(vec!["a.example".to_string()]).unwrap();
            params.not_before = rcgen::date_time_ymd(y1, m1, d1);
            params.not_after = rcgen::date_time_ymd(y2, m2, d2);
            let cert = params
                .self_signed(&rcgen::KeyPair::generate().unwrap())
                .unwrap();
            assert_eq!(
                validity(cert.der()),
                Some((
                    midnight(y1 as i16, m1 as i8, d1 as i8),
                    midnight(y2 as i16, m2 as i8, d2 as i8)
                ))
            );
            assert_eq!(validity(&cert.der()[..40]), None);
        }
        assert_eq!(midnight(2001, 2, 3), 981_158_400);
    }
}
