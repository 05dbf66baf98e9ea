//! Three edge replicas on one real `redis-server` (started by the test on a free port) in
//! front of one agent (a standalone engine): a caller's tasks and contexts are one fleet-wide.
//! A task created through one replica is read, continued and canceled through the others; a
//! stream started on one is subscribed to from another and keeps its context busy on all;
//! ListTasks pages are the same from every replica and a page token of one continues on
//! another; racing turns on one context have exactly one winner; a restarted replica keeps
//! every caller's tasks; a replica killed in the middle of a turn frees its context after the
//! busy lease; a lease whose taking Redis has not answered (the caller left, or the write timed
//! out) is released behind it.

mod common;

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use http_body_util::BodyExt;
use serde_json::{json, Value};

const SECRET_VAR: &str = "A2A_EDGE_TEST_REPLICA_SECRET";

fn state_table(redis: &RedisServer, extra: &str) -> String {
    std::env::set_var(SECRET_VAR, "a-shared-page-token-secret-of-32-bytes-or-more");
    format!(
        "[state]\nbackend = \"redis\"\nredis_url = \"{}\"\nkey_prefix = \"r:\"\ntimeout_ms = 500\npage_token_secret_env = \"{SECRET_VAR}\"\n{extra}",
        redis.url()
    )
}

fn opts(redis: &RedisServer, agent: &str, extra_state: &str) -> ProxyOpts {
    ProxyOpts {
        upstream_url: agent.to_string(),
        extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
        extra_policy: format!("{MALLORY_ENTRY}{}", state_table(redis, extra_state)),
        ..Default::default()
    }
}

async fn replicas(redis: &RedisServer, agent: &str, n: usize) -> Vec<Proxy> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(Proxy::start(opts(redis, agent, "")).await);
    }
    out
}

fn reason(v: &Value) -> String {
    v["error"]["data"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A stream's events, its first read: the task it names.
async fn stream_and_task(resp: http::Response<hyper::body::Incoming>) -> (EventReader, String) {
    let mut events = EventReader::new(resp);
    let (_, first) = events.next().await.expect("a first event");
    let task = first["result"]["task"]["id"]
        .as_str()
        .or(first["result"]["statusUpdate"]["taskId"].as_str())
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    (events, task)
}

/// Sends Alice's message on `context` until a turn on it is admitted (within 5 s).
async fn until_free(c: &mut Client, context: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let v = rpc_as(
            c,
            ALICE,
            "SendMessage",
            message("[[input]] next", json!({"contextId": context})),
        )
        .await;
        if v.get("result").is_some() {
            return;
        }
        assert!(Instant::now() < deadline, "context still busy: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_task_is_one_fleet_wide() {
    let redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    let r = replicas(&redis, &agent, 3).await;
    let mut c1 = r[0].client(Proto::H2).await;
    let mut c2 = r[1].client(Proto::H1).await;
    let mut c3 = r[2].client(Proto::H2).await;
    let v = rpc_as(
        &mut c1,
        ALICE,
        "SendMessage",
        message("[[input]] plan", json!({"contextId": "ctx-a"})),
    )
    .await;
    let task = v["result"]["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(v["result"]["task"]["contextId"], "ctx-a", "{v}");
    // Read through replica 2: the same task, in the caller's own context id.
    let v = rpc_as(&mut c2, ALICE, "GetTask", json!({"id": task})).await;
    assert_eq!(v["result"]["id"], task.as_str(), "{v}");
    assert_eq!(v["result"]["contextId"], "ctx-a", "{v}");
    // Someone else gets what a task that does not exist gets, on every replica.
    let absent = rpc_as(&mut c2, MALLORY, "GetTask", json!({"id": "no-such-task"})).await;
    for c in [&mut c1, &mut c2, &mut c3] {
        let v = rpc_as(c, MALLORY, "GetTask", json!({"id": task})).await;
        assert_eq!(v["error"], absent["error"], "{v}");
        let v = rpc_as(c, MALLORY, "CancelTask", json!({"id": task})).await;
        assert_eq!(v["error"]["code"], -32001, "{v}");
    }
    // Continued through replica 3, by task id alone and by context id: the same context.
    let v = rpc_as(
        &mut c3,
        ALICE,
        "SendMessage",
        message("[[input]] more", json!({"taskId": task})),
    )
    .await;
    assert_eq!(v["result"]["task"]["contextId"], "ctx-a", "{v}");
    let v = rpc_as(
        &mut c2,
        ALICE,
        "SendMessage",
        message(
            "[[input]] again",
            json!({"contextId": "ctx-a", "taskId": task}),
        ),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], task.as_str(), "{v}");
    // Mallory naming her context id gets a context of his own, through any replica.
    let v = rpc_as(
        &mut c2,
        MALLORY,
        "SendMessage",
        message("[[input]] join", json!({"contextId": "ctx-a"})),
    )
    .await;
    assert_eq!(v["result"]["task"]["contextId"], "ctx-a", "{v}");
    assert_ne!(v["result"]["task"]["id"], task.as_str(), "{v}");
    assert!(!v.to_string().contains("plan"), "her history leaked: {v}");
    // A task left working through replica 1, canceled through replica 3, seen canceled
    // through replica 2.
    let mut hold = message("[[wait]] hold", json!({"contextId": "ctx-a"}));
    hold["configuration"] = json!({"returnImmediately": true});
    let v = rpc_as(&mut c1, ALICE, "SendMessage", hold).await;
    let working = v["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string();
    let v = rpc_as(&mut c3, ALICE, "CancelTask", json!({"id": working})).await;
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_CANCELED", "{v}");
    assert_eq!(v["result"]["contextId"], "ctx-a", "{v}");
    let v = rpc_as(&mut c2, ALICE, "GetTask", json!({"id": working})).await;
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_CANCELED", "{v}");
}

#[tokio::test]
async fn a_replica_beside_redis_shares_the_state_through_its_unix_socket() {
    let redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    let tcp = Proxy::start(opts(&redis, &agent, "")).await;
    let mut o = opts(&redis, &agent, "");
    o.extra_policy = o.extra_policy.replace(&redis.url(), &redis.unix_url());
    assert!(
        o.extra_policy.contains("redis_url = \"unix:///"),
        "{}",
        o.extra_policy
    );
    let unix = Proxy::start(o).await;
    let mut cu = unix.client(Proto::H2).await;
    let mut ct = tcp.client(Proto::H1).await;
    // Created through the socket, read and continued over TCP; then back.
    let v = rpc_as(
        &mut cu,
        ALICE,
        "SendMessage",
        message("[[input]] plan", json!({"contextId": "ctx-u"})),
    )
    .await;
    let task = v["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string();
    let v = rpc_as(&mut ct, ALICE, "GetTask", json!({"id": task})).await;
    assert_eq!(v["result"]["contextId"], "ctx-u", "{v}");
    let v = rpc_as(&mut ct, MALLORY, "GetTask", json!({"id": task})).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    let v = rpc_as(
        &mut ct,
        ALICE,
        "SendMessage",
        message("[[input]] more", json!({"taskId": task})),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], task.as_str(), "{v}");
    let v = rpc_as(&mut cu, ALICE, "ListTasks", json!({"contextId": "ctx-u"})).await;
    assert_eq!(v["result"]["tasks"][0]["id"], task.as_str(), "{v}");
    let v = rpc_as(&mut cu, MALLORY, "GetTask", json!({"id": task})).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    // The socket replica's connections are Redis's Unix-socket clients.
    let socket = redis.socket().display().to_string();
    let clients = redis.command("CLIENT LIST");
    assert!(
        clients
            .lines()
            .any(|l| l.contains(&format!("laddr={socket}"))),
        "{clients}"
    );
}

#[tokio::test]
async fn a_stream_on_one_replica_is_followed_and_guarded_on_the_others() {
    let redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    let r = replicas(&redis, &agent, 3).await;
    let mut c1 = r[0].client(Proto::H2).await;
    let resp = c1
        .rpc_stream(
            "SendStreamingMessage",
            message(
                "[[slow:150]] [[chunks:8]] stream",
                json!({"contextId": "ctx-s"}),
            ),
        )
        .await;
    let (mut events, task) = stream_and_task(resp).await;
    // While it streams, the context is busy on every replica...
    let mut c2 = r[1].client(Proto::H1).await;
    let v = rpc_as(
        &mut c2,
        ALICE,
        "SendMessage",
        message("cut in", json!({"contextId": "ctx-s"})),
    )
    .await;
    assert_eq!(reason(&v), "context.busy", "{v}");
    // ... and the stream is followed from replica 3.
    let mut c3 = r[2].client(Proto::H2).await;
    let resp = c3.rpc_stream("SubscribeToTask", json!({"id": task})).await;
    let seen = EventReader::new(resp).rest().await;
    assert!(!seen.is_empty());
    for (_, e) in &seen {
        assert!(e.get("error").is_none(), "{e}");
        let ctx = e["result"]["task"]["contextId"]
            .as_str()
            .or(e["result"]["statusUpdate"]["contextId"].as_str())
            .or(e["result"]["artifactUpdate"]["contextId"].as_str());
        assert_eq!(ctx, Some("ctx-s"), "{e}");
    }
    let rest = events.rest().await;
    assert!(
        rest.iter().all(|(_, e)| e.get("error").is_none()),
        "{rest:?}"
    );
    // A stream on a context the agent creates holds it busy everywhere as well, from its
    // first event on.
    let resp = c1
        .rpc_stream(
            "SendStreamingMessage",
            message("[[slow:150]] [[chunks:6]] new context", json!({})),
        )
        .await;
    let mut fresh = EventReader::new(resp);
    let (_, first) = fresh.next().await.expect("a first event");
    let created = first["result"]["task"]["contextId"]
        .as_str()
        .or(first["result"]["statusUpdate"]["contextId"].as_str())
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    let v = rpc_as(
        &mut c2,
        ALICE,
        "SendMessage",
        message("cut in", json!({"contextId": created})),
    )
    .await;
    assert_eq!(reason(&v), "context.busy", "{v}");
    fresh.rest().await;
    // Once the turn has ended, the context is free on every replica again.
    until_free(&mut c2, "ctx-s").await;
}

/// A follow-up (a message on the running turn's own task, which the agent queues) holds the
/// context on every replica after the turn it follows has ended: a new turn on the context
/// through a third replica is `context.busy` until the follow-up has ended too, as with the
/// memory registry. Before, the follow-up held nothing in Redis: the first turn's end freed
/// the context while the agent still worked on the follow-up.
#[tokio::test]
async fn a_follow_up_through_another_replica_keeps_the_context_busy() {
    let redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    let r = replicas(&redis, &agent, 3).await;
    let mut c1 = r[0].client(Proto::H2).await;
    let resp = c1
        .rpc_stream(
            "SendStreamingMessage",
            message(
                "[[slow:100]] [[chunks:6]] first",
                json!({"contextId": "ctx-f"}),
            ),
        )
        .await;
    let (mut first, task) = stream_and_task(resp).await;
    // The follow-up, through replica 2: the agent queues it behind the running turn.
    let mut c2 = r[1].client(Proto::H2).await;
    let follow = message(
        "[[slow:100]] [[chunks:12]] follow",
        json!({"contextId": "ctx-f", "taskId": task}),
    );
    let follow_up = tokio::spawn(async move {
        let resp = c2.rpc_stream("SendStreamingMessage", follow).await;
        EventReader::new(resp).rest().await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rest = first.rest().await;
    assert!(
        rest.iter().all(|(_, e)| e.get("error").is_none()),
        "{rest:?}"
    );
    // The first turn has ended (its lease released); the follow-up runs.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut c3 = r[2].client(Proto::H1).await;
    let v = rpc_as(
        &mut c3,
        ALICE,
        "SendMessage",
        message("cut in", json!({"contextId": "ctx-f"})),
    )
    .await;
    assert_eq!(reason(&v), "context.busy", "{v}");
    let events = follow_up.await.unwrap();
    assert!(
        !events.is_empty() && events.iter().all(|(_, e)| e.get("error").is_none()),
        "{events:?}"
    );
    // Once the follow-up has ended too, the context is free on every replica again.
    until_free(&mut c3, "ctx-f").await;
}

#[tokio::test]
async fn list_pages_are_the_same_on_every_replica_and_tokens_travel() {
    let redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    let r = replicas(&redis, &agent, 3).await;
    let mut c: Vec<Client> = Vec::new();
    for p in &r {
        c.push(p.client(Proto::H2).await);
    }
    let mut created = HashSet::new();
    for i in 0..7 {
        let v = rpc_as(
            &mut c[i % 3],
            ALICE,
            "SendMessage",
            message(
                &format!("[[input]] t{i}"),
                json!({"contextId": format!("ctx-{}", i % 2)}),
            ),
        )
        .await;
        created.insert(v["result"]["task"]["id"].as_str().unwrap().to_string());
    }
    rpc_as(
        &mut c[1],
        MALLORY,
        "SendMessage",
        message("[[input]] his", json!({})),
    )
    .await;
    // The whole listing, from each replica: identical.
    let full: Vec<Value> = {
        let mut all = Vec::new();
        for client in c.iter_mut() {
            let v = rpc_as(client, ALICE, "ListTasks", json!({"pageSize": 100})).await;
            assert_eq!(v["result"]["totalSize"], 7, "{v}");
            let ids: Vec<Value> = v["result"]["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].clone())
                .collect();
            all.push(ids);
        }
        assert_eq!(all[0], all[1]);
        assert_eq!(all[1], all[2]);
        all.remove(0)
    };
    let ids: HashSet<String> = full
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, created);
    // Paged 3 at a time, each page from the next replica: the same order, no gap, no duplicate.
    let mut paged = Vec::new();
    let mut token = String::new();
    for k in 0.. {
        let v = rpc_as(
            &mut c[k % 3],
            ALICE,
            "ListTasks",
            if token.is_empty() {
                json!({"pageSize": 3})
            } else {
                json!({"pageSize": 3, "pageToken": token})
            },
        )
        .await;
        for t in v["result"]["tasks"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
        {
            paged.push(t["id"].clone());
        }
        token = v["result"]["nextPageToken"].as_str().unwrap().to_string();
        if token.is_empty() {
            break;
        }
        assert!(k < 5, "too many pages");
    }
    assert_eq!(paged, full);
    // A context filter, by the caller's own context id, on any replica.
    for client in c.iter_mut() {
        let v = rpc_as(client, ALICE, "ListTasks", json!({"contextId": "ctx-1"})).await;
        assert_eq!(v["result"]["totalSize"], 3, "{v}");
        for t in v["result"]["tasks"].as_array().unwrap() {
            assert_eq!(t["contextId"], "ctx-1", "{t}");
        }
    }
    // A status filter.
    let v = rpc_as(
        &mut c[2],
        ALICE,
        "ListTasks",
        json!({"status": "TASK_STATE_INPUT_REQUIRED"}),
    )
    .await;
    assert_eq!(v["result"]["totalSize"], 7, "{v}");
    let v = rpc_as(
        &mut c[2],
        ALICE,
        "ListTasks",
        json!({"status": "TASK_STATE_COMPLETED"}),
    )
    .await;
    assert_eq!(v["result"]["totalSize"], 0, "{v}");
    // A context and a status together (an index of their own): a task that leaves a state
    // leaves that state's listing of its context, on every replica.
    let v = rpc_as(&mut c[0], ALICE, "ListTasks", json!({"contextId": "ctx-1"})).await;
    let done = v["result"]["tasks"][0]["id"].as_str().unwrap().to_string();
    let v = rpc_as(
        &mut c[1],
        ALICE,
        "SendMessage",
        message("[[complete]] done", json!({"taskId": done})),
    )
    .await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    for (status, total) in [
        ("TASK_STATE_INPUT_REQUIRED", 2),
        ("TASK_STATE_COMPLETED", 1),
        ("TASK_STATE_WORKING", 0),
    ] {
        for client in c.iter_mut() {
            let v = rpc_as(
                client,
                ALICE,
                "ListTasks",
                json!({"contextId": "ctx-1", "status": status}),
            )
            .await;
            assert_eq!(v["result"]["totalSize"], total, "{status}: {v}");
            let tasks = v["result"]["tasks"].as_array().unwrap();
            assert_eq!(tasks.len(), total, "{v}");
            for t in tasks {
                assert_eq!(t["contextId"], "ctx-1", "{t}");
                assert_eq!(t["status"]["state"], status, "{t}");
                assert_eq!(
                    t["id"] == done.as_str(),
                    status == "TASK_STATE_COMPLETED",
                    "{t}"
                );
            }
        }
    }
    let v = rpc_as(
        &mut c[2],
        ALICE,
        "ListTasks",
        json!({"contextId": "ctx-0", "status": "TASK_STATE_COMPLETED"}),
    )
    .await;
    assert_eq!(v["result"]["totalSize"], 0, "{v}");
    // Mallory sees his one task only; Alice's token is not his.
    let v = rpc_as(&mut c[0], MALLORY, "ListTasks", json!({})).await;
    assert_eq!(v["result"]["totalSize"], 1, "{v}");
    let v = rpc_as(&mut c[0], ALICE, "ListTasks", json!({"pageSize": 1})).await;
    let hers = v["result"]["nextPageToken"].as_str().unwrap().to_string();
    let v = rpc_as(&mut c[1], MALLORY, "ListTasks", json!({"pageToken": hers})).await;
    assert_eq!(reason(&v), "list.page_token", "{v}");
    // statusTimestampAfter: only what changed since, from any replica (an offset is fine).
    tokio::time::sleep(Duration::from_millis(20)).await;
    let cut = a2a_edge::time::now_micros();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut newer = HashSet::new();
    for client in c.iter_mut().take(2) {
        let v = rpc_as(
            client,
            ALICE,
            "SendMessage",
            message("[[input]] later", json!({})),
        )
        .await;
        newer.insert(v["result"]["task"]["id"].as_str().unwrap().to_string());
    }
    let stamp = a2a_edge::time::format_rfc3339(cut).replace('Z', "+00:00");
    for client in c.iter_mut() {
        let v = rpc_as(
            client,
            ALICE,
            "ListTasks",
            json!({"statusTimestampAfter": stamp}),
        )
        .await;
        assert_eq!(v["result"]["totalSize"], 2, "{v}");
        let got: HashSet<String> = v["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(got, newer);
    }
    // The bound is inclusive (proto: "greater than or equal to"): the bound set to the
    // newest task's own status timestamp lists that task.
    let mut stamped = Vec::new();
    for id in &newer {
        let v = rpc_as(&mut c[2], ALICE, "GetTask", json!({"id": id})).await;
        let ts = v["result"]["status"]["timestamp"]
            .as_str()
            .unwrap()
            .to_string();
        stamped.push((a2a_edge::time::parse_rfc3339(&ts).unwrap(), ts, id.clone()));
    }
    stamped.sort();
    let (_, newest_ts, newest) = stamped.pop().unwrap();
    for client in c.iter_mut() {
        let v = rpc_as(
            client,
            ALICE,
            "ListTasks",
            json!({"statusTimestampAfter": newest_ts}),
        )
        .await;
        assert_eq!(v["result"]["totalSize"], 1, "{v}");
        assert_eq!(v["result"]["tasks"][0]["id"], newest.as_str(), "{v}");
    }
}

/// An agent that sends no status timestamps: every task of the caller ties on one (0).
/// Paging through them reads each page's tasks once, by rank after the cursor's task: the
/// ties already listed are not read again on every later page (which made paging through
/// many such tasks quadratic in Redis, one thread for every replica).
#[tokio::test]
async fn paging_through_tasks_tied_on_their_timestamp_reads_each_page_once() {
    let redis = RedisServer::start();
    let up = RecordingUpstream::start(Reply::Untimed).await;
    let mut o = opts(&redis, &up.url, "");
    o.extra_policy.push_str(
        "[limits]\nrequests_per_second = 100000\nburst = 100000\nclient_ip_requests_per_second = 100000\nclient_ip_burst = 100000\n",
    );
    let p = Proxy::start(o).await;
    let mut c = p.client(Proto::H1).await;
    let mut created = HashSet::new();
    for _ in 0..150 {
        let v = rpc_as(&mut c, ALICE, "SendMessage", message("hi", json!({}))).await;
        let id = v["result"]["task"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{v}"));
        created.insert(id.to_string());
    }
    assert_eq!(created.len(), 150);
    for params in [json!({}), json!({"contextId": "ctx-untimed"})] {
        let (mut listed, mut token, mut pages) = (Vec::new(), String::new(), 0);
        loop {
            let mut q = params.clone();
            q["pageSize"] = json!(4);
            if !token.is_empty() {
                q["pageToken"] = json!(token);
            }
            assert_eq!(redis.command("CONFIG RESETSTAT"), "+OK");
            let v = rpc_as(&mut c, ALICE, "ListTasks", q).await;
            assert_eq!(v["result"]["totalSize"], 150, "{v}");
            let reads = redis.calls("zrevrange") + redis.calls("zrevrangebyscore");
            assert!(reads <= 1, "page {pages}: {reads} range reads");
            for t in v["result"]["tasks"].as_array().unwrap() {
                listed.push(
                    t["id"]
                        .as_str()
                        .unwrap_or_else(|| panic!("{t}"))
                        .to_string(),
                );
            }
            token = v["result"]["nextPageToken"].as_str().unwrap().to_string();
            pages += 1;
            if token.is_empty() {
                break;
            }
        }
        assert_eq!(pages, 38, "{params}");
        assert_eq!(listed.len(), 150, "{params}: no task twice");
        assert_eq!(listed.iter().cloned().collect::<HashSet<_>>(), created);
    }
    // The cursor's task leaves the index between two pages (as an expired one does when a
    // listing meets it): the next page goes on after it all the same, nothing twice.
    let v = rpc_as(&mut c, ALICE, "ListTasks", json!({"pageSize": 4})).await;
    let first: Vec<String> = v["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    let index = redis.command("KEYS r:lt:*");
    assert!(
        index.starts_with("r:lt:") && !index.contains('\n'),
        "{index}"
    );
    assert_eq!(redis.command(&format!("ZREM {index} {}", first[3])), ":1");
    let mut rest = Vec::new();
    let mut token = v["result"]["nextPageToken"].as_str().unwrap().to_string();
    while !token.is_empty() {
        let v = rpc_as(
            &mut c,
            ALICE,
            "ListTasks",
            json!({"pageSize": 4, "pageToken": token}),
        )
        .await;
        assert_eq!(v["result"]["totalSize"], 149, "{v}");
        for t in v["result"]["tasks"].as_array().unwrap() {
            rest.push(t["id"].as_str().unwrap().to_string());
        }
        token = v["result"]["nextPageToken"].as_str().unwrap().to_string();
    }
    assert_eq!(rest.len(), 146);
    let all: HashSet<String> = first.iter().chain(&rest).cloned().collect();
    assert_eq!(all, created);
}

/// A ListTasks page reads the tasks on it, whatever the filter: Redis is never made to walk
/// a context's (or a caller's) tasks to count them or to find a state's (it is one thread
/// for every replica; a walk of a big context blocked them all). Counted in Redis's own
/// command statistics: the reads of task records are the page's, not the context's 40.
#[tokio::test]
async fn a_list_page_reads_only_its_own_tasks_in_redis() {
    let redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    let r = replicas(&redis, &agent, 1).await;
    let mut c = r[0].client(Proto::H1).await;
    for i in 0..40 {
        let text = if i % 10 == 0 {
            "[[input]] ask"
        } else {
            "[[complete]] done"
        };
        let v = rpc_as(
            &mut c,
            ALICE,
            "SendMessage",
            message(text, json!({"contextId": "ctx-big"})),
        )
        .await;
        assert!(v["result"]["task"]["id"].is_string(), "{v}");
    }
    for (params, total) in [
        (json!({"contextId": "ctx-big"}), 40),
        (
            json!({"contextId": "ctx-big", "status": "TASK_STATE_INPUT_REQUIRED"}),
            4,
        ),
        (
            json!({"contextId": "ctx-big", "status": "TASK_STATE_COMPLETED"}),
            36,
        ),
        (
            json!({"contextId": "ctx-big", "status": "TASK_STATE_WORKING"}),
            0,
        ),
        (json!({"status": "TASK_STATE_INPUT_REQUIRED"}), 4),
        (json!({}), 40),
    ] {
        let mut params = params;
        params["pageSize"] = json!(3);
        assert_eq!(redis.command("CONFIG RESETSTAT"), "+OK");
        let v = rpc_as(&mut c, ALICE, "ListTasks", params.clone()).await;
        assert_eq!(v["result"]["totalSize"], total, "{params}: {v}");
        let listed = v["result"]["tasks"].as_array().unwrap().len();
        assert_eq!(listed, total.min(3), "{params}: {v}");
        // The page and one more (is there a next page?), then what listing a task reads
        // of it: well under the 40 of a walk.
        let reads = redis.calls("hmget");
        assert!(
            reads <= 12,
            "{params}: {reads} task reads for a page of {listed}"
        );
    }
    // A replica that never saw them lists them with one script, and reading the listed
    // tasks (from the agent, by the listing, then each by itself) asks Redis nothing more:
    // what the listing read is trusted as long as Redis keeps it (each row carries its TTL).
    let fresh = Proxy::start(opts(&redis, &agent, "")).await;
    let mut c = fresh.client(Proto::H2).await;
    for page in 0..2 {
        assert_eq!(redis.command("CONFIG RESETSTAT"), "+OK");
        let v = rpc_as(&mut c, ALICE, "ListTasks", json!({"pageSize": 3})).await;
        let listed = v["result"]["tasks"].as_array().cloned().unwrap_or_default();
        assert_eq!(listed.len(), 3, "{v}");
        // The page's rows and one more, each task and its context read once by the
        // listing's one script.
        assert_eq!(redis.calls("hmget"), 8, "page {page}");
        assert_eq!(redis.calls("zrevrange"), 1, "page {page}");
        assert_eq!(redis.command("CONFIG RESETSTAT"), "+OK");
        for t in &listed {
            let v = rpc_as(&mut c, ALICE, "GetTask", json!({"id": t["id"]})).await;
            assert_eq!(v["result"]["id"], t["id"], "{v}");
        }
        assert_eq!(redis.calls("hmget"), 0, "page {page}");
    }
}

#[tokio::test]
async fn racing_turns_on_one_context_have_exactly_one_winner() {
    let redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    // 200 turns of one caller in a few seconds: above the default rate (50/s, burst 100),
    // which is not what this test is about.
    let limits = "\n[limits]\nrequests_per_second = 1000\nburst = 1000\n";
    let r = [
        Proxy::start(opts(&redis, &agent, limits)).await,
        Proxy::start(opts(&redis, &agent, limits)).await,
    ];
    let (a, b) = (r[0].addr, r[1].addr);
    let (ca, cb) = (r[0].ca.clone(), r[1].ca.clone());
    let mut tries = 0;
    for batch in 0..10 {
        let mut races = tokio::task::JoinSet::new();
        for i in 0..10 {
            let ctx = format!("race-{batch}-{i}");
            let (ca, cb) = (ca.clone(), cb.clone());
            races.spawn(async move {
                // Both connections are made first, so that only the two turns race.
                let mut cx = Client::connect(a, &ca, Proto::H2).await;
                let mut cy = Client::connect(b, &cb, Proto::H2).await;
                let turn = || message("[[slow:100]] race", json!({"contextId": ctx.as_str()}));
                let (x, y) = tokio::join!(
                    rpc_as(&mut cx, ALICE, "SendMessage", turn()),
                    rpc_as(&mut cy, ALICE, "SendMessage", turn()),
                );
                (x, y)
            });
        }
        while let Some(done) = races.join_next().await {
            let (x, y) = done.unwrap();
            let won = [&x, &y]
                .iter()
                .filter(|v| v.get("result").is_some())
                .count();
            let busy = [&x, &y]
                .iter()
                .filter(|v| reason(v) == "context.busy")
                .count();
            assert_eq!((won, busy), (1, 1), "{x}\n{y}");
            tries += 1;
        }
    }
    assert_eq!(tries, 100);
}

#[tokio::test]
async fn claims_are_atomic_across_replicas() {
    // Two replicas' stores racing to claim one context id for two callers: one owner.
    use a2a_edge::state::redis::{RedisConfig, RedisStore};
    use a2a_edge::state::shared::{SharedOwners, TurnVerdict};
    use std::sync::Arc;
    let redis = RedisServer::start();
    let store = || {
        let config = RedisConfig {
            url: url::Url::parse(&redis.url()).unwrap(),
            password: None,
            ca_pem: None,
            key_prefix: "claim:".into(),
            timeout: Duration::from_secs(2),
            rate_lease_max: 1,
            rate_lease: Duration::from_millis(100),
        };
        let metrics = Arc::new(a2a_edge::telemetry::metrics::Metrics::new());
        Arc::new(SharedOwners::new(
            Arc::new(RedisStore::new(config, metrics).unwrap()),
            Duration::from_secs(30),
            Duration::from_secs(600),
            100_000,
        ))
    };
    let (one, two) = (store(), store());
    for i in 0..100 {
        let ctx = format!("agent-ctx-{i}");
        let (x, y) = tokio::join!(
            one.turn(&ctx, "alice", None, None, "token-a", None, None),
            two.turn(&ctx, "bob", None, None, "token-b", None, None)
        );
        let verdicts = [x.unwrap(), y.unwrap()];
        let owners = verdicts
            .iter()
            .filter(|v| matches!(v, TurnVerdict::Leased(_)))
            .count();
        assert_eq!(owners, 1, "{verdicts:?}");
        assert!(
            verdicts.contains(&TurnVerdict::NotFound),
            "the loser gets -32001: {verdicts:?}"
        );
    }
}

#[tokio::test]
async fn a_restarted_replica_keeps_every_callers_tasks() {
    let redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    let mut first = Proxy::start(opts(&redis, &agent, "")).await;
    let mut c = first.client(Proto::H2).await;
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message("[[input]] before", json!({"contextId": "ctx-r"})),
    )
    .await;
    let task = v["result"]["task"]["id"].as_str().unwrap().to_string();
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message("[[input]] second", json!({"contextId": "ctx-r2"})),
    )
    .await;
    let second_task = v["result"]["task"]["id"].as_str().unwrap().to_string();
    let v = rpc_as(&mut c, ALICE, "ListTasks", json!({"pageSize": 1})).await;
    let token = v["result"]["nextPageToken"].as_str().unwrap().to_string();
    let first_listed = v["result"]["tasks"][0]["id"].clone();
    drop(c);
    first.stop().await;
    // A new process state (fresh registry, same Redis and secret).
    let second = Proxy::start(opts(&redis, &agent, "")).await;
    let mut c = second.client(Proto::H1).await;
    let v = rpc_as(&mut c, ALICE, "GetTask", json!({"id": task})).await;
    assert_eq!(v["result"]["contextId"], "ctx-r", "{v}");
    let v = rpc_as(&mut c, MALLORY, "GetTask", json!({"id": task})).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    let v = rpc_as(&mut c, ALICE, "ListTasks", json!({})).await;
    assert_eq!(v["result"]["totalSize"], 2, "{v}");
    // The page token minted before the restart continues where the page ended.
    let v = rpc_as(
        &mut c,
        ALICE,
        "ListTasks",
        json!({"pageSize": 1, "pageToken": token}),
    )
    .await;
    let listed = [first_listed, v["result"]["tasks"][0]["id"].clone()];
    assert!(
        listed.contains(&json!(task)) && listed.contains(&json!(second_task)),
        "{v}"
    );
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message("[[input]] after", json!({"contextId": "ctx-r"})),
    )
    .await;
    assert_eq!(v["result"]["task"]["contextId"], "ctx-r", "{v}");
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A turn whose busy lease Redis lost (a failover or an eviction dropped it, or it ran out
/// in a stall) no longer holds its context, where another turn may now begin: it ends with
/// `-32603 context.lease_lost` within about a renewal (a third of the lease), whether its
/// agent keeps talking or says nothing, instead of streaming on beside that other turn
/// until its own end (6 s, or the silent agent's next event 8 s later).
#[tokio::test]
async fn a_turn_that_lost_its_lease_ends() {
    let redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    let p = Proxy::start(opts(&redis, &agent, "busy_lease_ms = 2000\n")).await;
    // (what the agent does, the context)
    let cases = [
        ("[[slow:150]] [[chunks:40]] a long turn", "ctx-lost"),
        ("[[slow:8000]] [[chunks:2]] a quiet turn", "ctx-quiet"),
    ];
    for (text, ctx) in cases {
        let mut c = p.client(Proto::H2).await;
        let resp = c
            .rpc_stream(
                "SendStreamingMessage",
                message(text, json!({"contextId": ctx})),
            )
            .await;
        let mut events = EventReader::new(resp);
        let (_, first) = events.next().await.expect("a first event");
        assert!(first.get("error").is_none(), "{ctx}: {first}");
        // (the context by its alias: the caller named an id it did not own yet)
        let key = redis.command("KEYS *b:c-*");
        assert!(!key.is_empty(), "{ctx}: no lease in Redis");
        assert_eq!(key.lines().count(), 1, "{ctx}: {key}");
        redis.command(&format!("DEL {key}"));
        let started = Instant::now();
        let rest = events.rest().await;
        let (name, last) = rest.last().expect("the stream ended with an event");
        assert_eq!(name.as_deref(), Some("error"), "{ctx}: {rest:?}");
        assert_eq!(reason(last), "context.lease_lost", "{ctx}: {last}");
        assert_eq!(last["error"]["code"], -32603, "{ctx}: {last}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{ctx}: {:?}",
            started.elapsed()
        );
    }
}

/// A turn whose renewals fail (Redis unreachable) holds its context no longer than its lease
/// lasts from the last renewal Redis answered: past that, another replica may have begun a
/// turn there, so it ends with `context.lease_lost`, as when Redis says the lease is gone.
#[tokio::test]
async fn a_turn_that_cannot_renew_its_lease_ends_past_its_deadline() {
    let mut redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    let p = Proxy::start(opts(&redis, &agent, "busy_lease_ms = 2000\n")).await;
    let mut c = p.client(Proto::H2).await;
    let resp = c
        .rpc_stream(
            "SendStreamingMessage",
            message(
                "[[slow:8000]] [[chunks:2]] a quiet turn",
                json!({"contextId": "ctx-stranded"}),
            ),
        )
        .await;
    let mut events = EventReader::new(resp);
    let (_, first) = events.next().await.expect("a first event");
    assert!(first.get("error").is_none(), "{first}");
    // The agent says it is working at once (written to Redis too), then nothing for 8 s:
    // Redis stops after that write, not during it (that would end the turn with
    // `state.unavailable`, another test's matter).
    let (_, working) = events.next().await.expect("the working status");
    assert_eq!(
        working["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_WORKING",
        "{working}"
    );
    redis.stop();
    let started = Instant::now();
    let rest = events.rest().await;
    let (name, last) = rest.last().expect("the stream ended with an event");
    assert_eq!(name.as_deref(), Some("error"), "{rest:?}");
    assert_eq!(reason(last), "context.lease_lost", "{last}");
    // Not at the first failed renewal: the lease still runs in Redis until its deadline (at
    // most 2 s after Redis went), and ended within a renewal and a round trip of it.
    let took = started.elapsed();
    assert!(
        took > Duration::from_millis(1000) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_replica_killed_mid_turn_frees_the_context_after_its_lease() {
    let redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    let lease = "busy_lease_ms = 2000\n";
    // Replica 1 is a child process, killed with SIGKILL in the middle of a stream.
    let dir = TempDir::new("killed");
    let policy = policy_text(dir.path(), &opts(&redis, &agent, lease));
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, policy).unwrap();
    let ready = dir.path().join("ready.json");
    let mut child = Killed(
        Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
            .args(["serve", "--policy"])
            .arg(&path)
            .arg("--ready-file")
            .arg(&ready)
            .env(SECRET_VAR, "a-shared-page-token-secret-of-32-bytes-or-more")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready.exists() {
        assert!(child.0.try_wait().unwrap().is_none(), "serve exited");
        assert!(Instant::now() < deadline, "no ready file");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let info: Value = serde_json::from_slice(&std::fs::read(&ready).unwrap()).unwrap();
    let addr: std::net::SocketAddr = info["listen"].as_str().unwrap().parse().unwrap();
    // Replica 2 is started and connected to first, so that only its request falls in the
    // time measured from the kill.
    let r2 = Proxy::start(opts(&redis, &agent, lease)).await;
    let mut c2 = r2.client(Proto::H2).await;
    let mut c1 = Client::connect(addr, &dir.path().join("certs/ca.pem"), Proto::H2).await;
    let resp = c1
        .rpc_stream(
            "SendStreamingMessage",
            message(
                "[[slow:100]] [[chunks:5]] doomed",
                json!({"contextId": "ctx-k"}),
            ),
        )
        .await;
    let mut events = EventReader::new(resp);
    events.next().await.expect("the stream started");
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let killed_at = Instant::now();
    // On replica 2, the dead replica's lease still holds the context...
    let v = rpc_as(
        &mut c2,
        ALICE,
        "SendMessage",
        message("[[input]] too soon", json!({"contextId": "ctx-k"})),
    )
    .await;
    assert!(
        killed_at.elapsed() < Duration::from_millis(1500),
        "too slow to tell"
    );
    assert_eq!(reason(&v), "context.busy", "{v}");
    // ... until it runs out, without anyone renewing it.
    let freed = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let v = rpc_as(
            &mut c2,
            ALICE,
            "SendMessage",
            message("[[input]] now", json!({"contextId": "ctx-k"})),
        )
        .await;
        if v.get("result").is_some() {
            break killed_at.elapsed();
        }
        assert_eq!(reason(&v), "context.busy", "{v}");
        assert!(killed_at.elapsed() < Duration::from_secs(10), "never freed");
    };
    assert!(
        freed >= Duration::from_millis(1500),
        "freed too early: {freed:?}"
    );
}

#[tokio::test]
async fn redis_stopped_under_load_fails_closed_then_recovers() {
    let mut redis = RedisServer::start_persistent();
    let (agent, _stop) = start_engine().await;
    let r = replicas(&redis, &agent, 2).await;
    let mut c = r[0].client(Proto::H2).await;
    let mut hers = Vec::new();
    for i in 0..4 {
        let v = rpc_as(
            &mut c,
            ALICE,
            "SendMessage",
            message(&format!("[[input]] hers {i}"), json!({})),
        )
        .await;
        hers.push(v["result"]["task"]["id"].as_str().unwrap().to_string());
    }
    let v = rpc_as(
        &mut c,
        MALLORY,
        "SendMessage",
        message("[[input]] his", json!({})),
    )
    .await;
    let his = v["result"]["task"]["id"].as_str().unwrap().to_string();
    let (addrs, cas) = ([r[0].addr, r[1].addr], [r[0].ca.clone(), r[1].ca.clone()]);
    let started = Instant::now();
    let mut load = tokio::task::JoinSet::new();
    for w in 0..4usize {
        let (addr, ca) = (addrs[w % 2], cas[w % 2].clone());
        let (hers, his) = (hers.clone(), his.clone());
        load.spawn(async move {
            let mut c = Client::connect(addr, &ca, Proto::H2).await;
            let mut seen = (0, 0);
            let mut n = 0usize;
            while started.elapsed() < Duration::from_secs(4) {
                n += 1;
                let (token, task, mine) = match n % 3 {
                    0 => (MALLORY, hers[n % 4].clone(), false),
                    1 => (ALICE, hers[n % 4].clone(), true),
                    _ => (MALLORY, his.clone(), true),
                };
                let sent = Instant::now();
                let body =
                    json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task}});
                let headers = [
                    ("authorization", token),
                    ("content-type", "application/json"),
                    ("a2a-version", "1.0"),
                ];
                let (status, _, rb) = c.request("POST", "/", &headers, body.to_string()).await;
                assert!(
                    sent.elapsed() < Duration::from_secs(3),
                    "a hang: {:?}",
                    sent.elapsed()
                );
                assert_eq!(status, 200, "{}", String::from_utf8_lossy(&rb));
                let v: Value = serde_json::from_slice(&rb).unwrap();
                if let Some(result) = v.get("result") {
                    assert!(mine, "another caller's task: {v}");
                    assert_eq!(result["id"], task.as_str(), "{v}");
                    seen.0 += 1;
                } else if reason(&v) == "state.unavailable" {
                    assert_eq!(v["error"]["code"], -32603, "{v}");
                    seen.1 += 1;
                } else {
                    assert!(!mine, "{v}");
                    assert_eq!(v["error"]["code"], -32001, "{v}");
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            seen
        });
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    redis.stop();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, body) = admin_get(&r[1], "/ready").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("state.unavailable"), "{body}");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    redis.restart();
    let restarted = Instant::now();
    let mut totals = (0, 0);
    while let Some(done) = load.join_next().await {
        let (ok, unavailable) = done.unwrap();
        totals = (totals.0 + ok, totals.1 + unavailable);
    }
    assert!(totals.0 > 0 && totals.1 > 0, "{totals:?}");
    // Service is back on both replicas within a few seconds, with what Redis kept (AOF):
    // a replica that never saw her task finds it hers, and not his.
    let fresh = Proxy::start(opts(&redis, &agent, "")).await;
    for p in [&r[0], &r[1], &fresh] {
        let mut c = p.client(Proto::H1).await;
        loop {
            let v = rpc_as(&mut c, ALICE, "GetTask", json!({"id": hers[0]})).await;
            if v.get("result").is_some() {
                break;
            }
            assert_eq!(reason(&v), "state.unavailable", "{v}");
            assert!(
                restarted.elapsed() < Duration::from_secs(5),
                "no recovery: {v}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let v = rpc_as(&mut c, MALLORY, "GetTask", json!({"id": hers[1]})).await;
        assert_eq!(v["error"]["code"], -32001, "{v}");
        let (status, _) = admin_get(p, "/ready").await;
        assert_eq!(status, 200);
    }
}

#[tokio::test]
async fn ownership_expires_after_the_retention() {
    let redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    let retention = "task_retention_ms = 1500\n";
    let first = Proxy::start(opts(&redis, &agent, retention)).await;
    let mut c = first.client(Proto::H2).await;
    // The second replica is started and connected to before the task is written, so that
    // only the requests fall within the retention.
    let second = Proxy::start(opts(&redis, &agent, retention)).await;
    let mut c2 = second.client(Proto::H2).await;
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        message("[[input]] short-lived", json!({"contextId": "ctx-e"})),
    )
    .await;
    let task = v["result"]["task"]["id"].as_str().unwrap().to_string();
    // Within the retention, a replica that never saw it finds it...
    let v = rpc_as(&mut c2, ALICE, "GetTask", json!({"id": task})).await;
    assert_eq!(v["result"]["id"], task.as_str(), "{v}");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // ... and after it, Redis has forgotten it: a replica that never saw it says -32001, and
    // the listing is empty (its index entries go when met).
    let third = Proxy::start(opts(&redis, &agent, retention)).await;
    let mut c3 = third.client(Proto::H1).await;
    let v = rpc_as(&mut c3, ALICE, "GetTask", json!({"id": task})).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    let v = rpc_as(&mut c3, ALICE, "ListTasks", json!({})).await;
    assert_eq!(v["result"]["tasks"], json!([]), "{v}");
    let v = rpc_as(&mut c3, ALICE, "ListTasks", json!({})).await;
    assert_eq!(v["result"]["totalSize"], 0, "{v}");
    // The replicas that knew it (the one that learned it from the answer, the one that read
    // it from Redis) no longer trust what they knew: the same -32001 on every replica.
    for c in [&mut c, &mut c2] {
        let v = rpc_as(c, ALICE, "GetTask", json!({"id": task})).await;
        assert_eq!(v["error"]["code"], -32001, "{v}");
    }
}

/// A replica that has served nothing yet (a balancer sends it nothing until `/ready` says 200)
/// learns from its own probe that Redis answers, and an idle one that Redis is gone: `/ready`
/// follows Redis without any request.
#[tokio::test]
async fn ready_follows_redis_without_traffic() {
    let mut redis = RedisServer::start_persistent();
    let (agent, _stop) = start_engine().await;
    let p = Proxy::start(opts(&redis, &agent, "")).await;
    let wait_for = |want: u16| {
        let p = &p;
        async move {
            let started = Instant::now();
            loop {
                let (status, body) = admin_get(p, "/ready").await;
                if status == want {
                    return body;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(15),
                    "/ready stayed {status}: {body}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    wait_for(200).await;
    redis.stop();
    let body = wait_for(503).await;
    assert!(body.contains("state.unavailable"), "{body}");
    redis.restart();
    wait_for(200).await;
}

/// Two replicas on one Redis in front of an agent that names the ids it is told
/// ([`Reply::Named`]).
struct NamedPair {
    redis: RedisServer,
    agent: RecordingUpstream,
    replicas: Vec<Proxy>,
}

impl NamedPair {
    /// [`NamedPair::start`], then Alice's task `t-a1` made through the first replica by a
    /// SendMessage of `text` (`t-a1 c-a1 [STATE]`).
    async fn with_alices(text: &str) -> (NamedPair, Client, Client) {
        NamedPair::with_alices_and(text, "").await
    }

    /// [`NamedPair::with_alices`] with more of the `[state]` table.
    async fn with_alices_and(text: &str, extra_state: &str) -> (NamedPair, Client, Client) {
        let (pair, mut c1, c2) = NamedPair::start(extra_state).await;
        let v = rpc_as(&mut c1, ALICE, "SendMessage", message(text, json!({}))).await;
        assert_eq!(v["result"]["task"]["id"], "t-a1", "{v}");
        (pair, c1, c2)
    }

    /// The pair and a client of each (HTTP/1.1 to the first, HTTP/2 to the second).
    async fn start(extra_state: &str) -> (NamedPair, Client, Client) {
        let redis = RedisServer::start();
        let agent = RecordingUpstream::start(Reply::Named).await;
        let mut replicas = Vec::new();
        for _ in 0..2 {
            replicas.push(Proxy::start(opts(&redis, &agent.url, extra_state)).await);
        }
        let c1 = replicas[0].client(Proto::H1).await;
        let c2 = replicas[1].client(Proto::H2).await;
        let pair = NamedPair {
            redis,
            agent,
            replicas,
        };
        (pair, c1, c2)
    }

    /// How many requests reached the agent.
    fn reached(&self) -> usize {
        self.agent.seen.lock().unwrap().len()
    }

    /// Waits (at most 10 s) until Redis no longer holds `task` (its retention ended).
    async fn until_redis_forgets(&self, task: &str) {
        let started = Instant::now();
        while self.redis.command(&format!("EXISTS r:t:{task}")) != ":0" {
            assert!(started.elapsed() < Duration::from_secs(10), "{task} kept");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// An id Redis forgot (its retention ended) and another caller claimed since (an agent
/// that numbers its tasks anew after a restart) is the new owner's on every replica, also
/// on the one that knew it as the first owner's: that replica asks Redis again once the
/// retention has passed instead of trusting what it knew.
#[tokio::test]
async fn an_id_claimed_again_after_the_retention_is_the_new_owners_on_every_replica() {
    let (fleet, mut c1, mut c2) =
        NamedPair::with_alices_and("t-a1 c-a1", "task_retention_ms = 3000\n").await;
    fleet.until_redis_forgets("t-a1").await;
    let v = rpc_as(
        &mut c2,
        MALLORY,
        "SendMessage",
        message("t-a1 c-m1", json!({})),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], "t-a1", "{v}");
    // Alice, on the replica that made her task: not hers any more, refused before the agent.
    let before = fleet.reached();
    for method in ["GetTask", "CancelTask"] {
        let v = rpc_as(&mut c1, ALICE, method, json!({"id": "t-a1"})).await;
        assert_eq!(v["error"]["code"], -32001, "{method}: {v}");
    }
    assert_eq!(
        fleet.reached(),
        before,
        "a refused request reached the agent"
    );
    // Mallory's on that replica: forwarded (this agent then answers about another task).
    let v = rpc_as(&mut c1, MALLORY, "GetTask", json!({"id": "t-a1"})).await;
    assert_eq!(reason(&v), "upstream.bad_response", "{v}");
    assert_eq!(fleet.reached(), before + 1);
    // Alice's context id was forgotten with it: Mallory's answer naming it is hers now.
    let v = rpc_as(
        &mut c1,
        MALLORY,
        "SendMessage",
        message("t-m2 c-a1", json!({})),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], "t-m2", "{v}");
}

/// A replica whose cache evicted Alice's task does not remember it as hers: Redis decides.
/// Once Redis forgot it and the agent names the id for Mallory, the replica takes Mallory's
/// answer as every other replica does (it refused it, as still Alice's, before).
#[tokio::test]
async fn an_id_the_cache_evicted_is_whoever_redis_says() {
    let (fleet, mut c1, mut c2) = NamedPair::with_alices_and(
        "t-a1 c-a1",
        "task_retention_ms = 3000\n[limits]\nmax_registry_entries = 1\n",
    )
    .await;
    // Evicted from the first replica's cache by her next task.
    let v = rpc_as(
        &mut c1,
        ALICE,
        "SendMessage",
        message("t-a2 c-a2", json!({})),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], "t-a2", "{v}");
    let (_, metrics) = admin_get(&fleet.replicas[0], "/metrics").await;
    assert!(
        metrics.contains("a2a_edge_registry_evictions_total{kind=\"tasks\"} 1"),
        "{metrics}"
    );
    // While Redis keeps it, it is hers on both replicas.
    for c in [&mut c1, &mut c2] {
        let v = rpc_as(c, MALLORY, "SendMessage", message("t-a1 c-m1", json!({}))).await;
        assert_eq!(reason(&v), "upstream.foreign_task", "{v}");
    }
    fleet.until_redis_forgets("t-a1").await;
    let v = rpc_as(
        &mut c1,
        MALLORY,
        "SendMessage",
        message("t-a1 c-m1", json!({})),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], "t-a1", "{v}");
    for c in [&mut c1, &mut c2] {
        let v = rpc_as(c, ALICE, "GetTask", json!({"id": "t-a1"})).await;
        assert_eq!(v["error"]["code"], -32001, "{v}");
    }
}

/// A listing teaches a replica the listed tasks' contexts only when Redis holds them as the
/// caller's too: a context whose key is gone (evicted by a Redis out of memory) is not
/// taken for Alice's from her task's row, so whoever Redis lets claim it is not refused here.
#[tokio::test]
async fn a_listing_learns_only_the_contexts_redis_holds_as_the_callers() {
    let (fleet, _c1, mut c2) = NamedPair::with_alices("t-a1 c-a1").await;
    assert_eq!(fleet.redis.command("DEL r:c:c-a1"), ":1");
    let v = rpc_as(&mut c2, ALICE, "ListTasks", json!({})).await;
    assert_eq!(v["result"]["tasks"][0]["id"], "t-a1", "{v}");
    let v = rpc_as(
        &mut c2,
        MALLORY,
        "SendMessage",
        message("t-m1 c-a1", json!({})),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], "t-m1", "{v}");
    let owner = fleet.redis.command("HGET r:c:c-a1 o");
    assert!(owner.contains("mallory"), "{owner}");
}

/// An agent answering Mallory, through a replica that never saw it, with Alice's task
/// without its context: the replica asks Redis whose task it is before relaying, and
/// refuses it (its cache alone knew nothing of the task).
#[tokio::test]
async fn a_task_named_without_its_context_is_checked_in_redis() {
    let (_fleet, _c1, mut c2) = NamedPair::with_alices("t-a1 c-a1").await;
    let v = rpc_as(
        &mut c2,
        MALLORY,
        "SendMessage",
        message("t-a1 -", json!({})),
    )
    .await;
    assert_eq!(v["error"]["code"], -32006, "{v}");
    assert_eq!(reason(&v), "upstream.foreign_task", "{v}");
    // Alice's own, through the other replica: hers.
    let v = rpc_as(&mut c2, ALICE, "SendMessage", message("t-a1 -", json!({}))).await;
    assert_eq!(v["result"]["task"]["id"], "t-a1", "{v}");
    let v = rpc_as(&mut c2, MALLORY, "GetTask", json!({"id": "t-a1"})).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
}

/// A known task's new state in an answer without its context (a Task without `contextId`)
/// is written to Redis too, as the memory backend records it: another replica's ListTasks
/// by state sees it. The turn that got it does not take the task's context as its own (the
/// context is not left busy).
#[tokio::test]
async fn a_state_named_without_its_context_reaches_redis() {
    let (_fleet, mut c1, mut c2) = NamedPair::with_alices("t-a1 c-a1 WORKING").await;
    let by_state = |state: &str| json!({"status": state});
    let v = rpc_as(&mut c2, ALICE, "ListTasks", by_state("TASK_STATE_WORKING")).await;
    assert_eq!(v["result"]["totalSize"], 1, "{v}");
    // The same task, now completed, without its context.
    let v = rpc_as(
        &mut c1,
        ALICE,
        "SendMessage",
        message("t-a1 - COMPLETED", json!({})),
    )
    .await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    for c in [&mut c1, &mut c2] {
        let v = rpc_as(c, ALICE, "ListTasks", by_state("TASK_STATE_COMPLETED")).await;
        assert_eq!(v["result"]["totalSize"], 1, "{v}");
        assert_eq!(v["result"]["tasks"][0]["id"], "t-a1", "{v}");
        let v = rpc_as(c, ALICE, "ListTasks", by_state("TASK_STATE_WORKING")).await;
        assert_eq!(v["result"]["totalSize"], 0, "{v}");
    }
    // Its context was not taken by that turn: a turn in it starts at once on either replica.
    for c in [&mut c1, &mut c2] {
        let v = rpc_as(
            c,
            ALICE,
            "SendMessage",
            message("t-a1 c-a1", json!({"contextId": "c-a1"})),
        )
        .await;
        assert!(v.get("result").is_some(), "{v}");
    }
}

/// A Message answer in a new context that refers to another caller's task is refused
/// before anything is written: Redis keeps no record of the context it named.
#[tokio::test]
async fn a_refused_message_answer_leaves_nothing_in_redis() {
    let (fleet, mut c1, mut c2) = NamedPair::with_alices("t-a1 c-a1").await;
    for c in [&mut c1, &mut c2] {
        let v = rpc_as(
            c,
            MALLORY,
            "SendMessage",
            message("msg c-m9 t-a1", json!({})),
        )
        .await;
        assert_eq!(reason(&v), "upstream.foreign_task", "{v}");
    }
    assert_eq!(fleet.redis.command("EXISTS r:c:c-m9"), ":0");
    // A Message referring to the caller's own task is relayed and its context recorded.
    let v = rpc_as(
        &mut c2,
        ALICE,
        "SendMessage",
        message("msg c-a9 t-a1", json!({})),
    )
    .await;
    assert_eq!(v["result"]["message"]["contextId"], "c-a9", "{v}");
    assert_eq!(fleet.redis.command("EXISTS r:c:c-a9"), ":1");
}

/// A turn that lost its lease while its caller does not read (the relay waits to hand over
/// the agent's next event) ends as promptly as one that reads: its agent's stream is closed
/// within about a renewal, not when the caller has stalled past the idle timeout (8 s here).
#[tokio::test]
async fn a_turn_that_lost_its_lease_ends_while_its_caller_does_not_read() {
    let redis = RedisServer::start();
    let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let up = RecordingUpstream::start(Reply::Flood(closed.clone())).await;
    let mut o = opts(&redis, &up.url, "busy_lease_ms = 2000\n");
    o.extra_policy.push_str(
        "[limits]\nstream_idle_timeout_ms = 8000\nstream_keepalive_ms = 200\nstream_buffer_bytes = 4096\n",
    );
    let p = Proxy::start(o).await;
    let mut c = p.client(Proto::H2).await;
    // Opened, and never read.
    let resp = c
        .rpc_stream(
            "SendStreamingMessage",
            message("a flood", json!({"contextId": "ctx-unread"})),
        )
        .await;
    assert_eq!(resp.status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !closed.load(std::sync::atomic::Ordering::SeqCst),
        "the stream ended before its lease was lost"
    );
    // (the turn's own context: not the other context the agent's events name, which the
    // turn's lease does not hold)
    let keys = redis.command("KEYS *b:c-*");
    assert_eq!(keys.lines().count(), 1, "{keys}");
    for key in keys.lines() {
        redis.command(&format!("DEL {key}"));
    }
    let lost = "the turn that lost its lease went on while its caller did not read";
    until_set(&closed, Duration::from_secs(4), lost).await;
    drop(resp);
}

/// A streaming turn on a context the caller names, answered in another context the agent
/// names (its own id for the conversation), leaves that context free once it ends, as with
/// the memory backend: only the turn's own context is leased, renewed and released (before,
/// the agent's context was leased with the turn's token by a non-final event's write and
/// never renewed nor released: the caller's next turn there was `context.busy` for
/// `busy_lease_ms`, on every replica).
#[tokio::test]
async fn the_context_an_agent_answers_in_is_free_once_the_turn_ends() {
    let turn = |text: &str, context: &str| message(text, json!({"contextId": context}));
    // (a stream whose one event is the task WORKING, in the agent's context)
    async fn stream_turn(c: &mut Client) {
        let resp = c
            .rpc_stream(
                "SendStreamingMessage",
                message("t-a1 c-agent WORKING", json!({"contextId": "c-asked"})),
            )
            .await;
        assert_eq!(resp.status(), 200);
        let mut events = EventReader::new(resp);
        let (_, first) = events.next().await.expect("an event");
        assert_eq!(first["result"]["task"]["contextId"], "c-agent", "{first}");
        assert!(events.next().await.is_none(), "one event");
    }
    let (fleet, mut c1, mut c2) = NamedPair::start("").await;
    stream_turn(&mut c1).await;
    // The caller goes on where the agent said, through each replica (the turn's own
    // context is released when its stream ends, maybe just after the caller saw it end).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let v = rpc_as(
            &mut c2,
            ALICE,
            "SendMessage",
            turn("t-a2 c-agent", "c-agent"),
        )
        .await;
        if v["result"]["task"]["id"] == "t-a2" {
            break;
        }
        assert_eq!(reason(&v), "context.busy", "{v}");
        assert!(
            Instant::now() < deadline,
            "the agent's context still busy: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let v = rpc_as(
        &mut c1,
        ALICE,
        "SendMessage",
        turn("t-a3 c-agent", "c-agent"),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], "t-a3", "{v}");
    let keys = fleet.redis.command("KEYS r:b:*");
    assert_eq!(keys, "", "leases left after the turns");
    // The memory backend, alike.
    let (_up, p) = Proxy::with_recorder(Reply::Named, ProxyOpts::default()).await;
    let mut c = p.client(Proto::H1).await;
    stream_turn(&mut c).await;
    let v = rpc_as(
        &mut c,
        ALICE,
        "SendMessage",
        turn("t-a2 c-agent", "c-agent"),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], "t-a2", "{v}");
}

/// Two agents behind two replicas: a context a caller names is bound to its agent when its
/// first turn begins, in Redis, as the memory registry binds it from the first byte sent. A
/// turn that ended before its agent answered anything the edge could learn (here an agent
/// that answers with neither a task nor a message) and its retry through the other replica reach
/// the same agent, not each replica's own pick (the conversation would fork).
#[tokio::test]
async fn a_named_context_is_bound_to_its_agent_from_its_first_turn_on_every_replica() {
    let redis = RedisServer::start();
    let first = RecordingUpstream::start(Reply::Echo).await;
    let second = RecordingUpstream::start(Reply::Echo).await;
    let fleet = || {
        let mut o = opts(&redis, &first.url, "");
        o.extra_upstream = format!(
            "\n[[upstreams]]\nname = \"second\"\nurl = \"{}\"\n",
            second.url
        );
        o
    };
    let r1 = Proxy::start(fleet()).await;
    let r2 = Proxy::start(fleet()).await;
    let mut c1 = r1.client(Proto::H2).await;
    let mut c2 = r2.client(Proto::H1).await;
    // Replica 2 has picked once already (a new conversation): its next pick is the other
    // agent than replica 1's first.
    let v = rpc_as(&mut c2, ALICE, "SendMessage", message("warm", json!({}))).await;
    assert!(v.get("result").is_some(), "{v}");
    let seen = |u: &RecordingUpstream| u.rpc_requests().len();
    let before = (seen(&first), seen(&second));
    let v = rpc_as(
        &mut c1,
        ALICE,
        "SendMessage",
        message("one", json!({"contextId": "ctx-bound"})),
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
    let v = rpc_as(
        &mut c2,
        ALICE,
        "SendMessage",
        message("again", json!({"contextId": "ctx-bound"})),
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
    let after = (seen(&first), seen(&second));
    let took = (after.0 - before.0, after.1 - before.1);
    assert!(
        took == (2, 0) || took == (0, 2),
        "the turns went to {took:?}"
    );
}

/// A TCP relay in front of Redis that, once armed, holds what the edge sends from its first
/// write naming `marker` on, until let go: a command sent and not yet answered, as the edge
/// sees a slow Redis (nothing in Redis can hold one command while others pass).
struct HoldingRelay {
    url: String,
    held: std::sync::Arc<std::sync::Mutex<Held>>,
    go: tokio::sync::watch::Sender<u32>,
    accept: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Held {
    /// Empty: nothing is held.
    marker: Vec<u8>,
    /// A connection is holding (one at a time).
    holding: bool,
    bytes: Vec<u8>,
}

impl HoldingRelay {
    async fn start(redis: &RedisServer) -> HoldingRelay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("redis://{}/0", listener.local_addr().unwrap());
        let held = std::sync::Arc::new(std::sync::Mutex::new(Held::default()));
        let (go, _) = tokio::sync::watch::channel(0);
        let (port, state, gone) = (redis.port, held.clone(), go.clone());
        let accept = tokio::spawn(async move {
            while let Ok((edge, _)) = listener.accept().await {
                let (state, go) = (state.clone(), gone.subscribe());
                tokio::spawn(Self::relay(edge, port, state, go));
            }
        });
        HoldingRelay {
            url,
            held,
            go,
            accept,
        }
    }

    async fn relay(
        edge: tokio::net::TcpStream,
        port: u16,
        held: std::sync::Arc<std::sync::Mutex<Held>>,
        mut go: tokio::sync::watch::Receiver<u32>,
    ) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Ok(redis) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
            return;
        };
        let (mut from_edge, mut to_edge) = edge.into_split();
        let (mut from_redis, mut to_redis) = redis.into_split();
        let back = tokio::spawn(async move {
            let _ = tokio::io::copy(&mut from_redis, &mut to_edge).await;
        });
        let mut buf = vec![0; 64 * 1024];
        let mut holding = false;
        loop {
            tokio::select! {
                n = from_edge.read(&mut buf) => {
                    let chunk = match n {
                        // What the edge sent before it closed reaches Redis all the same (as
                        // it would have, read by Redis before the close), once let go.
                        Ok(0) | Err(_) if holding => {
                            let _ = go.changed().await;
                            let bytes = {
                                let mut h = held.lock().unwrap();
                                h.holding = false;
                                std::mem::take(&mut h.bytes)
                            };
                            let _ = to_redis.write_all(&bytes).await;
                            break;
                        }
                        Ok(0) | Err(_) => break,
                        Ok(n) => &buf[..n],
                    };
                    {
                        let mut h = held.lock().unwrap();
                        let names = !h.marker.is_empty()
                            && chunk.windows(h.marker.len()).any(|w| w == h.marker);
                        if !h.holding && names {
                            (h.holding, holding) = (true, true);
                        }
                        if holding {
                            h.bytes.extend_from_slice(chunk);
                            continue;
                        }
                    }
                    if to_redis.write_all(chunk).await.is_err() {
                        break;
                    }
                }
                _ = go.changed(), if holding => {
                    holding = false;
                    let bytes = {
                        let mut h = held.lock().unwrap();
                        h.holding = false;
                        std::mem::take(&mut h.bytes)
                    };
                    if to_redis.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
            }
        }
        back.abort();
    }

    /// A replica in front of `agent` whose Redis is reached through this relay, with
    /// `timeout_ms` per round trip and a busy lease far longer than a test (a context left
    /// leased stays busy throughout), and more of the `[state]` table.
    async fn proxy(&self, redis: &RedisServer, agent: &str, timeout_ms: u64, extra: &str) -> Proxy {
        let state = format!("busy_lease_ms = 60000\n{extra}");
        let mut o = opts(redis, agent, &state);
        let (url, timeout) = (redis.url(), "timeout_ms = 500\n");
        assert!(o.extra_policy.contains(&url) && o.extra_policy.contains(timeout));
        o.extra_policy = o
            .extra_policy
            .replace(&url, &self.url)
            .replace(timeout, &format!("timeout_ms = {timeout_ms}\n"));
        Proxy::start(o).await
    }

    /// From now on, the first write naming `marker` and all after it on its connection are
    /// held.
    fn arm(&self, marker: &str) {
        self.held.lock().unwrap().marker = marker.as_bytes().to_vec();
    }

    /// Waits (at most 5 s) until the held bytes name the marker `n` times.
    async fn until_held(&self, n: usize) {
        let started = Instant::now();
        loop {
            let named = {
                let h = self.held.lock().unwrap();
                h.bytes
                    .windows(h.marker.len())
                    .filter(|w| *w == h.marker)
                    .count()
            };
            if named >= n {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the marker held {named} times, not {n}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Sends what was held, in order, and holds nothing more until armed again.
    fn let_go(&self) {
        self.held.lock().unwrap().marker.clear();
        self.go.send_modify(|n| *n += 1);
    }
}

impl Drop for HoldingRelay {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// A caller that leaves while Redis has not yet answered the turn on its named context (the
/// edge cannot know whether Redis leased the context to it) does not leave that context busy
/// for the whole lease: the lease the unanswered TURN may take is released behind it, on the
/// same connection, so Redis runs the release after the TURN. Leaving by closing an HTTP/1.1
/// connection or by resetting an HTTP/2 stream; the message never reaches the agent.
#[tokio::test]
async fn a_caller_that_leaves_before_redis_answers_its_turn_leaves_the_context_free() {
    let redis = RedisServer::start();
    let relay = HoldingRelay::start(&redis).await;
    let agent = RecordingUpstream::start(Reply::Named).await;
    let p = relay.proxy(&redis, &agent.url, 5000, "").await;
    // (how the caller leaves, its context)
    let cases = [(Proto::H1, "c-u1"), (Proto::H2, "c-u2")];
    for (i, (proto, ctx)) in cases.into_iter().enumerate() {
        let mut c = p.client(Proto::H2).await;
        // The context is the caller's, known to this replica (no lookup before the turn),
        // and Redis has run the scripts once (a first EVALSHA answered NOSCRIPT is sent
        // again with its script only while its future lives).
        let first = format!("t-u{i}a {ctx}");
        let v = rpc_as(&mut c, ALICE, "SendMessage", message(&first, json!({}))).await;
        assert_eq!(v["result"]["task"]["contextId"], ctx, "{v}");
        let again = format!("t-u{i}b {ctx}");
        let v = say_in(&mut c, &again, ctx).await;
        assert!(v.get("result").is_some(), "{v}");
        until_no_lease(&redis).await;
        let reached = agent.rpc_requests().len();
        relay.arm(ctx);
        let params = message(&format!("t-u{i}c {ctx}"), json!({"contextId": ctx}));
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params});
        leave_once_held(&p, proto, &relay, &body).await;
        // The release follows the TURN on its connection; then both go to Redis, and the
        // lease is gone well before it would expire (5 s).
        relay.until_held(2).await;
        relay.let_go();
        let released = Instant::now();
        while !redis.command("KEYS r:b*").is_empty() {
            assert!(
                released.elapsed() < Duration::from_secs(2),
                "{proto:?}: lease kept"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let next = format!("t-u{i}d {ctx}");
        let v = say_in(&mut c, &next, ctx).await;
        assert!(v.get("result").is_some(), "{proto:?}: {v}");
        // Only that last message reached the agent.
        assert_eq!(agent.rpc_requests().len(), reached + 1, "{proto:?}");
    }
}

/// Waits (at most 5 s) until Redis holds no busy lease (a turn's is released after its end).
async fn until_no_lease(redis: &RedisServer) {
    let started = Instant::now();
    while !redis.command("KEYS r:b*").is_empty() {
        assert!(started.elapsed() < Duration::from_secs(5), "lease kept");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A new context of Alice's, made by the engine's agent (its id is hers as it is): its id.
async fn new_context(c: &mut Client) -> String {
    let v = rpc_as(c, ALICE, "SendMessage", message("[[input]] a", json!({}))).await;
    let id = v["result"]["task"]["contextId"].as_str();
    id.unwrap_or_else(|| panic!("{v}")).to_string()
}

/// Alice's SendMessage of `text` in her context `context`: the answer.
async fn say_in(c: &mut Client, text: &str, context: &str) -> Value {
    let params = message(text, json!({"contextId": context}));
    rpc_as(c, ALICE, "SendMessage", params).await
}

/// Sends the JSON-RPC request `body` as Alice and leaves once the relay holds a write (the
/// request is waiting for Redis): over HTTP/1.1 by closing the connection, over HTTP/2 by
/// resetting the stream (its connection stays).
async fn leave_once_held(p: &Proxy, proto: Proto, relay: &HoldingRelay, body: &Value) {
    match proto {
        Proto::H1 => {
            use tokio::io::AsyncWriteExt;
            let mut s = p.raw_tls().await;
            let body = body.to_string();
            let head = format!(
                "POST / HTTP/1.1\r\nhost: localhost\r\nauthorization: {ALICE}\r\n\
                 a2a-version: 1.0\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\n\r\n",
                body.len()
            );
            s.write_all(format!("{head}{body}").as_bytes())
                .await
                .unwrap();
            relay.until_held(1).await;
            drop(s);
        }
        Proto::H2 => {
            let mut leaving = p.client(Proto::H2).await;
            let method = body["method"].as_str().unwrap().to_string();
            let params = body["params"].clone();
            let call = tokio::spawn(async move {
                rpc_as(&mut leaving, ALICE, &method, params).await;
            });
            relay.until_held(1).await;
            call.abort();
        }
    }
}

/// A stream whose agent names a new context, when Redis does not answer the write that
/// adopts it (and leases it to the turn) within `timeout_ms`: the stream ends with
/// `state.unavailable`, and the lease that write may take is released behind it, so the
/// context is not left busy for the whole lease once Redis runs both. (A caller that leaves
/// such a stream does not cut that wait short: the write is answered or times out first.)
#[tokio::test]
async fn a_new_context_whose_write_redis_leaves_unanswered_is_not_left_busy() {
    let redis = RedisServer::start();
    let relay = HoldingRelay::start(&redis).await;
    let agent = RecordingUpstream::start(Reply::Named).await;
    let p = relay.proxy(&redis, &agent.url, 500, "").await;
    let mut c = p.client(Proto::H2).await;
    // A first stream in a new context (Redis runs the scripts once: see the test above),
    // then no lease held.
    let params = message("t-l1 c-l1 WORKING", json!({}));
    let resp = c.rpc_stream("SendStreamingMessage", params).await;
    let events = EventReader::new(resp).rest().await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].1["result"]["task"]["contextId"], "c-l1");
    until_no_lease(&redis).await;
    // The agent names a new context, c-l2: the write is held past `timeout_ms` (500 ms).
    relay.arm("c-l2");
    let params = message("t-l2 c-l2 WORKING", json!({}));
    let resp = c.rpc_stream("SendStreamingMessage", params).await;
    let events = EventReader::new(resp).rest().await;
    let (name, last) = events.last().expect("an event");
    assert_eq!(name.as_deref(), Some("error"), "{events:?}");
    assert_eq!(reason(last), "state.unavailable", "{last}");
    // The release follows the write on its connection; then both go to Redis.
    relay.until_held(2).await;
    relay.let_go();
    // The context is the caller's (Redis ran the write), and free.
    let v = say_in(&mut c, "t-l3 c-l2", "c-l2").await;
    assert_eq!(v["result"]["task"]["contextId"], "c-l2", "{v}");
}

/// Turns whose TURNs Redis leaves unanswered past `timeout_ms` on one connection (Redis
/// stalled): the second miss in a row makes the worker a new connection, and the releases
/// sent on it can run before the TURNs they follow, still waiting on the old connection. The
/// leases those TURNs take when Redis runs them at last are released all the same (a release
/// is tried again), so no context is left busy for the whole lease.
#[tokio::test]
async fn a_release_that_overtakes_its_unanswered_turn_is_tried_again() {
    let redis = RedisServer::start();
    let relay = HoldingRelay::start(&redis).await;
    let agent = RecordingUpstream::start(Reply::Named).await;
    let p = relay
        .proxy(&redis, &agent.url, 300, "rate_lease_ms = 1000\n")
        .await;
    // One connection: its requests are served by one worker, on one Redis connection.
    let mut c = p.client(Proto::H2).await;
    let contexts = ["c-s1", "c-s2", "c-s3"];
    // A message on a task of the caller's, which names its context (the task's id only:
    // this replica trusts what it knows of it and asks Redis nothing before the TURN).
    let send = |c: &mut Client, i: usize, ctx: &'static str, named: Value| {
        let mut c = c.h2_handle();
        async move {
            let text = format!("t-s{i} {ctx} INPUT_REQUIRED");
            let params = message(&text, named);
            rpc_as(&mut c, ALICE, "SendMessage", params).await
        }
    };
    for (i, ctx) in contexts.into_iter().enumerate() {
        // The caller's context, known to this replica; Redis has run the scripts once.
        let text = format!("t-s{i}a {ctx}");
        let v = rpc_as(&mut c, ALICE, "SendMessage", message(&text, json!({}))).await;
        assert_eq!(v["result"]["task"]["contextId"], ctx, "{v}");
        let v = send(&mut c, i, ctx, json!({"contextId": ctx})).await;
        assert!(v.get("result").is_some(), "{v}");
    }
    until_no_lease(&redis).await;
    // The caller's rate tokens come from a lease of this worker for the next second (no
    // round trip before each TURN): it grows while the caller spends it fast.
    // (a method the edge does not know: refused once the rate is spent, before Redis)
    for _ in 0..40 {
        let v = rpc_as(&mut c, ALICE, "NoSuchMethod", json!({})).await;
        assert_eq!(v["error"]["code"], -32601, "{v}");
    }
    // The three TURNs are held on the worker's connection, in the order of `order`.
    relay.arm("c-s2");
    let order = [(1, "c-s2"), (2, "c-s3"), (0, "c-s1")];
    let mut calls = Vec::new();
    for (n, (i, ctx)) in order.into_iter().enumerate() {
        let task = json!({"taskId": format!("t-s{i}")});
        calls.push(tokio::spawn(send(&mut c, i, ctx, task)));
        if n == 0 {
            relay.until_held(1).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The first two time out, the second making the worker's next round trip a new
    // connection (its TURN's release goes there, ahead of the TURN). The third (sent 40 ms
    // in) times out too unless a loaded machine delayed it past that reconnection.
    for (n, call) in calls.into_iter().enumerate() {
        let v = call.await.unwrap();
        if n < 2 || v.get("result").is_none() {
            assert_eq!(reason(&v), "state.unavailable", "{v}");
        }
    }
    // The releases sent on the new connection have run (nothing to release yet); then Redis
    // runs what waited on the old one.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let held = String::from_utf8_lossy(&relay.held.lock().unwrap().bytes).into_owned();
    for ctx in ["c-s2", "c-s3"] {
        assert!(held.contains(ctx), "{ctx} not held: {held}");
    }
    relay.let_go();
    // Redis takes the leases at last; each is released (a context left leased would
    // refuse a new task for the whole lease: 60 s).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    loop {
        let leases = redis.command("KEYS r:b*");
        if leases.is_empty() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{leases}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (i, ctx) in contexts.into_iter().enumerate() {
        let text = format!("t-s{i}d {ctx}");
        let v = say_in(&mut c, &text, ctx).await;
        assert!(v.get("result").is_some(), "{v}");
    }
}

/// What Redis runs while `f` runs, as `MONITOR` shows it (a line per command, scripts' calls
/// included).
async fn monitored<F: std::future::Future>(redis: &RedisServer, f: F) -> (F::Output, String) {
    use std::io::{BufRead, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", redis.port)).unwrap();
    s.write_all(b"MONITOR\r\n").unwrap();
    let mut lines = std::io::BufReader::new(s.try_clone().unwrap());
    let mut ok = String::new();
    lines.read_line(&mut ok).unwrap();
    assert_eq!(ok, "+OK\r\n");
    let out = f.await;
    // A command of its own marks the end of what `f` made Redis run.
    redis.command("ECHO monitored-end");
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        lines.read_line(&mut line).unwrap();
        if line.contains("monitored-end") {
            break;
        }
        seen.push_str(&line);
    }
    (out, seen)
}

/// A follow-up turn naming by its id a context the replica knows as the caller's own asks
/// Redis only what the turn needs: its TURN, and the LEARN of its answer, which releases
/// the context's lease in the same script (no lookup of an alias the caller's id might
/// stand for: that id is the context's own; no RELEASE of its own). A caller's own name
/// for a context (an alias) still works, and reaches the same context on another replica.
#[tokio::test]
async fn a_follow_up_on_the_callers_own_context_asks_redis_no_alias() {
    let redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    let r = replicas(&redis, &agent, 2).await;
    let mut c = r[0].client(Proto::H2).await;
    // A context the agent made (its id is the caller's as it is) and one the caller named.
    let own = new_context(&mut c).await;
    let v = say_in(&mut c, "[[input]] b", "ctx-mine").await;
    assert_eq!(v["result"]["task"]["contextId"], "ctx-mine", "{v}");
    let (v, seen) = monitored(&redis, say_in(&mut c, "[[input]] c", &own)).await;
    assert_eq!(v["result"]["task"]["contextId"], own.as_str(), "{v}");
    // The TURN named the context; no lookup ran before it: not of the context (this
    // replica trusts what it knows of it) nor of an alias (a lookup names a context as `c`
    // and its id; the engine's ids and aliases are both `c-` and 32 hex digits).
    assert!(seen.contains(&format!("\"{own}\"")), "{seen}");
    assert!(!seen.contains("\"cc-"), "{seen}");
    let scripts = seen.to_ascii_lowercase().matches("\"evalsha\"").count();
    assert_eq!(scripts, 2, "TURN and LEARN only: {seen}");
    // The caller's own name still reaches its context, on either replica.
    for p in &r {
        let mut c = p.client(Proto::H1).await;
        let v = say_in(&mut c, "[[input]] d", "ctx-mine").await;
        assert_eq!(v["result"]["task"]["contextId"], "ctx-mine", "{v}");
    }
}

/// A follow-up sent the moment its turn's answer arrives, through whichever replica, is
/// not refused `context.busy` by the turn it follows: a unary answer, and the stream event
/// that ends a turn, leave the edge once Redis has freed the context (the memory backend
/// lets such a follow-up through too).
#[tokio::test]
async fn a_follow_up_sent_as_soon_as_the_answer_comes_finds_its_context_free() {
    let redis = RedisServer::start();
    let (agent, _stop) = start_engine().await;
    let r = replicas(&redis, &agent, 2).await;
    let mut clients = [r[0].client(Proto::H2).await, r[1].client(Proto::H1).await];
    let context = new_context(&mut clients[0]).await;
    // Unary turns, then streams (read up to the event that ends the turn).
    for n in 0..40 {
        let v = say_in(&mut clients[(n + 1) % 2], "[[input]] next", &context).await;
        assert!(v.get("result").is_some(), "turn {n}: {v}");
    }
    for n in 0..40 {
        let c = &mut clients[n % 2];
        let follow = message("[[input]] next", json!({"contextId": context}));
        let resp = c.rpc_stream("SendStreamingMessage", follow).await;
        if !resp.headers()["content-type"]
            .as_bytes()
            .starts_with(b"text/event-stream")
        {
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            panic!("stream {n}: {}", String::from_utf8_lossy(&body));
        }
        // Over HTTP/1.1 to the stream's end (the connection's next request waits for it);
        // over HTTP/2 only up to the event that ends the turn.
        let mut events = EventReader::new(resp);
        if n % 2 == 1 {
            let rest = events.rest().await;
            let (_, last) = rest.last().expect("an event");
            assert!(last.get("result").is_some(), "stream {n}: {rest:?}");
            continue;
        }
        loop {
            let (_, event) = events.next().await.expect("an event");
            assert!(event.get("result").is_some(), "stream {n}: {event}");
            if a2a_edge::a2a::ends_turn(&event["result"]) {
                break;
            }
        }
    }
}

/// The state an event of a stream gives its task (`result.task` or `result.statusUpdate`).
fn state_of(event: &Value) -> &str {
    let r = &event["result"];
    r["statusUpdate"]["status"]["state"]
        .as_str()
        .or(r["task"]["status"]["state"].as_str())
        .unwrap_or("")
}

/// A stream of a [`Reply::Relapse`] agent in a new context, asked with `text`, read up to
/// its FAILED event: the rest of its events, and its context.
async fn failed_stream(c: &mut Client, text: &str) -> (EventReader, String) {
    let resp = c
        .rpc_stream("SendStreamingMessage", message(text, json!({})))
        .await;
    let mut events = EventReader::new(resp);
    let (_, first) = events.next().await.expect("the task");
    let context = first["result"]["task"]["contextId"].as_str().unwrap();
    let context = context.to_string();
    let (_, failed) = events.next().await.expect("FAILED");
    assert_eq!(state_of(&failed), "TASK_STATE_FAILED", "{failed}");
    (events, context)
}

/// An agent that goes on after the event that ended its turn (iac-code after a provider
/// error: FAILED, then WORKING and INPUT_REQUIRED) takes its context again: a follow-up sent
/// through another replica while it goes on is busy, as the memory backend has it. A
/// follow-up that began in the pause before the agent went on (the turn had ended, as A2A
/// says it does) is the context's turn: the stream that went on ends with
/// `context.lease_lost`, whether the event it goes on with ends the turn again or not: never
/// two turns relayed on one context at once.
#[tokio::test]
async fn an_agent_that_goes_on_after_ending_its_turn_takes_its_context_again() {
    let redis = RedisServer::start();
    // (a pause long enough for a follow-up to begin in it on a loaded machine)
    let agent = RecordingUpstream::start(Reply::Relapse(Duration::from_millis(1000))).await;
    let r = replicas(&redis, &agent.url, 2).await;
    let (mut a, mut b) = (r[0].client(Proto::H2).await, r[1].client(Proto::H1).await);

    // Nobody else: the context is the stream's again until its real end.
    let (mut events, context) = failed_stream(&mut a, "go").await;
    let (_, working) = events.next().await.expect("WORKING");
    assert_eq!(state_of(&working), "TASK_STATE_WORKING", "{working}");
    let v = say_in(&mut b, "next", &context).await;
    assert_eq!(reason(&v), "context.busy", "{v}");
    let rest = events.rest().await;
    let states: Vec<&str> = rest.iter().map(|(_, e)| state_of(e)).collect();
    assert_eq!(states, ["TASK_STATE_INPUT_REQUIRED"], "{rest:?}");
    let v = say_in(&mut b, "next", &context).await;
    assert!(v.get("result").is_some(), "{v}");

    // A follow-up in the pause after FAILED: its turn wins, whether the agent goes on with
    // WORKING (`go`) or ends the turn again at once (`again`).
    for text in ["go", "again"] {
        let (mut events, context) = failed_stream(&mut a, text).await;
        let mut b = r[1].client(Proto::H1).await;
        let follow = tokio::spawn(async move { say_in(&mut b, "slow", &context).await });
        let rest = events.rest().await;
        let (event, last) = rest.last().expect("an event");
        assert_eq!(event.as_deref(), Some("error"), "{text}: {rest:?}");
        assert_eq!(reason(last), "context.lease_lost", "{text}: {rest:?}");
        assert_eq!(rest.len(), 1, "{text}: nothing relayed beside it: {rest:?}");
        let v = follow.await.unwrap();
        assert!(v.get("result").is_some(), "{text}: {v}");
    }
}

/// A turn's last answer leaves the edge only once Redis has released the context's lease:
/// while the release is held on its way to Redis (a relay in front of Redis holds the one
/// write that names the context and, after it, the lease's token), the caller gets nothing
/// that ends the turn: not a unary answer (the agent's task, its JSON-RPC error, the edge's
/// error for its HTTP 500), not a stream's event that ends the turn (FAILED, the agent's
/// `event: error`, the edge's error when it broke, one JSON answer to a stream); what came
/// before it, it gets. Once the release reaches Redis the answer follows, and a follow-up
/// through another replica finds the context free. (The test above races a follow-up
/// against the answer; this one holds the release.)
#[tokio::test]
async fn a_turns_last_answer_waits_for_its_contexts_release() {
    let redis = RedisServer::start();
    let relay = HoldingRelay::start(&redis).await;
    // (each answer comes three pauses after the request: time to arm the relay)
    let agent = RecordingUpstream::start(Reply::Relapse(Duration::from_millis(200))).await;
    let p = relay.proxy(&redis, &agent.url, 5000, "").await;
    let q = Proxy::start(opts(&redis, &agent.url, "busy_lease_ms = 60000\n")).await;
    let mut c = p.client(Proto::H2).await;
    let v = rpc_as(&mut c, ALICE, "SendMessage", message("a", json!({}))).await;
    let context = v["result"]["task"]["contextId"].as_str();
    let context = context.unwrap_or_else(|| panic!("{v}")).to_string();
    let mut other = q.client(Proto::H1).await;
    // (what the agent is told, streamed, the events before the one that ends the turn)
    let rows = [
        ("slow", false, 0),
        ("slow error", false, 0),
        ("slow broken", false, 0),
        ("slow", true, 1),
        ("slow error", true, 0),
        ("slow broken", true, 1),
        ("slow json", true, 0),
    ];
    for (said, streamed, before) in rows {
        let asked = agent.rpc_requests().len();
        let (tx, mut got) = tokio::sync::mpsc::unbounded_channel::<Value>();
        let (mut h, params) = (c.h2_handle(), message(said, json!({"contextId": context})));
        let call = tokio::spawn(async move {
            if streamed {
                let resp = h.rpc_stream("SendStreamingMessage", params).await;
                let mut events = EventReader::new(resp);
                while let Some((_, e)) = events.next().await {
                    let _ = tx.send(e);
                }
            } else {
                let _ = tx.send(rpc_as(&mut h, ALICE, "SendMessage", params).await);
            }
        });
        // The TURN went through (the agent has the message); its lease's token, then.
        let started = Instant::now();
        while agent.rpc_requests().len() == asked {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{said}: not asked"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let lease = redis.command(&format!("GET r:b:{context}"));
        let token = lease.split('\n').next().unwrap_or_default();
        assert!(!token.is_empty(), "{said}: no lease: {lease}");
        relay.arm(&format!("{context}\r\n${}\r\n{token}\r\n", token.len()));
        relay.until_held(1).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut early = Vec::new();
        while let Ok(e) = got.try_recv() {
            early.push(e);
        }
        assert_eq!(
            early.len(),
            before,
            "{said} (streamed: {streamed}): before the release: {early:?}"
        );
        relay.let_go();
        call.await.unwrap();
        let mut rest = Vec::new();
        while let Ok(e) = got.try_recv() {
            rest.push(e);
        }
        assert!(!rest.is_empty(), "{said} (streamed: {streamed}): no end");
        let v = say_in(&mut other, "next", &context).await;
        assert!(
            v.get("result").is_some(),
            "{said} (streamed: {streamed}): {v}"
        );
    }
}

/// A follow-up sent as soon as a turn's answer ends finds its context free, through either
/// replica, when no event of the agent ended the turn: the agent's error (a JSON-RPC answer,
/// or an `event: error` ending a stream), the edge's error instead of the agent's answer
/// (here to an HTTP 500, or ending a stream that broke), a stream that ends after the agent
/// went on past the turn's end (its lease taken again), one JSON answer to a stream. Each
/// releases the context's lease before the end leaves the edge.
#[tokio::test]
async fn a_follow_up_sent_as_soon_as_an_answer_ends_finds_its_context_free() {
    let redis = RedisServer::start();
    let agent = RecordingUpstream::start(Reply::Relapse(Duration::from_millis(10))).await;
    let r = replicas(&redis, &agent.url, 2).await;
    let mut clients = [r[0].client(Proto::H2).await, r[1].client(Proto::H1).await];
    let v = rpc_as(
        &mut clients[0],
        ALICE,
        "SendMessage",
        message("a", json!({})),
    )
    .await;
    let context = v["result"]["task"]["contextId"].as_str();
    let context = context.unwrap_or_else(|| panic!("{v}")).to_string();
    // (what the agent is told, streamed, what the answer's last word is)
    let rows = [
        ("error", false, "error"),
        ("broken", false, "error"),
        ("error", true, "error"),
        ("broken", true, "error"),
        ("cut", true, "TASK_STATE_WORKING"),
        ("json", true, "TASK_STATE_WORKING"),
    ];
    for n in 0..120 {
        let (said, streamed, ends) = rows[n / 2 % rows.len()];
        let c = &mut clients[n % 2];
        let last = if streamed {
            let params = message(said, json!({"contextId": context}));
            let resp = c.rpc_stream("SendStreamingMessage", params).await;
            let rest = EventReader::new(resp).rest().await;
            rest.last().expect("an event").1.clone()
        } else {
            say_in(c, said, &context).await
        };
        let got = if last.get("error").is_some() {
            "error"
        } else {
            state_of(&last)
        };
        assert_eq!(got, ends, "{n}: {said}: {last}");
        assert_ne!(reason(&last), "context.busy", "{n}: {last}");
        let v = say_in(&mut clients[(n + 1) % 2], "next", &context).await;
        assert!(v.get("result").is_some(), "{n}: {said}: {v}");
    }
}
