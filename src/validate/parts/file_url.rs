//! `url` parts: local `file:///` URLs inside the request's workspace and an allowed root.

use std::fs::File;
use std::io::Read as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use url::Url;

use super::{
    invalid, too_large, PartRules, MAX_BINARY_FILE_BYTES, MAX_TEXT_FILE_BYTES, MAX_URL_BYTES,
    MAX_URL_PATH_BYTES,
};
use crate::a2a::RpcError;
use crate::reason;
use crate::validate::media::MediaClass;
use crate::validate::workspace::{
    normalize_lexically, resolve_within, too_deep, within_any, Resolved,
};

/// `O_NONBLOCK`, so that opening a fifo swapped in after the check cannot hang the proxy.
/// The value is the kernel ABI's (no `libc` dependency); 0 (blocking) where it is not known.
const O_NONBLOCK: i32 = if cfg!(all(
    any(target_os = "linux", target_os = "android"),
    not(any(
        target_arch = "mips",
        target_arch = "mips64",
        target_arch = "mips32r6",
        target_arch = "mips64r6",
        target_arch = "sparc",
        target_arch = "sparc64"
    ))
)) {
    0o4000
} else if cfg!(any(
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "netbsd",
    target_os = "dragonfly"
)) {
    0x0004
} else {
    0
};

fn outside() -> RpcError {
    invalid(
        "A2A file URL part is outside the allowed workspace.",
        reason::PART_OUTSIDE_WORKSPACE,
    )
}

fn missing() -> RpcError {
    invalid(
        "A2A file URL part must reference an existing file.",
        reason::PART_FILE_MISSING,
    )
}

fn syntax(message: &str) -> RpcError {
    invalid(message, reason::PART_URL_SYNTAX)
}

/// Checks a `url` part and returns the URL to forward (that of the checked path).
pub(super) fn check(raw: &str, class: MediaClass, rules: &PartRules) -> Result<String, RpcError> {
    let decoded = parse(raw)?;
    let workspace = rules.workspace.ok_or_else(|| {
        invalid(
            "A2A file URL parts need a workspace (metadata.iac_code.cwd).",
            reason::PART_FILE_WITHOUT_WORKSPACE,
        )
    })?;
    let logical = normalize_lexically(&decoded).ok_or_else(outside)?;
    if too_deep(&logical) {
        return Err(invalid(
            "A2A file URL part path has too many components.",
            reason::PART_URL_TOO_DEEP,
        ));
    }
    let inside = |p: &Path| p.starts_with(&workspace.real) && within_any(p, &rules.policy.roots);

    let checked: PathBuf = if !rules.policy.check_filesystem {
        if !(logical.starts_with(&workspace.logical) && inside(&logical)) {
            return Err(outside());
        }
        logical
    } else {
        // Nothing outside the workspace is looked up (only it, what is in it, and the
        // directories above it on the way down).
        let ws = &workspace.real;
        let area = |c: &Path| c.starts_with(ws) || ws.starts_with(c);
        let real = match resolve_within(&logical, &area) {
            Resolved::Real(real) => real,
            // No existence oracle outside: "missing" only under an ancestor inside.
            unresolved => {
                return Err(if unresolved.missing_within(inside) {
                    missing()
                } else {
                    outside()
                })
            }
        };
        if !inside(&real) {
            return Err(outside());
        }
        // `real` has no symlink left; lstat, so that one swapped in since is not followed.
        let meta = std::fs::symlink_metadata(&real).map_err(|_| missing())?;
        if !meta.file_type().is_file() {
            return Err(invalid(
                "A2A file URL part must reference a regular file.",
                reason::PART_FILE_NOT_REGULAR,
            ));
        }
        match class {
            MediaClass::Text => {
                if meta.len() > MAX_TEXT_FILE_BYTES {
                    return Err(too_large());
                }
                if !rules.reads.passed(&meta) {
                    let left = rules.reads.left();
                    if meta.len() > left {
                        return Err(too_large_in_all());
                    }
                    let read = check_text_file(&real, &meta, left)?;
                    rules.reads.record(&meta, read);
                }
            }
            MediaClass::Multimodal => {
                if meta.len() > MAX_BINARY_FILE_BYTES {
                    return Err(too_large());
                }
            }
        }
        real
    };
    let forwarded = Url::from_file_path(&checked)
        .map(String::from)
        .map_err(|()| syntax("A2A file URL part is malformed."))?;
    // Re-encoding can lengthen it (a bare `%` becomes `%25`): what is forwarded must pass
    // this check again (fuzz `part`, 2026-12-01).
    if forwarded.len() > MAX_URL_BYTES {
        return Err(invalid(
            "A2A file URL part is too long.",
            reason::PART_URL_TOO_LONG,
        ));
    }
    Ok(forwarded)
}

/// Parses and decodes a `file:///` URL into an absolute path (not yet normalized).
fn parse(raw: &str) -> Result<PathBuf, RpcError> {
    if raw.len() > MAX_URL_BYTES {
        return Err(invalid(
            "A2A file URL part is too long.",
            reason::PART_URL_TOO_LONG,
        ));
    }
    // WHATWG parsing strips leading/trailing C0 and spaces, drops tabs and newlines anywhere
    // and reads `\` as `/` in file URLs: refuse what it would rewrite silently.
    if raw.bytes().any(|b| b <= b' ' || b == 0x7f || b == b'\\')
        || raw.chars().any(char::is_control)
    {
        return Err(syntax(
            "A2A file URL part holds spaces, control characters or backslashes.",
        ));
    }
    let scheme = raw.get(..5).unwrap_or_default();
    if !scheme.eq_ignore_ascii_case("file:") {
        return Err(invalid(
            "A2A file URL parts must use local file:// URLs.",
            reason::PART_URL_SCHEME,
        ));
    }
    let url = Url::parse(raw).map_err(|e| match e {
        url::ParseError::EmptyHost
        | url::ParseError::IdnaError
        | url::ParseError::InvalidIpv4Address
        | url::ParseError::InvalidIpv6Address
        | url::ParseError::InvalidDomainCharacter => host(),
        _ => syntax("A2A file URL part is malformed."),
    })?;
    if url.scheme() != "file" {
        return Err(invalid(
            "A2A file URL parts must use local file:// URLs.",
            reason::PART_URL_SCHEME,
        ));
    }
    // The authority must be empty as written: the parser turns `file://localhost/` into an
    // empty host, and `file:/x` or `file:x` into `file:///x`.
    let after_scheme = raw.get(5..).unwrap_or_default();
    if !after_scheme.starts_with("//") {
        return Err(syntax("A2A file URL parts must start with file:///."));
    }
    if !after_scheme.starts_with("///") || url.host().is_some() {
        return Err(host());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(syntax(
            "A2A file URL parts must not have a query or fragment.",
        ));
    }
    let path = url.to_file_path().map_err(|()| host())?;
    let bytes = path.as_os_str().as_bytes();
    if bytes.contains(&0) {
        return Err(encoding());
    }
    let text = std::str::from_utf8(bytes).map_err(|_| encoding())?;
    if text.chars().any(char::is_control) {
        return Err(encoding());
    }
    if bytes.len() > MAX_URL_PATH_BYTES {
        return Err(invalid(
            "A2A file URL part is too long.",
            reason::PART_URL_TOO_LONG,
        ));
    }
    Ok(path)
}

fn host() -> RpcError {
    invalid(
        "A2A file URL parts must use local file:// URLs without a host.",
        reason::PART_URL_HOST,
    )
}

fn encoding() -> RpcError {
    invalid(
        "A2A file URL part path must be UTF-8 without NUL or control characters.",
        reason::PART_URL_ENCODING,
    )
}

fn too_large_in_all() -> RpcError {
    invalid(
        "A2A file URL parts name too much text in all.",
        reason::PART_TOO_LARGE,
    )
}

/// Opens (non-blocking) the file that was checked, makes sure the handle is that same regular
/// file, and reads at most the limit (or what is `left` of the message's budget, if less) + 1
/// bytes: it must fit and be UTF-8. Returns the bytes read.
fn check_text_file(path: &Path, checked: &std::fs::Metadata, left: u64) -> Result<u64, RpcError> {
    let unreadable = || {
        invalid(
            "A2A file URL part cannot be read.",
            reason::PART_FILE_UNREADABLE,
        )
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .map_err(|_| unreadable())?;
    let meta = file.metadata().map_err(|_| unreadable())?;
    if !meta.file_type().is_file() || meta.dev() != checked.dev() || meta.ino() != checked.ino() {
        return Err(invalid(
            "A2A file URL part must reference a regular file.",
            reason::PART_FILE_NOT_REGULAR,
        ));
    }
    let mut content = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0).min(1 << 20));
    let limit = MAX_TEXT_FILE_BYTES.min(left);
    read_bounded(file, limit, &mut content).map_err(|_| unreadable())?;
    let read = content.len() as u64;
    if read > MAX_TEXT_FILE_BYTES {
        return Err(too_large());
    }
    if read > limit {
        return Err(too_large_in_all());
    }
    if std::str::from_utf8(&content).is_err() {
        return Err(invalid(
            "A2A file URL parts must contain valid UTF-8.",
            reason::PART_UTF8,
        ));
    }
    Ok(read)
}

fn read_bounded(file: File, limit: u64, out: &mut Vec<u8>) -> std::io::Result<usize> {
    file.take(limit.saturating_add(1)).read_to_end(out)
}
