//! Clean responses: what an agent answers is scrubbed before a caller sees it. Secrets it
//! echoes (denied metadata keys, push-notification credentials) are redacted, and the text
//! of internal errors (which may hold paths or stack text) is replaced; the code stays.

use serde_json::{Map, Value};

use crate::validate::metadata::{redact_metadata, MetadataPolicy};

const REDACTED: &str = "[REDACTED]";
/// Deeper than this, an answer is not walked (the edge's own JSON depth bound is lower).
const MAX_WALK: usize = 128;

/// Cleans one JSON-RPC response from an agent, in place. With `redact_paths`, absolute paths
/// in any string are replaced by `[PATH]`, as iac-code's safe mode does.
pub fn clean_response(response: &mut Value, metadata: &MetadataPolicy, redact_paths: bool) {
    if let Some(error) = response.get_mut("error").and_then(Value::as_object_mut) {
        if error.get("code").and_then(Value::as_i64) == Some(-32603) {
            error.insert("message".into(), Value::from("Internal error"));
            // Keep only the ErrorInfo entries: other details may carry internals.
            if let Some(Value::Array(data)) = error.get_mut("data") {
                data.retain(|d| {
                    d.get("@type").and_then(Value::as_str) == Some(crate::a2a::ERROR_INFO_TYPE)
                });
            } else {
                error.remove("data");
            }
        }
    }
    if let Some(result) = response.get_mut("result") {
        walk(result, metadata, 0);
    }
    if redact_paths {
        hide_paths(response, 0);
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

fn walk(v: &mut Value, metadata: &MetadataPolicy, depth: usize) {
    if depth > MAX_WALK {
        *v = Value::String(REDACTED.into());
        return;
    }
    match v {
        Value::Object(map) => {
            redact_push_config(map);
            for (key, value) in map.iter_mut() {
                if key == "metadata" && value.is_object() {
                    redact_metadata(value, metadata);
                }
                walk(value, metadata, depth + 1);
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(item, metadata, depth + 1);
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
    fn internal_error_text_is_replaced_and_other_errors_kept() {
        let mut e = json!({"error": {"code": -32603, "message": "Traceback: /home/agent/app.py line 3",
            "data": [{"@type": crate::a2a::ERROR_INFO_TYPE, "reason": "INTERNAL_ERROR"}, {"stack": "/srv/x"}]}});
        clean_response(&mut e, &policy(), false);
        assert_eq!(e["error"]["message"], "Internal error");
        assert_eq!(e["error"]["code"], -32603);
        assert_eq!(e["error"]["data"].as_array().unwrap().len(), 1);
        let mut nf = json!({"error": {"code": -32001, "message": "Task not found"}});
        clean_response(&mut nf, &policy(), false);
        assert_eq!(nf["error"]["message"], "Task not found");
    }
}
