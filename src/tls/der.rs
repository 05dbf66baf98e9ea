//! What the edge reads of DER itself: a CRL's `nextUpdate` (RFC 5280 §5.1.2.5), to refuse a
//! CRL that is already past it when the policy is loaded (rustls would then refuse every
//! client certificate) and to say when the CRLs in force run out; and a certificate's
//! `notAfter` (§4.1.2.5), to end a connection when the client certificate it was admitted by
//! expires. Everything else (signatures, entries, paths) is rustls-webpki's.

/// One DER element: its tag, its content and what follows it. Definite lengths of up to four
/// bytes only (a CRL's or certificate's outer lengths).
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, der) = der.split_first()?;
    let (&first, der) = der.split_first()?;
    let (len, der) = if first < 0x80 {
        (usize::from(first), der)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || der.len() < n {
            return None;
        }
        let (bytes, der) = der.split_at(n);
        let len = bytes
            .iter()
            .fold(0usize, |len, b| (len << 8) | usize::from(*b));
        (len, der)
    };
    if der.len() < len {
        return None;
    }
    let (content, rest) = der.split_at(len);
    Some((tag, content, rest))
}

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
/// `[0] EXPLICIT`, constructed: a certificate's version.
const VERSION: u8 = 0xa0;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// A CRL's `nextUpdate` in seconds since the epoch; `None` when the DER is not a CRL this
/// reads, or names none.
///
/// `CertificateList ::= SEQUENCE { tbsCertList, signatureAlgorithm, signature }`;
/// `TBSCertList ::= SEQUENCE { version INTEGER OPTIONAL, signature, issuer, thisUpdate,
/// nextUpdate Time OPTIONAL, ... }`.
pub fn next_update(der: &[u8]) -> Option<u64> {
    let (SEQUENCE, list, _) = element(der)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = element(list)? else {
        return None;
    };
    let (mut tag, _, mut rest) = element(tbs)?;
    if tag == INTEGER {
        (tag, _, rest) = element(rest)?;
    }
    // (tag: the signature algorithm)
    if tag != SEQUENCE {
        return None;
    }
    let (SEQUENCE, _issuer, rest) = element(rest)? else {
        return None;
    };
    let (this_tag, _this_update, rest) = element(rest)?;
    if !matches!(this_tag, UTC_TIME | GENERALIZED_TIME) {
        return None;
    }
    let (tag, time, _) = element(rest)?;
    seconds(tag, time)
}

/// A certificate's `notAfter` in seconds since the epoch; `None` when the DER is not a
/// certificate this reads.
///
/// `Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signature }`;
/// `TBSCertificate ::= SEQUENCE { version [0] EXPLICIT OPTIONAL, serialNumber INTEGER,
/// signature, issuer, validity SEQUENCE { notBefore Time, notAfter Time }, ... }`.
pub fn not_after(der: &[u8]) -> Option<u64> {
    let (SEQUENCE, cert, _) = element(der)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = element(cert)? else {
        return None;
    };
    let (mut tag, _, mut rest) = element(tbs)?;
    if tag == VERSION {
        (tag, _, rest) = element(rest)?;
    }
    // (tag: the serial number)
    if tag != INTEGER {
        return None;
    }
    let (SEQUENCE, _signature, rest) = element(rest)? else {
        return None;
    };
    let (SEQUENCE, _issuer, rest) = element(rest)? else {
        return None;
    };
    let (SEQUENCE, validity, _) = element(rest)? else {
        return None;
    };
    let (before_tag, _not_before, rest) = element(validity)?;
    if !matches!(before_tag, UTC_TIME | GENERALIZED_TIME) {
        return None;
    }
    let (tag, time, _) = element(rest)?;
    seconds(tag, time)
}

/// A UTCTime or GeneralizedTime in seconds since the epoch. RFC 5280 §4.1.2.5:
/// YYMMDDHHMMSSZ (years 1950–2049) or YYYYMMDDHHMMSSZ, in UTC.
fn seconds(tag: u8, time: &[u8]) -> Option<u64> {
    let time = std::str::from_utf8(time).ok()?;
    let full = match tag {
        UTC_TIME if time.len() == 13 => {
            let yy: u32 = time.get(..2)?.parse().ok()?;
            format!("{}{time}", if yy < 50 { "20" } else { "19" })
        }
        GENERALIZED_TIME if time.len() == 15 => time.to_string(),
        _ => return None,
    };
    if !full.ends_with('Z') || !full[..14].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let rfc3339 = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &full[..4],
        &full[4..6],
        &full[6..8],
        &full[8..10],
        &full[10..12],
        &full[12..14]
    );
    crate::time::parse_rfc3339(&rfc3339).map(|us| us / 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crl(next: time::OffsetDateTime) -> Vec<u8> {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2020, 1, 1),
            next_update: next,
            crl_number: rcgen::SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: vec![],
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        }
        .signed_by(&ca, &ca_key)
        .unwrap()
        .der()
        .to_vec()
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
        }
    }

    /// A certificate's notAfter reads in both time forms, with and without a version (v1);
    /// what is not a certificate, or a CRL, reads as nothing, never a panic.
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
                let _ = not_after(&der[..cut]);
            }
        }
        // Version 1 (no [0] version): the serial number comes first.
        let tlv = |tag: u8, parts: &[&[u8]]| {
            let content = parts.concat();
            let mut out = vec![tag, u8::try_from(content.len()).unwrap()];
            out.extend(content);
            out
        };
        let cert = |validity: &[&[u8]]| {
            let tbs = tlv(
                SEQUENCE,
                &[
                    b"\x02\x01\x01",
                    b"\x30\x00",
                    b"\x30\x00",
                    &tlv(SEQUENCE, validity),
                ],
            );
            tlv(SEQUENCE, &[&tbs])
        };
        let t2020 = tlv(UTC_TIME, &[b"200101000000Z"]);
        let t2030 = tlv(UTC_TIME, &[b"300101000000Z"]);
        assert_eq!(not_after(&cert(&[&t2020, &t2030])), Some(1_893_456_000));
        let crl = crl(rcgen::date_time_ymd(2030, 1, 1));
        assert_eq!(not_after(&crl), None, "a CRL is no certificate");
        // notBefore alone, notAfter not a time, a month that is none, a local time.
        for bad in [
            cert(&[&t2020]),
            cert(&[&t2020, &tlv(0x04, &[b"hello"])]),
            cert(&[&t2020, &tlv(UTC_TIME, &[b"301301000000Z"])]),
            cert(&[&t2020, &tlv(GENERALIZED_TIME, &[b"20300101000000+"])]),
        ] {
            assert_eq!(not_after(&bad), None, "{bad:?}");
        }
    }
}
