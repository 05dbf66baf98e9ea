//! The fast pass against the full one: every answer the scan takes must come out of the full
//! pass unchanged (the same JSON), with the same facts for the registry; the table says which
//! answers it must take, so a scan that always fell back would fail too.

use serde_json::{json, Value};

use super::*;
use crate::state::registry::facts_of;
use crate::upstream::clean::clean_response;

fn policy() -> MetadataPolicy {
    MetadataPolicy::new(&MetadataPolicy::default_denied(), &Default::default()).unwrap()
}

/// The value bound of these tests (small, so that rows reach it).
const MAX_VALUES: usize = 200;

/// The full pass as the relay does it: parse (at most [`MAX_VALUES`] values), shape (the
/// caller's id), clean.
fn full(bytes: &[u8], id: &Value, redact_paths: bool) -> Option<Value> {
    let v = crate::a2a::json::parse_answer(bytes, MAX_VALUES).ok()?;
    let Value::Object(mut map) = v else {
        return None;
    };
    let result = match (map.remove("result"), map.remove("error")) {
        (Some(r), None) => r,
        _ => return None,
    };
    let mut v = json!({"result": result, "jsonrpc": "2.0", "id": id});
    clean_response(&mut v, &policy(), redact_paths);
    Some(v)
}

/// Checks one answer both ways; returns whether the scan took it.
fn compare(bytes: &[u8], redact_paths: bool) -> bool {
    let p = policy();
    let id = json!("caller-7");
    let cleaning = Cleaning {
        metadata: &p,
        redact_paths,
        max_values: MAX_VALUES,
    };
    let Some(fast) = scan(bytes, cleaning) else {
        return false;
    };
    let text = String::from_utf8_lossy(bytes);
    let full = full(bytes, &id, redact_paths)
        .unwrap_or_else(|| panic!("the scan took what the full pass refuses: {text}"));
    let relayed: Value = serde_json::from_slice(&respond(fast.result, &id))
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(relayed, full, "the full pass would change: {text}");
    // In a stream the relayed bytes are one event: the agent's line breaks between tokens
    // (which the bytes keep) neither end its `data:` line nor, doubled, the event.
    let frame = crate::a2a::sse::data_event(&respond(fast.result, &id));
    let mut decoder = crate::a2a::sse::SseDecoder::new(usize::MAX);
    let events = decoder.push(&frame).unwrap();
    assert_eq!((events.len(), decoder.pending()), (1, 0), "{text}");
    let streamed: Value = serde_json::from_str(events[0].data.as_deref().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: the streamed event of {text}"));
    assert_eq!(streamed, full, "streamed: {text}");
    assert_eq!(
        facts_of(&fast.projection),
        facts_of(&full["result"]),
        "facts differ: {text}"
    );
    true
}

fn task(extra: Value) -> Value {
    let mut t = json!({"id": "6f1c7e0a-3b52", "contextId": "0c2e9b8d-7a41",
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-01T12:00:00.000000Z",
            "message": {"messageId": "m-1", "role": "ROLE_AGENT", "parts": [{"text": "done"}]}},
        "artifacts": [{"artifactId": "a-1", "parts": [{"text": "lorem"}, {"data": {"n": 1.5, "ok": true, "none": null}}]}],
        "history": [{"messageId": "m-0", "role": "ROLE_USER", "parts": [{"text": "hi"}]}]});
    if let (Value::Object(t), Value::Object(extra)) = (&mut t, extra) {
        t.extend(extra);
    }
    t
}

fn answer(result: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": "agent-id", "result": result})
        .to_string()
        .into_bytes()
}

#[test]
fn takes_what_needs_no_cleaning_and_falls_back_on_the_rest() {
    let alias = format!("c-{}", "ab12".repeat(8));
    let deep = format!("{}1{}", "[".repeat(70), "]".repeat(70));
    let wide: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("k{i}"), Value::from(i))).collect();
    let mut nested_meta = json!("x");
    for _ in 0..33 {
        // Keys of dots only add no segment: the walk goes down to its depth bound.
        nested_meta = json!({ ".": nested_meta });
    }
    // (case, answer bytes, redact_paths, taken by the fast pass)
    let rows: Vec<(&str, Vec<u8>, bool, bool)> = vec![
        ("a task", answer(json!({"task": task(json!({}))})), false, true),
        ("a bare task (GetTask)", answer(task(json!({}))), false, true),
        ("a message", answer(json!({"message": {"messageId": "m", "contextId": "c", "taskId": "t", "role": "ROLE_AGENT", "parts": []}})), false, true),
        ("a status update", answer(json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}})), false, true),
        ("an artifact update", answer(json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "artifact": {"artifactId": "a", "parts": []}}})), false, true),
        ("a list (never learned)", answer(json!({"tasks": [task(json!({}))], "nextPageToken": ""})), false, true),
        ("ids of other types", answer(json!({"task": {"id": 7, "contextId": ["c"], "status": "x"}})), false, true),
        ("a scalar result", answer(json!("ok")), false, true),
        ("a null result", answer(Value::Null), false, true),
        ("escapes in strings", br#"{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t\u0041","contextId":"c\"q\"","status":{"state":"S\n\u00e9\ud83d\ude00"}}}}"#.to_vec(), false, true),
        ("pretty-printed over lines, a blank one too", b"{\"jsonrpc\": \"2.0\",\n  \"result\": {\"task\":\r\n\r\n  {\"id\": \"t\",\r  \"contextId\": \"c\"}\n},\n  \"id\": 9\n}\n".to_vec(), false, true),
        ("whitespace and extra top-level keys", b"{ \"x\" : [1, {\"y\": 2}] ,\n \"result\" : { \"task\" : { \"id\" : \"t\" , \"contextId\" : \"c\" } } , \"id\": 9 }".to_vec(), false, true),
        ("empty metadata", answer(json!({"task": task(json!({"metadata": {}}))})), false, true),
        ("allowed metadata", answer(json!({"task": task(json!({"metadata": {"iac_code": {"cwd": "/w"}, "trace": [1, 2]}}))})), false, true),
        ("metadata that is not an object", answer(json!({"task": task(json!({"metadata": "iac_code.iac_code_api_key"}))})), false, true),
        ("a url without secrets", answer(json!({"configs": [{"id": "c", "url": "https://h/x"}]})), false, true),
        ("a config list naming its task", answer(json!({"configs": [{"id": "c", "taskId": "t", "url": "https://h/x"}, {"id": "d", "taskId": "t", "url": "https://h/y"}]})), false, true),
        ("a config list naming two tasks", answer(json!({"configs": [{"id": "c", "taskId": "t", "url": "https://h/x"}, "junk", {"taskId": 7}, {"taskId": "u", "url": "https://h/y"}]})), false, true),
        ("configs that are no list", answer(json!({"configs": {"taskId": "t"}, "taskId": "u"})), false, true),
        ("a token without a url", answer(json!({"task": task(json!({"token": "t"}))})), false, true),
        ("a url that is not a string", answer(json!({"configs": [{"url": {"u": 1}, "token": "t"}]})), false, true),
        ("a context id that is no alias", answer(json!({"task": task(json!({"contextId": "c-abc"}))})), false, true),
        ("an alias-like id under another key", answer(json!({"task": task(json!({"other": alias}))})), false, true),
        ("a path, not hidden", answer(json!({"task": task(json!({"note": "wrote /tmp/w/x.tf"}))})), false, true),
        ("a URL, paths hidden", answer(json!({"task": task(json!({"note": "see https://h/a/b/c"}))})), true, true),
        // What the shapes require is read alike on both passes (`facts_of` prints which
        // shapes hold): members missing, of another type, or spelled otherwise.
        // ... but the Messages and Artifacts a Task lists, and a status's Message, are checked
        // as they are read: one that fails goes to the full pass (which refuses it).
        ("history, a role unspecified", answer(json!({"task": task(json!({"history": [{"messageId": "m", "role": "ROLE_UNSPECIFIED", "parts": []}]}))})), false, false),
        ("history, a role a number", answer(json!({"task": task(json!({"history": [{"messageId": "m", "role": 1, "parts": []}]}))})), false, false),
        ("history, an empty messageId", answer(json!({"task": task(json!({"history": [{"messageId": "", "role": "ROLE_USER", "parts": []}]}))})), false, false),
        ("history, a taskId a number", answer(json!({"task": task(json!({"history": [{"messageId": "m", "role": "ROLE_USER", "parts": [], "taskId": 1}]}))})), false, false),
        ("history, parts a string", answer(json!({"task": task(json!({"history": [{"messageId": "m", "role": "ROLE_USER", "parts": "x"}]}))})), false, false),
        ("history, a list in a list", answer(json!({"task": task(json!({"history": [[]]}))})), false, false),
        ("history null", answer(json!({"task": task(json!({"history": null}))})), false, false),
        ("artifacts, parts an object", answer(json!({"task": task(json!({"artifacts": [{"artifactId": "a", "parts": {}}]}))})), false, false),
        ("history and artifacts that hold", answer(json!({"task": task(json!({"history": [{"messageId": "ROLE_USER", "role": "ROLE_AGENT", "parts": [], "contextId": "", "taskId": "t", "extra": [1]}], "artifacts": [{"artifactId": "a", "parts": [{"text": "x"}], "name": "n"}]}))})), false, true),
        ("a message without role", answer(json!({"message": {"messageId": "m", "parts": []}})), false, true),
        ("a message, role a number", answer(json!({"message": {"messageId": "m", "role": 2, "parts": []}})), false, true),
        ("a message, parts an object", answer(json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": {"text": "x"}}})), false, true),
        ("a message, parts null", answer(json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": null}})), false, true),
        ("history holding junk", answer(json!({"task": task(json!({"history": [{"messageId": "m", "role": "ROLE_USER", "parts": []}, "junk"]}))})), false, false),
        ("history that is no list", answer(json!({"task": task(json!({"history": {"messageId": "m"}}))})), false, false),
        ("an artifact without its id", answer(json!({"task": task(json!({"artifacts": [{"parts": []}]}))})), false, false),
        ("a status message without parts", answer(json!({"task": task(json!({"status": {"state": "TASK_STATE_WORKING", "message": {"messageId": "m", "role": "ROLE_AGENT"}}}))})), false, false),
        ("a state in lowercase", answer(json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "working"}}})), false, true),
        ("a timestamp that is no time", answer(json!({"task": task(json!({"status": {"state": "TASK_STATE_WORKING", "timestamp": "soon"}}))})), false, true),
        ("an artifact update, artifact a string", answer(json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "artifact": "a"}})), false, true),
        ("a config without url", answer(json!({"id": "p", "taskId": "t"})), false, true),
        ("a config, url a number", answer(json!({"id": "p", "taskId": "t", "url": 7})), false, true),
        ("configs, a page token a number", answer(json!({"configs": [], "nextPageToken": 3})), false, true),
        ("a bare config", answer(json!({"id": "p", "taskId": "t", "url": "https://h/x"})), false, true),
        ("an empty object", answer(json!({})), false, true),
        ("a result that is a list", answer(json!([{"task": task(json!({}))}])), false, true),
        ("a result that is a number", answer(json!(0)), false, true),
        ("an error", br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"/etc/x"}}"#.to_vec(), false, false),
        ("a result and an error", br#"{"jsonrpc":"2.0","id":1,"result":{},"error":null}"#.to_vec(), false, false),
        ("the result twice", br#"{"result":{"task":{"id":"a","contextId":"c"}},"result":{"task":{"id":"b","contextId":"c"}}}"#.to_vec(), false, false),
        ("no result", br#"{"jsonrpc":"2.0","id":1}"#.to_vec(), false, false),
        ("a duplicate key", br#"{"result":{"task":{"id":"a","id":"b","contextId":"c"}}}"#.to_vec(), false, false),
        ("a duplicate key deep down", br#"{"result":{"task":{"id":"a","contextId":"c","artifacts":[{"parts":[{"text":"x","text":"y"}]}]}}}"#.to_vec(), false, false),
        ("a duplicate key spelled with an escape", br#"{"result":{"task":{"id":"a","i\u0064":"b","contextId":"c"}}}"#.to_vec(), false, false),
        ("a duplicate metadata key", br#"{"result":{"task":{"id":"a","contextId":"c","metadata":{"k":1,"k":2}}}}"#.to_vec(), false, false),
        ("a denied metadata key", answer(json!({"task": task(json!({"metadata": {"iac_code": {"iac_code_api_key": "sk-live"}}}))})), false, false),
        ("a denied key, dotted", answer(json!({"task": task(json!({"metadata": {"iac_code.llm_headers": {"A": "b"}}}))})), false, false),
        ("a denied key, by prefix", answer(json!({"message": {"messageId": "m", "metadata": {"iac_code": {"alibaba_cloud_secret": "s"}}}})), false, false),
        ("deep metadata that no pattern can reach", answer(json!({"task": task(json!({"metadata": {"a": {"b": {"c": {"d": 1}}}}}))})), false, true),
        ("metadata too deep", answer(json!({"task": task(json!({"metadata": nested_meta}))})), false, false),
        ("metadata inside an array under metadata", answer(json!({"task": task(json!({"metadata": [{"metadata": {"iac_code": {"iac_code_model": "m"}}}]}))})), false, false),
        ("a push config's token", answer(json!({"configs": [{"id": "c", "url": "https://h/x", "token": "secret"}]})), false, false),
        ("a push config's token first", br#"{"result":{"token":"secret","id":"c","url":"https://h/x"}}"#.to_vec(), false, false),
        ("a push config's credentials", answer(json!({"configs": [{"url": "https://h/x", "authentication": {"scheme": "Bearer", "credentials": "s"}}]})), false, false),
        ("a push config in metadata", answer(json!({"task": task(json!({"metadata": {"cb": {"url": "https://h", "token": "s"}}}))})), false, false),
        ("an alias context id", answer(json!({"task": task(json!({"contextId": alias.clone()}))})), false, false),
        ("an alias context id in history", answer(json!({"task": task(json!({"history": [{"messageId": "m", "contextId": alias}]}))})), false, false),
        ("a path, hidden", answer(json!({"task": task(json!({"note": "wrote /tmp/w/x.tf"}))})), true, false),
        ("a task id that is a path, hidden", answer(json!({"task": task(json!({"id": "/tmp/w/t"}))})), true, false),
        ("a path in a key's value deep down", answer(json!({"task": task(json!({"artifacts": [{"parts": [{"text": "see /home/a/b"}]}]}))})), true, false),
        ("a nested response", answer(json!({"jsonrpc": "2.0", "result": {"task": {"id": "t", "contextId": "c"}}})), false, false),
        ("too deep", format!(r#"{{"result":{deep}}}"#).into_bytes(), false, false),
        ("too many keys", answer(json!({"task": task(json!({"wide": wide}))})), false, false),
        ("a key of 256 bytes", answer(json!({"task": task(json!({"k".repeat(256): 1}))})), false, true),
        ("a key longer than 256 bytes", answer(json!({"task": task(json!({"k".repeat(257): 1}))})), false, false),
        ("a duplicate key in a part", br#"{"result":{"task":{"id":"a","contextId":"c","artifacts":[{"artifactId":"x","parts":[{"text":"x","text":"y"}]}]}}}"#.to_vec(), false, false),
        ("an alias context id in a whole message", answer(json!({"task": task(json!({"history": [{"messageId": "m", "role": "ROLE_USER", "parts": [], "contextId": format!("c-{}", "ab12".repeat(8))}]}))})), false, false),
        ("a duplicate id in a status", br#"{"result":{"task":{"id":"a","contextId":"c","status":{"state":"TASK_STATE_WORKING","state":"TASK_STATE_FAILED"}}}}"#.to_vec(), false, false),
        ("not an object", br#"[{"result":1}]"#.to_vec(), false, false),
        ("trailing bytes", br#"{"result":1} x"#.to_vec(), false, false),
        ("a lone surrogate", br#"{"result":{"t":"\ud800"}}"#.to_vec(), false, false),
        ("a raw control character", b"{\"result\":{\"t\":\"a\x01b\"}}".to_vec(), false, false),
        ("invalid UTF-8", b"{\"result\":{\"t\":\"a\xffb\"}}".to_vec(), false, false),
        ("invalid UTF-8 in a dropped member", b"{\"jsonrpc\":\"2\xc80\",\"result\":{}}".to_vec(), false, false),
        ("a lone surrogate in a dropped member", br#"{"x":"\udc00","result":{}}"#.to_vec(), false, false),
        ("a number out of range in a dropped member", br#"{"x":[1e999],"result":{}}"#.to_vec(), false, false),
        ("a number out of range", br#"{"result":{"n":1e400}}"#.to_vec(), false, false),
        ("a bad escape", br#"{"result":{"t":"\q"}}"#.to_vec(), false, false),
        ("truncated", br#"{"result":{"task":{"id":"t""#.to_vec(), false, false),
        // Values counted as the full pass counts them: the response, its three keys,
        // `jsonrpc`, `id`, the array and its items (and values and keys in dropped members
        // too).
        ("values at the bound", values(MAX_VALUES - 7, ""), false, true),
        ("values past the bound", values(MAX_VALUES - 6, ""), false, false),
        ("values past the bound in a dropped member", values(MAX_VALUES - 10, r#""x":[0,0],"#), false, false),
        ("values at the bound with a dropped member", values(MAX_VALUES - 11, r#""x":[0,0],"#), false, true),
        ("keys past the bound in a dropped member", values(MAX_VALUES - 10, r#""x":{"a":0},"#), false, false),
        ("keys past the bound in the result", keyed((MAX_VALUES - 7) / 3 + 1), false, false),
        ("keys at the bound in the result", keyed((MAX_VALUES - 7) / 3), false, true),
    ];
    // What [`project`] takes besides what the scan takes: what the scan leaves to the full
    // pass only because cleaning would change it (nothing of a projected answer is relayed)...
    let cleaned = [
        "a denied metadata key",
        "a denied key, dotted",
        "a denied key, by prefix",
        "metadata too deep",
        "metadata inside an array under metadata",
        "a push config's token",
        "a push config's token first",
        "a push config's credentials",
        "a push config in metadata",
        "an alias context id",
        "a path, hidden",
        "a task id that is a path, hidden",
        "an alias context id in a whole message",
        // ... and only the keys it builds or checks are compared: not the members it skips.
        "a duplicate metadata key",
        "too many keys",
        "a key longer than 256 bytes",
        "a duplicate key in a part",
    ];
    for (case, bytes, redact_paths, taken) in rows {
        assert_eq!(compare(&bytes, redact_paths), taken, "{case}");
        let projected = project(&bytes, MAX_VALUES);
        assert_eq!(
            projected.is_some(),
            taken || cleaned.contains(&case),
            "projected: {case}"
        );
        // ... with the facts the full pass reads, once the observer has cleaned both.
        if let Some((projection, _)) = projected {
            let full = full(&bytes, &json!(1), redact_paths).expect(case);
            let mut projected = json!({"result": projection});
            clean_response(&mut projected, &policy(), redact_paths);
            let facts = facts_of(&projected["result"]);
            assert_eq!(facts, facts_of(&full["result"]), "{case}");
        }
    }
    // Past the bound the full pass refuses it too.
    let past = values(MAX_VALUES - 6, "");
    assert!(full(&past, &json!(1), false).is_none());
    assert!(full(&values(MAX_VALUES - 7, ""), &json!(1), false).is_some());
}

/// A response whose result is an array of `n` objects of one member: `3 n + 7` values in
/// all (the response, its three keys, `jsonrpc`, `id`, the array, and per object itself, its
/// key and its value).
fn keyed(n: usize) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":"a","result":[{}]}}"#,
        vec![r#"{"k":0}"#; n].join(",")
    )
    .into_bytes()
}

/// A response of `n` zeros in its result's array, `extra` members before the others.
fn values(n: usize, extra: &str) -> Vec<u8> {
    format!(
        r#"{{{extra}"jsonrpc":"2.0","id":"a","result":[{}]}}"#,
        vec!["0"; n].join(",")
    )
    .into_bytes()
}

#[test]
fn the_relayed_result_is_the_agents_bytes() {
    let p = policy();
    let bytes = br#"{"jsonrpc":"2.0","id":"x","result":{"task":{"id":"t","contextId":"c","note":"caf\u00e9"}}}"#;
    let cleaning = Cleaning {
        metadata: &p,
        redact_paths: false,
        max_values: MAX_VALUES,
    };
    let fast = scan(bytes, cleaning).expect("taken");
    assert_eq!(
        fast.result,
        r#"{"task":{"id":"t","contextId":"c","note":"caf\u00e9"}}"#
    );
    assert_eq!(
        fast.projection,
        json!({"task": {"id": "t", "contextId": "c"}})
    );
    assert_eq!(
        respond(fast.result, &json!(42)),
        br#"{"result":{"task":{"id":"t","contextId":"c","note":"caf\u00e9"}},"jsonrpc":"2.0","id":42}"#
    );
}

/// [`project`] builds the projection alone: the ids and states the registry reads, never a
/// `metadata` object (which [`scan`] builds whole to decide its redaction), nor a push
/// config's secrets; the response's own `id` as it came.
#[test]
fn the_projection_of_an_unrelayed_answer_holds_what_the_registry_reads() {
    let metadata: Value = (0..20).map(|i| (format!("k{i}"), json!([i, i]))).collect();
    let bytes = answer(json!({"task": task(json!({"metadata": metadata,
        "contextId": format!("c-{}", "ab12".repeat(8)), "note": "wrote /tmp/w/x.tf"}))}));
    let (projection, id) = project(&bytes, MAX_VALUES).expect("projected");
    assert_eq!(id, Some(json!("agent-id")));
    assert_eq!(
        projection,
        json!({"task": {"id": "6f1c7e0a-3b52", "contextId": format!("c-{}", "ab12".repeat(8)),
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-01T12:00:00.000000Z"}}})
    );
    let config = answer(
        json!({"id": "p", "taskId": "t", "url": "https://h/x", "token": "secret",
        "authentication": {"scheme": "Bearer", "credentials": "s"}}),
    );
    let (projection, _) = project(&config, MAX_VALUES).expect("projected");
    assert_eq!(
        projection,
        json!({"id": "p", "taskId": "t", "url": "https://h/x"})
    );
    // The values are bounded as the full pass bounds them, metadata's too.
    let over: Value = (0..MAX_VALUES)
        .map(|i| (format!("k{i}"), json!(i)))
        .collect();
    let over = answer(json!({"task": task(json!({"metadata": over}))}));
    assert!(project(&over, MAX_VALUES).is_none());
}

/// What the scan builds (the projection, the response's `id`, a `metadata` object for its
/// redaction check) is bounded whatever the value bound: past [`MAX_BUILT_VALUES`] values or
/// [`MAX_BUILT_BYTES`] of strings and keys, the full pass decides (and [`project`] learns
/// nothing); what it skips is not built.
#[test]
fn what_the_scan_builds_is_bounded() {
    let p = policy();
    let cleaning = Cleaning {
        metadata: &p,
        redact_paths: false,
        max_values: 1_000_000,
    };
    let zeros = |n: usize| vec![0; n];
    let keys = |n: usize| -> Value { (0..n).map(|i| (format!("k{i}"), json!(1))).collect() };
    let config = json!({"id": "c", "taskId": "t", "url": "https://h/x"});
    let big = |n: usize| "x".repeat(n);
    let at = MAX_BUILT_BYTES - 1024;
    // (case, answer, taken by the scan, projected)
    let rows: Vec<(&str, Vec<u8>, bool, bool)> = vec![
        (
            "an id of many values",
            json!({"id": zeros(MAX_BUILT_VALUES), "result": {}})
                .to_string()
                .into_bytes(),
            false,
            false,
        ),
        (
            "an id of a few values",
            json!({"id": zeros(8), "result": {}})
                .to_string()
                .into_bytes(),
            true,
            true,
        ),
        (
            "a long string id",
            json!({"id": big(MAX_BUILT_BYTES + 1), "result": {}})
                .to_string()
                .into_bytes(),
            false,
            false,
        ),
        (
            "metadata of many values",
            answer(json!({"task": task(json!({"metadata": {"a": zeros(MAX_BUILT_VALUES)}}))})),
            false,
            true,
        ),
        (
            "metadata of a few members",
            answer(json!({"task": task(json!({"metadata": keys(50)}))})),
            true,
            true,
        ),
        (
            "a metadata string within the bytes",
            answer(json!({"task": task(json!({"metadata": {"note": big(at)}}))})),
            true,
            true,
        ),
        (
            "a metadata string past the bytes",
            answer(json!({"task": task(json!({"metadata": {"note": big(MAX_BUILT_BYTES)}}))})),
            false,
            true,
        ),
        (
            "a task id past the bytes",
            answer(json!({"task": task(json!({"id": big(MAX_BUILT_BYTES)}))})),
            false,
            false,
        ),
        (
            "a large text, skipped",
            answer(
                json!({"task": task(json!({"artifacts": [{"artifactId": "a", "parts": [{"text": big(4 * MAX_BUILT_BYTES)}]}]}))}),
            ),
            true,
            true,
        ),
        (
            "many configs",
            answer(json!({"configs": vec![config.clone(); MAX_BUILT_VALUES / 4]})),
            false,
            false,
        ),
        (
            "a few configs",
            answer(json!({"configs": vec![config; 16]})),
            true,
            true,
        ),
    ];
    for (case, bytes, taken, projected) in rows {
        assert_eq!(scan(&bytes, cleaning).is_some(), taken, "{case}");
        assert_eq!(
            project(&bytes, 1_000_000).is_some(),
            projected,
            "projected: {case}"
        );
    }
}
