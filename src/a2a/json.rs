//! Strict JSON: the one parser for request bodies. Besides RFC 8259 syntax (serde_json:
//! UTF-8, no lone surrogates, nothing after the value) it refuses duplicate object keys at any
//! depth and nesting beyond a bound, so no two parsers (the edge's and an agent's) can read the
//! same bytes differently.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

use crate::reason::{self, Reason};

/// Nesting bound of request bodies (objects and arrays).
pub const MAX_DEPTH: usize = 64;

/// Why bytes were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonError {
    /// Not JSON (syntax, encoding, or trailing bytes).
    Syntax,
    /// An object has the same key twice.
    DuplicateKey,
    /// Nested deeper than allowed.
    TooDeep,
}

impl JsonError {
    pub fn reason(self) -> Reason {
        match self {
            JsonError::Syntax => reason::JSON_SYNTAX,
            JsonError::DuplicateKey => reason::JSON_DUPLICATE_KEY,
            JsonError::TooDeep => reason::JSON_TOO_DEEP,
        }
    }
}

/// Parses one JSON value from `bytes` under the strict rules.
pub fn parse_strict(bytes: &[u8], max_depth: usize) -> Result<Value, JsonError> {
    let failure = Cell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let seed = Strict {
        depth: 0,
        max_depth,
        failure: &failure,
    };
    let value = seed
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|_| failure.get().unwrap_or(JsonError::Syntax))?;
    Ok(value)
}

#[derive(Clone, Copy)]
struct Strict<'a> {
    depth: usize,
    max_depth: usize,
    failure: &'a Cell<Option<JsonError>>,
}

impl Strict<'_> {
    fn fail<E: de::Error>(&self, kind: JsonError) -> E {
        self.failure.set(Some(kind));
        E::custom(match kind {
            JsonError::DuplicateKey => "duplicate key",
            JsonError::TooDeep => "nested too deep",
            JsonError::Syntax => "syntax",
        })
    }

    fn deeper<E: de::Error>(&self) -> Result<Self, E> {
        if self.depth >= self.max_depth {
            return Err(self.fail(JsonError::TooDeep));
        }
        Ok(Strict {
            depth: self.depth + 1,
            ..*self
        })
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| self.fail(JsonError::Syntax))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.deeper()?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(inner)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.deeper()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // One lookup per key (the map hashes every key it is asked about).
            match out.entry(key) {
                Entry::Occupied(_) => return Err(self.fail(JsonError::DuplicateKey)),
                Entry::Vacant(slot) => {
                    slot.insert(map.next_value_seed(inner)?);
                }
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_table() {
        let deep_ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        let deep_bad = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let deep_obj = format!(
            "{}1{}",
            r#"{"a":"#.repeat(MAX_DEPTH + 1),
            "}".repeat(MAX_DEPTH + 1)
        );
        let cases: Vec<(&[u8], Result<(), JsonError>)> = vec![
            (br#"{"a":1,"b":[1,2,{"c":null}]}"#, Ok(())),
            (b" {} \n", Ok(())),
            (br#"{"a":1,"a":2}"#, Err(JsonError::DuplicateKey)),
            (br#"{"a":{"b":1,"b":1}}"#, Err(JsonError::DuplicateKey)),
            (br#"[{"x":1},{"x":2,"x":3}]"#, Err(JsonError::DuplicateKey)),
            // The same key spelled with an escape is still the same key.
            (br#"{"a":1,"\u0061":2}"#, Err(JsonError::DuplicateKey)),
            (br#"{"a":1} {"a":1}"#, Err(JsonError::Syntax)),
            (br#"{"a":1}x"#, Err(JsonError::Syntax)),
            (b"{\"a\":\"\xff\"}", Err(JsonError::Syntax)),
            (br#"{"a":"\ud800"}"#, Err(JsonError::Syntax)),
            (br#"{"a":NaN}"#, Err(JsonError::Syntax)),
            (br#"{'a':1}"#, Err(JsonError::Syntax)),
            (br#"{"a":1,}"#, Err(JsonError::Syntax)),
            (b"", Err(JsonError::Syntax)),
            (b"\xef\xbb\xbf{}", Err(JsonError::Syntax)),
            (deep_ok.as_bytes(), Ok(())),
            (deep_bad.as_bytes(), Err(JsonError::TooDeep)),
            (deep_obj.as_bytes(), Err(JsonError::TooDeep)),
        ];
        for (bytes, want) in cases {
            let got = parse_strict(bytes, MAX_DEPTH).map(|_| ());
            assert_eq!(got, want, "{}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn accepted_values_round_trip() {
        let v = parse_strict(
            br#"{"n":1.5e3,"i":-7,"u":18446744073709551615,"s":"\u00e9\n"}"#,
            8,
        )
        .unwrap();
        let again = parse_strict(v.to_string().as_bytes(), 8).unwrap();
        assert_eq!(v, again);
    }
}
