//! The engine's Agent Card (A2A 1.0 shape) and its extended card.

use serde_json::{json, Value};

use super::EngineConfig;
use crate::validate::media::{BUILTIN_MULTIMODAL, BUILTIN_TEXT};

/// The input media types iac-code advertises: its text-like and multimodal defaults.
fn input_modes() -> Vec<&'static str> {
    BUILTIN_TEXT
        .iter()
        .chain(BUILTIN_MULTIMODAL.iter())
        .copied()
        .collect()
}

/// The public card.
pub(crate) fn build(config: &EngineConfig) -> Value {
    json!({
        "name": config.name,
        "description": "An in-memory A2A 1.0 echo agent embedded in a2a-edge, for tests, \
            benchmarks and first runs. It echoes the text it is sent, streamed in chunks; \
            directives such as [[slow:MS]], [[chunks:N]], [[fail]], [[complete]], [[input]], \
            [[wait]] and [[message]] steer it.",
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": config.public_url,
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }],
        // No `provider`: an AgentProvider needs the provider's site (`url`), which an echo
        // agent does not have; its own address there (as before) showed a standalone
        // engine's internal URL to callers of the edge.
        "capabilities": {
            "streaming": true,
            "pushNotifications": false,
            "extendedAgentCard": true,
        },
        "defaultInputModes": input_modes(),
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": "echo",
            "name": "Echo",
            "description": "Echoes the text of a message back, streamed in chunks.",
            "tags": ["echo"],
            "examples": ["hello", "[[slow:200]] [[chunks:5]] stream this slowly", "[[fail]]"],
        }],
    })
}

/// The extended card: the public card plus a `runtime_details` skill.
pub(crate) fn extended(card: &Value) -> Value {
    let mut card = card.clone();
    if let Some(skills) = card.get_mut("skills").and_then(Value::as_array_mut) {
        skills.push(json!({
            "id": "runtime_details",
            "name": "Runtime details",
            "description": "Describes the embedded engine: in-memory tasks, echo agent, \
                no push notifications.",
            "tags": ["runtime"],
        }));
    }
    card
}
