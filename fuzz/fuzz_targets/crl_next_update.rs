//! `tls::crl::next_update` (the edge's own read of a CRL's DER: its nextUpdate) on arbitrary
//! bytes.
//!
//! Properties: never panics; whatever it returns came from a UTCTime or GeneralizedTime the
//! input holds (a value is at most year 9999's last second).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(secs) = a2a_edge::tls::crl::next_update(data) {
        // 9999-12-31T23:59:59Z
        assert!(secs <= 253_402_300_799, "{secs}");
    }
});
