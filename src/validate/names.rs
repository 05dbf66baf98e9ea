//! ProtoJSON field names. A2A 1.0's JSON is ProtoJSON, whose parsers accept both the JSON
//! name of a field (`taskId`) and its proto field name (`task_id`); the a2a-sdk server does.
//! Every object the edge checks field by field (params, the message, its parts, the send
//! configuration, push configs, their authentication) is first put in JSON names by this one
//! table, so each rule checks one spelling and the agent gets the JSON name. Both spellings
//! of one field in one object are refused (`params.duplicate_field`), as protobuf refuses
//! them: two spellings are a parser-differential hazard. Metadata is a free-form Struct and
//! is never renamed.
//!
//! | reason | when |
//! |---|---|
//! | `params.duplicate_field` | one object names a field by its JSON name and by its proto name |

use serde_json::{Map, Value};

use crate::a2a::RpcError;
use crate::reason;

/// (proto field name, JSON name) of every field of the A2A 1.0 request messages the edge
/// checks whose two names differ (a2a.proto: SendMessageRequest, Message, Part,
/// SendMessageConfiguration, TaskPushNotificationConfig, AuthenticationInfo, GetTaskRequest,
/// ListTasksRequest, CancelTaskRequest, SubscribeToTaskRequest, the push-config requests).
/// The others (`id`, `tenant`, `url`, `role`, `parts`, ...) are spelled alike.
pub const PROTO_NAMES: &[(&str, &str)] = &[
    ("accepted_output_modes", "acceptedOutputModes"),
    ("context_id", "contextId"),
    ("history_length", "historyLength"),
    ("include_artifacts", "includeArtifacts"),
    ("media_type", "mediaType"),
    ("message_id", "messageId"),
    ("page_size", "pageSize"),
    ("page_token", "pageToken"),
    ("reference_task_ids", "referenceTaskIds"),
    ("return_immediately", "returnImmediately"),
    ("status_timestamp_after", "statusTimestampAfter"),
    ("task_id", "taskId"),
    (
        "task_push_notification_config",
        "taskPushNotificationConfig",
    ),
];

/// Renames the proto names of `object` to JSON names (in place). `path` names the object in
/// the error (`params.message`).
pub fn to_json_names(object: &mut Map<String, Value>, path: &str) -> Result<(), RpcError> {
    // Most objects use JSON names only: nothing to do unless a key has an underscore.
    if !object.keys().any(|k| k.contains('_')) {
        return Ok(());
    }
    for (proto, json) in PROTO_NAMES {
        let Some(v) = object.remove(*proto) else {
            continue;
        };
        if object.contains_key(*json) {
            return Err(RpcError::invalid_params(
                format!("{path}.{json} is given twice (as {json} and as {proto})"),
                reason::PARAMS_DUPLICATE_FIELD,
            ));
        }
        object.insert((*json).to_string(), v);
    }
    Ok(())
}

/// Puts every object of a request's params that the edge reads into JSON names: the params,
/// the message and its parts, the send configuration, push configs and their authentication.
/// Done right after parsing, before any stage reads a field (authorization looks for an
/// inline push config and tenants: a proto spelling must not slip past it).
pub fn normalize_params(params: &mut Map<String, Value>) -> Result<(), RpcError> {
    to_json_names(params, "params")?;
    if let Some(Value::Object(auth)) = params.get_mut("authentication") {
        to_json_names(auth, "params.authentication")?;
    }
    if let Some(Value::Object(m)) = params.get_mut("message") {
        to_json_names(m, "params.message")?;
        if let Some(Value::Array(parts)) = m.get_mut("parts") {
            for part in parts.iter_mut().filter_map(Value::as_object_mut) {
                to_json_names(part, "params.message.parts")?;
            }
        }
    }
    if let Some(Value::Object(c)) = params.get_mut("configuration") {
        to_json_names(c, "params.configuration")?;
        if let Some(Value::Object(push)) = c.get_mut("taskPushNotificationConfig") {
            to_json_names(push, "params.configuration.taskPushNotificationConfig")?;
            if let Some(Value::Object(auth)) = push.get_mut("authentication") {
                to_json_names(auth, "authentication")?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_request_is_renamed_where_the_edge_reads_it_and_nowhere_else() {
        let mut p = map(json!({
            "message": {"message_id": "m", "task_id": "t", "parts": [{"media_type": "text/plain", "text": "x"}],
                "metadata": {"iac_code": {"cwd": "/w"}, "task_id": "kept"}},
            "configuration": {"history_length": 1, "task_push_notification_config": {"task_id": "t", "url": "https://h.example/"}},
            "metadata": {"page_size": 1}
        }));
        normalize_params(&mut p).unwrap();
        assert_eq!(
            Value::Object(p),
            json!({
                "message": {"messageId": "m", "taskId": "t", "parts": [{"mediaType": "text/plain", "text": "x"}],
                    "metadata": {"iac_code": {"cwd": "/w"}, "task_id": "kept"}},
                "configuration": {"historyLength": 1, "taskPushNotificationConfig": {"taskId": "t", "url": "https://h.example/"}},
                "metadata": {"page_size": 1}
            })
        );
        let mut dup = map(
            json!({"configuration": {"taskPushNotificationConfig": {}, "task_push_notification_config": {}}}),
        );
        assert_eq!(
            normalize_params(&mut dup).unwrap_err().reason,
            "params.duplicate_field"
        );
    }

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn every_proto_name_becomes_its_json_name() {
        for (proto, json) in PROTO_NAMES {
            let mut m = map(json!({ *proto: 1, "other": 2 }));
            to_json_names(&mut m, "params").unwrap();
            assert_eq!(m.get(*json), Some(&json!(1)), "{proto}");
            assert!(!m.contains_key(*proto), "{proto}");
            assert_eq!(m.get("other"), Some(&json!(2)));
        }
    }

    #[test]
    fn the_table_is_the_lower_camel_case_of_each_proto_name() {
        for (proto, json) in PROTO_NAMES {
            let mut camel = String::new();
            let mut up = false;
            for c in proto.chars() {
                match c {
                    '_' => up = true,
                    c if up => {
                        camel.push(c.to_ascii_uppercase());
                        up = false
                    }
                    c => camel.push(c),
                }
            }
            assert_eq!(&camel, json);
        }
        let mut sorted = PROTO_NAMES.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), PROTO_NAMES.len());
    }

    #[test]
    fn both_spellings_in_one_object_are_refused() {
        for (proto, json) in PROTO_NAMES {
            let mut m = map(json!({ *proto: "a", *json: "a" }));
            let e = to_json_names(&mut m, "params.message").unwrap_err();
            assert_eq!(e.reason, "params.duplicate_field");
            assert_eq!(e.code, -32602);
            assert!(e.message.contains(json), "{}", e.message);
        }
    }

    #[test]
    fn unknown_names_and_look_alikes_stay_as_they_are() {
        // Not in the table: left for the checks to drop as unknown fields.
        for key in [
            "Task_Id", "task__id", "taskid", "task-id", "_task_id", "iac_code",
        ] {
            let mut m = map(json!({ key: 1 }));
            to_json_names(&mut m, "params").unwrap();
            assert_eq!(m.get(key), Some(&json!(1)), "{key}");
            assert!(!m.contains_key("taskId"), "{key}");
        }
    }
}
