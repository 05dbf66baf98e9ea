//! The answer's fast pass: one borrowed scan over an agent's JSON-RPC response that decides
//! whether the edge's cleaning ([`super::clean`]) and the caller's view
//! ([`crate::state::registry::TaskRegistry::client_view`]) would change anything in it, and
//! picks out what the registry learns from it. When nothing would change, the agent's
//! `result` is relayed as the bytes it came in (after this strict parse of every one of
//! them) instead of being built into a tree, cleaned, and written out again. The same scan
//! without the cleaning's rules ([`project`]) gives the projection of an answer the caller
//! is not given (past its request budgets), so that what the agent did is learned still.
//!
//! The scan is deliberately conservative: whatever could need a change sends the answer to
//! the full pass, which then decides exactly (and gives the precise error for a bad answer).
//! It falls back on:
//! - an `error` (its text is always rewritten), a `result` given twice, a `result` holding
//!   `jsonrpc` (a nested response the registry reads differently);
//! - a duplicate key in any object of the result (the full pass keeps the last value; a byte
//!   copy would hand the caller both), an object of more than [`MAX_KEYS`] keys, a key
//!   longer than [`MAX_KEY_BYTES`], nesting deeper than [`MAX_DEPTH`];
//! - a `metadata` object the metadata policy would redact anything in (decided by
//!   [`redact_metadata`] itself, on a copy of that object);
//! - an object with a callback `url` and a `token` or `authentication` (a push config whose
//!   secrets are redacted);
//! - a `contextId` shaped like the edge's context alias (`c-` + 32 hex digits: the caller's
//!   view may rewrite it);
//! - with `redact_paths`, any string holding an absolute path;
//! - anything serde_json would not parse (the full pass then refuses it).
//!
//! Every string is decoded and every number parsed as the full pass would, so a response
//! the scan takes is one the full pass accepts and leaves unchanged; `tests` and the
//! `answer_fast` fuzz target check exactly that.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::clean::without_paths;
use crate::state::registry::{is_context_alias, ROLES};
use crate::validate::metadata::{redact_metadata, MetadataPolicy};

/// Deeper than this, the full pass decides (A2A answers nest about 8 levels).
pub const MAX_DEPTH: usize = 64;
/// An object with more keys than this goes to the full pass (the duplicate check compares
/// each key with the object's earlier ones: bounded work per key).
pub const MAX_KEYS: usize = 64;
/// A key longer than this sends the answer to the full pass (which hashes it once), so that
/// the duplicate check's comparisons stay short: without it, 64 keys of length L differing
/// in their last byte cost about 2,000 L bytes compared.
pub const MAX_KEY_BYTES: usize = 256;
/// The most values the scan builds (the projection, the response's `id`, a `metadata` object
/// for its redaction check), and the most bytes of their strings and keys: past either, the
/// full pass decides, which charges its tree to the caller's budgets (what the scan builds is
/// not charged: without the bound, an agent's `id` or metadata of a million values would be
/// built whole beside them).
pub const MAX_BUILT_VALUES: usize = 4096;
pub const MAX_BUILT_BYTES: usize = 256 * 1024;

/// What the cleaning of the answer's route would do: the metadata policy and whether paths
/// are hidden.
#[derive(Clone, Copy)]
pub struct Cleaning<'a> {
    pub metadata: &'a MetadataPolicy,
    pub redact_paths: bool,
    /// The most values the full pass builds (`a2a.max_json_values`): a response with more
    /// goes to it (which refuses it), so the bound holds the same on both passes.
    pub max_values: usize,
}

/// A response the scan took: the agent's `result` as it came, its projection (the keys the
/// registry reads, [`crate::state::registry`]'s facts: for the observer), and its `id` (the
/// last one, as the full pass keeps it; `None` when it has none).
#[derive(Debug)]
pub struct Untouched<'a> {
    pub result: &'a str,
    pub projection: Value,
    pub id: Option<Value>,
}

/// Scans one JSON-RPC response of an agent. `None`: the full pass must take it.
pub fn scan<'a>(bytes: &'a [u8], cleaning: Cleaning<'_>) -> Option<Untouched<'a>> {
    scan_as(bytes, Some(cleaning), cleaning.max_values)
}

/// The registry's projection of one JSON-RPC response of an agent and its `id`, whatever the
/// cleaning would change in it (nothing of it is relayed): for an answer its caller cannot be
/// given, so that what the agent did is still learned. It reads the answer as strictly as
/// [`scan`] does and builds no more than the projection (a `metadata` object is skipped, not
/// built, and only the keys it builds or checks are compared: a handful of names per
/// object); `None` where [`scan`] falls back for the answer's own shape (an `error`, one of
/// those keys twice, too many values, too deep, more to build than [`MAX_BUILT_VALUES`] or
/// [`MAX_BUILT_BYTES`], a Message or Artifact the full pass refuses, not JSON).
pub fn project(bytes: &[u8], max_values: usize) -> Option<(Value, Option<Value>)> {
    scan_as(bytes, None, max_values).map(|u| (u.projection, u.id))
}

/// [`scan`] with the route's cleaning, or [`project`] without.
fn scan_as<'a>(
    bytes: &'a [u8],
    cleaning: Option<Cleaning<'_>>,
    max_values: usize,
) -> Option<Untouched<'a>> {
    // serde_json skips what it ignores without checking its UTF-8: the whole text first.
    let text = std::str::from_utf8(bytes).ok()?;
    let mut state = State {
        cleaning,
        keys: Vec::new(),
        left: max_values,
        built: MAX_BUILT_VALUES,
        built_bytes: MAX_BUILT_BYTES,
    };
    let mut id = None;
    let mut de = serde_json::Deserializer::from_str(text);
    let result = de
        .deserialize_map(Top {
            state: &mut state,
            id: &mut id,
        })
        .ok()?;
    de.end().ok()?;
    let result: &'a str = result.get();
    let mut de = serde_json::Deserializer::from_str(result);
    let node = Node {
        state: &mut state,
        depth: 0,
        in_metadata: false,
        metadata_root: false,
        want: Want::Result,
        context_id: false,
    };
    let out = node.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(Untouched {
        result,
        projection: out.value.unwrap_or(Value::Null),
        id,
    })
}

/// The caller's response around the agent's `result` as it came (the full pass writes the
/// same keys in the same order).
pub fn respond(result: &str, id: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(result.len() + 48);
    out.extend_from_slice(b"{\"result\":");
    out.extend_from_slice(result.as_bytes());
    out.extend_from_slice(b",\"jsonrpc\":\"2.0\",\"id\":");
    if serde_json::to_writer(&mut out, id).is_err() {
        out.extend_from_slice(b"null");
    }
    out.push(b'}');
    out
}

/// Why the scan gave up: never shown to anyone (the full pass decides).
fn fallback<E: de::Error>() -> E {
    E::custom("fallback")
}

/// The response object: its one `result`, unparsed (the second step reads it); no `error`.
/// The other members are dropped by the full pass too, but are read as strictly as it reads
/// them (serde_json's `IgnoredAny` lets a lone surrogate or a number out of range through).
struct Top<'s, 'c, 'de> {
    state: &'s mut State<'c, 'de>,
    /// The response's `id`, built whole (the relay compares it with the request's).
    id: &'s mut Option<Value>,
}

impl<'de> Visitor<'de> for Top<'_, '_, 'de> {
    type Value = &'de RawValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-RPC response object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // The response object is a value (its `result` is counted where it is read).
        self.state.count()?;
        let mut result = None;
        while let Some(key) = map.next_key_seed(KeySeed)? {
            self.state.count()?;
            match &*key {
                "result" if result.is_none() => result = Some(map.next_value::<&RawValue>()?),
                "result" | "error" => return Err(fallback()),
                _ => {
                    let is_id = key == "id";
                    let out = map.next_value_seed(Node {
                        state: &mut *self.state,
                        depth: 1,
                        in_metadata: true,
                        metadata_root: false,
                        want: if is_id { Want::All } else { Want::Skip },
                        context_id: false,
                    })?;
                    if is_id {
                        *self.id = out.value;
                    }
                }
            }
        }
        result.ok_or_else(fallback)
    }
}

/// A key, borrowed from the input when it holds no escape.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// The scan's state: the rules, and the keys of the objects being read (one stack for the
/// whole answer: an object's keys are its slice from where it started).
struct State<'c, 'de> {
    /// `None`: only the projection is wanted ([`project`]), whatever cleaning would change.
    cleaning: Option<Cleaning<'c>>,
    keys: Vec<Cow<'de, str>>,
    /// Values the response may still hold (counted as the full pass counts them).
    left: usize,
    /// Values the scan may still build, and bytes of their strings and keys
    /// ([`MAX_BUILT_VALUES`], [`MAX_BUILT_BYTES`]).
    built: usize,
    built_bytes: usize,
}

impl State<'_, '_> {
    /// Counts one value; past the bound the full pass decides (and refuses).
    fn count<E: de::Error>(&mut self) -> Result<(), E> {
        self.left = self.left.checked_sub(1).ok_or_else(fallback)?;
        Ok(())
    }

    /// Counts one value built, with `bytes` of string or key; past the bounds the full pass
    /// decides.
    fn build<E: de::Error>(&mut self, bytes: usize) -> Result<(), E> {
        self.built = self.built.checked_sub(1).ok_or_else(fallback)?;
        self.build_bytes(bytes)
    }

    /// Counts `bytes` of a string built.
    fn build_bytes<E: de::Error>(&mut self, bytes: usize) -> Result<(), E> {
        self.built_bytes = self.built_bytes.checked_sub(bytes).ok_or_else(fallback)?;
        Ok(())
    }
}

/// What to build of a value: nothing, the registry's projection at one of its levels, or
/// all of it (a `metadata` object, for the redaction check). The projection holds every
/// member [`crate::state::registry::Shape::holds`] and the registry's facts read, so that
/// both decide alike on it and on the whole answer; but the Messages and Artifacts a Task
/// lists, and a status's Message, are checked here as they are read (what
/// [`crate::state::registry::Shape`] requires of them) and left out of it: one that fails
/// sends the answer to the full pass, which refuses it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Skip,
    /// A string as it is; anything else as `null` (ids and enums are read as strings only).
    Scalar,
    /// An array as `[]` (only that it is one is read: a Message's or an Artifact's `parts`);
    /// anything else as `null`.
    Array,
    /// The result: the shapes the registry reads and the members a bare Task or push config
    /// has.
    Result,
    /// A `task`, `statusUpdate`, `artifactUpdate` or `message`, an update's artifact: its
    /// ids, enums, status and parts.
    Entity,
    /// A `status`: its state and timestamp.
    Status,
    /// A Task's `history`: a list of [`Want::Message`]s, else the full pass.
    Messages,
    /// A Task's `artifacts`: a list of [`Want::Artifact`]s, else the full pass.
    Artifacts,
    /// A Message checked, not built: `messageId`, `role` and `parts`, its ids strings.
    Message,
    /// An Artifact checked, not built: `artifactId` and `parts`.
    Artifact,
    /// A member of a checked Message or Artifact: what kind of value it is, nothing built.
    Check,
    /// A list of push configs.
    Configs,
    Config,
    All,
}

impl Want {
    /// What to build of the value under `key` in an object built as `self`.
    fn child(self, key: &str) -> Want {
        match (self, key) {
            (Want::All, _) => Want::All,
            (Want::Result, "task" | "statusUpdate" | "artifactUpdate" | "message") => Want::Entity,
            (Want::Result | Want::Entity, "status") => Want::Status,
            (Want::Result | Want::Entity, "history") => Want::Messages,
            (Want::Result | Want::Entity, "artifacts") => Want::Artifacts,
            (
                Want::Result,
                "id" | "contextId" | "taskId" | "messageId" | "tasks" | "url" | "nextPageToken",
            ) => Want::Scalar,
            (Want::Result, "configs") => Want::Configs,
            (Want::Config, "taskId" | "id" | "url") => Want::Scalar,
            (Want::Entity, "id" | "contextId" | "taskId" | "messageId" | "role" | "artifactId") => {
                Want::Scalar
            }
            (Want::Entity, "parts") => Want::Array,
            (Want::Entity, "artifact") => Want::Entity,
            (Want::Status, "state" | "timestamp") => Want::Scalar,
            (Want::Status, "message") => Want::Message,
            (Want::Message, "messageId" | "role" | "parts" | "contextId" | "taskId") => Want::Check,
            (Want::Artifact, "artifactId" | "parts") => Want::Check,
            _ => Want::Skip,
        }
    }

    /// What to build of each item of an array built as `self`.
    fn item(self) -> Want {
        match self {
            Want::All => Want::All,
            Want::Configs => Want::Config,
            Want::Messages => Want::Message,
            Want::Artifacts => Want::Artifact,
            _ => Want::Skip,
        }
    }

    fn builds_object(self) -> bool {
        matches!(
            self,
            Want::Result | Want::Entity | Want::Status | Want::Config | Want::All
        )
    }

    fn builds_array(self) -> bool {
        matches!(self, Want::All | Want::Result | Want::Configs | Want::Array)
    }

    /// Whether the value is in the projection at all.
    fn projected(self) -> bool {
        !matches!(
            self,
            Want::Skip
                | Want::Check
                | Want::Message
                | Want::Artifact
                | Want::Messages
                | Want::Artifacts
        )
    }

    /// A Message, an Artifact or a list of them: any other kind of value is for the full
    /// pass to refuse.
    fn checks_structure(self) -> bool {
        matches!(
            self,
            Want::Message | Want::Artifact | Want::Messages | Want::Artifacts
        )
    }
}

/// What the check of one Message or Artifact saw of its members ([`Want::Message`],
/// [`Want::Artifact`]): the rules of [`crate::state::registry::Shape`] for them.
#[derive(Default)]
struct Members {
    id: bool,
    role: bool,
    parts: bool,
    /// An optional id that is not a string.
    bad: bool,
}

impl Members {
    fn note(&mut self, want: Want, key: &str, kind: Kind) {
        match (want, key) {
            (Want::Message, "messageId") | (Want::Artifact, "artifactId") => {
                self.id = matches!(kind, Kind::String | Kind::Role);
            }
            (Want::Message, "role") => self.role = kind == Kind::Role,
            (Want::Message | Want::Artifact, "parts") => self.parts = kind == Kind::Array,
            (Want::Message, "contextId" | "taskId") => self.bad |= !kind.is_string(),
            _ => {}
        }
    }

    fn hold(&self, want: Want) -> bool {
        self.id && self.parts && !self.bad && (want == Want::Artifact || self.role)
    }
}

/// What a value was, for its parent's push-config check and the checks of [`Members`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A non-empty string (not a role name under [`Want::Check`]).
    String,
    EmptyString,
    /// Under [`Want::Check`], one of A2A's role names.
    Role,
    Object,
    Array,
    Other,
}

impl Kind {
    fn is_string(self) -> bool {
        matches!(self, Kind::String | Kind::EmptyString | Kind::Role)
    }
}

struct Out {
    kind: Kind,
    value: Option<Value>,
}

impl Out {
    /// A scalar as `want` has it built.
    fn scalar(want: Want, kind: Kind, v: impl FnOnce() -> Value) -> Out {
        let value = match want {
            _ if !want.projected() => None,
            // (a result that is no object is no shape but for what it is: `null` is a
            // delete's answer, anything else none)
            Want::All | Want::Result => Some(v()),
            Want::Scalar if kind.is_string() => Some(v()),
            _ => Some(Value::Null),
        };
        Out { kind, value }
    }
}

/// One value of the result, read with its place in the answer.
struct Node<'s, 'c, 'de> {
    state: &'s mut State<'c, 'de>,
    depth: usize,
    /// Inside a `metadata` object (whose redaction is decided as a whole).
    in_metadata: bool,
    /// The value under a `metadata` key outside any metadata: built whole and, if it is an
    /// object, given to the redaction.
    metadata_root: bool,
    want: Want,
    /// The value under a `contextId` key.
    context_id: bool,
}

impl<'de> DeserializeSeed<'de> for Node<'_, '_, 'de> {
    type Value = Out;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Out, D::Error> {
        self.state.count()?;
        d.deserialize_any(self)
    }
}

impl Node<'_, '_, '_> {
    fn string<E: de::Error>(&mut self, s: &str) -> Result<Out, E> {
        if let Some(cleaning) = &self.state.cleaning {
            if self.context_id && is_context_alias(s) {
                return Err(fallback());
            }
            if cleaning.redact_paths && s.contains('/') && without_paths(s).is_some() {
                return Err(fallback());
            }
        }
        let kind = if s.is_empty() {
            Kind::EmptyString
        } else if self.want == Want::Check && ROLES.contains(&s) {
            Kind::Role
        } else {
            Kind::String
        };
        let out = self.scalar(kind, || Value::from(s))?;
        // (its text is built only where it is projected as it is)
        if matches!(out.value, Some(Value::String(_))) {
            self.state.build_bytes(s.len())?;
        }
        Ok(out)
    }

    /// A value that is no object nor array, as `want` has it built; where a Message, an
    /// Artifact or a list of them is wanted, the full pass decides (and refuses).
    fn scalar<E: de::Error>(&mut self, kind: Kind, v: impl FnOnce() -> Value) -> Result<Out, E> {
        if self.want.checks_structure() {
            return Err(fallback());
        }
        let out = Out::scalar(self.want, kind, v);
        if out.value.is_some() {
            self.state.build(0)?;
        }
        Ok(out)
    }
}

impl<'de> Visitor<'de> for Node<'_, '_, 'de> {
    type Value = Out;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<Out, E> {
        self.scalar(Kind::Other, || Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(mut self, v: i64) -> Result<Out, E> {
        self.scalar(Kind::Other, || Value::from(v))
    }

    fn visit_u64<E: de::Error>(mut self, v: u64) -> Result<Out, E> {
        self.scalar(Kind::Other, || Value::from(v))
    }

    fn visit_f64<E: de::Error>(mut self, v: f64) -> Result<Out, E> {
        self.scalar(Kind::Other, || Value::from(v))
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<Out, E> {
        self.scalar(Kind::Other, || Value::Null)
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<Out, E> {
        self.string(v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Out, A::Error> {
        if self.depth >= MAX_DEPTH || matches!(self.want, Want::Message | Want::Artifact) {
            return Err(fallback());
        }
        let item = self.want.item();
        let mut items = Vec::new();
        loop {
            let child = Node {
                state: &mut *self.state,
                depth: self.depth + 1,
                in_metadata: self.in_metadata,
                metadata_root: false,
                want: item,
                context_id: false,
            };
            match seq.next_element_seed(child)? {
                Some(out) => items.extend(out.value),
                None => break,
            }
        }
        let value = match self.want {
            w if !w.projected() => None,
            w if w.builds_array() => Some(Value::Array(items)),
            _ => Some(Value::Null),
        };
        if value.is_some() {
            self.state.build(0)?;
        }
        Ok(Out {
            kind: Kind::Array,
            value,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Out, A::Error> {
        if self.depth >= MAX_DEPTH || matches!(self.want, Want::Messages | Want::Artifacts) {
            return Err(fallback());
        }
        let mut members = Members::default();
        let base = self.state.keys.len();
        let mut built = self.want.builds_object().then(Map::new);
        // The push-config shape (`redact_push_config`): a string `url` beside a `token` or
        // an `authentication` object.
        let (mut url, mut token, mut authentication) = (false, false, false);
        while let Some(key) = map.next_key_seed(KeySeed)? {
            self.state.count()?;
            // (without cleaning, `metadata` is read as any other member: no redaction to decide)
            let metadata_root =
                self.state.cleaning.is_some() && !self.in_metadata && key == "metadata";
            let want = if metadata_root {
                Want::All
            } else {
                self.want.child(&key)
            };
            // Keys are compared where a duplicate could change what is relayed or projected:
            // every key the scan reads; only the keys [`project`] builds or checks (a handful
            // of names per object, so a duplicate is found among a few).
            let compared = self.state.cleaning.is_some() || want != Want::Skip;
            let keys = &self.state.keys[base..];
            if compared
                && (keys.len() >= MAX_KEYS || key.len() > MAX_KEY_BYTES || keys.contains(&key))
            {
                return Err(fallback());
            }
            if self.want == Want::Result && key == "jsonrpc" {
                return Err(fallback());
            }
            let child = Node {
                state: &mut *self.state,
                depth: self.depth + 1,
                in_metadata: self.in_metadata || self.metadata_root,
                metadata_root,
                want,
                context_id: key == "contextId",
            };
            let out = map.next_value_seed(child)?;
            match (&*key, out.kind) {
                ("url", k) if k.is_string() => url = true,
                ("token", k) if k.is_string() => token = true,
                ("authentication", Kind::Object) => authentication = true,
                _ => {}
            }
            members.note(self.want, &key, out.kind);
            let mut value = out.value;
            if let (true, Some(cleaning)) = (metadata_root, &self.state.cleaning) {
                if let Some(v @ Value::Object(_)) = &mut value {
                    if redact_metadata(v, cleaning.metadata) > 0 {
                        return Err(fallback());
                    }
                }
                if self.want != Want::All {
                    value = None;
                }
            }
            if let (Some(obj), Some(v)) = (built.as_mut(), value) {
                self.state.build(key.len())?;
                obj.insert(key.to_string(), v);
            }
            if compared {
                self.state.keys.push(key);
            }
        }
        self.state.keys.truncate(base);
        if url && (token || authentication) && self.state.cleaning.is_some() {
            return Err(fallback());
        }
        if matches!(self.want, Want::Message | Want::Artifact) && !members.hold(self.want) {
            return Err(fallback());
        }
        // Whatever the registry reads keeps its key in the projection, whatever its type
        // (`Shape::holds` reads which keys a result has).
        let value = match self.want {
            w if !w.projected() => None,
            _ => Some(built.map_or(Value::Null, Value::Object)),
        };
        if value.is_some() {
            self.state.build(0)?;
        }
        Ok(Out {
            kind: Kind::Object,
            value,
        })
    }
}

#[cfg(test)]
mod tests;
