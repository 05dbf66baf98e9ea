//! Client certificates (mTLS): the edge's server configuration that asks for, and verifies,
//! a client certificate against the operator's client CAs. The identity read from a verified
//! certificate lives in `auth::mtls`; this file only decides who may finish the handshake.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use super::{load_certs, load_key, provider, TlsError, ALPN};

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

/// Which client certificates a server configuration admits: its verifier (none with
/// client certificates off). A connection's certificate chain, verified in its handshake, is
/// checked again by the trust of each reload's configuration ([`ClientTrust::admits`]), so
/// a reload that changes the client CAs, the CRLs or the mode ends exactly the connections
/// a new handshake would refuse.
///
/// Its fingerprint (a digest of the mode, the CA certificates and the CRLs) tells two
/// configurations that verify alike: a reload that keeps it (most reloads) re-verifies
/// nothing.
#[derive(Clone)]
pub struct ClientTrust {
    verifier: Option<Arc<dyn ClientCertVerifier>>,
    fingerprint: [u8; 32],
    /// When the first of its CRLs runs out (their earliest `nextUpdate`, seconds since the
    /// epoch): past it every client certificate is refused until a reload brings new CRLs.
    crls_run_out: Option<u64>,
    /// When the first of its client CAs expires (their earliest `notAfter`): rustls-webpki
    /// does not check a trust anchor's validity, so one past it still admits its clients;
    /// this says when to replace it.
    cas_expire: Option<u64>,
}

impl fmt::Debug for ClientTrust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.verifier {
            Some(_) => "ClientTrust(verifier)",
            None => "ClientTrust(off)",
        })
    }
}

impl ClientTrust {
    fn new(
        mode: ClientAuthMode,
        verifier: Option<Arc<dyn ClientCertVerifier>>,
        cas: &[CertificateDer<'_>],
        crls: &[CertificateRevocationListDer<'_>],
    ) -> ClientTrust {
        let mut all = vec![mode as u8];
        let ders = cas.iter().map(|c| c.as_ref());
        for der in ders
            .chain(std::iter::once(&b"crls"[..]))
            .chain(crls.iter().map(|c| c.as_ref()))
        {
            all.extend_from_slice(&(der.len() as u64).to_be_bytes());
            all.extend_from_slice(der);
        }
        ClientTrust {
            verifier,
            fingerprint: crate::crypto::sha256(&all),
            crls_run_out: crls.iter().filter_map(|c| super::der::next_update(c)).min(),
            cas_expire: super::der::earliest_not_after(cas),
        }
    }

    /// When its CRLs run out (the earliest `nextUpdate`; none without CRLs).
    pub fn crls_run_out(&self) -> Option<u64> {
        self.crls_run_out
    }

    /// When its first client CA expires (the earliest `notAfter`; none without client
    /// certificates). Past it the CA still admits its clients (see the field).
    pub fn cas_expire(&self) -> Option<u64> {
        self.cas_expire
    }

    /// The digest of what this trust verifies by: equal for configurations that admit the
    /// same chains (whatever their files' names or layout).
    pub fn fingerprint(&self) -> [u8; 32] {
        self.fingerprint
    }

    /// Whether a client presenting `chain` (leaf first) would finish a handshake now: it
    /// chains to the client CAs, no CRL revokes it or its intermediates, it is within its
    /// validity. With client certificates off, no chain is admitted.
    pub fn admits(&self, chain: &[CertificateDer<'_>]) -> bool {
        match (&self.verifier, chain.split_first()) {
            (Some(v), Some((leaf, intermediates))) => v
                .verify_client_cert(leaf, intermediates, UnixTime::now())
                .is_ok(),
            _ => false,
        }
    }
}

/// The edge's server configuration with client-certificate verification against the CA
/// certificates in `ca_file`: TLS 1.3 and 1.2 only, ALPN h2 and http/1.1, the same provider
/// as [`super::server_config`].
///
/// `Optional` lets clients without a certificate through; a certificate that does not chain
/// to the CAs fails the handshake in both `Optional` and `Required`: a wrong credential never
/// degrades to none. `Off` is exactly [`super::server_config`] (`ca_file` and `crl_file` are
/// then ignored); otherwise `ca_file` is required and must hold at least one usable CA
/// certificate.
///
/// With `crl_file` (PEM, one or more CRLs), every certificate of a client's chain but the
/// trust anchor is checked against the CRLs, as OpenSSL's `CRL_CHECK_ALL` (nginx's
/// `ssl_crl`) does: a revoked certificate fails the handshake, so does one whose issuer has
/// no CRL in the file (its status is unknown), and so does every certificate once a CRL is
/// past its `nextUpdate`. Returned with the configuration: its trust, and when the chain it
/// serves is valid for clients ([`super::der::Validity`]).
pub fn server_config_with_client_auth(
    cert_file: &Path,
    key_file: &Path,
    mode: ClientAuthMode,
    ca_file: Option<&Path>,
    crl_file: Option<&Path>,
) -> Result<(Arc<ServerConfig>, ClientTrust, super::der::Validity), TlsError> {
    let certs = load_certs(cert_file)?;
    let served = super::der::Validity::served(&certs, crate::time::now_secs());
    if mode == ClientAuthMode::Off {
        let trust = ClientTrust::new(mode, None, &[], &[]);
        let config = super::server_config_of(certs, cert_file, key_file)?;
        return Ok((config, trust, served));
    }
    let ca_file = ca_file.ok_or_else(|| {
        TlsError("client certificate authentication needs a client CA file".to_string())
    })?;
    let cas = load_certs(ca_file)?;
    let trust_cas = cas.clone();
    let roots = client_roots(ca_file, cas)?;
    let provider = provider();
    let builder = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
    let builder = match mode {
        ClientAuthMode::Optional => builder.allow_unauthenticated(),
        ClientAuthMode::Required | ClientAuthMode::Off => builder,
    };
    let crls = match crl_file {
        Some(f) => load_crls(f, ca_file, &trust_cas)?,
        None => Vec::new(),
    };
    let builder = match crl_file {
        Some(_) => builder
            .with_crls(crls.iter().cloned())
            .enforce_revocation_expiration(),
        None => builder,
    };
    let verifier = builder.build().map_err(|e| {
        TlsError(format!(
            "client CA certificates in {}{}: {e}",
            ca_file.display(),
            crl_file.map_or(String::new(), |f| format!(" or CRLs in {}", f.display()))
        ))
    })?;
    let trust = ClientTrust::new(mode, Some(verifier.clone()), &trust_cas, &crls);

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
    Ok((Arc::new(cfg), trust, served))
}

/// The CRLs in a PEM file: at least one. One that does not parse makes the whole file a
/// configuration error (the verifier's builder parses them), and so does one issued in the
/// name of a CA of `ca_file` (`cas`) that CA did not sign: it would fail every handshake of
/// that CA's clients, so it is refused at load (and a reload keeps the CRLs in force). The
/// CRLs of intermediates (their issuer is not in `ca_file`) are checked per chain. One
/// already past its `nextUpdate` is read: what to do with it is the server's
/// ([`ClientTrust::crls_run_out`]).
fn load_crls(
    path: &Path,
    ca_file: &Path,
    cas: &[CertificateDer<'_>],
) -> Result<Vec<CertificateRevocationListDer<'static>>, TlsError> {
    let crls = CertificateRevocationListDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError(format!("cannot read CRLs from {}: {e}", path.display())))?;
    if crls.is_empty() {
        return Err(TlsError(format!("no CRL found in {}", path.display())));
    }
    let cas: Vec<&[u8]> = cas.iter().map(|c| c.as_ref()).collect();
    for (n, crl) in crls.iter().enumerate() {
        if super::der::crl_signer(crl, &cas) == super::der::CrlSigner::Forged {
            return Err(TlsError(format!(
                "CRL {} of {} names a CA of {} as its issuer, but no such CA signed it \
                 (its signature does not verify)",
                n + 1,
                path.display(),
                ca_file.display()
            )));
        }
    }
    Ok(crls)
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
        // A serial of its own (CRLs name certificates by it).
        static NEXT_SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let serial = NEXT_SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        params.serial_number = Some(rcgen::SerialNumber::from(serial));
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

        /// Writes `text` to `name` in the fixture's directory.
        fn write(&self, name: &str, text: String) -> PathBuf {
            let path = self.dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        }

        /// CA files: the client CA re-encoded (CRLF, blank lines), the other CA alone, and
        /// both CAs.
        fn ca_files(&self) -> (PathBuf, PathBuf, PathBuf) {
            let pem = std::fs::read_to_string(&self.client_ca_file).unwrap();
            let other = self.other_ca.cert.pem();
            (
                self.write("relaid.pem", format!("\n{}\n", pem.replace('\n', "\r\n"))),
                self.write("other.pem", other.clone()),
                self.write("both.pem", format!("{pem}{other}")),
            )
        }

        fn server(&self, mode: ClientAuthMode) -> Arc<ServerConfig> {
            server_config_with_client_auth(
                &self.dev.server_cert,
                &self.dev.server_key,
                mode,
                Some(&self.client_ca_file),
                None,
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

    /// A PEM CRL by `ca` revoking `revoked`, valid until the start of `next_update` (a year).
    fn crl(ca: &Ca, revoked: &[&Leaf], next_update: i32) -> String {
        crl_until(ca, revoked, rcgen::date_time_ymd(next_update, 1, 1))
    }

    fn crl_until(ca: &Ca, revoked: &[&Leaf], next_update: time::OffsetDateTime) -> String {
        rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2020, 1, 1),
            next_update,
            crl_number: rcgen::SerialNumber::from(7u64),
            issuing_distribution_point: None,
            revoked_certs: revoked
                .iter()
                .map(|l| rcgen::RevokedCertParams {
                    serial_number: l.cert.params().serial_number.clone().unwrap(),
                    revocation_time: rcgen::date_time_ymd(2021, 1, 1),
                    reason_code: None,
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        }
        .signed_by(&ca.cert, &ca.key)
        .unwrap()
        .pem()
        .unwrap()
    }

    /// What a reload's configuration admits of a connection's verified chain: what a new
    /// handshake would (the same CAs, even re-encoded, a superset of them, another mode that
    /// verifies), not a chain another CA's configuration, a CRL that revokes it, or client
    /// certificates off would refuse.
    #[test]
    fn a_chain_is_admitted_again_exactly_when_a_handshake_would_be() {
        let fx = Fixture::new();
        let (cert, key) = (&fx.dev.server_cert, &fx.dev.server_key);
        let leaf = test_pki::spiffe_leaf(&fx.client_ca);
        let sibling = test_pki::dns_leaf(&fx.client_ca);
        let write = |name: &str, text: String| fx.write(name, text);
        let (relaid, other, both) = fx.ca_files();
        let revokes = write("revokes.crl", crl(&fx.client_ca, &[&leaf], 2099));
        let revokes_sibling = write("sibling.crl", crl(&fx.client_ca, &[&sibling], 2099));
        // Valid when loaded, past its nextUpdate two seconds later.
        let soon = time::OffsetDateTime::now_utc() + time::Duration::seconds(2);
        let expires = write("expires.crl", crl_until(&fx.client_ca, &[], soon));
        let others_crl = write("others.crl", crl(&fx.other_ca, &[], 2099));
        let expired = write("expired.crl", crl(&fx.client_ca, &[], 2021));
        let trust = |mode, ca: &std::path::Path, crl: Option<&std::path::Path>| {
            server_config_with_client_auth(cert, key, mode, Some(ca), crl)
                .unwrap()
                .1
        };
        let (opt, req) = (ClientAuthMode::Optional, ClientAuthMode::Required);
        let ca = fx.client_ca_file.as_path();
        let expired_since = trust(opt, ca, Some(&expires));
        assert!(expired_since.admits(&[leaf.der()]), "before its nextUpdate");
        std::thread::sleep(Duration::from_millis(2100));
        for (why, t, admitted) in [
            ("same", trust(opt, ca, None), true),
            ("re-encoded", trust(opt, &relaid, None), true),
            ("required", trust(req, ca, None), true),
            ("a superset", trust(opt, &both, None), true),
            (
                "a CRL of others",
                trust(opt, ca, Some(&revokes_sibling)),
                true,
            ),
            ("another CA", trust(opt, &other, None), false),
            ("off", trust(ClientAuthMode::Off, ca, None), false),
            ("revoked", trust(opt, ca, Some(&revokes)), false),
            ("revoked, required", trust(req, ca, Some(&revokes)), false),
            ("a CRL expired since", expired_since.clone(), false),
            ("an expired CRL", trust(opt, ca, Some(&expired)), false),
            (
                "no CRL of its CA",
                trust(opt, &both, Some(&others_crl)),
                false,
            ),
        ] {
            assert_eq!(t.admits(&[leaf.der()]), admitted, "{why}");
            assert!(!t.admits(&[]), "{why}: an empty chain");
        }
    }

    /// The fingerprint a reload compares before verifying anything again: the same for the
    /// same certificates, CRLs and mode (whatever the files' layout), another for another CA,
    /// a CA more, another CRL or another mode; the same for every configuration with client
    /// certificates off.
    #[test]
    fn the_fingerprint_is_the_certificates_the_crls_and_the_mode() {
        let fx = Fixture::new();
        let (cert, key) = (&fx.dev.server_cert, &fx.dev.server_key);
        let write = |name: &str, text: String| fx.write(name, text);
        let (relaid, other, both) = fx.ca_files();
        let crl_pem = crl(&fx.client_ca, &[], 2099);
        let crl1 = write("one.crl", crl_pem.clone());
        let crl1_relaid = write("one-relaid.crl", format!("\n{crl_pem}"));
        let crl2 = write(
            "two.crl",
            crl(&fx.client_ca, &[&test_pki::cn_leaf(&fx.client_ca)], 2099),
        );
        let fp = |mode, ca: &std::path::Path, crl: Option<&std::path::Path>| {
            server_config_with_client_auth(cert, key, mode, Some(ca), crl)
                .unwrap()
                .1
                .fingerprint()
        };
        let (opt, req) = (ClientAuthMode::Optional, ClientAuthMode::Required);
        let ca = fx.client_ca_file.as_path();
        let base = fp(opt, ca, None);
        assert_eq!(fp(opt, &relaid, None), base);
        for (why, differs) in [
            ("required", fp(req, ca, None)),
            ("another CA", fp(opt, &other, None)),
            ("a CA more", fp(opt, &both, None)),
            ("a CRL", fp(opt, ca, Some(&crl1))),
            ("off", fp(ClientAuthMode::Off, ca, None)),
        ] {
            assert_ne!(differs, base, "{why}");
        }
        assert_eq!(fp(opt, ca, Some(&crl1)), fp(opt, ca, Some(&crl1_relaid)));
        assert_ne!(fp(opt, ca, Some(&crl1)), fp(opt, ca, Some(&crl2)));
        assert_eq!(
            fp(ClientAuthMode::Off, ca, None),
            fp(ClientAuthMode::Off, &other, Some(&crl1))
        );
    }

    /// The handshake itself with a CRL: a revoked certificate fails it in both modes and over
    /// both TLS versions; a certificate of the same CA the CRL leaves alone and a client
    /// without a certificate (optional) finish it.
    #[tokio::test]
    async fn a_revoked_certificate_fails_the_handshake() {
        let fx = Fixture::new();
        let revoked = test_pki::spiffe_leaf(&fx.client_ca);
        let fine = test_pki::cn_leaf(&fx.client_ca);
        let crl_file = fx.dir.join("clients.crl");
        std::fs::write(&crl_file, crl(&fx.client_ca, &[&revoked], 2099)).unwrap();
        let server = |mode| {
            let (cert, key) = (&fx.dev.server_cert, &fx.dev.server_key);
            server_config_with_client_auth(
                cert,
                key,
                mode,
                Some(&fx.client_ca_file),
                Some(&crl_file),
            )
            .unwrap()
            .0
        };
        for mode in [ClientAuthMode::Optional, ClientAuthMode::Required] {
            for tls12 in [false, true] {
                let (s, c) = exchange(server(mode), fx.client(Some(&revoked), tls12)).await;
                let err = s.unwrap_err();
                assert!(err.contains("Revoked"), "{mode:?} tls12={tls12}: {err}");
                assert!(c.is_err(), "{mode:?} tls12={tls12}");
                let (s, c) = exchange(server(mode), fx.client(Some(&fine), tls12)).await;
                assert_eq!(s.unwrap().identity.as_deref(), Some(test_pki::CN_ONLY));
                c.unwrap();
            }
        }
        let (s, c) = exchange(server(ClientAuthMode::Optional), fx.client(None, false)).await;
        assert!(!s.unwrap().presented_cert);
        c.unwrap();
    }

    /// A CRL file that is missing, empty, broken or holds something else is a configuration
    /// error naming the file.
    #[test]
    fn a_missing_or_bad_crl_file_is_a_configuration_error() {
        let fx = Fixture::new();
        let (cert, key) = (&fx.dev.server_cert, &fx.dev.server_key);
        let write = |name: &str, text: &str| {
            let path = fx.dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let rows = [
            fx.dir.join("missing.crl"),
            write("empty.crl", ""),
            write(
                "garbage.crl",
                "-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n",
            ),
            write("a-cert.crl", &fx.client_ca.cert.pem()),
            // In the client CA's name, by another key: a forgery.
            write(
                "forged.crl",
                &crl(&test_pki::ca("a2a-edge test client CA"), &[], 2099),
            ),
            // The client CA's own CRL, a byte of its signature changed.
            write("tampered.crl", &{
                let pem = crl(&fx.client_ca, &[], 2099);
                let mut der = CertificateRevocationListDer::from_pem_slice(pem.as_bytes())
                    .unwrap()
                    .to_vec();
                let last = der.len() - 1;
                der[last] ^= 0x01;
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD.encode(&der);
                format!("-----BEGIN X509 CRL-----\n{b64}\n-----END X509 CRL-----\n")
            }),
        ];
        for path in rows {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            for mode in [ClientAuthMode::Optional, ClientAuthMode::Required] {
                let err = server_config_with_client_auth(
                    cert,
                    key,
                    mode,
                    Some(&fx.client_ca_file),
                    Some(&path),
                )
                .unwrap_err();
                assert!(err.to_string().contains(&name), "{name}: {err}");
            }
        }
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
            Some(&fx.dir.join("missing.crl")),
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
            assert!(server_config_with_client_auth(cert, key, mode, None, None).is_err());
            let missing = fx.dir.join("missing.pem");
            let err =
                server_config_with_client_auth(cert, key, mode, Some(&missing), None).unwrap_err();
            assert!(err.to_string().contains("missing.pem"), "{err}");
            let empty = fx.dir.join("empty.pem");
            std::fs::write(&empty, "").unwrap();
            assert!(server_config_with_client_auth(cert, key, mode, Some(&empty), None).is_err());
            let garbage = fx.dir.join("garbage.pem");
            std::fs::write(
                &garbage,
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            )
            .unwrap();
            assert!(server_config_with_client_auth(cert, key, mode, Some(&garbage), None).is_err());
            // A private key is not a CA certificate.
            let keyfile = fx.dev.server_key.clone();
            assert!(server_config_with_client_auth(cert, key, mode, Some(&keyfile), None).is_err());
        }
    }
}
