//! mTLS: the identity of a client certificate that rustls has already verified against the
//! client CAs (see `tls::client_auth`). This file only names the caller; it never decides
//! whether a certificate is trusted.

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{parse_x509_certificate, X509Certificate};

/// Upper bound on the length of an identity taken from a certificate.
pub const MAX_IDENTITY_BYTES: usize = 512;

/// The identity of a verified client certificate (the leaf, DER): the first URI SAN (e.g. a
/// SPIFFE id `spiffe://trust.domain/workload`), else the first DNS SAN, else the subject CN.
///
/// The most specific kind present decides: if the certificate has a URI SAN, its identity is
/// the first URI SAN or nothing, never a DNS name or CN picked instead; likewise a DNS SAN
/// shadows the CN. A value must be 1 to 512 bytes of printable ASCII without spaces; an odd
/// value, a subject with several CNs, a malformed SAN extension or trailing bytes after the
/// certificate give `None`. A CN holding `:` or `/` gives `None` too: identities of all kinds
/// share one namespace (`mtls:<identity>`, and the policy's identity patterns), and a CN,
/// often chosen by whoever asks for the certificate, must not pass for a URI SAN (a CN of
/// `spiffe://example.org/ns/prod/sa/ci` is not that workload).
pub fn certificate_identity(leaf_der: &[u8]) -> Option<String> {
    let (rest, cert) = parse_x509_certificate(leaf_der).ok()?;
    if !rest.is_empty() {
        return None;
    }
    identity_of(&cert)
        .filter(|v| is_usable(v))
        .map(str::to_owned)
}

/// The identity of the verified client on an accepted connection, or `None` when the
/// handshake is not finished, no certificate was presented, or the leaf names no usable
/// identity.
pub fn peer_identity(conn: &rustls::ServerConnection) -> Option<String> {
    if conn.is_handshaking() {
        return None;
    }
    let leaf = conn.peer_certificates()?.first()?;
    certificate_identity(leaf.as_ref())
}

/// The candidate value, before the character check.
fn identity_of<'c>(cert: &'c X509Certificate<'_>) -> Option<&'c str> {
    // A duplicated or unparsable SAN extension is an error, not "no SAN".
    let san = cert.subject_alternative_name().ok()?;
    if let Some(san) = san {
        let names = &san.value.general_names;
        let first_uri = names.iter().find_map(|n| match n {
            GeneralName::URI(u) => Some(*u),
            _ => None,
        });
        if first_uri.is_some() {
            return first_uri;
        }
        let first_dns = names.iter().find_map(|n| match n {
            GeneralName::DNSName(d) => Some(*d),
            _ => None,
        });
        if let Some(dns) = first_dns {
            // Never URI-like either (a CA signing what a CSR asks may put anything there):
            // a DNS name spelled as a SPIFFE id would be that id's principal.
            return Some(dns).filter(|d| !d.contains([':', '/']));
        }
    }
    let mut cns = cert.subject().iter_common_name();
    let cn = cns.next()?;
    if cns.next().is_some() {
        // Two CNs: which one names the caller is a matter of opinion; refuse to guess.
        return None;
    }
    // UTF8String, PrintableString, IA5String and NumericString only; never URI-like.
    cn.as_str().ok().filter(|v| !v.contains([':', '/']))
}

/// 1 to 512 bytes, each printable ASCII other than space (0x21..=0x7e).
fn is_usable(value: &str) -> bool {
    (1..=MAX_IDENTITY_BYTES).contains(&value.len())
        && value.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::client_auth::test_pki::{self, leaf};

    #[test]
    fn identity_of_each_certificate_shape() {
        let ca = test_pki::ca("a2a-edge test client CA");
        let longest = "a".repeat(MAX_IDENTITY_BYTES);
        let rows: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
            (
                "uri+dns",
                test_pki::spiffe_leaf(&ca).der().to_vec(),
                Some(test_pki::SPIFFE_ID),
            ),
            (
                "dns only",
                test_pki::dns_leaf(&ca).der().to_vec(),
                Some(test_pki::DNS_ONLY),
            ),
            (
                "cn only",
                test_pki::cn_leaf(&ca).der().to_vec(),
                Some(test_pki::CN_ONLY),
            ),
            (
                "first of several URIs",
                leaf(
                    &ca,
                    &["spiffe://example.org/a", "spiffe://example.org/b"],
                    &[],
                    None,
                )
                .der()
                .to_vec(),
                Some("spiffe://example.org/a"),
            ),
            (
                "first of several DNS names",
                leaf(
                    &ca,
                    &[],
                    &["one.example.org", "two.example.org"],
                    Some("cn"),
                )
                .der()
                .to_vec(),
                Some("one.example.org"),
            ),
            (
                "an odd URI is not replaced by the DNS name",
                leaf(
                    &ca,
                    &["spiffe://example.org/a b"],
                    &["ok.example.org"],
                    None,
                )
                .der()
                .to_vec(),
                None,
            ),
            (
                "an odd DNS name is not replaced by the CN",
                leaf(&ca, &[], &["bad\tname"], Some("fine-cn"))
                    .der()
                    .to_vec(),
                None,
            ),
            (
                "identity at the length limit",
                leaf(&ca, &[], &[], Some(&longest)).der().to_vec(),
                Some(longest.as_str()),
            ),
            (
                "identity over the length limit",
                leaf(&ca, &[], &[], Some(&"a".repeat(MAX_IDENTITY_BYTES + 1)))
                    .der()
                    .to_vec(),
                None,
            ),
            (
                "non-ASCII CN",
                leaf(&ca, &[], &[], Some("agent-é")).der().to_vec(),
                None,
            ),
            // Nor does a DNS name (no fallback to the CN then, as for any odd DNS name).
            (
                "a DNS name spelled as a SPIFFE id",
                leaf(&ca, &[], &[test_pki::SPIFFE_ID], Some("fine-cn"))
                    .der()
                    .to_vec(),
                None,
            ),
            (
                "a DNS name with a port",
                leaf(&ca, &[], &["host.example.org:443"], None)
                    .der()
                    .to_vec(),
                None,
            ),
            // A CN never passes for a URI SAN: no `:` or `/` in it.
            (
                "a CN spelled as a SPIFFE id",
                leaf(&ca, &[], &[], Some(test_pki::SPIFFE_ID))
                    .der()
                    .to_vec(),
                None,
            ),
            (
                "a CN with a scheme",
                leaf(&ca, &[], &[], Some("urn:example:ci")).der().to_vec(),
                None,
            ),
            (
                "a CN with a path",
                leaf(&ca, &[], &[], Some("team/ci")).der().to_vec(),
                None,
            ),
            (
                "a CN spelled as a DNS name",
                leaf(&ca, &[], &[], Some("build-agent.example.org"))
                    .der()
                    .to_vec(),
                Some("build-agent.example.org"),
            ),
            ("not a certificate", b"not DER".to_vec(), None),
            ("empty", Vec::new(), None),
        ];
        for (name, der, expected) in rows {
            assert_eq!(certificate_identity(&der).as_deref(), expected, "{name}");
        }
        let unusable = test_pki::unusable_leaves(&ca);
        assert_eq!(unusable.len(), 3);
        for l in unusable {
            assert_eq!(certificate_identity(l.der().as_ref()), None);
        }
    }

    #[test]
    fn an_odd_value_is_seen_and_then_refused_not_skipped() {
        let ca = test_pki::ca("a2a-edge test client CA");
        let rows = [
            (
                leaf(
                    &ca,
                    &["spiffe://example.org/a b"],
                    &["ok.example.org"],
                    None,
                ),
                "spiffe://example.org/a b",
            ),
            (leaf(&ca, &[], &["bad\tname"], Some("fine-cn")), "bad\tname"),
        ];
        for (l, raw) in rows {
            let der = l.der();
            let (_, cert) = parse_x509_certificate(der.as_ref()).unwrap();
            assert_eq!(identity_of(&cert), Some(raw));
            assert_eq!(certificate_identity(der.as_ref()), None);
        }
    }

    #[test]
    fn trailing_bytes_after_the_certificate_are_refused() {
        let ca = test_pki::ca("a2a-edge test client CA");
        let mut der = test_pki::cn_leaf(&ca).der().to_vec();
        assert!(certificate_identity(&der).is_some());
        der.push(0);
        assert_eq!(certificate_identity(&der), None);
    }

    #[test]
    fn usable_values() {
        assert!(is_usable("spiffe://example.org/ns/prod/sa/ci"));
        assert!(is_usable("~"));
        for bad in ["", " ", "a b", "a\u{7f}", "a\nb", "a\0", "é"] {
            assert!(!is_usable(bad), "{bad:?}");
        }
    }
}
