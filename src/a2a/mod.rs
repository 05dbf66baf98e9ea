//! A2A 1.0 over JSON-RPC 2.0: the method set, the request envelope, error codes with
//! `ErrorInfo`, and the server-sent-events codec. Knows nothing of HTTP or policy.

pub mod envelope;
pub mod error;
pub mod json;
pub mod method;
pub mod sse;
pub mod write;

pub use envelope::{error_body, result_body, to_json_bytes, to_json_bytes_sized, RpcRequest};
pub use error::{code, RpcError};
pub use method::Method;

/// The `@type` of a google.rpc.ErrorInfo entry in `error.data`.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// The `domain` of every ErrorInfo this project emits.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";
/// The media type of server-sent-event responses.
pub const SSE_CONTENT_TYPE: &str = "text/event-stream; charset=utf-8";

/// Whether an answer's `result` (a SendMessage result, or one event of a stream) ends the
/// caller's turn: a Message, or a task (or a status update) in a state where the agent is
/// done or waits for the caller (A2A 1.0 §4.1.3: terminal and interrupted states).
pub fn ends_turn(result: &serde_json::Value) -> bool {
    const ENDS: [&str; 6] = [
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_AUTH_REQUIRED",
    ];
    if result.get("message").is_some() {
        return true;
    }
    ["task", "statusUpdate"].iter().any(|k| {
        let state = result.get(*k).and_then(|e| e.pointer("/status/state"));
        state
            .and_then(serde_json::Value::as_str)
            .is_some_and(|s| ENDS.contains(&s))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_turn_ends_with_a_message_or_a_state_that_waits_for_the_caller() {
        let task = |s: &str| json!({"task": {"id": "t", "status": {"state": s}}});
        let update = |s: &str| json!({"statusUpdate": {"taskId": "t", "status": {"state": s}}});
        let rows = [
            (json!({"message": {"messageId": "m"}}), true),
            (task("TASK_STATE_COMPLETED"), true),
            (task("TASK_STATE_INPUT_REQUIRED"), true),
            (task("TASK_STATE_AUTH_REQUIRED"), true),
            (update("TASK_STATE_FAILED"), true),
            (update("TASK_STATE_CANCELED"), true),
            (update("TASK_STATE_REJECTED"), true),
            (task("TASK_STATE_WORKING"), false),
            (task("TASK_STATE_SUBMITTED"), false),
            (update("TASK_STATE_WORKING"), false),
            (json!({"artifactUpdate": {"taskId": "t"}}), false),
            // Not A2A 1.0 spellings, nor states elsewhere: not an end.
            (task("completed"), false),
            (json!({"task": {"status": {"state": 5}}}), false),
            (json!({"status": {"state": "TASK_STATE_COMPLETED"}}), false),
            (json!({}), false),
        ];
        for (result, ends) in rows {
            assert_eq!(super::ends_turn(&result), ends, "{result}");
        }
    }
}
