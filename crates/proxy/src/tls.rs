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

/// A self-signed certificate for `hosts` and its key, as PEM text: the Secret a generated
/// growth of HTTPS listeners terminates with (Kubernetes holds it; no file is written).
pub fn self_signed_pem(hosts: &[String]) -> Result<(String, String), Error> {
    let fail = |e: rcgen::Error| Error::Invalid(format!("certificate: {e}"));
    let key = KeyPair::generate().map_err(fail)?;
    let cert = CertificateParams::new(hosts.to_vec())
        .map_err(fail)?
        .self_signed(&key)
        .map_err(fail)?;
    Ok((cert.pem(), key.serialize_pem()))
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
    write_private(&files.key, leaf_key.serialize_pem().as_bytes())
        .map_err(|e| Error::io(format!("cannot write {}", files.key.display()), e))?;
    write(&files.ca, ca_cert.pem())?;
    Ok(files)
}

/// Writes a secret (a private key) readable by its owner only: the file is created with mode
/// 0600, never widened then narrowed, so no other user can open it in between. A file already
/// at `path` (an earlier run's) is removed first, because an existing file keeps its old mode.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_private_key_is_readable_by_its_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        // An earlier run's key, world-readable, is replaced, not reused with its old mode.
        std::fs::write(dir.path().join("key.pem"), "old").unwrap();
        std::fs::set_permissions(
            dir.path().join("key.pem"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let files = self_signed(&["cafe.example.com".into()], dir.path()).unwrap();
        assert_eq!(mode(&files.key), 0o600);
        let pem = std::fs::read_to_string(&files.key).unwrap();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
    }
}
