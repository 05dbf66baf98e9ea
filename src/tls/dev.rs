//! Dev certificates: a local CA and a server certificate for localhost, 127.0.0.1 and ::1,
//! generated on first run when `tls.dev = true`. Keys are written 0600. Never for production.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use super::TlsError;
use crate::crypto::write_private;

/// Where the dev files live.
#[derive(Debug, Clone)]
pub struct DevCerts {
    pub ca_cert: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// True when this call generated them.
    pub created: bool,
}

/// Makes sure `dir` holds a dev CA (`ca.pem`, `ca.key`) and a server certificate signed by it
/// (`server.pem`, `server.key`). Existing files are kept; if any is missing, all are made anew.
pub fn ensure(dir: &Path) -> Result<DevCerts, TlsError> {
    let files = DevCerts {
        ca_cert: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server.key"),
        created: false,
    };
    let ca_key_file = dir.join("ca.key");
    let all = [
        &files.ca_cert,
        &ca_key_file,
        &files.server_cert,
        &files.server_key,
    ];
    if all.iter().all(|p| p.is_file()) {
        return Ok(files);
    }
    for p in all {
        match std::fs::remove_file(p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(TlsError(format!("cannot replace {}: {e}", p.display()))),
        }
    }
    let gen = |e: rcgen::Error| TlsError(format!("cannot generate dev certificates: {e}"));

    let ca_key = KeyPair::generate().map_err(gen)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(gen)?;
    ca.distinguished_name
        .push(DnType::CommonName, "a2a-edge dev CA (local only)");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).map_err(gen)?;

    let server_key = KeyPair::generate().map_err(gen)?;
    let mut server = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])
    .map_err(gen)?;
    server
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let server_cert = server
        .signed_by(&server_key, &ca_cert, &ca_key)
        .map_err(gen)?;

    let write = |p: &Path, s: String| write_private(p, s.as_bytes()).map_err(TlsError);
    write(&ca_key_file, ca_key.serialize_pem())?;
    write(&files.server_key, server_key.serialize_pem())?;
    write(&files.ca_cert, ca_cert.pem())?;
    write(&files.server_cert, server_cert.pem())?;
    Ok(DevCerts {
        created: true,
        ..files
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn generates_once_with_private_keys_and_a_usable_chain() {
        let dir =
            std::env::temp_dir().join(format!("a2a-edge-dev-{}", crate::crypto::random_token()));
        let first = ensure(&dir).unwrap();
        assert!(first.created);
        for key in [dir.join("ca.key"), first.server_key.clone()] {
            let mode = std::fs::metadata(&key).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{}", key.display());
        }
        let second = ensure(&dir).unwrap();
        assert!(!second.created);
        assert!(super::super::server_config(&first.server_cert, &first.server_key).is_ok());
        assert!(super::super::client_config(&first.ca_cert, &[b"h2"]).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
