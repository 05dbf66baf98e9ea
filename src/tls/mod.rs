//! TLS: rustls server and client configurations, PEM loading (rustls-pki-types), and the
//! dev certificates. Knows nothing of A2A.

pub mod client_auth;
pub mod der;
pub mod dev;

use std::path::Path;
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// ALPN protocols served, in order of preference.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// A certificate or key could not be loaded or used. Names the file, never key material.
#[derive(Debug)]
pub struct TlsError(pub String);

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Loads a PEM certificate chain (leaf first).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            TlsError(format!(
                "cannot read certificates from {}: {e}",
                path.display()
            ))
        })?;
    if certs.is_empty() {
        return Err(TlsError(format!(
            "no certificate found in {}",
            path.display()
        )));
    }
    Ok(certs)
}

/// Loads a PEM private key (PKCS#8, PKCS#1 or SEC1).
/// The file is held to [`crate::crypto::read_private_key`]'s rule on its mode.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = crate::crypto::read_private_key(path).map_err(TlsError)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        TlsError(format!(
            "cannot read a private key from {}: {e}",
            path.display()
        ))
    })
}

/// The edge's server configuration: TLS 1.3 and 1.2 only, ALPN h2 and http/1.1.
pub fn server_config(cert_file: &Path, key_file: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    server_config_of(load_certs(cert_file)?, cert_file, key_file)
}

/// [`server_config`] of the chain `certs`, read from `cert_file`.
fn server_config_of(
    certs: Vec<CertificateDer<'static>>,
    cert_file: &Path,
    key_file: &Path,
) -> Result<Arc<ServerConfig>, TlsError> {
    let key = load_key(key_file)?;
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError(format!("TLS configuration: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            TlsError(format!(
                "certificate {} does not go with key {}: {e}",
                cert_file.display(),
                key_file.display()
            ))
        })?;
    cfg.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    // The edge's cipher-suite order wins, not the client's (a client that lists a weaker
    // suite first does not get it while a stronger one is shared).
    cfg.ignore_client_order = true;
    Ok(Arc::new(cfg))
}

/// The configuration for talking TLS to an agent: trust `ca_file` (else the system roots),
/// present a client certificate when given (mTLS towards agents).
pub fn upstream_client_config(
    ca_file: Option<&Path>,
    client_cert: Option<(&Path, &Path)>,
) -> Result<ClientConfig, TlsError> {
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(f) => {
            for cert in load_certs(f)? {
                roots
                    .add(cert)
                    .map_err(|e| TlsError(format!("bad CA certificate in {}: {e}", f.display())))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err(TlsError("no system root certificates; set ca_file".into()));
            }
        }
    }
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError(format!("TLS configuration: {e}")))?
        .with_root_certificates(roots);
    // ALPN is set by the HTTP connector (hyper-rustls) that uses this configuration.
    let cfg = match client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
            .map_err(|e| {
                TlsError(format!(
                    "client certificate {} does not go with key {}: {e}",
                    cert.display(),
                    key.display()
                ))
            })?,
    };
    Ok(cfg)
}

/// A client configuration that trusts no one (for plain-HTTP agents, where it is never used).
pub fn empty_client_config() -> Result<ClientConfig, TlsError> {
    Ok(ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError(format!("TLS configuration: {e}")))?
        .with_root_certificates(RootCertStore::empty())
        .with_no_client_auth())
}

/// A client configuration that trusts only the CA certificates in `ca_file`, offering the
/// given ALPN protocols. Used by tests and tools talking to the edge.
pub fn client_config(ca_file: &Path, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(ca_file)? {
        roots
            .add(cert)
            .map_err(|e| TlsError(format!("bad CA certificate in {}: {e}", ca_file.display())))?;
    }
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError(format!("TLS configuration: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(cfg))
}
