//! The Redis backend of the process state (`[state] backend = "redis"`): budgets shared by
//! every replica on one Redis (or anything speaking its protocol, such as Valkey).
//!
//! One multiplexed connection per worker thread, reconnected by itself (`ConnectionManager`);
//! each round trip is bounded by `timeout_ms`, and a failure or a timeout makes the caller
//! fail closed ([`StateUnavailable`]): no decision that needs shared state is ever taken
//! without it. A connection is made on first use and retried at most every 500 ms while Redis
//! is away, so the replica recovers by itself when Redis returns.
//!
//! Rates are GCRA, as governor computes them locally, in one Lua script that reads Redis's
//! own clock (`TIME`): replicas with skewed clocks still share one budget. A principal that
//! spends its rate fast takes its tokens a few at a time ([`super::leases`]).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::io::tcp::socket2::TcpKeepalive;
use redis::io::tcp::TcpSettings;

use super::leases::{RateLeases, Take};
use crate::limits::rate::Rate;
use crate::telemetry::metrics::Metrics;

/// How to reach Redis (`[state]` with `backend = "redis"`, built by `crate::policy`).
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://` or `rediss://`, without a password (that comes from `password`).
    pub url: url::Url,
    pub password: Option<String>,
    /// PEM CAs for `rediss://` (default: the system roots).
    pub ca_pem: Option<Vec<u8>>,
    pub key_prefix: String,
    pub timeout: Duration,
    /// `rate_lease_max`: the most rate tokens one round trip takes (1: one per request).
    pub rate_lease_max: u32,
    /// `rate_lease_ms`: how long leased tokens may wait to be spent.
    pub rate_lease: Duration,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &self.url.as_str())
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("key_prefix", &self.key_prefix)
            .field("timeout", &self.timeout)
            .field("rate_lease_max", &self.rate_lease_max)
            .field("rate_lease", &self.rate_lease)
            .finish()
    }
}

/// Shared state was needed and Redis did not answer in time (or at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateUnavailable;

/// GCRA over Redis's clock. KEYS[1]: the budget; ARGV: emission interval (µs), burst, the
/// most tokens to take, tokens taken earlier and given back unspent. Takes as many as the
/// budget holds, up to that; returns {taken, 0, µs until the budget has refilled past them
/// (its TAT)} when at least one was, {0, wait µs until one is, 0} when none (never after a
/// give-back: that leaves room for one at least). A give-back never fills the budget past
/// its burst (the TAT is never set before now); the caller gives back only what the budget
/// has not refilled since it was taken ([`super::leases`]).
const GCRA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local back = tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') - interval * back
if tat < now then tat = now end
local limit = now + interval * burst
local room = math.floor((limit - tat) / interval)
if room < 1 then
  return {0, tat + interval - limit, 0}
end
local taken = math.min(want, room)
local new_tat = tat + interval * taken
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1)
return {taken, 0, new_tat - now}
"#;

/// A worker's connection, once made, and when the last attempt to make it failed; when the
/// connection was made.
type Slot = (Option<ConnectionManager>, Option<Instant>, Option<Instant>);

/// Round trips in a row that got no answer (or an answer a connection to a primary never
/// gives) after which a worker's connection is dropped and made anew. redis-rs reconnects
/// by itself only when the socket fails: a half-open connection (a host gone, a partition,
/// a failover that moved the address) fails only when the kernel gives up retransmitting
/// (about 15 minutes), and a primary demoted to a replica answers every write READONLY for
/// as long as the connection lives.
const RECONNECT_AFTER: u32 = 2;

/// How one round trip went, for the connection's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trip {
    Answered,
    /// No answer within `timeout_ms`, or the connection failed.
    Unanswered,
    /// Answered by a server that cannot serve the scripts' writes (READONLY, MASTERDOWN,
    /// LOADING): another connection may reach the primary.
    WrongServer,
}

impl Trip {
    fn of_error(e: &redis::RedisError) -> Trip {
        match e.kind() {
            redis::ErrorKind::ReadOnly
            | redis::ErrorKind::MasterDown
            | redis::ErrorKind::BusyLoadingError => Trip::WrongServer,
            _ if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() => Trip::Unanswered,
            _ => Trip::Answered,
        }
    }
}

pub struct RedisStore {
    client: redis::Client,
    config: RedisConfig,
    /// One multiplexed connection per worker thread (and one for the others), each driven by
    /// the runtime it serves (`crate::runtime::slot`): a round trip is then not handed to
    /// another thread's connection task and back. With the last failed attempt, for the
    /// backoff.
    conns: Box<[tokio::sync::Mutex<Slot>]>,
    /// Per connection, round trips in a row that went unanswered ([`RECONNECT_AFTER`]),
    /// and which connection of the slot they are counted for (its generation): a late
    /// timeout of a connection already replaced counts for nothing.
    misses: Box<[AtomicU32]>,
    generations: Box<[AtomicU32]>,
    gcra: redis::Script,
    leases: RateLeases,
    healthy: AtomicBool,
    metrics: Arc<Metrics>,
}

impl RedisStore {
    /// A store for `config`; nothing is connected yet (see the module note).
    pub fn new(config: RedisConfig, metrics: Arc<Metrics>) -> Result<RedisStore, String> {
        let mut info = redis::IntoConnectionInfo::into_connection_info(config.url.as_str())
            .map_err(|e| format!("state.redis_url: {e}"))?;
        if let Some(p) = &config.password {
            info.redis.password = Some(p.clone());
        }
        let client = match (&config.ca_pem, config.url.scheme()) {
            (Some(ca), "rediss") => redis::Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(ca.clone()),
                },
            ),
            _ => redis::Client::open(info),
        }
        .map_err(|e| format!("state.redis_url: {e}"))?;
        let leases = RateLeases::new(
            config.rate_lease_max,
            config.rate_lease,
            crate::runtime::workers() + 1,
        );
        Ok(RedisStore {
            client,
            config,
            conns: (0..=crate::runtime::workers())
                .map(|_| tokio::sync::Mutex::new((None, None, None)))
                .collect(),
            misses: (0..=crate::runtime::workers())
                .map(|_| AtomicU32::new(0))
                .collect(),
            generations: (0..=crate::runtime::workers())
                .map(|_| AtomicU32::new(0))
                .collect(),
            gcra: redis::Script::new(GCRA),
            leases,
            healthy: AtomicBool::new(false),
            metrics,
        })
    }

    /// Whether the last round trip succeeded (for `/ready`).
    pub fn is_available(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    fn key(&self, kind: &str, name: &str) -> String {
        format!("{}{kind}:{name}", self.config.key_prefix)
    }

    /// Notes how a round trip on this worker's connection went: enough unanswered ones in a
    /// row (or one from a server that is no primary) and the next round trip makes a new
    /// connection.
    fn trip(&self, generation: u32, trip: Trip) {
        let i = crate::runtime::slot(self.misses.len());
        if self.generations[i].load(Ordering::Relaxed) != generation {
            return;
        }
        let misses = &self.misses[i];
        match trip {
            Trip::Answered => {
                if misses.load(Ordering::Relaxed) != 0 {
                    misses.store(0, Ordering::Relaxed);
                }
            }
            Trip::Unanswered => {
                misses.fetch_add(1, Ordering::Relaxed);
            }
            Trip::WrongServer => misses.store(RECONNECT_AFTER, Ordering::Relaxed),
        }
    }

    /// This worker's connection and its generation (for [`RedisStore::trip`]), made when
    /// there is none (or the last one stopped answering).
    async fn connection(&self) -> Result<(ConnectionManager, u32), StateUnavailable> {
        let i = crate::runtime::slot(self.conns.len());
        let mut slot = self.conns[i].lock().await;
        if self.misses[i].load(Ordering::Relaxed) >= RECONNECT_AFTER {
            self.misses[i].store(0, Ordering::Relaxed);
            self.generations[i].fetch_add(1, Ordering::Relaxed);
            if slot.0.take().is_some() {
                tracing::warn!(event = "state_reconnect", backend = "redis");
                // A connection dropped within a second of being made (a demoted primary
                // still at the address): the next attempt waits out the back-off below, so
                // that requests do not each make a connection.
                if slot
                    .2
                    .is_some_and(|at| at.elapsed() < Duration::from_secs(1))
                {
                    slot.1 = Some(Instant::now());
                }
            }
        }
        let generation = self.generations[i].load(Ordering::Relaxed);
        if let Some(c) = &slot.0 {
            return Ok((c.clone(), generation));
        }
        if slot
            .1
            .is_some_and(|at| at.elapsed() < Duration::from_millis(500))
        {
            return Err(StateUnavailable);
        }
        // One attempt, no retry inside it: redis-rs's first retry waits a second or more
        // (its back-off's floor, which `set_max_delay` does not lower), so a refused connect
        // would take the whole timeout. Requests queued behind this attempt (the lock) see
        // its failure stamped when it failed, and fail at once for the next 500 ms instead
        // of each trying in turn.
        // TCP keep-alive and a user timeout: a connection whose peer is gone fails within
        // about 15 s even when idle or when nothing times out above it; no Nagle delay.
        let tcp = TcpSettings::default()
            .set_nodelay(true)
            .set_keepalive(
                TcpKeepalive::new()
                    .with_time(Duration::from_secs(5))
                    .with_interval(Duration::from_secs(2))
                    .with_retries(5),
            )
            .set_user_timeout(Duration::from_secs(15));
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(self.config.timeout)
            .set_response_timeout(self.config.timeout)
            .set_number_of_retries(0)
            .set_tcp_settings(tcp);
        // Boxed: the connect's future (~3.5 KiB) is rare, and every command's future would
        // otherwise carry it.
        match Box::pin(tokio::time::timeout(
            self.config.timeout * 2,
            ConnectionManager::new_with_config(self.client.clone(), config),
        ))
        .await
        {
            Ok(Ok(c)) => {
                slot.0 = Some(c.clone());
                slot.2 = Some(Instant::now());
                Ok((c, generation))
            }
            _ => {
                slot.1 = Some(Instant::now());
                self.healthy.store(false, Ordering::Relaxed);
                self.metrics.state_round_trip("unavailable", Duration::ZERO);
                tracing::warn!(event = "state_unavailable", backend = "redis");
                Err(StateUnavailable)
            }
        }
    }

    /// The most one round trip may take (`timeout_ms`).
    pub fn timeout(&self) -> std::time::Duration {
        self.config.timeout
    }

    /// The `key_prefix`.
    pub fn prefix(&self) -> &str {
        &self.config.key_prefix
    }

    /// Runs `script` with `args` (no KEYS: the scripts build their keys from the prefix)
    /// within one `timeout_ms`; counted in the round-trip metrics.
    pub async fn run<T: redis::FromRedisValue>(
        &self,
        script: &redis::Script,
        args: &[&str],
    ) -> Result<T, StateUnavailable> {
        let (mut conn, generation) = self.connection().await?;
        let started = Instant::now();
        let mut call = script.prepare_invoke();
        for a in args {
            call.arg(*a);
        }
        let out =
            tokio::time::timeout(self.config.timeout, call.invoke_async::<T>(&mut conn)).await;
        match out {
            Ok(Ok(v)) => {
                self.trip(generation, Trip::Answered);
                self.healthy.store(true, Ordering::Relaxed);
                self.metrics.state_round_trip("ok", started.elapsed());
                Ok(v)
            }
            Ok(Err(e)) => {
                let trip = Trip::of_error(&e);
                if trip == Trip::Answered {
                    // Redis answered, with an error of the script's: a bug, not an outage.
                    tracing::error!(event = "state_script_error", kind = ?e.kind());
                }
                self.trip(generation, trip);
                self.failed("error", started);
                Err(StateUnavailable)
            }
            Err(_) => {
                self.trip(generation, Trip::Unanswered);
                self.failed("timeout", started);
                Err(StateUnavailable)
            }
        }
    }

    /// Spends one token of the shared budget `kind:name` at `rate` (from this replica's lease
    /// when it holds one): `Ok(Ok(()))` admitted, `Ok(Err(wait))` refused for `wait`.
    pub async fn spend_leased(
        &self,
        kind: &str,
        name: &str,
        rate: Rate,
    ) -> Result<Result<(), Duration>, StateUnavailable> {
        let key = self.key(kind, name);
        let mut grants: Option<tokio::sync::watch::Receiver<()>> = None;
        let mut waited = false;
        let (ask, back, asking) = loop {
            match self.leases.take(&key, rate, Instant::now()) {
                Take::Leased => {
                    self.metrics.state_rate_check("lease");
                    return Ok(Ok(()));
                }
                Take::Ask(n, back) => break (n, back, self.leases.asking(&key)),
                // Another request of this table is asking for the next lease: wait for its
                // grant once (subscribed first, then looked again, so that a grant in between
                // is not missed), then take a token alone.
                Take::One if waited => return self.spend(kind, name, rate).await,
                Take::One => match grants.take() {
                    Some(mut g) => {
                        let _ = tokio::time::timeout(self.config.timeout, g.changed()).await;
                        waited = true;
                    }
                    None => {
                        grants = self.leases.grants(&key);
                        if grants.is_none() {
                            return self.spend(kind, name, rate).await;
                        }
                    }
                },
            }
        };
        self.metrics.state_rate_check("store");
        // The budget's TAT is reached no earlier than this plus what the store says.
        let sent = Instant::now();
        let taken = self
            .take_tokens(&key, rate.interval_us(), rate.burst, ask, back)
            .await;
        match taken {
            Ok(Ok((n, full_in))) => {
                asking.granted(rate, n, Instant::now(), sent + full_in);
                Ok(Ok(()))
            }
            // (the ask ends failed with `asking`, as it does when this future is dropped)
            Ok(Err(wait)) => Ok(Err(wait)),
            Err(e) => Err(e),
        }
    }

    /// Spends one token of the shared budget `kind:name` at `rate`, with no lease (each
    /// refusal counts at once): `Ok(Ok(()))` admitted, `Ok(Err(wait))` refused for `wait`.
    pub async fn spend(
        &self,
        kind: &str,
        name: &str,
        rate: Rate,
    ) -> Result<Result<(), Duration>, StateUnavailable> {
        let key = self.key(kind, name);
        self.metrics.state_rate_check("store");
        Ok(self
            .take_tokens(&key, rate.interval_us(), rate.burst, 1, 0)
            .await?
            .map(|_| ()))
    }

    /// Gives `back` unspent tokens and takes up to `want` of the budget at `key`: how many (at
    /// least one) and how long until the budget has refilled past them, or how long until one
    /// is there.
    async fn take_tokens(
        &self,
        key: &str,
        interval_us: u64,
        burst: u32,
        want: u32,
        back: u32,
    ) -> Result<Result<(u32, Duration), Duration>, StateUnavailable> {
        let mut call = self.gcra.key(key);
        call.arg(interval_us).arg(burst).arg(want.max(1)).arg(back);
        let (mut conn, generation) = self.connection().await?;
        let started = Instant::now();
        let out = tokio::time::timeout(
            self.config.timeout,
            call.invoke_async::<(i64, i64, i64)>(&mut conn),
        )
        .await;
        match out {
            Ok(Ok((taken, wait_us, full_in_us))) => {
                self.trip(generation, Trip::Answered);
                self.healthy.store(true, Ordering::Relaxed);
                self.metrics.state_round_trip("ok", started.elapsed());
                Ok(if taken >= 1 {
                    let n = u32::try_from(taken).unwrap_or(1).min(want.max(1));
                    Ok((n, Duration::from_micros(full_in_us.max(0) as u64)))
                } else {
                    Err(Duration::from_micros(wait_us.max(0) as u64))
                })
            }
            Ok(Err(e)) => {
                self.trip(generation, Trip::of_error(&e));
                self.failed("error", started);
                Err(StateUnavailable)
            }
            Err(_) => {
                self.trip(generation, Trip::Unanswered);
                self.failed("timeout", started);
                Err(StateUnavailable)
            }
        }
    }

    fn failed(&self, outcome: &'static str, started: Instant) {
        self.healthy.store(false, Ordering::Relaxed);
        self.metrics.state_round_trip(outcome, started.elapsed());
    }

    /// One PING (for `check --connect`, and the health checker's probe): its outcome is the
    /// store's availability for `/ready` until the next round trip, so that a replica with no
    /// traffic yet (a balancer sends it none until it is ready) still learns that Redis
    /// answers, and an idle one that Redis is gone.
    pub async fn ping(&self) -> Result<(), String> {
        let started = Instant::now();
        let (mut conn, generation) = self
            .connection()
            .await
            .map_err(|_| "cannot connect".to_string())?;
        let pong: Result<String, _> = match tokio::time::timeout(
            self.config.timeout,
            redis::cmd("PING").query_async(&mut conn),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => {
                self.trip(generation, Trip::Unanswered);
                self.failed("timeout", started);
                return Err("no answer within state.timeout_ms".to_string());
            }
        };
        match pong {
            Ok(_) => {
                self.trip(generation, Trip::Answered);
                self.healthy.store(true, Ordering::Relaxed);
                self.metrics.state_round_trip("ok", started.elapsed());
                Ok(())
            }
            Err(e) => {
                self.trip(generation, Trip::of_error(&e));
                self.failed("error", started);
                Err(e.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command's future sits inside a request's (rate checks, ownership): making the
    /// connection, rare and ~3.5 KiB of state, is boxed where it is awaited, not carried.
    #[test]
    fn a_command_does_not_carry_a_new_connection() {
        let config = RedisConfig {
            url: url::Url::parse("redis://127.0.0.1:9/").unwrap(),
            password: None,
            ca_pem: None,
            key_prefix: "t:".into(),
            timeout: Duration::from_secs(1),
            rate_lease_max: 1,
            rate_lease: Duration::from_millis(10),
        };
        let store = RedisStore::new(config, Arc::new(Metrics::new())).unwrap();
        let script = redis::Script::new("return 1");
        let size = std::mem::size_of_val(&store.run::<i64>(&script, &[]));
        assert!(size < 2048, "{size} bytes");
    }

    /// How the fake Redis below answers a script.
    #[derive(Clone, Copy, Debug)]
    enum Fake {
        /// Never: a half-open connection.
        Silent,
        /// READONLY: a primary demoted to a replica.
        ReadOnly,
    }

    /// A fake Redis on a free port: it answers the client's handshake (`CLIENT SETINFO`)
    /// and then each script as `fake` says; with the number of connections it accepted.
    async fn fake_redis(fake: Fake) -> (url::Url, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::AtomicUsize;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = url::Url::parse(&format!("redis://{}/", listener.local_addr().unwrap())).unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = sock.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let got = String::from_utf8_lossy(&buf[..n]).to_string();
                        let mut out = "+OK\r\n".repeat(got.matches("SETINFO").count());
                        if let Fake::ReadOnly = fake {
                            out.push_str(
                                &"-READONLY You can't write against a read only replica.\r\n"
                                    .repeat(got.matches("EVALSHA").count()),
                            );
                        }
                        if sock.write_all(out.as_bytes()).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    /// A connection that stops answering (a half-open socket) or that reaches a server that
    /// is no primary (READONLY) is dropped after [`RECONNECT_AFTER`] such round trips and
    /// made anew: redis-rs itself would keep it until the socket fails.
    #[tokio::test]
    async fn a_connection_that_stops_answering_is_made_anew() {
        for fake in [Fake::Silent, Fake::ReadOnly] {
            let (url, accepted) = fake_redis(fake).await;
            let config = RedisConfig {
                url,
                password: None,
                ca_pem: None,
                key_prefix: "t:".into(),
                timeout: Duration::from_millis(100),
                rate_lease_max: 1,
                rate_lease: Duration::from_millis(10),
            };
            let store = RedisStore::new(config, Arc::new(Metrics::new())).unwrap();
            let script = redis::Script::new("return 1");
            for _ in 0..=RECONNECT_AFTER {
                assert!(store.run::<i64>(&script, &[]).await.is_err(), "{fake:?}");
            }
            // Requests keep coming: a reconnect, but no connection per request (a demoted
            // primary answers at once: its next connection waits out the back-off).
            let deadline = Instant::now() + Duration::from_secs(3);
            while accepted.load(Ordering::SeqCst) < 2 {
                assert!(Instant::now() < deadline, "{fake:?}: never reconnected");
                let _ = store.run::<i64>(&script, &[]).await;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            for _ in 0..20 {
                let _ = store.run::<i64>(&script, &[]).await;
            }
            let made = accepted.load(Ordering::SeqCst);
            assert!(made <= 3, "{fake:?}: {made} connections for 20 requests");
        }
    }
}
