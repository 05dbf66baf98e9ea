//! The test proxies' policies, built as TOML documents rather than spliced as text: the base
//! policy, then keys set by their dotted names (the policy file's own names, POLICY.md) and
//! fragments merged table by table. The result is the text an operator would write, loaded
//! by the edge's own parser.

use std::path::Path;

use toml::{Table, Value};

use super::{hex, TOKEN};

/// A policy under construction.
#[derive(Debug, Clone)]
pub struct PolicyDoc(Table);

impl PolicyDoc {
    /// The base every test proxy starts from: a listener on 127.0.0.1:0, dev certificates in
    /// `dir/certs`, one agent `agent-1` (the embedded engine), one bearer principal `tester`
    /// whose token is [`TOKEN`].
    pub fn base(dir: &Path) -> PolicyDoc {
        let certs = dir.join("certs").display().to_string();
        let token_sha256 = hex(&a2a_edge::policy::sha256(TOKEN.as_bytes()));
        PolicyDoc(Table::new())
            .set("server.listen", "127.0.0.1:0")
            .set("server.public_url", "https://127.0.0.1:0/")
            .set("tls.dev", true)
            .set("tls.dev_dir", certs)
            .merge("[[upstreams]]\nname = \"agent-1\"\nurl = \"embedded\"\n")
            .merge(&format!(
                "[[auth.bearer]]\nprincipal = \"tester\"\ntoken_sha256 = \"{token_sha256}\"\n"
            ))
    }

    /// Sets `key`, a dotted path (`limits.max_registry_entries`; a number names an element of
    /// an array: `upstreams.0.url`), making the tables on the way.
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> PolicyDoc {
        let (table, last) = self.table_at(key);
        table.insert(last.to_string(), value.into());
        self
    }

    /// Removes `key` (a dotted path, as in [`PolicyDoc::set`]), which must be there.
    pub fn remove(mut self, key: &str) -> PolicyDoc {
        let (table, last) = self.table_at(key);
        assert!(table.remove(last).is_some(), "no {key} to remove");
        self
    }

    /// Merges a TOML document: its tables into the policy's key by key, its arrays of tables
    /// (`[[auth.bearer]]`, `[[upstreams]]`) after the policy's; any other value replaces.
    pub fn merge(mut self, fragment: &str) -> PolicyDoc {
        merge(&mut self.0, parse(fragment));
        self
    }

    /// Merges a fragment written inside the table at `path` (`server`, `upstreams.0`): its
    /// keys before any table header go into that table, its tables merge at the root (as
    /// they would if the fragment were written under that table's header in a file).
    pub fn merge_into(mut self, path: &str, fragment: &str) -> PolicyDoc {
        const HERE: &str = "__merge_into__";
        let mut root = parse(&format!("[{HERE}]\n{fragment}"));
        let Some(Value::Table(own)) = root.remove(HERE) else {
            unreachable!("the header opened it")
        };
        merge(self.table(path), own);
        merge(&mut self.0, root);
        self
    }

    /// The policy file's text.
    pub fn text(&self) -> String {
        toml::to_string(&self.0).unwrap()
    }

    /// The table at the dotted `path`, made on the way; a number after an array's name is
    /// an element of it (`upstreams.0`).
    fn table(&mut self, path: &str) -> &mut Table {
        let segs: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
        let mut table = &mut self.0;
        let mut i = 0;
        while i < segs.len() {
            let seg = segs[i];
            let value = table
                .entry(seg.to_string())
                .or_insert_with(|| Value::Table(Table::new()));
            table = match value {
                Value::Table(t) => t,
                Value::Array(items) => {
                    i += 1;
                    let n: usize = segs
                        .get(i)
                        .and_then(|s| s.parse().ok())
                        .unwrap_or_else(|| panic!("{path}: {seg} is an array, name an element"));
                    match items.get_mut(n) {
                        Some(Value::Table(t)) => t,
                        _ => panic!("{path}: no table at {seg}.{n}"),
                    }
                }
                other => panic!("{path}: {seg} is {other:?}, not a table"),
            };
            i += 1;
        }
        table
    }

    /// The table holding the last segment of `key`, made on the way, and that segment.
    fn table_at<'a>(&mut self, key: &'a str) -> (&mut Table, &'a str) {
        let (path, last) = key.rsplit_once('.').unwrap_or(("", key));
        (self.table(path), last)
    }
}

fn parse(fragment: &str) -> Table {
    fragment
        .parse()
        .unwrap_or_else(|e| panic!("{e}\nin the fragment:\n{fragment}"))
}

fn is_tables(items: &[Value]) -> bool {
    !items.is_empty() && items.iter().all(Value::is_table)
}

fn merge(into: &mut Table, from: Table) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(Value::Table(a)), Value::Table(b)) => merge(a, b),
            (Some(Value::Array(a)), Value::Array(b)) if is_tables(a) && is_tables(&b) => {
                a.extend(b)
            }
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}
