//! Clean responses: what an agent answers is scrubbed before a caller sees it. Secrets it
//! echoes (denied metadata keys, push-notification credentials) are redacted, and the text
//! of internal errors (which may hold paths or stack text) is replaced; the code stays.

use serde_json::{Map, Value};

use crate::validate::metadata::{redact_metadata, MetadataPolicy};

const REDACTED: &str = "[REDACTED]";
/// Deeper than this, an answer is not walked (the edge's own JSON depth bound is lower).
const MAX_WALK: usize = 128;

/// Cleans one JSON-RPC response from an agent, in place.
pub fn clean_response(response: &mut Value, metadata: &MetadataPolicy) {
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
        clean_response(&mut r, &policy());
        let text = r.to_string();
        assert!(
            !text.contains("sk-live") && !text.contains("Bearer x"),
            "{text}"
        );
        assert_eq!(r["result"]["task"]["metadata"]["iac_code"]["cwd"], "/w");
        let mut push = json!({"result": {"configs": [{"taskId": "t", "id": "c", "url": "https://h/x",
            "token": "notif-secret", "authentication": {"scheme": "Bearer", "credentials": "cb-secret"}}]}});
        clean_response(&mut push, &policy());
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
    fn internal_error_text_is_replaced_and_other_errors_kept() {
        let mut e = json!({"error": {"code": -32603, "message": "Traceback: /home/agent/app.py line 3",
            "data": [{"@type": crate::a2a::ERROR_INFO_TYPE, "reason": "INTERNAL_ERROR"}, {"stack": "/srv/x"}]}});
        clean_response(&mut e, &policy());
        assert_eq!(e["error"]["message"], "Internal error");
        assert_eq!(e["error"]["code"], -32603);
        assert_eq!(e["error"]["data"].as_array().unwrap().len(), 1);
        let mut nf = json!({"error": {"code": -32001, "message": "Task not found"}});
        clean_response(&mut nf, &policy());
        assert_eq!(nf["error"]["message"], "Task not found");
    }
}
