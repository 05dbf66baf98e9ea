//! What the edge reads of certificates and CRLs itself (parsed by `x509-parser`; rustls-webpki
//! keeps these private): a CRL's `nextUpdate` (RFC 5280 §5.1.2.5), to refuse a CRL that is
//! already past it when the policy is loaded (rustls would then refuse every client
//! certificate) and to say when the CRLs in force run out; a CRL's signature by a CA of the
//! client CA file, checked at load so that a CRL its issuer did not sign is refused then
//! rather than failing every handshake; and a certificate's `notAfter` (§4.1.2.5), to end a
//! connection when the client certificate it was admitted by expires, and its `notBefore`
//! too, to say when a chain the edge serves is valid for clients. Paths, chains and
//! revocation per handshake are rustls-webpki's.

use x509_parser::error::X509Error;
use x509_parser::prelude::{parse_x509_certificate, parse_x509_crl};

/// A time in seconds since the epoch (`None` before 1970).
fn seconds(t: x509_parser::time::ASN1Time) -> Option<u64> {
    u64::try_from(t.timestamp()).ok()
}

/// A CRL's `nextUpdate` in seconds since the epoch; `None` when the DER is not a CRL this
/// reads, or names none.
pub fn next_update(der: &[u8]) -> Option<u64> {
    let (_, crl) = parse_x509_crl(der).ok()?;
    seconds(crl.next_update()?)
}

/// A certificate's validity, `(notBefore, notAfter)`; `None` when the DER is not a
/// certificate this reads.
fn validity(der: &[u8]) -> Option<(x509_parser::time::ASN1Time, x509_parser::time::ASN1Time)> {
    let (_, cert) = parse_x509_certificate(der).ok()?;
    let v = cert.validity();
    Some((v.not_before, v.not_after))
}

/// A certificate's `notAfter` in seconds since the epoch; `None` when the DER is not a
/// certificate this reads.
pub fn not_after(der: &[u8]) -> Option<u64> {
    seconds(validity(der)?.1)
}

/// A certificate's `notBefore` in seconds since the epoch; `None` when the DER is not a
/// certificate this reads.
pub fn not_before(der: &[u8]) -> Option<u64> {
    seconds(validity(der)?.0)
}

/// When a chain the edge serves is valid for clients (seconds since the epoch; `None`: not
/// read): from its leaf's `notBefore` until [`served_until`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Validity {
    pub not_before: Option<u64>,
    pub not_after: Option<u64>,
}

impl Validity {
    /// The served chain's (leaf first), at `now`.
    pub fn served<C: AsRef<[u8]>>(chain: &[C], now: u64) -> Validity {
        Validity {
            not_before: chain.first().and_then(|leaf| not_before(leaf.as_ref())),
            not_after: served_until(chain, now),
        }
    }
}

/// When a chain the edge serves (leaf first) stops being valid for clients, at `now`
/// (seconds since the epoch): its leaf's `notAfter`, or an intermediate's that expires first
/// among those still valid (one already expired, such as an old cross-signed certificate
/// left in the bundle, is on no path a client builds). `None` when the leaf does not read.
/// Past `now` exactly when the leaf has expired.
pub fn served_until<C: AsRef<[u8]>>(chain: &[C], now: u64) -> Option<u64> {
    let (leaf, rest) = chain.split_first()?;
    let leaf = not_after(leaf.as_ref())?;
    Some(chain_expiry(rest, now).map_or(leaf, |i| i.min(leaf)))
}

/// The earliest `notAfter` of `certs` (a chain, or a set of CAs), in seconds since the
/// epoch; `None` when none of them reads.
pub fn earliest_not_after<C: AsRef<[u8]>>(certs: &[C]) -> Option<u64> {
    certs.iter().filter_map(|c| not_after(c.as_ref())).min()
}

/// When a client's certificate chain (as presented, leaf first) stops being valid: the
/// earliest `notAfter` of its certificates that were valid when its handshake began
/// (`began`, seconds since the epoch), in seconds since the epoch. That is the leaf's, or an
/// intermediate's that expires first; one that expired while its client took its time
/// finishing the handshake makes it already past. A presented certificate no path used can
/// only end its own client's connection early; one expired before the handshake cannot have
/// been on the path verified. `None` when no certificate of it reads.
pub fn chain_expiry<C: AsRef<[u8]>>(chain: &[C], began: u64) -> Option<u64> {
    chain
        .iter()
        .filter_map(|c| not_after(c.as_ref()))
        .filter(|&at| at >= began)
        .min()
}

/// Whether a CRL's signature is the one a CA among `cas` whose subject is its issuer made.
#[derive(Debug, PartialEq, Eq)]
pub enum CrlSigner {
    /// A CA of `cas` named as its issuer signed it.
    Verified,
    /// No CA of `cas` is its issuer (an intermediate's CRL: checked per handshake, against
    /// the intermediate the client presents), or it is not one this reads, or its algorithm
    /// is one this cannot check: left to rustls-webpki.
    Unchecked,
    /// CAs of `cas` are named as its issuer, and none of them made its signature.
    Forged,
}

/// Checks `crl`'s signature against the CAs of `cas` named as its issuer.
pub fn crl_signer(crl: &[u8], cas: &[&[u8]]) -> CrlSigner {
    let Ok((_, crl)) = parse_x509_crl(crl) else {
        return CrlSigner::Unchecked;
    };
    let mut named = false;
    for ca in cas {
        let Ok((_, ca)) = parse_x509_certificate(ca) else {
            continue;
        };
        if ca.subject().as_raw() != crl.issuer().as_raw() {
            continue;
        }
        named = true;
        match crl.verify_signature(ca.public_key()) {
            Ok(()) => return CrlSigner::Verified,
            Err(X509Error::SignatureUnsupportedAlgorithm) => return CrlSigner::Unchecked,
            Err(_) => {}
        }
    }
    if named {
        CrlSigner::Forged
    } else {
        CrlSigner::Unchecked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA (its certificate's DER and key); every one is named alike, so one can forge
    /// another's CRLs by name.
    fn ca() -> (Vec<u8>, rcgen::Certificate, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = p.self_signed(&key).unwrap();
        (cert.der().to_vec(), cert, key)
    }

    fn crl_by(
        ca: &(Vec<u8>, rcgen::Certificate, rcgen::KeyPair),
        next: time::OffsetDateTime,
    ) -> Vec<u8> {
        rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2020, 1, 1),
            next_update: next,
            crl_number: rcgen::SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: vec![],
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        }
        .signed_by(&ca.1, &ca.2)
        .unwrap()
        .der()
        .to_vec()
    }

    fn crl(next: time::OffsetDateTime) -> Vec<u8> {
        crl_by(&ca(), next)
    }

    /// UTCTime (before 2050) and GeneralizedTime (from 2050) both read; broken or cut DER
    /// reads as nothing, never a panic.
    #[test]
    fn reads_the_next_update_of_a_crl() {
        for (y, m, d, secs) in [
            (2021, 1, 1, 1_609_459_200u64),
            (2049, 12, 31, 2_524_521_600),
            (2050, 1, 1, 2_524_608_000),
            (2099, 1, 1, 4_070_908_800),
        ] {
            let der = crl(rcgen::date_time_ymd(y, m, d));
            assert_eq!(next_update(&der), Some(secs), "{y}-{m}-{d}");
            assert_eq!(not_after(&der), None, "a CRL is no certificate");
            for cut in 0..der.len() {
                // (a cut CRL may still hold its whole nextUpdate: only no panic is asked)
                let _ = next_update(&der[..cut]);
            }
        }
        for bad in [
            &b""[..],
            b"\x30",
            b"\x30\x80",
            b"\x30\x85\x01\x02\x03\x04\x05",
            b"\x02\x01\x00",
            b"\x30\x03\x02\x01\x00",
        ] {
            assert_eq!(next_update(bad), None, "{bad:?}");
            assert_eq!(not_after(bad), None, "{bad:?}");
        }
    }

    /// A certificate's notAfter reads in both time forms; a cut certificate reads as
    /// nothing, never a panic.
    #[test]
    fn reads_the_not_after_of_a_certificate() {
        let key = rcgen::KeyPair::generate().unwrap();
        for (y, m, d, secs) in [
            (2021, 1, 1, 1_609_459_200u64),
            (2049, 12, 31, 2_524_521_600),
            (2050, 1, 1, 2_524_608_000),
        ] {
            let mut p = rcgen::CertificateParams::new(vec!["a.example".to_string()]).unwrap();
            p.not_before = rcgen::date_time_ymd(2020, 6, 1);
            p.not_after = rcgen::date_time_ymd(y, m, d);
            let der = p.self_signed(&key).unwrap().der().to_vec();
            assert_eq!(not_after(&der), Some(secs), "{y}-{m}-{d}");
            assert_eq!(next_update(&der), None, "a certificate is no CRL");
            for cut in 0..der.len() {
                assert_eq!(not_after(&der[..cut]), None, "cut at {cut}");
            }
        }
    }

    /// A certificate (DER) of `key` valid until January 1st of `year`.
    fn valid_until(key: &rcgen::KeyPair, year: i32) -> Vec<u8> {
        let mut p = rcgen::CertificateParams::new(vec!["a.example".to_string()]).unwrap();
        p.not_after = rcgen::date_time_ymd(year, 1, 1);
        p.self_signed(key).unwrap().der().to_vec()
    }

    /// The earliest `notAfter` of a set of certificates (a chain, a CA file), whatever their
    /// order; what does not read as a certificate is passed over.
    #[test]
    fn the_earliest_not_after_of_a_set() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = |y: i32| valid_until(&key, y);
        let (c2049, c2050, c2021) = (cert(2049), cert(2050), cert(2021));
        let junk = b"not a certificate".to_vec();
        for (set, want) in [
            (vec![c2049.clone(), c2050.clone()], Some(2_493_072_000u64)),
            (
                vec![c2050.clone(), c2021.clone(), c2049],
                Some(1_609_459_200),
            ),
            (vec![junk.clone(), c2050], Some(2_524_608_000)),
            (vec![junk], None),
            (Vec::new(), None),
        ] {
            assert_eq!(earliest_not_after(&set), want, "{} certificates", set.len());
        }
    }

    /// A served chain is good until its leaf's `notAfter`, or an intermediate's still valid
    /// that comes first; an intermediate already expired (a cross-sign left in the bundle)
    /// does not count, and the result is past `now` exactly when the leaf expired.
    #[test]
    fn a_served_chain_is_good_until_its_leaf_or_a_valid_intermediate_expires() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = |y: i32| valid_until(&key, y);
        let (y2021, y2049, y2050) = (1_609_459_200u64, 2_493_072_000u64, 2_524_608_000u64);
        let now = 1_800_000_000; // 2027
        let junk = b"not a certificate".to_vec();
        for (why, chain, want) in [
            ("a leaf alone", vec![cert(2050)], Some(y2050)),
            (
                "an intermediate first",
                vec![cert(2050), cert(2049)],
                Some(y2049),
            ),
            ("the leaf first", vec![cert(2049), cert(2050)], Some(y2049)),
            (
                "an old cross-sign",
                vec![cert(2050), cert(2021)],
                Some(y2050),
            ),
            ("an expired leaf", vec![cert(2021), cert(2050)], Some(y2021)),
            (
                "a leaf that does not read",
                vec![junk.clone(), cert(2050)],
                None,
            ),
            ("no chain", Vec::new(), None),
        ] {
            let got = served_until(&chain, now);
            assert_eq!(got, want, "{why}");
            assert_eq!(
                got.is_some_and(|t| t <= now),
                why == "an expired leaf",
                "{why}"
            );
        }
    }

    /// A CRL is verified by the CA it names as issuer; another CA of that name (a forger),
    /// or a signature changed by a byte, makes it forged; a CA file without its issuer (an
    /// intermediate's CRL) or DER that is no CRL leaves it unchecked.
    #[test]
    fn a_crl_is_checked_against_the_ca_that_issued_it() {
        let (ca, forger, stranger) = (ca(), ca(), {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            p.distinguished_name
                .push(rcgen::DnType::CommonName, "someone else");
            p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            p.self_signed(&key).unwrap().der().to_vec()
        });
        let good = crl_by(&ca, rcgen::date_time_ymd(2099, 1, 1));
        let mut tampered = good.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 0x01;
        let (ca, forger) = (ca.0.as_slice(), forger.0.as_slice());
        for (why, crl, cas, signer) in [
            ("its CA", &good, vec![ca], CrlSigner::Verified),
            (
                "its CA among others",
                &good,
                vec![stranger.as_slice(), forger, ca],
                CrlSigner::Verified,
            ),
            (
                "a CA of its name only",
                &good,
                vec![forger],
                CrlSigner::Forged,
            ),
            ("tampered", &tampered, vec![ca], CrlSigner::Forged),
            (
                "no CA of its name",
                &good,
                vec![stranger.as_slice()],
                CrlSigner::Unchecked,
            ),
            ("no CAs", &good, vec![], CrlSigner::Unchecked),
            ("not a CRL", &ca.to_vec(), vec![ca], CrlSigner::Unchecked),
        ] {
            assert_eq!(crl_signer(crl, &cas), signer, "{why}");
        }
    }

    /// A chain expires with its first certificate to expire among those valid when the
    /// handshake began, even when that was during the handshake; one expired before is
    /// none of its path's; unreadable DER counts for nothing.
    #[test]
    fn a_chain_expires_with_its_first_certificate_valid_at_the_handshake() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = |y: i32| {
            let mut p = rcgen::CertificateParams::new(vec!["a.example".to_string()]).unwrap();
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(y, 1, 1);
            p.self_signed(&key).unwrap().der().to_vec()
        };
        let (y2030, y2040, y2050) = (1_893_456_000u64, 2_208_988_800u64, 2_524_608_000u64);
        let (c2030, c2040, c2050) = (cert(2030), cert(2040), cert(2050));
        let junk = b"not a certificate".to_vec();
        let began = y2030 - 1;
        for (why, chain, at) in [
            ("the leaf first", vec![&c2030, &c2040], Some(y2030)),
            ("an intermediate first", vec![&c2050, &c2040], Some(y2040)),
            ("the leaf later", vec![&c2040, &c2030], Some(y2030)),
            ("junk beside", vec![&junk, &c2050], Some(y2050)),
            ("nothing readable", vec![&junk], None),
            ("empty", vec![], None),
        ] {
            assert_eq!(chain_expiry(&chain, began), at, "{why}");
        }
        // A certificate expired before the handshake began is not on the verified path.
        assert_eq!(chain_expiry(&[&c2050, &c2030], y2030 + 1), Some(y2050));
        assert_eq!(
            chain_expiry(&[&c2030], y2030),
            Some(y2030),
            "its last second"
        );
    }
}
