//! Workspace root templates: an absolute path with `{tenant}` and `{principal}`, expanded per
//! caller. A value is substituted only when it is one plain path component, and a component
//! of the template holds at most one placeholder, so no tenant or principal name can climb
//! out of, or reach across, the directory the template names, nor two callers share one.

use std::path::PathBuf;

/// Longest value substituted into a template, in bytes.
pub const MAX_VALUE_BYTES: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Tenant,
    Principal,
}

/// A tenant or principal name that is not one plain path component ([`is_plain_component`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAComponent;

/// A parsed `workspace_roots` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootTemplate {
    pub text: String,
    pieces: Vec<Piece>,
}

impl RootTemplate {
    /// Parses a template: absolute, no NUL or control character, `{` and `}` only as the two
    /// placeholders, at most one of them per component, no `.` or `..` component (the
    /// template is written normalized).
    pub fn parse(text: &str) -> Result<RootTemplate, String> {
        if !text.starts_with('/') {
            return Err("must be an absolute path".into());
        }
        if text.len() > 4096 || text.chars().any(char::is_control) {
            return Err("must be at most 4096 bytes without control characters".into());
        }
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let (before, after) = rest.split_at(open);
            if before.contains('}') {
                return Err("'}' without '{'".into());
            }
            if !before.is_empty() {
                pieces.push(Piece::Text(before.to_string()));
            }
            let close = after
                .find('}')
                .ok_or_else(|| "'{' without '}'".to_string())?;
            pieces.push(match &after[..=close] {
                "{tenant}" => Piece::Tenant,
                "{principal}" => Piece::Principal,
                other => {
                    return Err(format!(
                        "unknown placeholder {other}: use {{tenant}} or {{principal}}"
                    ))
                }
            });
            rest = &after[close + 1..];
        }
        if rest.contains('}') {
            return Err("'}' without '{'".into());
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_string()));
        }
        // Two placeholders in one component (`{tenant}-{principal}`) would give two callers
        // one directory: tenant `acme` with `dev-alice`, tenant `acme-dev` with `alice`.
        if text
            .split('/')
            .any(|c| c.matches("{tenant}").count() + c.matches("{principal}").count() > 1)
        {
            return Err(
                "must hold at most one placeholder per path component (e.g. {tenant}/{principal})"
                    .into(),
            );
        }
        let t = RootTemplate {
            text: text.to_string(),
            pieces,
        };
        let sample = t.render("t", "p");
        let body = sample.strip_suffix('/').unwrap_or(&sample);
        if body
            .split('/')
            .skip(1)
            .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err("must be a normalized path below / (no '.', '..' or '//')".into());
        }
        Ok(t)
    }

    /// Whether the template names `{tenant}`.
    pub fn uses_tenant(&self) -> bool {
        self.pieces.contains(&Piece::Tenant)
    }

    /// Whether the template names `{principal}`.
    pub fn uses_principal(&self) -> bool {
        self.pieces.contains(&Piece::Principal)
    }

    /// The template with these values (unchecked).
    fn render(&self, tenant: &str, principal: &str) -> String {
        let mut out = String::with_capacity(self.text.len());
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Tenant => out.push_str(tenant),
                Piece::Principal => out.push_str(principal),
            }
        }
        out
    }

    /// The root for a caller: `Ok(None)` when the template names `{tenant}` and the caller
    /// has none; `Err` when a value it needs is not a plain path component
    /// ([`is_plain_component`]): the request is refused, never the value cleaned.
    pub fn expand(
        &self,
        tenant: Option<&str>,
        principal: &str,
    ) -> Result<Option<PathBuf>, NotAComponent> {
        let tenant = match (self.uses_tenant(), tenant) {
            (true, None) => return Ok(None),
            (true, Some(t)) if !is_plain_component(t) => return Err(NotAComponent),
            (_, t) => t.unwrap_or(""),
        };
        if self.pieces.contains(&Piece::Principal) && !is_plain_component(principal) {
            return Err(NotAComponent);
        }
        Ok(Some(PathBuf::from(self.render(tenant, principal))))
    }
}

/// One plain path component: 1-128 bytes of ASCII letters, digits and `-_.@+:=`, and not `.`
/// or `..`. No `/`, NUL, `%` (no encoded separators), white space or non-ASCII (no
/// look-alikes of another tenant's name).
pub fn is_plain_component(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= MAX_VALUE_BYTES
        && v != "."
        && v != ".."
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@+:=".contains(&b))
}
