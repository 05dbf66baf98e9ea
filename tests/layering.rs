//! The house's rule "no arrows back up" (DESIGN), in code that ships (test modules and
//! `tests.rs` files are free to reach anywhere):
//! - the crate's top-level modules (`src/<m>/` and `src/<m>.rs`) import each other without a
//!   cycle: a module that needs a type of one above it takes it as a parameter, or the type
//!   moves down (as `auth::settings`, `card::settings`, `upstream::settings` hold what the
//!   policy compiles to);
//! - and so do the files (modules) inside them, leaving out what a file imports from its own
//!   ancestors (`super::Type`: a parent declares, its children implement).
//!
//! The scan reads the sources as text: comments, string and character literals and
//! `#[cfg(test)] mod` blocks are dropped, then every `crate::` and `super::` path (groups in
//! braces expanded) names the longest module it begins with. The first tests check the
//! scanner itself, so that the last ones can fail.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The source with comments and the contents of string and character literals removed.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        let c = b[i];
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'r'
            && (i == 0 || !ident(b[i - 1]) || (b[i - 1] == b'b' && (i < 2 || !ident(b[i - 2]))))
            && matches!(b.get(i + 1), Some(b'"' | b'#'))
        {
            // A raw string: r"..." or r#"..."#, as many #s as it opened with.
            let mut j = i + 1;
            while b.get(j) == Some(&b'#') {
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            let close = format!("\"{}", "#".repeat(hashes)).into_bytes();
            j += 1;
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            out.push_str("\"\"");
            i = j + close.len();
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i += 1;
        } else if c == b'\'' {
            // A character literal ('x', '\n', '\u{7b}') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                out.push_str("' '");
                i = j + 1;
            } else if let Some(len) = src[i + 1..].chars().next().map(char::len_utf8) {
                if b.get(i + 1 + len) == Some(&b'\'') {
                    out.push_str("' '");
                    i += len + 2;
                } else {
                    out.push('\'');
                    i += 1;
                }
            } else {
                i += 1;
            }
        } else {
            let ch = src[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// `code` without its `#[cfg(test)] mod name { ... }` blocks (braces counted; strings and
/// comments are already gone).
fn without_test_modules(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        let item = after
            .strip_prefix("pub(crate)")
            .or_else(|| after.strip_prefix("pub(super)"))
            .or_else(|| after.strip_prefix("pub"))
            .unwrap_or(after)
            .trim_start();
        let Some(module) = item.strip_prefix("mod ") else {
            // A test-only item other than a module: its imports count like any others'.
            out.push_str("#[cfg(test)]");
            rest = &rest[at + "#[cfg(test)]".len()..];
            continue;
        };
        let end = module.find([';', '{']).unwrap_or(module.len());
        if module[end..].starts_with(';') {
            rest = &module[end + 1..];
            continue;
        }
        let mut depth = 0usize;
        let mut close = module.len();
        for (k, ch) in module[end..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = end + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &module[close..];
    }
    out.push_str(rest);
    out
}

/// The paths of `code` that begin at the crate's root or climb from the module `at`
/// (`super::`), made absolute: `crate::card::{keys::SigningKey, verify}` in any module is
/// `card::keys::SigningKey` and `card::verify`; `super::ids::Id` in `state::registry::lists`
/// is `state::registry::ids::Id`. A climb above the root is left out (it does not compile).
fn paths(code: &str, at: &[String]) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let starts = rest.starts_with("crate::") || rest.starts_with("super::");
        // `$crate::` (macros) is the crate too; `self::super::` and `a::super::` are not roots.
        let prev = code[..i].chars().next_back();
        if !starts || prev.is_some_and(|c| ident(c) || c == ':') {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        }
        let (base, mut tail) = match rest.strip_prefix("crate::") {
            Some(t) => (Some(Vec::new()), t),
            None => {
                let mut t = rest;
                let mut climbs = 0;
                while let Some(next) = t.strip_prefix("super::") {
                    climbs += 1;
                    t = next;
                }
                (
                    at.len().checked_sub(climbs).map(|keep| at[..keep].to_vec()),
                    t,
                )
            }
        };
        let consumed = rest.len() - tail.len();
        if let Some(base) = base {
            expand(base, &mut tail, &mut found);
        }
        i += consumed.max(1);
    }
    found
}

/// Reads `a::b`, `a::{b, c::{d}}` or `{a, b}` from the start of `text` after `prefix`.
fn expand(prefix: Vec<String>, text: &mut &str, out: &mut Vec<Vec<String>>) {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut segs = prefix;
    loop {
        *text = text.trim_start();
        if let Some(group) = text.strip_prefix('{') {
            *text = group;
            loop {
                expand(segs.clone(), text, out);
                *text = text.trim_start();
                match text.chars().next() {
                    Some(',') => *text = &text[1..],
                    Some('}') => {
                        *text = &text[1..];
                        return;
                    }
                    _ => return,
                }
                if text.trim_start().starts_with('}') {
                    *text = &text.trim_start()[1..];
                    return;
                }
            }
        }
        let name: String = text.chars().take_while(|c| ident(*c)).collect();
        if name.is_empty() {
            break;
        }
        *text = &text[name.len()..];
        if name != "self" {
            segs.push(name);
        }
        match text.strip_prefix("::") {
            Some(t) => *text = t,
            None => break,
        }
    }
    if !segs.is_empty() {
        out.push(segs);
    }
}

/// Every module of `src` (`a::b` for `src/a/b.rs` and `src/a/b/mod.rs`) with its file and its
/// shipped code.
fn modules(src: &Path) -> BTreeMap<Vec<String>, (String, String)> {
    let mut found = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let name = rel.file_name().unwrap().to_str().unwrap();
            if !name.ends_with(".rs")
                || name == "tests.rs"
                || rel.components().count() == 1 && (name == "main.rs" || name == "lib.rs")
            {
                continue;
            }
            let mut module: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_str().unwrap().to_string())
                .collect();
            let last = module.pop().unwrap();
            if last != "mod.rs" {
                module.push(last.trim_end_matches(".rs").to_string());
            }
            let code = without_test_modules(&code_only(&std::fs::read_to_string(&path).unwrap()));
            found.insert(module, (rel.display().to_string(), code));
        }
    }
    found
}

type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// The top-level modules and the other top-level modules each one's shipped code imports
/// (with one file that does, for the message); and the same between all modules, leaving
/// out what a module imports from itself or its ancestors.
fn graphs(src: &Path) -> (Graph, Graph) {
    let modules = modules(src);
    let (mut top, mut files) = (Graph::new(), Graph::new());
    for (module, (file, code)) in &modules {
        let me = module.join("::");
        top.entry(module[0].clone()).or_default();
        files.entry(me.clone()).or_default();
        for path in paths(code, module) {
            if path[0] != module[0] {
                top.get_mut(&module[0])
                    .unwrap()
                    .entry(path[0].clone())
                    .or_insert_with(|| file.clone());
            }
            // The longest module the path begins with.
            let Some(target) = (1..=path.len())
                .rev()
                .map(|n| &path[..n])
                .find(|p| modules.contains_key(*p))
            else {
                continue;
            };
            if !module.starts_with(target) {
                files
                    .get_mut(&me)
                    .unwrap()
                    .entry(target.join("::"))
                    .or_insert_with(|| file.clone());
            }
        }
    }
    (top, files)
}

/// A cycle of `graph` (its modules in order, the first repeated at the end), if there is one.
fn find_cycle<V>(graph: &BTreeMap<String, BTreeMap<String, V>>) -> Option<Vec<String>> {
    // Depth-first; 0 unseen, 1 on the path, 2 done.
    fn visit<V>(
        n: &str,
        graph: &BTreeMap<String, BTreeMap<String, V>>,
        mark: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        mark.insert(n.to_string(), 1);
        path.push(n.to_string());
        for next in graph.get(n).into_iter().flat_map(|e| e.keys()) {
            match mark.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = path.iter().position(|p| p == next).unwrap();
                    let mut cycle = path[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, graph, mark, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        mark.insert(n.to_string(), 2);
        None
    }
    let mut mark = BTreeMap::new();
    for n in graph.keys() {
        if mark.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, graph, &mut mark, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// Panics naming each arrow of a cycle of `graph` and a file that draws it.
fn assert_acyclic(what: &str, graph: &Graph) {
    if let Some(cycle) = find_cycle(graph) {
        let arrows: Vec<String> = cycle
            .windows(2)
            .map(|w| format!("{} -> {} (in {})", w[0], w[1], graph[&w[0]][&w[1]]))
            .collect();
        panic!(
            "{what} import each other in a cycle:\n  {}",
            arrows.join("\n  ")
        );
    }
}

/// The modules `src` imports, written as `a::b` (absolute), for a file at module `at`.
fn scanned(src: &str, at: &str) -> BTreeSet<String> {
    let at: Vec<String> = at.split("::").map(str::to_string).collect();
    paths(&without_test_modules(&code_only(src)), &at)
        .iter()
        .map(|p| p.join("::"))
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_scanner_sees_code_and_only_code() {
    // (source, the paths it names, from a file of module `gate::route`)
    let cases: &[(&str, &[&str])] = &[
        ("use crate::auth::Principal;", &["auth::Principal"]),
        ("let x = crate::state::registry::facts_of(v);", &["state::registry::facts_of"]),
        (
            "use crate::{auth, card::keys::{SigningKey, SigningAlg}};",
            &["auth", "card::keys::SigningKey", "card::keys::SigningAlg"],
        ),
        (
            "use crate::{\n    a2a::{Method, Request},\n    time,\n};",
            &["a2a::Method", "a2a::Request", "time"],
        ),
        ("use crate::card::keys::{self, SigningKey};", &["card::keys", "card::keys::SigningKey"]),
        ("// use crate::gate;\n/* crate::policy */ fn f() {}", &[]),
        ("/* outer /* nested */ crate::gate */ use crate::a2a::Method;", &["a2a::Method"]),
        ("let s = \"crate::gate\"; let t = r#\"crate::policy \"quoted\"\"#;", &[]),
        ("let s = \"esc \\\" crate::gate\"; use crate::time;", &["time"]),
        ("let c = '{'; let d = '\\''; fn f<'a>(x: &'a str) {} use crate::body;", &["body"]),
        ("use a2a_edge::crate_name::x; use $crate::reason;", &["reason"]),
        (
            "use crate::a2a;\n#[cfg(test)]\nmod tests {\n    use crate::gate;\n    fn f() { let m = \"}\"; if true { } }\n}\nuse crate::time;",
            &["a2a", "time"],
        ),
        ("#[cfg(test)]\nmod tests;\nuse crate::sniff;", &["sniff"]),
        ("#[cfg(test)]\nfn helper() { crate::gate::x(); }", &["gate::x"]),
        // From `gate::route`: `super` is `gate`, two climbs the root.
        ("use super::Rejection;", &["gate::Rejection"]),
        ("use super::super::policy::Policy;", &["policy::Policy"]),
        ("let t = super::super::super::x();", &[]),
        ("use self::super::x; use state::registry::Id;", &[]),
    ];
    for (src, want) in cases {
        assert_eq!(scanned(src, "gate::route"), set(want), "{src}");
    }
}

#[test]
fn a_cycle_is_found_and_named() {
    let graph = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeMap<String, ()>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry(a.to_string())
                .or_default()
                .insert(b.to_string(), ());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert_eq!(
        find_cycle(&graph(&[("gate", "policy"), ("policy", "auth")])),
        None
    );
    assert_eq!(
        find_cycle(&graph(&[
            ("gate", "policy"),
            ("policy", "auth"),
            ("auth", "policy")
        ])),
        Some(vec!["auth".into(), "policy".into(), "auth".into()])
    );
    assert_eq!(
        find_cycle(&graph(&[("a", "b"), ("b", "c"), ("c", "a")])),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

#[test]
fn the_top_level_modules_import_each_other_without_a_cycle() {
    let (top, _) = graphs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // The scan found the house: the gate imports the policy, the policy the validators.
    assert!(top["gate"].contains_key("policy"), "{top:?}");
    assert!(top["policy"].contains_key("validate"), "{top:?}");
    assert_acyclic("the top-level modules", &top);
}

#[test]
fn the_modules_inside_them_import_each_other_without_a_cycle() {
    let (_, files) = graphs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // Siblings are seen (the registry's state keeps its maps in `ids`), ancestors are not.
    assert!(
        files["state::registry::state"].contains_key("state::registry::ids"),
        "{files:?}"
    );
    assert!(!files["state::registry::state"].contains_key("state::registry"));
    assert!(files["gate"].contains_key("policy::routes"), "{files:?}");
    assert_acyclic("the modules", &files);
}
