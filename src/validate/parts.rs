//! A2A message parts: shape, media type, size and content checks, and the normalized part the
//! proxy forwards (iac-code `a2a/parts.py` rules, closed where the agent leaves gaps).
//!
//! Reason codes (all `-32602`, `RpcError::invalid_params`; media-type codes in [`super::media`]):
//!
//! | reason | meaning |
//! |---|---|
//! | `part.shape` | not exactly one of `text`/`raw`/`url`/`data`, or a field of the wrong JSON type (`null` included, except as a `data` value), or a binary `data` that is not an object holding one base64 string under `bytes` or `base64` |
//! | `part.filename` | `filename` over 255 bytes, or holding `/`, `\`, NUL, a control or bidi-override character, or equal to `.`/`..` |
//! | `part.media_type` | see `media.rs`; also `text` with a multimodal type, and `data` with a text-like type other than `application/json` |
//! | `part.charset` | see `media.rs` |
//! | `part.media_param` | see `media.rs` |
//! | `part.base64` | `raw` or binary `data` bytes that are not strict standard base64 with padding |
//! | `part.too_large` | decoded `raw` or compact `data` over 1 MiB (text-like) or 5 MiB (multimodal); a file over 1 MiB (text-like) or 25 MiB (multimodal); the text-like files of one message over 32 MiB in all (each file counted once) |
//! | `part.utf8` | text-like `raw` bytes or file content that is not valid UTF-8 |
//! | `part.url_scheme` | a `url` that is not an absolute `file:` URL (`http(s)`, `data:`, `ftp:`, relative, ...) |
//! | `part.url_host` | a `file:` URL with a host (`file://host/x`, `file://localhost/x`) |
//! | `part.url_syntax` | a `file:` URL the parser would silently rewrite (spaces, tabs, newlines, control characters, `\`), without `//`, with a query or fragment, or otherwise unparsable |
//! | `part.url_encoding` | the percent-decoded path holds NUL, a control character, or is not UTF-8 |
//! | `part.url_too_long` | the URL is over 8 KiB, or its decoded path over 4096 bytes |
//! | `part.url_too_deep` | the decoded path, normalized, has more than 64 components ([`super::workspace::MAX_PATH_COMPONENTS`]) |
//! | `part.file_without_workspace` | a file URL in a request without `metadata.iac_code.cwd` |
//! | `part.outside_workspace` | the file (its real path when the filesystem is checked) is not inside both the request's workspace and an allowed root; a `..` above `/`; or it cannot be resolved through a symlink (a loop, more than 40 symlinks or 128 components to walk, theirs included, a missing target, a target outside the workspace: nothing outside it is looked up) |
//! | `part.file_missing` | the file does not exist or cannot be resolved at one of its own components (no permission on a directory) under a directory inside the workspace |
//! | `part.file_not_regular` | the path is a directory, fifo, socket or device |
//! | `part.file_unreadable` | a text-like file the proxy cannot open or read |
//!
//! Decisions:
//!
//! - The forwarded part holds only `text|raw|url|data`, `mediaType`, `filename`, `metadata`.
//!   Unknown keys are dropped (the SDK ignores them; ProtoJSON aliases such as `media_type` are
//!   dropped too, so the agent never sees a second, unchecked media type).
//! - `mediaType` is always set, to the normalized type (`text/plain` when it was missing).
//! - A file `url` is replaced by the `file:///` URL of the path that was checked (its real path
//!   when the filesystem is checked, else the lexically normalized one): the agent opens exactly
//!   what was checked, not its own decoding of the caller's string.
//! - `%2F` in a URL segment decodes to `/` (as `url::Url::to_file_path` and Python's `unquote`
//!   both do) and is a separator; the decoded path is normalized lexically, and a `..` that
//!   climbs above `/` is `part.outside_workspace`. `%2e%2e` is a `..` segment (WHATWG);
//!   `%252e` decodes once, to the literal name `%2e`.
//! - A file URL without a workspace is refused: the proxy cannot know the agent's default
//!   directory, so it fails closed.
//! - As for the workspace, when a file cannot be resolved the answer is `part.file_missing`
//!   only if it failed at one of its own components under an ancestor inside the allowed
//!   places, else `part.outside_workspace` (no existence oracle outside them): a symlink
//!   loop, a path whose symlinks need more than the bounded walk takes
//!   (`super::workspace::resolve_within`: 40 symlinks, 128 components), a missing target, and
//!   any walk that would look something up outside the workspace (out and back by `..`).
//! - Text-like files are opened non-blocking and re-checked on the open handle (same inode,
//!   regular file), then read at most limit + 1 bytes. Multimodal files are only `stat`ed.
//! - What one message's file parts make the edge read is bounded: a text-like file (by device
//!   and inode) is read once however many parts name it, and the files read add up to at most
//!   [`MAX_TEXT_FILE_BYTES_PER_MESSAGE`] (`part.too_large` past it; see [`TextFileReads`]).
//! - `null` for any field is `part.shape`, except `data: null` (a JSON null value, allowed with
//!   `application/json`).

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt as _;

use base64::Engine as _;
use serde_json::{Map, Value};

use super::base64_check::standard_decoded_len;
use super::media::{MediaClass, MediaTypes};
use super::workspace::{Workspace, WorkspacePolicy};
use crate::a2a::RpcError;
use crate::reason::{self, Reason};

mod file_url;
#[cfg(test)]
mod tests;

/// Raw text (decoded) and data (compact JSON), text-like.
pub const MAX_TEXT_INLINE_BYTES: usize = 1 << 20;
/// Multimodal raw/data, decoded.
pub const MAX_BINARY_INLINE_BYTES: usize = 5 << 20;
/// Text-like file URL.
pub const MAX_TEXT_FILE_BYTES: u64 = 1 << 20;
/// Multimodal file URL.
pub const MAX_BINARY_FILE_BYTES: u64 = 25 << 20;
/// Most bytes of text-like files read to check the file parts of one message (each file
/// counted once): 32 files at [`MAX_TEXT_FILE_BYTES`], what the default `a2a.max_body_bytes`
/// lets a request carry inline.
pub const MAX_TEXT_FILE_BYTES_PER_MESSAGE: u64 = 32 << 20;
/// Longest `url` string accepted, in bytes.
pub const MAX_URL_BYTES: usize = 8 << 10;
/// Longest percent-decoded file URL path accepted, in bytes (Linux `PATH_MAX`).
pub const MAX_URL_PATH_BYTES: usize = 4096;
/// Longest `filename`, in bytes.
pub const MAX_FILENAME_BYTES: usize = 255;

/// What a part is checked against. One value checks the parts of one message: it counts the
/// text-like files they read.
pub struct PartRules<'a> {
    pub media: &'a MediaTypes,
    /// The request's checked workspace; `None` when the request names none.
    pub workspace: Option<&'a Workspace>,
    pub policy: &'a WorkspacePolicy,
    /// The text-like files read so far for this message.
    pub reads: TextFileReads,
}

/// The text-like files the parts of one message had read (and found UTF-8 and within the
/// limit): each file, by device and inode, is read once however many parts name it (by
/// whatever path), and at most [`MAX_TEXT_FILE_BYTES_PER_MESSAGE`] bytes are read in all.
#[derive(Debug, Default)]
pub struct TextFileReads {
    bytes: Cell<u64>,
    files: RefCell<HashSet<(u64, u64)>>,
}

impl TextFileReads {
    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.get()
    }

    /// Bytes that may still be read.
    fn left(&self) -> u64 {
        MAX_TEXT_FILE_BYTES_PER_MESSAGE.saturating_sub(self.bytes.get())
    }

    /// Whether the file of `meta` was read and passed already.
    fn passed(&self, meta: &Metadata) -> bool {
        self.files.borrow().contains(&(meta.dev(), meta.ino()))
    }

    /// The file of `meta` was read (`bytes` of it) and passed.
    fn record(&self, meta: &Metadata, bytes: u64) {
        self.bytes.set(self.bytes.get().saturating_add(bytes));
        self.files.borrow_mut().insert((meta.dev(), meta.ino()));
    }
}

/// The fields a forwarded part may hold.
const KNOWN_KEYS: [&str; 7] = [
    "text",
    "raw",
    "url",
    "data",
    "mediaType",
    "filename",
    "metadata",
];

fn invalid(message: &str, reason: Reason) -> RpcError {
    RpcError::invalid_params(message, reason)
}

fn shape(message: &str) -> RpcError {
    invalid(message, reason::PART_SHAPE)
}

fn too_large() -> RpcError {
    invalid("A2A part content is too large.", reason::PART_TOO_LARGE)
}

/// Checks one part (a JSON object) and normalizes it in place for forwarding: unknown keys
/// dropped, `mediaType` set to the normalized type, a file `url` replaced by the URL of the
/// checked path. On error the part is left untouched.
pub fn check_part(part: &mut Map<String, Value>, rules: &PartRules) -> Result<(), RpcError> {
    let (media_type, url) = inspect(part, rules)?;
    part.retain(|key, _| KNOWN_KEYS.contains(&key.as_str()));
    part.insert("mediaType".to_string(), Value::String(media_type));
    if let Some(url) = url {
        part.insert("url".to_string(), Value::String(url));
    }
    Ok(())
}

/// The checks; returns the normalized media type and, for a file URL, the URL to forward.
fn inspect(
    part: &Map<String, Value>,
    rules: &PartRules,
) -> Result<(String, Option<String>), RpcError> {
    let mut content: Option<(&str, &Value)> = None;
    for key in ["text", "raw", "url", "data"] {
        if let Some(value) = part.get(key) {
            if content.is_some() {
                return Err(shape(
                    "A2A part must hold exactly one of text, raw, url or data.",
                ));
            }
            content = Some((key, value));
        }
    }
    let Some((kind, value)) = content else {
        return Err(shape(
            "A2A part must hold exactly one of text, raw, url or data.",
        ));
    };
    if kind != "data" && !value.is_string() {
        return Err(shape("A2A part text, raw and url must be strings."));
    }
    let media_type = match part.get("mediaType") {
        None => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(shape("A2A part mediaType must be a string.")),
    };
    match part.get("filename") {
        None => {}
        Some(Value::String(name)) => check_filename(name)?,
        Some(_) => return Err(shape("A2A part filename must be a string.")),
    }
    match part.get("metadata") {
        None | Some(Value::Object(_)) => {}
        Some(_) => return Err(shape("A2A part metadata must be an object.")),
    }

    let (class, media) = rules.media.classify(media_type)?;
    let text = value.as_str().unwrap_or_default();
    let url = match kind {
        "text" => {
            if class != MediaClass::Text {
                return Err(invalid(
                    "A2A text parts must use a text media type.",
                    reason::PART_MEDIA_TYPE,
                ));
            }
            None
        }
        "raw" => {
            check_raw(text, class)?;
            None
        }
        "url" => Some(file_url::check(text, class, rules)?),
        _ => {
            check_data(value, class, &media)?;
            None
        }
    };
    Ok((media, url))
}

/// `filename`: at most 255 bytes; no separator, NUL, control or bidi-override character; not
/// `.` or `..`. The empty string is the proto default and means "no name".
fn check_filename(name: &str) -> Result<(), RpcError> {
    let bidi = |c: char| matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
    let bad = name.len() > MAX_FILENAME_BYTES
        || name == "."
        || name == ".."
        || name
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control() || bidi(c));
    if bad {
        return Err(invalid(
            "A2A part filename is not a plain file name.",
            reason::PART_FILENAME,
        ));
    }
    Ok(())
}

/// Strict standard base64 (padding required, no whitespace, canonical trailing bits), decoded
/// size at most `limit`. Overlong input is refused before decoding.
fn decode_base64(encoded: &str, limit: usize) -> Result<Vec<u8>, RpcError> {
    refuse_overlong(encoded, limit)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| not_base64())?;
    if bytes.len() > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Longer than any base64 of `limit` bytes.
fn refuse_overlong(encoded: &str, limit: usize) -> Result<(), RpcError> {
    if encoded.len() > limit.div_ceil(3).saturating_mul(4) {
        return Err(too_large());
    }
    Ok(())
}

fn not_base64() -> RpcError {
    invalid(
        "A2A part bytes must be standard base64 with padding.",
        reason::PART_BASE64,
    )
}

fn check_raw(encoded: &str, class: MediaClass) -> Result<(), RpcError> {
    match class {
        MediaClass::Text => {
            let bytes = decode_base64(encoded, MAX_TEXT_INLINE_BYTES)?;
            if std::str::from_utf8(&bytes).is_err() {
                return Err(invalid(
                    "A2A raw parts must contain valid UTF-8.",
                    reason::PART_UTF8,
                ));
            }
        }
        MediaClass::Multimodal => check_base64(encoded, MAX_BINARY_INLINE_BYTES)?,
    }
    Ok(())
}

/// What [`decode_base64`] checks, without decoding: the bytes are forwarded as sent, so only
/// their form and decoded size matter ([`standard_decoded_len`]: no buffer, no lookup per byte).
fn check_base64(encoded: &str, limit: usize) -> Result<(), RpcError> {
    refuse_overlong(encoded, limit)?;
    let decoded = standard_decoded_len(encoded.as_bytes()).ok_or_else(not_base64)?;
    if decoded > limit {
        return Err(too_large());
    }
    Ok(())
}

fn check_data(value: &Value, class: MediaClass, media: &str) -> Result<(), RpcError> {
    match class {
        MediaClass::Text => {
            if media != "application/json" {
                return Err(invalid(
                    "A2A data parts must use application/json media type.",
                    reason::PART_MEDIA_TYPE,
                ));
            }
            if compact_len_exceeds(value, MAX_TEXT_INLINE_BYTES) {
                return Err(too_large());
            }
        }
        MediaClass::Multimodal => {
            let object = value
                .as_object()
                .ok_or_else(|| shape("A2A binary data parts must contain an object."))?;
            let encoded =
                match (object.get("bytes"), object.get("base64")) {
                    (Some(v), None) | (None, Some(v)) => v.as_str().ok_or_else(|| {
                        shape("A2A binary data part bytes must be a base64 string.")
                    })?,
                    _ => return Err(shape(
                        "A2A binary data parts must include base64 bytes under bytes or base64.",
                    )),
                };
            check_base64(encoded, MAX_BINARY_INLINE_BYTES)?;
        }
    }
    Ok(())
}

/// Whether the compact serialization of `value` is over `limit` bytes, without building it.
fn compact_len_exceeds(value: &Value, limit: usize) -> bool {
    struct Counter {
        written: usize,
        limit: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.written = self.written.saturating_add(buf.len());
            if self.written > self.limit {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { written: 0, limit };
    // Serializing a Value cannot fail otherwise; any error means "too large" (fail closed).
    serde_json::to_writer(&mut counter, value).is_err()
}
