//! Shared pieces of the fuzz targets: a fixed workspace tree on disk, the request policy of
//! the benches, arbitrary JSON values, and the `@R`/`@O` shorthands that make seed files
//! independent of the temporary directory's location.
//!
//! The workspace tree lives at `$TMPDIR/a2a-edge-fuzz-v1/` and is created once per process
//! (idempotently, so parallel fuzzers share it): the same paths in every run, so a crash input
//! reproduces on any machine.

use std::fs;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock};

use a2a_edge::validate::media::MediaTypes;
use a2a_edge::validate::metadata::MetadataPolicy;
use a2a_edge::validate::push_url::PushUrlPolicy;
use a2a_edge::validate::request::RequestPolicy;
use a2a_edge::validate::workspace::WorkspacePolicy;
use arbitrary::Arbitrary;
use serde_json::{Map, Number, Value};

/// The on-disk tree the workspace and file-part targets are checked against.
#[derive(Debug)]
pub struct Fixture {
    /// `$TMPDIR/a2a-edge-fuzz-v1`, as created (maybe not canonical).
    pub base: PathBuf,
    /// The allowed workspace root, real path.
    pub root: PathBuf,
    /// A second allowed root, real path.
    pub root2: PathBuf,
    /// A directory outside every root, real path.
    pub outside: PathBuf,
    /// The policy of the benches with `roots = [root, root2]`, filesystem checked.
    pub requests: Arc<RequestPolicy>,
    /// The same roots, lexical checks only.
    pub lexical: WorkspacePolicy,
}

/// Entries of the allowed root: regular files, odd names, directories, links, a socket.
pub const ROOT_FILES: &[&str] = &[
    "hello.txt",
    "notes.md",
    "data.json",
    "image.png",
    "latin1.txt",
    "empty.txt",
    "big.txt",
    "huge.bin",
    "a b.txt",
    "pct%2e.txt",
    "q?#.txt",
    "back\\slash.txt",
    "\u{fc}mlaut.txt",
    "semi;colon,=.txt",
    "..dots",
    "ctl\u{1}.txt",
    "sub",
    "sub/deep",
    "sub/deep/file.txt",
    "dir.txt",
    "sock",
    "link-sub",
    "link-out",
    "link-secret",
    "link-hello",
    "link-root2",
    "link-up",
    "link-slash",
    "loop",
    "dangling",
];

/// Creates (if needed) and returns the fixture.
pub fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| build_fixture().expect("fuzz fixture"))
}

/// A name beside `path` for writing it aside, then renaming it into place (so a parallel
/// fuzzer never sees half a file).
fn aside(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("/"));
    dir.join(format!(".fuzz-tmp-{}", std::process::id()))
}

fn write_once(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if path.symlink_metadata().is_ok() {
        return Ok(());
    }
    let tmp = aside(path);
    fs::write(&tmp, bytes)?;
    fs::rename(&tmp, path)
}

fn sparse_once(path: &Path, len: u64) -> std::io::Result<()> {
    if path.symlink_metadata().is_ok() {
        return Ok(());
    }
    let tmp = aside(path);
    fs::File::create(&tmp)?.set_len(len)?;
    fs::rename(&tmp, path)
}

fn symlink_once(target: &str, link: &Path) -> std::io::Result<()> {
    match std::os::unix::fs::symlink(target, link) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

fn build_fixture() -> std::io::Result<Fixture> {
    let base = std::env::temp_dir().join("a2a-edge-fuzz-v1");
    let root = base.join("root");
    let root2 = base.join("root2");
    let outside = base.join("outside");
    for d in [
        root.join("sub/deep"),
        root.join("dir.txt"),
        root2.join("ws"),
        outside.join("dir"),
    ] {
        fs::create_dir_all(d)?;
    }
    write_once(&outside.join("secret.txt"), b"outside\n")?;
    write_once(&root2.join("ws/two.txt"), b"two\n")?;
    write_once(&root.join("hello.txt"), b"hello\n")?;
    write_once(&root.join("notes.md"), b"# notes\n")?;
    write_once(&root.join("data.json"), b"{\"a\":1}\n")?;
    write_once(&root.join("image.png"), b"\x89PNG\r\n\x1a\n\xff\xfe\x00")?;
    write_once(&root.join("latin1.txt"), b"caf\xe9\n")?;
    write_once(&root.join("empty.txt"), b"")?;
    sparse_once(&root.join("big.txt"), 2 << 20)?;
    sparse_once(&root.join("huge.bin"), 30 << 20)?;
    for odd in [
        "a b.txt",
        "pct%2e.txt",
        "q?#.txt",
        "back\\slash.txt",
        "\u{fc}mlaut.txt",
        "semi;colon,=.txt",
        "..dots",
        "ctl\u{1}.txt",
    ] {
        write_once(&root.join(odd), b"odd\n")?;
    }
    write_once(
        &root.join(std::ffi::OsStr::from_bytes(b"\xff.txt")),
        b"not utf-8 name\n",
    )?;
    write_once(&root.join("sub/deep/file.txt"), b"deep\n")?;
    let sock = root.join("sock");
    if !sock.exists() {
        let _ = std::os::unix::net::UnixListener::bind(&sock);
    }
    symlink_once("sub", &root.join("link-sub"))?;
    symlink_once("../outside", &root.join("link-out"))?;
    symlink_once("../outside/secret.txt", &root.join("link-secret"))?;
    symlink_once("hello.txt", &root.join("link-hello"))?;
    symlink_once("../root2", &root.join("link-root2"))?;
    symlink_once("..", &root.join("link-up"))?;
    symlink_once("/", &root.join("link-slash"))?;
    symlink_once("loop", &root.join("loop"))?;
    symlink_once("nowhere", &root.join("dangling"))?;

    let root = fs::canonicalize(&root)?;
    let root2 = fs::canonicalize(&root2)?;
    let outside = fs::canonicalize(&outside)?;
    let mut allowed_for = std::collections::BTreeMap::new();
    allowed_for.insert(
        "ops".to_string(),
        vec!["iac_code.llm_headers.X-Trace".to_string()],
    );
    let requests = Arc::new(RequestPolicy {
        media: MediaTypes::new(
            &["text/x-terraform".to_string()],
            &["image/svg+xml".to_string()],
        )
        .expect("media types"),
        workspace: WorkspacePolicy::new(vec![root.clone(), root2.clone()], true)
            .expect("workspace policy"),
        metadata: MetadataPolicy::new(&MetadataPolicy::default_denied(), &allowed_for)
            .expect("metadata policy"),
        push: PushUrlPolicy {
            allow_http: true,
            resolve_names: false,
            ..Default::default()
        },
        required_extensions: vec![],
        redact_paths: false,
        max_json_values: a2a_edge::a2a::json::DEFAULT_MAX_VALUES,
    });
    let lexical =
        WorkspacePolicy::new(vec![root.clone(), root2.clone()], false).expect("lexical policy");
    Ok(Fixture {
        base,
        root,
        root2,
        outside,
        requests,
        lexical,
    })
}

/// Replaces the shorthands of seed files: `@R` the allowed root, `@S` the second root, `@O`
/// the outside directory (all real paths, no trailing slash).
pub fn expand(s: &str) -> String {
    if !s.contains('@') {
        return s.to_string();
    }
    let f = fixture();
    s.replace("@R", &f.root.to_string_lossy())
        .replace("@S", &f.root2.to_string_lossy())
        .replace("@O", &f.outside.to_string_lossy())
}

/// Whether `path` is absolute, without `.`/`..` components, and inside one of `roots`
/// (compared component by component).
pub fn inside_roots(path: &Path, roots: &[PathBuf]) -> bool {
    path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && roots.iter().any(|r| path.starts_with(r))
}

/// Keys that the validators look at, for structure-aware objects.
pub const KNOWN_KEYS: &[&str] = &[
    "text",
    "raw",
    "url",
    "data",
    "mediaType",
    "media_type",
    "filename",
    "metadata",
    "bytes",
    "base64",
    "iac_code",
    "cwd",
    "iac_code_api_key",
    "llm_headers",
    "iac_code_model",
    "alibaba_cloud_access_key_id",
    "X-Trace",
    "Authorization",
    "iac_code.iac_code_api_key",
    "iac_code..llm_headers",
    "llm_headers.Authorization",
    "messageId",
    "role",
    "parts",
    "contextId",
    "taskId",
    "id",
    "tenant",
    "message",
    "configuration",
    "historyLength",
    "",
];

/// An object key: one the validators know, or any string.
#[derive(Arbitrary, Debug, Clone)]
pub enum Key {
    Known(u8),
    Raw(String),
}

impl Key {
    pub fn as_string(&self) -> String {
        match self {
            Key::Known(i) => KNOWN_KEYS[*i as usize % KNOWN_KEYS.len()].to_string(),
            Key::Raw(s) => s.clone(),
        }
    }
}

/// Any JSON value (non-finite floats become `null`).
#[derive(Arbitrary, Debug, Clone)]
pub enum ArbJson {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    Array(Vec<ArbJson>),
    Object(Vec<(Key, ArbJson)>),
}

impl ArbJson {
    pub fn to_value(&self) -> Value {
        self.to_value_at(0)
    }

    fn to_value_at(&self, depth: usize) -> Value {
        match self {
            ArbJson::Null => Value::Null,
            ArbJson::Bool(b) => Value::Bool(*b),
            ArbJson::Int(i) => Value::from(*i),
            ArbJson::Uint(u) => Value::from(*u),
            ArbJson::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            ArbJson::Str(s) => Value::String(expand(s)),
            ArbJson::Array(_) | ArbJson::Object(_) if depth > 40 => Value::Null,
            ArbJson::Array(items) => {
                Value::Array(items.iter().map(|v| v.to_value_at(depth + 1)).collect())
            }
            ArbJson::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(k, v)| (k.as_string(), v.to_value_at(depth + 1)))
                    .collect::<Map<String, Value>>(),
            ),
        }
    }
}

/// A current-thread tokio runtime with timers, built once per process.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("tokio runtime")
    })
}
