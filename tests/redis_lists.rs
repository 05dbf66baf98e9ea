//! The shared ListTasks indexes in a real `redis-server` (started on a free port), driven
//! through the scripts the replicas run (`SharedOwners`): a context's listing is the same
//! whether its tasks sit in its own hash (small) or in its sorted sets (large), at every size
//! through the move from one to the other, for every filter, time bound, cursor and page
//! size; contexts written before the small form, and tasks an older replica adds to a small
//! context, are listed too; and what one new task costs Redis.

mod common;

use std::sync::Arc;
use std::time::Duration;

use a2a_edge::state::redis::{RedisConfig, RedisStore};
use a2a_edge::state::shared::{News, SharedOwners, SMALL_CONTEXT};
use common::RedisServer;

const PREFIX: &str = "l:";
const STATES: [&str; 3] = [
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_INPUT_REQUIRED",
];

fn owners(redis: &RedisServer) -> SharedOwners {
    let config = RedisConfig {
        url: url::Url::parse(&redis.url()).unwrap(),
        password: None,
        ca_pem: None,
        key_prefix: PREFIX.into(),
        timeout: Duration::from_secs(2),
        rate_lease_max: 1,
        rate_lease: Duration::from_millis(100),
    };
    let metrics = Arc::new(a2a_edge::telemetry::metrics::Metrics::new());
    SharedOwners::new(
        Arc::new(RedisStore::new(config, metrics).unwrap()),
        Duration::from_secs(30),
        Duration::from_secs(600),
    )
}

async fn learn(o: &SharedOwners, who: &str, ctx: &str, task: &str, state: &str, ts: u64) {
    let n = news(ctx, task, state, ts);
    assert!(o.learn(who, "agent", &n, None, None).await.unwrap());
}

fn news(ctx: &str, task: &str, state: &str, ts: u64) -> News {
    News {
        context: Some(ctx.into()),
        task: Some(task.into()),
        state: Some(state.into()),
        ts: Some(ts),
        referenced: None,
        inferred_context: false,
    }
}

/// A task as the test remembers it.
#[derive(Clone, Debug)]
struct Model {
    id: String,
    state: &'static str,
    ts: u64,
}

/// Every page of one query, cursor to cursor: the ids in order, and each page's total.
async fn pages(
    o: &SharedOwners,
    who: &str,
    ctx: &str,
    state: &str,
    after: u64,
    size: usize,
) -> (Vec<String>, Vec<usize>) {
    let (mut ids, mut totals) = (Vec::new(), Vec::new());
    let mut cursor: Option<(u64, String)> = None;
    for _ in 0..200 {
        let (total, mut rows) = o
            .list(
                who,
                ctx,
                state,
                after,
                cursor.as_ref().map(|(t, i)| (*t, i.as_str())),
                size,
            )
            .await
            .unwrap();
        totals.push(total);
        assert!(rows.len() <= size + 1, "{} rows for {size}", rows.len());
        let more = rows.len() > size;
        rows.truncate(size);
        for r in &rows {
            assert_eq!(r.context, ctx, "{r:?}");
            assert!(state.is_empty() || r.state == state, "{r:?}");
        }
        ids.extend(rows.iter().map(|r| r.task.clone()));
        if !more {
            return (ids, totals);
        }
        let last = rows.last().unwrap();
        cursor = Some((last.ts, last.task.clone()));
    }
    panic!("more than 200 pages");
}

/// What the query should give: newest first, ties by id descending (byte order).
fn expected(model: &[Model], state: &str, after: u64) -> Vec<String> {
    let mut m: Vec<&Model> = model
        .iter()
        .filter(|t| (state.is_empty() || t.state == state) && t.ts > after)
        .collect();
    m.sort_by(|a, b| b.ts.cmp(&a.ts).then_with(|| b.id.cmp(&a.id)));
    m.into_iter().map(|t| t.id.clone()).collect()
}

fn exists(redis: &RedisServer, key: &str) -> bool {
    redis.command(&format!("EXISTS {PREFIX}{key}")) == ":1"
}

async fn check_all(o: &SharedOwners, who: &str, ctx: &str, model: &[Model], step: &str) {
    let mid = model.iter().map(|t| t.ts).sum::<u64>() / model.len().max(1) as u64;
    for state in std::iter::once("").chain(STATES) {
        for after in [0, mid] {
            let want = expected(model, state, after);
            for size in [1, 3, 50] {
                let (got, totals) = pages(o, who, ctx, state, after, size).await;
                assert_eq!(
                    got, want,
                    "{step}: state {state:?} after {after} page size {size}"
                );
                assert!(
                    totals.iter().all(|t| *t == want.len()),
                    "{step}: state {state:?} after {after} size {size}: totals {totals:?}"
                );
            }
        }
    }
}

fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// One context grows from 1 to 40 tasks (ids of mixed lengths, timestamps tied in threes,
/// states changing now and then): after every change, every query's pages equal the model,
/// and the tasks sit in the context's hash up to SMALL_CONTEXT, in its sorted sets after.
#[tokio::test]
async fn a_contexts_listing_is_the_same_small_and_large_at_every_size() {
    let redis = RedisServer::start();
    let o = owners(&redis);
    let mut model: Vec<Model> = Vec::new();
    let mut seed = 0x5eed_u64;
    let ctx = "ctx-grow";
    for i in 0..40u64 {
        let state = STATES[(xorshift(&mut seed) % 3) as usize];
        let id = format!("task-{}{i}", "x".repeat((xorshift(&mut seed) % 3) as usize));
        let ts = 1_700_000_000_000_000 + (i / 3) * 1000;
        learn(&o, "alice", ctx, &id, state, ts).await;
        model.push(Model { id, state, ts });
        if i % 4 == 3 {
            // An earlier task moves to another state (and a later timestamp).
            let k = (xorshift(&mut seed) % model.len() as u64) as usize;
            let state = STATES[(STATES.iter().position(|s| *s == model[k].state).unwrap() + 1) % 3];
            let ts = model[k].ts + 500;
            learn(&o, "alice", ctx, &model[k].id.clone(), state, ts).await;
            model[k].state = state;
            model[k].ts = ts;
        }
        let small = model.len() <= SMALL_CONTEXT;
        assert_eq!(
            !exists(&redis, &format!("lc:{ctx}")),
            small,
            "{} tasks",
            model.len()
        );
        assert_eq!(
            redis.command(&format!("HEXISTS {PREFIX}c:{ctx} n")),
            if small { ":1" } else { ":0" },
            "{} tasks",
            model.len()
        );
        check_all(&o, "alice", ctx, &model, &format!("{} tasks", model.len())).await;
    }
    // Nobody else's listing of that context holds or counts anything, small or large.
    let (got, totals) = pages(&o, "bob", ctx, "", 0, 50).await;
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(totals, [0]);
    learn(&o, "alice", "ctx-two", "two", STATES[0], 1).await;
    let (got, totals) = pages(&o, "bob", "ctx-two", "", 0, 50).await;
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(totals, [0]);
}

/// A context first learned from an answer that names no task (a message) is small too.
#[tokio::test]
async fn a_context_learned_without_a_task_is_small() {
    let redis = RedisServer::start();
    let o = owners(&redis);
    let news = News {
        context: Some("ctx-msg".into()),
        ..Default::default()
    };
    assert!(o.learn("alice", "agent", &news, None, None).await.unwrap());
    assert_eq!(redis.command(&format!("HGET {PREFIX}c:ctx-msg n")), "0");
    learn(&o, "alice", "ctx-msg", "later", STATES[0], 5).await;
    assert_eq!(redis.command(&format!("HGET {PREFIX}c:ctx-msg n")), "1");
    assert!(!exists(&redis, "lc:ctx-msg"));
    let (got, totals) = pages(&o, "alice", "ctx-msg", "", 0, 10).await;
    assert_eq!(got, ["later"]);
    assert_eq!(totals, [1]);
}

/// Alice's tasks `{name}-0` to `{name}-2` in `ctx`, one microsecond apart from `ts0`.
async fn learn_three(
    o: &SharedOwners,
    ctx: &str,
    name: &str,
    state: &'static str,
    ts0: u64,
) -> Vec<Model> {
    let mut model = Vec::new();
    for i in 0..3u64 {
        let id = format!("{name}-{i}");
        learn(o, "alice", ctx, &id, state, ts0 + i).await;
        model.push(Model {
            id,
            state,
            ts: ts0 + i,
        });
    }
    model
}

/// A context written before the small form (no `n`, its tasks in `lc`/`lcs`) is listed from
/// its sorted sets and keeps growing there; a small context to which an older replica added
/// a task in `lc` is moved there whole by the next listing, which lists every task.
#[tokio::test]
async fn older_forms_are_listed_whole() {
    let redis = RedisServer::start();
    let o = owners(&redis);
    let ts0 = 1_700_000_000_000_000u64;
    // As written before: the hash without n or task fields, the tasks in sorted sets.
    let mut model = learn_three(&o, "ctx-old", "old", STATES[1], ts0).await;
    assert_eq!(
        redis.command(&format!("HDEL {PREFIX}c:ctx-old n t:old-0 t:old-1 t:old-2")),
        ":4"
    );
    for m in &model {
        for key in [
            "lc:ctx-old".to_string(),
            format!("lcs:7:ctx-old:{}", STATES[1]),
        ] {
            assert_eq!(
                redis.command(&format!("ZADD {PREFIX}{key} {} {}", m.ts, m.id)),
                ":1"
            );
        }
    }
    check_all(&o, "alice", "ctx-old", &model, "old form").await;
    learn(&o, "alice", "ctx-old", "old-3", STATES[2], ts0 + 10).await;
    model.push(Model {
        id: "old-3".into(),
        state: STATES[2],
        ts: ts0 + 10,
    });
    assert!(exists(&redis, &format!("lcs:7:ctx-old:{}", STATES[2])));
    assert_eq!(redis.command(&format!("HEXISTS {PREFIX}c:ctx-old n")), ":0");
    check_all(&o, "alice", "ctx-old", &model, "old form, one more").await;

    // A small context; an older replica's task lands in lc/lcs beside the hash.
    let mut model = learn_three(&o, "ctx-mixed", "mixed", STATES[0], ts0).await;
    assert_eq!(
        redis.command(&format!(
            "HSET {PREFIX}t:by-old o alice c ctx-mixed u agent s {} ts {}",
            STATES[2],
            ts0 + 5
        )),
        ":5"
    );
    for key in [
        "lc:ctx-mixed".to_string(),
        format!("lcs:9:ctx-mixed:{}", STATES[2]),
    ] {
        assert_eq!(
            redis.command(&format!("ZADD {PREFIX}{key} {} by-old", ts0 + 5)),
            ":1"
        );
    }
    model.push(Model {
        id: "by-old".into(),
        state: STATES[2],
        ts: ts0 + 5,
    });
    check_all(&o, "alice", "ctx-mixed", &model, "mixed").await;
    assert_eq!(
        redis.command(&format!("HEXISTS {PREFIX}c:ctx-mixed n")),
        ":0"
    );
    assert_eq!(
        redis.command(&format!("ZCARD {PREFIX}lcs:9:ctx-mixed:{}", STATES[0])),
        ":3"
    );
}

/// What Redis does for one new task in a new context (the common case: most contexts have
/// one task): no sorted set of the context's, and a bounded number of commands. A task that
/// expired leaves a small context's listing and count when a listing meets it.
#[tokio::test]
async fn a_new_task_in_a_new_context_costs_two_sorted_set_writes() {
    let redis = RedisServer::start();
    let o = owners(&redis);
    let ts0 = 1_700_000_000_000_000u64;
    learn(&o, "alice", "ctx-warm", "warm", STATES[0], ts0).await;
    learn(&o, "alice", "ctx-warm", "warm-2", STATES[0], ts0 + 1).await;
    assert_eq!(redis.command("CONFIG RESETSTAT"), "+OK");
    learn(&o, "alice", "ctx-one", "one", STATES[1], ts0 + 2).await;
    assert_eq!(redis.calls("zadd"), 2, "the caller's two indexes only");
    assert_eq!(
        redis.calls("exists"),
        1,
        "one EXISTS for the two oldest entries"
    );
    let all: u64 = [
        "hmget", "hset", "pexpire", "zadd", "zrange", "exists", "zrem",
    ]
    .iter()
    .map(|c| redis.calls(c))
    .sum();
    assert!(all <= 12, "{all} commands for a new task in a new context");
    assert!(!exists(&redis, "lc:ctx-one"));
    assert!(!exists(&redis, &format!("lcs:7:ctx-one:{}", STATES[1])));
    assert_eq!(
        redis.command(&format!("HGET {PREFIX}c:ctx-one t:one")),
        format!("{} {}", ts0 + 2, STATES[1])
    );

    // The task expires: the context's listing no longer holds or counts it, and drops it.
    assert_eq!(redis.command(&format!("DEL {PREFIX}t:warm")), ":1");
    let (total, rows) = o.list("alice", "ctx-warm", "", 0, None, 10).await.unwrap();
    assert_eq!(total, 1);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].task, "warm-2");
    assert_eq!(
        redis.command(&format!("HEXISTS {PREFIX}c:ctx-warm t:warm")),
        ":0"
    );
    assert_eq!(redis.command(&format!("HGET {PREFIX}c:ctx-warm n")), "1");
}

/// Redis gone while answers are being learned: every one of them fails closed (none is taken
/// for learned), and once Redis is back the next answers are learned again, with no restart.
#[tokio::test]
async fn answers_learned_while_redis_is_gone_fail_closed_and_the_next_ones_go() {
    let mut redis = RedisServer::start();
    let o = Arc::new(owners(&redis));
    let ts0 = 1_700_000_000_000_000u64;
    learn(&o, "alice", "ctx-before", "before", STATES[0], ts0).await;
    redis.stop();
    let mut calls = Vec::new();
    for i in 0..40u64 {
        let o = o.clone();
        calls.push(tokio::spawn(async move {
            let n = news(&format!("ctx-{i}"), &format!("t-{i}"), STATES[0], ts0 + i);
            o.learn("alice", "agent", &n, None, None).await
        }));
    }
    for (i, c) in calls.into_iter().enumerate() {
        assert!(c.await.unwrap().is_err(), "answer {i} taken for learned");
    }
    redis.restart();
    // The connection comes back by itself (at most one attempt per 500 ms).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let n = news("ctx-after", "after", STATES[0], ts0 + 100);
        match o.learn("alice", "agent", &n, None, None).await {
            Ok(true) => break,
            other => assert!(
                std::time::Instant::now() < deadline,
                "not learned after Redis came back: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(redis.command(&format!("HGET {PREFIX}t:after o")), "alice");
}
