//! The request's workspace (`metadata.iac_code.cwd`): where the agent will work, checked
//! against the allowed roots. Never creates anything (the real agent `mkdir -p`s a missing cwd;
//! the proxy refuses it instead).
//!
//! Reason codes (all `-32602`, `RpcError::invalid_params`):
//!
//! | reason | meaning |
//! |---|---|
//! | `workspace.type` | `cwd` is not a JSON string |
//! | `workspace.nul` | `cwd` holds a NUL byte |
//! | `workspace.too_long` | `cwd` is over 4096 bytes |
//! | `workspace.control` | `cwd` holds a control character (newline, tab, escape, ...) |
//! | `workspace.relative` | `cwd` is not an absolute path (the empty string included) |
//! | `workspace.traversal` | a `..` climbs above `/` (rejected, not clamped) |
//! | `workspace.too_deep` | the normalized path has more than 64 components ([`MAX_PATH_COMPONENTS`]) |
//! | `workspace.outside_roots` | the path (its real path when the filesystem is checked) is not inside an allowed root; or it cannot be resolved through a symlink (a loop, more than 40 symlinks or 128 components to walk, theirs included, a missing target, a target outside the roots: nothing outside them is looked up) |
//! | `workspace.missing` | the directory does not exist or cannot be resolved at one of its own components (no permission) under a directory inside the roots; it is never created |
//! | `workspace.not_directory` | the path exists but is not a directory |
//!
//! Decisions:
//!
//! - A `cwd` of the wrong JSON type is rejected; the real agent would silently ignore it and
//!   run in its own directory, which the proxy cannot check (fail closed).
//! - Normalization is lexical (`.`, `..`, `//` and a trailing `/` collapse, like Python's
//!   `os.path.normpath`, which the agent uses); the normalized *logical* path is what the agent
//!   receives (see [`Workspace::forward_cwd`]), and its *real* path is what is checked.
//! - Symlinks are resolved as `realpath(3)` does, by one bounded walk (`resolve`): at most
//!   [`MAX_SYMLINKS`] symlinks and [`MAX_RESOLVE_STEPS`] components (the path's own, at most
//!   [`MAX_PATH_COMPONENTS`], and those of the symlinks' targets); a path that needs more
//!   cannot be resolved, like a symlink loop. The same walk gives the deepest existing
//!   ancestor's real path (below): what one request costs the edge's filesystem does not
//!   grow with what the caller's directories hold.
//! - Containment is component-wise ([`Path::starts_with`]): `/srv/ws-evil` is not inside `/srv/ws`.
//! - No existence oracle outside the roots: when the path cannot be resolved, the answer is
//!   `workspace.missing` only if its deepest existing ancestor is inside a root, otherwise
//!   `workspace.outside_roots`; an existing path outside the roots is `outside_roots` too,
//!   whatever it is.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::a2a::RpcError;
use crate::reason::{self, Reason};

pub(crate) use resolve::resolve;
pub(crate) use resolve::{resolve_within, Resolved};
pub use resolve::{MAX_RESOLVE_STEPS, MAX_SYMLINKS};

mod resolve;
#[cfg(test)]
pub(crate) mod testdir;
#[cfg(test)]
mod tests;

/// The real path of `path` (what `realpath` gives) by the bounded walk ([`resolve`]): the
/// operator's roots are resolved so, never by `std::fs::canonicalize`, whose work grows with
/// the square of the depth it walks.
pub(crate) fn real_path(path: &Path) -> Option<PathBuf> {
    match resolve(path) {
        Resolved::Real(real) => Some(real),
        Resolved::Unresolved { .. } => None,
    }
}

/// Longest `cwd` accepted, in bytes (Linux `PATH_MAX`).
pub const MAX_CWD_BYTES: usize = 4096;

/// Most components of a normalized `cwd` or file URL path (`/a/b` has 2): what the edge
/// resolves on the filesystem for a request is bounded by this, not by what the caller sends
/// (4096 bytes hold 2048 components). Deeper is refused (`workspace.too_deep`,
/// `part.url_too_deep`), before the filesystem is consulted.
pub const MAX_PATH_COMPONENTS: usize = 64;

/// The environment variable of the real agent listing its allowed roots (`:`-separated).
pub const ALLOWED_CWDS_ENV: &str = "IACCODE_A2A_ALLOWED_CWDS";

/// Where workspaces may be.
#[derive(Debug, Clone)]
pub struct WorkspacePolicy {
    /// Absolute, normalized roots; canonical (symlinks resolved) when `check_filesystem`.
    pub roots: Vec<PathBuf>,
    /// Whether the proxy sees the agent's filesystem: resolve symlinks, require existence.
    /// Without it every check is lexical.
    pub check_filesystem: bool,
}

impl WorkspacePolicy {
    /// Roots as configured: each made absolute (against the process directory) and normalized;
    /// with `check_filesystem` each is canonicalized (realpath) and must exist as a directory,
    /// else an error naming the root (for the operator). No roots at all is an error too (use
    /// [`WorkspacePolicy::default_roots`] when the policy gives none). Duplicates are dropped.
    pub fn new(roots: Vec<PathBuf>, check_filesystem: bool) -> Result<WorkspacePolicy, String> {
        if roots.is_empty() {
            return Err("no workspace roots are configured".to_string());
        }
        let mut out: Vec<PathBuf> = Vec::with_capacity(roots.len());
        for root in roots {
            if root.as_os_str().is_empty() {
                return Err("a workspace root is empty".to_string());
            }
            if root.as_os_str().as_bytes().contains(&0) {
                return Err(format!("workspace root {:?} holds a NUL byte", root));
            }
            let absolute = if root.is_absolute() {
                root.clone()
            } else {
                std::env::current_dir()
                    .map_err(|e| {
                        format!(
                            "workspace root {}: the process directory is unknown: {e}",
                            root.display()
                        )
                    })?
                    .join(&root)
            };
            let normalized = normalize_lexically(&absolute)
                .ok_or_else(|| format!("workspace root {} climbs above /", root.display()))?;
            let root = if check_filesystem {
                let real = std::fs::canonicalize(&normalized)
                    .map_err(|e| format!("workspace root {}: {e}", normalized.display()))?;
                if !real.is_dir() {
                    return Err(format!(
                        "workspace root {} is not a directory",
                        normalized.display()
                    ));
                }
                real
            } else {
                normalized
            };
            if !out.contains(&root) {
                out.push(root);
            }
        }
        Ok(WorkspacePolicy {
            roots: out,
            check_filesystem,
        })
    }

    /// The default roots when the policy gives none: `IACCODE_A2A_ALLOWED_CWDS` split on `:`
    /// (empty items dropped), else (unset, or nothing left) `[process cwd, std::env::temp_dir()]`,
    /// as the real agent does. Unlike the agent, entries that do not exist are kept here, so
    /// that [`WorkspacePolicy::new`] reports them instead of dropping them silently.
    pub fn default_roots() -> Vec<PathBuf> {
        roots_from_env(
            std::env::var_os(ALLOWED_CWDS_ENV).as_deref(),
            std::env::current_dir().ok(),
            std::env::temp_dir(),
        )
    }

    /// Whether `path` lies inside one of the roots (component-wise).
    pub fn contains(&self, path: &Path) -> bool {
        within_any(path, &self.roots)
    }

    /// What a request's paths may be resolved through: the roots, what is in them, and the
    /// directories above them on the way down (nothing outside them is looked up).
    fn area(&self, c: &Path) -> bool {
        self.roots
            .iter()
            .any(|r| c.starts_with(r) || r.starts_with(c))
    }
}

fn roots_from_env(value: Option<&OsStr>, cwd: Option<PathBuf>, temp: PathBuf) -> Vec<PathBuf> {
    let from_env: Vec<PathBuf> = value
        .map(|v| {
            v.as_bytes()
                .split(|&b| b == b':')
                .filter(|item| !item.is_empty())
                .map(|item| PathBuf::from(OsStr::from_bytes(item)))
                .collect()
        })
        .unwrap_or_default();
    if !from_env.is_empty() {
        return from_env;
    }
    cwd.into_iter().chain(std::iter::once(temp)).collect()
}

/// A checked workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// Normalized (lexically): what the agent gets.
    pub logical: PathBuf,
    /// Symlinks resolved; equal to `logical` when the filesystem is not checked.
    pub real: PathBuf,
}

impl Workspace {
    /// The normalized string to forward in place of the caller's cwd (the logical path). It
    /// came from a JSON string, so it is UTF-8 and the conversion is lossless.
    pub fn forward_cwd(&self) -> String {
        self.logical.to_string_lossy().into_owned()
    }

    /// Whether this workspace, admitted earlier, is within `roots` now (a reload's check of
    /// a running stream): with the filesystem checked, its path resolved again as a
    /// request's is ([`resolve_cwd`]: looking up nothing outside the roots, within the walk's
    /// budget), or, when it is missing now under one of the roots, where it was at admission;
    /// a path that now leads outside them through a symlink, is no directory (a file put in
    /// its place), or cannot be resolved, is not.
    /// Without the filesystem, its lexical path.
    pub fn still_within(&self, roots: &WorkspacePolicy) -> bool {
        if !roots.check_filesystem {
            return roots.contains(&self.logical);
        }
        match resolve_within(&self.logical, &|c| roots.area(c)) {
            // (a directory, as a request's cwd must be: a file put in its place is not held)
            Resolved::Real(real) => roots.contains(&real) && real.is_dir(),
            missing if missing.missing_within(|a| roots.contains(a)) => roots.contains(&self.real),
            _ => false,
        }
    }
}

fn invalid(message: &str, reason: Reason) -> RpcError {
    RpcError::invalid_params(message, reason)
}

/// Checks `metadata.iac_code.cwd`: a JSON string, absolute, no NUL or control character, at
/// most 4096 bytes, lexically normalized, at most [`MAX_PATH_COMPONENTS`] deep, then (with
/// `check_filesystem`) resolved (`resolve`, bounded): it must exist (it is never created), be a
/// directory, and its real path lie inside a real root.
/// Without `check_filesystem` the logical path must lie inside a root lexically.
pub fn resolve_cwd(value: &Value, policy: &WorkspacePolicy) -> Result<Workspace, RpcError> {
    let raw = value.as_str().ok_or_else(|| {
        invalid(
            "Invalid A2A workspace metadata: cwd must be a string.",
            reason::WORKSPACE_TYPE,
        )
    })?;
    if raw.contains('\0') {
        return Err(invalid(
            "Invalid A2A workspace metadata: cwd holds a NUL byte.",
            reason::WORKSPACE_NUL,
        ));
    }
    if raw.len() > MAX_CWD_BYTES {
        return Err(invalid(
            "Invalid A2A workspace metadata: cwd is too long.",
            reason::WORKSPACE_TOO_LONG,
        ));
    }
    if raw.chars().any(char::is_control) {
        return Err(invalid(
            "Invalid A2A workspace metadata: cwd holds a control character.",
            reason::WORKSPACE_CONTROL,
        ));
    }
    let path = Path::new(raw);
    if !path.is_absolute() {
        return Err(invalid(
            "Invalid A2A workspace metadata: cwd must be an absolute path.",
            reason::WORKSPACE_RELATIVE,
        ));
    }
    let logical = normalize_lexically(path).ok_or_else(|| {
        invalid(
            "Invalid A2A workspace metadata: cwd climbs above the root.",
            reason::WORKSPACE_TRAVERSAL,
        )
    })?;
    if too_deep(&logical) {
        return Err(invalid(
            "Invalid A2A workspace metadata: cwd has too many path components.",
            reason::WORKSPACE_TOO_DEEP,
        ));
    }
    let outside = || {
        invalid(
            "Invalid A2A workspace metadata: cwd is outside the allowed workspace roots.",
            reason::WORKSPACE_OUTSIDE_ROOTS,
        )
    };
    if !policy.check_filesystem {
        if !policy.contains(&logical) {
            return Err(outside());
        }
        return Ok(Workspace {
            real: logical.clone(),
            logical,
        });
    }
    // Nothing outside the roots is looked up (only the roots, what is in them, and the
    // directories above them on the way down).
    let real = match resolve_within(&logical, &|c| policy.area(c)) {
        Resolved::Real(real) => real,
        // No existence oracle outside the roots: "missing" only under an ancestor inside one.
        unresolved => {
            return Err(if unresolved.missing_within(|a| policy.contains(a)) {
                invalid(
                    "Invalid A2A workspace metadata: cwd does not exist.",
                    reason::WORKSPACE_MISSING,
                )
            } else {
                outside()
            });
        }
    };
    if !policy.contains(&real) {
        return Err(outside());
    }
    match std::fs::metadata(&real) {
        Ok(meta) if meta.is_dir() => Ok(Workspace { logical, real }),
        Ok(_) => Err(invalid(
            "Invalid A2A workspace metadata: cwd is not a directory.",
            reason::WORKSPACE_NOT_DIRECTORY,
        )),
        Err(_) => Err(invalid(
            "Invalid A2A workspace metadata: cwd does not exist.",
            reason::WORKSPACE_MISSING,
        )),
    }
}

/// Lexical normalization of an absolute path: `.` and empty components dropped, `..` pops one
/// component; `None` when the path is not absolute or a `..` climbs above `/` (rejected rather
/// than clamped, unlike `normpath`). The filesystem is not consulted.
pub(crate) fn normalize_lexically(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut parts: Vec<&OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(name) => parts.push(name),
            Component::Prefix(_) => return None,
        }
    }
    let mut out = PathBuf::from("/");
    out.extend(parts);
    Some(out)
}

/// Whether `path` (normalized) has more than [`MAX_PATH_COMPONENTS`] components.
pub(crate) fn too_deep(path: &Path) -> bool {
    path.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .nth(MAX_PATH_COMPONENTS)
        .is_some()
}

/// Whether `path` lies inside one of `roots`, component-wise.
pub(crate) fn within_any(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| path.starts_with(root))
}
