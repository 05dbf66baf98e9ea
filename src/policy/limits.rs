//! `[limits]` and `[network]`: rates, concurrency, timeouts, header limits and which networks
//! may connect. Bounds that must hold even when the policy is silent have defaults.

use std::collections::BTreeMap;
use std::time::Duration;

use super::file;
use super::{Ctx, PolicyError};
use crate::a2a::Method;
use crate::auth::settings::AuthPolicy;
use crate::limits::network::{ClientAddressHeader, NetworkPolicy};
use crate::limits::rate::{Rate, RateLimitsConfig};
use crate::state::BudgetSettings;

/// Whether a `[limits.principals]` name can be a caller's: a static principal of the
/// policy, `anonymous` when it is allowed, or a JWT subject or mTLS identity (`jwt:…`,
/// `mtls:…`, which authentication names as it goes). A misspelt name would otherwise leave
/// the principal it meant at the default rate.
fn names_a_principal(auth: &AuthPolicy, name: &str) -> bool {
    let dynamic = ["jwt:", "mtls:"]
        .iter()
        .any(|p| name.strip_prefix(p).is_some_and(|rest| !rest.is_empty()));
    dynamic
        || (name == "anonymous" && auth.allow_anonymous)
        || auth.attributes_of(name).is_some()
        || auth
            .api_key
            .as_ref()
            .is_some_and(|a| a.keys.iter().any(|(n, _)| n == name))
}

#[derive(Debug, Clone)]
pub struct LimitsPolicy {
    pub rates: RateLimitsConfig,
    pub max_connections: usize,
    pub max_connections_per_client: usize,
    pub allow_chunked_requests: bool,
    pub max_in_flight_per_principal: usize,
    pub max_streams_per_principal: usize,
    pub max_h2_streams_per_connection: u32,
    /// Tasks, and contexts, whose owner the task registry remembers (least recently used
    /// evicted beyond). Fixed at start: the registry outlives reloads.
    pub max_registry_entries: usize,
    pub max_headers: usize,
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed (HTTP/2 included).
    pub idle_timeout: Duration,
    /// A connection whose peer takes nothing for this long is closed.
    pub write_timeout: Duration,
    pub body_read_timeout: Duration,
    pub min_body_bytes_per_second: u64,
    pub stream_keepalive: Duration,
    pub stream_idle_timeout: Duration,
    pub stream_max_duration: Duration,
    pub stream_buffer_bytes: usize,
    pub stream_buffer_bytes_per_principal: usize,
    pub list_tasks_page_bytes: usize,
    /// What one principal's requests being read and checked may hold together (their bodies
    /// and the trees parsed from them, reckoned), and all principals' requests. 0 until
    /// [`Ctx::settle_request_bytes`] when the policy leaves them to their defaults.
    pub request_bytes_per_principal: usize,
    pub request_bytes: usize,
}

/// `limits.request_bytes_per_principal`'s least default: a request at the default bounds, a
/// 32 MiB body of 1,048,576 values, is reckoned at 256 MiB (the body, its strings, 192 bytes a
/// value); a policy with larger bounds gets the largest request it admits.
const DEFAULT_REQUEST_BYTES_PER_PRINCIPAL: usize = 256 << 20;
/// `limits.request_bytes`'s least default: four requests at the default bounds at once.
const DEFAULT_REQUEST_BYTES: usize = 1 << 30;
/// The largest request byte budget (1 TiB).
const MAX_REQUEST_BYTES: u64 = 1 << 40;

/// A byte budget of 4 KiB to 1 GiB, or `default`.
fn bytes_between(
    ctx: &Ctx<'_>,
    key: &str,
    v: Option<u64>,
    default: usize,
) -> Result<usize, PolicyError> {
    match v {
        None => Ok(default),
        Some(n) if (4096..=1 << 30).contains(&n) => Ok(n as usize),
        Some(_) => ctx.err(key, None, "must be between 4096 and 1073741824".into()),
    }
}

impl Ctx<'_> {
    pub(super) fn limits(
        &self,
        l: file::LimitsSection,
        auth: Option<&AuthPolicy>,
    ) -> Result<LimitsPolicy, PolicyError> {
        let rate = |key: &str,
                    per_second: Option<f64>,
                    burst: Option<u32>,
                    default: Option<Rate>|
         -> Result<Option<Rate>, PolicyError> {
            match (per_second, burst) {
                (None, None) => Ok(default),
                (Some(r), b) => {
                    if !(r.is_finite() && r > 0.0) {
                        return self.err(key, None, "the rate must be a positive number".into());
                    }
                    let burst = b.unwrap_or_else(|| (r.ceil() as u32).max(1));
                    if burst == 0 {
                        return self.err(key, None, "burst must be at least 1".into());
                    }
                    Ok(Some(Rate {
                        per_second: r,
                        burst,
                    }))
                }
                (None, Some(_)) => self.err(key, None, "a burst needs its rate".into()),
            }
        };
        let per_principal = rate(
            "limits.requests_per_second",
            l.requests_per_second,
            l.burst,
            Some(Rate {
                per_second: 50.0,
                burst: 100,
            }),
        )?;
        let per_client_ip = rate(
            "limits.client_ip_requests_per_second",
            l.client_ip_requests_per_second,
            l.client_ip_burst,
            Some(Rate {
                per_second: 200.0,
                burst: 400,
            }),
        )?;
        // A client may open a connection per request at the rate its requests are allowed.
        let per_client_connection = rate(
            "limits.client_ip_connections_per_second",
            l.client_ip_connections_per_second,
            l.client_ip_connection_burst,
            Some(Rate {
                per_second: 200.0,
                burst: 400,
            }),
        )?;
        let mut per_method = BTreeMap::new();
        for (name, r) in &l.methods {
            if Method::from_name(name).is_none() {
                return self.err(
                    &format!("limits.methods.{name}"),
                    None,
                    "not an A2A 1.0 method".into(),
                );
            }
            let r = rate(
                &format!("limits.methods.{name}"),
                Some(r.requests_per_second),
                Some(r.burst),
                None,
            )?;
            if let Some(r) = r {
                per_method.insert(name.clone(), r);
            }
        }
        let mut principal_overrides = BTreeMap::new();
        for (name, r) in &l.principals {
            if !auth.is_some_and(|a| names_a_principal(a, name)) {
                return self.err(
                    &format!("limits.principals.{name}"),
                    None,
                    "names no principal: neither a static one of [auth] (bearer, basic, API \
                     key), anonymous when allowed, nor jwt:<subject> or mtls:<identity>"
                        .into(),
                );
            }
            let r = rate(
                &format!("limits.principals.{name}"),
                Some(r.requests_per_second),
                Some(r.burst),
                None,
            )?;
            if let Some(r) = r {
                principal_overrides.insert(name.clone(), r);
            }
        }
        let positive = |key: &str, v: Option<u32>, default: u32| -> Result<u32, PolicyError> {
            match v {
                Some(0) => self.err(key, None, "must be at least 1".into()),
                Some(n) => Ok(n),
                None => Ok(default),
            }
        };
        // At least a request of a few KiB, at most 1 TiB.
        let request_bytes = |key: &str, v: Option<u64>| match v {
            None => Ok(0),
            Some(n) if (65536..=MAX_REQUEST_BYTES).contains(&n) => {
                Ok(usize::try_from(n).unwrap_or(usize::MAX))
            }
            Some(_) => self.err(key, None, "must be between 65536 and 1099511627776".into()),
        };
        let ipv6_prefix = match &l.client_ipv6_prefix {
            None => crate::limits::rate::DEFAULT_IPV6_PREFIX,
            Some(p) if (16..=128).contains(p.get_ref()) => *p.get_ref(),
            Some(p) => {
                return self.spanned_err(
                    "limits.client_ipv6_prefix",
                    p,
                    "must be between 16 and 128",
                )
            }
        };
        Ok(LimitsPolicy {
            rates: RateLimitsConfig {
                per_principal,
                per_client_ip,
                per_client_connection,
                per_method,
                principal_overrides,
                ipv6_prefix,
            },
            max_connections: positive("limits.max_connections", l.max_connections, 10_000)?
                as usize,
            max_connections_per_client: positive(
                "limits.max_connections_per_client",
                l.max_connections_per_client,
                256,
            )? as usize,
            allow_chunked_requests: l.allow_chunked_requests.unwrap_or(false),
            max_in_flight_per_principal: positive(
                "limits.max_in_flight_per_principal",
                l.max_in_flight_per_principal,
                256,
            )? as usize,
            max_streams_per_principal: positive(
                "limits.max_streams_per_principal",
                l.max_streams_per_principal,
                64,
            )? as usize,
            max_h2_streams_per_connection: positive(
                "limits.max_h2_streams_per_connection",
                l.max_h2_streams_per_connection,
                128,
            )?,
            max_registry_entries: positive(
                "limits.max_registry_entries",
                l.max_registry_entries,
                200_000,
            )? as usize,
            max_headers: positive("limits.max_headers", l.max_headers, 100)? as usize,
            header_read_timeout: Duration::from_millis(
                l.header_read_timeout_ms.unwrap_or(10_000).max(100),
            ),
            idle_timeout: Duration::from_millis(l.idle_timeout_ms.unwrap_or(120_000).max(100)),
            write_timeout: Duration::from_millis(l.write_timeout_ms.unwrap_or(60_000).max(100)),
            body_read_timeout: Duration::from_millis(
                l.body_read_timeout_ms.unwrap_or(60_000).max(100),
            ),
            min_body_bytes_per_second: l.min_body_bytes_per_second.unwrap_or(4096),
            stream_keepalive: Duration::from_millis(
                l.stream_keepalive_ms.unwrap_or(15_000).max(100),
            ),
            stream_idle_timeout: Duration::from_millis(
                l.stream_idle_timeout_ms.unwrap_or(300_000).max(100),
            ),
            stream_max_duration: Duration::from_millis(
                l.stream_max_duration_ms.unwrap_or(3_600_000).max(100),
            ),
            stream_buffer_bytes: bytes_between(
                self,
                "limits.stream_buffer_bytes",
                l.stream_buffer_bytes,
                1024 * 1024,
            )?,
            stream_buffer_bytes_per_principal: bytes_between(
                self,
                "limits.stream_buffer_bytes_per_principal",
                l.stream_buffer_bytes_per_principal,
                16 * 1024 * 1024,
            )?,
            list_tasks_page_bytes: bytes_between(
                self,
                "limits.list_tasks_page_bytes",
                l.list_tasks_page_bytes,
                4 * 1024 * 1024,
            )?,
            request_bytes_per_principal: request_bytes(
                "limits.request_bytes_per_principal",
                l.request_bytes_per_principal,
            )?,
            request_bytes: request_bytes("limits.request_bytes", l.request_bytes)?,
        })
    }

    /// The request byte budgets once every `[a2a]` is known (`largest`: the largest request
    /// any of them admits, reckoned as the budgets reckon it): a budget that could not hold
    /// such a request would refuse it for ever with a 429 its client retries, so an explicit
    /// one must hold it, the total at least one principal's; a default grows to hold it.
    pub(super) fn settle_request_bytes(
        &self,
        limits: &mut LimitsPolicy,
        largest: usize,
    ) -> Result<(), PolicyError> {
        // Unset (0): the default, grown to `least`; set: at least `least`.
        let at_least = |key: &str, set: usize, least: usize, default: usize, what: &str| match set {
            0 => Ok(least.max(default)),
            set if set < least => self.err(key, None, format!("must be at least {least} ({what})")),
            set => Ok(set),
        };
        // A default per principal: 256 MiB, within an explicit total.
        let default = match limits.request_bytes {
            0 => DEFAULT_REQUEST_BYTES_PER_PRINCIPAL,
            total => DEFAULT_REQUEST_BYTES_PER_PRINCIPAL.min(total),
        };
        limits.request_bytes_per_principal = at_least(
            "limits.request_bytes_per_principal",
            limits.request_bytes_per_principal,
            largest,
            default,
            "the largest request the [a2a] bounds admit, or task a ListTasks page reads: twice max_body_bytes (or limits.list_tasks_page_bytes) and 192 bytes for each of max_json_values",
        )?;
        limits.request_bytes = at_least(
            "limits.request_bytes",
            limits.request_bytes,
            limits.request_bytes_per_principal,
            DEFAULT_REQUEST_BYTES,
            "limits.request_bytes_per_principal",
        )?;
        Ok(())
    }

    pub(super) fn network(&self, n: file::NetworkSection) -> Result<NetworkPolicy, PolicyError> {
        let header = match &n.client_address_header {
            None => ClientAddressHeader::Both,
            Some(name) => match ClientAddressHeader::from_setting(name.get_ref()) {
                Some(h) => h,
                None => {
                    return self.spanned_err(
                        "network.client_address_header",
                        name,
                        "must be \"x-forwarded-for\" or \"forwarded\"",
                    )
                }
            },
        };
        NetworkPolicy::new(&n.allow, &n.deny, &n.trusted_proxies)
            .map(|p| p.reading(header))
            .or_else(|m| self.err("network", None, m))
    }
}

impl super::Policy {
    /// What the process's budgets are built from: `[limits]`'s rates and concurrency, and
    /// `auth.throttle`.
    pub fn budgets(&self) -> BudgetSettings {
        let l = &self.limits;
        BudgetSettings {
            rates: RateLimitsConfig {
                per_method: Default::default(),
                ..l.rates.clone()
            },
            method_rates: RateLimitsConfig {
                per_principal: None,
                per_client_ip: None,
                per_client_connection: None,
                per_method: l.rates.per_method.clone(),
                principal_overrides: Default::default(),
                ipv6_prefix: l.rates.ipv6_prefix,
            },
            throttle: (
                self.auth.throttle.failures_per_minute,
                self.auth.throttle.failures_burst,
                l.rates.ipv6_prefix,
            ),
            concurrency: (
                l.max_in_flight_per_principal,
                l.max_streams_per_principal,
                l.stream_buffer_bytes_per_principal,
            ),
            request_bytes: (l.request_bytes_per_principal, l.request_bytes),
        }
    }
}
