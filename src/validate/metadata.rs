//! Caller metadata that steers the agent's credentials or outbound traffic.
//!
//! iac-code honours `metadata.iac_code.iac_code_api_key` (the LLM key), `iac_code_model`,
//! `llm_headers` (arbitrary headers on its outbound LLM requests) and the
//! `alibaba_cloud_*` credentials, from `params.metadata` or else `params.message.metadata`,
//! and echoes most of them back in task history. The policy (`[a2a.metadata]`) names the key
//! paths a caller may not set (`denied_keys`) and per-principal exceptions (`allowed_for`).
//!
//! | reason | when |
//! |---|---|
//! | `metadata.type` | the metadata is neither an object nor `null` |
//! | `metadata.denied_key` | a key path matching a denied pattern is present (whatever its value, `null` included) and no exception of the principal covers it |
//! | `metadata.too_deep` | objects nested deeper than [`MAX_DEPTH`] levels |
//! | `metadata.too_many_keys` | more than [`MAX_KEYS`] keys in one metadata object (all levels) |
//! | `metadata.key_too_long` | a key longer than [`MAX_KEY_BYTES`] bytes |
//! | `metadata.dotted_workspace` | the workspace key `iac_code.cwd` spelled with a dotted key (`{"iac_code.cwd": …}`, `{"iac_code": {"cwd.x": …}}`): the workspace is checked only where the agent reads it, nested, so a flattening consumer must not find another one |
//!
//! Matching rules:
//! - A pattern is a dotted key path (`iac_code.llm_headers`); a `*` may only be the last
//!   character of the last segment and then matches any key starting with the text before it
//!   (`iac_code.alibaba_cloud_*`). Segments are compared exactly and case-sensitively, as the
//!   agent reads them: `iac_code.iac_code_api_key_hint` does not match `iac_code.iac_code_api_key`,
//!   nor does `IAC_CODE.iac_code_api_key`.
//! - A pattern covers the whole subtree under its path: `{"iac_code":{"llm_headers":{"X":"y"}}}`
//!   is denied by `iac_code.llm_headers`, and an exception covers its subtree too, so
//!   `allowed_for = { ops = ["iac_code.llm_headers.X-Trace"] }` lets `ops` send that one header
//!   while every other header stays denied. Technically: every leaf path (a value that is not a
//!   non-empty object) is checked; it is denied when a denied pattern matches one of its
//!   prefixes and no exception of the principal matches one of its prefixes.
//! - Keys containing a `.` are read as the path they spell, at any level:
//!   `{"iac_code.iac_code_api_key": x}` and `{"iac_code": {"llm_headers.Authorization": x}}` are
//!   denied like their nested forms, so a flattening consumer cannot be used to slip a key past
//!   the check. Empty segments are dropped (`"iac_code..iac_code_api_key"` matches too).
//! - Arrays are not descended: the agent reads these settings from objects only, so an array
//!   in place of an object is a value, not a container (`{"iac_code":[{"iac_code_api_key":x}]}`
//!   passes; `{"iac_code":{"llm_headers":[]}}` is denied, because the key is present).
//! - `null` metadata is the same as no metadata (ProtoJSON reads `null` as unset).
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::a2a::RpcError;
use crate::reason;

/// The path of the workspace key (`metadata.iac_code.cwd`), which the edge checks nested only.
const WORKSPACE_KEY: [&str; 2] = ["iac_code", "cwd"];

/// The deepest object nesting walked (the metadata object itself is level 1).
pub const MAX_DEPTH: usize = 32;
/// Most keys, at every level together, in one metadata object of a request.
pub const MAX_KEYS: usize = 4096;
/// Longest key of a request's metadata, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

/// One dotted key-path pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    /// As written in the policy, for messages.
    text: String,
    /// The segments; the last one without its `*` when `prefix_last`.
    segments: Vec<String>,
    /// The last segment ended with `*`: prefix match on it.
    prefix_last: bool,
}

impl Pattern {
    fn parse(text: &str) -> Result<Pattern, String> {
        if text.is_empty() {
            return Err("a metadata key pattern is empty".to_string());
        }
        if text.chars().any(char::is_control) {
            return Err("a metadata key pattern contains a control character".to_string());
        }
        let parts: Vec<&str> = text.split('.').collect();
        let last = parts.len() - 1;
        let mut segments = Vec::with_capacity(parts.len());
        let mut prefix_last = false;
        for (i, part) in parts.iter().enumerate() {
            if part.is_empty() {
                return Err(format!(
                    "metadata key pattern '{text}' has an empty segment"
                ));
            }
            match part.find('*') {
                None => segments.push((*part).to_string()),
                Some(pos) if i == last && pos == part.len() - 1 => {
                    prefix_last = true;
                    segments.push(part[..pos].to_string());
                }
                Some(_) => {
                    return Err(format!(
                        "metadata key pattern '{text}': '*' is allowed only as the last character"
                    ))
                }
            }
        }
        Ok(Pattern {
            text: text.to_string(),
            segments,
            prefix_last,
        })
    }

    /// Whether the pattern matches the first `segments.len()` segments of `path`.
    fn matches_prefix_of(&self, path: &[&str]) -> bool {
        if path.len() < self.segments.len() {
            return false;
        }
        let last = self.segments.len() - 1;
        self.segments
            .iter()
            .zip(path)
            .enumerate()
            .all(|(i, (want, got))| {
                if i == last && self.prefix_last {
                    got.starts_with(want.as_str())
                } else {
                    want == got
                }
            })
    }
}

/// Exceptions to the denied keys granted to a caller by authorization rules
/// (`metadata_allowed`): patterns as in `allowed_for`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exceptions(Vec<Pattern>);

impl Exceptions {
    /// Compiles the patterns (same syntax as `denied_keys`).
    pub fn parse(patterns: &[String]) -> Result<Exceptions, String> {
        patterns
            .iter()
            .map(|p| Pattern::parse(p))
            .collect::<Result<Vec<_>, _>>()
            .map(Exceptions)
    }

    /// The patterns as written.
    pub fn texts(&self) -> Vec<&str> {
        self.0.iter().map(|p| p.text.as_str()).collect()
    }

    fn covers(&self, leaf: &[&str]) -> bool {
        self.0.iter().any(|p| p.matches_prefix_of(leaf))
    }
}

/// The compiled `[a2a.metadata]` policy: denied key patterns and per-principal exceptions.
#[derive(Debug, Clone)]
pub struct MetadataPolicy {
    denied: Vec<Pattern>,
    allowed_for: BTreeMap<String, Vec<Pattern>>,
    /// Segments of the longest denied pattern.
    max_segments: usize,
}

impl MetadataPolicy {
    /// The default `denied_keys`: the keys through which a caller sets the agent's LLM key,
    /// model, outbound LLM headers and cloud credentials.
    pub fn default_denied() -> Vec<String> {
        [
            "iac_code.iac_code_api_key",
            "iac_code.llm_headers",
            "iac_code.iac_code_model",
            "iac_code.alibaba_cloud_*",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect()
    }

    /// Compiles the patterns. Patterns are dotted key paths; a `*` is allowed only as the last
    /// character of the last segment (prefix match on that segment). An invalid pattern or an
    /// empty principal name is an error (a message for the operator).
    pub fn new(
        denied: &[String],
        allowed_for: &BTreeMap<String, Vec<String>>,
    ) -> Result<MetadataPolicy, String> {
        let denied = denied
            .iter()
            .map(|p| Pattern::parse(p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut compiled = BTreeMap::new();
        for (principal, patterns) in allowed_for {
            if principal.is_empty() {
                return Err("metadata allowed_for has an empty principal name".to_string());
            }
            let patterns = patterns
                .iter()
                .map(|p| Pattern::parse(p))
                .collect::<Result<Vec<_>, _>>()?;
            compiled.insert(principal.clone(), patterns);
        }
        let max_segments = denied.iter().map(|p| p.segments.len()).max().unwrap_or(0);
        Ok(MetadataPolicy {
            denied,
            allowed_for: compiled,
            max_segments,
        })
    }

    /// The `allowed_for` exceptions of `principal`, as written.
    pub fn allowed_for(&self, principal: &str) -> Vec<&str> {
        self.allowed_for
            .get(principal)
            .map(|l| l.iter().map(|p| p.text.as_str()).collect())
            .unwrap_or_default()
    }

    /// The denied pattern that rejects `leaf` for `caller`, if any.
    fn denial(&self, leaf: &[&str], caller: &MetadataCaller) -> Option<&Pattern> {
        let denied = self.denied.iter().find(|p| p.matches_prefix_of(leaf))?;
        let excepted = self
            .allowed_for
            .get(caller.principal)
            .is_some_and(|allowed| allowed.iter().any(|p| p.matches_prefix_of(leaf)))
            || caller.granted.iter().any(|e| e.covers(leaf));
        if excepted {
            None
        } else {
            Some(denied)
        }
    }
}

/// Who sends metadata: the principal (for `allowed_for`) and the exceptions its
/// authorization grant adds (`metadata_allowed`).
#[derive(Debug, Clone, Copy)]
pub struct MetadataCaller<'a> {
    pub principal: &'a str,
    pub granted: &'a [std::sync::Arc<Exceptions>],
}

impl<'a> MetadataCaller<'a> {
    /// A caller with only the `allowed_for` exceptions of its name.
    pub fn named(principal: &'a str) -> MetadataCaller<'a> {
        MetadataCaller {
            principal,
            granted: &[],
        }
    }
}

/// Checks one metadata object (`params.metadata`, `params.message.metadata`, ...) for
/// `caller`. See the module documentation for the matching rules. The error names the
/// policy pattern that matched, never a value from the request.
pub fn check_metadata(
    metadata: &Value,
    caller: &MetadataCaller,
    policy: &MetadataPolicy,
) -> Result<(), RpcError> {
    match metadata {
        Value::Null => Ok(()),
        Value::Object(map) => check_metadata_object(map, caller, policy),
        _ => Err(RpcError::invalid_params(
            "Metadata must be an object",
            reason::METADATA_TYPE,
        )),
    }
}

/// [`check_metadata`] of a metadata object as parsed (nothing copied to make it a `Value`).
pub fn check_metadata_object(
    map: &serde_json::Map<String, Value>,
    caller: &MetadataCaller,
    policy: &MetadataPolicy,
) -> Result<(), RpcError> {
    let mut path = Vec::new();
    let mut keys = 0;
    walk(map, &mut path, (1, true), &mut keys, caller, policy)
}

/// Replaces, in an agent's answer, every value under a denied key with `"[REDACTED]"`, for
/// every caller: the agent may echo what the edge would never have let in (a key from its own
/// configuration), and a caller allowed to *send* such a key still never gets it back in an
/// answer (answers are logged, cached and shown far more widely than requests). Returns how
/// many values were replaced.
///
/// Linear in the size of the metadata: the path is borrowed from the keys (nothing is copied
/// per child), and a subtree is not entered once its path is as long as the longest denied
/// pattern without matching one (nothing below can match: a pattern looks only at the first
/// segments of a path).
pub fn redact_metadata(metadata: &mut Value, policy: &MetadataPolicy) -> usize {
    fn walk_mut<'a>(
        map: &'a mut Map<String, Value>,
        path: &mut Vec<&'a str>,
        depth: usize,
        policy: &MetadataPolicy,
    ) -> usize {
        let mut n = 0;
        for (key, value) in map.iter_mut() {
            let before = path.len();
            // Only the first `max_segments` segments can decide a match.
            let room = policy.max_segments.saturating_sub(before);
            path.extend(key.split('.').filter(|s| !s.is_empty()).take(room + 1));
            if policy.denied.iter().any(|p| p.matches_prefix_of(path)) {
                *value = Value::String("[REDACTED]".into());
                n += 1;
            } else if path.len() >= policy.max_segments {
                // Longer than every denied pattern, and none matched: nothing below can.
            } else if value.is_object() && depth >= MAX_DEPTH {
                // Deeper than the edge reads: nothing there can be vouched for.
                *value = Value::String("[REDACTED]".into());
                n += 1;
            } else if let Value::Object(inner) = value {
                n += walk_mut(inner, path, depth + 1, policy);
            }
            path.truncate(before);
        }
        n
    }
    match metadata {
        Value::Object(map) => walk_mut(map, &mut Vec::new(), 1, policy),
        _ => 0,
    }
}

/// `plain`: every key of `path` so far is exactly one segment (no `.`, not empty), as the
/// agent reads the workspace key.
fn walk<'a>(
    map: &'a Map<String, Value>,
    path: &mut Vec<&'a str>,
    (depth, plain): (usize, bool),
    keys: &mut usize,
    caller: &MetadataCaller,
    policy: &MetadataPolicy,
) -> Result<(), RpcError> {
    if depth > MAX_DEPTH {
        return Err(RpcError::invalid_params(
            "Metadata is nested too deeply",
            reason::METADATA_TOO_DEEP,
        ));
    }
    *keys += map.len();
    if *keys > MAX_KEYS {
        return Err(RpcError::invalid_params(
            format!("Metadata holds more than {MAX_KEYS} keys"),
            reason::METADATA_TOO_MANY_KEYS,
        ));
    }
    for (key, value) in map {
        if key.len() > MAX_KEY_BYTES {
            return Err(RpcError::invalid_params(
                format!("A metadata key is longer than {MAX_KEY_BYTES} bytes"),
                reason::METADATA_KEY_TOO_LONG,
            ));
        }
        let before = path.len();
        path.extend(key.split('.').filter(|s| !s.is_empty()));
        let plain = plain && !key.is_empty() && !key.contains('.');
        if !plain && before < WORKSPACE_KEY.len() && path.starts_with(&WORKSPACE_KEY) {
            return Err(RpcError::invalid_params(
                "The workspace key must be written nested (metadata.iac_code.cwd)",
                reason::METADATA_DOTTED_WORKSPACE,
            ));
        }
        match value {
            Value::Object(inner) if !inner.is_empty() => {
                walk(inner, path, (depth + 1, plain), keys, caller, policy)?
            }
            _ => {
                if let Some(pattern) = policy.denial(path, caller) {
                    return Err(RpcError::invalid_params(
                        format!("Metadata key is not allowed: {}", pattern.text),
                        reason::METADATA_DENIED_KEY,
                    ));
                }
            }
        }
        path.truncate(before);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(allowed: &[(&str, &[&str])]) -> MetadataPolicy {
        let allowed_for = allowed
            .iter()
            .map(|(p, pats)| {
                (
                    (*p).to_string(),
                    pats.iter().map(|s| (*s).to_string()).collect(),
                )
            })
            .collect();
        MetadataPolicy::new(&MetadataPolicy::default_denied(), &allowed_for).unwrap()
    }

    fn reason(metadata: Value, principal: &str, policy: &MetadataPolicy) -> Option<&'static str> {
        match check_metadata(&metadata, &MetadataCaller::named(principal), policy) {
            Ok(()) => None,
            Err(e) => {
                assert_eq!(e.code, -32602);
                assert!(!e.message.contains("sk-secret"), "{}", e.message);
                Some(e.reason.as_str())
            }
        }
    }

    const DENIED: Option<&str> = Some("metadata.denied_key");
    const DOTTED: Option<&str> = Some("metadata.dotted_workspace");

    #[test]
    fn table() {
        let p = policy(&[("ops", &["iac_code.iac_code_model"])]);
        let v = "sk-secret";
        let rows: Vec<(Value, Option<&str>)> = vec![
            // Each default key, nested as the agent reads it.
            (json!({"iac_code": {"iac_code_api_key": v}}), DENIED),
            (
                json!({"iac_code": {"llm_headers": {"Authorization": v}}}),
                DENIED,
            ),
            (json!({"iac_code": {"llm_headers": {}}}), DENIED),
            (json!({"iac_code": {"llm_headers": []}}), DENIED),
            (json!({"iac_code": {"iac_code_model": "m"}}), DENIED),
            (
                json!({"iac_code": {"alibaba_cloud_access_key_id": v}}),
                DENIED,
            ),
            (
                json!({"iac_code": {"alibaba_cloud_access_key_secret": v}}),
                DENIED,
            ),
            (
                json!({"iac_code": {"alibaba_cloud_security_token": v}}),
                DENIED,
            ),
            (
                json!({"iac_code": {"alibaba_cloud_region_id": "cn-hangzhou"}}),
                DENIED,
            ),
            (json!({"iac_code": {"alibaba_cloud_": v}}), DENIED),
            // Presence is enough, whatever the value.
            (json!({"iac_code": {"iac_code_api_key": null}}), DENIED),
            (json!({"iac_code": {"iac_code_api_key": ""}}), DENIED),
            (
                json!({"iac_code": {"iac_code_api_key": {"nested": v}}}),
                DENIED,
            ),
            // Dotted keys are read as paths, at any level; empty segments are dropped.
            (json!({"iac_code.iac_code_api_key": v}), DENIED),
            (
                json!({"iac_code": {"llm_headers.Authorization": v}}),
                DENIED,
            ),
            (json!({"iac_code.llm_headers.X-Evil": v}), DENIED),
            (json!({"iac_code..iac_code_api_key": v}), DENIED),
            (json!({".iac_code.iac_code_api_key.": v}), DENIED),
            (json!({"iac_code.": {"iac_code_api_key": v}}), DENIED),
            (json!({"": {"iac_code": {"iac_code_api_key": v}}}), DENIED),
            // Allowed next to denied: the denied key still rejects.
            (
                json!({"iac_code": {"cwd": "/srv/w", "iac_code_api_key": v}}),
                DENIED,
            ),
            // Near misses that pass.
            (json!({"iac_code": {"iac_code_api_key_hint": "x"}}), None),
            (json!({"iac_code": {"iac_code_api_ke": "x"}}), None),
            (json!({"iac_code": {"cwd": "/srv/w"}}), None),
            (json!({"iac_code": {"llm_header": "x"}}), None),
            (json!({"iac_code": {"alibaba_cloud": "x"}}), None),
            (
                json!({"iac_code": {"Alibaba_cloud_access_key_id": "x"}}),
                None,
            ),
            (json!({"IAC_CODE": {"iac_code_api_key": "x"}}), None),
            (json!({"iac_code_api_key": "x"}), None),
            (
                json!({"other": {"iac_code": {"iac_code_api_key": "x"}}}),
                None,
            ),
            (json!({"iac_code": "a string"}), None),
            (json!({"iac_code": {}}), None),
            (json!({"iac_code": null}), None),
            // Arrays are values, not containers.
            (json!({"iac_code": [{"iac_code_api_key": "x"}]}), None),
            (json!({}), None),
            (Value::Null, None),
            // The workspace key: nested only (the workspace check reads it there).
            (json!({"iac_code": {"cwd": "/srv/w"}}), None),
            (json!({"iac_code.cwd": "/etc"}), DOTTED),
            (json!({"iac_code..cwd": "/etc"}), DOTTED),
            (json!({".iac_code.cwd.": "/etc"}), DOTTED),
            (json!({"iac_code": {"cwd.": "/etc"}}), DOTTED),
            (json!({"iac_code": {"cwd.x": {"y": 1}}}), DOTTED),
            (json!({"iac_code.cwd": {"x": "/etc"}}), DOTTED),
            (json!({"iac_code.cwd": null}), DOTTED),
            (json!({"iac_code.": {"cwd": "/etc"}}), DOTTED),
            (json!({".iac_code": {"cwd": "/etc"}}), DOTTED),
            (json!({"": {"iac_code": {"cwd": "/etc"}}}), DOTTED),
            (json!({"": {"iac_code.cwd": "/etc"}}), DOTTED),
            (json!({"iac_code": {"": {"cwd": "/etc"}}}), DOTTED),
            (json!({"": "x", "iac_code": {"cwd": "/srv/w"}}), None),
            (json!({"foo": {"iac_code.cwd": "/etc"}}), None),
            (json!({"iac_code": {"cwd": {"x.y": 1}}}), None),
            (json!({"iac_code.cwdx": "/etc"}), None),
            (json!({"iac_code.CWD": "/etc"}), None),
            (json!({"x.iac_code.cwd": "/etc"}), None),
            (json!({"iac_code": {"x.cwd": "/etc"}}), None),
            // Not an object.
            (json!("iac_code"), Some("metadata.type")),
            (
                json!([{"iac_code": {"iac_code_api_key": v}}]),
                Some("metadata.type"),
            ),
            (json!(1), Some("metadata.type")),
            (json!(true), Some("metadata.type")),
        ];
        let mut failures = Vec::new();
        for (metadata, expected) in rows {
            let got = reason(metadata.clone(), "alice", &p);
            if got != expected {
                failures.push(format!("{metadata}: expected {expected:?}, got {got:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn requests_carry_bounded_metadata() {
        let p = policy(&[]);
        let many: Map<String, Value> = (0..=MAX_KEYS)
            .map(|i| (format!("k{i}"), json!(1)))
            .collect();
        let spread = json!({"a": (0..3000).map(|i| (format!("k{i}"), json!(1))).collect::<Map<_, _>>(),
                            "b": (0..3000).map(|i| (format!("k{i}"), json!(1))).collect::<Map<_, _>>()});
        let rows = vec![
            (Value::Object(many), Some("metadata.too_many_keys")),
            (spread, Some("metadata.too_many_keys")),
            (
                json!({"k".repeat(MAX_KEY_BYTES + 1): 1}),
                Some("metadata.key_too_long"),
            ),
            (
                json!({"a": {"k".repeat(MAX_KEY_BYTES + 1): 1}}),
                Some("metadata.key_too_long"),
            ),
            (json!({"k".repeat(MAX_KEY_BYTES): 1}), None),
        ];
        for (meta, want) in rows {
            assert_eq!(reason(meta, "alice", &p), want);
        }
    }

    /// One long dotted key (P segments) over N children: redaction does not revisit the long
    /// path per child (the attack took O(P*N)); and nothing under a denied key survives.
    #[test]
    fn redaction_is_linear_and_complete() {
        let p = policy(&[]);
        let long_key = vec!["a"; 100_000].join(".");
        let children: Map<String, Value> =
            (0..10_000).map(|i| (format!("c{i}"), json!("v"))).collect();
        let mut v = json!({ long_key.clone(): children, "iac_code": {"iac_code_api_key": "sk"} });
        // (Its cost is measured by `cargo bench --bench validate`, redact_metadata/*.)
        let n = redact_metadata(&mut v, &p);
        assert_eq!(n, 1);
        assert_eq!(v["iac_code"]["iac_code_api_key"], "[REDACTED]");
        // Denied keys behind long or dotted paths are still found.
        let mut v = json!({"iac_code.iac_code_api_key": "sk", "x": {"y": {"z": 1}},
                           "iac_code": {"llm_headers.Authorization": "Bearer s"}});
        assert_eq!(redact_metadata(&mut v, &p), 2);
        assert!(
            !v.to_string().contains("sk\"") && !v.to_string().contains("Bearer s"),
            "{v}"
        );
    }

    #[test]
    fn granted_exceptions_add_to_allowed_for() {
        let p = policy(&[("ops", &["iac_code.llm_headers.X-Trace"])]);
        let model = Exceptions::parse(&["iac_code.iac_code_model".into()]).unwrap();
        let granted = [std::sync::Arc::new(model)];
        let with = MetadataCaller {
            principal: "bob",
            granted: &granted,
        };
        let rows: Vec<(Value, &MetadataCaller, Option<&str>)> = vec![
            (json!({"iac_code": {"iac_code_model": "m"}}), &with, None),
            (json!({"iac_code.iac_code_model": "m"}), &with, None),
            (json!({"iac_code": {"iac_code_model_x": "m"}}), &with, None),
            (
                json!({"iac_code": {"iac_code_api_key": "k"}}),
                &with,
                DENIED,
            ),
            (
                json!({"iac_code": {"llm_headers": {"X-Trace": "1"}}}),
                &with,
                DENIED,
            ),
        ];
        for (meta, caller, want) in rows {
            let got = check_metadata(&meta, caller, &p)
                .err()
                .map(|e| e.reason.as_str());
            assert_eq!(got, want, "{meta}");
        }
        let ops = MetadataCaller {
            principal: "ops",
            granted: &granted,
        };
        let both = json!({"iac_code": {"iac_code_model": "m", "llm_headers": {"X-Trace": "1"}}});
        assert!(check_metadata(&both, &ops, &p).is_ok());
        assert!(Exceptions::parse(&["a.*b".into()]).is_err());
    }

    #[test]
    fn message_names_the_pattern_not_the_value() {
        let p = policy(&[]);
        let e = check_metadata(
            &json!({"iac_code": {"alibaba_cloud_access_key_secret": "sk-secret"}}),
            &MetadataCaller::named("alice"),
            &p,
        )
        .unwrap_err();
        assert_eq!(e.reason, "metadata.denied_key");
        assert_eq!(
            e.message,
            "Metadata key is not allowed: iac_code.alibaba_cloud_*"
        );
    }

    #[test]
    fn exceptions_are_per_principal() {
        let p = policy(&[
            ("ops", &["iac_code.iac_code_model"]),
            ("gw", &["iac_code.llm_headers.X-Trace"]),
        ]);
        let model = json!({"iac_code": {"iac_code_model": "qwen"}});
        assert_eq!(reason(model.clone(), "ops", &p), None);
        assert_eq!(reason(model.clone(), "alice", &p), DENIED);
        assert_eq!(reason(model, "gw", &p), DENIED);
        // The exception covers only its own path.
        assert_eq!(
            reason(json!({"iac_code": {"iac_code_api_key": "k"}}), "ops", &p),
            DENIED
        );
        // A sub-path exception carves one header out of a denied subtree.
        let trace = json!({"iac_code": {"llm_headers": {"X-Trace": "1"}}});
        assert_eq!(reason(trace.clone(), "gw", &p), None);
        assert_eq!(reason(trace, "ops", &p), DENIED);
        assert_eq!(
            reason(json!({"iac_code": {"llm_headers.X-Trace": "1"}}), "gw", &p),
            None
        );
        assert_eq!(
            reason(
                json!({"iac_code": {"llm_headers": {"X-Trace": "1", "Authorization": "k"}}}),
                "gw",
                &p
            ),
            DENIED
        );
        // The denied node itself (not a header under it) is still denied.
        assert_eq!(
            reason(json!({"iac_code": {"llm_headers": "k"}}), "gw", &p),
            DENIED
        );
        // Principal names are exact.
        assert_eq!(
            reason(json!({"iac_code": {"iac_code_model": "q"}}), "OPS", &p),
            DENIED
        );
    }

    #[test]
    fn glob_exceptions_and_broad_denials() {
        let denied = vec!["iac_code".to_string(), "tenant.*".to_string()];
        let allowed: BTreeMap<String, Vec<String>> = [(
            "ops".to_string(),
            vec!["iac_code.cwd".to_string(), "iac_code.thinking".to_string()],
        )]
        .into_iter()
        .collect();
        let p = MetadataPolicy::new(&denied, &allowed).unwrap();
        let cwd = json!({"iac_code": {"cwd": "/w", "thinking": {"enabled": true}}});
        assert_eq!(reason(cwd.clone(), "ops", &p), None);
        assert_eq!(reason(cwd, "alice", &p), DENIED);
        assert_eq!(
            reason(
                json!({"iac_code": {"cwd": "/w", "user_id": "u"}}),
                "ops",
                &p
            ),
            DENIED
        );
        assert_eq!(reason(json!({"iac_code": "x"}), "ops", &p), DENIED);
        assert_eq!(
            reason(json!({"tenant": {"anything": 1}}), "ops", &p),
            DENIED
        );
        assert_eq!(reason(json!({"tenant": 1}), "ops", &p), None);
        // A lone `*` denies every key.
        let all = MetadataPolicy::new(&["*".to_string()], &BTreeMap::new()).unwrap();
        assert_eq!(reason(json!({"a": 1}), "x", &all), DENIED);
        assert_eq!(reason(json!({}), "x", &all), None);
    }

    #[test]
    fn redaction_replaces_denied_values_only() {
        let p = policy(&[("ops", &["iac_code.iac_code_model"])]);
        let mut v = json!({"iac_code": {"iac_code_api_key": "sk-1", "cwd": "/w",
            "llm_headers": {"X-A": "1"}, "iac_code_model": "m", "alibaba_cloud_ak": "AK"},
            "iac_code.iac_code_api_key": "sk-2"});
        let n = redact_metadata(&mut v, &p);
        assert_eq!(n, 5, "{v}");
        assert_eq!(v["iac_code"]["iac_code_api_key"], "[REDACTED]");
        assert_eq!(v["iac_code"]["llm_headers"], "[REDACTED]");
        assert_eq!(v["iac_code"]["alibaba_cloud_ak"], "[REDACTED]");
        assert_eq!(v["iac_code.iac_code_api_key"], "[REDACTED]");
        assert_eq!(v["iac_code"]["cwd"], "/w");
        // Even a principal allowed to send a key never gets it back in an answer.
        assert_eq!(v["iac_code"]["iac_code_model"], "[REDACTED]");
    }

    #[test]
    fn depth_limit() {
        fn nested(levels: usize) -> Value {
            let mut v = json!("leaf");
            for _ in 0..levels {
                v = json!({ "k": v });
            }
            v
        }
        let p = policy(&[]);
        assert_eq!(reason(nested(MAX_DEPTH), "alice", &p), None);
        assert_eq!(
            reason(nested(MAX_DEPTH + 1), "alice", &p),
            Some("metadata.too_deep")
        );
        // Deep arrays are not walked, so not counted.
        let mut deep_array = json!("leaf");
        for _ in 0..100 {
            deep_array = json!([deep_array]);
        }
        assert_eq!(reason(json!({ "a": deep_array }), "alice", &p), None);
    }

    #[test]
    fn invalid_patterns() {
        let none = BTreeMap::new();
        for bad in [
            "", "a..b", ".a", "a.", "a.*.b", "*a", "a*b", "a.b*c", "a.**", "a\nb",
        ] {
            assert!(
                MetadataPolicy::new(&[bad.to_string()], &none).is_err(),
                "{bad:?}"
            );
            let allowed: BTreeMap<String, Vec<String>> =
                [("ops".to_string(), vec![bad.to_string()])]
                    .into_iter()
                    .collect();
            assert!(MetadataPolicy::new(&[], &allowed).is_err(), "{bad:?}");
        }
        for good in ["*", "a", "a.b*", "iac_code.alibaba_cloud_*", "a-b.c_d"] {
            assert!(
                MetadataPolicy::new(&[good.to_string()], &none).is_ok(),
                "{good:?}"
            );
        }
        let empty_principal: BTreeMap<String, Vec<String>> =
            [(String::new(), vec!["a".to_string()])]
                .into_iter()
                .collect();
        assert!(MetadataPolicy::new(&[], &empty_principal).is_err());
        assert!(MetadataPolicy::new(&MetadataPolicy::default_denied(), &BTreeMap::new()).is_ok());
    }
}
