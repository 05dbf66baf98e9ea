//! The house's rule "no arrows back up" (DESIGN): the crate's top-level modules (`src/<m>/` and
//! `src/<m>.rs`) import each other without a cycle, in code that ships (test modules and
//! `tests.rs` files are free to reach anywhere). A module that needs a type of one above it
//! takes it as a parameter or the type moves down (as `auth::settings`, `card::settings`,
//! `upstream::settings` hold what the policy compiles to).
//!
//! The scan reads the sources as text: comments, string and character literals and
//! `#[cfg(test)] mod` blocks are dropped, then every `crate::<module>` path is an import of
//! that module. The first tests check the scanner itself, so that the last can fail.

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

/// `code` with every `super::` chain that climbs to the crate's root (from a file whose
/// module is `depth` levels down: `src/x.rs` 1, `src/x/y.rs` 2) spelled `crate::`.
fn rooted(code: &str, depth: usize) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("super::") {
        let prev = rest[..at].chars().next_back();
        out.push_str(&rest[..at]);
        if prev.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            out.push_str("super::");
            rest = &rest[at + "super::".len()..];
            continue;
        }
        let mut tail = &rest[at..];
        let mut climbs = 0;
        while let Some(t) = tail.strip_prefix("super::") {
            climbs += 1;
            tail = t;
        }
        if climbs >= depth {
            out.push_str("crate::");
        } else {
            out.push_str(&"super::".repeat(climbs));
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// The top-level modules `code` names through `crate::`.
fn imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = code.len() - rest.len() + at;
        let tail = &rest[at + "crate::".len()..];
        // `a2a_edge::crate::` does not exist; `$crate::` (macros) is the crate too.
        let prev = code[..before].chars().next_back();
        if !prev.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            let names = match tail.strip_prefix('{') {
                // A group: `crate::{auth::Principal, card}` imports auth and card.
                Some(group) => {
                    let mut depth = 0usize;
                    let end = group
                        .char_indices()
                        .find(|&(_, c)| {
                            match c {
                                '{' => depth += 1,
                                '}' if depth == 0 => return true,
                                '}' => depth -= 1,
                                _ => {}
                            }
                            false
                        })
                        .map_or(group.len(), |(k, _)| k);
                    let mut items = Vec::new();
                    let mut depth = 0usize;
                    let mut start = 0;
                    for (k, c) in group[..end].char_indices() {
                        match c {
                            '{' => depth += 1,
                            '}' => depth -= 1,
                            ',' if depth == 0 => {
                                items.push(&group[start..k]);
                                start = k + 1;
                            }
                            _ => {}
                        }
                    }
                    items.push(&group[start..end]);
                    items
                }
                None => vec![tail],
            };
            for item in names {
                let name: String = item
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != "self" {
                    found.insert(name);
                }
            }
        }
        rest = tail;
    }
    found
}

/// Each top-level module of `src` and the other top-level modules its shipped code imports,
/// with one file that does (for the message).
fn module_graph(src: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
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
            if !name.ends_with(".rs") || name == "tests.rs" {
                continue;
            }
            let first = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_str()
                .unwrap();
            let top = first.trim_end_matches(".rs").to_string();
            if top == "main" || top == "lib" {
                continue;
            }
            // `src/x.rs` and `src/x/mod.rs` are x (1 down), `src/x/y.rs` is x::y (2).
            let depth = rel.components().count() - usize::from(name == "mod.rs");
            let code = without_test_modules(&code_only(&std::fs::read_to_string(&path).unwrap()));
            let code = rooted(&code, depth);
            let edges = graph.entry(top.clone()).or_default();
            for m in imports(&code) {
                if m != top {
                    edges.entry(m).or_insert_with(|| rel.display().to_string());
                }
            }
        }
    }
    graph
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

#[test]
fn the_scanner_sees_code_and_only_code() {
    // (source, the modules it imports)
    let cases: &[(&str, &[&str])] = &[
        ("use crate::auth::Principal;", &["auth"]),
        ("let x = crate::state::registry::facts_of(v);", &["state"]),
        ("use crate::{auth, card::keys::{SigningKey, SigningAlg}};", &["auth", "card"]),
        ("use crate::{\n    a2a::{Method, Request},\n    time,\n};", &["a2a", "time"]),
        ("// use crate::gate;\n/* crate::policy */ fn f() {}", &[]),
        ("/* outer /* nested */ crate::gate */ use crate::a2a::Method;", &["a2a"]),
        ("let s = \"crate::gate\"; let t = r#\"crate::policy \"quoted\"\"#;", &[]),
        ("let s = \"esc \\\" crate::gate\"; use crate::time;", &["time"]),
        ("let c = '{'; let d = '\\''; fn f<'a>(x: &'a str) {} use crate::body;", &["body"]),
        ("use a2a_edge::crate_name::x; use $crate::reason;", &["reason"]),
        (
            "use crate::a2a;\n#[cfg(test)]\nmod tests {\n    use crate::gate;\n    fn f() { let m = \"}\"; if true { } }\n}\nuse crate::time;",
            &["a2a", "time"],
        ),
        ("#[cfg(test)]\nmod tests;\nuse crate::sniff;", &["sniff"]),
        ("#[cfg(test)]\nfn helper() { crate::gate::x(); }", &["gate"]),
    ];
    for (src, want) in cases {
        let got = imports(&without_test_modules(&code_only(src)));
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(got, want, "{src}");
    }
}

#[test]
fn super_to_the_root_is_the_crate() {
    // (source, depth of its module, the modules it imports)
    let cases: &[(&str, usize, &[&str])] = &[
        ("use super::gate::Process;", 1, &["gate"]),
        ("use super::registry::Entry;", 2, &[]),
        ("use super::super::gate::Process;", 2, &["gate"]),
        ("let t = super::super::tests::xorshift(1);", 3, &[]),
        ("use super::super::super::time::now;", 3, &["time"]),
        ("use self::super::x;", 2, &[]),
    ];
    for (src, depth, want) in cases {
        let got = imports(&rooted(&code_only(src), *depth));
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(got, want, "{src} at depth {depth}");
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
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    // The scan found the house: the gate imports the policy, the policy the validators.
    assert!(graph["gate"].contains_key("policy"), "{graph:?}");
    assert!(graph["policy"].contains_key("validate"), "{graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        let arrows: Vec<String> = cycle
            .windows(2)
            .map(|w| format!("{} -> {} (in {})", w[0], w[1], graph[&w[0]][&w[1]]))
            .collect();
        panic!(
            "the modules import each other in a cycle:\n  {}",
            arrows.join("\n  ")
        );
    }
}
