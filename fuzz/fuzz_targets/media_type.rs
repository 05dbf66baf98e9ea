//! `MediaTypes::classify` on arbitrary strings, and `MediaTypes::new` with the same string as
//! an operator's extra type.
//!
//! Properties: never panics; an accepted type's normalized form is lower-case `type/subtype`
//! without parameters, is in the list of its class, and classifies to itself (idempotent);
//! case does not matter (upper- and lower-casing the input gives the same answer); an extra
//! type the policy accepts is then classified as text, to its lower-case form.
#![no_main]

use a2a_edge::validate::media::{MediaClass, MediaTypes};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn types() -> &'static MediaTypes {
    static T: OnceLock<MediaTypes> = OnceLock::new();
    T.get_or_init(|| {
        MediaTypes::new(&["text/x-terraform".into()], &["image/svg+xml".into()]).unwrap()
    })
}

fn outcome(t: &MediaTypes, s: &str) -> Result<(MediaClass, String), &'static str> {
    t.classify(Some(s)).map_err(|e| e.reason.as_str())
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let t = types();
    let got = outcome(t, s);
    if let Ok((class, essence)) = &got {
        assert!(
            !essence.contains(';') && essence.matches('/').count() == 1,
            "{essence}"
        );
        assert_eq!(essence, &essence.to_ascii_lowercase());
        let list = match class {
            MediaClass::Text => t.text(),
            MediaClass::Multimodal => t.multimodal(),
        };
        assert!(list.contains(essence), "{essence} not in its list");
        assert_eq!(outcome(t, essence), got, "not idempotent");
    } else if s.is_empty() {
        panic!("the empty media type must default to text/plain");
    }
    assert_eq!(
        outcome(t, &s.to_ascii_uppercase()),
        got,
        "case changes the answer: {s:?}"
    );
    assert_eq!(
        outcome(t, &s.to_ascii_lowercase()),
        got,
        "case changes the answer: {s:?}"
    );

    if let Ok(extra) = MediaTypes::new(&[s.to_string()], &[]) {
        let (class, essence) = extra
            .classify(Some(s))
            .unwrap_or_else(|e| panic!("configured extra {s:?} refused: {e:?}"));
        assert_eq!(class, MediaClass::Text);
        assert_eq!(essence, s.to_ascii_lowercase());
    }
});
