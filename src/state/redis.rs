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
//! own clock (`TIME`): replicas with skewed clocks still share one budget.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::limits::rate::Rate;
use crate::telemetry::metrics::Metrics;

/// Shared state was needed and Redis did not answer in time (or at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateUnavailable;

/// How to reach Redis.
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://` or `rediss://`, without a password (that comes from `password`).
    pub url: url::Url,
    pub password: Option<String>,
    /// PEM CAs for `rediss://` (default: the system roots).
    pub ca_pem: Option<Vec<u8>>,
    pub key_prefix: String,
    pub timeout: Duration,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &self.url.as_str())
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("key_prefix", &self.key_prefix)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// GCRA over Redis's clock. KEYS[1]: the budget; ARGV: emission interval (µs), burst, cost.
/// Returns {1, 0} when admitted, {0, wait µs} when not.
const GCRA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local new_tat = tat + interval * cost
local limit = now + interval * burst
if new_tat > limit then
  return {0, new_tat - limit}
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1)
return {1, 0}
"#;

/// A worker's connection, once made, and when the last attempt to make it failed.
type Slot = (Option<ConnectionManager>, Option<Instant>);

pub struct RedisStore {
    client: redis::Client,
    config: RedisConfig,
    /// One multiplexed connection per worker thread (and one for the others), each driven by
    /// the runtime it serves (`crate::runtime::slot`): a round trip is then not handed to
    /// another thread's connection task and back. With the last failed attempt, for the
    /// backoff.
    conns: Box<[tokio::sync::Mutex<Slot>]>,
    gcra: redis::Script,
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
        Ok(RedisStore {
            client,
            config,
            conns: (0..=crate::runtime::workers())
                .map(|_| tokio::sync::Mutex::new((None, None)))
                .collect(),
            gcra: redis::Script::new(GCRA),
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

    async fn connection(&self) -> Result<ConnectionManager, StateUnavailable> {
        let mut slot = self.conns[crate::runtime::slot(self.conns.len())]
            .lock()
            .await;
        if let Some(c) = &slot.0 {
            return Ok(c.clone());
        }
        if slot
            .1
            .is_some_and(|at| at.elapsed() < Duration::from_millis(500))
        {
            return Err(StateUnavailable);
        }
        slot.1 = Some(Instant::now());
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(self.config.timeout)
            .set_response_timeout(self.config.timeout)
            .set_number_of_retries(1)
            .set_max_delay(500);
        match tokio::time::timeout(
            self.config.timeout * 2,
            ConnectionManager::new_with_config(self.client.clone(), config),
        )
        .await
        {
            Ok(Ok(c)) => {
                slot.0 = Some(c.clone());
                Ok(c)
            }
            _ => {
                self.healthy.store(false, Ordering::Relaxed);
                self.metrics.state_round_trip("unavailable", Duration::ZERO);
                tracing::warn!(event = "state_unavailable", backend = "redis");
                Err(StateUnavailable)
            }
        }
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
        let mut conn = self.connection().await?;
        let started = Instant::now();
        let mut call = script.prepare_invoke();
        for a in args {
            call.arg(*a);
        }
        let out =
            tokio::time::timeout(self.config.timeout, call.invoke_async::<T>(&mut conn)).await;
        match out {
            Ok(Ok(v)) => {
                self.healthy.store(true, Ordering::Relaxed);
                self.metrics.state_round_trip("ok", started.elapsed());
                Ok(v)
            }
            Ok(Err(e)) => {
                if !e.is_io_error() && !e.is_timeout() && !e.is_connection_dropped() {
                    // Redis answered, with an error of the script's: a bug, not an outage.
                    tracing::error!(event = "state_script_error", kind = ?e.kind());
                }
                self.failed("error", started);
                Err(StateUnavailable)
            }
            Err(_) => {
                self.failed("timeout", started);
                Err(StateUnavailable)
            }
        }
    }

    /// Spends `cost` from the shared budget `kind:name` at `rate`: `Ok(Ok(()))` admitted,
    /// `Ok(Err(wait))` refused for `wait`.
    pub async fn spend(
        &self,
        kind: &str,
        name: &str,
        rate: Rate,
        cost: u32,
    ) -> Result<Result<(), Duration>, StateUnavailable> {
        let interval_us = (1e6 / rate.per_second).ceil().max(1.0) as u64;
        let mut call = self.gcra.key(self.key(kind, name));
        call.arg(interval_us).arg(rate.burst).arg(cost);
        let mut conn = self.connection().await?;
        let started = Instant::now();
        let out = tokio::time::timeout(
            self.config.timeout,
            call.invoke_async::<(i64, i64)>(&mut conn),
        )
        .await;
        match out {
            Ok(Ok((admitted, wait_us))) => {
                self.healthy.store(true, Ordering::Relaxed);
                self.metrics.state_round_trip("ok", started.elapsed());
                Ok(if admitted == 1 {
                    Ok(())
                } else {
                    Err(Duration::from_micros(wait_us.max(0) as u64))
                })
            }
            Ok(Err(_)) => {
                self.failed("error", started);
                Err(StateUnavailable)
            }
            Err(_) => {
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
        let mut conn = self
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
                self.failed("timeout", started);
                return Err("no answer within state.timeout_ms".to_string());
            }
        };
        match pong {
            Ok(_) => {
                self.healthy.store(true, Ordering::Relaxed);
                self.metrics.state_round_trip("ok", started.elapsed());
                Ok(())
            }
            Err(e) => {
                self.failed("error", started);
                Err(e.to_string())
            }
        }
    }
}
