//! Request validation through the proxy, over real TLS, with a recording upstream: every
//! rejected request gets its documented JSON-RPC error and never reaches the agent; an
//! accepted one arrives re-serialized and normalized.

mod common;

use std::path::Path;

use base64::Engine as _;
use common::*;
use http::StatusCode;
use serde_json::{json, Value};

struct Setup {
    proxy: Proxy,
    up: RecordingUpstream,
    ws: String,
    _dir: TempDir,
}

async fn setup() -> Setup {
    let dir = TempDir::new("validation");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("a.txt"), "hello file").unwrap();
    std::fs::write(ws.join("bad.txt"), b"\xff\xfe").unwrap();
    std::fs::create_dir_all(dir.path().join("outside")).unwrap();
    std::fs::write(dir.path().join("outside/secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(dir.path().join("outside"), ws.join("escape")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", ws.join("passwd")).unwrap();
    // A directory 1,000 levels deep (an agent can `mkdir -p` one) and a file in it, named
    // through a symlink.
    let deep = ws.join(format!("deep{}", "/d".repeat(1000)));
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("f.txt"), "deep").unwrap();
    std::os::unix::fs::symlink(&deep, ws.join("to_deep")).unwrap();
    // 33 text files of 1 MiB (sparse: NUL bytes are UTF-8), one more than a message may read.
    for i in 0..33 {
        let f = std::fs::File::create(ws.join(format!("mib{i}.txt"))).unwrap();
        f.set_len(1 << 20).unwrap();
    }
    let (up, proxy) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_policy: format!(
                "[a2a]\nrequired_extensions = [\"urn:test:required\"]\n[a2a.metadata.allowed_for]\ntester = [\"iac_code.iac_code_model\"]\n[workspace]\nallowed_roots = [{:?}]\n",
                ws.display().to_string()
            ),
            ..Default::default()
        },
    )
    .await;
    let ws = std::fs::canonicalize(&ws).unwrap().display().to_string();
    Setup {
        proxy,
        up,
        ws,
        _dir: dir,
    }
}

fn headers() -> Vec<(&'static str, &'static str)> {
    let mut h = rpc_headers();
    h.push(("a2a-extensions", "urn:test:required"));
    h
}

fn msg(parts: Value, meta: Value) -> Value {
    json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": parts, "metadata": meta}})
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn rejected_requests_get_their_error_and_never_reach_the_agent() {
    let s = setup().await;
    let ws = s.ws.as_str();
    let cwd = json!({"iac_code": {"cwd": ws}});
    let file = |p: &str| format!("file://{ws}/{p}");
    let big_text = b64(&vec![b'a'; (1 << 20) + 1]);
    let long_id = "a".repeat(129);
    // (name, method, params, expected code, expected reason)
    let cases: Vec<(&str, &str, Value, i64, &str)> = vec![
        (
            "id slash",
            "GetTask",
            json!({"id": "a/b"}),
            -32602,
            "id.invalid",
        ),
        (
            "id traversal",
            "GetTask",
            json!({"id": "../x"}),
            -32602,
            "id.invalid",
        ),
        (
            "id too long",
            "GetTask",
            json!({"id": long_id}),
            -32602,
            "id.invalid",
        ),
        (
            "id empty",
            "CancelTask",
            json!({"id": ""}),
            -32602,
            "id.invalid",
        ),
        (
            "id unicode",
            "SubscribeToTask",
            json!({"id": "tａsk"}),
            -32602,
            "id.invalid",
        ),
        ("id missing", "GetTask", json!({}), -32602, "params.missing"),
        (
            "history negative",
            "GetTask",
            json!({"id": "t", "historyLength": -1}),
            -32602,
            "int.range",
        ),
        (
            "page size 0",
            "ListTasks",
            json!({"pageSize": 0}),
            -32602,
            "int.range",
        ),
        (
            "page size 101",
            "ListTasks",
            json!({"pageSize": 101}),
            -32602,
            "int.range",
        ),
        (
            "bad status",
            "ListTasks",
            json!({"status": "done"}),
            -32602,
            "task_state.invalid",
        ),
        (
            "bad context",
            "ListTasks",
            json!({"contextId": "c d"}),
            -32602,
            "id.invalid",
        ),
        (
            "push ids",
            "GetTaskPushNotificationConfig",
            json!({"taskId": "t", "id": "x/y"}),
            -32602,
            "id.invalid",
        ),
        (
            "role agent",
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}}),
            -32602,
            "message.role",
        ),
        (
            "role lowercase",
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "user", "parts": [{"text": "x"}]}}),
            -32602,
            "message.role",
        ),
        (
            "no message id",
            "SendMessage",
            json!({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}),
            -32602,
            "message.id",
        ),
        (
            "empty parts",
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}),
            -32602,
            "message.parts",
        ),
        (
            "two contents",
            "SendMessage",
            msg(json!([{"text": "x", "url": "file:///tmp/x"}]), json!({})),
            -32602,
            "part.shape",
        ),
        (
            "no content",
            "SendMessage",
            msg(json!([{"mediaType": "text/plain"}]), json!({})),
            -32602,
            "part.shape",
        ),
        (
            "svg",
            "SendMessage",
            msg(
                json!([{"raw": b64(b"<svg/>"), "mediaType": "image/svg+xml"}]),
                json!({}),
            ),
            -32005,
            "part.media_type",
        ),
        (
            "charset latin1",
            "SendMessage",
            msg(
                json!([{"text": "x", "mediaType": "text/plain; charset=latin1"}]),
                json!({}),
            ),
            -32005,
            "part.charset",
        ),
        (
            "base64 whitespace",
            "SendMessage",
            msg(
                json!([{"raw": "aGVs bG8=", "mediaType": "text/plain"}]),
                json!({}),
            ),
            -32602,
            "part.base64",
        ),
        (
            "base64 no padding",
            "SendMessage",
            msg(
                json!([{"raw": "aGVsbG8", "mediaType": "text/plain"}]),
                json!({}),
            ),
            -32602,
            "part.base64",
        ),
        (
            "raw not utf8",
            "SendMessage",
            msg(
                json!([{"raw": b64(b"\xff\xfe"), "mediaType": "text/plain"}]),
                json!({}),
            ),
            -32602,
            "part.utf8",
        ),
        (
            "raw 1 MiB + 1",
            "SendMessage",
            msg(
                json!([{"raw": big_text, "mediaType": "text/plain"}]),
                json!({}),
            ),
            -32602,
            "part.too_large",
        ),
        (
            "remote url",
            "SendMessage",
            msg(
                json!([{"url": "https://example.com/x.txt", "mediaType": "text/plain"}]),
                cwd.clone(),
            ),
            -32602,
            "part.url_scheme",
        ),
        (
            "file with host",
            "SendMessage",
            msg(
                json!([{"url": format!("file://evil{ws}/a.txt")}]),
                cwd.clone(),
            ),
            -32602,
            "part.url_host",
        ),
        (
            "file traversal",
            "SendMessage",
            msg(json!([{"url": file("../outside/secret.txt")}]), cwd.clone()),
            -32602,
            "part.outside_workspace",
        ),
        (
            "file encoded traversal",
            "SendMessage",
            msg(
                json!([{"url": file("%2e%2e/outside/secret.txt")}]),
                cwd.clone(),
            ),
            -32602,
            "part.outside_workspace",
        ),
        (
            "file symlink escape",
            "SendMessage",
            msg(json!([{"url": file("escape/secret.txt")}]), cwd.clone()),
            -32602,
            "part.outside_workspace",
        ),
        (
            "file symlink to /etc",
            "SendMessage",
            msg(json!([{"url": file("passwd")}]), cwd.clone()),
            -32602,
            "part.outside_workspace",
        ),
        (
            "file missing",
            "SendMessage",
            msg(json!([{"url": file("nope.txt")}]), cwd.clone()),
            -32602,
            "part.file_missing",
        ),
        (
            "file is a dir",
            "SendMessage",
            msg(json!([{"url": file("sub")}]), cwd.clone()),
            -32602,
            "part.file_not_regular",
        ),
        (
            "file not utf8",
            "SendMessage",
            msg(json!([{"url": file("bad.txt")}]), cwd.clone()),
            -32602,
            "part.utf8",
        ),
        (
            "file nul",
            "SendMessage",
            msg(json!([{"url": file("a.txt%00.png")}]), cwd.clone()),
            -32602,
            "part.url_encoding",
        ),
        (
            "file 65 components",
            "SendMessage",
            msg(
                json!([{"url": format!("file://{}", "/a".repeat(65))}]),
                cwd.clone(),
            ),
            -32602,
            "part.url_too_deep",
        ),
        (
            "file 256 parts 2,000 components deep",
            "SendMessage",
            msg(
                Value::Array(vec![
                    json!({"url": file(&format!("x{}", "/a".repeat(2000)))});
                    256
                ]),
                cwd.clone(),
            ),
            -32602,
            "part.url_too_deep",
        ),
        (
            "file 256 parts through a symlink 1,000 levels deep",
            "SendMessage",
            msg(
                Value::Array(vec![json!({"url": file("to_deep/f.txt")}); 256]),
                cwd.clone(),
            ),
            -32602,
            "part.outside_workspace",
        ),
        (
            "file parts over 32 MiB of text in all",
            "SendMessage",
            msg(
                (0..33)
                    .map(|i| json!({"url": file(&format!("mib{i}.txt"))}))
                    .collect(),
                cwd.clone(),
            ),
            -32602,
            "part.too_large",
        ),
        (
            "file without cwd",
            "SendMessage",
            msg(json!([{"url": file("a.txt")}]), json!({})),
            -32602,
            "part.file_without_workspace",
        ),
        (
            "cwd relative",
            "SendMessage",
            msg(
                json!([{"text": "x"}]),
                json!({"iac_code": {"cwd": "rel/dir"}}),
            ),
            -32602,
            "workspace.relative",
        ),
        (
            "cwd outside",
            "SendMessage",
            msg(json!([{"text": "x"}]), json!({"iac_code": {"cwd": "/etc"}})),
            -32602,
            "workspace.outside_roots",
        ),
        (
            "cwd traversal",
            "SendMessage",
            msg(
                json!([{"text": "x"}]),
                json!({"iac_code": {"cwd": format!("{ws}/../outside")}}),
            ),
            -32602,
            "workspace.outside_roots",
        ),
        (
            "cwd via symlink",
            "SendMessage",
            msg(
                json!([{"text": "x"}]),
                json!({"iac_code": {"cwd": format!("{ws}/escape")}}),
            ),
            -32602,
            "workspace.outside_roots",
        ),
        (
            "cwd missing",
            "SendMessage",
            msg(
                json!([{"text": "x"}]),
                json!({"iac_code": {"cwd": format!("{ws}/new-dir")}}),
            ),
            -32602,
            "workspace.missing",
        ),
        (
            "cwd 65 components",
            "SendMessage",
            msg(
                json!([{"text": "x"}]),
                json!({"iac_code": {"cwd": format!("{ws}/x{}", "/a".repeat(64))}}),
            ),
            -32602,
            "workspace.too_deep",
        ),
        (
            "cwd nul",
            "SendMessage",
            msg(
                json!([{"text": "x"}]),
                json!({"iac_code": {"cwd": format!("{ws}\u{0}")}}),
            ),
            -32602,
            "workspace.nul",
        ),
        (
            "cwd conflict",
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}], "metadata": {"iac_code": {"cwd": ws}}}, "metadata": {"iac_code": {"cwd": format!("{ws}/sub")}}}),
            -32602,
            "workspace.conflict",
        ),
        (
            "api key metadata",
            "SendMessage",
            msg(
                json!([{"text": "x"}]),
                json!({"iac_code": {"iac_code_api_key": "sk-caller"}}),
            ),
            -32602,
            "metadata.denied_key",
        ),
        (
            "llm headers request-level",
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "metadata": {"iac_code": {"llm_headers": {"X-Evil": "1"}}}}),
            -32602,
            "metadata.denied_key",
        ),
        (
            "dotted key",
            "SendMessage",
            msg(
                json!([{"text": "x"}]),
                json!({"iac_code.alibaba_cloud_access_key_id": "AK"}),
            ),
            -32602,
            "metadata.denied_key",
        ),
        (
            "dotted workspace key",
            "SendMessage",
            msg(json!([{"text": "x"}]), json!({"iac_code.cwd": "/etc"})),
            -32602,
            "metadata.dotted_workspace",
        ),
        (
            "dotted workspace key request-level",
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "metadata": {"iac_code": {"cwd.": "/etc"}}}),
            -32602,
            "metadata.dotted_workspace",
        ),
        (
            "cancel metadata",
            "CancelTask",
            json!({"id": "t", "metadata": {"iac_code": {"iac_code_api_key": "k"}}}),
            -32602,
            "metadata.denied_key",
        ),
        (
            "push loopback short",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t", "url": "https://127.1/"}),
            -32602,
            "push.private_address",
        ),
        (
            "push decimal ip",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t", "url": "https://2130706433/"}),
            -32602,
            "push.private_address",
        ),
        (
            "push hex ip",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t", "url": "https://0x7f.1/"}),
            -32602,
            "push.private_address",
        ),
        (
            "push mapped v6",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t", "url": "https://[::ffff:127.0.0.1]/"}),
            -32602,
            "push.private_address",
        ),
        (
            "push localhost dot",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t", "url": "https://LOCALHOST./"}),
            -32602,
            "push.localhost",
        ),
        (
            "push metadata ip",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t", "url": "https://169.254.169.254/latest"}),
            -32602,
            "push.private_address",
        ),
        (
            "push http",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t", "url": "http://hooks.example.com/"}),
            -32602,
            "push.url_scheme",
        ),
        (
            "push userinfo",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t", "url": "https://u:p@hooks.example.com/"}),
            -32602,
            "push.url_userinfo",
        ),
        (
            "push in send config",
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "configuration": {"taskPushNotificationConfig": {"url": "https://10.0.0.1/"}}}),
            -32602,
            "push.private_address",
        ),
    ];
    let mut c = s.proxy.client(Proto::H2).await;
    for (name, method, params, code, reason) in &cases {
        let body = json!({"jsonrpc": "2.0", "id": name, "method": method, "params": params});
        let (status, _, rb) = c.request("POST", "/", &headers(), body.to_string()).await;
        assert_eq!(status, StatusCode::OK, "{name}");
        let v: Value = serde_json::from_slice(&rb).unwrap();
        assert_eq!(v["id"], *name, "{name}: {v}");
        assert_eq!(v["error"]["code"], *code, "{name}: {v}");
        assert_eq!(v["error"]["data"][0]["reason"], *reason, "{name}: {v}");
        let text = v.to_string();
        assert!(!text.contains(ws), "{name}: the error leaks a path: {text}");
        assert!(
            !text.contains("sk-caller"),
            "{name}: the error leaks a secret: {text}"
        );
    }
    assert!(
        s.up.rpc_requests().is_empty(),
        "rejected requests reached the agent: {:?}",
        s.up.rpc_requests()
    );
}

/// A SendMessage whose one data part holds `n` copies of `item` in an array.
fn values_body(item: &str, n: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{{"messageId":"m","role":"ROLE_USER","parts":[{{"data":{{"a":[{}]}}}}]}}}}}}"#,
        vec![item; n].join(",")
    )
}

#[tokio::test]
async fn service_parameters_and_envelope_are_checked_first() {
    let s = setup().await;
    let mut c = s.proxy.client(Proto::H1).await;
    let ok = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).to_string();
    let auth = ("authorization", "Bearer test-token-0123456789");
    let json_ct = ("content-type", "application/json");
    let v1 = ("a2a-version", "1.0");
    let ext = ("a2a-extensions", "urn:test:required");
    // (headers, body, expected code, reason)
    type Case<'a> = (Vec<(&'a str, &'a str)>, String, i64, &'a str);
    let cases: Vec<Case> = vec![
        (vec![auth, v1, ext], ok.clone(), -32005, "content_type.unsupported"),
        (vec![auth, ("content-type", "text/plain"), v1, ext], ok.clone(), -32005, "content_type.unsupported"),
        (vec![auth, json_ct, ext], ok.clone(), -32009, "version.unsupported"),
        (vec![auth, json_ct, ("a2a-version", "0.3"), ext], ok.clone(), -32009, "version.unsupported"),
        (vec![auth, json_ct, ("a2a-version", "2.0"), ext], ok.clone(), -32009, "version.unsupported"),
        (vec![auth, json_ct, v1, ("a2a-version", "0.3"), ext], ok.clone(), -32009, "version.ambiguous"),
        (vec![auth, json_ct, v1], ok.clone(), -32008, "extensions.missing_required"),
        (vec![auth, json_ct, v1, ("a2a-extensions", "urn:other")], ok.clone(), -32008, "extensions.missing_required"),
        (vec![auth, json_ct, v1, ext], r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{},"params":{}}"#.into(), -32700, "json.duplicate_key"),
        (vec![auth, json_ct, v1, ext], r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":5,"pageSize":500}}"#.into(), -32700, "json.duplicate_key"),
        (vec![auth, json_ct, v1, ext], format!("{}{}", "[".repeat(100), "]".repeat(100)), -32700, "json.too_deep"),
        (vec![auth, json_ct, v1, ext], format!("{ok} trailing"), -32700, "json.syntax"),
        // Past `a2a.max_json_values` (1,048,576 by default): a 2 MiB body of small values,
        // a tree of tens of MiB, refused before any check reads it.
        (vec![auth, json_ct, v1, ext], values_body("0", 1 << 20), -32700, "json.too_many_values"),
        (vec![auth, json_ct, v1, ext], values_body("{}", 1 << 20), -32700, "json.too_many_values"),
        (vec![auth, json_ct, v1, ext], values_body("[]", 1 << 20), -32700, "json.too_many_values"),
        (vec![auth, json_ct, v1, ext], format!("[{ok}]"), -32600, "jsonrpc.batch"),
        (vec![auth, json_ct, v1, ext], ok.replacen(r#""id":1"#, &format!(r#""id":"{}""#, "i".repeat(257)), 1), -32600, "jsonrpc.id"),
        (vec![auth, json_ct, v1, ext], r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}"#.into(), -32601, "jsonrpc.method"),
    ];
    for (h, body, code, reason) in &cases {
        let (status, _, rb) = c.request("POST", "/", h, body.clone()).await;
        assert_eq!(status, StatusCode::OK);
        let v: Value = serde_json::from_slice(&rb).unwrap();
        assert_eq!(v["error"]["code"], *code, "{h:?} {body}: {v}");
        assert_eq!(
            v["error"]["data"][0]["reason"], *reason,
            "{h:?} {body}: {v}"
        );
    }
    assert!(s.up.rpc_requests().is_empty());
}

#[tokio::test]
async fn one_file_named_by_every_part_is_read_once() {
    let s = setup().await;
    let ws = s.ws.as_str();
    let mut c = s.proxy.client(Proto::H1).await;
    // 256 MiB if each part read it; 1 MiB of the message's 32 MiB as it is read once.
    let parts: Vec<Value> = (0..256)
        .map(|i| {
            let url = if i % 2 == 0 {
                format!("file://{ws}/mib0.txt")
            } else {
                format!("file://{ws}/sub/../mib0.txt")
            };
            json!({ "url": url })
        })
        .collect();
    let params = msg(Value::Array(parts), json!({"iac_code": {"cwd": ws}}));
    let body = json!({"jsonrpc": "2.0", "id": "once", "method": "SendMessage", "params": params});
    let (status, _, rb) = c.request("POST", "/", &headers(), body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_slice(&rb).unwrap();
    assert_eq!(v["result"]["message"]["parts"][0]["text"], "echo", "{v}");
    let seen = s.up.rpc_requests();
    assert_eq!(seen.len(), 1);
    let fwd: Value = serde_json::from_slice(&seen[0].body).unwrap();
    let parts = fwd["params"]["message"]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 256);
    let want = format!("file://{ws}/mib0.txt");
    assert!(parts.iter().all(|p| p["url"] == want.as_str()));
}

#[tokio::test]
async fn accepted_requests_arrive_normalized() {
    let s = setup().await;
    let ws = s.ws.as_str();
    let mut c = s.proxy.client(Proto::H1).await;
    let params = json!({
        "message": {
            "messageId": "m1", "role": "ROLE_USER", "contextId": "ctx-1",
            "parts": [
                {"text": "hi", "mediaType": "Text/Plain; charset=UTF-8", "unknownField": 1},
                {"url": format!("file://{ws}/sub/../a.txt"), "mediaType": "text/plain"},
                {"raw": b64(&[0x89, b'P', b'N', b'G']), "mediaType": "image/png"},
                {"data": {"k": [1, 2]}, "mediaType": "application/json"}
            ],
            "metadata": {"iac_code": {"cwd": format!("{ws}/./sub/.."), "iac_code_model": "allowed-for-tester"}},
            "kind": "message"
        },
        "configuration": {"returnImmediately": false, "historyLength": 2.0, "blocking": true},
        "extra": "dropped"
    });
    let body = json!({"jsonrpc": "2.0", "id": "ok-1", "method": "SendMessage", "params": params});
    let (status, _, rb) = c.request("POST", "/", &headers(), body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_slice(&rb).unwrap();
    assert_eq!(v["result"]["message"]["parts"][0]["text"], "echo", "{v}");
    let seen = s.up.rpc_requests();
    assert_eq!(seen.len(), 1);
    let fwd: Value = serde_json::from_slice(&seen[0].body).unwrap();
    let m = &fwd["params"]["message"];
    assert_eq!(
        m["parts"][0],
        json!({"text": "hi", "mediaType": "text/plain"})
    );
    assert_eq!(m["parts"][1]["url"], format!("file://{ws}/a.txt"));
    assert_eq!(m["parts"][2]["mediaType"], "image/png");
    assert_eq!(m["metadata"]["iac_code"]["cwd"], ws);
    assert_eq!(
        m["metadata"]["iac_code"]["iac_code_model"],
        "allowed-for-tester"
    );
    assert!(m.get("kind").is_none());
    assert!(fwd["params"].get("extra").is_none());
    assert_eq!(
        fwd["params"]["configuration"],
        json!({"returnImmediately": false, "historyLength": 2})
    );
    assert_eq!(seen[0].headers["a2a-extensions"], "urn:test:required");
    assert!(Path::new(ws).join("a.txt").exists());
}

/// Any 1.x spelling of `A2A-Version` reaches the agent as the `1.0` the edge checked against,
/// and a refused value never comes back in the answer.
#[tokio::test]
async fn the_agent_gets_the_canonical_version() {
    let s = setup().await;
    let mut c = s.proxy.client(Proto::H2).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": msg(json!([{"text": "hi"}]), json!({}))})
    .to_string();
    for sent in ["01.0", "1.0.0", "1.99999", "1", " 1.0 "] {
        let h = [
            ("authorization", "Bearer test-token-0123456789"),
            ("content-type", "application/json"),
            ("a2a-version", sent),
            ("a2a-extensions", "urn:test:required"),
        ];
        let (_, _, rb) = c.request("POST", "/", &h, body.clone()).await;
        let v: Value = serde_json::from_slice(&rb).unwrap();
        assert!(v.get("result").is_some(), "{sent}: {v}");
        let last = s.up.rpc_requests().pop().unwrap();
        assert_eq!(last.headers["a2a-version"], "1.0", "{sent}");
    }
    for sent in ["7.3", "1.0.0.0", "1<b>"] {
        let h = [
            ("authorization", "Bearer test-token-0123456789"),
            ("content-type", "application/json"),
            ("a2a-version", sent),
            ("a2a-extensions", "urn:test:required"),
        ];
        let (_, _, rb) = c.request("POST", "/", &h, body.clone()).await;
        let text = String::from_utf8_lossy(&rb).into_owned();
        assert!(text.contains("-32009"), "{text}");
        assert!(!text.contains(sent), "{sent} echoed: {text}");
    }
}

/// ProtoJSON default values of fields without presence mean "absent" (a client may write
/// them out): ListTasks' `contextId: ""`, `pageToken: ""`, `status` UNSPECIFIED (by name
/// or 0), and ListTaskPushNotificationConfigs' `pageSize: 0` are no filter and no page,
/// not refusals. ListTasks' `pageSize` is `optional` (presence): an explicit 0 stays out of
/// range, and an id that merely ends in `_UNSPECIFIED` is still a filter.
#[tokio::test]
async fn protojson_default_values_are_absent_values() {
    let (_up, p) = Proxy::with_recorder(Reply::Echo, ProxyOpts::default()).await;
    let mut c = p.client(Proto::H2).await;
    let v = c
        .rpc(
            "SendMessage",
            json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "x"}]}}),
        )
        .await;
    assert!(v.get("result").is_some(), "{v}");
    let all = c.rpc("ListTasks", json!({})).await;
    assert!(all["result"]["totalSize"].as_u64().is_some(), "{all}");
    for params in [
        json!({"contextId": ""}),
        json!({"pageToken": ""}),
        json!({"status": "TASK_STATE_UNSPECIFIED"}),
        json!({"status": 0}),
        json!({"contextId": "", "pageToken": "", "status": 0}),
    ] {
        let v = c.rpc("ListTasks", params.clone()).await;
        assert_eq!(
            v["result"]["totalSize"], all["result"]["totalSize"],
            "{params}: {v}"
        );
    }
    for (params, reason) in [
        (json!({"pageSize": 0}), "int.range"),
        // A number where an id goes is no default: refused, not read as absent.
        (json!({"contextId": 0}), "id.invalid"),
        (
            json!({"status": "TASK_STATE_UNKNOWN"}),
            "task_state.invalid",
        ),
    ] {
        let v = c.rpc("ListTasks", params.clone()).await;
        assert_eq!(v["error"]["data"][0]["reason"], reason, "{params}: {v}");
    }
    let v = c
        .rpc("ListTasks", json!({"contextId": "ctx_UNSPECIFIED"}))
        .await;
    assert_eq!(v["result"]["totalSize"], 0, "a filter: {v}");
    let v = c
        .rpc(
            "ListTaskPushNotificationConfigs",
            json!({"taskId": "t-unknown", "pageSize": 0, "pageToken": ""}),
        )
        .await;
    assert_eq!(v["error"]["code"], -32001, "validated, then not found: {v}");
    // A message's contextId and taskId "" are a new context and task: not forwarded.
    let before = _up.rpc_requests().len();
    let v = c
        .rpc(
            "SendMessage",
            json!({"message": {"messageId": "m2", "role": "ROLE_USER", "contextId": "", "taskId": "", "parts": [{"text": "x"}]}}),
        )
        .await;
    assert!(v.get("result").is_some(), "{v}");
    let sent = _up.rpc_requests();
    assert_eq!(sent.len(), before + 1);
    let forwarded: Value = serde_json::from_slice(&sent[before].body).unwrap();
    let message = &forwarded["params"]["message"];
    assert_eq!(message["messageId"], "m2", "{forwarded}");
    assert!(
        message.get("contextId").is_none() && message.get("taskId").is_none(),
        "{forwarded}"
    );
    // A number where a message's id goes is no default: refused.
    let v = c
        .rpc(
            "SendMessage",
            json!({"message": {"messageId": "m3", "role": "ROLE_USER", "contextId": 0, "parts": [{"text": "x"}]}}),
        )
        .await;
    assert_eq!(v["error"]["data"][0]["reason"], "id.invalid", "{v}");
    // A push config's id "" is absent; its required taskId "" is missing.
    let v = c
        .rpc(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t-unknown", "id": "", "url": "https://push.example.com/cb"}),
        )
        .await;
    assert_eq!(v["error"]["code"], -32001, "validated, then not found: {v}");
    let v = c
        .rpc(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "", "url": "https://push.example.com/cb"}),
        )
        .await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert_eq!(v["error"]["data"][0]["reason"], "params.missing", "{v}");
}
