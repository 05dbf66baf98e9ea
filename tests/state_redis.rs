//! `[state] backend = "redis"` against a real `redis-server` the test starts on a free port:
//! two edge replicas share the per-principal rate and the authentication failure budget;
//! without Redis every request that needs it fails closed with `state.unavailable` (the
//! public routes keep working, `/ready` says why), and service resumes by itself when Redis
//! returns.

mod common;

use std::time::Duration;

use common::*;
use http::StatusCode;

const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}"#;

fn state(redis: &RedisServer, extra: &str) -> ProxyOpts {
    std::env::set_var(
        "A2A_EDGE_TEST_PAGE_SECRET",
        "a-page-token-secret-of-at-least-32-bytes",
    );
    ProxyOpts {
        extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
        extra_policy: format!(
            "[state]\nbackend = \"redis\"\nredis_url = \"{}\"\nkey_prefix = \"t:\"\ntimeout_ms = 300\npage_token_secret_env = \"A2A_EDGE_TEST_PAGE_SECRET\"\n{extra}",
            redis.url()
        ),
        ..Default::default()
    }
}

async fn post(c: &mut Client, token: &str) -> (StatusCode, String) {
    let headers = [
        ("authorization", token),
        ("content-type", "application/json"),
        ("a2a-version", "1.0"),
    ];
    let (status, _, body) = c.request("POST", "/", &headers, BODY).await;
    (status, String::from_utf8_lossy(&body).into_owned())
}

const TOKEN_HEADER: &str = "Bearer test-token-0123456789";

#[tokio::test]
async fn the_principal_rate_is_one_budget_across_replicas() {
    let redis = RedisServer::start();
    let extra = "[limits]\nrequests_per_second = 0.01\nburst = 4\n";
    let a = Proxy::start(state(&redis, extra)).await;
    let b = Proxy::start(state(&redis, extra)).await;
    let mut ca = a.client(Proto::H1).await;
    let mut cb = b.client(Proto::H2).await;
    for on_a in [true, true, false, false] {
        let c = if on_a { &mut ca } else { &mut cb };
        let (status, body) = post(c, TOKEN_HEADER).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    for c in [&mut ca, &mut cb] {
        let (status, body) = post(c, TOKEN_HEADER).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
        assert!(body.contains("rate.principal"), "{body}");
    }
}

/// `a2a_edge_state_round_trips_total{outcome="ok"}` of one replica.
async fn round_trips(p: &Proxy) -> u64 {
    let (_, metrics) = admin_get(p, "/metrics").await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("a2a_edge_state_round_trips_total{outcome=\"ok\"} "))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// `a2a_edge_state_rate_checks_total{source}` of one replica (`lease` or `store`).
async fn rate_checks(p: &Proxy, source: &str) -> u64 {
    let (_, metrics) = admin_get(p, "/metrics").await;
    let prefix = format!("a2a_edge_state_rate_checks_total{{source=\"{source}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[tokio::test]
async fn a_fast_callers_tokens_are_leased_and_never_exceed_the_shared_budget() {
    // 100/s with a burst of 50: a lease takes at most 10 tokens (what the rate refills in
    // 100 ms); a method the agent does not have costs exactly the principal's rate. Eight
    // clients, four on each replica, spend it faster than it refills.
    // With `rate_lease_max = 1`, every request is one round trip, as before leases.
    for leases in [true, false] {
        let redis = RedisServer::start();
        let extra = format!(
            "{}[limits]\nrequests_per_second = 100\nburst = 50\n",
            if leases { "" } else { "rate_lease_max = 1\n" }
        );
        let a = Proxy::start(state(&redis, &extra)).await;
        let b = Proxy::start(state(&redis, &extra)).await;
        let before = round_trips(&a).await + round_trips(&b).await;
        let started = std::time::Instant::now();
        let mut load = tokio::task::JoinSet::new();
        for i in 0..8 {
            let p = if i % 2 == 0 { &a } else { &b };
            let (addr, ca) = (p.addr, p.ca.clone());
            let proto = if i % 4 < 2 { Proto::H1 } else { Proto::H2 };
            load.spawn(async move {
                let mut c = Client::connect(addr, &ca, proto).await;
                let body = r#"{"jsonrpc":"2.0","id":1,"method":"NoSuchMethod","params":{}}"#;
                let headers = [
                    ("authorization", TOKEN_HEADER),
                    ("content-type", "application/json"),
                    ("a2a-version", "1.0"),
                ];
                let (mut admitted, mut refused) = (0u64, 0u64);
                for _ in 0..60 {
                    let (status, _, rb) = c.request("POST", "/", &headers, body).await;
                    let text = String::from_utf8_lossy(&rb);
                    match status {
                        StatusCode::OK => {
                            assert!(text.contains("-32601"), "{text}");
                            admitted += 1;
                        }
                        StatusCode::TOO_MANY_REQUESTS => {
                            assert!(text.contains("rate.principal"), "{text}");
                            refused += 1;
                        }
                        other => panic!("{other}: {text}"),
                    }
                }
                (admitted, refused)
            });
        }
        let (mut admitted, mut refused) = (0u64, 0u64);
        while let Some(done) = load.join_next().await {
            let (ok, no) = done.unwrap();
            (admitted, refused) = (admitted + ok, refused + no);
        }
        let elapsed = started.elapsed().as_secs_f64();
        let trips = round_trips(&a).await + round_trips(&b).await - before;
        // Never more than the one budget allows, both replicas together...
        let allowed = 50.0 + 100.0 * elapsed + 1.0;
        assert!(
            (admitted as f64) <= allowed,
            "{admitted} admitted in {elapsed:.2} s, at most {allowed:.0}"
        );
        // ... nor much less: unspent leased tokens are few.
        assert!(
            (admitted as f64) >= 0.6 * allowed.min(480.0),
            "{admitted} admitted in {elapsed:.2} s, {refused} refused"
        );
        assert!(
            refused > 0,
            "the budget was never spent: {admitted} admitted in {elapsed:.2} s"
        );
        // Every request checked the principal's budget once, from a lease or at the store.
        let leased = rate_checks(&a, "lease").await + rate_checks(&b, "lease").await;
        let stored = rate_checks(&a, "store").await + rate_checks(&b, "store").await;
        assert_eq!(
            leased + stored,
            admitted + refused,
            "{leased} leased, {stored} at the store"
        );
        if leases {
            // Refusals are decided at the store; a good share of admissions come from a
            // lease (about two thirds, 2026-12-05, idle or with three busy loops; below half
            // once, under CI's compiler: a lease's tokens may outlive it and go back at the
            // next ask). Without leases, none does.
            assert!(
                leased >= admitted / 4 && stored >= refused,
                "{leased} leased, {stored} at the store: {admitted} admitted, {refused} refused \
                 in {elapsed:.2} s"
            );
        } else {
            assert_eq!(leased, 0);
        }
        if leases {
            // Each refusal asks Redis; an admission often does not (the same bound as above:
            // a round trip is a check at the store).
            assert!(
                trips <= refused + admitted * 3 / 4,
                "{trips} round trips for {admitted} admitted and {refused} refused"
            );
        } else {
            // (and the health checker's PINGs)
            assert!(
                (admitted + refused..admitted + refused + 10).contains(&trips),
                "{trips} round trips for {admitted} admitted and {refused} refused"
            );
        }
    }
}

/// Tokens a lease left unspent are given back with the next ask only as far as the budget
/// has not refilled since: after a pause in which it refilled to its burst, a caller that
/// spends that burst gets no token more from an old lease's leftover.
#[tokio::test]
async fn a_lease_left_unspent_gives_nothing_back_past_the_burst() {
    use a2a_edge::limits::rate::Rate;
    use a2a_edge::state::redis::{RedisConfig, RedisStore};
    let redis = RedisServer::start();
    let config = RedisConfig {
        url: url::Url::parse(&redis.url()).unwrap(),
        password: None,
        ca_pem: None,
        key_prefix: "t:".into(),
        timeout: Duration::from_secs(2),
        rate_lease_max: 64,
        rate_lease: Duration::from_millis(500),
    };
    let metrics = std::sync::Arc::new(a2a_edge::telemetry::metrics::Metrics::new());
    let store = RedisStore::new(config, metrics).unwrap();
    // One token every 200 ms, 8 at once: leases of at most 2 (a quarter of the burst).
    let rate = Rate {
        per_second: 5.0,
        burst: 8,
    };
    // One token, then a lease of two: one of them stays unspent.
    for _ in 0..2 {
        assert_eq!(store.spend_leased("p", "alice", rate).await, Ok(Ok(())));
    }
    // The lease expires (500 ms) and the budget refills to its burst (3 tokens: 600 ms).
    tokio::time::sleep(Duration::from_millis(800)).await;
    // The whole burst at once (one token per round trip, no lease)...
    for i in 0..8 {
        assert_eq!(store.spend("p", "alice", rate).await, Ok(Ok(())), "{i}");
    }
    // ... and not one more through the old lease's leftover.
    let more = store.spend_leased("p", "alice", rate).await;
    assert!(matches!(more, Ok(Err(_))), "{more:?}");
}

#[tokio::test]
async fn the_failure_budget_is_one_across_replicas() {
    let redis = RedisServer::start();
    let throttle = ProxyOpts {
        extra_auth: "failures_per_minute = 1\nfailures_burst = 3\n".into(),
        ..state(&redis, "")
    };
    let a = Proxy::start(throttle).await;
    let b = Proxy::start(ProxyOpts {
        extra_auth: "failures_per_minute = 1\nfailures_burst = 3\n".into(),
        ..state(&redis, "")
    })
    .await;
    let mut ca = a.client(Proto::H1).await;
    let mut cb = b.client(Proto::H1).await;
    for on_a in [true, true, false] {
        let c = if on_a { &mut ca } else { &mut cb };
        assert_eq!(post(c, "Bearer wrong").await.0, StatusCode::UNAUTHORIZED);
    }
    // The fourth failure, on either replica, is over the shared budget.
    let (status, body) = post(&mut cb, "Bearer wrong").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(body.contains("auth.throttled"), "{body}");
    let (status, body) = post(&mut ca, "Bearer wrong").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    // A SIGHUP (the same reload) starts no replica's guesser over.
    let text = policy_text(
        a.dir.path(),
        &ProxyOpts {
            extra_auth: "failures_per_minute = 1\nfailures_burst = 3\n".into(),
            ..state(&redis, "")
        },
    );
    a.reload(&text).await;
    let mut ca = a.client(Proto::H2).await;
    let (status, body) = post(&mut ca, "Bearer wrong").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(body.contains("auth.throttled"), "{body}");
}

/// A replica that never reached Redis (started during an outage) refuses every caller
/// promptly, however many wait at once: one connection attempt at a time, and those queued
/// behind a failed one fail with it instead of each trying (and waiting) in turn.
#[tokio::test]
async fn without_redis_from_the_start_concurrent_requests_fail_promptly() {
    let mut redis = RedisServer::start();
    let opts = state(&redis, "");
    redis.stop();
    let p = Proxy::start(opts).await;
    let mut clients = Vec::new();
    for i in 0..8 {
        clients.push(
            p.client(if i % 2 == 0 { Proto::H1 } else { Proto::H2 })
                .await,
        );
    }
    let started = std::time::Instant::now();
    let waiting: Vec<_> = clients
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                let answer = post(&mut c, TOKEN_HEADER).await;
                (answer, started.elapsed())
            })
        })
        .collect();
    for w in waiting {
        let ((status, body), took) = w.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body.contains("state.unavailable"), "{body}");
        // Well under what eight connection attempts made in turn would take when each waits
        // out its timeout (300 ms to connect, 600 ms in all): 2.4 s to 4.8 s.
        assert!(took < Duration::from_millis(2000), "{took:?}");
    }
}

#[tokio::test]
async fn without_redis_requests_fail_closed_and_service_resumes() {
    let mut redis = RedisServer::start();
    let p = Proxy::start(state(&redis, "")).await;
    let mut c = p.client(Proto::H2).await;
    assert_eq!(post(&mut c, TOKEN_HEADER).await.0, StatusCode::OK);
    let (status, _) = admin_get(&p, "/ready").await;
    assert_eq!(status, 200);
    redis.stop();
    // Every request that needs the shared budget: refused, promptly, and saying why.
    for _ in 0..5 {
        let started = std::time::Instant::now();
        let (status, body) = post(&mut c, TOKEN_HEADER).await;
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(
            body.contains("-32603") && body.contains("state.unavailable"),
            "{body}"
        );
    }
    // A wrong credential cannot be counted either: refused, never let through.
    let (_, body) = post(&mut c, "Bearer wrong").await;
    assert!(body.contains("state.unavailable"), "{body}");
    // The public routes keep working; /ready says why it is not ready.
    let (status, _, _) = c.request("GET", "/health", &[], String::new()).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = c
        .request("GET", "/.well-known/agent-card.json", &[], String::new())
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = admin_get(&p, "/ready").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("state.unavailable"), "{body}");
    let (_, metrics) = admin_get(&p, "/metrics").await;
    assert!(metrics.contains("a2a_edge_state_available 0"), "{metrics}");
    assert!(
        metrics.contains("a2a_edge_state_round_trips_total{outcome=\"ok\"}"),
        "{metrics}"
    );
    // Redis back: the replica recovers by itself.
    redis.restart();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _) = post(&mut c, TOKEN_HEADER).await;
        if status == StatusCode::OK
            && !post(&mut c, TOKEN_HEADER)
                .await
                .1
                .contains("state.unavailable")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no recovery within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, _) = admin_get(&p, "/ready").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_redis_policy_needs_the_shared_page_token_secret() {
    let text = "[server]\nlisten = \"127.0.0.1:0\"\npublic_url = \"https://127.0.0.1:0/\"\n[tls]\ndev = true\n[[upstreams]]\nname = \"e\"\nurl = \"embedded\"\n[auth]\nallow_anonymous = true\n[state]\nbackend = \"redis\"\nredis_url = \"redis://127.0.0.1:1/0\"\n";
    let e = a2a_edge::policy::Policy::from_toml(
        std::path::Path::new("p.toml"),
        text,
        a2a_edge::policy::LoadMode::Check,
    )
    .unwrap_err();
    assert_eq!(e.key, "state.page_token_secret_env", "{e}");
    let with_password = text.replace("redis://127.0.0.1:1/0", "redis://:secret@127.0.0.1:1/0");
    let e = a2a_edge::policy::Policy::from_toml(
        std::path::Path::new("p.toml"),
        &with_password,
        a2a_edge::policy::LoadMode::Check,
    )
    .unwrap_err();
    assert_eq!(e.key, "state.redis_url", "{e}");
    assert!(!e.to_string().contains("secret@"), "{e}");
}
