//! `validate::base64_check::standard_decoded_len` on arbitrary bytes, against the `base64`
//! crate's `STANDARD` engine (what the agent's decoder is assumed to accept).
//!
//! Property: the check accepts exactly the inputs the crate decodes, and then with the length
//! the crate decodes to; never panics.
#![no_main]

use a2a_edge::validate::base64_check::standard_decoded_len;
use base64::Engine as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()
        .map(|bytes| bytes.len());
    assert_eq!(standard_decoded_len(data), decoded);
});
