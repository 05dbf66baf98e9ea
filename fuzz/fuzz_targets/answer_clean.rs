//! `upstream::clean::clean_response` (the pass over every agent answer) on arbitrary JSON.
//!
//! Properties: never panics; linear time (a generous per-byte budget, so a quadratic walk
//! such as the one fixed in #13.1 fails on a few KiB); afterwards no value under a denied
//! metadata key survives (every such leaf is `"[REDACTED]"`, checked by an independent,
//! naive walk); an error keeps only its code, a fixed message and bare ErrorInfo entries;
//! cleaning twice changes nothing more (idempotent).
#![no_main]

use std::time::{Duration, Instant};

use a2a_edge::upstream::clean::clean_response;
use a2a_edge::validate::metadata::MetadataPolicy;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn policy() -> MetadataPolicy {
    MetadataPolicy::new(&MetadataPolicy::default_denied(), &Default::default()).expect("policy")
}

/// Every leaf under a `metadata` object at `path` (segments split on dots) that a denied
/// pattern covers must be "[REDACTED]".
fn no_denied_leaf(v: &Value, path: &mut Vec<String>, denied: &[Vec<String>], in_meta: bool) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if !in_meta && k == "metadata" && child.is_object() {
                    no_denied_leaf(child, &mut Vec::new(), denied, true);
                    continue;
                }
                let before = path.len();
                if in_meta {
                    path.extend(k.split('.').filter(|s| !s.is_empty()).map(str::to_string));
                    let covered = denied.iter().any(|d| {
                        d.len() <= path.len()
                            && d.iter().zip(path.iter()).enumerate().all(|(i, (p, s))| {
                                if i == d.len() - 1 && p.ends_with('*') {
                                    s.starts_with(p.trim_end_matches('*'))
                                } else {
                                    p == s
                                }
                            })
                    });
                    if covered {
                        assert_eq!(
                            child,
                            &Value::from("[REDACTED]"),
                            "denied {path:?} survived"
                        );
                        path.truncate(before);
                        continue;
                    }
                }
                no_denied_leaf(child, path, denied, in_meta);
                path.truncate(before);
            }
        }
        Value::Array(items) => {
            for i in items {
                no_denied_leaf(i, path, denied, in_meta);
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(mut v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let p = policy();
    let started = Instant::now();
    clean_response(&mut v, &p, data.first().is_some_and(|b| b & 1 == 1));
    let budget = Duration::from_millis(200) + Duration::from_micros(5) * data.len() as u32;
    assert!(
        started.elapsed() < budget,
        "{:?} for {} bytes",
        started.elapsed(),
        data.len()
    );
    let denied: Vec<Vec<String>> = MetadataPolicy::default_denied()
        .iter()
        .map(|d| d.split('.').map(str::to_string).collect())
        .collect();
    if let Some(result) = v.get("result") {
        no_denied_leaf(result, &mut Vec::new(), &denied, false);
    }
    if let Some(e) = v.get("error").and_then(Value::as_object) {
        assert!(
            e.keys()
                .all(|k| ["code", "message", "data"].contains(&k.as_str())),
            "{e:?}"
        );
        for d in e
            .get("data")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let d = d.as_object().expect("data entries are objects");
            assert!(d
                .keys()
                .all(|k| ["@type", "reason", "domain", "metadata"].contains(&k.as_str())));
        }
    }
    let once = v.clone();
    clean_response(&mut v, &p, data.first().is_some_and(|b| b & 1 == 1));
    assert_eq!(v, once, "cleaning twice changed the answer");
});
