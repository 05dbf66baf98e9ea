//! What `realpath` does, with a budget: one forward walk that resolves a path component by
//! component (`lstat`, and `readlink` for a symlink, whose target is walked in its place), and
//! on failure gives the real path of the path's deepest ancestor that resolves, from the same
//! walk.
//!
//! Why not `std::fs::canonicalize`: glibc's `realpath` `readlink`s every prefix of the path from
//! `/` (work quadratic in the depth of what it walks, symlink targets included: a symlink to a
//! 2,000-level directory costs ~80 ms), and finding the deepest ancestor that resolves took one
//! `realpath` per ancestor on top (17 s for one 4 KiB file part). Here every lookup is one
//! `lstat` of a path that holds no symlink, and a walk makes at most [`MAX_RESOLVE_STEPS`] of
//! them, so resolving one path costs at most ~`MAX_RESOLVE_STEPS`²/2 directory lookups in the
//! kernel, whatever the filesystem holds.
//!
//! Semantics, those of `realpath(3)`: `..` after a symlink is taken on the symlink's target (its
//! real parent); a component after a non-directory fails (`ENOTDIR`); more than
//! [`MAX_SYMLINKS`] symlinks is a loop. A walk over its budget fails like a loop: the path
//! "cannot be resolved".
//!
//! The deepest ancestor: the path's own components are `/c1/…/cn`; `P(i)` is the prefix
//! `/c1/…/ci`. The walk resolves `c1`, then `c2`, … (each with the symlinks it leads to) and
//! whatever `realpath(P(i))` would do is exactly what the walk does up to the end of `ci`, so
//! when `ci` fails, the deepest ancestor that resolves is `P(i-1)` and the walk's position
//! before `ci` is its real path. (An ancestor resolves only if its own ancestors do, so there
//! is no deeper one.)

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Most symlinks followed while resolving one path (Linux's `MAXSYMLINKS`); one more is a loop.
pub const MAX_SYMLINKS: usize = 40;

/// Most components a walk takes, those of the symlink targets it follows included (`.` and
/// `..` too); a path that needs more cannot be resolved. Twice
/// [`super::MAX_PATH_COMPONENTS`], which bounds the path's own components.
pub const MAX_RESOLVE_STEPS: usize = 128;

/// What [`resolve`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// The real path (no symlink, `.` or `..` left).
    Real(PathBuf),
    /// The path cannot be resolved (a component is missing, is under a non-directory or
    /// cannot be searched, a symlink loop, over the budget); `ancestor` is the real path of
    /// its deepest ancestor that resolves (`/` at least). `through_link`: it failed while
    /// following a symlink (in its target, or the link itself: a loop, over the budget), so
    /// where it failed is wherever the link points, not under `ancestor`: the callers then
    /// say "outside" whatever `ancestor` is, or a dangling link would tell whether what it
    /// points at outside the roots exists.
    Unresolved {
        ancestor: PathBuf,
        through_link: bool,
    },
}

impl Resolved {
    /// For a path that cannot be resolved: whether it is "missing" rather than "outside". It
    /// is when it failed at one of its own components, under an ancestor `inside` accepts;
    /// through a symlink it is outside wherever the link points (no existence oracle).
    pub(crate) fn missing_within(&self, inside: impl Fn(&Path) -> bool) -> bool {
        match self {
            Resolved::Unresolved {
                ancestor,
                through_link: false,
            } => inside(ancestor),
            _ => false,
        }
    }
}

/// Resolves `path`, an absolute, lexically normalized path (as
/// [`super::normalize_lexically`] makes them), looking anything up (the operator's roots;
/// a request's paths are resolved by [`resolve_within`]).
pub(crate) fn resolve(path: &Path) -> Resolved {
    resolve_within(path, &|_| true)
}

/// [`resolve`], looking up only what `area` accepts (the allowed places and their
/// ancestors): a walk that would look up anything else stops there, unresolved
/// `through_link` ("outside"), so that where a symlink leads outside (and back, by `..`)
/// tells nothing of what exists there.
pub(crate) fn resolve_within(path: &Path, area: &dyn Fn(&Path) -> bool) -> Resolved {
    walk_within(path, area).0
}

/// [`resolve`], and how many filesystem calls (`lstat`, `readlink`) it made.
#[cfg(test)]
pub(crate) fn walk(path: &Path) -> (Resolved, usize) {
    walk_within(path, &|_| true)
}

/// [`resolve_within`], and how many filesystem calls it made.
pub(crate) fn walk_within(path: &Path, area: &dyn Fn(&Path) -> bool) -> (Resolved, usize) {
    // Components still to take, the next one last; `true` marks the path's own components.
    let mut pending: Vec<(OsString, bool)> = components(path.as_os_str())
        .rev()
        .map(|c| (c.to_owned(), true))
        .collect();
    // How many of `pending` come from symlink targets: all are taken before the next own one.
    let mut expanded = 0;
    let mut real = PathBuf::from("/");
    let mut real_is_dir = true;
    let mut ancestor = real.clone();
    let mut steps = 0;
    let mut links = 0;
    let mut calls = 0;
    let unresolved = |ancestor: PathBuf, through_link, calls| {
        let how = Resolved::Unresolved {
            ancestor,
            through_link,
        };
        (how, calls)
    };
    loop {
        let Some((name, own)) = pending.pop() else {
            return (Resolved::Real(real), calls);
        };
        if own {
            // Every earlier component of the path, and all it led to, is resolved.
            ancestor.clone_from(&real);
        } else {
            expanded -= 1;
        }
        steps += 1;
        if steps > MAX_RESOLVE_STEPS || !real_is_dir {
            return unresolved(ancestor, !own, calls);
        }
        match name.as_bytes() {
            b"." => continue,
            b".." => {
                real.pop();
                continue;
            }
            _ => {}
        }
        let candidate = real.join(&name);
        if !area(&candidate) {
            return unresolved(ancestor, true, calls);
        }
        calls += 1;
        let Ok(meta) = std::fs::symlink_metadata(&candidate) else {
            return unresolved(ancestor, !own, calls);
        };
        if !meta.file_type().is_symlink() {
            real = candidate;
            real_is_dir = meta.is_dir();
            continue;
        }
        links += 1;
        if links > MAX_SYMLINKS {
            return unresolved(ancestor, true, calls);
        }
        calls += 1;
        let Ok(target) = std::fs::read_link(&candidate) else {
            return unresolved(ancestor, true, calls);
        };
        // The target is walked in place of the link (from `/`, or from the link's directory);
        // a trailing `/` requires a directory, as a trailing `.` does. All of it is walked
        // before this own component ends: if that is over the budget, the component cannot
        // be resolved, and its components need not be held.
        let bytes = target.as_os_str().as_bytes();
        let slash = (bytes.len() > 1 && bytes.ends_with(b"/")).then_some(OsStr::new("."));
        let count = components(target.as_os_str()).count() + usize::from(slash.is_some());
        if bytes.is_empty() || steps + expanded + count > MAX_RESOLVE_STEPS {
            return unresolved(ancestor, true, calls);
        }
        if target.is_absolute() {
            real = PathBuf::from("/");
        }
        let parts = components(target.as_os_str()).chain(slash);
        pending.extend(parts.rev().map(|c| (c.to_owned(), false)));
        expanded += count;
    }
}

/// The `/`-separated components of `path`, empty ones dropped (`.` and `..` kept).
fn components(path: &OsStr) -> impl DoubleEndedIterator<Item = &OsStr> {
    path.as_bytes()
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .map(OsStr::from_bytes)
}
