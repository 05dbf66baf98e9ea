//! `policy::Policy::from_toml` (check mode: no side effects) on arbitrary text.
//!
//! Properties: never panics; a refusal names the file and a line inside the text (or none);
//! an accepted policy's summary renders; the same text gives the same answer twice.
#![no_main]

use std::path::Path;

use a2a_edge::policy::{LoadMode, Policy};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz-policy.toml");
    match Policy::from_toml(path, text, LoadMode::Check) {
        Ok(p) => {
            let _ = p.summary();
            assert!(Policy::from_toml(path, text, LoadMode::Check).is_ok());
        }
        Err(e) => {
            assert_eq!(e.file, path);
            if let Some(line) = e.line {
                assert!(
                    line >= 1 && line <= text.lines().count() + 1,
                    "line {line}: {e}"
                );
            }
            let _ = e.to_string();
            assert_eq!(
                Policy::from_toml(path, text, LoadMode::Check).unwrap_err(),
                e
            );
        }
    }
});
