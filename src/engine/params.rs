//! Typed views of the params the engine accepts, checked as the reference SDK checks them
//! (ProtoJSON: camelCase, `null` means unset, int32 as a number or a numeric string, enums by
//! name or number). A broken rule is `-32602`.

use serde_json::{Map, Value};

use super::store::{decode_page_token, ListQuery};
use super::task::TaskState;
use crate::a2a::RpcError;
use crate::reason;
use crate::time;

/// ListTasks page size without `pageSize`.
pub(crate) const DEFAULT_PAGE_SIZE: usize = 50;
/// Largest ListTasks page.
pub(crate) const MAX_PAGE_SIZE: usize = 100;
/// Longest task or context id a caller may choose.
const MAX_ID_LEN: usize = 128;

pub(crate) fn invalid(message: impl Into<String>) -> RpcError {
    RpcError::invalid_params(message, reason::INVALID_PARAMS)
}

/// A string field; absent, null and `""` (the proto3 default) are `None`.
pub(crate) fn opt_string<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, RpcError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(format!("{key} must be a string"))),
    }
}

/// A required, non-empty string field.
pub(crate) fn req_string<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<&'a str, RpcError> {
    opt_string(obj, key)?.ok_or_else(|| invalid(format!("{key} is required")))
}

/// A bool field; absent or null is false.
pub(crate) fn opt_bool(obj: &Map<String, Value>, key: &str) -> Result<bool, RpcError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid(format!("{key} must be a boolean"))),
    }
}

/// An int32 field.
fn opt_int32(obj: &Map<String, Value>, key: &str) -> Result<Option<i64>, RpcError> {
    let bad = || invalid(format!("{key} must be an integer"));
    let n = match obj.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i,
            (None, Some(f)) if f.fract() == 0.0 && f.abs() <= f64::from(i32::MAX) + 1.0 => f as i64,
            _ => return Err(bad()),
        },
        Some(Value::String(s)) => s.parse::<i64>().map_err(|_| bad())?,
        Some(_) => return Err(bad()),
    };
    if i32::try_from(n).is_err() {
        return Err(bad());
    }
    Ok(Some(n))
}

/// A non-negative int32 field (history lengths).
pub(crate) fn opt_count(obj: &Map<String, Value>, key: &str) -> Result<Option<usize>, RpcError> {
    match opt_int32(obj, key)? {
        None => Ok(None),
        Some(n) => usize::try_from(n)
            .map(Some)
            .map_err(|_| invalid(format!("{key} must not be negative"))),
    }
}

/// An object field; absent or null is `None`.
fn opt_object<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a Map<String, Value>>, RpcError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(invalid(format!("{key} must be an object"))),
    }
}

/// A task or context id chosen by the caller: 1..=128 of `[A-Za-z0-9_.:-]` (iac-code's rule).
fn check_id(key: &str, id: &str) -> Result<(), RpcError> {
    let ok = id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(invalid(format!("{key} is not a valid A2A id")))
    }
}

/// A checked SendMessageRequest.
#[derive(Debug, Clone)]
pub(crate) struct SendParams {
    /// The user message, role normalized to `ROLE_USER`.
    pub message: Map<String, Value>,
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    pub history: Option<usize>,
    pub return_immediately: bool,
}

/// SendMessage / SendStreamingMessage params.
pub(crate) fn send_params(params: &Map<String, Value>) -> Result<SendParams, RpcError> {
    let mut message = match params.get("message") {
        Some(Value::Object(m)) => m.clone(),
        None | Some(Value::Null) => return Err(invalid("message is required")),
        Some(_) => return Err(invalid("message must be an object")),
    };
    req_string(&message, "messageId")?;
    match message.get("role") {
        Some(Value::String(r)) if r == "ROLE_USER" => {}
        Some(Value::Number(n)) if n.as_i64() == Some(1) => {}
        _ => return Err(invalid("message.role must be ROLE_USER")),
    }
    message.insert("role".into(), Value::String("ROLE_USER".into()));
    let parts = match message.get("parts") {
        Some(Value::Array(p)) if !p.is_empty() => p,
        _ => return Err(invalid("message.parts must be a non-empty array")),
    };
    for part in parts {
        let Value::Object(part) = part else {
            return Err(invalid("each part must be an object"));
        };
        let contents = ["text", "raw", "url", "data"]
            .iter()
            .filter(|k| part.get(**k).is_some_and(|v| !v.is_null()))
            .count();
        if contents > 1 {
            return Err(invalid("a part has more than one content field"));
        }
        if part
            .get("text")
            .is_some_and(|t| !t.is_string() && !t.is_null())
        {
            return Err(invalid("part text must be a string"));
        }
    }
    let task_id = opt_string(&message, "taskId")?.map(str::to_string);
    let context_id = opt_string(&message, "contextId")?.map(str::to_string);
    if let Some(t) = &task_id {
        check_id("message.taskId", t)?;
    }
    if let Some(c) = &context_id {
        check_id("message.contextId", c)?;
    }
    // Unset ids must not be stored as "" or null: the store fills them in.
    message.remove("taskId");
    message.remove("contextId");
    let (history, return_immediately) = match opt_object(params, "configuration")? {
        None => (None, false),
        Some(cfg) => {
            if cfg
                .get("taskPushNotificationConfig")
                .is_some_and(|v| !v.is_null())
            {
                return Err(RpcError::push_not_supported());
            }
            (
                opt_count(cfg, "historyLength")?,
                opt_bool(cfg, "returnImmediately")?,
            )
        }
    };
    Ok(SendParams {
        message,
        task_id,
        context_id,
        history,
        return_immediately,
    })
}

/// GetTask params: the id and the history length.
pub(crate) fn get_params(params: &Map<String, Value>) -> Result<(&str, Option<usize>), RpcError> {
    Ok((
        req_string(params, "id")?,
        opt_count(params, "historyLength")?,
    ))
}

/// ListTasks params.
pub(crate) fn list_params(params: &Map<String, Value>) -> Result<ListQuery, RpcError> {
    let page_size = match opt_int32(params, "pageSize")? {
        None => DEFAULT_PAGE_SIZE,
        Some(n) if n < 1 => return Err(invalid("minimum page size is 1")),
        Some(n) if n > MAX_PAGE_SIZE as i64 => return Err(invalid("maximum page size is 100")),
        Some(n) => usize::try_from(n).map_err(|_| invalid("invalid page size"))?,
    };
    let after = match opt_string(params, "pageToken")? {
        None => None,
        Some(t) => Some(decode_page_token(t).ok_or_else(|| invalid("invalid page token"))?),
    };
    let status = match params.get("status") {
        None => None,
        Some(v) => TaskState::from_json(v).map_err(|_| invalid("unknown task state"))?,
    };
    let since = match opt_string(params, "statusTimestampAfter")? {
        None => None,
        Some(s) => {
            Some(time::parse_rfc3339(s).ok_or_else(|| invalid("invalid statusTimestampAfter"))?)
        }
    };
    Ok(ListQuery {
        context_id: opt_string(params, "contextId")?.map(str::to_string),
        status,
        page_size,
        after,
        history: opt_count(params, "historyLength")?,
        include_artifacts: opt_bool(params, "includeArtifacts")?,
        since,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn send_params_table() {
        let good = json!({"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]});
        let cases: Vec<(Value, bool)> = vec![
            (json!({"message": good}), true),
            (json!({"message": good, "configuration": {}}), true),
            (
                json!({"message": good, "configuration": {"historyLength": 2, "returnImmediately": true}}),
                true,
            ),
            (
                json!({"message": {"messageId":"m","role":1,"parts":[{"data":{"k":1}}]}}),
                true,
            ),
            (
                json!({"message": {"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"contextId":"c-1","taskId":""}}),
                true,
            ),
            (json!({}), false),
            (json!({"message": "x"}), false),
            (
                json!({"message": {"role":"ROLE_USER","parts":[{"text":"x"}]}}),
                false,
            ),
            (
                json!({"message": {"messageId":"","role":"ROLE_USER","parts":[{"text":"x"}]}}),
                false,
            ),
            (
                json!({"message": {"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"x"}]}}),
                false,
            ),
            (
                json!({"message": {"messageId":"m","role":"user","parts":[{"text":"x"}]}}),
                false,
            ),
            (
                json!({"message": {"messageId":"m","role":"ROLE_USER","parts":[]}}),
                false,
            ),
            (
                json!({"message": {"messageId":"m","role":"ROLE_USER"}}),
                false,
            ),
            (
                json!({"message": {"messageId":"m","role":"ROLE_USER","parts":["x"]}}),
                false,
            ),
            (
                json!({"message": {"messageId":"m","role":"ROLE_USER","parts":[{"text":"x","url":"u"}]}}),
                false,
            ),
            (
                json!({"message": {"messageId":"m","role":"ROLE_USER","parts":[{"text":5}]}}),
                false,
            ),
            (
                json!({"message": {"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"contextId":"a/b"}}),
                false,
            ),
            (
                json!({"message": {"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"taskId":7}}),
                false,
            ),
            (
                json!({"message": good, "configuration": {"historyLength": -1}}),
                false,
            ),
            (
                json!({"message": good, "configuration": {"historyLength": "x"}}),
                false,
            ),
            (
                json!({"message": good, "configuration": {"returnImmediately": "yes"}}),
                false,
            ),
            (json!({"message": good, "configuration": 3}), false),
        ];
        for (params, ok) in cases {
            let r = send_params(&obj(params.clone()));
            assert_eq!(r.is_ok(), ok, "{params}: {r:?}");
            if let Err(e) = r {
                assert_eq!(e.code, -32602, "{params}");
            }
        }
        let push = json!({"message": good, "configuration": {"taskPushNotificationConfig": {"url":"http://x/"}}});
        assert_eq!(send_params(&obj(push)).unwrap_err().code, -32003);
        let p = send_params(&obj(
            json!({"message": {"messageId":"m","role":1,"parts":[{"text":"x"}],"taskId":""}}),
        ))
        .unwrap();
        assert_eq!(p.message["role"], "ROLE_USER");
        assert!(p.task_id.is_none() && !p.message.contains_key("taskId"));
    }

    #[test]
    fn list_params_table() {
        let q = list_params(&Map::new()).unwrap();
        assert_eq!(q.page_size, DEFAULT_PAGE_SIZE);
        assert!(q.after.is_none() && q.status.is_none() && !q.include_artifacts);
        let q = list_params(&obj(json!({"pageSize":"7","status":"TASK_STATE_WORKING","statusTimestampAfter":"1970-01-01T00:00:01Z","historyLength":0,"includeArtifacts":true,"contextId":"c"}))).unwrap();
        assert_eq!(q.page_size, 7);
        assert_eq!(q.status, Some(TaskState::Working));
        assert_eq!(q.since, Some(1_000_000));
        assert_eq!(q.history, Some(0));
        assert_eq!(q.context_id.as_deref(), Some("c"));
        for bad in [
            json!({"pageSize": 0}),
            json!({"pageSize": 101}),
            json!({"pageSize": 1000}),
            json!({"pageSize": 1.5}),
            json!({"pageSize": 4294967297u64}),
            json!({"pageToken": "garbage!"}),
            json!({"status": "done"}),
            json!({"historyLength": -2}),
            json!({"includeArtifacts": 1}),
            json!({"statusTimestampAfter": "yesterday"}),
            json!({"contextId": 5}),
        ] {
            let e = list_params(&obj(bad.clone())).unwrap_err();
            assert_eq!(e.code, -32602, "{bad}");
        }
        assert_eq!(
            list_params(&obj(json!({"pageSize": 100})))
                .unwrap()
                .page_size,
            100
        );
        assert_eq!(
            list_params(&obj(json!({"pageSize": 3.0})))
                .unwrap()
                .page_size,
            3
        );
    }

    #[test]
    fn get_params_table() {
        assert_eq!(get_params(&obj(json!({"id":"t"}))).unwrap(), ("t", None));
        assert_eq!(
            get_params(&obj(json!({"id":"t","historyLength":3}))).unwrap(),
            ("t", Some(3))
        );
        for bad in [
            json!({}),
            json!({"id": 1}),
            json!({"id": ""}),
            json!({"id":"t","historyLength":-1}),
        ] {
            assert_eq!(
                get_params(&obj(bad.clone())).unwrap_err().code,
                -32602,
                "{bad}"
            );
        }
    }
}
