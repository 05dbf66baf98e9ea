//! `card::canonical::canonical_card` and `card::canonical::jcs` on arbitrary JSON.
//!
//! Properties: never panics; RFC 8785 output is a fixed point (`jcs` of the parsed `jcs`
//! output is the same bytes); canonicalization is idempotent (the canonical form of the
//! parsed canonical form is unchanged, and is its own JCS); it does not depend on the order
//! of object members, nor on the card's `signatures` member (the signature never covers
//! itself).
#![no_main]

use a2a_edge::card::canonical::{canonical_card, jcs};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

/// The same value with every object's members in reverse order.
fn reversed(v: &Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(reversed).collect()),
        Value::Object(obj) => Value::Object(
            obj.iter()
                .rev()
                .map(|(k, v)| (k.clone(), reversed(v)))
                .collect::<Map<String, Value>>(),
        ),
        other => other.clone(),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };

    if let Ok(j) = jcs(&value) {
        let parsed: Value = serde_json::from_slice(&j)
            .unwrap_or_else(|e| panic!("JCS output is not JSON ({e}): {}", text(&j)));
        let again = jcs(&parsed).expect("JCS of JCS output");
        assert_eq!(text(&again), text(&j), "JCS is not a fixed point");
    }

    let canonical = canonical_card(&value);
    assert_eq!(
        canonical_card(&reversed(&value)).ok().map(|c| text(&c)),
        canonical.clone().ok().map(|c| text(&c)),
        "member order changes the canonical form"
    );
    if let Value::Object(card) = &value {
        let mut resigned = card.clone();
        resigned.insert(
            "signatures".into(),
            serde_json::json!([{"protected": "e30", "signature": "AA"}]),
        );
        assert_eq!(
            canonical_card(&Value::Object(resigned))
                .ok()
                .map(|c| text(&c)),
            canonical.clone().ok().map(|c| text(&c)),
            "signatures change the canonical form"
        );
    }
    let Ok(c) = canonical else {
        return;
    };
    let parsed: Value = serde_json::from_slice(&c)
        .unwrap_or_else(|e| panic!("canonical form is not JSON ({e}): {}", text(&c)));
    if parsed.is_null() {
        // A card that prunes to nothing.
        return;
    }
    let again = canonical_card(&parsed)
        .unwrap_or_else(|e| panic!("canonical form has no canonical form: {e}: {}", text(&c)));
    assert_eq!(text(&again), text(&c), "canonicalization is not idempotent");
    assert_eq!(
        text(&jcs(&parsed).unwrap()),
        text(&c),
        "canonical form is not JCS"
    );
});
