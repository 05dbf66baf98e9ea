//! `upstream::answer::scan` (the answer's fast pass) against the full pass it stands in for.
//!
//! Input: the first byte's low bit is `redact_paths`, its other bits the value bound
//! (`a2a.max_json_values`, 16 to 1032); the rest is an agent's JSON-RPC response.
//! Properties: never panics; linear time (a per-byte budget); when the scan takes a
//! response, the full pass (parse within the bound, shape with the caller's id,
//! `clean_response`) accepts it too and gives the same JSON as the relayed bytes, the scan
//! reads the same `id`, the registry reads the same facts from the projection as from the
//! whole result, no `contextId` the caller's view could rewrite (an alias) is in it, and
//! the relayed bytes framed as an SSE event decode to one event of the same JSON.
//! `upstream::answer::project` (the projection of an answer its caller is not given) too: it
//! takes whatever the scan takes, with the same projection and `id`, and whatever it takes
//! the full pass accepts, with the same `id` and, both cleaned, the same facts.
#![no_main]

use std::time::{Duration, Instant};

use a2a_edge::a2a::sse::{data_event, SseDecoder};
use a2a_edge::state::registry::{facts_of, is_context_alias};
use a2a_edge::upstream::answer::{project, respond, scan, Cleaning};
use a2a_edge::upstream::clean::clean_response;
use a2a_edge::validate::metadata::MetadataPolicy;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fn no_alias(v: &Value) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if k == "contextId" {
                    if let Value::String(s) = child {
                        assert!(!is_context_alias(s), "an alias was taken: {s}");
                    }
                }
                no_alias(child);
            }
        }
        Value::Array(items) => items.iter().for_each(no_alias),
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, bytes)) = data.split_first() else {
        return;
    };
    let redact_paths = first & 1 == 1;
    let policy = MetadataPolicy::new(&MetadataPolicy::default_denied(), &Default::default())
        .expect("policy");
    // A small value bound (16 to 1032, by the first byte's other bits), so that inputs
    // reach it: the scan takes only what the full pass, bounded alike, builds.
    let max_values = 16 + usize::from(first >> 1) * 8;
    let cleaning = Cleaning {
        metadata: &policy,
        redact_paths,
        max_values,
    };
    let started = Instant::now();
    let fast = scan(bytes, cleaning);
    let projected = project(bytes, max_values);
    let budget = Duration::from_millis(400) + Duration::from_micros(10) * bytes.len() as u32;
    assert!(
        started.elapsed() < budget,
        "{:?} for {} bytes",
        started.elapsed(),
        bytes.len()
    );
    let id = json!("caller-1");
    if let Some((projection, theirs)) = &projected {
        let v = a2a_edge::a2a::json::parse_answer(bytes, max_values)
            .expect("the full pass parses what was projected");
        let Value::Object(mut map) = v else {
            panic!("projected a response that is not an object");
        };
        assert_eq!(theirs.as_ref(), map.get("id"), "the projected id differs");
        let result = match (map.remove("result"), map.remove("error")) {
            (Some(r), None) => r,
            other => panic!("projected a response without one result: {other:?}"),
        };
        let mut full = json!({"result": result});
        clean_response(&mut full, &policy, redact_paths);
        let mut projected = json!({"result": projection});
        clean_response(&mut projected, &policy, redact_paths);
        assert_eq!(
            facts_of(&projected["result"]),
            facts_of(&full["result"]),
            "projected facts differ"
        );
    }
    let Some(fast) = fast else {
        return;
    };
    let (projection, theirs) = projected.expect("projected what the scan took");
    assert_eq!((&projection, &theirs), (&fast.projection, &fast.id));
    let v = a2a_edge::a2a::json::parse_answer(bytes, max_values)
        .expect("the full pass parses what the scan took");
    let Value::Object(mut map) = v else {
        panic!("the scan took a response that is not an object");
    };
    // The relay compares the agent's id with the request's: the scan reads the one the full
    // pass keeps (the last).
    assert_eq!(fast.id.as_ref(), map.get("id"), "the id differs");
    let result = match (map.remove("result"), map.remove("error")) {
        (Some(r), None) => r,
        other => panic!("the scan took a response without one result: {other:?}"),
    };
    let mut full = json!({"result": result, "jsonrpc": "2.0", "id": id});
    clean_response(&mut full, &policy, redact_paths);
    let relayed: Value = serde_json::from_slice(&respond(fast.result, &id)).expect("relayed JSON");
    assert_eq!(relayed, full, "the full pass would have changed the answer");
    // Relayed in a stream: one event of one data line, the same JSON (line breaks the
    // agent put between tokens must not end the line or the event).
    let frame = data_event(&respond(fast.result, &id));
    let mut decoder = SseDecoder::new(usize::MAX);
    let events = decoder.push(&frame).expect("the edge's own frame decodes");
    assert_eq!((events.len(), decoder.pending()), (1, 0), "one event");
    let streamed: Value =
        serde_json::from_str(events[0].data.as_deref().unwrap_or("")).expect("streamed JSON");
    assert_eq!(streamed, full, "the streamed event differs");
    assert_eq!(
        facts_of(&fast.projection),
        facts_of(&full["result"]),
        "facts differ"
    );
    no_alias(&relayed);
});
