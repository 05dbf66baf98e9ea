//! `tls::der::next_update`, `tls::der::not_after` and `tls::der::not_before` (the edge's own
//! reads of DER: a CRL's nextUpdate, a certificate's notAfter and notBefore) on arbitrary
//! bytes.
//!
//! Properties: never panics; whatever they return came from a UTCTime or GeneralizedTime the
//! input holds (a value is at most year 9999's last second).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // 9999-12-31T23:59:59Z
    const LAST: u64 = 253_402_300_799;
    if let Some(secs) = a2a_edge::tls::der::next_update(data) {
        assert!(secs <= LAST, "{secs}");
    }
    if let Some(secs) = a2a_edge::tls::der::not_after(data) {
        assert!(secs <= LAST, "{secs}");
    }
    if let Some(secs) = a2a_edge::tls::der::not_before(data) {
        assert!(secs <= LAST, "{secs}");
    }
});
