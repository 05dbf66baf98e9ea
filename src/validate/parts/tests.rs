use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{json, Map, Value};
use url::Url;

use super::*;
use crate::validate::workspace::resolve_cwd;
use crate::validate::workspace::testdir::TestDir;

const MIB: usize = 1 << 20;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn media() -> MediaTypes {
    MediaTypes::new(&[], &[]).unwrap()
}

fn run(part: &Value, rules: &PartRules) -> Result<Map<String, Value>, RpcError> {
    let mut map = part.as_object().unwrap().clone();
    let before = map.clone();
    let result = check_part(&mut map, rules);
    match result {
        Ok(()) => Ok(map),
        Err(e) => {
            assert_eq!(map, before, "a rejected part is left untouched");
            Err(e)
        }
    }
}

/// Rows of (part, expected reason); every error must be -32602 and leak nothing of `secret`.
fn assert_rejected(rows: &[(Value, &str)], rules: &PartRules, secret: &str) {
    for (part, reason) in rows {
        let shown = {
            let s = part.to_string();
            if s.chars().count() > 200 {
                format!("{}…", s.chars().take(200).collect::<String>())
            } else {
                s
            }
        };
        match run(part, rules) {
            Ok(_) => panic!("accepted {shown}, wanted {reason}"),
            Err(e) => {
                assert_eq!(e.reason, *reason, "part {shown}");
                assert_eq!(e.code, -32602, "part {shown}");
                assert!(
                    !secret.is_empty() && !e.message.contains(secret),
                    "leak: {e}"
                );
            }
        }
    }
}

/// Lexical rules with no workspace, for the inline part kinds.
fn with_inline_rules<T>(f: impl FnOnce(&PartRules) -> T) -> T {
    let media = media();
    let policy = WorkspacePolicy::new(vec![PathBuf::from("/srv/ws")], false).unwrap();
    let rules = PartRules {
        media: &media,
        workspace: None,
        policy: &policy,
        reads: TextFileReads::default(),
    };
    f(&rules)
}

#[test]
fn shape_rows() {
    with_inline_rules(|rules| {
        let rows: Vec<(Value, &str)> = vec![
            (json!({}), "part.shape"),
            (json!({"mediaType": "text/plain"}), "part.shape"),
            (json!({"kind": "text"}), "part.shape"),
            // A2A 0.3 file part: no 1.0 content field
            (
                json!({"kind": "file", "file": {"uri": "file:///x"}}),
                "part.shape",
            ),
            (json!({"text": "a", "raw": "YQ=="}), "part.shape"),
            (json!({"text": "a", "data": {}}), "part.shape"),
            (json!({"text": "a", "url": "file:///x"}), "part.shape"),
            (json!({"raw": "YQ==", "data": null}), "part.shape"),
            (
                json!({"text": "a", "raw": "YQ==", "url": "u", "data": 1}),
                "part.shape",
            ),
            // wrong JSON types
            (json!({"text": 1}), "part.shape"),
            (json!({"text": null}), "part.shape"),
            (json!({"text": ["a"]}), "part.shape"),
            (json!({"raw": []}), "part.shape"),
            (json!({"raw": null}), "part.shape"),
            (json!({"url": {}}), "part.shape"),
            (json!({"url": true}), "part.shape"),
            (json!({"text": "a", "mediaType": 5}), "part.shape"),
            (json!({"text": "a", "mediaType": null}), "part.shape"),
            (
                json!({"text": "a", "mediaType": ["text/plain"]}),
                "part.shape",
            ),
            (json!({"text": "a", "filename": 5}), "part.shape"),
            (json!({"text": "a", "filename": null}), "part.shape"),
            (json!({"text": "a", "metadata": "x"}), "part.shape"),
            (json!({"text": "a", "metadata": []}), "part.shape"),
            (json!({"text": "a", "metadata": null}), "part.shape"),
            // filename
            (json!({"text": "a", "filename": "a/b"}), "part.filename"),
            (
                json!({"text": "a", "filename": "/etc/passwd"}),
                "part.filename",
            ),
            (json!({"text": "a", "filename": "a\\b"}), "part.filename"),
            (json!({"text": "a", "filename": "a\u{0}b"}), "part.filename"),
            (json!({"text": "a", "filename": "a\nb"}), "part.filename"),
            (json!({"text": "a", "filename": "a\u{7f}"}), "part.filename"),
            (json!({"text": "a", "filename": "a\u{9b}"}), "part.filename"),
            (
                json!({"text": "a", "filename": "\u{202E}gnp.exe"}),
                "part.filename",
            ),
            (json!({"text": "a", "filename": ".."}), "part.filename"),
            (json!({"text": "a", "filename": "."}), "part.filename"),
            (
                json!({"text": "a", "filename": "a".repeat(256)}),
                "part.filename",
            ),
            (
                json!({"text": "a", "filename": "é".repeat(128)}),
                "part.filename",
            ),
        ];
        assert_rejected(&rows, rules, "/srv/ws");

        let ok = [
            json!({"text": "a", "filename": "report.txt"}),
            json!({"text": "a", "filename": ""}),
            json!({"text": "a", "filename": "a".repeat(255)}),
            json!({"text": "a", "filename": "ünïcode ½.txt"}),
            json!({"text": "a", "filename": "..."}),
            json!({"text": "a", "metadata": {"k": [1, 2]}}),
            json!({"text": ""}),
        ];
        for part in ok {
            run(&part, rules).unwrap_or_else(|e| panic!("{part}: {e}"));
        }
    });
}

#[test]
fn normalization_of_the_forwarded_part() {
    with_inline_rules(|rules| {
        // Unknown keys dropped (ProtoJSON aliases too); mediaType set.
        let got = run(
            &json!({"text": "hi", "kind": "text", "media_type": "image/png", "extra": {"a": 1},
                    "filename": "f.txt", "metadata": {"m": 1}}),
            rules,
        )
        .unwrap();
        assert_eq!(
            Value::Object(got),
            json!({"text": "hi", "mediaType": "text/plain", "filename": "f.txt", "metadata": {"m": 1}})
        );
        let rows: &[(Value, &str)] = &[
            (json!({"text": "a"}), "text/plain"),
            (json!({"text": "a", "mediaType": ""}), "text/plain"),
            (
                json!({"text": "a", "mediaType": "TEXT/PLAIN"}),
                "text/plain",
            ),
            (
                json!({"text": "a", "mediaType": "text/plain;charset=utf-8"}),
                "text/plain",
            ),
            (
                json!({"text": "a", "mediaType": "Text/Markdown; charset=\"UTF-8\""}),
                "text/markdown",
            ),
            (
                json!({"raw": "aGk=", "mediaType": "Image/PNG"}),
                "image/png",
            ),
            (
                json!({"data": {"a": 1}, "mediaType": "application/JSON"}),
                "application/json",
            ),
        ];
        for (part, want) in rows {
            let got = run(part, rules).unwrap_or_else(|e| panic!("{part}: {e}"));
            assert_eq!(got.get("mediaType"), Some(&json!(want)), "part {part}");
        }
    });
}

#[test]
fn media_type_rows() {
    with_inline_rules(|rules| {
        let text = |media_type: &str| json!({"text": "a", "mediaType": media_type});
        let data = |data: Value, media_type: &str| json!({"data": data, "mediaType": media_type});
        let rows: Vec<(Value, &str)> = vec![
            (text("text/html"), "part.media_type"),
            (text("textplain"), "part.media_type"),
            (text(" text/plain"), "part.media_type"),
            (text("text/plain; charset=latin1"), "part.charset"),
            (text("text/plain; format=flowed"), "part.media_param"),
            // text with a multimodal type
            (text("image/png"), "part.media_type"),
            (text("application/octet-stream"), "part.media_type"),
            (
                json!({"raw": "YQ==", "mediaType": "text/html"}),
                "part.media_type",
            ),
            (
                json!({"url": "file:///srv/ws/a", "mediaType": "video/mp4"}),
                "part.media_type",
            ),
            // data with a text type other than application/json (a missing type is text/plain)
            (json!({"data": {"a": 1}}), "part.media_type"),
            (data(json!({"a": 1}), "text/plain"), "part.media_type"),
            (data(json!({"a": 1}), "text/markdown"), "part.media_type"),
            (data(json!("x"), "application/yaml"), "part.media_type"),
        ];
        // A type (or charset) the agent does not take at all is ContentTypeNotSupported
        // (-32005, A2A §3.1.1); a malformed one, or one that does not fit the part's content,
        // is invalid params.
        let unsupported = ["text/html", "text/plain; charset=latin1", "video/mp4"];
        for (part, reason) in &rows {
            let e = run(part, rules).unwrap_err();
            assert_eq!(e.reason, *reason, "{part}");
            let media = part["mediaType"].as_str().unwrap_or("");
            let want = if unsupported.contains(&media) {
                -32005
            } else {
                -32602
            };
            assert_eq!(e.code, want, "{part}");
        }
    });
}

#[test]
fn raw_and_data_rows() {
    let exact_text = b64(&vec![b'a'; MIB]);
    let over_text = b64(&vec![b'a'; MIB + 1]);
    let exact_bin = b64(&vec![0xffu8; 5 * MIB]);
    let over_bin = b64(&vec![0xffu8; 5 * MIB + 1]);
    let bin_bytes = b64(&[0x89, b'P', b'N', b'G', 0xff, 0x00]);
    // A JSON string of n - 2 characters serializes to n bytes.
    let exact_data = json!("a".repeat(MIB - 2));
    let over_data = json!("a".repeat(MIB - 1));
    assert_eq!(serde_json::to_vec(&exact_data).unwrap().len(), MIB);
    // Far over the limits: refused before decoding.
    let huge = "A".repeat(8 * MIB);

    with_inline_rules(|rules| {
        let ok: Vec<Value> = vec![
            json!({"raw": b64(b"hello")}),
            json!({"raw": "aGVsbG8=", "mediaType": "text/markdown"}),
            json!({"raw": b64("ünï".as_bytes()), "mediaType": "application/json"}),
            json!({"raw": ""}),
            json!({"raw": exact_text}),
            json!({"raw": bin_bytes, "mediaType": "image/png"}),
            json!({"raw": bin_bytes, "mediaType": "application/octet-stream"}),
            json!({"raw": bin_bytes, "mediaType": "audio/ogg"}),
            json!({"raw": exact_bin, "mediaType": "image/jpeg"}),
            json!({"data": {"k": [1, 2]}, "mediaType": "application/json"}),
            json!({"data": [1, "two", null], "mediaType": "application/json"}),
            json!({"data": "s", "mediaType": "application/json"}),
            json!({"data": null, "mediaType": "application/json"}),
            json!({"data": exact_data, "mediaType": "application/json"}),
            json!({"data": {"bytes": bin_bytes}, "mediaType": "image/png"}),
            json!({"data": {"base64": bin_bytes}, "mediaType": "image/gif"}),
            json!({"data": {"bytes": exact_bin}, "mediaType": "image/webp"}),
            json!({"data": {"bytes": ""}, "mediaType": "image/png"}),
        ];
        for part in &ok {
            run(part, rules).unwrap_or_else(|e| panic!("{:.200}: {e}", part.to_string()));
        }

        // Binary bytes are checked a 64 KiB slice at a time: what only the whole input shows
        // (padding that ends a slice, a bad byte deep in it, the last quantum) is refused too.
        let slice = 64 * 1024;
        let pad_at_slice_end = format!("{}QQ==QUJD", "A".repeat(slice - 4));
        let bad_deep = format!("{}*AAA", "A".repeat(3 * slice));
        let bad_tail_bits = format!("{}aGVsbG9=", "A".repeat(slice));
        let short_tail = format!("{}AAA", "A".repeat(2 * slice));
        let long_ok = b64(&vec![7u8; 3 * slice + 5]);
        run(&json!({"raw": long_ok, "mediaType": "image/png"}), rules).unwrap();
        run(
            &json!({"data": {"bytes": long_ok}, "mediaType": "image/png"}),
            rules,
        )
        .unwrap();
        for (i, bad) in [pad_at_slice_end, bad_deep, bad_tail_bits, short_tail]
            .iter()
            .enumerate()
        {
            for part in [
                json!({"raw": bad, "mediaType": "image/png"}),
                json!({"data": {"base64": bad}, "mediaType": "image/png"}),
            ] {
                match run(&part, rules) {
                    Ok(_) => panic!("slice case {i} passed"),
                    Err(e) => assert_eq!(e.reason, "part.base64", "slice case {i}"),
                }
            }
        }

        let png = |data: Value| json!({"data": data, "mediaType": "image/png"});
        let rows: Vec<(Value, &str)> = vec![
            // base64 tricks (text and binary)
            (json!({"raw": "aGVsbG8"}), "part.base64"), // missing padding
            (json!({"raw": "aGVsbG8=="}), "part.base64"), // extra padding
            (json!({"raw": "aGVsbA"}), "part.base64"),  // missing "=="
            (json!({"raw": "aGVs bG8="}), "part.base64"), // inner space
            (json!({"raw": "aGVsbG8=\n"}), "part.base64"), // trailing newline
            (json!({"raw": " aGVsbG8="}), "part.base64"), // leading space
            (json!({"raw": "aGVs\r\nbG8="}), "part.base64"), // MIME line break
            (json!({"raw": "aGVsbG9="}), "part.base64"), // non-canonical trailing bits
            (json!({"raw": b64(&[b'h', 0x80])}), "part.utf8"),
            (
                json!({"raw": "-_8=", "mediaType": "image/png"}),
                "part.base64",
            ), // url-safe alphabet
            (
                json!({"raw": "+/8", "mediaType": "image/png"}),
                "part.base64",
            ), // no padding
            (json!({"raw": "aGVsbG8=aGk="}), "part.base64"), // padding in the middle
            (
                json!({"raw": "aGVsbG8=", "mediaType": "image/png "}),
                "part.media_type",
            ),
            (json!({"raw": "%%%%"}), "part.base64"),
            // UTF-8
            (json!({"raw": b64(&[0xff, 0xfe])}), "part.utf8"),
            (json!({"raw": b64(&[0xc3])}), "part.utf8"),
            (json!({"raw": b64(&[0xed, 0xa0, 0x80])}), "part.utf8"), // surrogate
            (json!({"raw": b64(&[0xc0, 0xaf])}), "part.utf8"),       // overlong "/"
            // sizes
            (json!({"raw": over_text}), "part.too_large"),
            (json!({"raw": huge}), "part.too_large"),
            (
                json!({"raw": over_bin, "mediaType": "image/png"}),
                "part.too_large",
            ),
            (
                json!({"raw": huge, "mediaType": "image/png"}),
                "part.too_large",
            ),
            (
                json!({"data": over_data, "mediaType": "application/json"}),
                "part.too_large",
            ),
            (
                json!({"data": {"bytes": over_bin}, "mediaType": "image/png"}),
                "part.too_large",
            ),
            (
                json!({"data": {"base64": huge}, "mediaType": "image/png"}),
                "part.too_large",
            ),
            // binary data shape
            (png(json!("aGk=")), "part.shape"),
            (png(json!(["aGk="])), "part.shape"),
            (png(json!(null)), "part.shape"),
            (png(json!({})), "part.shape"),
            (png(json!({"b64": "aGk="})), "part.shape"),
            (png(json!({"bytes": 5})), "part.shape"),
            (png(json!({"bytes": null})), "part.shape"),
            (
                png(json!({"bytes": "aGk=", "base64": "aGk="})),
                "part.shape",
            ),
            (png(json!({"bytes": "aGk"})), "part.base64"),
            (png(json!({"base64": "aG k="})), "part.base64"),
            (
                json!({"data": {"bytes": "-_8="}, "mediaType": "audio/wav"}),
                "part.base64",
            ),
        ];
        assert_rejected(&rows, rules, "/srv/ws");
    });
}

#[test]
fn compact_length_counter() {
    assert!(!compact_len_exceeds(&json!({"a": 1}), 7));
    assert!(compact_len_exceeds(&json!({"a": 1}), 6));
    assert!(!compact_len_exceeds(&json!(null), 4));
    assert!(
        compact_len_exceeds(&json!("é"), 3),
        "UTF-8 bytes, not characters"
    );
}

/// The filesystem fixture of the file URL tests.
struct Files {
    dir: TestDir,
    proj: PathBuf,
    media: MediaTypes,
    policy: WorkspacePolicy,
    workspace: Workspace,
}

impl Files {
    fn rules(&self) -> PartRules<'_> {
        PartRules {
            media: &self.media,
            workspace: Some(&self.workspace),
            policy: &self.policy,
            reads: TextFileReads::default(),
        }
    }
    fn p(&self) -> &str {
        self.proj.to_str().unwrap()
    }
}

fn files() -> Files {
    let dir = TestDir::new("parts");
    let root = dir.mkdir("ws");
    let proj = dir.mkdir("ws/proj");
    dir.mkdir("ws/proj/sub");
    dir.mkdir("ws/other");
    dir.mkdir("outside");
    dir.mkdir("ws/proj/%2e%2e");
    dir.write("ws/proj/a.txt", b"hello");
    dir.write("ws/proj/%2e%2e/x.txt", b"x");
    dir.write("ws/proj/name with space#?.txt", b"s");
    dir.write("ws/proj/ünï.txt", b"u");
    dir.write("ws/proj/exact.txt", &vec![b'a'; MIB]);
    dir.write("ws/proj/over.txt", &vec![b'a'; MIB + 1]);
    dir.write("ws/proj/bad.txt", &[b'a', 0xff, 0xfe]);
    dir.write("ws/proj/empty.txt", b"");
    dir.sized("ws/proj/img.png", MAX_BINARY_FILE_BYTES);
    dir.sized("ws/proj/img_over.png", MAX_BINARY_FILE_BYTES + 1);
    dir.mkfifo("ws/proj/fifo");
    dir.write("ws/other/o.txt", b"o");
    dir.write("outside/secret.txt", b"secret");
    dir.symlink(dir.join("outside/secret.txt"), "ws/proj/link_out");
    dir.symlink(dir.join("outside"), "ws/proj/dirlink");
    dir.symlink("a.txt", "ws/proj/link_in");
    dir.symlink("../other/o.txt", "ws/proj/link_other");
    dir.symlink("loop_b", "ws/proj/loop_a");
    dir.symlink("loop_a", "ws/proj/loop_b");
    dir.symlink("fifo", "ws/proj/link_fifo");
    dir.symlink("/dev/null", "ws/proj/devnull");
    // Out of the workspace and back by `..`, through a place that exists or not.
    dir.symlink(dir.join("outside/../ws/proj/a.txt"), "ws/proj/via_out_yes");
    dir.symlink(dir.join("nosuch/../ws/proj/a.txt"), "ws/proj/via_out_no");
    let media = media();
    let policy = WorkspacePolicy::new(vec![root], true).unwrap();
    let workspace = resolve_cwd(&json!(proj.to_str().unwrap()), &policy).unwrap();
    Files {
        dir,
        proj,
        media,
        policy,
        workspace,
    }
}

fn real_url(p: &Path) -> String {
    Url::from_file_path(std::fs::canonicalize(p).unwrap())
        .unwrap()
        .to_string()
}

#[test]
fn file_url_filesystem_rows() {
    let f = files();
    let rules = f.rules();
    let p = f.p();
    let base = f.dir.path.to_str().unwrap();

    // Accepted: (url, mediaType, the file whose real URL is forwarded).
    let a = f.proj.join("a.txt");
    // A file by its plain URL.
    let plain =
        |name: &str, media_type| (format!("file://{p}/{name}"), media_type, f.proj.join(name));
    let ok: Vec<(String, &str, PathBuf)> = vec![
        (format!("file://{p}/a.txt"), "text/plain", a.clone()),
        (format!("FILE://{p}/a.txt"), "text/plain", a.clone()),
        (format!("file://{p}/./a.txt"), "text/plain", a.clone()),
        (format!("file://{p}//a.txt"), "text/plain", a.clone()),
        (format!("file://{p}/sub/../a.txt"), "text/plain", a.clone()),
        (format!("file://{p}/%61.txt"), "text/plain", a.clone()),
        // `..` after a symlink collapses lexically: proj/dirlink/.. is proj, not outside/..
        (
            format!("file://{p}/dirlink/../a.txt"),
            "text/plain",
            a.clone(),
        ),
        // %2F decodes to a separator; `..` formed that way is normalized and stays inside
        (
            format!("file://{p}/sub%2F..%2Fa.txt"),
            "text/plain",
            a.clone(),
        ),
        // %2e%2e is a `..` segment (WHATWG); here it stays inside
        (
            format!("file://{p}/%2e%2e/proj/a.txt"),
            "text/markdown",
            a.clone(),
        ),
        // a symlink inside the workspace to a file inside it: forwarded by its real path
        (format!("file://{p}/link_in"), "text/plain", a.clone()),
        // double encoding decodes once: the literal directory "%2e%2e"
        (
            format!("file://{p}/%252e%252e/x.txt"),
            "text/plain",
            f.proj.join("%2e%2e/x.txt"),
        ),
        (
            Url::from_file_path(f.proj.join("name with space#?.txt"))
                .unwrap()
                .to_string(),
            "text/plain",
            f.proj.join("name with space#?.txt"),
        ),
        plain("ünï.txt", "text/plain"),
        plain("exact.txt", "text/plain"),
        plain("empty.txt", "text/plain"),
        plain("bad.txt", "application/octet-stream"),
        plain("over.txt", "image/png"),
        plain("img.png", "image/png"),
    ];
    for (url, media_type, file) in ok {
        let got = run(&json!({"url": url, "mediaType": media_type}), &rules)
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(got.get("url"), Some(&json!(real_url(&file))), "url {url}");
        // The forwarded URL decodes (as the agent does) to the checked file.
        let back = Url::parse(got["url"].as_str().unwrap())
            .unwrap()
            .to_file_path()
            .unwrap();
        assert_eq!(back, std::fs::canonicalize(&file).unwrap());
    }

    let long_url = format!("file://{p}/{}", "a".repeat(MAX_URL_BYTES));
    let long_path = format!("file://{p}/{}", "a/".repeat(2100)); // < 8 KiB, path > 4096
    assert!(long_path.len() < MAX_URL_BYTES);
    fn t(url: impl Into<String>) -> Value {
        json!({"url": url.into()})
    }
    let img = |url: String| json!({"url": url, "mediaType": "image/png"});
    // A URL of the project directory followed by `rest`.
    let ws = |rest: &str| t(format!("file://{p}/{rest}"));
    let rows: Vec<(Value, &str)> = vec![
        // traversal and encodings
        (ws("../other/o.txt"), "part.outside_workspace"),
        (ws("%2e%2e/other/o.txt"), "part.outside_workspace"),
        (
            ws("%2E%2E/%2e%2E/outside/secret.txt"),
            "part.outside_workspace",
        ),
        (ws(".%2e/.%2e/outside/secret.txt"), "part.outside_workspace"),
        (ws("..%2F..%2Foutside/secret.txt"), "part.outside_workspace"),
        (
            ws("sub%2F..%2F..%2F..%2Foutside%2Fsecret.txt"),
            "part.outside_workspace",
        ),
        (
            t("file:///a%2F..%2F..%2Fetc%2Fpasswd"),
            "part.outside_workspace",
        ),
        (t("file:///../../etc/passwd"), "part.outside_workspace"),
        (t("file:///etc/passwd"), "part.outside_workspace"),
        (
            t(format!("file://{base}/outside/secret.txt")),
            "part.outside_workspace",
        ),
        (ws("%252e%252e/%252e%252e/x.txt"), "part.file_missing"),
        // symlink escapes
        (ws("link_out"), "part.outside_workspace"),
        (ws("dirlink/secret.txt"), "part.outside_workspace"),
        (ws("link_other"), "part.outside_workspace"),
        (ws("devnull"), "part.outside_workspace"),
        // no existence oracle outside
        (ws("dirlink/missing.txt"), "part.outside_workspace"),
        (
            t(format!("file://{base}/outside/missing.txt")),
            "part.outside_workspace",
        ),
        (
            t("file:///nonexistent-a2a-edge/x.txt"),
            "part.outside_workspace",
        ),
        // missing, loops
        (ws("missing.txt"), "part.file_missing"),
        (ws("sub/missing/deeper.txt"), "part.file_missing"),
        (ws("a.txt/x"), "part.file_missing"),
        // (through a symlink that cannot be followed: outside, wherever it points)
        (ws("loop_a"), "part.outside_workspace"),
        (ws("loop_a/x"), "part.outside_workspace"),
        // (out and back by `..`: outside, whether what it passed through exists or not)
        (ws("via_out_yes"), "part.outside_workspace"),
        (ws("via_out_no"), "part.outside_workspace"),
        // not regular
        (ws("sub"), "part.file_not_regular"),
        (ws(""), "part.file_not_regular"),
        (ws("fifo"), "part.file_not_regular"),
        (ws("link_fifo"), "part.file_not_regular"),
        (img(format!("file://{p}/fifo")), "part.file_not_regular"),
        // sizes and UTF-8
        (ws("over.txt"), "part.too_large"),
        (img(format!("file://{p}/img_over.png")), "part.too_large"),
        (ws("img.png"), "part.too_large"),
        (ws("bad.txt"), "part.utf8"),
        // encoded NUL, control characters, non-UTF-8
        (ws("a.txt%00.png"), "part.url_encoding"),
        (ws("%00"), "part.url_encoding"),
        (ws("a%0A.txt"), "part.url_encoding"),
        (ws("a%1B.txt"), "part.url_encoding"),
        (ws("%FF.txt"), "part.url_encoding"),
        (ws("%C0%AF.txt"), "part.url_encoding"),
        // unicode look-alikes are literal names, neither separators nor `..`
        (
            ws("\u{2024}\u{2024}/\u{2024}\u{2024}/outside/secret.txt"),
            "part.file_missing",
        ),
        (
            ws("..\u{FF0F}..\u{FF0F}outside\u{FF0F}secret.txt"),
            "part.file_missing",
        ),
        (
            t(format!("file://{p}\u{FF0F}..\u{FF0F}other\u{FF0F}o.txt")),
            "part.outside_workspace",
        ),
        (ws("%EF%BC%8F..%EF%BC%8Fa.txt"), "part.file_missing"),
        // lengths
        (t(long_url), "part.url_too_long"),
        (t(long_path), "part.url_too_long"),
        // what the WHATWG parser would rewrite silently
        (ws("a .txt"), "part.url_syntax"),
        (ws("a\t.txt"), "part.url_syntax"),
        (ws("a\n.txt"), "part.url_syntax"),
        (ws("a.txt\u{0}"), "part.url_syntax"),
        (t(format!(" file://{p}/a.txt")), "part.url_syntax"),
        (ws("a.txt "), "part.url_syntax"),
        (
            t(format!("file://{p}\\..\\..\\outside\\secret.txt")),
            "part.url_syntax",
        ),
        (ws("a\u{85}.txt"), "part.url_syntax"),
        (ws("a.txt?x=1"), "part.url_syntax"),
        (ws("a.txt#frag"), "part.url_syntax"),
        (t(format!("file:{p}/a.txt")), "part.url_syntax"),
        (
            t(format!("file:{}/a.txt", p.trim_start_matches('/'))),
            "part.url_syntax",
        ),
        // `file:/` + `/tmp/...` is `file://tmp/...`: a host
        (t(format!("file:/{p}/a.txt")), "part.url_host"),
        // hosts
        (t(format!("file://localhost{p}/a.txt")), "part.url_host"),
        (t(format!("file://LOCALHOST{p}/a.txt")), "part.url_host"),
        (t(format!("file://host{p}/a.txt")), "part.url_host"),
        (t(format!("file://127.0.0.1{p}/a.txt")), "part.url_host"),
        (t(format!("file://[::1]{p}/a.txt")), "part.url_host"),
        (t(format!("file://[::1{p}/a.txt")), "part.url_host"),
        (t("file://\u{FF0F}etc/passwd"), "part.url_host"),
        (t("file://user@host/etc/passwd"), "part.url_host"),
        // schemes
        (t("http://example.com/a.txt"), "part.url_scheme"),
        (t("https://example.com/a.png"), "part.url_scheme"),
        (t("HTTP://example.com/"), "part.url_scheme"),
        (t("data:text/plain;base64,aGk="), "part.url_scheme"),
        (t("ftp://example.com/a.txt"), "part.url_scheme"),
        (t("javascript:alert(1)"), "part.url_scheme"),
        (t("filex:///etc/passwd"), "part.url_scheme"),
        (t("file"), "part.url_scheme"),
        (t(format!("{p}/a.txt")), "part.url_scheme"),
        (t("a.txt"), "part.url_scheme"),
        (t(String::new()), "part.url_scheme"),
    ];
    assert_rejected(&rows, &rules, base);

    // Nothing was created on the way.
    assert!(!f.proj.join("missing.txt").exists());
    assert!(!f.proj.join("sub/missing").exists());
}

#[test]
fn file_url_without_workspace_fails_closed() {
    let f = files();
    let rules = PartRules {
        media: &f.media,
        workspace: None,
        policy: &f.policy,
        reads: TextFileReads::default(),
    };
    let p = f.p();
    let rows: Vec<(Value, &str)> = vec![
        (
            json!({"url": format!("file://{p}/a.txt")}),
            "part.file_without_workspace",
        ),
        (
            json!({"url": format!("file://{p}/missing.txt")}),
            "part.file_without_workspace",
        ),
        // syntax errors still come first
        (json!({"url": "https://example.com/x"}), "part.url_scheme"),
        (json!({"url": "file://host/x"}), "part.url_host"),
    ];
    assert_rejected(&rows, &rules, p);
}

#[test]
fn file_url_lexical_rows() {
    let media = media();
    let policy = WorkspacePolicy::new(vec![PathBuf::from("/srv/ws")], false).unwrap();
    let workspace = resolve_cwd(&json!("/srv/ws/proj/"), &policy).unwrap();
    let rules = PartRules {
        media: &media,
        workspace: Some(&workspace),
        policy: &policy,
        reads: TextFileReads::default(),
    };
    // Accepted and forwarded as they are.
    let unchanged = [
        "file:///srv/ws/proj/a.txt",
        "file:///srv/ws/proj/a%20b%23.txt",
        "file:///srv/ws/proj/%252e%252e",
        // not checked: not read, not required to exist
        "file:///srv/ws/proj/missing/huge.bin",
    ];
    // Accepted and forwarded as the normalized file:///srv/ws/proj/a.txt.
    let to_a = [
        "file:///srv/ws/proj/x/../a.txt",
        "file:///srv/ws/proj/x%2F..%2Fa.txt",
        "file:///srv/ws/proj/%2e%2e/proj/a.txt",
    ];
    let ok = unchanged
        .iter()
        .map(|url| (*url, *url))
        .chain(to_a.iter().map(|url| (*url, "file:///srv/ws/proj/a.txt")));
    for (url, want) in ok {
        let got = run(&json!({"url": url}), &rules).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(got.get("url"), Some(&json!(want)), "url {url}");
    }
    let outside = [
        "file:///srv/ws/other/a.txt",
        "file:///srv/ws/proj-evil/a.txt",
        "file:///srv/ws/proj/../proj-evil/a",
        "file:///srv/ws/proj/%2e%2e/%2e%2e/etc/passwd",
        "file:///srv/ws/proj/..%2F..%2Fetc",
        "file:///srv/ws/proj/a%2F..%2F..%2F..%2F..%2F..",
        "file:///srv/ws",
    ];
    let mut rows: Vec<(Value, &str)> = outside
        .iter()
        .map(|url| (json!({"url": url}), "part.outside_workspace"))
        .collect();
    rows.push((
        json!({"url": "file:///srv/ws/proj/a%00"}),
        "part.url_encoding",
    ));
    // fuzz `part`, 2026-12-01: bare `%`s are re-encoded as `%25`, so a URL under the limit
    // became one over it when forwarded, and the forwarded part failed a second check.
    let percents = format!("file:///srv/ws/proj/{}x", "%".repeat(3000));
    assert!(percents.len() < MAX_URL_BYTES);
    rows.push((json!({ "url": percents }), "part.url_too_long"));
    assert_rejected(&rows, &rules, "/srv/ws");
    // Just under: forwarded, and the forwarded URL is accepted again as it is.
    let fits = format!("file:///srv/ws/proj/{}x", "%".repeat(2000));
    let once = run(&json!({ "url": fits }), &rules).unwrap();
    let twice = run(&Value::Object(once.clone()), &rules).unwrap();
    assert_eq!(once, twice);
}

#[test]
fn file_url_component_cap_rows() {
    use crate::validate::workspace::MAX_PATH_COMPONENTS;
    let f = files();
    let rules = f.rules();
    let p = f.p();
    let base = f.dir.path.to_str().unwrap();
    let depth = f.proj.components().count() - 1; // without the root `/`
                                                 // `{proj}/d/…/d/<last>` with exactly `n` components in all.
    let file_at = |n: usize, last: &str| format!("{p}{}/{last}", "/d".repeat(n - depth - 1));
    let at_cap = file_at(MAX_PATH_COMPONENTS, "f.txt");
    let over = file_at(MAX_PATH_COMPONENTS + 1, "f.txt");
    for file in [&at_cap, &over] {
        std::fs::create_dir_all(Path::new(file).parent().unwrap()).unwrap();
        std::fs::write(file, b"deep").unwrap();
    }

    let got = run(&json!({ "url": format!("file://{at_cap}") }), &rules).unwrap();
    assert_eq!(got["url"], json!(real_url(Path::new(&at_cap))));
    // Longer only as written: taken.
    let padded = format!("file://{p}{}/a.txt", "/./".repeat(300));
    let undone = format!("file://{p}{}/a.txt", "/x/..".repeat(300));
    for url in [padded, undone] {
        run(&json!({ "url": url }), &rules).unwrap_or_else(|e| panic!("{e}"));
    }

    // The reported attack: a missing path ~2,000 components deep (~4 KiB decoded).
    let attack = format!("file://{p}/x{}", "/a".repeat(2000));
    assert!(attack.len() <= MAX_URL_BYTES);
    let file_url = |path: String| json!({ "url": format!("file://{path}") });
    let rows: Vec<(Value, &str)> = vec![
        (file_url(over.clone()), "part.url_too_deep"),
        (
            file_url(file_at(MAX_PATH_COMPONENTS + 1, "missing.txt")),
            "part.url_too_deep",
        ),
        (file_url(format!("{at_cap}/x")), "part.url_too_deep"),
        (
            json!({"url": format!("file://{over}"), "mediaType": "image/png"}),
            "part.url_too_deep",
        ),
        (json!({ "url": attack }), "part.url_too_deep"),
        // `%2F` is a separator: counted as one
        (
            json!({ "url": format!("file://{p}{}", "%2Fd".repeat(MAX_PATH_COMPONENTS)) }),
            "part.url_too_deep",
        ),
        // refused before the filesystem is consulted: nothing told about what is outside
        (
            file_url(format!(
                "{base}/outside{}",
                "/d".repeat(MAX_PATH_COMPONENTS)
            )),
            "part.url_too_deep",
        ),
        (
            file_url("/x".repeat(MAX_PATH_COMPONENTS + 1)),
            "part.url_too_deep",
        ),
        // `..` above `/` is still outside, however deep it went first
        (
            file_url(format!("{}{}", "/a".repeat(100), "/..".repeat(101))),
            "part.outside_workspace",
        ),
    ];
    assert_rejected(&rows, &rules, base);

    // The cap holds without the filesystem too.
    let media = media();
    let policy = WorkspacePolicy::new(vec![PathBuf::from("/srv/ws")], false).unwrap();
    let workspace = resolve_cwd(&json!("/srv/ws"), &policy).unwrap();
    let lexical = PartRules {
        media: &media,
        workspace: Some(&workspace),
        policy: &policy,
        reads: TextFileReads::default(),
    };
    let deep = |n: usize| json!({ "url": format!("file:///srv/ws{}", "/d".repeat(n - 2)) });
    run(&deep(MAX_PATH_COMPONENTS), &lexical).unwrap();
    let err = run(&deep(MAX_PATH_COMPONENTS + 1), &lexical).unwrap_err();
    assert_eq!(err.reason, "part.url_too_deep");
}

#[test]
fn file_url_through_a_symlink_to_a_deep_directory() {
    let f = files();
    let rules = f.rules();
    let p = f.p();
    // A directory 1,000 levels deep inside the workspace (the agent can `mkdir -p` it) and a
    // file in it, named through a symlink: `realpath` walked all of it for each part (~80 ms,
    // and as much again for the deepest ancestor when the file was missing); the bounded walk
    // gives up past MAX_RESOLVE_STEPS components, as for a loop.
    let deep = f.dir.mkdir(&format!("ws/proj/deep{}", "/d".repeat(1000)));
    std::fs::write(deep.join("f.txt"), b"deep").unwrap();
    f.dir.symlink(&deep, "ws/proj/to_deep");
    f.dir.symlink("to_deep", "ws/proj/to_to_deep");
    let at = |rest: &str| json!({ "url": format!("file://{p}/{rest}") });
    let rows: Vec<(Value, &str)> = vec![
        (at("to_deep/f.txt"), "part.outside_workspace"),
        (at("to_deep/missing.txt"), "part.outside_workspace"),
        (at("to_deep/missing/x.txt"), "part.outside_workspace"),
        (at("to_to_deep/f.txt"), "part.outside_workspace"),
        (
            json!({"url": format!("file://{p}/to_deep/f.txt"), "mediaType": "image/png"}),
            "part.outside_workspace",
        ),
    ];
    // As many as a message holds.
    for _ in 0..crate::validate::request::MAX_PARTS {
        assert_rejected(&rows, &rules, f.dir.path.to_str().unwrap());
    }
}

#[test]
fn text_files_are_read_once_each_and_within_a_budget_per_message() {
    let f = files();
    let p = f.p();
    let mib = MIB as u64;
    let url = |rest: &str| json!({ "url": format!("file://{p}/{rest}") });

    // The same 1 MiB file named 256 times (a message's most), by several spellings, a
    // symlink and a hard link too: read once.
    std::fs::hard_link(f.proj.join("exact.txt"), f.proj.join("exact_hard.txt")).unwrap();
    f.dir.symlink("exact.txt", "ws/proj/exact_link");
    let spellings = [
        "exact.txt",
        "./exact.txt",
        "sub/../exact.txt",
        "%65xact.txt",
        "exact_link",
        "exact_hard.txt",
    ];
    let rules = f.rules();
    for i in 0..crate::validate::request::MAX_PARTS {
        let part = url(spellings[i % spellings.len()]);
        run(&part, &rules).unwrap_or_else(|e| panic!("part {i}: {e}"));
    }
    assert_eq!(rules.reads.bytes(), mib);
    // Multimodal files are not read: they do not count.
    run(
        &json!({"url": format!("file://{p}/img.png"), "mediaType": "image/png"}),
        &rules,
    )
    .unwrap();
    assert_eq!(rules.reads.bytes(), mib);

    // Distinct files: MAX_TEXT_FILE_BYTES_PER_MESSAGE in all, then refused, however small.
    let budget = MAX_TEXT_FILE_BYTES_PER_MESSAGE / mib;
    for i in 0..=budget {
        f.dir.sized(&format!("ws/proj/many{i}.txt"), mib);
    }
    f.dir.write("ws/proj/one_byte.txt", b"1");
    let rules = f.rules();
    for i in 0..budget {
        run(&url(&format!("many{i}.txt")), &rules).unwrap_or_else(|e| panic!("file {i}: {e}"));
    }
    assert_eq!(rules.reads.bytes(), MAX_TEXT_FILE_BYTES_PER_MESSAGE);
    let rows: Vec<(Value, &str)> = vec![
        (url(&format!("many{budget}.txt")), "part.too_large"),
        (url("one_byte.txt"), "part.too_large"),
        (url("a.txt"), "part.too_large"),
    ];
    assert_rejected(&rows, &rules, f.dir.path.to_str().unwrap());
    assert_eq!(rules.reads.bytes(), MAX_TEXT_FILE_BYTES_PER_MESSAGE);
    // What was read already, an empty file and multimodal files still pass.
    for part in [
        url("many0.txt"),
        url("empty.txt"),
        json!({"url": format!("file://{p}/img.png"), "mediaType": "image/png"}),
    ] {
        run(&part, &rules).unwrap_or_else(|e| panic!("{part}: {e}"));
    }

    // Part of the way in: the budget's rest is what a file may use.
    let rules = f.rules();
    for i in 0..budget - 1 {
        run(&url(&format!("many{i}.txt")), &rules).unwrap();
    }
    f.dir.write("ws/proj/half.txt", &vec![b'h'; MIB / 2]);
    run(&url("half.txt"), &rules).unwrap();
    let err = run(&url(&format!("many{budget}.txt")), &rules).unwrap_err();
    assert_eq!(err.reason, "part.too_large");
    run(&url("a.txt"), &rules).unwrap();
}
