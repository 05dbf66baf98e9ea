//! The shared ListTasks indexes in a real `redis-server` (started on a free port), driven
//! through the scripts the replicas run (`SharedOwners`): a context's listing is the same
//! whether its tasks sit in its own hash (small) or in its sorted sets (large), at every size
//! through the move from one to the other, for every filter, time bound, cursor and page
//! size; contexts written before the small form, and tasks an older replica adds to a small
//! context, are listed too; what one new task costs Redis; expired tasks leave every index
//! as the owner's answers come; and no listing call does unbounded work (expired entries,
//! stale cursors among ties). The write of a turn's last answer releases the turn's busy
//! lease in the same script, refused or not, and only its own.

mod common;

use std::sync::Arc;
use std::time::Duration;

use a2a_edge::state::redis::{RedisConfig, RedisStore};
use a2a_edge::state::shared::{News, SharedOwners, TurnVerdict, SMALL_CONTEXT};
use common::RedisServer;

const PREFIX: &str = "l:";
const STATES: [&str; 3] = [
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_INPUT_REQUIRED",
];

fn owners(redis: &RedisServer) -> SharedOwners {
    owners_keeping(redis, Duration::from_secs(600))
}

/// Owners whose tasks Redis keeps `retention` after their last write.
fn owners_keeping(redis: &RedisServer, retention: Duration) -> SharedOwners {
    owners_with(redis, retention, 100_000)
}

/// Owners whose tasks Redis keeps `retention` after their last write, `cap` at most each.
fn owners_with(redis: &RedisServer, retention: Duration, cap: u64) -> SharedOwners {
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
        retention,
        cap,
    )
}

async fn learn(o: &SharedOwners, who: &str, ctx: &str, task: &str, state: &str, ts: u64) {
    let n = news(ctx, task, state, ts);
    assert!(o.learn(who, "agent", &n, None, None, None).await.unwrap());
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
        let page = o
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
        totals.push(page.total);
        let mut rows = page.rows;
        assert!(rows.len() <= size + 1, "{} rows for {size}", rows.len());
        let more = rows.len() > size;
        rows.truncate(size);
        for r in &rows {
            assert!(ctx.is_empty() || r.context == ctx, "{r:?}");
            assert!(state.is_empty() || r.state == state, "{r:?}");
        }
        ids.extend(rows.iter().map(|r| r.task.clone()));
        cursor = match (more, page.stopped) {
            (true, _) => rows.last().map(|r| (r.ts, r.task.clone())),
            (false, Some(stop)) => Some(stop),
            (false, None) => return (ids, totals),
        };
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
    assert!(o
        .learn("alice", "agent", &news, None, None, None)
        .await
        .unwrap());
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
/// one task): no sorted set of the context's (the owner's two indexes and its expiry index),
/// and a bounded number of commands. A task that expired leaves a small context's listing
/// and count when a listing meets it.
#[tokio::test]
async fn a_new_task_in_a_new_context_costs_three_sorted_set_writes() {
    let redis = RedisServer::start();
    let o = owners(&redis);
    let ts0 = 1_700_000_000_000_000u64;
    learn(&o, "alice", "ctx-warm", "warm", STATES[0], ts0).await;
    learn(&o, "alice", "ctx-warm", "warm-2", STATES[0], ts0 + 1).await;
    assert_eq!(redis.command("CONFIG RESETSTAT"), "+OK");
    learn(&o, "alice", "ctx-one", "one", STATES[1], ts0 + 2).await;
    assert_eq!(
        redis.calls("zadd"),
        3,
        "the caller's two indexes and its expiry index only"
    );
    assert_eq!(
        redis.calls("zrangebyscore"),
        1,
        "one look for expired tasks, none due"
    );
    let all: u64 = [
        "hmget",
        "hset",
        "pexpire",
        "zadd",
        "zrange",
        "zrangebyscore",
        "exists",
        "zrem",
        "time",
    ]
    .iter()
    .map(|c| redis.calls(c))
    .sum();
    assert!(all <= 14, "{all} commands for a new task in a new context");
    assert!(!exists(&redis, "lc:ctx-one"));
    assert!(!exists(&redis, &format!("lcs:7:ctx-one:{}", STATES[1])));
    assert_eq!(
        redis.command(&format!("HGET {PREFIX}c:ctx-one t:one")),
        format!("{} {}", ts0 + 2, STATES[1])
    );

    // The task expires: the context's listing no longer holds or counts it, and drops it.
    assert_eq!(redis.command(&format!("DEL {PREFIX}t:warm")), ":1");
    let page = o.list("alice", "ctx-warm", "", 0, None, 10).await.unwrap();
    assert_eq!(page.total, 1);
    assert_eq!(page.rows.len(), 1);
    assert_eq!(page.rows[0].task, "warm-2");
    assert_eq!(page.stopped, None);
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
            o.learn("alice", "agent", &n, None, None, None).await
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
        match o.learn("alice", "agent", &n, None, None, None).await {
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

/// Whole-number reply of one command (`:5`).
fn int(redis: &RedisServer, line: &str) -> u64 {
    let r = redis.command(line);
    r.strip_prefix(':')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}: {r}"))
}

/// Tasks that expire leave every index that held them as the owner's next answers come:
/// the owner's (all, and by state), a large context's (all, and by state) and a small
/// context's own hash, with timestamps tied (an agent that sends none), whatever their ids.
/// Before, only the owner's index lost entries (two per new task, the lowest by timestamp
/// and id, if they had expired), and an active owner's indexes grew for ever.
#[tokio::test]
async fn expired_tasks_leave_every_index_as_new_ones_come() {
    let redis = RedisServer::start();
    let retention = Duration::from_millis(2000);
    let o = owners_keeping(&redis, retention);
    let begun = std::time::Instant::now();
    // 24 tasks in a large context, 2 in each of 8 small ones: all at timestamp 0.
    for i in 0..24 {
        learn(&o, "alice", "big", &format!("z-old-{i}"), STATES[i % 3], 0).await;
    }
    for c in 0..8 {
        for i in 0..2 {
            let id = format!("z-old-{c}-{i}");
            learn(&o, "alice", &format!("small-{c}"), &id, STATES[i % 2], 0).await;
        }
    }
    assert_eq!(int(&redis, &format!("ZCARD {PREFIX}lt:5:alice")), 40);
    // Before they expire, a task in each state of the large context and one in a small
    // context keep those contexts (and their indexes) alive past the others.
    tokio::time::sleep(Duration::from_millis(1200).saturating_sub(begun.elapsed())).await;
    let mut live = Vec::new();
    for (i, state) in STATES.iter().enumerate() {
        learn(&o, "alice", "big", &format!("k-keep-{i}"), state, 0).await;
        live.push(("big".to_string(), format!("k-keep-{i}"), *state));
    }
    learn(&o, "alice", "small-0", "k-keep-s", STATES[0], 0).await;
    live.push(("small-0".to_string(), "k-keep-s".to_string(), STATES[0]));
    tokio::time::sleep(Duration::from_millis(2200).saturating_sub(begun.elapsed())).await;
    // The first 40 expired; new tasks come (ids sorting first).
    for i in 0..12 {
        let ctx = if i % 3 == 0 { "small-0" } else { "big" };
        let id = format!("a-new-{i:02}");
        learn(&o, "alice", ctx, &id, STATES[i % 3], 0).await;
        live.push((ctx.to_string(), id, STATES[i % 3]));
    }
    let card = |key: &str| int(&redis, &format!("ZCARD {PREFIX}{key}"));
    assert_eq!(card("lt:5:alice"), 16, "the owner's index");
    assert_eq!(card("le:5:alice"), 16, "the owner's expiry index");
    for state in STATES {
        let want = live.iter().filter(|t| t.2 == state).count() as u64;
        assert_eq!(card(&format!("ls:5:alice:{state}")), want, "{state}");
        let in_big = live.iter().filter(|t| t.2 == state && t.0 == "big").count() as u64;
        assert_eq!(card(&format!("lcs:3:big:{state}")), in_big, "big, {state}");
    }
    let in_big = live.iter().filter(|t| t.0 == "big").count() as u64;
    assert_eq!(card("lc:big"), in_big, "the large context's index");
    assert_eq!(redis.command(&format!("HGET {PREFIX}c:small-0 n")), "5");
    let fields = redis.command(&format!("HKEYS {PREFIX}c:small-0"));
    let tasks: Vec<&str> = fields.lines().filter(|f| f.starts_with("t:")).collect();
    assert_eq!(tasks.len(), 5, "{fields}");
    // Every listing holds the live tasks and counts no others.
    let (got, totals) = pages(&o, "alice", "", "", 0, 5).await;
    let mut want: Vec<String> = live.iter().map(|t| t.1.clone()).collect();
    want.sort_by(|a, b| b.cmp(a));
    assert_eq!(got, want);
    assert!(totals.iter().all(|t| *t == 16), "{totals:?}");
    assert!(
        begun.elapsed() < Duration::from_millis(3100),
        "too slow to tell: the live tasks may have expired too"
    );
}

/// One listing never passes over more than LIST_PASS_BUDGET entries it does not list (the
/// expired tasks of an index written before the expiry index, or by an older replica): the
/// page ends early with where it stopped, and page after page the listing gives exactly the
/// live tasks, in order. Before, one call walked the whole index (500k entries blocked Redis
/// 1.86 s, for every replica).
#[tokio::test]
async fn one_listing_passes_over_a_bounded_number_of_expired_entries() {
    use a2a_edge::state::shared::LIST_PASS_BUDGET;
    let redis = RedisServer::start();
    let o = owners(&redis);
    let n = 1500u64;
    let mut live = Vec::new();
    let mut gone = Vec::new();
    for i in 0..n {
        let id = format!("t-{i:05}");
        learn(&o, "alice", &format!("c-{i}"), &id, STATES[0], 1_000 + i).await;
        if i % 300 == 7 {
            live.push(id);
        } else {
            gone.push(id);
        }
    }
    // Their keys go without the expiry index knowing (as if written before it).
    for chunk in gone.chunks(200) {
        let keys: Vec<String> = chunk.iter().map(|id| format!("{PREFIX}t:{id}")).collect();
        assert_eq!(
            int(&redis, &format!("DEL {}", keys.join(" "))),
            chunk.len() as u64
        );
    }
    live.reverse();
    let mut cursor: Option<(u64, String)> = None;
    let mut got = Vec::new();
    let mut calls = 0;
    loop {
        assert_eq!(redis.command("CONFIG RESETSTAT"), "+OK");
        let page = o
            .list(
                "alice",
                "",
                STATES[0],
                0,
                cursor.as_ref().map(|(t, i)| (*t, i.as_str())),
                2,
            )
            .await
            .unwrap();
        calls += 1;
        let reads = redis.calls("hmget");
        assert!(
            reads as usize <= LIST_PASS_BUDGET + 3 * 2 + 2,
            "{reads} task reads in one call"
        );
        let more = page.rows.len() > 2;
        let rows: Vec<_> = page.rows.into_iter().take(2).collect();
        got.extend(rows.iter().map(|r| r.task.clone()));
        cursor = match (more, page.stopped) {
            (true, _) => rows.last().map(|r| (r.ts, r.task.clone())),
            (false, Some(stop)) => Some(stop),
            (false, None) => break,
        };
        assert!(calls < 100, "no end");
    }
    assert_eq!(got, live);
    assert!(calls >= (gone.len() / LIST_PASS_BUDGET), "{calls} calls");
    // What the listings met is gone from the index.
    assert_eq!(
        int(&redis, &format!("ZCARD {PREFIX}ls:5:alice:{}", STATES[0])),
        live.len() as u64
    );
}

/// A cursor whose task left, among thousands tied on its timestamp: the page starts right
/// after the ties it already gave (a binary search over them), never walks past them.
/// Before, every such call read through all the ties before it (91 ms of Redis at 100k).
#[tokio::test]
async fn a_stale_cursor_among_ties_starts_after_them_at_once() {
    let redis = RedisServer::start();
    let o = owners(&redis);
    for i in 0..3000 {
        learn(
            &o,
            "alice",
            &format!("c-{i}"),
            &format!("t-{i:04}"),
            STATES[0],
            7,
        )
        .await;
    }
    // Newer and older tasks around the ties.
    learn(&o, "alice", "c-new", "new", STATES[0], 9).await;
    learn(&o, "alice", "c-old", "old", STATES[0], 5).await;
    let cases: [(u64, &str, &[&str]); 6] = [
        // A cursor id between two tied ids (its task left).
        (7, "t-1500x", &["t-1500", "t-1499", "t-1498"]),
        // Above every tied id: the ties from the first.
        (7, "u", &["t-2999", "t-2998", "t-2997"]),
        // Below every tied id: past them all.
        (7, "a", &["old"]),
        (7, "t-0000", &["old"]),
        // A timestamp no task has: from the next older one.
        (8, "zz", &["t-2999", "t-2998", "t-2997"]),
        (6, "", &["old"]),
    ];
    for (ts, id, want) in cases {
        assert_eq!(redis.command("CONFIG RESETSTAT"), "+OK");
        let page = o.list("alice", "", "", 0, Some((ts, id)), 3).await.unwrap();
        let got: Vec<&str> = page.rows.iter().take(3).map(|r| r.task.as_str()).collect();
        assert_eq!(got, want, "cursor ({ts}, {id})");
        let ranges = redis.calls("zrevrange");
        assert!(ranges <= 16, "cursor ({ts}, {id}): {ranges} range reads");
    }
}

/// What the reaper takes out is the expired task's alone: an id another caller claimed after
/// it expired keeps its new owner's entries, and an id the same caller learned again in
/// another context keeps the owner's entries (only the old context's go). (Expiry is made
/// due by hand: the expiry index's member, as the module documents it, scored 0.)
#[tokio::test]
async fn the_reaper_takes_only_what_the_expired_task_left() {
    let redis = RedisServer::start();
    let o = owners(&redis);
    let w = STATES[0];
    let due = |owner: &str, task: &str, ctx: &str| {
        let member = format!("{}:{task}{}:{ctx}{w}", task.len(), ctx.len());
        let key = format!("{PREFIX}le:{}:{owner}", owner.len());
        assert_eq!(redis.command(&format!("ZADD {key} XX CH 0 {member}")), ":1");
    };
    let members = |key: &str| -> Vec<String> {
        let mut m: Vec<String> = redis
            .command(&format!("ZRANGE {PREFIX}{key} 0 -1"))
            .lines()
            .map(str::to_string)
            .collect();
        m.sort();
        m
    };
    let fields = |ctx: &str| -> Vec<String> {
        let mut f: Vec<String> = redis
            .command(&format!("HKEYS {PREFIX}c:{ctx}"))
            .lines()
            .filter(|f| f.starts_with("t:"))
            .map(str::to_string)
            .collect();
        f.sort();
        f
    };
    // Alice's task expires; Bob's answer then names the same id.
    learn(&o, "alice", "a-ctx", "shared", w, 1).await;
    assert_eq!(redis.command(&format!("DEL {PREFIX}t:shared")), ":1");
    learn(&o, "bob", "b-ctx", "shared", w, 2).await;
    due("alice", "shared", "a-ctx");
    learn(&o, "alice", "a-ctx", "a-next", w, 3).await;
    assert_eq!(members("lt:5:alice"), ["a-next"]);
    assert_eq!(members(&format!("ls:5:alice:{w}")), ["a-next"]);
    assert_eq!(fields("a-ctx"), ["t:a-next"]);
    assert_eq!(redis.command(&format!("HGET {PREFIX}c:a-ctx n")), "1");
    assert_eq!(members("lt:3:bob"), ["shared"]);
    assert_eq!(members(&format!("ls:3:bob:{w}")), ["shared"]);
    assert_eq!(fields("b-ctx"), ["t:shared"]);
    assert_eq!(redis.command(&format!("HGET {PREFIX}t:shared o")), "bob");
    // Alice's task expires and her answer names it again, in another context.
    learn(&o, "alice", "a-ctx", "again", w, 4).await;
    assert_eq!(redis.command(&format!("DEL {PREFIX}t:again")), ":1");
    learn(&o, "alice", "a-ctx3", "again", w, 5).await;
    due("alice", "again", "a-ctx");
    learn(&o, "alice", "a-ctx", "a-more", w, 6).await;
    assert_eq!(members("lt:5:alice"), ["a-more", "a-next", "again"]);
    assert_eq!(
        members(&format!("ls:5:alice:{w}")),
        ["a-more", "a-next", "again"]
    );
    assert_eq!(fields("a-ctx"), ["t:a-more", "t:a-next"]);
    assert_eq!(redis.command(&format!("HGET {PREFIX}c:a-ctx n")), "2");
    assert_eq!(fields("a-ctx3"), ["t:again"]);
    let (got, _) = pages(&o, "alice", "", "", 0, 10).await;
    assert_eq!(got, ["a-more", "again", "a-next"]);
    let (got, _) = pages(&o, "bob", "", "", 0, 10).await;
    assert_eq!(got, ["shared"]);
}

/// An owner keeps at most `state.max_tasks_per_owner` tasks in Redis: past it, each new task
/// takes out the owner's least recently written one, its key and every index entry (the
/// owner's, a large context's, a small context's own hash). Another owner's stay.
#[tokio::test]
async fn an_owner_keeps_at_most_its_cap_of_tasks() {
    let redis = RedisServer::start();
    let o = owners_with(&redis, Duration::from_secs(600), 16);
    let ts = |i: u64| 1_700_000_000_000_000 + i * 1000;
    let mut model = Vec::new();
    for i in 0..40u64 {
        // 30 in one context (large past SMALL_CONTEXT), then 10 in another (small).
        let ctx = if i < 30 { "ctx-big" } else { "ctx-small" };
        let id = format!("a-{i:02}");
        learn(&o, "alice", ctx, &id, STATES[(i % 3) as usize], ts(i)).await;
        model.push((
            ctx,
            Model {
                id,
                state: STATES[(i % 3) as usize],
                ts: ts(i),
            },
        ));
    }
    for i in 0..5u64 {
        learn(&o, "bob", "ctx-bob", &format!("b-{i}"), STATES[0], ts(i)).await;
    }
    let kept: Vec<Model> = model[24..].iter().map(|(_, m)| m.clone()).collect();
    assert_eq!(
        pages(&o, "alice", "", "", 0, 100).await.0,
        expected(&kept, "", 0)
    );
    for state in STATES {
        let (ids, totals) = pages(&o, "alice", "", state, 0, 100).await;
        assert_eq!(ids, expected(&kept, state, 0), "{state}");
        assert!(
            totals.iter().all(|t| *t == ids.len()),
            "{state}: {totals:?}"
        );
    }
    for ctx in ["ctx-big", "ctx-small"] {
        let want: Vec<Model> = model[24..]
            .iter()
            .filter(|(c, _)| *c == ctx)
            .map(|(_, m)| m.clone())
            .collect();
        assert_eq!(
            pages(&o, "alice", ctx, "", 0, 100).await.0,
            expected(&want, "", 0),
            "{ctx}"
        );
    }
    assert_eq!(int(&redis, &format!("ZCARD {PREFIX}lt:5:alice")), 16);
    assert_eq!(int(&redis, &format!("ZCARD {PREFIX}le:5:alice")), 16);
    assert!(!exists(&redis, "t:a-00") && !exists(&redis, "t:a-23"));
    assert!(exists(&redis, "t:a-24") && exists(&redis, "t:a-39"));
    assert_eq!(pages(&o, "bob", "", "", 0, 100).await.0.len(), 5);
}

/// The cap's eviction deletes a task's key only while it is still the owner's, in the
/// context its index entry names: a key that another owner holds now (the id expired and
/// was claimed again) stays, and so does the owner's own task of that id learned anew in
/// another context (it is listed); only the stale index entries go, and the cap catches up
/// at the next new task.
#[tokio::test]
async fn the_caps_eviction_spares_a_key_that_is_no_longer_the_owners() {
    let redis = RedisServer::start();
    let o = owners_with(&redis, Duration::from_secs(600), 16);
    let ts = |i: u64| 1_700_000_000_000_000 + i * 1000;
    for i in 0..16u64 {
        learn(&o, "alice", "ctx-a", &format!("a-{i:02}"), STATES[0], ts(i)).await;
    }
    // a-00 (alice's least recently written) is mallory's now; a-01 is alice's anew, in
    // another context (its entry in ctx-a stale beside the new one).
    redis.command(&format!("HSET {PREFIX}t:a-00 o mallory c ctx-m"));
    redis.command(&format!("DEL {PREFIX}t:a-01"));
    learn(&o, "alice", "ctx-other", "a-01", STATES[0], ts(1)).await;
    for i in 16..19u64 {
        learn(&o, "alice", "ctx-a", &format!("a-{i:02}"), STATES[0], ts(i)).await;
    }
    assert_eq!(
        redis.command(&format!("HGET {PREFIX}t:a-00 o")),
        "mallory",
        "mallory's task was deleted"
    );
    assert_eq!(
        redis.command(&format!("HGET {PREFIX}t:a-01 c")),
        "ctx-other",
        "alice's task in another context was deleted"
    );
    assert!(!exists(&redis, "t:a-02") && !exists(&redis, "t:a-03"));
    let (ids, _) = pages(&o, "alice", "", "", 0, 100).await;
    let want: Vec<String> = std::iter::once("a-01".to_string())
        .chain((4..19).map(|i| format!("a-{i:02}")))
        .rev()
        .collect();
    let mut got = ids.clone();
    got.sort_by(|a, b| b.cmp(a));
    assert_eq!(got, want);
    assert_eq!(int(&redis, &format!("ZCARD {PREFIX}lt:5:alice")), 16);
}

/// The cap bounds an owner's contexts too: a context goes with the last of its tasks the cap
/// takes out, and a context without tasks (made by a turn on a new id, or by an answer that
/// names no task) is an entry of the cap itself, one per context (its first task's takes its
/// place). Not a context a turn or a follow-up holds (it stays counted, as written now, and
/// the cap goes on past it), one that still has a task, nor one another owner holds now; a
/// large context goes once its sorted sets are empty. A turn on a new context past the cap
/// makes room too. Before, each evicted task left its context for the retention, and
/// contexts without tasks were not counted: an owner's contexts grew with its rate.
#[tokio::test]
async fn the_caps_eviction_takes_out_the_contexts_it_empties() {
    let redis = RedisServer::start();
    let cap = 64;
    let o = owners_with(&redis, Duration::from_secs(600), cap);
    let ts = |i: u64| 1_700_000_000_000_000 + i;
    let turn = |ctx: &'static str, token: &'static str| {
        let o = &o;
        async move {
            let v = o.turn(ctx, "alice", None, None, token, None, Some("agent"));
            assert_eq!(v.await.unwrap(), TurnVerdict::Leased(Some("agent".into())));
        }
    };
    let le = format!("{PREFIX}le:5:alice");
    let counted =
        |ctx: &str| redis.command(&format!("ZSCORE {le} 0:{}:{ctx}", ctx.len())) != "(nil)";
    // (the context, what makes it, its tasks, kept once the cap took out everything of
    // this phase)
    let rows: [(&str, &str, u64, bool); 11] = [
        ("c-busy", "one task, then a turn that holds it", 1, true),
        ("c-follow", "one task, and a follow-up's holder", 1, true),
        ("c-two", "one task now, one after this phase", 1, true),
        ("c-bare", "a turn on a new id, ended", 0, false),
        ("c-bare-busy", "a turn on a new id, running", 0, true),
        (
            "c-bare-task",
            "a turn on a new id, ended, then a task",
            1,
            false,
        ),
        ("c-message", "an answer with no task", 0, false),
        (
            "c-mallory",
            "one task; then mallory claimed the id",
            1,
            true,
        ),
        ("c-large", "17 tasks (its sorted sets)", 17, false),
        (
            "c-large-busy",
            "17 tasks, then a turn that holds it",
            17,
            true,
        ),
        // (last: the cap's last step takes an entry out for good)
        ("c-alone", "one task", 1, false),
    ];
    let mut entries = 0;
    for (n, (ctx, what, tasks, _)) in rows.iter().enumerate() {
        if what.starts_with("a turn") {
            turn(ctx, "tok-bare").await;
            if what.contains("ended") {
                assert!(o.release(ctx, "tok-bare").await.unwrap());
            }
        }
        if what.starts_with("an answer") {
            let news = News {
                context: Some((*ctx).into()),
                ..Default::default()
            };
            assert!(o
                .learn("alice", "agent", &news, None, None, None)
                .await
                .unwrap());
        }
        for i in 0..*tasks {
            let id = format!("p-{n}-{i:02}");
            learn(&o, "alice", ctx, &id, STATES[0], ts(i)).await;
        }
        entries += tasks.max(&1);
        match *ctx {
            "c-busy" | "c-large-busy" => turn(ctx, "tok-busy").await,
            "c-follow" => {
                redis.command(&format!(
                    "HSET {PREFIX}bf:{ctx} t p-1-00 tok-f 99999999999999"
                ));
            }
            "c-mallory" => {
                redis.command(&format!("HSET {PREFIX}c:{ctx} o mallory"));
            }
            _ => {}
        }
        // (each row's entries older than the next row's: the index's scores are ms)
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(
        int(&redis, &format!("ZCARD {le}")),
        entries,
        "one entry each"
    );
    // New tasks until the cap took out the last entry of the above (c-two gets its second
    // task among them, before the cap is reached), then one more: every step past a
    // context a turn holds takes one more out the next time.
    assert!(entries + 6 < cap);
    let fresh = |i: u64| format!("f-{i:02}");
    let mut i = 0;
    while exists(&redis, "c:c-alone") {
        assert!(i < 2 * cap, "the cap never reached c-alone");
        learn(&o, "alice", &fresh(i), &fresh(i), STATES[0], ts(200 + i)).await;
        if i == 5 {
            learn(&o, "alice", "c-two", "p-3-later", STATES[0], ts(100)).await;
        }
        i += 1;
    }
    learn(&o, "alice", &fresh(i), &fresh(i), STATES[0], ts(200 + i)).await;
    assert_eq!(int(&redis, &format!("ZCARD {le}")), cap);
    for (n, (ctx, what, tasks, kept)) in rows.iter().enumerate() {
        assert_eq!(exists(&redis, &format!("c:{ctx}")), *kept, "{ctx}: {what}");
        if *tasks > 0 {
            assert!(!exists(&redis, &format!("t:p-{n}-00")), "{ctx}: {what}");
        }
        let bare = *kept && *ctx != "c-two" && *ctx != "c-mallory";
        assert_eq!(counted(ctx), bare, "{ctx}: {what}: an entry of its own");
    }
    assert_eq!(redis.command(&format!("HGET {PREFIX}c:c-two n")), "1");
    assert_eq!(
        pages(&o, "alice", "c-two", "", 0, 10).await.0,
        ["p-3-later"]
    );
    assert_eq!(
        redis.command(&format!("HGET {PREFIX}c:c-mallory o")),
        "mallory"
    );
    let last = fresh(i);
    assert!(exists(&redis, &format!("t:{last}")) && exists(&redis, &format!("c:{last}")));
    // A turn on a new context past the cap makes room for it.
    turn("c-turned", "tok-t").await;
    assert_eq!(int(&redis, &format!("ZCARD {le}")), cap);
    assert!(counted("c-turned"));
}

/// A known task written into its context's hash made again (the hash expired first: a
/// shorter `task_retention_ms` since, or an evicting Redis) is counted there, so the cap
/// never takes that context for one without tasks while the task lives.
#[tokio::test]
async fn a_known_task_in_a_context_made_again_is_counted() {
    let redis = RedisServer::start();
    let o = owners_with(&redis, Duration::from_secs(600), 16);
    learn(&o, "alice", "c-again", "k-1", STATES[0], 1).await;
    // (by a turn that names the task, or by the task's next answer)
    redis.command(&format!("DEL {PREFIX}c:c-again"));
    turn_and_release(&o, "c-again", Some("k-1"), "tok").await;
    learn(&o, "alice", "c-again", "k-1", STATES[1], 2).await;
    assert_eq!(redis.command(&format!("HGET {PREFIX}c:c-again n")), "1");
    redis.command(&format!("DEL {PREFIX}c:c-again"));
    learn(&o, "alice", "c-again", "k-1", STATES[2], 3).await;
    assert_eq!(redis.command(&format!("HGET {PREFIX}c:c-again n")), "1");
    for i in 0..20u64 {
        learn(
            &o,
            "alice",
            &format!("c-{i}"),
            &format!("k-x{i}"),
            STATES[0],
            10 + i,
        )
        .await;
    }
    // k-1 went to the cap, and its context with it.
    assert!(!exists(&redis, "t:k-1") && !exists(&redis, "c:c-again"));
}

/// A turn, or an answer, that names a known task its small context's hash does not hold
/// (the hash expired before the task and was made again, by the turn or by a replica before
/// 2026-12-07, which wrote `n = 0`) writes it there and counts the tasks the hash holds, at
/// once. So the context is counted as one without tasks only when its last task expires,
/// and never while a task of it lives. A large context made again stays large (its tasks are
/// in its sorted sets).
#[tokio::test]
async fn a_turn_or_an_answer_counts_a_known_task_its_context_made_again_lacks() {
    let older_turn = "HSET l:c:c-again o alice w - n 0";
    let older_answer = "HSET l:c:c-again o alice w - n 0 t:k-0 \"1 TASK_STATE_WORKING\"";
    let rows: [(&str, u64, &str, &[&str], &str); 7] = [
        // (what happened, tasks, the hash made again as, then what names which task, n)
        ("its hash expired", 1, "", &["turn k-0"], "1"),
        ("an older turn made it", 1, older_turn, &["turn k-0"], "1"),
        (
            "an older answer made it",
            1,
            older_answer,
            &["turn k-0"],
            "1",
        ),
        (
            "its hash expired, two tasks",
            2,
            "",
            &["turn k-0", "turn k-1"],
            "2",
        ),
        ("then an answer", 2, "", &["turn k-0", "learn k-1"], "2"),
        (
            "an older answer, then an answer",
            2,
            older_answer,
            &["learn k-1"],
            "2",
        ),
        (
            "its hash expired, large",
            SMALL_CONTEXT as u64 + 1,
            "",
            &["turn k-0"],
            "(nil)",
        ),
    ];
    for (how, tasks, made, steps, n) in rows {
        let redis = RedisServer::start();
        let o = owners_with(&redis, Duration::from_secs(600), 100);
        for i in 0..tasks {
            learn(&o, "alice", "c-again", &format!("k-{i}"), STATES[0], 1 + i).await;
        }
        let ck = format!("{PREFIX}c:c-again");
        let le = format!("{PREFIX}le:5:alice");
        redis.command(&format!("DEL {ck}"));
        if !made.is_empty() {
            redis.command(made);
            // (as counted then: an entry of its own)
            redis.command(&format!("ZADD {le} 99999999999999 0:7:c-again"));
        }
        for step in steps {
            let (what, task) = step.split_once(' ').unwrap();
            if what == "learn" {
                learn(&o, "alice", "c-again", task, STATES[0], 9).await;
                continue;
            }
            turn_and_release(&o, "c-again", Some(task), "tok").await;
        }
        assert_eq!(redis.command(&format!("HGET {ck} n")), n, "{how}");
        let (ids, _) = pages(&o, "alice", "c-again", "", 0, 100).await;
        assert_eq!(ids.len() as u64, tasks, "{how}: {ids:?}");
        let zscore = redis.command(&format!("ZSCORE {le} 0:7:c-again"));
        assert_eq!(zscore, "(nil)", "{how}: counted as without tasks");
        if tasks > 1 {
            continue;
        }
        assert_eq!(
            redis.command(&format!("HGET {ck} t:k-0")),
            format!("1 {}", STATES[0]),
            "{how}"
        );
        // The task expires (its entry due now) while the context lives on: the owner's next
        // answer takes the task out and counts the context as one without tasks.
        let member = format!("3:k-07:c-again{}", STATES[0]);
        redis.command(&format!("ZADD {le} 0 {member}"));
        redis.command(&format!("DEL {PREFIX}t:k-0"));
        learn(&o, "alice", "c-other", "x-1", STATES[0], 9).await;
        assert_eq!(redis.command(&format!("HGET {ck} n")), "0", "{how}");
        let members = redis.command(&format!("ZRANGE {le} 0 -1"));
        let mut members: Vec<&str> = members.lines().collect();
        members.sort_unstable();
        assert_eq!(
            members,
            ["0:7:c-again", "3:x-17:c-otherTASK_STATE_WORKING"],
            "{how}"
        );
    }
}

/// A turn of alice's on `ctx` (naming `task`), leased and released.
async fn turn_and_release(o: &SharedOwners, ctx: &str, task: Option<&str>, token: &str) {
    let v = o.turn(ctx, "alice", task, None, token, None, Some("agent"));
    assert_eq!(v.await.unwrap(), TurnVerdict::Leased(Some("agent".into())));
    assert!(o.release(ctx, token).await.unwrap());
}

/// A context without tasks whose owner's expiry index was lost (before 2026-12-07 the index
/// could expire while turns kept the context) is counted again by its next turn, within the
/// cap; not a context whose hash holds a task (`n = 0` beside it, as a replica before
/// 2026-12-07 could leave it): that one is not without tasks.
#[tokio::test]
async fn a_turn_counts_again_a_context_without_tasks_that_lost_its_entry() {
    let rows = [
        // (the context, its hash's task field, counted again)
        ("c-bare", "", true),
        ("c-task", "t:k-0 \"1 TASK_STATE_WORKING\"", false),
    ];
    for (ctx, field, counted) in rows {
        let redis = RedisServer::start();
        let o = owners_with(&redis, Duration::from_secs(600), 100);
        let le = format!("{PREFIX}le:5:alice");
        let turn = |token| turn_and_release(&o, ctx, None, token);
        turn("tok-1").await;
        let member = format!("0:6:{ctx}");
        assert_eq!(redis.command(&format!("ZRANGE {le} 0 -1")), member);
        redis.command(&format!("DEL {le}"));
        if !field.is_empty() {
            redis.command(&format!("HSET {PREFIX}c:{ctx} {field}"));
        }
        turn("tok-2").await;
        let members = redis.command(&format!("ZRANGE {le} 0 -1"));
        let expected = if counted { member.as_str() } else { "" };
        assert_eq!(members, expected, "{ctx}");
        assert_eq!(redis.command(&format!("HGET {PREFIX}c:{ctx} n")), "0");
        if counted {
            let ttl = int(&redis, &format!("PTTL {le}"));
            assert!(ttl > 500_000, "the index expires with the context: {ttl}");
        }
    }
}

/// A context whose tasks expire while its turns keep it (messages answered without a task)
/// stays counted by the cap: the owner's next answer takes the expired task out and gives
/// the context an entry of its own, due when the context's key expires; also when a listing
/// of the context took the expired task out of it first.
#[tokio::test]
async fn a_context_its_turns_keep_after_its_tasks_expire_stays_counted() {
    for listed in [false, true] {
        a_context_kept_after_its_tasks_expire(listed).await;
    }
}

async fn a_context_kept_after_its_tasks_expire(listed: bool) {
    let redis = RedisServer::start();
    let o = owners_with(&redis, Duration::from_millis(2000), 16);
    learn(&o, "alice", "c-kept", "x-1", STATES[0], 1).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // (the owner's indexes live on with its other answers)
    learn(&o, "alice", "c-other", "x-0", STATES[0], 1).await;
    let v = o.turn("c-kept", "alice", None, None, "tok", None, Some("agent"));
    assert_eq!(v.await.unwrap(), TurnVerdict::Leased(Some("agent".into())));
    assert!(o.release("c-kept", "tok").await.unwrap());
    // (past the task's retention, not the context's: 800 ms to spare)
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(!exists(&redis, "t:x-1") && exists(&redis, "c:c-kept"));
    if listed {
        let page = o.list("alice", "c-kept", "", 0, None, 10).await.unwrap();
        assert!(page.rows.is_empty(), "{listed}");
        assert_eq!(redis.command(&format!("HGET {PREFIX}c:c-kept n")), "0");
    }
    learn(&o, "alice", "c-other", "x-2", STATES[0], 2).await;
    let le = format!("{PREFIX}le:5:alice");
    let members = redis.command(&format!("ZRANGE {le} 0 -1"));
    let mut members: Vec<&str> = members.lines().collect();
    members.sort_unstable();
    assert_eq!(
        members,
        [
            "0:6:c-kept",
            "3:x-07:c-otherTASK_STATE_WORKING",
            "3:x-27:c-otherTASK_STATE_WORKING"
        ],
        "{listed}"
    );
    assert_eq!(redis.command(&format!("HGET {PREFIX}c:c-kept n")), "0");
}

/// An owner idle for a whole retention but for turns on a context it has (no new task, no
/// new context), or answers that name the context and no task, keeps that context counted:
/// each renews the owner's expiry index with the context, so the index outlives the task
/// and counts the context when the task goes (before, the index expired with the task while
/// the context lived on, uncounted).
#[tokio::test]
async fn what_keeps_a_context_keeps_the_owners_expiry_index() {
    for keeper in ["a turn", "an answer without a task"] {
        let redis = RedisServer::start();
        let o = owners_with(&redis, Duration::from_millis(1500), 16);
        learn(&o, "alice", "c-kept", "x-1", STATES[0], 1).await;
        tokio::time::sleep(Duration::from_millis(1000)).await;
        if keeper == "a turn" {
            let v = o.turn("c-kept", "alice", None, None, "tok", None, Some("agent"));
            assert_eq!(v.await.unwrap(), TurnVerdict::Leased(Some("agent".into())));
            assert!(o.release("c-kept", "tok").await.unwrap());
        } else {
            let n = News {
                task: None,
                state: None,
                ts: None,
                ..news("c-kept", "", "", 0)
            };
            assert!(o
                .learn("alice", "agent", &n, None, None, None)
                .await
                .unwrap());
        }
        // (past the task's retention and the index's without the keeper; 900 ms to spare)
        tokio::time::sleep(Duration::from_millis(600)).await;
        let le = format!("{PREFIX}le:5:alice");
        assert!(
            !exists(&redis, "t:x-1") && exists(&redis, "c:c-kept"),
            "{keeper}"
        );
        let ttl = redis.command(&format!("PTTL {le}"));
        assert!(!ttl.starts_with(":-"), "{keeper}: the index expired: {ttl}");
        learn(&o, "alice", "c-other", "x-2", STATES[0], 2).await;
        let members = redis.command(&format!("ZRANGE {le} 0 -1"));
        let mut members: Vec<&str> = members.lines().collect();
        members.sort_unstable();
        assert_eq!(
            members,
            ["0:6:c-kept", "3:x-27:c-otherTASK_STATE_WORKING"],
            "{keeper}"
        );
    }
}

/// A new task whose own context loses its oldest task to the cap counts that context's
/// tasks right: the hash keeps exactly its tasks and their count, so the context is not
/// moved to its sorted sets early (before, the count read before the eviction was written
/// back one too high).
#[tokio::test]
async fn a_task_the_cap_takes_from_the_writers_own_context_is_counted() {
    let redis = RedisServer::start();
    let o = owners_with(&redis, Duration::from_secs(600), 16);
    for i in 0..17u64 {
        let id = format!("own-{i:02}");
        learn(&o, "alice", "c-own", &id, STATES[0], 1_000 + i).await;
    }
    assert!(!exists(&redis, "t:own-00") && exists(&redis, "t:own-16"));
    assert!(
        !exists(&redis, "lc:c-own"),
        "moved to the sorted sets early"
    );
    assert_eq!(redis.command(&format!("HGET {PREFIX}c:c-own n")), "16");
    let fields = int(&redis, &format!("HLEN {PREFIX}c:c-own"));
    assert_eq!(fields, 16 + 3, "16 tasks beside o, u and n: {fields}");
    let (ids, totals) = pages(&o, "alice", "c-own", "", 0, 100).await;
    assert_eq!(ids.len(), 16);
    assert_eq!(totals, [16]);
}

/// The write of a turn's last answer releases the turn's busy lease first, in the same
/// script: when it is written, when it is refused (another caller's context: nothing
/// written), and never a lease another token holds.
#[tokio::test]
async fn a_last_answers_write_releases_its_own_lease_written_or_refused() {
    let redis = RedisServer::start();
    let o = owners(&redis);
    let ctx = "c-lease";
    let rows = [
        // (who answers, the token released, written, the lease left)
        ("alice", "tok-a", true, false),
        ("mallory", "tok-b", false, false),
        ("alice", "tok-other", true, true),
    ];
    for (n, (who, release, written, left)) in rows.into_iter().enumerate() {
        let token = ["tok-a", "tok-b", "tok-c"][n];
        let verdict = o.turn(ctx, "alice", None, None, token, None, Some("agent"));
        assert_eq!(
            verdict.await.unwrap(),
            TurnVerdict::Leased(Some("agent".into()))
        );
        assert!(exists(&redis, &format!("b:{ctx}")), "row {n}");
        let task = format!("t-lease-{n}");
        let n_ = news(ctx, &task, "TASK_STATE_INPUT_REQUIRED", 1 + n as u64);
        let learned = o
            .learn(who, "agent", &n_, None, None, Some((ctx, release)))
            .await
            .unwrap();
        assert_eq!(learned, written, "row {n}");
        assert_eq!(exists(&redis, &format!("t:{task}")), written, "row {n}");
        assert_eq!(exists(&redis, &format!("b:{ctx}")), left, "row {n}");
        if left {
            redis.command(&format!("DEL {PREFIX}b:{ctx}"));
        }
    }
}

/// RETAKE takes a released lease again for a turn whose agent goes on (`new` token, task
/// `T`): when the context is free, when the lease is still the turn's `old` token (its
/// release not run yet), beside another turn on the same task (as a follow-up's holder); not
/// when another task's turn, or a follow-up on another task, holds the context.
#[tokio::test]
async fn a_released_lease_is_taken_again_only_where_no_other_task_runs() {
    let redis = RedisServer::start();
    let o = owners(&redis);
    let rows = [
        // (what holds the context, the command that makes it, taken, `b:` then, a `bf:` holder)
        ("nothing", "", true, "new\nT", false),
        (
            "its old token",
            r#"SET l:b:C "old\nT""#,
            true,
            "new\nT",
            false,
        ),
        (
            "another turn on T",
            r#"SET l:b:C "other\nT""#,
            true,
            "other\nT",
            true,
        ),
        (
            "another task's turn",
            r#"SET l:b:C "other\nU""#,
            false,
            "other\nU",
            false,
        ),
        (
            "a turn on no task yet",
            r#"SET l:b:C "other\n""#,
            false,
            "other\n",
            false,
        ),
        (
            "a follow-up on U",
            "HSET l:bf:C t U f 99999999999999",
            false,
            "",
            false,
        ),
        (
            "a follow-up on T",
            "HSET l:bf:C t T f 99999999999999",
            true,
            "new\nT",
            false,
        ),
        (
            "a follow-up on U, expired",
            "HSET l:bf:C t U f 1",
            true,
            "new\nT",
            false,
        ),
    ];
    for (n, (what, setup, taken, lease, follower)) in rows.into_iter().enumerate() {
        redis.command("DEL l:b:C l:bf:C");
        if !setup.is_empty() {
            redis.command(setup);
        }
        let got = o.retake("C", "new", "old", "T").await.unwrap();
        assert_eq!(got, taken, "{what}");
        let now = match redis.command("EXISTS l:b:C").as_str() {
            ":1" => redis.command("GET l:b:C"),
            _ => String::new(),
        };
        assert_eq!(now, lease, "row {n}: {what}");
        let held = redis.command("HEXISTS l:bf:C new") == ":1";
        assert_eq!(held, follower, "row {n}: {what}");
    }
}

/// An id the per-owner cap took out stays its owner's for as long as its key would have
/// lived (every replica's cache may hold it as the owner's until then): another owner's
/// answer naming the task or its context is refused ('foreign'), its owner's takes it up
/// again; the marks an owner leaves are bounded (as many as the cap and 31 more, the oldest
/// go).
#[tokio::test]
async fn what_the_cap_takes_out_stays_its_owners() {
    let redis = RedisServer::start();
    let o = owners_with(&redis, Duration::from_secs(60), 2);
    for i in 1..=3 {
        learn(
            &o,
            "alice",
            &format!("c-{i}"),
            &format!("x-{i}"),
            STATES[0],
            i,
        )
        .await;
    }
    assert!(!exists(&redis, "t:x-1") && !exists(&redis, "c:c-1"));
    assert!(exists(&redis, "xt:x-1") && exists(&redis, "xc:c-1"));
    let ttl = int(&redis, &format!("PTTL {PREFIX}xt:x-1"));
    assert!(ttl > 50_000 && ttl <= 60_000, "a retention: {ttl}");
    for (ctx, task) in [("c-bob", "x-1"), ("c-1", "x-bob")] {
        let n = news(ctx, task, STATES[0], 4);
        let learned = o.learn("bob", "agent", &n, None, None, None).await;
        assert!(!learned.unwrap(), "bob took up {ctx} {task}");
    }
    assert!(!exists(&redis, "t:x-bob") && !exists(&redis, "c:c-bob"));
    learn(&o, "alice", "c-1", "x-1", STATES[0], 5).await;
    // (each new task takes out a task and its context: two marks)
    for i in 10..60 {
        let (ctx, task) = (format!("c-{i}"), format!("x-{i}"));
        learn(&o, "alice", &ctx, &task, STATES[0], i).await;
    }
    let marks = int(&redis, &format!("ZCARD {PREFIX}lx:5:alice"));
    // (the cap, 2, and 31 more)
    let most = 2 + 31;
    assert!(
        (2..=most).contains(&marks),
        "at most the cap's number and 31: {marks}"
    );
    let keys = redis.command(&format!("KEYS {PREFIX}x*"));
    assert_eq!(keys.lines().count() as u64, marks, "{keys}");
    // The newest are kept.
    assert!(exists(&redis, "xt:x-57") && !exists(&redis, "xt:x-2"));
}

/// A large context (its tasks in a sorted set, without a count) left without tasks while its
/// turns keep it gets an entry of its own in the owner's expiry index; a new task in it
/// takes that entry out, as in a small one (before, the cap counted such a context twice
/// until the entry came due).
#[tokio::test]
async fn a_large_context_emptied_and_used_again_is_counted_once() {
    let redis = RedisServer::start();
    let o = owners_with(&redis, Duration::from_millis(2000), 1000);
    let n = SMALL_CONTEXT as u64 + 1;
    for i in 0..n {
        learn(&o, "alice", "c-big", &format!("x-{i}"), STATES[0], i + 1).await;
    }
    assert!(exists(&redis, "lc:c-big"));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let v = o.turn("c-big", "alice", None, None, "tok", None, Some("agent"));
    assert_eq!(v.await.unwrap(), TurnVerdict::Leased(Some("agent".into())));
    assert!(o.release("c-big", "tok").await.unwrap());
    // (past the tasks' retention, not the context's: 800 ms to spare)
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(!exists(&redis, "t:x-0") && exists(&redis, "c:c-big"));
    // Each answer takes out up to 4 expired tasks.
    for i in 0..n / 4 + 2 {
        learn(
            &o,
            "alice",
            "c-other",
            &format!("y-{i}"),
            STATES[0],
            100 + i,
        )
        .await;
    }
    let le = format!("{PREFIX}le:5:alice");
    let members = || redis.command(&format!("ZRANGE {le} 0 -1"));
    assert!(members().lines().any(|m| m == "0:5:c-big"), "{}", members());
    learn(&o, "alice", "c-big", "x-new", STATES[0], 500).await;
    assert!(
        !members().lines().any(|m| m == "0:5:c-big"),
        "{}",
        members()
    );
}
