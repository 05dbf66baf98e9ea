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

/// Nesting bound of the agents' answers the edge rebuilds (serde_json's own for its parser).
const ANSWER_MAX_DEPTH: usize = 128;

/// Most values (each scalar, array, object and object key) one JSON text may hold by default
/// (`a2a.max_json_values`). A parsed value costs 72 bytes and more where its text costs as
/// little as two (`0,`): without a bound a 32 MiB body of small values became a tree of about
/// 1 GiB. Measured (serde_json with `preserve_order`, which josekit turns on: objects are
/// `IndexMap`s), 1,048,576 values are a tree of 75 MB as array items, 108 MB as an object's
/// members (about 206 bytes each, counted as two: before keys were counted, 216 MB), 165 MB
/// as objects of one member and 189 MB as arrays of one item (the containers' own room).
pub const DEFAULT_MAX_VALUES: usize = 1 << 20;

/// Why bytes were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonError {
    /// Not JSON (syntax, encoding, or trailing bytes).
    Syntax,
    /// An object has the same key twice.
    DuplicateKey,
    /// Nested deeper than allowed.
    TooDeep,
    /// More values than allowed.
    TooManyValues,
}

impl JsonError {
    pub fn reason(self) -> Reason {
        match self {
            JsonError::Syntax => reason::JSON_SYNTAX,
            JsonError::DuplicateKey => reason::JSON_DUPLICATE_KEY,
            JsonError::TooDeep => reason::JSON_TOO_DEEP,
            JsonError::TooManyValues => reason::JSON_TOO_MANY_VALUES,
        }
    }
}

/// Parses one JSON value from `bytes` under the strict rules, at most
/// [`DEFAULT_MAX_VALUES`] values.
pub fn parse_strict(bytes: &[u8], max_depth: usize) -> Result<Value, JsonError> {
    parse_strict_within(bytes, max_depth, DEFAULT_MAX_VALUES)
}

/// [`parse_strict`] with at most `max_values` values.
pub fn parse_strict_within(
    bytes: &[u8],
    max_depth: usize,
    max_values: usize,
) -> Result<Value, JsonError> {
    parse(bytes, max_depth, max_values, false).map(|(v, _)| v)
}

/// [`parse_strict_within`], and how many values the tree holds (what its memory is reckoned
/// by).
pub fn parse_strict_counted(
    bytes: &[u8],
    max_depth: usize,
    max_values: usize,
) -> Result<(Value, usize), JsonError> {
    parse(bytes, max_depth, max_values, false)
}

/// An agent's answer: RFC 8259 as serde_json reads it (a key given twice keeps its last
/// value, as the answer's other readers do), nested at most 128 deep (serde_json's own
/// bound), at most `max_values` values.
pub fn parse_answer(bytes: &[u8], max_values: usize) -> Result<Value, JsonError> {
    parse_answer_counted(bytes, max_values).map(|(v, _)| v)
}

/// [`parse_answer`], and how many values the tree holds.
pub fn parse_answer_counted(bytes: &[u8], max_values: usize) -> Result<(Value, usize), JsonError> {
    parse(bytes, ANSWER_MAX_DEPTH, max_values, true)
}

/// How many values an agent's answer holds, counted and bounded as [`parse_answer`] counts
/// them, without building its tree: what tells an answer over `max_values` (or not JSON) from
/// one whose tree a budget stopped building.
pub fn count_answer(bytes: &[u8], max_values: usize) -> Result<usize, JsonError> {
    let failure = Cell::new(None);
    let left = Cell::new(max_values);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let seed = Counting(Strict {
        depth: 0,
        max_depth: ANSWER_MAX_DEPTH,
        failure: &failure,
        left: &left,
        last_key_wins: true,
    });
    seed.deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(|_| failure.get().unwrap_or(JsonError::Syntax))?;
    Ok(max_values - left.get())
}

fn parse(
    bytes: &[u8],
    max_depth: usize,
    max_values: usize,
    last_key_wins: bool,
) -> Result<(Value, usize), JsonError> {
    let failure = Cell::new(None);
    let left = Cell::new(max_values);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let seed = Strict {
        depth: 0,
        max_depth,
        failure: &failure,
        left: &left,
        last_key_wins,
    };
    let value = seed
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|_| failure.get().unwrap_or(JsonError::Syntax))?;
    Ok((value, max_values - left.get()))
}

#[derive(Clone, Copy)]
struct Strict<'a> {
    depth: usize,
    max_depth: usize,
    failure: &'a Cell<Option<JsonError>>,
    /// Values the text may still hold.
    left: &'a Cell<usize>,
    /// An answer's duplicate key keeps its last value instead of refusing the text.
    last_key_wins: bool,
}

impl Strict<'_> {
    fn fail<E: de::Error>(&self, kind: JsonError) -> E {
        self.failure.set(Some(kind));
        E::custom(match kind {
            JsonError::DuplicateKey => "duplicate key",
            JsonError::TooDeep => "nested too deep",
            JsonError::TooManyValues => "too many values",
            JsonError::Syntax => "syntax",
        })
    }

    /// Counts one value.
    fn count<E: de::Error>(&self) -> Result<(), E> {
        match self.left.get().checked_sub(1) {
            Some(n) => {
                self.left.set(n);
                Ok(())
            }
            None => Err(self.fail(JsonError::TooManyValues)),
        }
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
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.count()?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.count()?;
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.count()?;
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.count()?;
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| self.fail(JsonError::Syntax))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.count()?;
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.count()?;
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.count()?;
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.count()?;
        let inner = self.deeper()?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(inner)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.count()?;
        let inner = self.deeper()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // A key is counted too: an object's member costs about three times an array's
            // item (see [`DEFAULT_MAX_VALUES`]).
            self.count()?;
            // One lookup per key (the map hashes every key it is asked about).
            match out.entry(key) {
                Entry::Occupied(mut slot) if self.last_key_wins => {
                    slot.insert(map.next_value_seed(inner)?);
                }
                Entry::Occupied(_) => return Err(self.fail(JsonError::DuplicateKey)),
                Entry::Vacant(slot) => {
                    slot.insert(map.next_value_seed(inner)?);
                }
            }
        }
        Ok(Value::Object(out))
    }
}

/// [`Strict`]'s counting and nesting, nothing kept.
#[derive(Clone, Copy)]
struct Counting<'a>(Strict<'a>);

impl<'de> DeserializeSeed<'de> for Counting<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counting<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.0.count()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.0.count()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.0.count()
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.0.count()?;
        match v.is_finite() {
            true => Ok(()),
            false => Err(self.0.fail(JsonError::Syntax)),
        }
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.0.count()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.count()
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.count()?;
        let inner = Counting(self.0.deeper()?);
        while seq.next_element_seed(inner)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.count()?;
        let inner = Counting(self.0.deeper()?);
        while map.next_key::<de::IgnoredAny>()?.is_some() {
            self.0.count()?;
            map.next_value_seed(inner)?;
        }
        Ok(())
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

    /// Values are counted (every scalar, array, object and object key), refused past the
    /// bound whatever their shape; an answer keeps a key's last value, a request refuses it.
    #[test]
    fn values_are_counted_and_bounded() {
        let zeros = |n: usize| format!("[{}]", vec!["0"; n].join(","));
        let keys = |n: usize| {
            let members: Vec<String> = (0..n).map(|i| format!(r#""k{i}":0"#)).collect();
            format!("{{{}}}", members.join(","))
        };
        // (text, values in it)
        let rows: Vec<(String, usize)> = vec![
            ("0".into(), 1),
            ("[]".into(), 1),
            ("{}".into(), 1),
            (zeros(9), 10),
            (r#"{"a":[1,{"b":null}],"c":"s"}"#.into(), 9),
            (r#"[[[[[]]]]]"#.into(), 5),
            (r#"{"k":true,"l":1.5,"m":-1,"n":"é"}"#.into(), 9),
            (r#"{"":{"":{"":{}}}}"#.into(), 7),
            (keys(9), 19),
        ];
        for (text, n) in &rows {
            let b = text.as_bytes();
            assert!(parse_strict_within(b, MAX_DEPTH, *n).is_ok(), "{text}");
            assert_eq!(
                parse_strict_within(b, MAX_DEPTH, n - 1),
                Err(JsonError::TooManyValues),
                "{text}"
            );
            assert!(parse_answer(b, *n).is_ok(), "{text}");
            assert_eq!(
                parse_answer(b, n - 1),
                Err(JsonError::TooManyValues),
                "{text}"
            );
            // Counted alike without a tree.
            assert_eq!(count_answer(b, *n), Ok(*n), "{text}");
            assert_eq!(count_answer(b, n + 5), Ok(*n), "{text}");
            assert_eq!(
                count_answer(b, n - 1),
                Err(JsonError::TooManyValues),
                "{text}"
            );
        }
        // What the tree parse refuses, the count refuses as well.
        let deep = format!("{}{}", "[".repeat(129), "]".repeat(129));
        let failures: [&[u8]; 6] = [
            b"[1,",
            b"{\"a\":\"\xff\"}",
            br#"{"a":"\ud800"}"#,
            b"1e400",
            b"[1] x",
            deep.as_bytes(),
        ];
        for text in failures {
            let tree = parse_answer(text, 1000).err();
            assert!(tree.is_some(), "{text:?}");
            assert_eq!(count_answer(text, 1000).err(), tree, "{text:?}");
        }
        // The default: a body of a million small values and more is refused early.
        let many = zeros(DEFAULT_MAX_VALUES);
        assert_eq!(
            parse_strict(many.as_bytes(), MAX_DEPTH),
            Err(JsonError::TooManyValues)
        );
        assert!(parse_strict(zeros(DEFAULT_MAX_VALUES - 1).as_bytes(), MAX_DEPTH).is_ok());
        // An object's members: each key counted with its value.
        let wide = keys(DEFAULT_MAX_VALUES / 2);
        assert_eq!(
            parse_strict(wide.as_bytes(), MAX_DEPTH),
            Err(JsonError::TooManyValues)
        );
        assert!(parse_strict(keys(DEFAULT_MAX_VALUES / 2 - 1).as_bytes(), MAX_DEPTH).is_ok());
        // Duplicate keys: refused in a request, the last kept in an answer.
        let dup = br#"{"a":1,"b":{"c":2,"c":3},"a":4}"#;
        assert_eq!(parse_strict(dup, MAX_DEPTH), Err(JsonError::DuplicateKey));
        let v = parse_answer(dup, 100).unwrap();
        assert_eq!(v, serde_json::from_slice::<Value>(dup).unwrap());
        assert_eq!(v["a"], 4);
        assert_eq!(v["b"]["c"], 3);
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
