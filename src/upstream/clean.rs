//! Clean responses: what an agent answers is scrubbed before a caller sees it. Secrets it
//! echoes (denied metadata keys, push-notification credentials) are redacted, and the text
//! of internal errors (which may hold paths or stack text) is replaced; the code stays.

use serde_json::{Map, Value};

use crate::validate::metadata::{redact_metadata, MetadataPolicy};

const REDACTED: &str = "[REDACTED]";
/// Deeper than this, an answer is not walked (the edge's own JSON depth bound is lower).
const MAX_WALK: usize = 128;

/// Cleans one JSON-RPC response from an agent, in place. With `redact_paths`, absolute paths
/// in any string of its `result` or `error` are replaced by `[PATH]`, as iac-code's safe mode
/// does (not in its `id`: the caller's own, which must come back as it was sent).
pub fn clean_response(response: &mut Value, metadata: &MetadataPolicy, redact_paths: bool) {
    if let Some(error) = response.get_mut("error").and_then(Value::as_object_mut) {
        clean_error(error);
    }
    if let Some(result) = response.get_mut("result") {
        walk(result, metadata, 0, false);
    }
    if redact_paths {
        for key in ["result", "error"] {
            if let Some(v) = response.get_mut(key) {
                hide_paths(v, 1);
            }
        }
    }
}

/// An agent's error object, cleaned: a known code gets its standard message, any other code
/// a generic one (an agent's text may hold paths, stack text or secrets); `data` keeps only
/// ErrorInfo entries, each with its `reason` and `domain` (short strings of letters, digits,
/// `_`, `.` and `-`: codes and host names, never text) and nothing else; an error of one of A2A's own codes that kept none gets the one A2A gives
/// that code (as the edge's own errors and the reference SDKs' carry it). A code that is not
/// an integer becomes -32603.
fn clean_error(error: &mut Map<String, Value>) {
    let code = error
        .get("code")
        .and_then(Value::as_i64)
        .filter(|c| i32::try_from(*c).is_ok())
        .unwrap_or(crate::a2a::code::INTERNAL_ERROR);
    let message = crate::a2a::error::standard_message(code).unwrap_or("Upstream agent error");
    // A reason is a code (`TASK_NOT_FOUND`, an edge's `upstream.foreign_task`), a domain a
    // host name (`a2a-protocol.org`): letters, digits, `_`, `.`, `-`. Anything else (a path,
    // a URL, `key=value`, prose) is an agent's text: dropped.
    let short = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| {
                !s.is_empty()
                    && s.len() <= 128
                    && s.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
            })
            .map(|s| Value::String(s.to_string()))
    };
    let mut data: Vec<Value> = match error.get("data") {
        Some(Value::Array(items)) => items
            .iter()
            .filter(|d| d.get("@type").and_then(Value::as_str) == Some(crate::a2a::ERROR_INFO_TYPE))
            .take(4)
            .map(|d| {
                let mut info = Map::new();
                info.insert("@type".into(), Value::from(crate::a2a::ERROR_INFO_TYPE));
                for k in ["reason", "domain"] {
                    if let Some(v) = short(d.get(k)) {
                        info.insert(k.into(), v);
                    }
                }
                info.insert("metadata".into(), Value::Object(Map::new()));
                Value::Object(info)
            })
            .collect(),
        _ => Vec::new(),
    };
    if data.is_empty() {
        data.extend(
            crate::a2a::error::a2a_kind(code)
                .map(|kind| crate::a2a::error::error_info(kind, Map::new())),
        );
    }
    error.clear();
    error.insert("code".into(), Value::from(code));
    error.insert("message".into(), Value::from(message));
    if !data.is_empty() {
        error.insert("data".into(), Value::Array(data));
    }
}

/// Replaces absolute filesystem paths in every string of `v` (keys excepted) with `[PATH]`.
fn hide_paths(v: &mut Value, depth: usize) {
    if depth > MAX_WALK {
        return;
    }
    match v {
        Value::String(s) => {
            if let Some(clean) = without_paths(s) {
                *s = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| hide_paths(i, depth + 1)),
        Value::Object(map) => map.values_mut().for_each(|i| hide_paths(i, depth + 1)),
        _ => {}
    }
}

/// The text with every absolute path (`/a/b...`, at least two segments, not part of a URL's
/// `//`) replaced by `[PATH]`; None when there is none.
pub fn without_paths(text: &str) -> Option<String> {
    let is_path_char = |c: char| c.is_alphanumeric() || "._-~/+@%".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let mut chars = text.char_indices().peekable();
    let mut prev: Option<char> = None;
    while let Some((i, c)) = chars.next() {
        let starts = c == '/'
            && !prev.is_some_and(|p| p.is_alphanumeric() || "/:._-~".contains(p))
            && text[i + 1..]
                .chars()
                .next()
                .is_some_and(|n| n != '/' && is_path_char(n));
        if starts {
            let end = text[i..]
                .char_indices()
                .find(|(_, ch)| !is_path_char(*ch))
                .map_or(text.len(), |(j, _)| i + j);
            let token = &text[i..end];
            if token.trim_end_matches('/').matches('/').count() >= 2 {
                out.push_str("[PATH]");
                changed = true;
                while chars.peek().is_some_and(|(j, _)| *j < end) {
                    chars.next();
                }
                prev = Some('/');
                continue;
            }
        }
        out.push(c);
        prev = Some(c);
    }
    changed.then_some(out)
}

/// Redacts echoed secrets under every `metadata` object and push-notification credentials.
/// Linear: a `metadata` object is redacted once, not again for each `metadata` nested in it.
fn walk(v: &mut Value, metadata: &MetadataPolicy, depth: usize, in_metadata: bool) {
    if depth > MAX_WALK {
        *v = Value::String(REDACTED.into());
        return;
    }
    match v {
        Value::Object(map) => {
            redact_push_config(map);
            for (key, value) in map.iter_mut() {
                let is_metadata = key == "metadata" && value.is_object();
                if is_metadata && !in_metadata {
                    redact_metadata(value, metadata);
                }
                walk(value, metadata, depth + 1, in_metadata || is_metadata);
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(item, metadata, depth + 1, in_metadata);
            }
        }
        _ => {}
    }
}

/// A TaskPushNotificationConfig (an object with a callback `url`): its `token` and
/// `authentication.credentials` are secrets shared with the callback receiver only.
fn redact_push_config(map: &mut Map<String, Value>) {
    if !map.get("url").is_some_and(Value::is_string) {
        return;
    }
    if let Some(token) = map.get_mut("token") {
        if token.is_string() {
            *token = Value::String(REDACTED.into());
        }
    }
    if let Some(Value::Object(auth)) = map.get_mut("authentication") {
        if let Some(creds) = auth.get_mut("credentials") {
            *creds = Value::String(REDACTED.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy() -> MetadataPolicy {
        MetadataPolicy::new(&MetadataPolicy::default_denied(), &Default::default()).unwrap()
    }

    #[test]
    fn redacts_echoed_secrets_in_results() {
        let mut r = json!({"jsonrpc": "2.0", "id": 1, "result": {"task": {
            "id": "t", "metadata": {"iac_code": {"iac_code_api_key": "sk-live", "cwd": "/w"}},
            "history": [{"role": "ROLE_USER", "parts": [{"text": "hi"}],
                "metadata": {"iac_code": {"llm_headers": {"Authorization": "Bearer x"}}}}]
        }}});
        clean_response(&mut r, &policy(), false);
        let text = r.to_string();
        assert!(
            !text.contains("sk-live") && !text.contains("Bearer x"),
            "{text}"
        );
        assert_eq!(r["result"]["task"]["metadata"]["iac_code"]["cwd"], "/w");
        let mut push = json!({"result": {"configs": [{"taskId": "t", "id": "c", "url": "https://h/x",
            "token": "notif-secret", "authentication": {"scheme": "Bearer", "credentials": "cb-secret"}}]}});
        clean_response(&mut push, &policy(), false);
        let text = push.to_string();
        assert!(
            !text.contains("notif-secret") && !text.contains("cb-secret"),
            "{text}"
        );
        assert_eq!(
            push["result"]["configs"][0]["authentication"]["scheme"],
            "Bearer"
        );
    }

    #[test]
    fn paths_are_hidden_only_when_asked() {
        let cases = [
            (
                "Directory /tmp/iacrun/work-llm is empty.",
                Some("Directory [PATH] is empty."),
            ),
            (
                "bad request at /home/alice/proj/main.tf: denied",
                Some("bad request at [PATH]: denied"),
            ),
            (
                "see (/srv/ws/a.txt) and /root/.iac-code/x",
                Some("see ([PATH]) and [PATH]"),
            ),
            ("https://example.com/a/b/c stays", None),
            ("file:///abs/path stays a URL", None),
            ("a/b/c is relative", None),
            ("/health is one segment", None),
            ("no paths here", None),
        ];
        for (text, want) in cases {
            assert_eq!(without_paths(text).as_deref(), want, "{text}");
        }
        let mut r =
            json!({"result": {"status": {"message": {"parts": [{"text": "wrote /tmp/w/x.tf"}]}}}});
        clean_response(&mut r, &policy(), false);
        assert_eq!(
            r["result"]["status"]["message"]["parts"][0]["text"],
            "wrote /tmp/w/x.tf"
        );
        clean_response(&mut r, &policy(), true);
        assert_eq!(
            r["result"]["status"]["message"]["parts"][0]["text"],
            "wrote [PATH]"
        );
    }

    #[test]
    fn an_a2a_error_without_error_info_gets_the_one_a2a_gives_its_code() {
        let info = crate::a2a::ERROR_INFO_TYPE;
        // (code, the ErrorInfo reason it must carry: None for codes that are not A2A's own)
        let rows: Vec<(i64, Option<&str>)> = vec![
            (-32001, Some("TASK_NOT_FOUND")),
            (-32002, Some("TASK_NOT_CANCELABLE")),
            (-32003, Some("PUSH_NOTIFICATION_NOT_SUPPORTED")),
            (-32004, Some("UNSUPPORTED_OPERATION")),
            (-32005, Some("CONTENT_TYPE_NOT_SUPPORTED")),
            (-32006, Some("INVALID_AGENT_RESPONSE")),
            (-32007, Some("EXTENDED_AGENT_CARD_NOT_CONFIGURED")),
            (-32008, Some("EXTENSION_SUPPORT_REQUIRED")),
            (-32009, Some("VERSION_NOT_SUPPORTED")),
            (-32000, None),
            (-32010, None),
            (-32602, None),
            (-32603, None),
            (17, None),
        ];
        for (code, kind) in rows {
            // Without data, with data that is no ErrorInfo, and with an empty array.
            for data in [None, Some(json!([{"stack": "x"}])), Some(json!([]))] {
                let mut error = json!({"code": code, "message": "m"});
                if let Some(d) = &data {
                    error["data"] = d.clone();
                }
                let mut e = json!({"error": error});
                clean_response(&mut e, &policy(), false);
                match kind {
                    Some(reason) => assert_eq!(
                        e["error"]["data"],
                        json!([{"@type": info, "reason": reason,
                                "domain": "a2a-protocol.org", "metadata": {}}]),
                        "{code} {data:?}"
                    ),
                    None => assert!(e["error"].get("data").is_none(), "{code} {data:?}: {e}"),
                }
            }
        }
        // The same object as the edge's own error of that kind.
        let mut e = json!({"error": {"code": -32001, "message": "gone"}});
        clean_response(&mut e, &policy(), false);
        assert_eq!(e["error"], crate::a2a::RpcError::task_not_found().to_json());
        // An agent's own ErrorInfo is kept as it came (reduced), not doubled.
        let mut e = json!({"error": {"code": -32001, "message": "m",
            "data": [{"@type": info, "reason": "TASK_NOT_FOUND", "domain": "example.com"}]}});
        clean_response(&mut e, &policy(), false);
        assert_eq!(
            e["error"]["data"],
            json!([{"@type": info, "reason": "TASK_NOT_FOUND", "domain": "example.com",
                    "metadata": {}}])
        );
    }

    #[test]
    fn error_text_and_data_are_cleaned_for_every_code() {
        let info = crate::a2a::ERROR_INFO_TYPE;
        // (agent's error, code, message after cleaning, ErrorInfo entries kept)
        let rows = vec![
            (
                json!({"code": -32603, "message": "Traceback: /home/agent/app.py line 3",
                "data": [{"@type": info, "reason": "INTERNAL_ERROR"}, {"stack": "/srv/x"}]}),
                -32603,
                "Internal error",
                1,
            ),
            (
                json!({"code": -32001, "message": "Task /home/agent/.secrets token=abc not found",
                "data": [{"leak": "/etc/shadow"}]}),
                -32001,
                "Task not found",
                1,
            ),
            (
                json!({"code": -32602, "message": "bad /home/agent/.secrets token=abc",
                "data": {"leak": "/etc/shadow"}}),
                -32602,
                "Invalid params",
                0,
            ),
            (
                json!({"code": -32099, "message": "custom /home/agent/.secrets token=abc"}),
                -32099,
                "Upstream agent error",
                0,
            ),
            (
                json!({"code": 17, "message": "token=abc"}),
                17,
                "Upstream agent error",
                0,
            ),
            (
                json!({"code": "x", "message": "token=abc"}),
                -32603,
                "Internal error",
                0,
            ),
            (
                json!({"code": 1e20, "message": "token=abc"}),
                -32603,
                "Internal error",
                0,
            ),
            (json!({"message": "token=abc"}), -32603, "Internal error", 0),
            (
                json!({"code": -32603, "message": "m", "data": [
                    {"@type": info, "reason": "/etc/shadow", "domain": "https://evil/home/agent"},
                    {"@type": info, "reason": "token=abc", "domain": "a b"},
                    {"@type": info, "reason": "", "domain": "evil/x"},
                    {"@type": info, "reason": "upstream.foreign_task", "domain": "a2a-edge"}]}),
                -32603,
                "Internal error",
                4,
            ),
            (
                json!({"code": -32009, "message": "A2A version 'evil' is not supported",
                "data": [{"@type": info, "reason": "VERSION_NOT_SUPPORTED", "domain": "a2a-protocol.org",
                          "metadata": {"path": "/etc/shadow"}}]}),
                -32009,
                "A2A version is not supported",
                1,
            ),
        ];
        for (error, code, message, kept) in rows {
            let mut e = json!({"error": error.clone()});
            clean_response(&mut e, &policy(), false);
            let text = e.to_string();
            assert_eq!(e["error"]["code"], code, "{error}");
            assert_eq!(e["error"]["message"], message, "{error}");
            let n = e["error"]["data"].as_array().map_or(0, Vec::len);
            assert_eq!(n, kept, "{error}");
            for secret in ["token=abc", "/etc/shadow", "/home/agent", "evil", "a b"] {
                assert!(!text.contains(secret), "{error}: {text}");
            }
            // What is kept of a code-like reason and a host-name domain is kept as it came.
            if text.contains("upstream.foreign_task") {
                assert!(text.contains(r#""domain":"a2a-edge""#), "{text}");
            }
        }
    }
}
