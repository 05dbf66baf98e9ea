//! Structured logs: one JSON object per line on standard error. Callers pass only
//! low-cardinality codes and identities, never secrets or request bodies.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// Writes one log line: `{"ts_ms":…,"event":…, …fields}`.
pub fn log(event: &str, fields: Value) {
    let mut line = Map::new();
    let ts_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    line.insert("ts_ms".into(), Value::from(ts_ms));
    line.insert("event".into(), Value::from(event));
    if let Value::Object(f) = fields {
        line.extend(f);
    }
    let mut text = Value::Object(line).to_string();
    text.push('\n');
    // A log that cannot be written must not take the request down.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
