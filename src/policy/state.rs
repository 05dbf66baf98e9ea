//! The `[state]` table: where the process state lives (this process, or a Redis shared by
//! replicas) and the secret every replica signs page tokens and context aliases with.

use std::time::Duration;

use super::{file, secret, Ctx, PolicyError};
use crate::state::redis::RedisConfig;

#[derive(Clone, Default)]
pub struct StatePolicy {
    /// `backend = "redis"`.
    pub redis: Option<RedisConfig>,
    /// `page_token_secret_env`: the registry's key (else random per process).
    pub page_token_secret: Option<String>,
    /// `task_retention_ms` (redis): how long ownership outlives its last write.
    pub task_retention: Duration,
    /// `busy_lease_ms` (redis): how long a busy context stays busy without renewal.
    pub busy_lease: Duration,
    /// `max_tasks_per_owner` (redis): the most tasks Redis keeps for one owner.
    pub max_tasks_per_owner: u64,
}

/// A week.
const DEFAULT_RETENTION_MS: u64 = 7 * 24 * 3600 * 1000;
const DEFAULT_LEASE_MS: u64 = 30_000;
/// Rate leases (`rate_lease_max`, `rate_lease_ms`): see `crate::state::leases`.
const DEFAULT_RATE_LEASE_MAX: u64 = 64;
const DEFAULT_RATE_LEASE_MS: u64 = 100;
/// Tasks Redis keeps per owner (about 1 KB each): a caller's share of Redis's memory.
pub const DEFAULT_MAX_TASKS_PER_OWNER: u64 = 100_000;

/// The page token secret redacted (the Redis password is, by `RedisConfig`'s own).
impl std::fmt::Debug for StatePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatePolicy")
            .field("redis", &self.redis)
            .field(
                "page_token_secret",
                &self.page_token_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("task_retention", &self.task_retention)
            .field("busy_lease", &self.busy_lease)
            .field("max_tasks_per_owner", &self.max_tasks_per_owner)
            .finish()
    }
}

impl StatePolicy {
    pub fn backend(&self) -> &'static str {
        if self.redis.is_some() {
            "redis"
        } else {
            "memory"
        }
    }
}

impl Ctx<'_> {
    /// The integer at `key`: `default` when absent, refused with `msg` outside `range`.
    fn within(
        &self,
        key: &str,
        value: &Option<super::Spanned<u64>>,
        default: u64,
        range: std::ops::RangeInclusive<u64>,
        msg: &str,
    ) -> Result<u64, PolicyError> {
        match value {
            None => Ok(default),
            Some(v) if range.contains(v.get_ref()) => Ok(*v.get_ref()),
            Some(v) => self.spanned_err(key, v, msg),
        }
    }

    pub(super) fn state(&self, s: file::StateSection) -> Result<StatePolicy, PolicyError> {
        let page_token_secret = match &s.page_token_secret_env {
            None => None,
            Some(var) => {
                let v = secret::from_env(var.get_ref())
                    .or_else(|m| self.spanned_err("state.page_token_secret_env", var, m))?;
                if v.len() < 32 {
                    return self.spanned_err(
                        "state.page_token_secret_env",
                        var,
                        "must hold at least 32 bytes",
                    );
                }
                Some(v)
            }
        };
        let redis_only = [
            ("state.redis_url", s.redis_url.as_ref().map(|v| v.span())),
            (
                "state.redis_password_env",
                s.redis_password_env.as_ref().map(|v| v.span()),
            ),
            (
                "state.redis_password_file",
                s.redis_password_file.as_ref().map(|v| v.span()),
            ),
            (
                "state.redis_ca_file",
                s.redis_ca_file.as_ref().map(|v| v.span()),
            ),
            ("state.key_prefix", s.key_prefix.as_ref().map(|v| v.span())),
            ("state.timeout_ms", s.timeout_ms.as_ref().map(|v| v.span())),
            (
                "state.task_retention_ms",
                s.task_retention_ms.as_ref().map(|v| v.span()),
            ),
            (
                "state.busy_lease_ms",
                s.busy_lease_ms.as_ref().map(|v| v.span()),
            ),
            (
                "state.rate_lease_max",
                s.rate_lease_max.as_ref().map(|v| v.span()),
            ),
            (
                "state.rate_lease_ms",
                s.rate_lease_ms.as_ref().map(|v| v.span()),
            ),
            (
                "state.max_tasks_per_owner",
                s.max_tasks_per_owner.as_ref().map(|v| v.span()),
            ),
        ];
        match s.backend.as_ref().map(|b| b.get_ref().as_str()) {
            None | Some("memory") => {
                if let Some((key, span)) = redis_only.iter().find(|(_, sp)| sp.is_some()) {
                    return self.err(
                        key,
                        span.clone(),
                        "only meaningful with backend = \"redis\"".into(),
                    );
                }
                Ok(StatePolicy {
                    redis: None,
                    page_token_secret,
                    task_retention: Duration::from_millis(DEFAULT_RETENTION_MS),
                    busy_lease: Duration::from_millis(DEFAULT_LEASE_MS),
                    max_tasks_per_owner: DEFAULT_MAX_TASKS_PER_OWNER,
                })
            }
            Some("redis") => {
                let Some(raw) = &s.redis_url else {
                    return self.err(
                        "state.redis_url",
                        s.backend.as_ref().map(|b| b.span()),
                        "required with backend = \"redis\"".into(),
                    );
                };
                let url = match url::Url::parse(raw.get_ref()) {
                    Ok(u)
                        if matches!(u.scheme(), "redis" | "rediss")
                            && u.host().is_some()
                            && u.password().is_none() =>
                    {
                        u
                    }
                    Ok(u) if matches!(u.scheme(), "unix" | "redis+unix") && unix_url_ok(&u) => u,
                    _ => {
                        return self.spanned_err(
                            "state.redis_url",
                            raw,
                            "must be redis://HOST:PORT/DB, rediss://... or unix:///PATH/redis.sock?db=DB (a Redis on this host), without a password (use redis_password_env or redis_password_file)",
                        )
                    }
                };
                let password = match (&s.redis_password_env, &s.redis_password_file) {
                    (None, None) => None,
                    (Some(var), None) => Some(
                        secret::from_env(var.get_ref())
                            .or_else(|m| self.spanned_err("state.redis_password_env", var, m))?,
                    ),
                    (None, Some(f)) => Some(
                        secret::from_file(f.get_ref(), false, false)
                            .and_then(|t| t.ok_or_else(|| "missing".to_string()))
                            .map(|t| t.token)
                            .or_else(|m| self.spanned_err("state.redis_password_file", f, m))?,
                    ),
                    (Some(var), Some(_)) => {
                        return self.spanned_err(
                            "state.redis_password_env",
                            var,
                            "give redis_password_env or redis_password_file, not both",
                        )
                    }
                };
                let ca_pem = match &s.redis_ca_file {
                    None => None,
                    Some(_) if url.scheme() != "rediss" => {
                        return self.err(
                            "state.redis_ca_file",
                            s.redis_ca_file.as_ref().map(|v| v.span()),
                            "only meaningful with a rediss:// URL".into(),
                        )
                    }
                    Some(f) => Some(std::fs::read(f.get_ref()).or_else(|e| {
                        self.spanned_err("state.redis_ca_file", f, format!("cannot read: {e}"))
                    })?),
                };
                let key_prefix = match &s.key_prefix {
                    None => "a2a-edge:".to_string(),
                    Some(p)
                        if !p.get_ref().is_empty()
                            && p.get_ref().len() <= 64
                            && p.get_ref().bytes().all(|b| b.is_ascii_graphic()) =>
                    {
                        p.get_ref().clone()
                    }
                    Some(p) => {
                        return self.spanned_err(
                            "state.key_prefix",
                            p,
                            "must be 1-64 printable ASCII characters",
                        )
                    }
                };
                let timeout = Duration::from_millis(self.within(
                    "state.timeout_ms",
                    &s.timeout_ms,
                    250,
                    1..=60_000,
                    "must be between 1 and 60000",
                )?);
                let task_retention = Duration::from_millis(self.within(
                    "state.task_retention_ms",
                    &s.task_retention_ms,
                    DEFAULT_RETENTION_MS,
                    1000..=366 * 24 * 3600 * 1000,
                    "must be between 1000 and 31622400000 (a year); keep it above the longest task",
                )?);
                let busy_lease = Duration::from_millis(self.within(
                    "state.busy_lease_ms",
                    &s.busy_lease_ms,
                    DEFAULT_LEASE_MS,
                    300..=3_600_000,
                    "must be between 300 and 3600000",
                )?);
                if busy_lease <= timeout * 3 {
                    return self.err(
                        "state.busy_lease_ms",
                        s.busy_lease_ms
                            .as_ref()
                            .map(|v| v.span())
                            .or_else(|| s.timeout_ms.as_ref().map(|v| v.span())),
                        "must be more than three round trips (3 x timeout_ms): a lease is renewed every third of it".into(),
                    );
                }
                let rate_lease_max = self.within(
                    "state.rate_lease_max",
                    &s.rate_lease_max,
                    DEFAULT_RATE_LEASE_MAX,
                    1..=1024,
                    "must be between 1 (one round trip per request) and 1024",
                )?;
                let rate_lease = Duration::from_millis(self.within(
                    "state.rate_lease_ms",
                    &s.rate_lease_ms,
                    DEFAULT_RATE_LEASE_MS,
                    1..=1000,
                    "must be between 1 and 1000",
                )?);
                let max_tasks_per_owner = self.within(
                    "state.max_tasks_per_owner",
                    &s.max_tasks_per_owner,
                    DEFAULT_MAX_TASKS_PER_OWNER,
                    16..=100_000_000,
                    "must be between 16 and 100000000",
                )?;
                if page_token_secret.is_none() {
                    return self.err(
                        "state.page_token_secret_env",
                        s.backend.as_ref().map(|b| b.span()),
                        "required with backend = \"redis\": every replica signs page tokens and context aliases with it".into(),
                    );
                }
                Ok(StatePolicy {
                    redis: Some(RedisConfig {
                        url,
                        password,
                        ca_pem,
                        key_prefix,
                        timeout,
                        rate_lease_max: rate_lease_max as u32,
                        rate_lease,
                    }),
                    page_token_secret,
                    task_retention,
                    busy_lease,
                    max_tasks_per_owner,
                })
            }
            Some(_) => {
                let b = s.backend.as_ref().map(|b| b.span());
                self.err("state.backend", b, "must be \"memory\" or \"redis\"".into())
            }
        }
    }
}

/// The longest path a Unix socket address holds on Linux (`sun_path` is 108 bytes with its
/// terminating NUL): a longer one could never be connected to.
const MAX_SOCKET_PATH: usize = 107;

/// A Redis on this host through its Unix socket: `unix:///path/to/redis.sock`, optionally
/// `?db=N`; no host, user, password or other query parameter (redis-rs would read a
/// password from `?pass=`: secrets never go in the URL); a path a socket address can hold.
fn unix_url_ok(u: &url::Url) -> bool {
    u.host().is_none()
        && u.username().is_empty()
        && u.password().is_none()
        && u.fragment().is_none()
        && !u.cannot_be_a_base()
        && u.path().len() > 1
        && u.to_file_path()
            .is_ok_and(|p| p.as_os_str().len() <= MAX_SOCKET_PATH)
        && u.path().starts_with('/')
        && !u.path().ends_with('/')
        && u.query_pairs().all(|(k, v)| {
            k == "db" && !v.is_empty() && v.len() <= 5 && v.bytes().all(|b| b.is_ascii_digit())
        })
}
