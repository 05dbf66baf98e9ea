//! `a2a::json::parse_strict` on arbitrary bytes, with serde_json (the lax parser an agent
//! may use) as the reference.
//!
//! Properties: never panics; an accepted value re-serializes (compact and pretty) to bytes it
//! accepts again, to an equal value; serde_json reads the accepted bytes to the same value
//! (no parser differential); what strict calls a syntax error serde_json refuses too (strict
//! only adds the duplicate-key and depth rules); a refused duplicate key is really there.
#![no_main]

use a2a_edge::a2a::json::{parse_strict, JsonError, MAX_DEPTH};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let lax = serde_json::from_slice::<Value>(data);
    match parse_strict(data, MAX_DEPTH) {
        Ok(v) => {
            let lax =
                lax.unwrap_or_else(|e| panic!("strict accepted what serde_json refuses: {e}"));
            assert_eq!(lax, v, "strict and serde_json read different values");
            for bytes in [
                serde_json::to_vec(&v).unwrap(),
                serde_json::to_vec_pretty(&v).unwrap(),
            ] {
                let again = parse_strict(&bytes, MAX_DEPTH)
                    .unwrap_or_else(|e| panic!("re-serialization refused: {e:?}"));
                assert_eq!(again, v, "re-serialization changed the value");
            }
        }
        Err(JsonError::Syntax) => {
            assert!(lax.is_err(), "strict calls valid JSON a syntax error");
        }
        Err(JsonError::DuplicateKey) => {
            // serde_json keeps the last of duplicate keys; it must still read the bytes,
            // unless they also nest deeper than its own limit of 128.
        }
        Err(JsonError::TooDeep) => {
            // Past 64 levels: serde_json may read it (up to 128) or not.
        }
    }
    // A smaller bound only refuses more.
    if parse_strict(data, 3).is_ok() {
        assert!(parse_strict(data, MAX_DEPTH).is_ok());
    }
});
