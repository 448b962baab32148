//! TLS client setup with rustls (ring provider): the web roots by default, a PEM CA file with
//! `--cacert`, or no verification at all with `--insecure`. One config is shared by every
//! connection, so reconnects resume sessions.

use crate::config::{Config, Error};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;

/// Builds the shared client config for `cfg` (only called for https targets).
pub fn client_config(cfg: &Config) -> Result<Arc<ClientConfig>, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(e.to_string()))?;
    let config = if cfg.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnything(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = RootCertStore::empty();
        match &cfg.cacert {
            Some(path) => {
                let pem = std::fs::read(path)
                    .map_err(|e| Error::Tls(format!("cannot read {}: {e}", path.display())))?;
                let mut added = 0;
                for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
                    let cert =
                        cert.map_err(|e| Error::Tls(format!("{}: bad PEM: {e}", path.display())))?;
                    roots.add(cert).map_err(|e| {
                        Error::Tls(format!("{}: unusable certificate: {e}", path.display()))
                    })?;
                    added += 1;
                }
                if added == 0 {
                    return Err(Error::Tls(format!(
                        "{} holds no PEM certificates",
                        path.display()
                    )));
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    Ok(Arc::new(config))
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
