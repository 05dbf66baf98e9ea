//! All 11 A2A 1.0 methods through the proxy, over real TLS with HTTP/1.1 and HTTP/2, against
//! the embedded engine and a standalone engine over a real socket.

mod common;

use common::*;
use http::StatusCode;
use serde_json::{json, Value};

fn message(text: &str) -> Value {
    json!({"message": {
        "messageId": format!("m-{}", a2a_edge::policy::random_token()),
        "role": "ROLE_USER",
        "parts": [{"text": text}]
    }})
}

async fn proxies() -> (Vec<Proxy>, tokio::sync::oneshot::Sender<()>) {
    let (engine_url, stop) = start_engine().await;
    let embedded = Proxy::start(ProxyOpts::default()).await;
    let standalone = Proxy::start(ProxyOpts {
        upstream_url: engine_url,
        ..Default::default()
    })
    .await;
    (vec![embedded, standalone], stop)
}

#[tokio::test]
async fn every_method_works_through_the_proxy() {
    let (proxies, _stop) = proxies().await;
    for proxy in &proxies {
        for proto in PROTOS {
            let mut c = proxy.client(proto).await;

            // SendMessage: a normal turn ends in INPUT_REQUIRED with the echo.
            let v = c.rpc("SendMessage", message("hello")).await;
            let task = &v["result"]["task"];
            assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{v}");
            let task_id = task["id"].as_str().unwrap().to_string();
            let context_id = task["contextId"].as_str().unwrap().to_string();
            assert!(v.to_string().contains("hello"));

            // SendStreamingMessage: task first, several events, final state last.
            let resp = c
                .rpc_stream("SendStreamingMessage", message("[[chunks:4]] streamed"))
                .await;
            assert_eq!(resp.status(), StatusCode::OK);
            assert!(resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream"));
            let events = EventReader::new(resp).rest().await;
            assert!(events.len() >= 6, "{events:?}");
            assert!(events[0].1["result"]["task"].is_object(), "{:?}", events[0]);
            let last = &events.last().unwrap().1;
            assert_eq!(
                last["result"]["statusUpdate"]["status"]["state"],
                "TASK_STATE_INPUT_REQUIRED"
            );
            assert!(events.iter().all(|(_, e)| e["id"] == "s1"));

            // GetTask, with historyLength.
            let v = c
                .rpc("GetTask", json!({"id": task_id, "historyLength": 1}))
                .await;
            assert_eq!(v["result"]["id"], task_id.as_str());
            assert!(v["result"]["history"].as_array().map_or(0, |h| h.len()) <= 1);
            let v = c.rpc("GetTask", json!({"id": "no-such-task"})).await;
            assert_eq!(v["error"]["code"], -32001);

            // ListTasks with a context filter.
            let v = c
                .rpc(
                    "ListTasks",
                    json!({"contextId": context_id, "pageSize": 10}),
                )
                .await;
            let tasks = v["result"]["tasks"].as_array().unwrap();
            assert_eq!(tasks.len(), 1, "{v}");
            assert_eq!(v["result"]["nextPageToken"], "");
            let v = c.rpc("ListTasks", json!({"pageSize": 0})).await;
            assert_eq!(v["error"]["code"], -32602);

            // CancelTask on a finished task is refused.
            let v = c.rpc("CancelTask", json!({"id": task_id})).await;
            assert_eq!(v["error"]["code"], -32002, "{v}");

            // SubscribeToTask on a task that is not running: not found, as plain JSON.
            let v = c.rpc("SubscribeToTask", json!({"id": task_id})).await;
            assert_eq!(v["error"]["code"], -32001, "{v}");

            // Push notification config methods: not supported by the engine yet.
            for (m, p) in [
                (
                    "CreateTaskPushNotificationConfig",
                    json!({"taskId": task_id, "url": "https://hooks.example.com/x"}),
                ),
                (
                    "GetTaskPushNotificationConfig",
                    json!({"taskId": task_id, "id": "x"}),
                ),
                (
                    "ListTaskPushNotificationConfigs",
                    json!({"taskId": task_id}),
                ),
                (
                    "DeleteTaskPushNotificationConfig",
                    json!({"taskId": task_id, "id": "x"}),
                ),
            ] {
                let v = c.rpc(m, p).await;
                assert_eq!(v["error"]["code"], -32003, "{m}: {v}");
            }

            // GetExtendedAgentCard.
            let v = c.rpc("GetExtendedAgentCard", json!({})).await;
            assert!(v["result"]["name"].is_string(), "{v}");
        }
    }
}

#[tokio::test]
async fn the_first_event_arrives_before_the_engine_has_finished() {
    let (proxies, _stop) = proxies().await;
    for proxy in &proxies {
        for proto in PROTOS {
            let mut c = proxy.client(proto).await;
            let resp = c
                .rpc_stream(
                    "SendStreamingMessage",
                    message("[[slow:400]] [[chunks:5]] slowly"),
                )
                .await;
            let mut events = EventReader::new(resp);
            let (_, first) = events.next().await.unwrap();
            let task_id = first["result"]["task"]["id"].as_str().unwrap().to_string();
            // While the stream is open, the task is still running on the engine: the event was
            // relayed as it happened, not after the turn.
            let mut other = proxy.client(Proto::H1).await;
            let v = other.rpc("GetTask", json!({"id": task_id})).await;
            let state = v["result"]["status"]["state"].as_str().unwrap().to_string();
            assert!(
                state == "TASK_STATE_SUBMITTED" || state == "TASK_STATE_WORKING",
                "{state}"
            );
            let rest = events.rest().await;
            assert_eq!(
                rest.last().unwrap().1["result"]["statusUpdate"]["status"]["state"],
                "TASK_STATE_INPUT_REQUIRED"
            );
        }
    }
}

#[tokio::test]
async fn a_subscriber_sees_the_cancel_of_a_running_task() {
    let (proxies, _stop) = proxies().await;
    for proxy in &proxies {
        for proto in PROTOS {
            let mut c = proxy.client(proto).await;
            let resp = c
                .rpc_stream("SendStreamingMessage", message("[[wait]] hold on"))
                .await;
            let mut origin = EventReader::new(resp);
            let (_, first) = origin.next().await.unwrap();
            let task_id = first["result"]["task"]["id"].as_str().unwrap().to_string();

            let mut sub_client = proxy.client(proto).await;
            let resp = sub_client
                .rpc_stream("SubscribeToTask", json!({"id": task_id}))
                .await;
            assert_eq!(resp.status(), StatusCode::OK);
            let mut sub = EventReader::new(resp);
            let (_, snapshot) = sub.next().await.unwrap();
            assert_eq!(snapshot["result"]["task"]["id"], task_id.as_str());

            let mut canceller = proxy.client(Proto::H2).await;
            let v = canceller.rpc("CancelTask", json!({"id": task_id})).await;
            assert_eq!(v["result"]["status"]["state"], "TASK_STATE_CANCELED", "{v}");

            for reader in [&mut sub, &mut origin] {
                let rest = reader.rest().await;
                let last = &rest.last().unwrap().1;
                assert_eq!(
                    last["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_CANCELED",
                    "{rest:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_missing_version_header_is_refused_at_the_edge() {
    let (proxies, _stop) = proxies().await;
    for proxy in &proxies {
        let mut c = proxy.client(Proto::H1).await;
        let body =
            json!({"jsonrpc": "2.0", "id": 9, "method": "ListTasks", "params": {}}).to_string();
        let (status, _, rb) = c
            .request(
                "POST",
                "/",
                &[
                    ("authorization", "Bearer test-token-0123456789"),
                    ("content-type", "application/json"),
                ],
                body,
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        let v: Value = serde_json::from_slice(&rb).unwrap();
        assert_eq!(v["error"]["code"], -32009, "{v}");
        assert_eq!(
            v["error"]["data"][0]["reason"], "version.unsupported",
            "{v}"
        );
        assert_eq!(v["id"], 9);
    }
}

#[tokio::test]
async fn shutdown_drains_an_open_stream() {
    let mut proxy = Proxy::start(ProxyOpts::default()).await;
    let mut c = proxy.client(Proto::H1).await;
    let resp = c
        .rpc_stream(
            "SendStreamingMessage",
            message("[[slow:200]] [[chunks:4]] draining"),
        )
        .await;
    let mut events = EventReader::new(resp);
    assert!(events.next().await.is_some());
    let stopping = async {
        proxy.stop().await;
    };
    let reading = async { events.rest().await };
    let ((), rest) = tokio::join!(stopping, reading);
    assert_eq!(
        rest.last().unwrap().1["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED",
        "the stream was cut: {rest:?}"
    );
    // And the listener is gone.
    assert!(tokio::net::TcpStream::connect(proxy.addr).await.is_err());
}

#[tokio::test]
async fn the_embedded_engine_keeps_its_tasks_across_a_reload() {
    let proxy = Proxy::start(ProxyOpts::default()).await;
    let mut c = proxy.client(Proto::H1).await;
    let v = c.rpc("SendMessage", message("[[input]] remember me")).await;
    let task = v["result"]["task"]["id"].as_str().unwrap().to_string();
    proxy
        .reload(&policy_text(proxy.dir.path(), &ProxyOpts::default()))
        .await;
    // The same engine answers after the reload: the task is still there, still the caller's.
    let v = c.rpc("GetTask", json!({"id": task})).await;
    assert_eq!(v["result"]["id"], task.as_str(), "{v}");
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
}

/// ListTasks chooses its page by what the edge last learned of each task, then reads each
/// afresh from the agent: a task that moved on meanwhile (here: answered at once with
/// `returnImmediately`, then the agent went on to INPUT_REQUIRED) is not listed under the
/// state it left, and is listed under the one it is in (the fresh read taught the edge).
#[tokio::test]
async fn list_tasks_holds_each_fresh_task_to_the_filter() {
    let (proxies, _stop) = proxies().await;
    for proxy in &proxies {
        let mut c = proxy.client(Proto::H2).await;
        let mut m = message("[[slow:50]] hello");
        m["configuration"] = json!({"returnImmediately": true});
        let v = c.rpc("SendMessage", m).await;
        let task = &v["result"]["task"];
        let first = task["status"]["state"].as_str().unwrap().to_string();
        assert_ne!(first, "TASK_STATE_INPUT_REQUIRED", "{v}");
        let id = task["id"].as_str().unwrap().to_string();
        // The agent finishes the turn.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let v = c.rpc("GetTask", json!({"id": id})).await;
            if v["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{v}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        // GetTask taught the edge; to see the page's own re-check, a second task is left
        // unread until the listing.
        let mut m = message("[[slow:50]] again");
        m["configuration"] = json!({"returnImmediately": true});
        let v = c.rpc("SendMessage", m).await;
        let second = v["result"]["task"]["id"].as_str().unwrap().to_string();
        // (no way to wait for the agent without teaching the edge: a wide margin over the
        // turn's 150 ms)
        tokio::time::sleep(std::time::Duration::from_millis(2000)).await;
        let v = c.rpc("ListTasks", json!({"status": first})).await;
        let listed: Vec<&Value> = v["result"]["tasks"].as_array().unwrap().iter().collect();
        assert!(
            listed
                .iter()
                .all(|t| t["status"]["state"] == first.as_str()),
            "every listed task is in the state asked for: {v}"
        );
        assert!(!listed.iter().any(|t| t["id"] == second.as_str()), "{v}");
        let v = c
            .rpc("ListTasks", json!({"status": "TASK_STATE_INPUT_REQUIRED"}))
            .await;
        let ids: Vec<&str> = v["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["id"].as_str())
            .collect();
        assert!(
            ids.contains(&second.as_str()) && ids.contains(&id.as_str()),
            "{v}"
        );
    }
}
