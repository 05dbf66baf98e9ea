//! The bytes an Agent Card signature covers.
//!
//! The a2a-sdk (>= 1.1) and a2a-js sign the card as the SDK sees it, not as it was served:
//! the card is parsed into the `AgentCard` protobuf (unknown fields ignored, proto3 defaults
//! dropped), printed back as ProtoJSON, stripped of `signatures`, pruned of every `""`, `[]`,
//! `{}` and `null` at any depth (a container that becomes empty goes too; `false` and `0`
//! stay), and serialized with RFC 8785 (JCS). A verifier that canonicalizes the raw served
//! JSON instead disagrees with both SDKs whenever the card carries legacy 0.3 fields,
//! empty-scope requirements or unknown members (reference/a2a-wire.md §6).
//!
//! The proto-field filter is a table of the `AgentCard` message tree (proto v1.0.1, in
//! `canonical/schema.rs`). What the protobuf parser refuses (a string where a message belongs,
//! two members of a oneof, a field spelled both `camelCase` and `snake_case`, extension params
//! nested past its recursion limit) has no canonical form here either. Checked byte for byte
//! against a2a-sdk 1.3.0 (see `verify/sdk_vectors.rs`).

mod schema;

use std::fmt;

use serde_json::{Map, Value};

use schema::{Kind, Message, AGENT_CARD};

/// Maximum container nesting [`jcs`] accepts (the SDK's `_jcs.MAX_DEPTH`); every recursion here
/// is bounded by it or by the protobuf limit on extension params.
pub const MAX_DEPTH: usize = 128;

/// Why a card (or a JSON value) has no canonical form, or why signing or key handling failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardError(pub String);

impl fmt::Display for CardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CardError {}

pub(crate) fn err(msg: impl Into<String>) -> CardError {
    CardError(msg.into())
}

/// The a2a-sdk (>= 1.1) canonical form of a card: keep only `AgentCard` proto fields at every
/// level (extension `params` is a `Struct`: kept as is, then pruned inside), drop `signatures`,
/// prune `""`, `[]`, `{}` and `null` recursively, then RFC 8785 JCS.
///
/// A card that prunes to nothing canonicalizes to `null`, as the SDK's does.
pub fn canonical_card(card: &Value) -> Result<Vec<u8>, CardError> {
    let Value::Object(card) = card else {
        return Err(err("the card is not a JSON object"));
    };
    let filtered = filter_message(card, &AGENT_CARD, 0)?;
    match prune(Value::Object(filtered), 0)? {
        Some(v) => jcs(&v),
        None => Ok(b"null".to_vec()),
    }
}

/// Puts every member of `card` that the `AgentCard` message tree knows into its ProtoJSON
/// (JSON) name, at every level, in place: `documentation_url` becomes `documentationUrl`,
/// `supported_interfaces[].protocol_binding` `supportedInterfaces[].protocolBinding`,
/// `capabilities.extended_agent_card` `capabilities.extendedAgentCard`, and so on, by the
/// table the canonical form reads (each field's proto name and JSON name). ProtoJSON parsers
/// (the SDKs', [`canonical_card`]) accept both spellings; rewritten into one, every rule that
/// reads a card looks at one spelling only. A member given by both names in one object is
/// refused, as the protobuf parser refuses it (two spellings are a parser-differential
/// hazard), even when one is `null`. Unknown members, map keys (scheme names, scopes) and
/// extension `params` (a free-form `Struct`) are left as they are, and so is a member of the
/// wrong type (the schema check's business). Renamed members keep their places (the served
/// bytes are those of the card by JSON names). On refusal the card may be left partly renamed
/// (it is not to be used). The walk follows the message tree, which holds no cycle, so its
/// depth is the schema's (at most 6 messages), whatever the card's.
pub fn to_json_names(card: &mut Value) -> Result<(), CardError> {
    match card {
        Value::Object(obj) => rename_message(obj, &AGENT_CARD, "card"),
        _ => Ok(()),
    }
}

/// Removes every member the `AgentCard` message tree does not know, at every level (of a card
/// in JSON names: [`to_json_names`] first), except the top-level members in `keep`: what is
/// served is what its signatures cover (an unknown member is outside the canonical form, so
/// anyone between the edge and a verifier could change it, and it may carry what the agent
/// should not publish, such as an internal address). Map keys (scheme names) and extension
/// `params` (a free-form `Struct`, signed) are kept as they are.
/// Returns where each dropped member was (`x-vendor`, `skills[0].extra`,
/// `securitySchemes.bearer.x`).
pub fn drop_unknown(card: &mut Map<String, Value>, keep: &[&str]) -> Vec<String> {
    let mut dropped = Vec::new();
    drop_unknown_in(card, &AGENT_CARD, keep, "", &mut dropped);
    dropped
}

/// The members [`drop_unknown`] would drop from `card`, where each is.
pub fn unknown_members(card: &Map<String, Value>, keep: &[&str]) -> Vec<String> {
    drop_unknown(&mut card.clone(), keep)
}

fn drop_unknown_in(
    obj: &mut Map<String, Value>,
    msg: &'static Message,
    keep: &[&str],
    path: &str,
    dropped: &mut Vec<String>,
) {
    let at = |k: &str| match path {
        "" => k.to_owned(),
        p => format!("{p}.{k}"),
    };
    obj.retain(|k, _| {
        let known = keep.contains(&k.as_str()) || msg.fields.iter().any(|f| f.json == k);
        if !known {
            dropped.push(at(k));
        }
        known
    });
    for field in msg.fields {
        let Some(value) = obj.get_mut(field.json) else {
            continue;
        };
        let here = at(field.json);
        match (field.kind, value) {
            (Kind::Msg(m), Value::Object(o)) => drop_unknown_in(o, m, &[], &here, dropped),
            (Kind::RepMsg(m), Value::Array(items)) => {
                for (i, item) in items.iter_mut().enumerate() {
                    if let Value::Object(o) = item {
                        drop_unknown_in(o, m, &[], &format!("{here}[{i}]"), dropped);
                    }
                }
            }
            (Kind::MapMsg(m), Value::Object(entries)) => {
                for (name, entry) in entries.iter_mut() {
                    if let Value::Object(o) = entry {
                        drop_unknown_in(o, m, &[], &format!("{here}.{name}"), dropped);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Renames the members of `obj` (the object at `path`) named by the proto name of a
/// `(proto, json)` pair to its JSON name, in place (each keeps its position among the others);
/// an object with both names of one pair is refused and left as it was.
pub(crate) fn rename_members<I>(
    obj: &mut Map<String, Value>,
    names: I,
    path: &str,
) -> Result<(), CardError>
where
    I: Iterator<Item = (&'static str, &'static str)> + Clone,
{
    // Most objects use JSON names only: nothing to rename unless a key has an underscore.
    if !obj.keys().any(|k| k.contains('_')) {
        return Ok(());
    }
    let mut renamed = false;
    for (proto, json) in names.clone().filter(|(p, j)| p != j) {
        if obj.contains_key(proto) {
            if obj.contains_key(json) {
                return Err(err(format!(
                    "{path}.{json} is given twice (as {json} and as {proto})"
                )));
            }
            renamed = true;
        }
    }
    if renamed {
        for (key, value) in std::mem::take(obj) {
            let key = match names.clone().find(|(p, _)| *p == key) {
                Some((_, json)) => json.to_string(),
                None => key,
            };
            obj.insert(key, value);
        }
    }
    Ok(())
}

fn rename_message(
    obj: &mut Map<String, Value>,
    msg: &'static Message,
    path: &str,
) -> Result<(), CardError> {
    rename_members(obj, msg.fields.iter().map(|f| (f.proto, f.json)), path)?;
    for field in msg.fields {
        let Some(value) = obj.get_mut(field.json) else {
            continue;
        };
        match (field.kind, value) {
            (Kind::Msg(m), Value::Object(o)) => {
                rename_message(o, m, &format!("{path}.{}", field.json))?;
            }
            (Kind::RepMsg(m), Value::Array(items)) => {
                for (i, item) in items.iter_mut().enumerate() {
                    if let Value::Object(o) = item {
                        rename_message(o, m, &format!("{path}.{}[{i}]", field.json))?;
                    }
                }
            }
            (Kind::MapMsg(m), Value::Object(entries)) => {
                for (key, item) in entries.iter_mut() {
                    if let Value::Object(o) = item {
                        rename_message(o, m, &format!("{path}.{}.{key}", field.json))?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Plain RFC 8785: object members sorted by their UTF-16 code units, numbers written as
/// ECMAScript writes IEEE 754 doubles, strings with only the mandatory escapes, no whitespace.
/// Nesting deeper than [`MAX_DEPTH`] is an error.
pub fn jcs(value: &Value) -> Result<Vec<u8>, CardError> {
    let mut out = Vec::with_capacity(256);
    write_value(value, &mut out, 0)?;
    Ok(out)
}

/// Keeps the fields of `msg` found in `obj`, converted as the protobuf parser would. `depth`
/// counts the containers around `obj`.
fn filter_message(
    obj: &Map<String, Value>,
    msg: &Message,
    depth: usize,
) -> Result<Map<String, Value>, CardError> {
    if depth > MAX_DEPTH {
        return Err(err("the card nests too deeply"));
    }
    let mut out = Map::new();
    let mut seen = vec![false; msg.fields.len()];
    let mut oneof_set = false;
    for (name, value) in obj {
        // Unknown members are ignored, as `ParseDict(..., ignore_unknown_fields=True)` does.
        let Some(i) = msg
            .fields
            .iter()
            .position(|f| f.json == name.as_str() || f.proto == name.as_str())
        else {
            continue;
        };
        let field = &msg.fields[i];
        if std::mem::replace(&mut seen[i], true) {
            return Err(err(format!("the field {} is given twice", field.json)));
        }
        if value.is_null() {
            // ProtoJSON: null clears a field.
            continue;
        }
        if msg.oneof && std::mem::replace(&mut oneof_set, true) {
            return Err(err(format!(
                "{} sets more than one member of a oneof",
                msg.name
            )));
        }
        if let Some(v) = convert(value, field.kind, field.json, depth + 1)? {
            out.insert(field.json.to_string(), v);
        }
    }
    Ok(out)
}

/// One field value as the protobuf parser reads it and `MessageToDict` prints it back.
/// `None`: proto3 omits it (a non-`optional` bool set to false).
fn convert(
    value: &Value,
    kind: Kind,
    name: &str,
    depth: usize,
) -> Result<Option<Value>, CardError> {
    let wrong = || err(format!("the field {name} has the wrong type"));
    Ok(match kind {
        Kind::Str => Some(Value::String(value.as_str().ok_or_else(wrong)?.to_string())),
        Kind::Bool => match value {
            Value::Bool(true) => Some(Value::Bool(true)),
            Value::Bool(false) => None,
            _ => return Err(wrong()),
        },
        Kind::OptBool => Some(Value::Bool(value.as_bool().ok_or_else(wrong)?)),
        Kind::Msg(m) => {
            let obj = value.as_object().ok_or_else(wrong)?;
            Some(Value::Object(filter_message(obj, m, depth)?))
        }
        Kind::RepStr | Kind::RepMsg(_) => {
            let list = value.as_array().ok_or_else(wrong)?;
            let element = match kind {
                Kind::RepMsg(m) => Kind::Msg(m),
                _ => Kind::Str,
            };
            let mut out = Vec::with_capacity(list.len());
            for item in list {
                // A null element of a repeated field is a parse error, not a cleared field.
                if item.is_null() {
                    return Err(wrong());
                }
                out.extend(convert(item, element, name, depth + 1)?);
            }
            Some(Value::Array(out))
        }
        Kind::MapStr | Kind::MapMsg(_) => {
            let obj = value.as_object().ok_or_else(wrong)?;
            let element = match kind {
                Kind::MapMsg(m) => Kind::Msg(m),
                _ => Kind::Str,
            };
            let mut out = Map::new();
            for (key, item) in obj {
                if item.is_null() {
                    return Err(wrong());
                }
                if let Some(v) = convert(item, element, name, depth + 1)? {
                    out.insert(key.clone(), v);
                }
            }
            Some(Value::Object(out))
        }
        Kind::Struct => {
            if !value.is_object() {
                return Err(wrong());
            }
            check_struct_depth(value, PARAMS_PROTO_DEPTH)?;
            Some(value.clone())
        }
    })
}

/// The protobuf parser's recursion limit (`ParseDict(max_recursion_depth=100)`): every
/// message counts, and inside a `Struct` each JSON value is a `Value` message and each
/// container one more (`Struct` or `ListValue`). The SDK cannot parse a card past it, so such
/// a card has no canonical form (and is never signed: no SDK could verify it).
const PROTO_MAX_DEPTH: usize = 100;

/// Where `AgentExtension.params` sits: AgentCard → AgentCapabilities → AgentExtension → Struct.
const PARAMS_PROTO_DEPTH: usize = 4;

/// Checks a `Struct` or `ListValue` at protobuf message depth `depth`, and what it holds.
fn check_struct_depth(container: &Value, depth: usize) -> Result<(), CardError> {
    let too_deep = || err("extension params nest too deeply");
    if depth > PROTO_MAX_DEPTH {
        return Err(too_deep());
    }
    let children: Box<dyn Iterator<Item = &Value>> = match container {
        Value::Array(list) => Box::new(list.iter()),
        Value::Object(obj) => Box::new(obj.values()),
        _ => return Ok(()),
    };
    for child in children {
        // The child's `Value` message.
        if depth + 1 > PROTO_MAX_DEPTH {
            return Err(too_deep());
        }
        check_struct_depth(child, depth + 2)?;
    }
    Ok(())
}

/// The SDK's `_clean_empty`: drops `null`, `""`, `[]` and `{}` at any depth, including the
/// containers that become empty on the way. `false` and `0` are kept. `None`: nothing is left.
pub(crate) fn prune(value: Value, depth: usize) -> Result<Option<Value>, CardError> {
    if depth > MAX_DEPTH {
        return Err(err("the card nests too deeply"));
    }
    Ok(match value {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::Array(list) => {
            let mut out = Vec::with_capacity(list.len());
            for item in list {
                out.extend(prune(item, depth + 1)?);
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
        Value::Object(obj) => {
            let mut out = Map::new();
            for (key, item) in obj {
                if let Some(v) = prune(item, depth + 1)? {
                    out.insert(key, v);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        other => Some(other),
    })
}

fn write_value(value: &Value, out: &mut Vec<u8>, depth: usize) -> Result<(), CardError> {
    // The SDK counts the containers around a value: depth 0 is the top level.
    if depth > MAX_DEPTH {
        return Err(err(format!(
            "nesting exceeds the maximum depth of {MAX_DEPTH}"
        )));
    }
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => {
            let v = n
                .as_f64()
                .ok_or_else(|| err("a number is not an IEEE 754 double"))?;
            out.extend_from_slice(format_number(v)?.as_bytes());
        }
        // RFC 8785 §3.2.2.2: `"`, `\` and C0 controls escaped (short forms where JSON has
        // them), everything else literal UTF-8: exactly serde_json's escaping.
        Value::String(s) => crate::a2a::write::string(out, s),
        Value::Array(list) => {
            out.push(b'[');
            for (i, item) in list.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out, depth + 1)?;
            }
            out.push(b']');
        }
        Value::Object(obj) => {
            let mut members: Vec<(&String, &Value)> = obj.iter().collect();
            // RFC 8785 §3.2.3: UTF-16 code units, not code points (they differ above the BMP).
            members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push(b'{');
            for (i, (key, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                crate::a2a::write::string(out, key);
                out.push(b':');
                write_value(item, out, depth + 1)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// ECMA-262 `Number::toString` (7.1.12.1) for a finite double, as RFC 8785 §3.2.2.3 requires:
/// the shortest digits that round-trip (closest to the value, ties to even), plain notation
/// for 1e-7 <= |v| < 1e21, exponent notation with an explicit sign otherwise; -0 is `0`.
pub(crate) fn format_number(v: f64) -> Result<String, CardError> {
    if v == 0.0 {
        return Ok("0".to_string());
    }
    let (digits, n) = shortest_digits(v.abs())?;
    let k = digits.len() as i32;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        format!("{int}.{frac}")
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e_sign = if e < 0 { '-' } else { '+' };
        let (first, rest) = digits.split_at(1);
        if rest.is_empty() {
            format!("{first}e{e_sign}{}", e.abs())
        } else {
            format!("{first}.{rest}e{e_sign}{}", e.abs())
        }
    };
    Ok(format!("{}{body}", if v < 0.0 { "-" } else { "" }))
}

/// The shortest round-trip decimal digits of a positive finite `v` and the exponent `n` with
/// `v = 0.d1d2…dk × 10^n`. The digits come from serde_json's float printer (Ryū), which breaks
/// ties to even as ECMAScript does; std's `{:e}` does not always (1424953923781206.25 prints
/// as …206.3 where ECMAScript writes …206.2).
fn shortest_digits(v: f64) -> Result<(String, i32), CardError> {
    let bad = || err("a number has no JSON form");
    let printed = serde_json::Number::from_f64(v).ok_or_else(bad)?.to_string();
    let (mantissa, exp) = match printed.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().map_err(|_| bad())?),
        None => (printed.as_str(), 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = format!("{int}{frac}");
    if all.is_empty() || !all.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let leading = all.bytes().take_while(|b| *b == b'0').count();
    let digits = all[leading..].trim_end_matches('0').to_string();
    if digits.is_empty() {
        return Err(bad());
    }
    let n = int.len() as i32 - leading as i32 + exp;
    Ok((digits, n))
}

#[cfg(test)]
pub(crate) mod tests;
