//! `validate::parts::check_part` on an arbitrary JSON object (the bytes after the first are
//! the part, as JSON; `@R`, `@S`, `@O` in them stand for the fixture's directories).
//! The first byte picks the request's workspace: none, the root, `root/sub`, the second
//! root; and whether the filesystem is checked.
//!
//! Properties: never panics; a refused part is left untouched and the refusal is a -32602 (or -32005 for an
//! unsupported media type or charset)
//! with a `part.*` reason; an accepted part holds exactly one of text/raw/url/data, only
//! known keys, a `mediaType` that is already normalized (classifies to itself), and a file
//! URL only with a workspace and inside it and a root; checking the accepted part again
//! accepts it unchanged (a fixed point).
#![no_main]

use a2a_edge::validate::parts::{check_part, PartRules, TextFileReads};
use a2a_edge::validate::workspace::Workspace;
use a2a_edge_fuzz::{expand, fixture, inside_roots};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

const PART_KEYS: [&str; 7] = [
    "text",
    "raw",
    "url",
    "data",
    "mediaType",
    "filename",
    "metadata",
];

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let Ok(Value::Object(part)) = serde_json::from_str::<Value>(&expand(text)) else {
        return;
    };
    let f = fixture();
    let workspace = match flags % 4 {
        0 => None,
        1 => Some(f.root.clone()),
        2 => Some(f.root.join("sub")),
        _ => Some(f.root2.join("ws")),
    }
    .map(|real| Workspace {
        logical: real.clone(),
        real,
    });
    let policy = if flags & 4 == 0 {
        &f.requests.workspace
    } else {
        &f.lexical
    };
    let rules = PartRules {
        media: &f.requests.media,
        workspace: workspace.as_ref(),
        policy,
        reads: TextFileReads::default(),
    };

    let mut checked: Map<String, Value> = part.clone();
    if let Err(e) = check_part(&mut checked, &rules) {
        assert_eq!(checked, part, "a refused part was modified");
        // -32005 only for a media type or charset the agent does not take (A2A §3.1.1).
        assert!(
            e.code == -32602
                || (e.code == -32005
                    && matches!(e.reason.as_str(), "part.media_type" | "part.charset")),
            "{e:?}"
        );
        assert!(e.reason.as_str().starts_with("part."), "{e:?}");
        return;
    }
    assert!(
        checked.keys().all(|k| PART_KEYS.contains(&k.as_str())),
        "{checked:?}"
    );
    let contents = ["text", "raw", "url", "data"]
        .iter()
        .filter(|k| checked.contains_key(**k))
        .count();
    assert_eq!(contents, 1, "{checked:?}");
    let media = checked["mediaType"].as_str().expect("mediaType string");
    let (_, normalized) = f
        .requests
        .media
        .classify(Some(media))
        .expect("forwarded mediaType");
    assert_eq!(normalized, media, "forwarded mediaType is not normalized");

    if let Some(u) = checked.get("url") {
        let ws = workspace
            .as_ref()
            .expect("a file URL accepted without a workspace");
        let url = url::Url::parse(u.as_str().unwrap()).expect("forwarded URL parses");
        let path = url.to_file_path().expect("forwarded URL is a file path");
        assert!(
            inside_roots(&path, &policy.roots),
            "outside the roots: {path:?}"
        );
        assert!(
            path.starts_with(&ws.real),
            "outside the workspace: {path:?}"
        );
    }

    let mut again = checked.clone();
    check_part(&mut again, &rules)
        .unwrap_or_else(|e| panic!("forwarded part refused on a second check: {e:?}\n{checked:?}"));
    assert_eq!(again, checked, "a second check changed the part");
});
