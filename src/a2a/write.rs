//! Writing a JSON value: serde_json's compact output, byte for byte, with strings copied in
//! runs. serde_json looks every byte of a string up in its escape table, which was 30 % of the
//! time to forward a 5 MiB image part (7 MiB of base64, where nothing needs escaping); here
//! 16 bytes at a time are checked together, and a run with nothing to escape is copied whole.
//!
//! Values reach this writer from the strict parser or the answer's parser, both of which bound
//! the nesting, so the recursion is bounded too.

use serde_json::{Map, Value};

/// `v` written into a buffer of `hint` bytes to start with (the size of what it was parsed
/// from, bytes already held: no regrowing and copying on the way).
pub fn to_vec_sized(v: &Value, hint: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(hint.max(128));
    value(&mut out, v);
    out
}

/// `value` as serde_json's `to_writer` writes it (compact), appended to `out`.
pub fn value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // serde_json's own number formatting (itoa, ryu); writing to a Vec cannot fail.
        Value::Number(n) => {
            let _ = serde_json::to_writer(&mut *out, n);
        }
        Value::String(s) => string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                self::value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => object(out, map),
    }
}

/// An object, members in the map's order.
pub fn object(out: &mut Vec<u8>, map: &Map<String, Value>) {
    out.push(b'{');
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, k);
        out.push(b':');
        value(out, v);
    }
    out.push(b'}');
}

/// Whether a byte is written escaped: controls, `"` and `\` (as serde_json does; `/` and
/// DEL are not).
/// Whether byte `b` of a string needs an escape in JSON (`"`, `\\`, control characters).
pub fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// A string, quoted and escaped.
pub fn string(out: &mut Vec<u8>, s: &str) {
    const CHUNK: usize = 16;
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        if let Some(chunk) = bytes.get(i..i + CHUNK) {
            // No short circuit: the compiler checks the 16 bytes side by side.
            if !chunk.iter().fold(false, |any, &b| any | needs_escape(b)) {
                i += CHUNK;
                continue;
            }
        }
        let b = bytes[i];
        if needs_escape(b) {
            out.extend_from_slice(&bytes[start..i]);
            escape(out, b);
            start = i + 1;
        }
        i += 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

fn escape(out: &mut Vec<u8>, b: u8) {
    out.extend_from_slice(Escape::of(b).as_str().as_bytes());
}

/// The JSON escape of a byte that [`needs_escape`]: `\"`, `\\`, `\n`, ... or `\u00XX`
/// (serde_json's spelling). Shared by this writer and the log lines' (`telemetry::format`).
pub struct Escape {
    bytes: [u8; 6],
    len: u8,
}

impl Escape {
    pub fn of(b: u8) -> Escape {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let short = |c: u8| Escape {
            bytes: [b'\\', c, 0, 0, 0, 0],
            len: 2,
        };
        match b {
            b'"' => short(b'"'),
            b'\\' => short(b'\\'),
            0x08 => short(b'b'),
            0x09 => short(b't'),
            0x0a => short(b'n'),
            0x0c => short(b'f'),
            0x0d => short(b'r'),
            _ => Escape {
                bytes: [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xf)],
                ],
                len: 6,
            },
        }
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII is ever written into `bytes`.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ours(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        value(&mut out, v);
        out
    }

    /// Byte for byte what serde_json writes, for every kind of value and every byte a string
    /// may hold at every offset around the 16-byte chunks.
    #[test]
    fn writes_what_serde_json_writes() {
        let mut values = vec![
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-17),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1.5),
            json!(-0.0),
            json!(1e300),
            json!(2.2250738585072014e-308),
            json!(""),
            json!([]),
            json!({}),
            json!({"a": [1, {"b": null, "c": "d\"e"}], "": "", "\u{1}": "\u{7f}"}),
            json!(["é", "日本語", "🦀", "/", "\\/", "\u{2028}\u{2029}", "\u{0}"]),
        ];
        for b in 0u8..0x80 {
            let c = char::from(b);
            for at in [0usize, 1, 14, 15, 16, 17, 31, 32, 33, 47] {
                let mut s = "x".repeat(48);
                s.insert(at, c);
                values.push(json!(s));
                values.push(json!({ s.clone(): s }));
            }
            values.push(json!(c.to_string().repeat(33)));
        }
        let long = "QUJD".repeat(1 << 16);
        values.push(json!({"raw": long, "mediaType": "image/png"}));
        for v in &values {
            let theirs = serde_json::to_vec(v).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&ours(v)),
                String::from_utf8_lossy(&theirs),
                "{v}"
            );
        }
    }
}
