use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::resolve::walk;
use super::testdir::TestDir;
use super::*;

/// One filesystem fixture shared by the rows of a table.
struct Fixture {
    dir: TestDir,
    ws: PathBuf,
    policy: WorkspacePolicy,
}

fn fixture() -> Fixture {
    let dir = TestDir::new("workspace");
    let ws = dir.mkdir("ws");
    dir.mkdir("ws2/inner");
    dir.mkdir("ws/proj/sub");
    dir.mkdir("ws-evil/proj");
    dir.mkdir("outside/dir");
    dir.write("ws/file.txt", b"x");
    dir.symlink(dir.join("outside"), "ws/link_out");
    dir.symlink(dir.join("ws2"), "ws/link_in");
    dir.symlink("proj", "ws/link_rel");
    dir.symlink("loop_b", "ws/loop_a");
    dir.symlink("loop_a", "ws/loop_b");
    dir.symlink(dir.join("outside/nonexistent"), "ws/dangling");
    dir.symlink(dir.join("outside/dir/../../ws/proj"), "ws/via_outside_yes");
    dir.symlink(
        dir.join("outside/nosuch/../../ws/proj"),
        "ws/via_outside_no",
    );
    let policy = WorkspacePolicy::new(vec![ws.clone(), dir.join("ws2")], true).unwrap();
    Fixture { dir, ws, policy }
}

fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}

#[test]
fn resolve_cwd_filesystem_table() {
    let f = fixture();
    let ws = f.ws.to_str().unwrap().to_string();
    let base = f.dir.path.to_str().unwrap().to_string();

    // Accepted: (input, expected logical, expected real).
    let ok: Vec<(String, PathBuf, PathBuf)> = vec![
        (
            format!("{ws}/proj"),
            f.ws.join("proj"),
            real(&f.ws.join("proj")),
        ),
        (
            format!("{ws}/proj/"),
            f.ws.join("proj"),
            real(&f.ws.join("proj")),
        ),
        (
            format!("{ws}//proj/./sub//"),
            f.ws.join("proj/sub"),
            real(&f.ws.join("proj/sub")),
        ),
        (ws.clone(), f.ws.clone(), real(&f.ws)),
        (
            format!("{ws}/proj/../proj"),
            f.ws.join("proj"),
            real(&f.ws.join("proj")),
        ),
        (format!("{ws}/proj/sub/../.."), f.ws.clone(), real(&f.ws)),
        // A symlink to another allowed root keeps its logical name (as the agent does).
        (
            format!("{ws}/link_in/inner"),
            f.ws.join("link_in/inner"),
            real(&f.dir.join("ws2/inner")),
        ),
        (
            format!("{ws}/link_rel"),
            f.ws.join("link_rel"),
            real(&f.ws.join("proj")),
        ),
        (
            format!("{base}/ws2"),
            f.dir.join("ws2"),
            real(&f.dir.join("ws2")),
        ),
    ];
    for (input, logical, real_path) in ok {
        let got = resolve_cwd(&json!(input), &f.policy);
        assert_eq!(
            got,
            Ok(Workspace {
                logical: logical.clone(),
                real: real_path
            }),
            "input {input:?}"
        );
        assert_eq!(got.unwrap().forward_cwd(), logical.to_str().unwrap());
    }

    let too_long = format!("/{}", "a/".repeat(2100));
    let exactly_max = format!("{ws}/{}", "b".repeat(MAX_CWD_BYTES - ws.len() - 1));
    assert_eq!(exactly_max.len(), MAX_CWD_BYTES);
    let many_up = format!("{ws}/{}", "../".repeat(64));
    let rejected: Vec<(Value, &str)> = vec![
        // wrong JSON type
        (json!(42), "workspace.type"),
        (json!(null), "workspace.type"),
        (json!(true), "workspace.type"),
        (json!([ws.clone()]), "workspace.type"),
        (json!({"path": ws.clone()}), "workspace.type"),
        // not absolute
        (json!(""), "workspace.relative"),
        (json!("relative/dir"), "workspace.relative"),
        (json!("./proj"), "workspace.relative"),
        (json!("../etc"), "workspace.relative"),
        (json!("~/proj"), "workspace.relative"),
        (json!("file:///tmp"), "workspace.relative"),
        // NUL, control characters
        (json!(format!("{ws}/proj\u{0}/x")), "workspace.nul"),
        (json!("\u{0}"), "workspace.nul"),
        (json!(format!("{ws}/a\nb")), "workspace.control"),
        (json!(format!("{ws}/\u{1b}[31m")), "workspace.control"),
        (json!(format!("{ws}/a\u{85}b")), "workspace.control"),
        // length
        (json!(too_long), "workspace.too_long"),
        (json!(format!("{exactly_max}c")), "workspace.too_long"),
        // the boundary itself is accepted by the length check and fails later (missing)
        (json!(exactly_max), "workspace.missing"),
        // `..` above the root
        (json!("/.."), "workspace.traversal"),
        (json!("/../etc"), "workspace.traversal"),
        (json!(many_up), "workspace.traversal"),
        // traversal that stays below `/` but leaves the roots
        (
            json!(format!("{ws}/../outside/dir")),
            "workspace.outside_roots",
        ),
        (
            json!(format!("{ws}/proj/../../outside")),
            "workspace.outside_roots",
        ),
        (json!("/etc"), "workspace.outside_roots"),
        (json!("/"), "workspace.outside_roots"),
        // a string prefix is not containment
        (
            json!(format!("{base}/ws-evil/proj")),
            "workspace.outside_roots",
        ),
        (json!(format!("{base}/ws-evil")), "workspace.outside_roots"),
        // symlink escapes
        (json!(format!("{ws}/link_out")), "workspace.outside_roots"),
        (
            json!(format!("{ws}/link_out/dir")),
            "workspace.outside_roots",
        ),
        // no existence oracle outside the roots
        (
            json!(format!("{base}/outside/missing")),
            "workspace.outside_roots",
        ),
        (
            json!("/nonexistent-a2a-edge-dir/x"),
            "workspace.outside_roots",
        ),
        (json!("/etc/passwd"), "workspace.outside_roots"),
        (
            json!(format!("{ws}/link_out/missing")),
            "workspace.outside_roots",
        ),
        // missing: never created
        (json!(format!("{ws}/missing")), "workspace.missing"),
        (json!(format!("{ws}/missing/deeper")), "workspace.missing"),
        (json!(format!("{ws}/file.txt/sub")), "workspace.missing"),
        // Through a symlink that cannot be followed (a loop, or a target that is missing):
        // outside, wherever it points (else a dangling link into another root would tell
        // whether its target exists).
        (json!(format!("{ws}/loop_a")), "workspace.outside_roots"),
        (json!(format!("{ws}/loop_a/x")), "workspace.outside_roots"),
        (json!(format!("{ws}/dangling")), "workspace.outside_roots"),
        // Through a place outside the roots and back by `..`: outside, whether that place
        // exists or not (nothing outside is looked up).
        (
            json!(format!("{ws}/via_outside_yes")),
            "workspace.outside_roots",
        ),
        (
            json!(format!("{ws}/via_outside_no")),
            "workspace.outside_roots",
        ),
        // not a directory
        (json!(format!("{ws}/file.txt")), "workspace.not_directory"),
        // look-alikes and encodings are literal names, not separators or `..`
        (
            json!(format!("{ws}\u{FF0F}proj")),
            "workspace.outside_roots",
        ),
        (
            json!(format!("{ws}/\u{2024}\u{2024}/outside")),
            "workspace.missing",
        ),
        (json!(format!("{ws}/%2e%2e/outside")), "workspace.missing"),
        (json!(format!("{ws}/..%2Foutside")), "workspace.missing"),
    ];
    for (input, reason) in rejected {
        let err = resolve_cwd(&input, &f.policy).unwrap_err();
        assert_eq!(err.reason, reason, "input {input}");
        assert_eq!(err.code, -32602);
        assert!(!err.message.contains(&base), "message leaks a path");
    }

    // The real agent would mkdir these; the proxy must not.
    assert!(!f.ws.join("missing").exists());
    assert!(!f.dir.join("outside/missing").exists());
}

#[test]
fn resolve_cwd_lexical_table() {
    let policy = WorkspacePolicy::new(
        vec![PathBuf::from("/srv/ws/"), PathBuf::from("/data/./a")],
        false,
    )
    .unwrap();
    assert_eq!(
        policy.roots,
        vec![PathBuf::from("/srv/ws"), PathBuf::from("/data/a")]
    );
    let ok: &[(&str, &str)] = &[
        ("/srv/ws", "/srv/ws"),
        ("/srv/ws/", "/srv/ws"),
        ("/srv/ws/proj", "/srv/ws/proj"),
        ("/srv/ws/./a//b/", "/srv/ws/a/b"),
        ("//srv/ws/proj", "/srv/ws/proj"),
        ("/srv/ws/a/../b", "/srv/ws/b"),
        ("/data/a/x", "/data/a/x"),
        // not checked: may not exist, and is not created
        ("/srv/ws/does/not/exist", "/srv/ws/does/not/exist"),
    ];
    for (input, logical) in ok {
        let got = resolve_cwd(&json!(input), &policy).unwrap();
        assert_eq!(got.logical, PathBuf::from(logical), "input {input:?}");
        assert_eq!(got.real, got.logical);
    }
    let bad: &[(&str, &str)] = &[
        ("/srv/ws-evil", "workspace.outside_roots"),
        ("/srv/ws-evil/x", "workspace.outside_roots"),
        ("/srv/ws/../ws-evil", "workspace.outside_roots"),
        ("/srv/ws/a/../../etc", "workspace.outside_roots"),
        ("/srv", "workspace.outside_roots"),
        ("/data/ab", "workspace.outside_roots"),
        ("/srv/ws/../../..", "workspace.traversal"),
        ("srv/ws", "workspace.relative"),
    ];
    for (input, reason) in bad {
        let err = resolve_cwd(&json!(input), &policy).unwrap_err();
        assert_eq!(err.reason, *reason, "input {input:?}");
    }
    assert!(!Path::new("/srv/ws/does/not/exist").exists());
}

#[test]
fn policy_new_rules() {
    let dir = TestDir::new("workspace-policy");
    let ws = dir.mkdir("ws");
    dir.write("file", b"x");
    dir.symlink(&ws, "link");

    assert!(WorkspacePolicy::new(vec![], false).is_err());
    assert!(WorkspacePolicy::new(vec![PathBuf::new()], false).is_err());
    assert!(WorkspacePolicy::new(vec![PathBuf::from("/..")], false).is_err());

    // Relative roots are made absolute against the process directory.
    let p = WorkspacePolicy::new(vec![PathBuf::from("rel/./dir")], false).unwrap();
    assert_eq!(
        p.roots,
        vec![std::env::current_dir().unwrap().join("rel/dir")]
    );

    // Checked: canonicalized, deduplicated; missing or non-directory roots are errors naming them.
    let p =
        WorkspacePolicy::new(vec![dir.join("link"), ws.clone(), dir.join("ws/.")], true).unwrap();
    assert_eq!(p.roots, vec![real(&ws)]);
    let missing = dir.join("missing");
    let err = WorkspacePolicy::new(vec![missing.clone()], true).unwrap_err();
    assert!(err.contains(missing.to_str().unwrap()), "{err}");
    let err = WorkspacePolicy::new(vec![dir.join("file")], true).unwrap_err();
    assert!(err.contains("not a directory"), "{err}");
    assert!(!missing.exists());

    // Unchecked: the same roots are taken as written.
    let p = WorkspacePolicy::new(vec![missing.clone()], false).unwrap();
    assert_eq!(p.roots, vec![missing]);
}

#[test]
fn default_roots_follow_the_environment_variable() {
    use std::ffi::OsStr;
    let cwd = PathBuf::from("/proc-cwd");
    let tmp = PathBuf::from("/tmp");
    let defaults = vec![cwd.clone(), tmp.clone()];
    let rows: &[(Option<&str>, Vec<PathBuf>)] = &[
        (None, defaults.clone()),
        (Some(""), defaults.clone()),
        (Some(":"), defaults.clone()),
        (Some("/a"), vec![PathBuf::from("/a")]),
        (
            Some("/a::/b:"),
            vec![PathBuf::from("/a"), PathBuf::from("/b")],
        ),
        // commas are not separators (as the agent)
        (Some("/a,/b"), vec![PathBuf::from("/a,/b")]),
    ];
    for (value, want) in rows {
        let got = roots_from_env(value.map(OsStr::new), Some(cwd.clone()), tmp.clone());
        assert_eq!(&got, want, "value {value:?}");
    }
    assert_eq!(roots_from_env(None, None, tmp.clone()), vec![tmp]);
    // The real function returns something usable.
    assert!(!WorkspacePolicy::default_roots().is_empty());
}

#[test]
fn normalize_lexically_rows() {
    let rows: &[(&str, Option<&str>)] = &[
        ("/", Some("/")),
        ("/a/b", Some("/a/b")),
        ("/a/b/", Some("/a/b")),
        ("//a//b//", Some("/a/b")),
        ("/a/./b/.", Some("/a/b")),
        ("/a/../b", Some("/b")),
        ("/a/..", Some("/")),
        ("/..", None),
        ("/a/../..", None),
        ("a/b", None),
        ("", None),
        ("/a/.../b", Some("/a/.../b")),
    ];
    for (input, want) in rows {
        assert_eq!(
            normalize_lexically(Path::new(input)),
            want.map(PathBuf::from),
            "input {input:?}"
        );
    }
}

/// Normal components of a path.
fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .count()
}

#[test]
fn cwd_component_cap_rows() {
    let f = fixture();
    let ws = f.ws.to_str().unwrap().to_string();
    let base = f.dir.path.to_str().unwrap().to_string();
    // `{ws}/d/d/…` with exactly `n` components in all.
    let levels = |n: usize| format!("{ws}{}", "/d".repeat(n - depth(&f.ws)));
    let at_cap = levels(MAX_PATH_COMPONENTS);
    std::fs::create_dir_all(&at_cap).unwrap();
    let over = levels(MAX_PATH_COMPONENTS + 1);
    std::fs::create_dir_all(&over).unwrap();

    // At the cap, and paths that are longer only as written, are taken.
    let padded = format!("{ws}{}/proj", "/.//".repeat(200));
    let undone = format!("{ws}{}/proj", "/x/..".repeat(200));
    for (input, logical) in [
        (at_cap.clone(), PathBuf::from(&at_cap)),
        (format!("{at_cap}/"), PathBuf::from(&at_cap)),
        (format!("{over}/.."), PathBuf::from(&at_cap)),
        (padded, f.ws.join("proj")),
        (undone, f.ws.join("proj")),
    ] {
        let got = resolve_cwd(&json!(input), &f.policy).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.logical, logical);
    }

    let outside_deep = format!("{base}/outside{}", "/d".repeat(MAX_PATH_COMPONENTS));
    // The reported attack: a missing path ~2,000 components deep (~4 KiB).
    let attack = format!("{ws}/x{}", "/a".repeat(2000));
    assert!(attack.len() <= MAX_CWD_BYTES);
    let rows: Vec<(String, &str)> = vec![
        // one over, existing or not
        (over.clone(), "workspace.too_deep"),
        (format!("{over}/"), "workspace.too_deep"),
        (format!("{at_cap}/missing"), "workspace.too_deep"),
        (format!("{at_cap}/./missing//"), "workspace.too_deep"),
        (attack, "workspace.too_deep"),
        // refused before the filesystem is consulted: nothing told about what is outside
        (outside_deep, "workspace.too_deep"),
        (
            format!("/{}", "x/".repeat(MAX_PATH_COMPONENTS + 1)),
            "workspace.too_deep",
        ),
        // `..` above `/` is still traversal, however deep it went first
        (
            format!("{}{}", "/a".repeat(100), "/..".repeat(101)),
            "workspace.traversal",
        ),
    ];
    for (input, reason) in rows {
        let err = resolve_cwd(&json!(input), &f.policy).unwrap_err();
        assert_eq!(err.reason, reason, "input {input:.120}");
        assert_eq!(err.code, -32602);
        assert!(!err.message.contains(&base), "message leaks a path");
    }

    // The cap holds without the filesystem too.
    let lexical = WorkspacePolicy::new(vec![PathBuf::from("/srv/ws")], false).unwrap();
    let deep = |n: usize| format!("/srv/ws{}", "/d".repeat(n - 2));
    resolve_cwd(&json!(deep(MAX_PATH_COMPONENTS)), &lexical).unwrap();
    let err = resolve_cwd(&json!(deep(MAX_PATH_COMPONENTS + 1)), &lexical).unwrap_err();
    assert_eq!(err.reason, "workspace.too_deep");
}

/// What the edge did before the bounded walk: `realpath`, and on failure `realpath` of each
/// ancestor, deepest first. The oracle of [`resolve_matches_realpath`].
fn realpath_oracle(path: &Path) -> Resolved {
    match std::fs::canonicalize(path) {
        Ok(real) => Resolved::Real(real),
        Err(_) => Resolved::Unresolved {
            through_link: false,
            ancestor: path
                .ancestors()
                .skip(1)
                .find_map(|a| std::fs::canonicalize(a).ok())
                .unwrap(),
        },
    }
}

#[test]
fn resolve_matches_realpath() {
    let f = fixture();
    let d = &f.dir;
    d.mkdir("ws/proj/sub/subsub");
    d.write("ws/proj/sub/f.txt", b"f");
    // `..` after a symlink is taken on its target: link_in/.. is the fixture's directory.
    d.symlink("link_in/../ws/proj", "ws/up_through_link");
    d.symlink("link_in/../outside", "ws/up_outside");
    d.symlink(".", "ws/dot");
    d.symlink("/", "ws/slash");
    d.symlink("proj/", "ws/trailing_slash");
    d.symlink(".//proj/./sub//", "ws/messy");
    d.symlink("proj/sub/f.txt", "ws/to_file");
    d.symlink("proj/sub/f.txt/", "ws/to_file_slash");
    d.symlink("proj/sub/f.txt//", "ws/to_file_slashes");
    d.symlink("proj/sub//", "ws/to_dir_slashes");
    d.symlink("../../file.txt", "ws/proj/sub/up_file");
    d.symlink("chain2", "ws/chain1");
    d.symlink("chain3", "ws/chain2");
    d.symlink("link_rel/sub", "ws/chain3");
    d.symlink("../../..", "ws/proj/sub/to_dir_parent");
    d.symlink("missing_target/x", "ws/dangling_rel");
    d.symlink("file.txt/x", "ws/through_file");
    d.symlink("self_loop", "ws/self_loop");
    let ws = f.ws.to_str().unwrap();
    let rows = [
        "",
        "proj",
        "proj/sub",
        "proj/sub/f.txt",
        "file.txt",
        "file.txt/sub",
        "file.txt/.",
        "missing",
        "missing/deeper",
        "link_out",
        "link_out/dir",
        "link_out/missing",
        "link_out/dir/missing",
        "link_in/inner",
        "link_in/missing/x",
        "link_rel",
        "link_rel/sub",
        "loop_a",
        "loop_a/x",
        "loop_b",
        "dangling",
        "dangling/x",
        "up_through_link",
        "up_through_link/sub/subsub",
        "up_through_link/nope",
        "up_outside",
        "up_outside/dir",
        "up_outside/nope",
        "dot",
        "dot/dot/dot/proj",
        "dot/missing",
        "slash",
        "slash/etc",
        "slash/nonexistent-a2a-edge",
        "trailing_slash",
        "trailing_slash/sub",
        "messy",
        "messy/f.txt",
        "messy/f.txt/x",
        "to_file",
        "to_file/x",
        "to_file_slash",
        "to_file_slashes",
        "to_dir_slashes",
        "to_dir_slashes/f.txt",
        "proj/sub/up_file",
        "proj/sub/up_file/x",
        "chain1",
        "chain1/subsub",
        "chain1/nope/x",
        "proj/sub/to_dir_parent",
        "proj/sub/to_dir_parent/outside/dir",
        "dangling_rel",
        "through_file",
        "through_file/y",
        "self_loop",
        "self_loop/x",
    ];
    // (the oracle cannot tell whether a failure was through a link: `through_link` has its
    // own test)
    let ancestor_only = |r| match r {
        Resolved::Unresolved { ancestor, .. } => Resolved::Unresolved {
            ancestor,
            through_link: false,
        },
        real => real,
    };
    for row in rows {
        let path = normalize_lexically(&PathBuf::from(format!("{ws}/{row}"))).unwrap();
        let got = ancestor_only(resolve(&path));
        assert_eq!(got, realpath_oracle(&path), "row {row:?}");
    }
    for path in [
        "/",
        "/nonexistent-a2a-edge/x/y",
        "/etc",
        "/etc/nonexistent-a2a-edge",
    ] {
        let path = Path::new(path);
        let got = ancestor_only(resolve(path));
        assert_eq!(got, realpath_oracle(path), "path {path:?}");
    }
}

#[test]
fn resolve_work_is_bounded() {
    let f = fixture();
    let d = &f.dir;
    let ws_real = real(&f.ws);
    let k = depth(&f.ws);
    let ws = f.ws.to_str().unwrap();
    let under_ws = Resolved::Unresolved {
        ancestor: ws_real.clone(),
        through_link: false,
    };

    // A missing path at the component cap: one lookup past the workspace, not one `realpath`
    // per ancestor.
    let missing = PathBuf::from(format!(
        "{ws}/x{}",
        "/a".repeat(MAX_PATH_COMPONENTS - k - 1)
    ));
    assert_eq!(depth(&missing), MAX_PATH_COMPONENTS);
    assert_eq!(walk(&missing), (under_ws.clone(), k + 1));

    // A directory 1,000 levels deep inside the root (the agent can `mkdir -p` it), named
    // through a symlink: over the budget, as a loop is, without walking it.
    let deep = d.mkdir(&format!("ws/deep{}", "/d".repeat(1000)));
    d.symlink(&deep, "ws/to_deep");
    d.write(&format!("ws/deep{}/f.txt", "/d".repeat(1000)), b"f");
    let through_link = Resolved::Unresolved {
        ancestor: ws_real.clone(),
        through_link: true,
    };
    for row in [
        "to_deep",
        "to_deep/f.txt",
        "to_deep/missing",
        "to_deep/missing/x",
    ] {
        let (got, calls) = walk(&f.ws.join(row));
        assert_eq!(got, through_link, "row {row}");
        assert!(calls <= k + 2, "row {row}: {calls} calls");
    }
    // As a workspace: outside, as through a loop (a link that cannot be followed).
    for row in ["to_deep", "to_deep/d"] {
        let err = resolve_cwd(&json!(format!("{ws}/{row}")), &f.policy).unwrap_err();
        assert_eq!(err.reason, "workspace.outside_roots", "row {row}");
    }
    // Ten symlinks to it, in turn: the same.
    for i in 0..10 {
        d.symlink(&deep, &format!("ws/to_deep{i}"));
    }
    let many: String = (0..10).map(|i| format!("/to_deep{i}")).collect();
    let (got, calls) = walk(&PathBuf::from(format!("{ws}{many}")));
    assert_eq!(got, through_link);
    assert!(calls <= k + 2, "{calls} calls");

    // The budget's edge: a symlink to `./././…`, walked to exactly MAX_RESOLVE_STEPS
    // components in all, resolves; one more does not, whether in the link or after it.
    let dots = |n: usize| vec!["."; n].join("/");
    let fits = MAX_RESOLVE_STEPS - k - 1;
    d.symlink(dots(fits), "ws/dots_fit");
    d.symlink(dots(fits + 1), "ws/dots_over");
    d.symlink(dots(fits - 1), "ws/dots_one_left");
    assert_eq!(
        resolve(&f.ws.join("dots_fit")),
        Resolved::Real(ws_real.clone())
    );
    assert_eq!(resolve(&f.ws.join("dots_over")), through_link);
    assert_eq!(
        resolve(&f.ws.join("dots_one_left/proj")),
        Resolved::Real(real(&f.ws.join("proj")))
    );
    // Over the budget after the link resolved, at the path's own component: its real path
    // is the ancestor, and the failure is not through the link.
    let after = resolve(&f.ws.join("dots_fit/proj"));
    assert_eq!(after, under_ws);

    // Symlinks: MAX_SYMLINKS in a chain resolve, one more is a loop.
    d.mkdir("ws/chain");
    d.symlink("../proj", "ws/chain/l0");
    for i in 1..=MAX_SYMLINKS {
        d.symlink(format!("l{}", i - 1), &format!("ws/chain/l{i}"));
    }
    let chain_dir = real(&f.ws.join("chain"));
    assert_eq!(
        resolve(&f.ws.join(format!("chain/l{}", MAX_SYMLINKS - 1))),
        Resolved::Real(real(&f.ws.join("proj")))
    );
    assert_eq!(
        resolve(&f.ws.join(format!("chain/l{MAX_SYMLINKS}"))),
        Resolved::Unresolved {
            ancestor: chain_dir,
            through_link: true,
        }
    );
}

/// A workspace admitted earlier is within the roots at a reload only as a request's would be
/// now: resolved again without looking outside the roots (a symlink put in its place that
/// leads outside is not, whether or not its target exists: no existence oracle), where it
/// was when it is missing now under a root, never outside roots that changed.
#[test]
fn a_workspace_is_still_within_the_roots_as_a_request_would_be() {
    let dir = TestDir::new("still");
    let ws = dir.mkdir("ws");
    dir.mkdir("ws/p");
    dir.mkdir("ws/r");
    dir.mkdir("outside/q");
    let policy = WorkspacePolicy::new(vec![ws.clone()], true).unwrap();
    let cwd = Value::from(dir.join("ws/p").to_str().unwrap());
    let admitted = resolve_cwd(&cwd, &policy).unwrap();
    let elsewhere = WorkspacePolicy::new(vec![dir.join("outside")], true).unwrap();
    let lexical = WorkspacePolicy::new(vec![ws.clone()], false).unwrap();
    assert!(admitted.still_within(&policy), "unchanged");
    assert!(!admitted.still_within(&elsewhere), "the roots changed");
    assert!(admitted.still_within(&lexical), "lexically");
    // (what is put in its place, whether it is within the roots then)
    let rows: [(&str, Option<PathBuf>, bool); 4] = [
        ("missing now", None, true),
        (
            "a link to a place outside",
            Some(dir.join("outside/q")),
            false,
        ),
        (
            "a link to nothing outside",
            Some(dir.join("outside/none")),
            false,
        ),
        ("a link to a place inside", Some(dir.join("ws/r")), true),
    ];
    std::fs::remove_dir(dir.join("ws/p")).unwrap();
    for (case, link, within) in rows {
        if let Some(target) = &link {
            dir.symlink(target, "ws/p");
        }
        assert_eq!(admitted.still_within(&policy), within, "{case}");
        if link.is_some() {
            std::fs::remove_file(dir.join("ws/p")).unwrap();
        }
    }
    // A file in its place, or a link to one inside: no workspace now (a request's cwd must
    // be a directory).
    std::fs::write(dir.join("ws/p"), b"x").unwrap();
    assert!(!admitted.still_within(&policy), "a file");
    std::fs::remove_file(dir.join("ws/p")).unwrap();
    std::fs::write(dir.join("ws/f"), b"x").unwrap();
    dir.symlink(dir.join("ws/f"), "ws/p");
    assert!(!admitted.still_within(&policy), "a link to a file inside");
}
