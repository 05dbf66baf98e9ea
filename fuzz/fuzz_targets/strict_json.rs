//! `a2a::json::parse_strict` on arbitrary bytes, with serde_json (the lax parser an agent
//! may use) as the reference.
//!
//! Properties: never panics; an accepted value re-serializes (compact and pretty) to bytes it
//! accepts again, to an equal value; serde_json reads the accepted bytes to the same value
//! (no parser differential); what strict calls a syntax error serde_json refuses too (strict
//! only adds the duplicate-key and depth rules); a refused duplicate key is really there.
//! The value bound (`a2a.max_json_values`): an accepted text parses alike within exactly as
//! many values as its value holds and is refused (`TooManyValues`) within one fewer. The
//! answers' parser (`parse_answer`: duplicate keys keep the last value) reads what
//! serde_json reads, to the same value, but for nesting past its bound; counting an answer
//! without its tree (`count_answer`) gives the tree's count, or the tree parse's error, at
//! any bound.
#![no_main]

use a2a_edge::a2a::json::{
    count_answer, parse_answer, parse_answer_counted, parse_strict, parse_strict_within, JsonError,
    DEFAULT_MAX_VALUES, MAX_DEPTH,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// The values a parsed value holds, as the bound counts them (an object's keys too).
fn values(v: &Value) -> usize {
    1 + match v {
        Value::Array(items) => items.iter().map(values).sum(),
        Value::Object(map) => map.values().map(|v| 1 + values(v)).sum(),
        _ => 0,
    }
}

fuzz_target!(|data: &[u8]| {
    // (a bound from the input itself, so that both sides of it are reached)
    let bound = data.first().map_or(0, |&b| usize::from(b) * 4);
    for max in [usize::MAX, bound] {
        assert_eq!(
            count_answer(data, max),
            parse_answer_counted(data, max).map(|(_, n)| n),
            "counting without the tree differs (bound {max})"
        );
    }
    let lax = serde_json::from_slice::<Value>(data);
    match (parse_answer(data, usize::MAX), &lax) {
        (Ok(v), Ok(l)) => assert_eq!(&v, l, "the answer parser reads another value"),
        (Ok(_), Err(e)) => panic!("the answer parser accepted what serde_json refuses: {e}"),
        (Err(JsonError::TooDeep), Ok(_)) | (Err(_), Err(_)) => {}
        (Err(e), Ok(_)) => panic!("the answer parser refused what serde_json reads: {e:?}"),
    }
    match parse_strict(data, MAX_DEPTH) {
        Ok(v) => {
            let n = values(&v);
            assert_eq!(
                parse_strict_within(data, MAX_DEPTH, n).as_ref(),
                Ok(&v),
                "refused within its own count"
            );
            assert_eq!(
                parse_strict_within(data, MAX_DEPTH, n - 1),
                Err(JsonError::TooManyValues),
                "accepted within one value fewer"
            );
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
        Err(JsonError::TooManyValues) => {
            // Each value takes a byte at least.
            assert!(
                data.len() >= DEFAULT_MAX_VALUES,
                "too many values in {} bytes",
                data.len()
            );
        }
    }
    // A smaller bound only refuses more.
    if parse_strict(data, 3).is_ok() {
        assert!(parse_strict(data, MAX_DEPTH).is_ok());
    }
});
