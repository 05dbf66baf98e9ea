//! Typed access to JSON-RPC params: each getter checks one field and yields the sanitized
//! value; [`Fields::finish`] returns only the fields that were checked, so unknown fields never
//! reach an agent.
//!
//! | reason | when |
//! |---|---|
//! | `params.missing` | a required field is absent |
//! | `params.type` | a field has the wrong JSON type |
//! | `id.invalid` | a task, context or push-config id is not 1–128 of `[A-Za-z0-9_.:-]`; a tenant is not 1–128 characters without control characters |
//! | `int.range` | an integer is out of its range (`historyLength` ≥ 0, `pageSize` 1–100, ...) |
//! | `string.invalid` | a string is empty, too long, or holds control characters |

use serde_json::{Map, Value};

use crate::a2a::RpcError;
use crate::reason::{self, Reason};

/// Longest task, context or push-config id (as iac-code).
pub const MAX_ID_LEN: usize = 128;

/// Whether `s` is an A2A id as iac-code accepts it: 1–128 of `[A-Za-z0-9_.:-]`.
pub fn is_valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ID_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

pub(crate) fn invalid(message: impl Into<String>, reason: Reason) -> RpcError {
    RpcError::invalid_params(message, reason)
}

fn missing(path: &str, key: &str) -> RpcError {
    invalid(format!("{path}.{key} is required"), reason::PARAMS_MISSING)
}

/// How many taken keys a [`Fields`] keeps for reuse.
const SPARE_KEYS: usize = 4;

/// The most fields any object checked here has in A2A 1.0 (`Message` has 8, `SendMessageRequest`
/// 4): the output's room.
const MOST_FIELDS: usize = 16;

/// A params object being checked: fields move from `src` to `out` as they pass.
pub struct Fields {
    src: Map<String, Value>,
    out: Map<String, Value>,
    /// The last keys taken from `src`, for `put` to move into `out` instead of allocating
    /// them again (a getter puts what it took at once; a few are kept for the callers that
    /// check a field before putting it).
    spare: [Option<String>; SPARE_KEYS],
    /// Where the next taken key goes in `spare` (the oldest is dropped).
    next_spare: usize,
    /// The JSON path of this object, for messages (`params.message`).
    path: &'static str,
}

impl Fields {
    /// The object `src` at `path`, its proto field names put in JSON names first
    /// ([`super::names`]; both spellings of one field: `params.duplicate_field`).
    pub fn new(mut src: Map<String, Value>, path: &'static str) -> Result<Fields, RpcError> {
        super::names::to_json_names(&mut src, path)?;
        // Only the fields of the object's message pass (a dozen at most): room for those, not
        // for every key the caller sent (a million unknown keys would have reserved about
        // 120 MB here for nothing).
        let out = Map::with_capacity(src.len().min(MOST_FIELDS));
        Ok(Fields {
            src,
            out,
            spare: Default::default(),
            next_spare: 0,
            path,
        })
    }

    /// The object as far as it was checked; unchecked fields are dropped.
    pub fn finish(self) -> Map<String, Value> {
        self.out
    }

    /// Puts a checked field into the output, under the key the caller sent when it was taken
    /// (no new allocation for it).
    pub fn put(&mut self, key: &str, v: Value) {
        let spare = self
            .spare
            .iter_mut()
            .find(|k| k.as_deref() == Some(key))
            .and_then(Option::take);
        let key = spare.unwrap_or_else(|| key.to_string());
        self.out.insert(key, v);
    }

    fn missing(&self, key: &str) -> RpcError {
        missing(self.path, key)
    }

    fn wrong_type(&self, key: &str, what: &str) -> RpcError {
        invalid(
            format!("{}.{key} must be {what}", self.path),
            reason::PARAMS_TYPE,
        )
    }

    /// Removes a field for the caller to check (no copy to the output).
    pub fn take(&mut self, key: &str) -> Option<Value> {
        let (key, v) = self.src.remove_entry(key)?;
        self.spare[self.next_spare % SPARE_KEYS] = Some(key);
        self.next_spare = self.next_spare.wrapping_add(1);
        match v {
            // ProtoJSON treats an explicit null like an absent field.
            Value::Null => None,
            v => Some(v),
        }
    }

    pub fn take_required(&mut self, key: &str) -> Result<Value, RpcError> {
        self.take(key).ok_or_else(|| self.missing(key))
    }

    pub fn object(&mut self, key: &str) -> Result<Option<Map<String, Value>>, RpcError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(_) => Err(self.wrong_type(key, "an object")),
        }
    }

    pub fn required_object(&mut self, key: &str) -> Result<Map<String, Value>, RpcError> {
        self.object(key)?.ok_or_else(|| self.missing(key))
    }

    /// Drops `key` when it holds its type's ProtoJSON default (`""` or `0`), which means
    /// absent for a field without presence: a client that writes default values is read as
    /// one that leaves them out.
    pub fn drop_default(&mut self, key: &str) {
        let default = match self.src.get(key) {
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Number(n)) => n.as_f64() == Some(0.0),
            _ => false,
        };
        if default {
            self.take(key);
        }
    }

    /// Drops `key` when it holds `""`: the ProtoJSON default of a string field without
    /// presence, which means absent (a number there stays, to be refused as no string).
    pub fn drop_empty(&mut self, key: &str) {
        if self.src.get(key).and_then(Value::as_str) == Some("") {
            self.take(key);
        }
    }

    /// An optional id field, moved to the output when present (and valid).
    pub fn id(&mut self, key: &str) -> Result<Option<&str>, RpcError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(s)) if is_valid_id(&s) => {
                self.put(key, Value::String(s));
                Ok(self.out.get(key).and_then(Value::as_str))
            }
            Some(_) => Err(invalid(
                format!("{}.{key} must be 1-{MAX_ID_LEN} characters of letters, digits, '_', '.', ':' or '-'", self.path),
                reason::ID_INVALID,
            )),
        }
    }

    /// An optional tenant (the proto3 `tenant`): its empty string is ProtoJSON's default, that
    /// is absent (dropped, not forwarded); else a tenant name as the policy's may be (1-128
    /// characters, no control character), which the gate holds to the caller's own.
    pub fn tenant(&mut self, key: &str) -> Result<Option<&str>, RpcError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) if crate::auth::attributes::valid_tenant(&s) => {
                self.put(key, Value::String(s));
                Ok(self.out.get(key).and_then(Value::as_str))
            }
            Some(_) => Err(invalid(
                format!(
                    "{}.{key} must be 1-128 characters without control characters",
                    self.path
                ),
                reason::ID_INVALID,
            )),
        }
    }

    pub fn required_id(&mut self, key: &str) -> Result<&str, RpcError> {
        if matches!(self.src.get(key), None | Some(Value::Null)) {
            return Err(self.missing(key));
        }
        // Present and not null: `id` moves it or refuses it.
        let path = self.path;
        self.id(key)?.ok_or_else(|| missing(path, key))
    }

    /// An optional integer in `range`, copied to the output as a JSON number. As ProtoJSON
    /// parsers do, integral floats (`10.0`) and decimal strings (`"10"`, `"-3"`: at most 20
    /// characters, digits only after an optional `-`) are accepted too.
    pub fn int(
        &mut self,
        key: &str,
        range: std::ops::RangeInclusive<i64>,
    ) -> Result<Option<i64>, RpcError> {
        let Some(v) = self.take(key) else {
            return Ok(None);
        };
        let n = match &v {
            Value::Number(n) => n.as_i64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map(|f| f as i64)
            }),
            Value::String(t)
                if t.len() <= 20
                    && !t.is_empty()
                    && t.strip_prefix('-')
                        .unwrap_or(t)
                        .bytes()
                        .all(|b| b.is_ascii_digit())
                    && t != "-" =>
            {
                // Too many digits for i64: out of any range the edge checks.
                Some(t.parse::<i64>().unwrap_or(i64::MAX))
            }
            _ => None,
        };
        match n {
            Some(n) if range.contains(&n) => {
                self.put(key, Value::from(n));
                Ok(Some(n))
            }
            Some(_) => Err(invalid(
                format!(
                    "{}.{key} must be between {} and {}",
                    self.path,
                    range.start(),
                    range.end()
                ),
                reason::INT_RANGE,
            )),
            None => Err(self.wrong_type(key, "an integer")),
        }
    }

    pub fn bool(&mut self, key: &str) -> Result<Option<bool>, RpcError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => {
                self.put(key, Value::Bool(b));
                Ok(Some(b))
            }
            Some(_) => Err(self.wrong_type(key, "a boolean")),
        }
    }

    /// An optional string of 1..=max bytes without control characters, moved to the output.
    pub fn string(&mut self, key: &str, max: usize) -> Result<Option<&str>, RpcError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(s)) => {
                if s.is_empty() || s.len() > max || s.chars().any(char::is_control) {
                    return Err(invalid(
                        format!(
                            "{}.{key} must be 1-{max} bytes without control characters",
                            self.path
                        ),
                        reason::STRING_INVALID,
                    ));
                }
                self.put(key, Value::String(s));
                Ok(self.out.get(key).and_then(Value::as_str))
            }
            Some(_) => Err(self.wrong_type(key, "a string")),
        }
    }

    /// An optional array of strings (each as [`Fields::string`] would accept), at most `max_items`.
    pub fn strings(
        &mut self,
        key: &str,
        max_items: usize,
        max_len: usize,
        each: impl Fn(&str) -> bool,
    ) -> Result<(), RpcError> {
        let Some(v) = self.take(key) else {
            return Ok(());
        };
        let Value::Array(items) = v else {
            return Err(self.wrong_type(key, "an array of strings"));
        };
        if items.len() > max_items {
            return Err(invalid(
                format!("{}.{key} has more than {max_items} items", self.path),
                reason::PARAMS_TOO_MANY,
            ));
        }
        for item in &items {
            match item {
                Value::String(s)
                    if !s.is_empty()
                        && s.len() <= max_len
                        && !s.chars().any(char::is_control)
                        && each(s) => {}
                _ => {
                    return Err(invalid(
                        format!("{}.{key} holds an invalid item", self.path),
                        reason::PARAMS_TYPE,
                    ))
                }
            }
        }
        self.put(key, Value::Array(items));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn id_table() {
        let long = "a".repeat(MAX_ID_LEN);
        let too_long = "a".repeat(MAX_ID_LEN + 1);
        let ok = [
            "a",
            "task-1",
            "ctx_2.b:c",
            "550e8400-e29b-41d4-a716-446655440000",
            long.as_str(),
        ];
        let bad = [
            "",
            too_long.as_str(),
            "a/b",
            "../x",
            "a b",
            "a\u{0}b",
            "é",
            "ａ",
            "a\nb",
            "a%2Fb",
            "a\\b",
            "a?b",
            "a#b",
            "\u{200b}a",
            "a\u{2024}b",
        ];
        for s in ok {
            assert!(is_valid_id(s), "{s:?}");
        }
        for s in bad {
            assert!(!is_valid_id(s), "{s:?}");
        }
    }

    #[test]
    fn getters_copy_only_what_passed() {
        let src = json!({"id": "t1", "historyLength": 3.0, "junk": 1, "flag": true, "n": null});
        let Value::Object(m) = src else {
            unreachable!()
        };
        let mut f = Fields::new(m, "params").unwrap();
        assert_eq!(f.required_id("id").unwrap(), "t1");
        assert_eq!(
            f.int("historyLength", 0..=i32::MAX as i64).unwrap(),
            Some(3)
        );
        assert_eq!(f.bool("flag").unwrap(), Some(true));
        assert_eq!(f.int("n", 0..=1).unwrap(), None);
        // ProtoJSON's string form of an integer: forwarded as a number.
        let Value::Object(m) = json!({"pageSize": "7"}) else {
            unreachable!()
        };
        let mut g = Fields::new(m, "params").unwrap();
        assert_eq!(g.int("pageSize", 1..=100).unwrap(), Some(7));
        assert_eq!(Value::Object(g.finish()), json!({"pageSize": 7}));
        assert_eq!(
            Value::Object(f.finish()),
            json!({"id": "t1", "historyLength": 3, "flag": true})
        );
    }

    /// A key put long after it was taken (more than the spare keys taken since), a key put
    /// that was never taken, and one taken twice: the output holds each once, as named.
    #[test]
    fn keys_put_late_or_untaken_are_written_as_named() {
        let Value::Object(m) = json!({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6}) else {
            unreachable!()
        };
        let mut f = Fields::new(m, "params").unwrap();
        let a = f.take("a").unwrap();
        for k in ["b", "c", "d", "e", "f"] {
            let v = f.take(k).unwrap();
            f.put(k, v);
        }
        f.put("a", a);
        f.put("z", Value::Bool(true));
        assert!(f.take("a").is_none());
        f.put("b", Value::Null);
        assert_eq!(
            Value::Object(f.finish()),
            json!({"b": null, "c": 3, "d": 4, "e": 5, "f": 6, "a": 1, "z": true})
        );
    }

    #[test]
    fn getter_errors() {
        let cases: Vec<(Value, &str)> = vec![
            (json!({}), "params.missing"),
            (json!({"id": null}), "params.missing"),
            (json!({"id": 5}), "id.invalid"),
            (json!({"id": "a/b"}), "id.invalid"),
        ];
        for (v, reason) in cases {
            let Value::Object(m) = v.clone() else {
                unreachable!()
            };
            let e = Fields::new(m, "params")
                .unwrap()
                .required_id("id")
                .unwrap_err();
            assert_eq!(e.reason, reason, "{v}");
            assert_eq!(e.code, -32602);
        }
        let ints: Vec<(Value, &str)> = vec![
            (json!({"k": -1}), "int.range"),
            (json!({"k": 101}), "int.range"),
            (json!({"k": 1.5}), "params.type"),
            (json!({"k": "5.0"}), "params.type"),
            (json!({"k": " 5"}), "params.type"),
            (json!({"k": "0x5"}), "params.type"),
            (json!({"k": "-"}), "params.type"),
            (json!({"k": ""}), "params.type"),
            (json!({"k": "+5"}), "params.type"),
            (json!({"k": "-1"}), "int.range"),
            (json!({"k": "101"}), "int.range"),
            (json!({"k": "99999999999999999999"}), "int.range"),
            (json!({"k": 1e300}), "params.type"),
        ];
        for (v, reason) in ints {
            let Value::Object(m) = v.clone() else {
                unreachable!()
            };
            let e = Fields::new(m, "params")
                .unwrap()
                .int("k", 0..=100)
                .unwrap_err();
            assert_eq!(e.reason, reason, "{v}");
        }
    }
}
