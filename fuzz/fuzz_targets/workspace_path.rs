//! `validate::workspace::resolve_cwd` on arbitrary strings (`@R`, `@S`, `@O` stand for the
//! fixture's allowed roots and outside directory), against the real tree (links out, links
//! between roots, loops, dangling links, files) and lexically.
//!
//! Properties: never panics; an accepted path's real path lies inside an allowed root
//! (component-wise) and holds no `.`/`..`; with the filesystem checked it is the canonical
//! path of the logical one and a directory; the logical path (what is forwarded) is absolute,
//! normalized, and resolves to the same workspace again; a refusal never names a path.
#![no_main]

use a2a_edge::validate::workspace::{resolve_cwd, WorkspacePolicy};
use a2a_edge_fuzz::{expand, fixture, inside_roots};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn check(value: &Value, policy: &WorkspacePolicy) {
    let f = fixture();
    let ws = match resolve_cwd(value, policy) {
        Ok(ws) => ws,
        Err(e) => {
            assert_eq!(e.code, -32602);
            assert!(e.reason.as_str().starts_with("workspace."), "{e:?}");
            assert!(!e.message.contains(&*f.root.to_string_lossy()), "{e:?}");
            return;
        }
    };
    assert!(
        inside_roots(&ws.real, &policy.roots),
        "real path outside the roots: {ws:?}"
    );
    assert!(
        inside_roots(&ws.logical, &[std::path::PathBuf::from("/")]),
        "{ws:?}"
    );
    if policy.check_filesystem {
        let real = std::fs::canonicalize(&ws.logical).expect("accepted path resolves");
        assert_eq!(real, ws.real);
        assert!(real.is_dir(), "not a directory: {ws:?}");
    } else {
        assert_eq!(ws.real, ws.logical);
    }
    let again = resolve_cwd(&Value::String(ws.forward_cwd()), policy)
        .unwrap_or_else(|e| panic!("forwarded cwd refused: {e:?} {ws:?}"));
    assert_eq!(again, ws, "the forwarded cwd names another workspace");
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let value = match std::str::from_utf8(data) {
        Ok(s) => Value::String(expand(s)),
        // Not a string: the type check.
        Err(_) => Value::from(data.len()),
    };
    check(&value, &f.requests.workspace);
    check(&value, &f.lexical);
});
