//! Structured logs: one JSON object per line on standard error. Callers pass only
//! low-cardinality codes and identities, never secrets or request bodies.

pub mod metrics;
pub mod request_id;

use std::io::Write;

use serde_json::{Map, Value};

/// Writes one log line: `{"ts":"<RFC 3339>","event":…, …fields}`.
pub fn log(event: &str, fields: Value) {
    let mut line = Map::new();
    let ts = crate::time::format_rfc3339(crate::time::now_micros());
    line.insert("ts".into(), Value::from(ts));
    line.insert("event".into(), Value::from(event));
    if let Value::Object(f) = fields {
        line.extend(f);
    }
    let mut text = Value::Object(line).to_string();
    text.push('\n');
    // A log that cannot be written must not take the request down.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
