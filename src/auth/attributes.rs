//! What a principal is besides its name: an optional tenant and a set of groups. Static
//! schemes take them from the policy, JWT from claims, mTLS from identity patterns. Values are
//! checked here once, whatever their source, so every later stage can rely on them.

use serde_json::Value;

/// Most groups one principal may have (a claim with more is refused, not truncated).
pub const MAX_GROUPS: usize = 32;
/// Longest tenant or group name, in characters (as principal names).
pub const MAX_ATTRIBUTE_CHARS: usize = 128;
/// Longest space-separated groups claim, in bytes.
pub const MAX_GROUPS_CLAIM_BYTES: usize = 4096;

/// A principal's tenant and groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    pub tenant: Option<String>,
    /// Sorted, without duplicates.
    pub groups: Vec<String>,
}

/// A tenant name: 1-128 characters, no control character (as a principal name).
pub fn valid_tenant(t: &str) -> bool {
    !t.is_empty() && t.chars().count() <= MAX_ATTRIBUTE_CHARS && !t.chars().any(char::is_control)
}

/// A name in `authz.rules.principals`: like a tenant, or a JWT subject within its tenant
/// (`jwt:<sub>` U+001E `<tenant>`, as [`super::Principal::owner_key`] names it; TOML
/// `"jwt:dora\u001Eteam-a"`).
pub fn valid_principal(p: &str) -> bool {
    match p.split_once('\u{1e}') {
        Some((sub, tenant)) => sub.starts_with("jwt:") && valid_tenant(sub) && valid_tenant(tenant),
        None => valid_tenant(p),
    }
}

/// A group name: like a tenant, and without white space (groups claims may be one
/// space-separated string).
pub fn valid_group(g: &str) -> bool {
    valid_tenant(g) && !g.chars().any(char::is_whitespace)
}

/// Checks, sorts and de-duplicates a list of groups; `Err` names the first bad one's index.
pub fn groups_from_list<S: AsRef<str>>(list: &[S]) -> Result<Vec<String>, usize> {
    if list.len() > MAX_GROUPS {
        return Err(MAX_GROUPS);
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, g) in list.iter().enumerate() {
        let g = g.as_ref();
        if !valid_group(g) {
            return Err(i);
        }
        out.push(g.to_string());
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The groups a claim value names: an array of strings, or one space-separated string.
/// `None` for anything else, a bad name, more than [`MAX_GROUPS`] or an oversize string.
pub fn groups_from_claim(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::Array(items) => {
            if items.len() > MAX_GROUPS {
                return None;
            }
            let names: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
            groups_from_list(&names?).ok()
        }
        Value::String(s) => {
            if s.len() > MAX_GROUPS_CLAIM_BYTES {
                return None;
            }
            let names: Vec<&str> = s.split_ascii_whitespace().collect();
            groups_from_list(&names).ok()
        }
        _ => None,
    }
}

/// A claim by dotted path (`realm_access.roles`): the whole path as one key first (claim
/// names such as `https://example.com/tenant` hold dots), else one object level per segment.
pub fn claim_at<'a>(claims: &'a serde_json::Map<String, Value>, path: &str) -> Option<&'a Value> {
    if let Some(v) = claims.get(path) {
        return Some(v);
    }
    let mut segments = path.split('.');
    let mut current = claims.get(segments.next()?)?;
    for seg in segments {
        current = current.as_object()?.get(seg)?;
    }
    Some(current)
}

/// A valid claim path for the policy: 1-256 bytes, dotted, no empty segment.
pub fn valid_claim_path(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 256
        && !p.chars().any(char::is_control)
        && p.split('.').all(|s| !s.is_empty())
}

/// An mTLS identity pattern and the attributes it gives: exact, or a prefix when it ends in
/// `*` (`spiffe://example.org/ns/team-a/*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityPattern {
    pub text: String,
    pub attributes: Attributes,
}

impl IdentityPattern {
    pub fn matches(&self, identity: &str) -> bool {
        match self.text.strip_suffix('*') {
            Some(prefix) => identity.starts_with(prefix),
            None => identity == self.text,
        }
    }
}

/// Whether an identity pattern is usable: 1-512 bytes of printable ASCII, `*` only last.
pub fn valid_identity_pattern(p: &str) -> bool {
    let body = p.strip_suffix('*').unwrap_or(p);
    !p.is_empty()
        && p.len() <= 512
        && p.bytes().all(|b| (0x21..=0x7e).contains(&b))
        && !body.contains('*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A principal name, or a JWT subject within its tenant: one U+001E after a `jwt:`
    /// subject, each side a valid name.
    #[test]
    fn principal_names_and_jwt_subjects_within_a_tenant() {
        let long = "t".repeat(MAX_ATTRIBUTE_CHARS + 1);
        let rows: Vec<(String, bool)> = vec![
            ("alice".into(), true),
            ("jwt:dora".into(), true),
            ("jwt:dora\u{1e}team-a".into(), true),
            ("jwt:dora@example.com\u{1e}org/with spaces".into(), true),
            // Only a JWT subject has a tenant part.
            ("alice\u{1e}team-a".into(), false),
            ("mtls:x\u{1e}team-a".into(), false),
            // Two separators, or an empty side.
            ("jwt:dora\u{1e}team-a\u{1e}b".into(), false),
            ("jwt:dora\u{1e}".into(), false),
            ("\u{1e}team-a".into(), false),
            // Other control characters, oversize parts.
            ("jwt:dora\u{1f}team-a".into(), false),
            ("jwt:dora\nteam-a".into(), false),
            (format!("jwt:dora\u{1e}{long}"), false),
            (format!("jwt:{long}\u{1e}team-a"), false),
            (String::new(), false),
        ];
        for (name, ok) in rows {
            assert_eq!(valid_principal(&name), ok, "{name:?}");
        }
    }

    #[test]
    fn groups_claim_shapes() {
        let x128 = "x".repeat(128);
        let cases: Vec<(Value, Option<Vec<&str>>)> = vec![
            (json!(["b", "a", "a"]), Some(vec!["a", "b"])),
            (
                json!("deployers  auditors"),
                Some(vec!["auditors", "deployers"]),
            ),
            (json!(""), Some(vec![])),
            (json!([]), Some(vec![])),
            (json!(["a", 1]), None),
            (json!(["a b"]), None),
            (json!(["a\u{0}"]), None),
            (json!([""]), None),
            (json!(["x".repeat(129)]), None),
            (json!([x128]), Some(vec![x128.as_str()])),
            (json!({"a": 1}), None),
            (json!(7), None),
            (json!(null), None),
            (
                Value::Array((0..33).map(|i| json!(format!("g{i}"))).collect()),
                None,
            ),
            (json!("g ".repeat(33)), None),
            (json!("g".repeat(4097)), None),
        ];
        for (claim, want) in cases {
            let got = groups_from_claim(&claim);
            match (&got, &want) {
                (Some(g), Some(w)) => assert_eq!(g, w, "{claim}"),
                (None, None) => {}
                _ => panic!("{claim}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn claim_paths() {
        let c = json!({"tenant": "t1", "org": {"tenant": "t2", "deep": {"x": "t3"}},
                       "https://example.com/tenant": "t4", "s": "flat"});
        let c = c.as_object().unwrap();
        let cases = [
            ("tenant", Some("t1")),
            ("org.tenant", Some("t2")),
            ("org.deep.x", Some("t3")),
            ("https://example.com/tenant", Some("t4")),
            ("org.missing", None),
            ("s.x", None),
            ("nope", None),
        ];
        for (path, want) in cases {
            assert_eq!(claim_at(c, path).and_then(Value::as_str), want, "{path}");
        }
        assert!(valid_claim_path("a.b"));
        for bad in ["", "a..b", ".a", "a.", "a\nb"] {
            assert!(!valid_claim_path(bad), "{bad:?}");
        }
    }

    #[test]
    fn identity_patterns() {
        let p = |t: &str| IdentityPattern {
            text: t.into(),
            attributes: Attributes::default(),
        };
        let cases = [
            (
                "spiffe://ex.org/team-a/*",
                "spiffe://ex.org/team-a/ci",
                true,
            ),
            ("spiffe://ex.org/team-a/*", "spiffe://ex.org/team-a/", true),
            (
                "spiffe://ex.org/team-a/*",
                "spiffe://ex.org/team-ab/ci",
                false,
            ),
            (
                "spiffe://ex.org/team-a/*",
                "spiffe://ex.org/team-b/ci",
                false,
            ),
            ("spiffe://ex.org/ci", "spiffe://ex.org/ci", true),
            ("spiffe://ex.org/ci", "spiffe://ex.org/ci2", false),
            ("spiffe://ex.org/ci", "SPIFFE://ex.org/ci", false),
        ];
        for (pattern, id, want) in cases {
            assert_eq!(p(pattern).matches(id), want, "{pattern} {id}");
        }
        assert!(valid_identity_pattern("spiffe://a/*"));
        for bad in ["", "*a*", "a*b", "a b", "é"] {
            assert!(!valid_identity_pattern(bad), "{bad:?}");
        }
    }

    #[test]
    fn tenant_names() {
        assert!(valid_tenant("team-a"));
        assert!(valid_tenant("équipe"));
        assert!(!valid_tenant(""));
        assert!(!valid_tenant("a\u{7}"));
        assert!(!valid_tenant(&"t".repeat(129)));
        assert!(!valid_group("a b"));
    }
}
