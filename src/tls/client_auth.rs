//! Client certificates (mTLS): the edge's server configuration that asks for, and verifies,
//! a client certificate against the operator's client CAs. The identity read from a verified
//! certificate lives in `auth::mtls`; this file only decides who may finish the handshake.

use std::path::Path;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use super::{load_certs, load_key, provider, server_config, TlsError, ALPN};

/// Whether the edge asks clients for a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuthMode {
    /// No certificate is requested; a client cannot present one.
    Off,
    /// A certificate is requested; clients without one are let through (and must then
    /// authenticate otherwise), but a certificate that does not verify fails the handshake.
    Optional,
    /// Every client must present a certificate that chains to the client CAs.
    Required,
}

/// Which client certificates a server configuration admits: its mode and a digest of its
/// client CA certificates. Two configurations with the same trust verify any certificate
/// alike, so a connection verified under one may go on under the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientTrust([u8; 32]);

impl ClientTrust {
    fn of(mode: ClientAuthMode, cas: &[rustls_pki_types::CertificateDer<'_>]) -> ClientTrust {
        let mut all = vec![mode as u8];
        for ca in cas {
            all.extend_from_slice(&(ca.len() as u64).to_be_bytes());
            all.extend_from_slice(ca);
        }
        ClientTrust(crate::crypto::sha256(&all))
    }
}

/// The edge's server configuration with client-certificate verification against the CA
/// certificates in `ca_file`: TLS 1.3 and 1.2 only, ALPN h2 and http/1.1, the same provider
/// as [`super::server_config`].
///
/// `Optional` lets clients without a certificate through; a certificate that does not chain
/// to the CAs fails the handshake in both `Optional` and `Required`: a wrong credential never
/// degrades to none. `Off` is exactly [`super::server_config`] (`ca_file` is then ignored);
/// otherwise `ca_file` is required and must hold at least one usable CA certificate. With
/// it, the trust the configuration was built with (what the CA file held when read).
pub fn server_config_with_client_auth(
    cert_file: &Path,
    key_file: &Path,
    mode: ClientAuthMode,
    ca_file: Option<&Path>,
) -> Result<(Arc<ServerConfig>, ClientTrust), TlsError> {
    if mode == ClientAuthMode::Off {
        return Ok((
            server_config(cert_file, key_file)?,
            ClientTrust::of(mode, &[]),
        ));
    }
    let ca_file = ca_file.ok_or_else(|| {
        TlsError("client certificate authentication needs a client CA file".to_string())
    })?;
    let cas = load_certs(ca_file)?;
    let trust = ClientTrust::of(mode, &cas);
    let roots = client_roots(ca_file, cas)?;
    let provider = provider();
    let builder = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
    let builder = match mode {
        ClientAuthMode::Optional => builder.allow_unauthenticated(),
        ClientAuthMode::Required | ClientAuthMode::Off => builder,
    };
    let verifier = builder.build().map_err(|e| {
        TlsError(format!(
            "client CA certificates in {}: {e}",
            ca_file.display()
        ))
    })?;

    let certs = load_certs(cert_file)?;
    let key = load_key(key_file)?;
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError(format!("TLS configuration: {e}")))?
        .with_client_cert_verifier(verifier)
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
    Ok((Arc::new(cfg), trust))
}

/// The trust anchors for client certificates (`cas`, read from `ca_file`). Every certificate
/// in the file must be usable: a CA file with a broken entry is a configuration error, not
/// something to skip silently.
fn client_roots(
    ca_file: &Path,
    cas: Vec<rustls_pki_types::CertificateDer<'static>>,
) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in cas {
        roots.add(cert).map_err(|e| {
            TlsError(format!(
                "bad client CA certificate in {}: {e}",
                ca_file.display()
            ))
        })?;
    }
    Ok(Arc::new(roots))
}

/// A small PKI made at test time: a client CA with leaves of each identity shape, and an
/// unrelated CA with its own client certificate. Shared with `auth::mtls` tests.
#[cfg(test)]
pub(crate) mod test_pki {
    use rcgen::{
        BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
        ExtendedKeyUsagePurpose, Ia5String, IsCa, KeyPair, KeyUsagePurpose, SanType,
    };
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

    pub const SPIFFE_ID: &str = "spiffe://example.org/ns/prod/sa/ci";
    pub const SPIFFE_DNS: &str = "ci.prod.example.org";
    pub const DNS_ONLY: &str = "build-agent.example.org";
    pub const CN_ONLY: &str = "reporting-job";

    pub struct Ca {
        pub cert: Certificate,
        pub key: KeyPair,
    }

    pub struct Leaf {
        pub cert: Certificate,
        pub key: KeyPair,
    }

    impl Leaf {
        pub fn der(&self) -> CertificateDer<'static> {
            self.cert.der().clone()
        }

        pub fn key_der(&self) -> PrivateKeyDer<'static> {
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.serialize_der()))
        }
    }

    pub fn ca(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// A client leaf signed by `ca` with the given URI SANs, DNS SANs and optional CN
    /// (no CN at all when `None`: rcgen's default subject is cleared).
    pub fn leaf(ca: &Ca, uris: &[&str], dns: &[&str], cn: Option<&str>) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        params
            .distinguished_name
            .push(DnType::OrganizationName, "a2a-edge tests");
        for u in uris {
            params
                .subject_alt_names
                .push(SanType::URI(Ia5String::try_from(*u).unwrap()));
        }
        for d in dns {
            params
                .subject_alt_names
                .push(SanType::DnsName(Ia5String::try_from(*d).unwrap()));
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let cert = params.signed_by(&key, &ca.cert, &ca.key).unwrap();
        Leaf { cert, key }
    }

    /// (a) URI SAN (SPIFFE) plus a DNS SAN.
    pub fn spiffe_leaf(ca: &Ca) -> Leaf {
        leaf(ca, &[SPIFFE_ID], &[SPIFFE_DNS], Some("ignored-cn"))
    }

    /// (b) only a DNS SAN.
    pub fn dns_leaf(ca: &Ca) -> Leaf {
        leaf(ca, &[], &[DNS_ONLY], None)
    }

    /// (c) only a subject CN.
    pub fn cn_leaf(ca: &Ca) -> Leaf {
        leaf(ca, &[], &[], Some(CN_ONLY))
    }

    /// (d) nothing usable: a CN with a space, and one with a control character.
    pub fn unusable_leaves(ca: &Ca) -> Vec<Leaf> {
        vec![
            leaf(ca, &[], &[], Some("ci runner")),
            leaf(ca, &[], &[], Some("ci\u{1}runner")),
            leaf(ca, &[], &[], None),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::test_pki::{self, Ca, Leaf};
    use super::*;

    use std::path::PathBuf;
    use std::time::Duration;

    use rustls::pki_types::ServerName;
    use rustls::{ClientConfig, ServerConnection};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio_rustls::{TlsAcceptor, TlsConnector};

    use crate::auth::mtls::peer_identity;
    use crate::tls::dev;

    /// A temp dir with the dev server certificate, the client CA file and a second,
    /// unrelated CA with its own client certificate. Removed on drop.
    struct Fixture {
        dir: PathBuf,
        dev: dev::DevCerts,
        client_ca_file: PathBuf,
        client_ca: Ca,
        other_ca: Ca,
    }

    impl Fixture {
        fn new() -> Self {
            let dir = std::env::temp_dir()
                .join(format!("a2a-edge-mtls-{}", crate::crypto::random_token()));
            let dev = dev::ensure(&dir).unwrap();
            let client_ca = test_pki::ca("a2a-edge test client CA");
            let other_ca = test_pki::ca("unrelated CA");
            let client_ca_file = dir.join("clients-ca.pem");
            std::fs::write(&client_ca_file, client_ca.cert.pem()).unwrap();
            Self {
                dir,
                dev,
                client_ca_file,
                client_ca,
                other_ca,
            }
        }

        fn server(&self, mode: ClientAuthMode) -> Arc<ServerConfig> {
            server_config_with_client_auth(
                &self.dev.server_cert,
                &self.dev.server_key,
                mode,
                Some(&self.client_ca_file),
            )
            .unwrap()
            .0
        }

        fn client(&self, leaf: Option<&Leaf>, tls12: bool) -> Arc<ClientConfig> {
            let mut roots = RootCertStore::empty();
            for c in load_certs(&self.dev.ca_cert).unwrap() {
                roots.add(c).unwrap();
            }
            let versions: &[&rustls::SupportedProtocolVersion] = if tls12 {
                &[&rustls::version::TLS12]
            } else {
                &[&rustls::version::TLS13]
            };
            let builder = ClientConfig::builder_with_provider(provider())
                .with_protocol_versions(versions)
                .unwrap()
                .with_root_certificates(roots);
            let mut cfg = match leaf {
                Some(l) => builder
                    .with_client_auth_cert(vec![l.der()], l.key_der())
                    .unwrap(),
                None => builder.with_no_client_auth(),
            };
            cfg.alpn_protocols = vec![b"h2".to_vec()];
            Arc::new(cfg)
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// What the server saw of an accepted connection.
    #[derive(Debug)]
    struct Accepted {
        identity: Option<String>,
        presented_cert: bool,
    }

    /// One real handshake over 127.0.0.1:0. The server drives the handshake to completion,
    /// reads one byte and answers one byte; the client writes one byte and reads the answer,
    /// so a client-auth failure that TLS 1.3 reports after the client's Finished surfaces on
    /// the client's read. Returns the server's view and whether the client got its byte.
    async fn exchange(
        server: Arc<ServerConfig>,
        client: Arc<ClientConfig>,
    ) -> (Result<Accepted, String>, Result<(), String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = TlsAcceptor::from(server);
        let server_side = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.map_err(|e| e.to_string())?;
            let mut tls = acceptor.accept(tcp).await.map_err(|e| e.to_string())?;
            let conn: &ServerConnection = tls.get_ref().1;
            let accepted = Accepted {
                identity: peer_identity(conn),
                presented_cert: conn.peer_certificates().is_some(),
            };
            let mut byte = [0u8; 1];
            tls.read_exact(&mut byte).await.map_err(|e| e.to_string())?;
            tls.write_all(&byte).await.map_err(|e| e.to_string())?;
            tls.flush().await.map_err(|e| e.to_string())?;
            tls.shutdown().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(accepted)
        });
        let client_side = async {
            let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
            let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
            let mut tls = TlsConnector::from(client)
                .connect(name, tcp)
                .await
                .map_err(|e| e.to_string())?;
            tls.write_all(b"x").await.map_err(|e| e.to_string())?;
            tls.flush().await.map_err(|e| e.to_string())?;
            let mut byte = [0u8; 1];
            tls.read_exact(&mut byte).await.map_err(|e| e.to_string())?;
            if &byte != b"x" {
                return Err("wrong echo".to_string());
            }
            Ok(())
        };
        // A guard against hangs only; no timing is asserted.
        let limit = Duration::from_secs(20);
        let client_result = tokio::time::timeout(limit, client_side)
            .await
            .unwrap_or_else(|_| Err("client timed out".to_string()));
        let server_result = tokio::time::timeout(limit, server_side)
            .await
            .map_err(|_| "server timed out".to_string())
            .and_then(|joined| joined.map_err(|e| e.to_string()))
            .and_then(|r| r);
        (server_result, client_result)
    }

    #[tokio::test]
    async fn required_with_a_good_certificate_yields_its_identity() {
        let fx = Fixture::new();
        let cases = [
            (
                test_pki::spiffe_leaf(&fx.client_ca),
                Some(test_pki::SPIFFE_ID),
            ),
            (test_pki::dns_leaf(&fx.client_ca), Some(test_pki::DNS_ONLY)),
            (test_pki::cn_leaf(&fx.client_ca), Some(test_pki::CN_ONLY)),
            (test_pki::unusable_leaves(&fx.client_ca).remove(0), None),
        ];
        for (leaf, expected) in &cases {
            for tls12 in [false, true] {
                let (server, client) = exchange(
                    fx.server(ClientAuthMode::Required),
                    fx.client(Some(leaf), tls12),
                )
                .await;
                let accepted = server.unwrap();
                client.unwrap();
                assert!(accepted.presented_cert);
                assert_eq!(accepted.identity.as_deref(), *expected, "tls12={tls12}");
            }
        }
    }

    #[tokio::test]
    async fn required_without_a_certificate_fails() {
        let fx = Fixture::new();
        for tls12 in [false, true] {
            let (server, client) =
                exchange(fx.server(ClientAuthMode::Required), fx.client(None, tls12)).await;
            let err = server.unwrap_err();
            assert!(err.contains("no certificates"), "tls12={tls12}: {err}");
            assert!(client.is_err(), "tls12={tls12}");
        }
    }

    #[tokio::test]
    async fn a_certificate_from_another_ca_fails_in_both_modes() {
        let fx = Fixture::new();
        let stranger = test_pki::spiffe_leaf(&fx.other_ca);
        for mode in [ClientAuthMode::Required, ClientAuthMode::Optional] {
            for tls12 in [false, true] {
                let (server, client) =
                    exchange(fx.server(mode), fx.client(Some(&stranger), tls12)).await;
                let err = server.unwrap_err();
                assert!(
                    err.contains("UnknownIssuer"),
                    "{mode:?} tls12={tls12}: {err}"
                );
                assert!(client.is_err(), "{mode:?} tls12={tls12}");
            }
        }
    }

    #[tokio::test]
    async fn optional_lets_clients_without_a_certificate_through_anonymously() {
        let fx = Fixture::new();
        for tls12 in [false, true] {
            let (server, client) =
                exchange(fx.server(ClientAuthMode::Optional), fx.client(None, tls12)).await;
            let accepted = server.unwrap();
            client.unwrap();
            assert!(!accepted.presented_cert);
            assert_eq!(accepted.identity, None);
        }
    }

    #[tokio::test]
    async fn optional_with_a_good_certificate_yields_its_identity() {
        let fx = Fixture::new();
        let leaf = test_pki::spiffe_leaf(&fx.client_ca);
        let (server, client) = exchange(
            fx.server(ClientAuthMode::Optional),
            fx.client(Some(&leaf), false),
        )
        .await;
        client.unwrap();
        assert_eq!(
            server.unwrap().identity.as_deref(),
            Some(test_pki::SPIFFE_ID)
        );
    }

    /// The trust a configuration admits by: the same for the same certificates and mode
    /// (whatever the file's name or layout), another for another CA or mode.
    #[test]
    fn the_trust_is_the_certificates_and_the_mode() {
        let fx = Fixture::new();
        let (cert, key) = (&fx.dev.server_cert, &fx.dev.server_key);
        let trust = |mode, file: &std::path::Path| {
            server_config_with_client_auth(cert, key, mode, Some(file))
                .unwrap()
                .1
        };
        let pem = std::fs::read_to_string(&fx.client_ca_file).unwrap();
        let relaid = fx.dir.join("relaid.pem");
        std::fs::write(&relaid, format!("\n{}\n", pem.replace('\n', "\r\n"))).unwrap();
        let other = fx.dir.join("other.pem");
        std::fs::write(&other, test_pki::ca("another CA").cert.pem()).unwrap();
        let both = fx.dir.join("both.pem");
        std::fs::write(
            &both,
            format!("{pem}{}", std::fs::read_to_string(&other).unwrap()),
        )
        .unwrap();
        let base = trust(ClientAuthMode::Optional, &fx.client_ca_file);
        assert_eq!(trust(ClientAuthMode::Optional, &relaid), base);
        for differs in [
            trust(ClientAuthMode::Required, &fx.client_ca_file),
            trust(ClientAuthMode::Optional, &other),
            trust(ClientAuthMode::Optional, &both),
            trust(ClientAuthMode::Off, &fx.client_ca_file),
        ] {
            assert_ne!(differs, base);
        }
        assert_eq!(
            trust(ClientAuthMode::Off, &fx.client_ca_file),
            trust(ClientAuthMode::Off, &other)
        );
    }

    #[tokio::test]
    async fn off_requests_no_certificate_even_when_one_is_offered() {
        let fx = Fixture::new();
        let leaf = test_pki::spiffe_leaf(&fx.client_ca);
        // Off ignores the CA file, even a missing one.
        let server = server_config_with_client_auth(
            &fx.dev.server_cert,
            &fx.dev.server_key,
            ClientAuthMode::Off,
            Some(&fx.dir.join("missing.pem")),
        )
        .unwrap()
        .0;
        for tls12 in [false, true] {
            let (accepted, client) = exchange(server.clone(), fx.client(Some(&leaf), tls12)).await;
            client.unwrap();
            let accepted = accepted.unwrap();
            assert!(!accepted.presented_cert);
            assert_eq!(accepted.identity, None);
        }
    }

    #[test]
    fn no_identity_before_the_handshake_is_done() {
        let fx = Fixture::new();
        let conn = ServerConnection::new(fx.server(ClientAuthMode::Required)).unwrap();
        assert_eq!(peer_identity(&conn), None);
    }

    #[test]
    fn configs_keep_the_alpn_of_the_plain_server_config() {
        let fx = Fixture::new();
        for mode in [
            ClientAuthMode::Off,
            ClientAuthMode::Optional,
            ClientAuthMode::Required,
        ] {
            let cfg = fx.server(mode);
            assert_eq!(
                cfg.alpn_protocols,
                vec![b"h2".to_vec(), b"http/1.1".to_vec()],
                "{mode:?}"
            );
        }
    }

    #[test]
    fn a_missing_or_bad_ca_file_is_a_configuration_error() {
        let fx = Fixture::new();
        let (cert, key) = (&fx.dev.server_cert, &fx.dev.server_key);
        for mode in [ClientAuthMode::Optional, ClientAuthMode::Required] {
            assert!(server_config_with_client_auth(cert, key, mode, None).is_err());
            let missing = fx.dir.join("missing.pem");
            let err = server_config_with_client_auth(cert, key, mode, Some(&missing)).unwrap_err();
            assert!(err.to_string().contains("missing.pem"), "{err}");
            let empty = fx.dir.join("empty.pem");
            std::fs::write(&empty, "").unwrap();
            assert!(server_config_with_client_auth(cert, key, mode, Some(&empty)).is_err());
            let garbage = fx.dir.join("garbage.pem");
            std::fs::write(
                &garbage,
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            )
            .unwrap();
            assert!(server_config_with_client_auth(cert, key, mode, Some(&garbage)).is_err());
            // A private key is not a CA certificate.
            let keyfile = fx.dev.server_key.clone();
            assert!(server_config_with_client_auth(cert, key, mode, Some(&keyfile)).is_err());
        }
    }
}
