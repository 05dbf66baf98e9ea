//! Media types of A2A parts: the two input classes of the iac-code protocol reference
//! (text-like and multimodal) and the normalized type the proxy forwards.
//!
//! Reason codes (all `-32602`, `RpcError::invalid_params`):
//!
//! | reason | meaning |
//! |---|---|
//! | `part.media_type` | -32005 (ContentTypeNotSupported): a well-formed type in neither class; -32602: the media type is malformed (no `/`, empty type or subtype, whitespace where the grammar allows none, non-ASCII, over 255 bytes, bad parameter syntax) |
//! | `part.charset` | -32005: a `charset` other than `utf-8` or `us-ascii` on a text-like type; -32602: a repeated `charset`, or a `charset` on a multimodal type |
//! | `part.media_param` | a parameter other than `charset` |
//!
//! Decisions:
//!
//! - The grammar is RFC 9110 §8.3.1 (`type "/" subtype *( OWS ";" OWS [ name "=" value ] )`,
//!   tokens and quoted strings), ASCII only, at most 255 bytes. No leading or trailing
//!   whitespace; whitespace is allowed only around `;` as the grammar says.
//! - A missing or empty `mediaType` means `text/plain` (as iac-code; ProtoJSON omits empty strings).
//! - The forwarded type is the bare `type/subtype`, lower-cased, parameters removed: the real
//!   agent compares the whole string and rejects `text/plain; charset=utf-8`, so the proxy
//!   closes that gap by forwarding `text/plain`.
//! - `charset` is accepted only on text-like types and only as `utf-8` or `us-ascii` (any case,
//!   quoted or not): text parts must be UTF-8, and US-ASCII is a subset. Aliases such as `utf8`
//!   are refused. A `charset` on a multimodal type is refused (it means nothing there).
//! - Every other parameter is refused (`part.media_param`) rather than silently dropped: the
//!   proxy cannot know what it would mean to the agent, so it fails closed.
//! - Configured extras must be bare, lower-cased on load, without wildcards, and may not put one
//!   type in both classes.

use crate::a2a::RpcError;
use crate::reason;

/// Longest media type accepted, in bytes (RFC 6838 limits type and subtype to 127 each).
pub const MAX_MEDIA_TYPE_BYTES: usize = 255;

/// The iac-code text-like types (`parts.py:25-32`).
pub const BUILTIN_TEXT: [&str; 6] = [
    "text/plain",
    "application/json",
    "text/markdown",
    "text/yaml",
    "application/yaml",
    "application/x-yaml",
];

/// The iac-code multimodal types (`parts.py:33-42`).
pub const BUILTIN_MULTIMODAL: [&str; 8] = [
    "image/png",
    "image/jpeg",
    "image/webp",
    "image/gif",
    "audio/mpeg",
    "audio/wav",
    "audio/ogg",
    "application/octet-stream",
];

/// The type a part without `mediaType` has.
pub const DEFAULT_MEDIA_TYPE: &str = "text/plain";

/// The media-type classes of the iac-code protocol reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaClass {
    /// Text-like: appended to the prompt; must be UTF-8.
    Text,
    /// Images, audio and other binary content.
    Multimodal,
}

/// The accepted media types, lower-cased, in a stable order (built-ins first, then extras).
#[derive(Debug, Clone)]
pub struct MediaTypes {
    text: Vec<String>,
    multimodal: Vec<String>,
    /// `a2a.input_media_types = "card"`: the accepted set is the served card's, replaced at
    /// every card refresh ([`MediaTypes::learn_card`]); empty (only parts without a type)
    /// until a card is known.
    card: Option<std::sync::Arc<arc_swap::ArcSwap<Vec<String>>>>,
}

/// Most media ranges taken from one card.
const MAX_CARD_MODES: usize = 256;

/// The size class a type from a card gets: text-like for `text/*` and JSON/YAML types.
fn class_of(essence: &str) -> MediaClass {
    let (top, sub) = essence.split_once('/').unwrap_or((essence, ""));
    let texty = top == "text"
        || matches!(sub, "json" | "yaml" | "x-yaml")
        || sub.ends_with("+json")
        || sub.ends_with("+yaml");
    if texty {
        MediaClass::Text
    } else {
        MediaClass::Multimodal
    }
}

/// Whether `range` (`type/subtype`, `type/*` or `*/*`) covers `essence`.
fn covers(range: &str, essence: &str) -> bool {
    match range.strip_suffix("/*") {
        Some("*") => true,
        Some(top) => essence.split_once('/').is_some_and(|(t, _)| t == top),
        None => range == essence,
    }
}

impl MediaTypes {
    /// Built-in text-like: text/plain, application/json, text/markdown, text/yaml,
    /// application/yaml, application/x-yaml; multimodal: image/png, image/jpeg, image/webp,
    /// image/gif, audio/mpeg, audio/wav, audio/ogg, application/octet-stream; plus extras
    /// (lower-cased). An extra that is not a bare `type/subtype`, holds a wildcard, or would put
    /// one type in both classes is an error naming it (the message is for the operator).
    pub fn new(extra_text: &[String], extra_multimodal: &[String]) -> Result<MediaTypes, String> {
        let mut text: Vec<String> = BUILTIN_TEXT.iter().map(|s| s.to_string()).collect();
        let mut multimodal: Vec<String> =
            BUILTIN_MULTIMODAL.iter().map(|s| s.to_string()).collect();
        for (extras, own, class) in [
            (extra_text, &mut text, "text"),
            (extra_multimodal, &mut multimodal, "multimodal"),
        ] {
            for extra in extras {
                let bare = parse_extra(extra)
                    .map_err(|why| format!("extra {class} media type {extra:?}: {why}"))?;
                if !own.contains(&bare) {
                    own.push(bare);
                }
            }
        }
        if let Some(both) = text.iter().find(|t| multimodal.contains(t)) {
            return Err(format!(
                "media type {both:?} is configured as both text and multimodal"
            ));
        }
        Ok(MediaTypes {
            text,
            multimodal,
            card: None,
        })
    }

    /// The set comes from the agent card (`a2a.input_media_types = "card"`).
    pub fn from_card() -> MediaTypes {
        MediaTypes {
            text: Vec::new(),
            multimodal: Vec::new(),
            card: Some(Default::default()),
        }
    }

    pub fn is_from_card(&self) -> bool {
        self.card.is_some()
    }

    /// With the card as source: takes the card's `defaultInputModes` and every skill's
    /// `inputModes` (media ranges, parameters dropped, lower-cased; at most 256; malformed
    /// entries ignored) as the accepted set. No effect otherwise.
    pub fn learn_card(&self, card: &serde_json::Value) {
        let Some(slot) = &self.card else {
            return;
        };
        let mut modes: Vec<String> = Vec::new();
        let skills = card["skills"].as_array().into_iter().flatten();
        let lists =
            std::iter::once(&card["defaultInputModes"]).chain(skills.map(|s| &s["inputModes"]));
        for list in lists {
            for m in list
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m.as_str())
            {
                let Some(p) = parse(m) else { continue };
                if modes.len() < MAX_CARD_MODES && !modes.contains(&p.essence) {
                    modes.push(p.essence);
                }
            }
        }
        slot.store(std::sync::Arc::new(modes));
    }

    /// With the card as source: the accepted ranges now.
    pub fn card_modes(&self) -> Vec<String> {
        self.card
            .as_ref()
            .map(|c| c.load().as_ref().clone())
            .unwrap_or_default()
    }

    /// Classifies a part's `mediaType` and returns the normalized type to forward: lower-cased,
    /// parameters removed (see the module comment for the parameter rules). `None` or `""`
    /// means `text/plain`.
    pub fn classify(&self, media_type: Option<&str>) -> Result<(MediaClass, String), RpcError> {
        let raw = match media_type {
            None | Some("") => return Ok((MediaClass::Text, DEFAULT_MEDIA_TYPE.to_string())),
            Some(raw) => raw,
        };
        let parsed = parse(raw).ok_or_else(|| {
            RpcError::invalid_params("A2A part media type is malformed.", reason::PART_MEDIA_TYPE)
        })?;
        // A part has one type, never a range.
        let from_card = self.card.as_ref().map(|c| {
            !parsed.essence.contains('*') && c.load().iter().any(|r| covers(r, &parsed.essence))
        });
        let class = if let Some(listed) = from_card {
            if !listed {
                return Err(RpcError::new(
                    crate::a2a::code::CONTENT_TYPE_NOT_SUPPORTED,
                    "A2A part has unsupported media type.",
                    reason::PART_MEDIA_TYPE,
                ));
            }
            class_of(&parsed.essence)
        } else if self.text.contains(&parsed.essence) {
            MediaClass::Text
        } else if self.multimodal.contains(&parsed.essence) {
            MediaClass::Multimodal
        } else {
            // A2A §3.1.1: ContentTypeNotSupportedError (the TCK's CORE-SEND-003).
            return Err(RpcError::new(
                crate::a2a::code::CONTENT_TYPE_NOT_SUPPORTED,
                "A2A part has unsupported media type.",
                reason::PART_MEDIA_TYPE,
            ));
        };
        let mut charset_seen = false;
        for (name, value) in &parsed.params {
            if name != "charset" {
                return Err(RpcError::invalid_params(
                    "A2A part media type has an unsupported parameter.",
                    reason::PART_MEDIA_PARAM,
                ));
            }
            if charset_seen {
                return Err(RpcError::invalid_params(
                    "A2A part media type repeats its charset.",
                    reason::PART_CHARSET,
                ));
            }
            charset_seen = true;
            if class != MediaClass::Text {
                return Err(RpcError::invalid_params(
                    "A2A binary parts take no charset.",
                    reason::PART_CHARSET,
                ));
            }
            let value = value.to_ascii_lowercase();
            if value != "utf-8" && value != "us-ascii" {
                return Err(RpcError::new(
                    crate::a2a::code::CONTENT_TYPE_NOT_SUPPORTED,
                    "A2A text parts must be UTF-8.",
                    reason::PART_CHARSET,
                ));
            }
        }
        Ok((class, parsed.essence))
    }

    /// Every accepted type: text-like first, then multimodal (for the card's `defaultInputModes`).
    pub fn all(&self) -> Vec<String> {
        self.text
            .iter()
            .chain(self.multimodal.iter())
            .cloned()
            .collect()
    }

    /// The text-like types.
    pub fn text(&self) -> &[String] {
        &self.text
    }

    /// The multimodal types.
    pub fn multimodal(&self) -> &[String] {
        &self.multimodal
    }
}

/// A parsed media type: lower-cased `type/subtype` and its parameters (name lower-cased, value
/// unquoted, case kept).
#[derive(Debug, PartialEq, Eq)]
struct Parsed {
    essence: String,
    params: Vec<(String, String)>,
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Parses a media type by the RFC 9110 grammar; `None` when it is malformed.
fn parse(input: &str) -> Option<Parsed> {
    if input.len() > MAX_MEDIA_TYPE_BYTES || !input.is_ascii() {
        return None;
    }
    let b = input.as_bytes();
    let mut i = 0;
    let token = |i: &mut usize| -> Option<String> {
        let start = *i;
        while *i < b.len() && is_tchar(b[*i]) {
            *i += 1;
        }
        (*i > start).then(|| input[start..*i].to_ascii_lowercase())
    };
    let kind = token(&mut i)?;
    if b.get(i) != Some(&b'/') {
        return None;
    }
    i += 1;
    let subtype = token(&mut i)?;
    let mut params = Vec::new();
    loop {
        let before = i;
        while i < b.len() && is_ows(b[i]) {
            i += 1;
        }
        if i == b.len() {
            // Whitespace is only allowed before a ';'.
            if i != before {
                return None;
            }
            break;
        }
        if b[i] != b';' {
            return None;
        }
        i += 1;
        while i < b.len() && is_ows(b[i]) {
            i += 1;
        }
        if i == b.len() || b[i] == b';' {
            // An empty parameter (`text/plain;`) is allowed by the grammar.
            continue;
        }
        let name = token(&mut i)?;
        if b.get(i) != Some(&b'=') {
            return None;
        }
        i += 1;
        let value = if b.get(i) == Some(&b'"') {
            i += 1;
            let mut value = String::new();
            loop {
                match b.get(i) {
                    None => return None,
                    Some(b'"') => {
                        i += 1;
                        break;
                    }
                    Some(b'\\') => {
                        let escaped = *b.get(i + 1)?;
                        if !(escaped == b'\t' || (0x20..=0x7e).contains(&escaped)) {
                            return None;
                        }
                        value.push(char::from(escaped));
                        i += 2;
                    }
                    Some(&c) if c == b'\t' || (0x20..=0x7e).contains(&c) => {
                        value.push(char::from(c));
                        i += 1;
                    }
                    Some(_) => return None,
                }
            }
            value
        } else {
            let start = i;
            while i < b.len() && is_tchar(b[i]) {
                i += 1;
            }
            if i == start {
                return None;
            }
            input[start..i].to_string()
        };
        params.push((name, value));
    }
    Some(Parsed {
        essence: format!("{kind}/{subtype}"),
        params,
    })
}

/// A configured extra type: bare, no wildcard; lower-cased.
fn parse_extra(extra: &str) -> Result<String, &'static str> {
    let parsed = parse(extra).ok_or("not a media type (type/subtype)")?;
    if !parsed.params.is_empty() || extra.contains(';') {
        return Err("parameters are not allowed");
    }
    if parsed.essence.contains('*') {
        return Err("wildcards are not supported");
    }
    Ok(parsed.essence)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types() -> MediaTypes {
        MediaTypes::new(&[], &[]).unwrap()
    }

    #[test]
    fn classify_table() {
        use MediaClass::{Multimodal as M, Text as T};
        let ok: &[(Option<&str>, MediaClass, &str)] = &[
            (None, T, "text/plain"),
            (Some(""), T, "text/plain"),
            (Some("text/plain"), T, "text/plain"),
            (Some("TEXT/PLAIN"), T, "text/plain"),
            (Some("Text/Plain; charset=UTF-8"), T, "text/plain"),
            (Some("text/plain;charset=utf-8"), T, "text/plain"),
            (Some("text/plain ; charset=utf-8"), T, "text/plain"),
            (Some("text/plain;\tcharset=\"utf-8\""), T, "text/plain"),
            (Some("text/plain; charset=US-ASCII"), T, "text/plain"),
            (Some("text/plain;"), T, "text/plain"),
            (Some("text/plain; ;charset=utf-8"), T, "text/plain"),
            (Some("application/json"), T, "application/json"),
            (
                Some("application/json; charset=utf-8"),
                T,
                "application/json",
            ),
            (Some("text/markdown"), T, "text/markdown"),
            (Some("text/yaml"), T, "text/yaml"),
            (Some("application/yaml"), T, "application/yaml"),
            (Some("application/x-yaml"), T, "application/x-yaml"),
            (Some("image/png"), M, "image/png"),
            (Some("IMAGE/JPEG"), M, "image/jpeg"),
            (Some("image/webp"), M, "image/webp"),
            (Some("image/gif"), M, "image/gif"),
            (Some("audio/mpeg"), M, "audio/mpeg"),
            (Some("audio/wav"), M, "audio/wav"),
            (Some("audio/ogg"), M, "audio/ogg"),
            (
                Some("application/octet-stream"),
                M,
                "application/octet-stream",
            ),
        ];
        let t = types();
        for (input, class, normalized) in ok {
            let got = t.classify(*input);
            assert_eq!(got, Ok((*class, normalized.to_string())), "input {input:?}");
        }

        let long_subtype = format!("text/{}", "a".repeat(300));
        let bad: &[(&str, &str)] = &[
            // unsupported
            ("text/html", "part.media_type"),
            ("image/svg+xml", "part.media_type"),
            ("application/xml", "part.media_type"),
            ("*/*", "part.media_type"),
            ("text/*", "part.media_type"),
            // malformed
            ("textplain", "part.media_type"),
            ("text/", "part.media_type"),
            ("/plain", "part.media_type"),
            ("text/plain/x", "part.media_type"),
            (" text/plain", "part.media_type"),
            ("text/plain ", "part.media_type"),
            ("text /plain", "part.media_type"),
            ("text/ plain", "part.media_type"),
            ("text/pla in", "part.media_type"),
            ("text\u{FF0F}plain", "part.media_type"),
            ("téxt/plain", "part.media_type"),
            ("text/plain\0", "part.media_type"),
            ("text/plain\n", "part.media_type"),
            ("text/plain; charset", "part.media_type"),
            ("text/plain; charset=", "part.media_type"),
            ("text/plain; charset =utf-8", "part.media_type"),
            ("text/plain; charset=\"utf-8", "part.media_type"),
            ("text/plain, text/html", "part.media_type"),
            (long_subtype.as_str(), "part.media_type"),
            // charset
            ("text/plain; charset=latin1", "part.charset"),
            ("text/plain; charset=iso-8859-1", "part.charset"),
            ("text/plain; charset=utf-16", "part.charset"),
            ("text/plain; charset=utf8", "part.charset"),
            ("text/plain; charset=utf-8; charset=latin1", "part.charset"),
            ("text/plain; charset=utf-8; charset=utf-8", "part.charset"),
            ("image/png; charset=utf-8", "part.charset"),
            // other parameters
            ("text/plain; format=flowed", "part.media_param"),
            ("text/markdown; variant=GFM", "part.media_param"),
            ("image/png; name=x.png", "part.media_param"),
        ];
        for (input, reason) in bad {
            let err = t.classify(Some(input)).unwrap_err();
            assert_eq!(err.reason, *reason, "input {input:?}");
            // Well-formed but not supported: ContentTypeNotSupported (A2A §3.1.1); malformed:
            // invalid params.
            let unsupported = matches!(
                *input,
                "text/html" | "image/svg+xml" | "application/xml" | "*/*" | "text/*"
            ) || (reason == &"part.charset"
                && !input.contains("; charset=utf-8; charset")
                && !input.starts_with("image/"));
            assert_eq!(
                err.code,
                if unsupported { -32005 } else { -32602 },
                "input {input:?}"
            );
            assert!(!err.message.contains(input), "message echoes the value");
        }
    }

    #[test]
    fn exactly_255_bytes_is_allowed_and_256_is_not() {
        let sub = "a".repeat(MAX_MEDIA_TYPE_BYTES - "text/".len());
        let exact = format!("text/{sub}");
        assert_eq!(exact.len(), 255);
        let t = MediaTypes::new(std::slice::from_ref(&exact), &[]).unwrap();
        assert_eq!(t.classify(Some(&exact)).unwrap().1, exact);
        let over = format!("{exact}a");
        assert_eq!(
            t.classify(Some(&over)).unwrap_err().reason,
            "part.media_type"
        );
    }

    #[test]
    fn extras_are_lowercased_and_classified() {
        let t = MediaTypes::new(
            &["Text/X-Terraform".to_string(), "text/plain".to_string()],
            &["image/svg+xml".to_string()],
        )
        .unwrap();
        assert_eq!(
            t.classify(Some("text/x-terraform")).unwrap(),
            (MediaClass::Text, "text/x-terraform".to_string())
        );
        assert_eq!(
            t.classify(Some("IMAGE/SVG+XML")).unwrap(),
            (MediaClass::Multimodal, "image/svg+xml".to_string())
        );
        let all = t.all();
        assert_eq!(all.len(), 6 + 8 + 2, "duplicates are not repeated");
        assert_eq!(all[0], "text/plain");
        assert_eq!(all[6], "text/x-terraform");
        assert_eq!(all.last().unwrap(), "image/svg+xml");
    }

    #[test]
    fn invalid_extras_are_rejected() {
        let bad_text = [
            "plain",
            "text/plain; charset=utf-8",
            "text/*",
            "*/*",
            " text/x",
            "text/x ",
            "tëxt/x",
            "",
            "image/png", // already multimodal
        ];
        for extra in bad_text {
            assert!(
                MediaTypes::new(&[extra.to_string()], &[]).is_err(),
                "extra {extra:?}"
            );
        }
        assert!(MediaTypes::new(&[], &["text/plain".to_string()]).is_err());
        assert!(MediaTypes::new(&["x/y".to_string()], &["X/Y".to_string()]).is_err());
    }

    #[test]
    fn types_from_the_card() {
        let t = MediaTypes::from_card();
        // No card yet: only parts without a type.
        assert!(t.classify(None).is_ok());
        assert_eq!(t.classify(Some("text/plain")).unwrap_err().code, -32005);
        t.learn_card(&serde_json::json!({
            "defaultInputModes": ["text/plain", "Application/JSON; charset=utf-8", "bogus", 7],
            "skills": [{"inputModes": ["image/*", "text/csv"]}, {"inputModes": ["application/vnd.api+json", "application/x-yaml"]}, {}]
        }));
        let rows = [
            ("text/plain", Some(MediaClass::Text)),
            ("application/json", Some(MediaClass::Text)),
            ("text/csv", Some(MediaClass::Text)),
            ("application/vnd.api+json", Some(MediaClass::Text)),
            ("application/x-yaml", Some(MediaClass::Text)),
            ("image/png", Some(MediaClass::Multimodal)),
            ("IMAGE/TIFF", Some(MediaClass::Multimodal)),
            ("image/*", None),
            ("*/*", None),
            ("text/html", None),
            ("application/pdf", None),
            ("audio/ogg", None),
        ];
        for (m, want) in rows {
            match (t.classify(Some(m)), want) {
                (Ok((class, _)), Some(w)) => assert_eq!(class, w, "{m}"),
                (Err(e), None) => {
                    assert_eq!(
                        (e.code, e.reason.as_str()),
                        (-32005, "part.media_type"),
                        "{m}"
                    )
                }
                (got, _) => panic!("{m}: {got:?}"),
            }
        }
        // A charset still only on text-like types.
        assert_eq!(
            t.classify(Some("image/png; charset=utf-8"))
                .unwrap_err()
                .reason,
            "part.charset"
        );
        // A refresh replaces the set; `*/*` takes everything well-formed.
        t.learn_card(&serde_json::json!({"defaultInputModes": ["*/*"]}));
        assert_eq!(
            t.classify(Some("application/pdf")).unwrap().0,
            MediaClass::Multimodal
        );
        assert!(t.classify(Some("text/plain")).is_ok());
        assert_eq!(t.card_modes(), ["*/*"]);
        // The built-in set ignores cards.
        let builtin = MediaTypes::new(&[], &[]).unwrap();
        builtin.learn_card(&serde_json::json!({"defaultInputModes": ["application/pdf"]}));
        assert!(builtin.classify(Some("application/pdf")).is_err());
    }
}
