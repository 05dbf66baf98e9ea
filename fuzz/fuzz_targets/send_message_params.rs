//! Structure-aware: `check_params(SendMessage, params, rules)` on generated SendMessage params
//! (messages with parts of every kind: text/raw/url/data; media types from the known lists,
//! with parameters, in odd case, or junk; base64 valid, unpadded or broken; file URLs with
//! traversal, encodings, links and odd names into a real tree on disk; metadata with `cwd`
//! and denied keys; push configs), plus unknown members anywhere.
//!
//! Properties:
//! - never panics;
//! - what it accepts, fed through `check_params` again, is accepted again, unchanged (a fixed
//!   point), naming the same workspace and push URL;
//! - every forwarded file URL is a `file:///` URL whose path is inside both the request's
//!   workspace and an allowed root (component-wise, no `.`/`..`), names a regular file, and
//!   the request named a workspace;
//! - the forwarded workspace `cwd` is the lexically normalized path, inside a root;
//! - no forwarded part holds a key outside the known set, and each has a `mediaType`;
//! - a refusal is a -32602 (-32005 for an unsupported media type) whose message names neither the workspace tree nor a file.
#![no_main]

use a2a_edge::a2a::Method;
use a2a_edge::validate::media::{BUILTIN_MULTIMODAL, BUILTIN_TEXT};
use a2a_edge::validate::request::check_params;
use a2a_edge_fuzz::{expand, fixture, inside_roots, ArbJson, Key, ROOT_FILES};
use arbitrary::Arbitrary;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE};
use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

#[derive(Arbitrary, Debug)]
struct Input {
    streaming: bool,
    principal_ops: bool,
    tenant: Option<Text>,
    message: Option<Message>,
    request_metadata: Option<Metadata>,
    configuration: Option<Configuration>,
    extra: Vec<(Key, ArbJson)>,
}

#[derive(Arbitrary, Debug)]
struct Message {
    message_id: Option<Text>,
    role: Role,
    context_id: Option<Text>,
    task_id: Option<Text>,
    extensions: Option<Vec<Text>>,
    reference_task_ids: Option<Vec<Text>>,
    parts: Parts,
    metadata: Option<Metadata>,
    extra: Vec<(Key, ArbJson)>,
}

#[derive(Arbitrary, Debug)]
enum Role {
    User,
    UserNumber,
    Agent,
    Other(ArbJson),
    Missing,
}

#[derive(Arbitrary, Debug)]
enum Parts {
    List(Vec<Part>),
    Empty,
    Many(u16),
    Other(ArbJson),
    Missing,
}

/// A string from a small set the validators care about, or any string.
#[derive(Arbitrary, Debug)]
enum Text {
    Id(u8),
    Raw(String),
    Long(u16, char),
}

const IDS: &[&str] = &[
    "m1",
    "ctx-1",
    "task-1",
    "a:b.c_d-e",
    "",
    " ",
    "id with space",
    "\u{0}",
    "\u{202e}rtl",
    "https://example.com/ext",
    "urn:a2a:ext",
    "text/plain",
];

impl Text {
    fn value(&self) -> Value {
        Value::String(match self {
            Text::Id(i) => IDS[*i as usize % IDS.len()].to_string(),
            Text::Raw(s) => expand(s),
            Text::Long(n, c) => std::iter::repeat_n(*c, *n as usize % 600).collect(),
        })
    }
}

#[derive(Arbitrary, Debug)]
struct Part {
    content: Content,
    /// A second content member (a part must hold exactly one).
    second: Option<Content>,
    media_type: Option<MediaType>,
    filename: Option<FileName>,
    metadata: Option<ArbJson>,
    extra: Vec<(Key, ArbJson)>,
}

#[derive(Arbitrary, Debug)]
enum Content {
    Text(String),
    Raw(Base64),
    Url(FileUrl),
    Data(Data),
    Missing,
    Null(u8),
    WrongType(u8, ArbJson),
}

#[derive(Arbitrary, Debug)]
enum Data {
    Json(ArbJson),
    Binary(Base64),
    BinaryKey(u8, Base64),
    Both(Base64, Base64),
    Null,
}

#[derive(Arbitrary, Debug)]
enum Base64 {
    Valid(Vec<u8>),
    Utf8(String),
    NoPad(Vec<u8>),
    UrlSafe(Vec<u8>),
    Spaced(Vec<u8>),
    Raw(String),
    Large(u32),
}

impl Base64 {
    fn value(&self) -> Value {
        Value::String(match self {
            Base64::Valid(b) => STANDARD.encode(b),
            Base64::Utf8(s) => STANDARD.encode(s),
            Base64::NoPad(b) => STANDARD_NO_PAD.encode(b),
            Base64::UrlSafe(b) => URL_SAFE.encode(b),
            Base64::Spaced(b) => {
                let s = STANDARD.encode(b);
                let mid = s.len() / 2;
                format!("{} {}", &s[..mid], &s[mid..])
            }
            Base64::Raw(s) => s.clone(),
            // Around the 1 MiB and 5 MiB limits, without building megabytes every time.
            Base64::Large(n) => {
                let len = match n % 4 {
                    0 => (1 << 20) - 3 + (n / 4 % 7) as usize,
                    1 => (5 << 20) - 3 + (n / 4 % 7) as usize,
                    _ => (n % 4096) as usize,
                };
                STANDARD.encode(vec![b'a'; len])
            }
        })
    }
}

#[derive(Arbitrary, Debug)]
enum MediaType {
    Text(u8),
    Multimodal(u8),
    Extra(bool),
    WithCharset(u8, u8),
    WithParam(u8, String),
    Upper(u8),
    Junk(String),
    Empty,
    WrongType(ArbJson),
}

const CHARSETS: &[&str] = &[
    "; charset=utf-8",
    ";charset=UTF-8",
    "; charset=\"us-ascii\"",
    "; charset=latin1",
    "; charset=utf-8; charset=utf-8",
    ";",
    "; ;charset=utf-8",
    " ",
    "; charset=",
];

impl MediaType {
    fn value(&self) -> Value {
        let text = |i: &u8| BUILTIN_TEXT[*i as usize % BUILTIN_TEXT.len()];
        let multi = |i: &u8| BUILTIN_MULTIMODAL[*i as usize % BUILTIN_MULTIMODAL.len()];
        Value::String(match self {
            MediaType::Text(i) => text(i).to_string(),
            MediaType::Multimodal(i) => multi(i).to_string(),
            MediaType::Extra(t) => if *t {
                "Text/X-Terraform"
            } else {
                "image/svg+xml"
            }
            .into(),
            MediaType::WithCharset(i, c) => {
                let base = if i % 2 == 0 { text(i) } else { multi(i) };
                format!("{base}{}", CHARSETS[*c as usize % CHARSETS.len()])
            }
            MediaType::WithParam(i, p) => format!("{}; {p}", text(i)),
            MediaType::Upper(i) => text(i).to_ascii_uppercase(),
            MediaType::Junk(s) => s.clone(),
            MediaType::Empty => String::new(),
            MediaType::WrongType(v) => return v.to_value(),
        })
    }
}

#[derive(Arbitrary, Debug)]
enum FileName {
    Plain(String),
    Known(u8),
    WrongType(ArbJson),
}

const FILE_NAMES: &[&str] = &[
    "x.png",
    "",
    ".",
    "..",
    "a/b",
    "a\\b",
    "nul\u{0}",
    "rtl\u{202e}gnp.exe",
    "tab\t",
];

/// A file URL assembled from parts that matter to the checks.
#[derive(Arbitrary, Debug)]
struct FileUrl {
    prefix: u8,
    base: u8,
    segments: Vec<Segment>,
    suffix: u8,
}

const URL_PREFIXES: &[&str] = &[
    "file://",
    "file://",
    "file://",
    "FILE://",
    "file:",
    "file:/",
    "file://localhost",
    "file://host",
    "http://",
    "file:////",
    "file:///%2e%2e",
    " file://",
    "file:\\\\",
    "data:",
];

const URL_SUFFIXES: &[&str] = &["", "", "", "?q", "#f", "/", "%00", "%2F", " ", "\t"];

#[derive(Arbitrary, Debug)]
enum Segment {
    File(u8),
    Dot,
    DotDot,
    EncodedDotDot(u8),
    EncodedSlash,
    DoubleEncoded,
    Empty,
    Raw(String),
    Encoded(String),
}

const DOTDOTS: &[&str] = &[
    "%2e%2e",
    "%2E%2e",
    ".%2e",
    "%2e.",
    "..%2f..",
    "..%5c..",
    "%252e%252e",
];

impl FileUrl {
    fn value(&self) -> Value {
        let f = fixture();
        let prefix = URL_PREFIXES[self.prefix as usize % URL_PREFIXES.len()];
        let base = match self.base % 5 {
            0 | 1 => f.root.to_string_lossy().into_owned(),
            2 => f.root2.to_string_lossy().into_owned(),
            3 => f.outside.to_string_lossy().into_owned(),
            _ => String::new(),
        };
        let mut s = format!("{prefix}{base}");
        for seg in &self.segments {
            s.push('/');
            match seg {
                Segment::File(i) => s.push_str(&encode(ROOT_FILES[*i as usize % ROOT_FILES.len()])),
                Segment::Dot => s.push('.'),
                Segment::DotDot => s.push_str(".."),
                Segment::EncodedDotDot(i) => s.push_str(DOTDOTS[*i as usize % DOTDOTS.len()]),
                Segment::EncodedSlash => s.push_str("%2F"),
                Segment::DoubleEncoded => s.push_str("%252F"),
                Segment::Empty => {}
                Segment::Raw(r) => s.push_str(r),
                Segment::Encoded(r) => s.push_str(&encode(r)),
            }
        }
        s.push_str(URL_SUFFIXES[self.suffix as usize % URL_SUFFIXES.len()]);
        Value::String(s)
    }
}

/// Percent-encodes every byte outside `[A-Za-z0-9._~/-]`.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"._~/-".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[derive(Arbitrary, Debug)]
struct Metadata {
    cwd: Option<Cwd>,
    /// Denied or allowed keys under `iac_code`, or dotted at the top.
    keys: Vec<(u8, ArbJson)>,
    iac_code_extra: Vec<(Key, ArbJson)>,
    extra: Vec<(Key, ArbJson)>,
    iac_code_not_object: Option<ArbJson>,
    whole_not_object: Option<ArbJson>,
}

const META_KEYS: &[(&str, bool)] = &[
    ("iac_code_api_key", true),
    ("llm_headers", true),
    ("iac_code_model", true),
    ("alibaba_cloud_access_key_id", true),
    ("alibaba_cloud_", true),
    ("alibaba_clou", true),
    ("iac_code_api_key_hint", true),
    ("IAC_CODE_API_KEY", true),
    ("iac_code.iac_code_api_key", false),
    ("iac_code..llm_headers", false),
    ("iac_code", false),
    ("IAC_CODE", false),
];

#[derive(Arbitrary, Debug)]
enum Cwd {
    Root(u8),
    Path(u8, String),
    Raw(String),
    NotString(ArbJson),
    Null,
}

const CWD_TAILS: &[&str] = &[
    "",
    "/",
    "/sub",
    "/sub/deep",
    "/sub/../sub",
    "/./sub//deep/",
    "/..",
    "/../outside",
    "/link-sub",
    "/link-out",
    "/link-root2",
    "/link-up",
    "/link-slash",
    "/loop",
    "/dangling",
    "/hello.txt",
    "/missing",
    "/missing/deeper",
    "/sub/deep/../../..",
];

impl Cwd {
    fn value(&self) -> Value {
        let f = fixture();
        match self {
            Cwd::Root(i) => {
                let base = if i % 3 == 0 { &f.root2 } else { &f.root };
                Value::String(format!(
                    "{}{}",
                    base.display(),
                    CWD_TAILS[*i as usize % CWD_TAILS.len()]
                ))
            }
            Cwd::Path(i, tail) => Value::String(format!(
                "{}{}{}",
                f.root.display(),
                CWD_TAILS[*i as usize % CWD_TAILS.len()],
                tail
            )),
            Cwd::Raw(s) => Value::String(expand(s)),
            Cwd::NotString(v) => v.to_value(),
            Cwd::Null => Value::Null,
        }
    }
}

impl Metadata {
    fn value(&self) -> Value {
        if let Some(v) = &self.whole_not_object {
            return v.to_value();
        }
        let mut iac = Map::new();
        let mut top = Map::new();
        if let Some(cwd) = &self.cwd {
            iac.insert("cwd".into(), cwd.value());
        }
        for (i, v) in &self.keys {
            let (key, nested) = META_KEYS[*i as usize % META_KEYS.len()];
            if nested {
                iac.insert(key.into(), v.to_value());
            } else {
                top.insert(key.into(), v.to_value());
            }
        }
        for (k, v) in &self.iac_code_extra {
            iac.insert(k.as_string(), v.to_value());
        }
        for (k, v) in &self.extra {
            top.insert(k.as_string(), v.to_value());
        }
        let iac = match &self.iac_code_not_object {
            Some(v) => v.to_value(),
            None => Value::Object(iac),
        };
        top.insert("iac_code".into(), iac);
        Value::Object(top)
    }
}

#[derive(Arbitrary, Debug)]
struct Configuration {
    accepted_output_modes: Option<Vec<Text>>,
    history_length: Option<ArbJson>,
    return_immediately: Option<ArbJson>,
    push: Option<PushConfig>,
    extra: Vec<(Key, ArbJson)>,
}

#[derive(Arbitrary, Debug)]
struct PushConfig {
    url: PushUrl,
    task_id: Option<Text>,
    id: Option<Text>,
    token: Option<Text>,
    authentication: Option<(Option<Text>, Option<Text>, Vec<(Key, ArbJson)>)>,
    extra: Vec<(Key, ArbJson)>,
}

#[derive(Arbitrary, Debug)]
enum PushUrl {
    Known(u8),
    Raw(String),
    NotString(ArbJson),
}

const PUSH_URLS: &[&str] = &[
    "https://hooks.example.com/a2a",
    "http://hooks.example.com/cb",
    "http://127.1/",
    "http://2130706433/",
    "http://LOCALHOST./",
    "https://[::ffff:127.0.0.1]/",
    "https://100.64.0.1/",
    "https://user:pw@example.com/",
    "https://metadata/",
    "ftp://example.com/",
    "https://8.8.8.8/",
    "https://[2606:4700::1111]/",
];

impl PushUrl {
    fn value(&self) -> Value {
        match self {
            PushUrl::Known(i) => Value::from(PUSH_URLS[*i as usize % PUSH_URLS.len()]),
            PushUrl::Raw(s) => Value::String(s.clone()),
            PushUrl::NotString(v) => v.to_value(),
        }
    }
}

fn extend(obj: &mut Map<String, Value>, extra: &[(Key, ArbJson)]) {
    for (k, v) in extra {
        obj.entry(k.as_string()).or_insert_with(|| v.to_value());
    }
}

fn content(c: &Content, obj: &mut Map<String, Value>) {
    let (key, value) = match c {
        Content::Text(t) => ("text", Value::String(t.clone())),
        Content::Raw(b) => ("raw", b.value()),
        Content::Url(u) => ("url", u.value()),
        Content::Data(Data::Json(v)) => ("data", v.to_value()),
        Content::Data(Data::Binary(b)) => ("data", json!({"bytes": b.value()})),
        Content::Data(Data::BinaryKey(k, b)) => {
            let key = ["base64", "bytes", "data", "b64"][*k as usize % 4];
            ("data", json!({ key: b.value() }))
        }
        Content::Data(Data::Both(a, b)) => {
            ("data", json!({"bytes": a.value(), "base64": b.value()}))
        }
        Content::Data(Data::Null) => ("data", Value::Null),
        Content::Missing => return,
        Content::Null(k) => (["text", "raw", "url"][*k as usize % 3], Value::Null),
        Content::WrongType(k, v) => (
            ["text", "raw", "url", "data"][*k as usize % 4],
            v.to_value(),
        ),
    };
    obj.insert(key.into(), value);
}

impl Part {
    fn value(&self) -> Value {
        let mut obj = Map::new();
        content(&self.content, &mut obj);
        if let Some(second) = &self.second {
            content(second, &mut obj);
        }
        if let Some(m) = &self.media_type {
            obj.insert("mediaType".into(), m.value());
        }
        match &self.filename {
            None => {}
            Some(FileName::Plain(s)) => {
                obj.insert("filename".into(), Value::String(s.clone()));
            }
            Some(FileName::Known(i)) => {
                obj.insert(
                    "filename".into(),
                    Value::from(FILE_NAMES[*i as usize % FILE_NAMES.len()]),
                );
            }
            Some(FileName::WrongType(v)) => {
                obj.insert("filename".into(), v.to_value());
            }
        }
        if let Some(m) = &self.metadata {
            obj.insert("metadata".into(), m.to_value());
        }
        extend(&mut obj, &self.extra);
        Value::Object(obj)
    }
}

impl Input {
    fn params(&self) -> Map<String, Value> {
        let mut p = Map::new();
        if let Some(t) = &self.tenant {
            p.insert("tenant".into(), t.value());
        }
        if let Some(m) = &self.message {
            let mut msg = Map::new();
            if let Some(id) = &m.message_id {
                msg.insert("messageId".into(), id.value());
            }
            match &m.role {
                Role::User => {
                    msg.insert("role".into(), Value::from("ROLE_USER"));
                }
                Role::UserNumber => {
                    msg.insert("role".into(), Value::from(1));
                }
                Role::Agent => {
                    msg.insert("role".into(), Value::from("ROLE_AGENT"));
                }
                Role::Other(v) => {
                    msg.insert("role".into(), v.to_value());
                }
                Role::Missing => {}
            }
            for (key, value) in [("contextId", &m.context_id), ("taskId", &m.task_id)] {
                if let Some(v) = value {
                    msg.insert(key.into(), v.value());
                }
            }
            for (key, value) in [
                ("extensions", &m.extensions),
                ("referenceTaskIds", &m.reference_task_ids),
            ] {
                if let Some(list) = value {
                    msg.insert(
                        key.into(),
                        Value::Array(list.iter().map(Text::value).collect()),
                    );
                }
            }
            match &m.parts {
                Parts::List(list) => {
                    msg.insert(
                        "parts".into(),
                        Value::Array(list.iter().map(Part::value).collect()),
                    );
                }
                Parts::Empty => {
                    msg.insert("parts".into(), json!([]));
                }
                Parts::Many(n) => {
                    let n = 250 + (*n as usize % 12);
                    msg.insert("parts".into(), Value::Array(vec![json!({"text": "x"}); n]));
                }
                Parts::Other(v) => {
                    msg.insert("parts".into(), v.to_value());
                }
                Parts::Missing => {}
            }
            if let Some(meta) = &m.metadata {
                msg.insert("metadata".into(), meta.value());
            }
            extend(&mut msg, &m.extra);
            p.insert("message".into(), Value::Object(msg));
        }
        if let Some(meta) = &self.request_metadata {
            p.insert("metadata".into(), meta.value());
        }
        if let Some(c) = &self.configuration {
            let mut cfg = Map::new();
            if let Some(modes) = &c.accepted_output_modes {
                cfg.insert(
                    "acceptedOutputModes".into(),
                    Value::Array(modes.iter().map(Text::value).collect()),
                );
            }
            if let Some(h) = &c.history_length {
                cfg.insert("historyLength".into(), h.to_value());
            }
            if let Some(r) = &c.return_immediately {
                cfg.insert("returnImmediately".into(), r.to_value());
            }
            if let Some(push) = &c.push {
                let mut pc = Map::new();
                pc.insert("url".into(), push.url.value());
                for (key, value) in [
                    ("taskId", &push.task_id),
                    ("id", &push.id),
                    ("token", &push.token),
                ] {
                    if let Some(v) = value {
                        pc.insert(key.into(), v.value());
                    }
                }
                if let Some((scheme, creds, extra)) = &push.authentication {
                    let mut a = Map::new();
                    if let Some(s) = scheme {
                        a.insert("scheme".into(), s.value());
                    }
                    if let Some(c) = creds {
                        a.insert("credentials".into(), c.value());
                    }
                    extend(&mut a, extra);
                    pc.insert("authentication".into(), Value::Object(a));
                }
                extend(&mut pc, &push.extra);
                cfg.insert("taskPushNotificationConfig".into(), Value::Object(pc));
            }
            extend(&mut cfg, &c.extra);
            p.insert("configuration".into(), Value::Object(cfg));
        }
        extend(&mut p, &self.extra);
        p
    }
}

const PART_KEYS: [&str; 7] = [
    "text",
    "raw",
    "url",
    "data",
    "mediaType",
    "filename",
    "metadata",
];

// Input starting with `>`: SendMessage params as JSON (seed files, from the test cases;
// `@R`, `@S`, `@O` stand for the fixture's directories); otherwise generated params.
fuzz_target!(|data: &[u8]| {
    if let Some(json) = data.strip_prefix(b">") {
        let Ok(text) = std::str::from_utf8(json) else {
            return;
        };
        if let Ok(Value::Object(params)) = serde_json::from_str::<Value>(&expand(text)) {
            check(Method::SendMessage, "p", params);
        }
        return;
    }
    let Ok(input) = Input::arbitrary_take_rest(arbitrary::Unstructured::new(data)) else {
        return;
    };
    let method = if input.streaming {
        Method::SendStreamingMessage
    } else {
        Method::SendMessage
    };
    let principal = if input.principal_ops { "ops" } else { "p" };
    check(method, principal, input.params());
});

fn check(method: Method, principal: &str, params: Map<String, Value>) {
    let f = fixture();
    let rules = f.requests.rules(principal);
    let roots = [f.root.clone(), f.root2.clone()];

    let (out, checked) = match check_params(method, params, &rules) {
        Ok(ok) => ok,
        Err(e) => {
            // -32005 only for a media type or charset the agent does not take (A2A §3.1.1).
            assert!(
                e.code == -32602
                    || (e.code == -32005
                        && matches!(e.reason.as_str(), "part.media_type" | "part.charset")),
                "{e:?}"
            );
            let base = f.base.to_string_lossy();
            for leak in [&*f.root.to_string_lossy(), &*base, "a2a-edge-fuzz"] {
                assert!(!e.message.contains(leak), "the error names a path: {e:?}");
            }
            return;
        }
    };

    // A fixed point: the forwarded params pass again, unchanged.
    let (again, checked_again) = check_params(method, out.clone(), &rules)
        .unwrap_or_else(|e| panic!("forwarded params refused on a second check: {e:?}\n{out:#?}"));
    assert_eq!(again, out, "a second check changed the forwarded params");
    assert_eq!(checked_again.workspace, checked.workspace);
    assert_eq!(
        checked_again.push_url.as_ref().map(|u| u.as_str()),
        checked.push_url.as_ref().map(|u| u.as_str())
    );
    // What is forwarded is plain JSON that the strict parser reads back.
    let bytes = serde_json::to_vec(&out).unwrap();
    let reread = a2a_edge::a2a::json::parse_strict(&bytes, a2a_edge::a2a::json::MAX_DEPTH)
        .expect("forwarded params are not strict JSON");
    assert_eq!(reread, Value::Object(out.clone()));

    if let Some(ws) = &checked.workspace {
        assert!(
            inside_roots(&ws.real, &roots),
            "workspace outside the roots: {ws:?}"
        );
        assert!(ws.real.is_dir(), "workspace is not a directory: {ws:?}");
        assert!(
            ws.logical.is_absolute()
                && ws.logical.components().all(|c| matches!(
                    c,
                    std::path::Component::RootDir | std::path::Component::Normal(_)
                )),
            "workspace not normalized: {ws:?}"
        );
    }
    for meta in [out.get("metadata"), out["message"].get("metadata")]
        .into_iter()
        .flatten()
    {
        if let Some(cwd) = meta.get("iac_code").and_then(|i| i.get("cwd")) {
            let ws = checked
                .workspace
                .as_ref()
                .expect("a cwd is forwarded without a workspace");
            assert_eq!(cwd, &Value::String(ws.forward_cwd()));
        }
    }

    let parts = out["message"]["parts"].as_array().expect("parts");
    for part in parts {
        let part = part.as_object().expect("part object");
        assert!(
            part.keys().all(|k| PART_KEYS.contains(&k.as_str())),
            "{part:?}"
        );
        assert!(
            part.get("mediaType").is_some_and(Value::is_string),
            "{part:?}"
        );
        if let Some(u) = part.get("url") {
            let ws = checked
                .workspace
                .as_ref()
                .expect("a file URL accepted without a workspace");
            let url =
                url::Url::parse(u.as_str().expect("url string")).expect("forwarded URL parses");
            assert_eq!(url.scheme(), "file");
            assert!(url.host().is_none() && url.query().is_none() && url.fragment().is_none());
            let path = url.to_file_path().expect("file URL path");
            assert!(
                inside_roots(&path, &roots),
                "file outside the roots: {path:?}"
            );
            assert!(
                path.starts_with(&ws.real),
                "file outside the workspace: {path:?} {ws:?}"
            );
            let meta = std::fs::symlink_metadata(&path).expect("forwarded file exists");
            assert!(meta.file_type().is_file(), "not a regular file: {path:?}");
            assert_eq!(
                std::fs::canonicalize(&path).unwrap(),
                path,
                "not a real path"
            );
        }
    }
}
