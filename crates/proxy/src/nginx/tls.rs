//! Certificates for TLS listeners: a throwaway CA and a leaf for the listeners' server names,
//! generated per run, written as PEM files for nginx (leaf and key) and for clients (the CA).

use crate::Error;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use std::path::{Path, PathBuf};

/// The PEM files of a run's certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Leaf certificate followed by the CA certificate (what nginx serves).
    pub cert: PathBuf,
    /// The leaf's private key (PKCS#8).
    pub key: PathBuf,
    /// The CA certificate clients should trust.
    pub ca: PathBuf,
}

/// Generates a CA and a leaf certificate valid for `names` (plus `localhost` and 127.0.0.1) and
/// writes `ca.pem`, `cert.pem` and `key.pem` into `dir`.
pub fn self_signed(names: &[String], dir: &Path) -> Result<TlsFiles, Error> {
    let fail = |what: &str, e: rcgen::Error| Error::Invalid(format!("certificate: {what}: {e}"));
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;

    let ca_key = KeyPair::generate().map_err(|e| fail("CA key", e))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(|e| fail("CA", e))?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "proxybench run CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(|e| fail("CA", e))?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut sans: Vec<String> = names.to_vec();
    for extra in ["localhost", "127.0.0.1"] {
        if !sans.iter().any(|n| n == extra) {
            sans.push(extra.to_string());
        }
    }
    let leaf_key = KeyPair::generate().map_err(|e| fail("leaf key", e))?;
    let mut leaf = CertificateParams::new(sans).map_err(|e| fail("server names", e))?;
    leaf.distinguished_name.push(
        DnType::CommonName,
        names.first().map(String::as_str).unwrap_or("localhost"),
    );
    leaf.use_authority_key_identifier_extension = true;
    let leaf_cert = leaf
        .signed_by(&leaf_key, &issuer)
        .map_err(|e| fail("leaf", e))?;

    let files = TlsFiles {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
        ca: dir.join("ca.pem"),
    };
    let write = |p: &Path, text: String| {
        std::fs::write(p, text).map_err(|e| Error::io(format!("cannot write {}", p.display()), e))
    };
    write(&files.cert, format!("{}{}", leaf_cert.pem(), ca_cert.pem()))?;
    write(&files.key, leaf_key.serialize_pem())?;
    write(&files.ca, ca_cert.pem())?;
    Ok(files)
}
