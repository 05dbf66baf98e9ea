//! Request rate limits (governor, GCRA): per client address (before authentication), per
//! principal (with per-principal overrides) and per (principal, method); and the rate of new
//! connections per client address (at accept).
//!
//! Each limit is one governor limiter whose state is a single timestamp per key, so a check is a
//! hash lookup and a compare-and-swap, with no timer and no background task.
//!
//! Memory is bounded without a janitor task: every [`SWEEP_EVERY`] checks a keyed limiter looks
//! at its size and, when it holds more than its threshold (at least [`SWEEP_MIN_KEYS`]), drops
//! the keys whose state is indistinguishable from a fresh one (`retain_recent`: their budget has
//! been fully refilled for an emission interval). The threshold then becomes twice what is left,
//! so a large honest population is not swept on every round. A limiter thus holds at most about
//! twice the keys that were active within one refill window (`burst / per_second`), plus
//! [`SWEEP_EVERY`]. Client addresses are keyed per IPv4 address and
//! per IPv6 /64 (one end site), so a host cannot mint fresh keys by rotating addresses inside
//! its own prefix; principals are keyed by name, and only authenticated names reach them.

use std::collections::BTreeMap;
use std::fmt;
use std::hash::Hash;
use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::reason::{self, Reason};

/// How many checks pass between two looks at a keyed limiter's size.
pub const SWEEP_EVERY: usize = 1024;
/// Below this many keys a keyed limiter is never swept.
pub const SWEEP_MIN_KEYS: usize = 16_384;
/// The longest time a full burst may take to refill (it also keeps governor's nanosecond
/// arithmetic far from overflowing).
const MAX_REFILL: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// A sustained rate and the burst allowed on top of it (the bucket's size).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Requests per second, sustained; may be below 1 (0.5 = one request every two seconds).
    pub per_second: f64,
    /// Requests allowed at once after a quiet period; at least 1.
    pub burst: u32,
}

impl Rate {
    /// GCRA's emission interval, in µs (at least 1).
    pub fn interval_us(self) -> u64 {
        (1e6 / self.per_second).ceil().max(1.0) as u64
    }
}

/// Which rates apply; `None` or an empty map means that limit is off.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateLimitsConfig {
    /// Each principal's rate, unless it has an override.
    pub per_principal: Option<Rate>,
    /// Each client address's rate (IPv4 address or IPv6 /64), checked before authentication.
    pub per_client_ip: Option<Rate>,
    /// Each client address's new connections, checked at accept, before any TLS work.
    pub per_client_connection: Option<Rate>,
    /// Per A2A method name (exact, case-sensitive): a rate for each (principal, method).
    pub per_method: BTreeMap<String, Rate>,
    /// A principal's own rate in place of `per_principal` (applies even when that is off).
    pub principal_overrides: BTreeMap<String, Rate>,
    /// IPv6 clients are keyed by this prefix (one end site: 64); 0 means the default.
    pub ipv6_prefix: u8,
}

/// A refusal: which limit, and how long until the next request of this key would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    /// `rate.client_ip`, `rate.principal`, `rate.method` or (at accept)
    /// `limits.connection_rate`.
    pub reason: Reason,
    /// Exact wait (sub-second precision); see [`Limited::retry_after_secs`] for the header.
    pub retry_after: Duration,
}

impl Limited {
    /// The wait in whole seconds for a `Retry-After` header: rounded up, at least 1, so a client
    /// that obeys it is never refused again for the same reason straight away.
    pub fn retry_after_secs(&self) -> u64 {
        let secs = self.retry_after.as_secs();
        let secs = if self.retry_after.subsec_nanos() > 0 {
            secs.saturating_add(1)
        } else {
            secs
        };
        secs.max(1)
    }
}

/// The configured rate limits, built once from a validated [`RateLimitsConfig`]. Each limiter
/// is shared (`Arc`) so that a reload can keep the ones whose own rate it did not change.
pub struct RateLimits {
    config: RateLimitsConfig,
    client_ip: Option<Arc<Keyed<IpAddr>>>,
    client_connection: Option<Arc<Keyed<IpAddr>>>,
    ipv6_prefix: u8,
    principal: Option<Arc<Keyed<String>>>,
    /// One limiter per overridden principal name, keyed by owner ([`override_name`]): a JWT
    /// subject named within tenants has a budget per tenant at its override's rate.
    overrides: BTreeMap<String, Arc<Keyed<String>>>,
    /// One limiter per configured method, keyed by principal.
    methods: BTreeMap<String, Arc<Keyed<String>>>,
}

impl RateLimits {
    /// Validates every rate (finite `per_second` above 0, `burst` at least 1, a full burst
    /// refilled within a year, at most 10^9 per second) and names the first bad one.
    pub fn new(cfg: RateLimitsConfig) -> Result<RateLimits, String> {
        RateLimits::carry(cfg, None)
    }

    /// As [`RateLimits::new`], keeping each limiter of `previous` whose own rate (and, for
    /// client addresses, IPv6 prefix) `cfg` leaves as it was: a reload that adds one
    /// override or one method's rate gives no other key a fresh burst.
    pub fn carry(
        cfg: RateLimitsConfig,
        previous: Option<&RateLimits>,
    ) -> Result<RateLimits, String> {
        let client_ip = address_limiter(
            "per_client_ip",
            cfg.per_client_ip,
            cfg.ipv6_prefix,
            previous.map(|p| (p.config.per_client_ip, p.config.ipv6_prefix, &p.client_ip)),
        )?;
        let client_connection = address_limiter(
            "per_client_connection",
            cfg.per_client_connection,
            cfg.ipv6_prefix,
            previous.map(|p| {
                let c = &p.config;
                (c.per_client_connection, c.ipv6_prefix, &p.client_connection)
            }),
        )?;
        let principal = cfg
            .per_principal
            .map(|rate| {
                let kept = previous
                    .filter(|p| p.config.per_principal == Some(rate))
                    .and_then(|p| p.principal.as_ref());
                kept_or_new(kept, || Ok(Keyed::new(quota("per_principal", rate)?)))
            })
            .transpose()?;
        let mut overrides = BTreeMap::new();
        for (name, rate) in &cfg.principal_overrides {
            if name.is_empty() {
                return Err("principal_overrides: a principal name is empty".to_owned());
            }
            let q = quota(&format!("principal_overrides.{name}"), *rate)?;
            let kept = previous
                .filter(|p| p.config.principal_overrides.get(name) == Some(rate))
                .and_then(|p| p.overrides.get(name));
            overrides.insert(name.clone(), kept_or_new(kept, || Ok(Keyed::new(q)))?);
        }
        let mut methods = BTreeMap::new();
        for (method, rate) in &cfg.per_method {
            if method.is_empty() {
                return Err("per_method: a method name is empty".to_owned());
            }
            let q = quota(&format!("per_method.{method}"), *rate)?;
            let kept = previous
                .filter(|p| p.config.per_method.get(method) == Some(rate))
                .and_then(|p| p.methods.get(method));
            methods.insert(method.clone(), kept_or_new(kept, || Ok(Keyed::new(q)))?);
        }
        Ok(RateLimits {
            ipv6_prefix: cfg.ipv6_prefix,
            config: cfg,
            client_ip,
            client_connection,
            principal,
            overrides,
            methods,
        })
    }

    /// Before authentication (cheap; keyed by address: IPv4 address, IPv6 /64, an IPv4-mapped
    /// IPv6 address as its IPv4 address).
    pub fn check_client_ip(&self, ip: IpAddr) -> Result<(), Limited> {
        self.check_address(self.client_ip.as_deref(), ip, reason::RATE_CLIENT_IP)
    }

    /// A new connection from `ip`, at accept (keyed as [`RateLimits::check_client_ip`]): a
    /// client cannot make the edge do TLS handshakes faster than this.
    pub fn check_connection(&self, ip: IpAddr) -> Result<(), Limited> {
        self.check_address(
            self.client_connection.as_deref(),
            ip,
            reason::LIMITS_CONNECTION_RATE,
        )
    }

    /// `ip`'s budget in `limiter` (none: no limit), keyed by its client key.
    fn check_address(
        &self,
        limiter: Option<&Keyed<IpAddr>>,
        ip: IpAddr,
        reason: Reason,
    ) -> Result<(), Limited> {
        let Some(limiter) = limiter else {
            return Ok(());
        };
        limiter
            .check(&client_key(ip, self.ipv6_prefix))
            .map_err(|retry_after| Limited {
                reason,
                retry_after,
            })
    }

    /// After authentication: the principal's own rate (its override if any), then the
    /// (principal, method) rate. A request refused by its method's rate has still spent from the
    /// principal's budget: it was a request.
    pub fn check_principal(&self, principal: &str, method: Option<&str>) -> Result<(), Limited> {
        let limited = |reason| {
            move |retry_after| Limited {
                reason,
                retry_after,
            }
        };
        // Allocated at most once per check, and only when a keyed limit applies.
        let mut key: Option<String> = None;
        if let Some(own) = self.overrides.get(override_name(principal)) {
            let k = key.get_or_insert_with(|| principal.to_owned());
            own.check(k).map_err(limited(reason::RATE_PRINCIPAL))?;
        } else if let Some(limiter) = &self.principal {
            let k = key.get_or_insert_with(|| principal.to_owned());
            limiter.check(k).map_err(limited(reason::RATE_PRINCIPAL))?;
        }
        if let Some(limiter) = method.and_then(|m| self.methods.get(m)) {
            let k = key.get_or_insert_with(|| principal.to_owned());
            limiter.check(k).map_err(limited(reason::RATE_METHOD))?;
        }
        Ok(())
    }

    /// Keys held across all keyed limiters (for metrics; see the module note on memory).
    pub fn tracked_keys(&self) -> usize {
        self.client_ip.as_ref().map_or(0, |k| k.len())
            + self.client_connection.as_ref().map_or(0, |k| k.len())
            + self.principal.as_ref().map_or(0, |k| k.len())
            + self.methods.values().map(|k| k.len()).sum::<usize>()
    }

    /// The configuration these limits were built from.
    pub fn config(&self) -> &RateLimitsConfig {
        &self.config
    }
}

impl fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimits")
            .field("config", &self.config)
            .field("tracked_keys", &self.tracked_keys())
            .finish()
    }
}

/// The IPv6 prefix a client is keyed by when the policy says nothing: one end site.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// The limiter a reload keeps (its own rate unchanged), else a new one.
fn kept_or_new<T>(
    kept: Option<&Arc<T>>,
    new: impl FnOnce() -> Result<T, String>,
) -> Result<Arc<T>, String> {
    match kept {
        Some(kept) => Ok(Arc::clone(kept)),
        None => new().map(Arc::new),
    }
}

/// A limiter keyed by client address, if that limit is on.
type AddressLimiter = Option<Arc<Keyed<IpAddr>>>;

/// A limiter keyed by client address at `rate` (None: no limit), the previous one (its rate,
/// its IPv6 prefix, itself) kept when its rate and the prefix are what they were.
fn address_limiter(
    what: &str,
    rate: Option<Rate>,
    prefix: u8,
    previous: Option<(Option<Rate>, u8, &AddressLimiter)>,
) -> Result<AddressLimiter, String> {
    rate.map(|rate| {
        let kept = previous
            .filter(|(r, p, _)| *r == Some(rate) && *p == prefix)
            .and_then(|(_, _, k)| k.as_ref());
        kept_or_new(kept, || Ok(Keyed::new(quota(what, rate)?)))
    })
    .transpose()
}

/// The IPv6 prefix length a setting means (0: [`DEFAULT_IPV6_PREFIX`]; at most 128).
pub fn ipv6_prefix_len(prefix: u8) -> u8 {
    match prefix {
        0 => DEFAULT_IPV6_PREFIX,
        p => p.min(128),
    }
}

/// The key of a client address for rates and the failure throttle: IPv4 as is (also when
/// IPv4-mapped), IPv6 by its first `prefix` bits (0: [`DEFAULT_IPV6_PREFIX`]), so a host
/// cannot mint fresh keys by rotating addresses inside its own prefix.
pub fn client_key(ip: IpAddr, prefix: u8) -> IpAddr {
    let prefix = ipv6_prefix_len(prefix);
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
        v4 => v4,
    }
}

/// The name a `[limits.principals]` override is written under for an owner key: the
/// principal's name, without the tenant a JWT subject's owner key carries (`jwt:<sub>`
/// U+001E `<tenant>`; see `crate::auth::Principal::owner_key`).
pub fn override_name(owner_key: &str) -> &str {
    owner_key.split('\u{1e}').next().unwrap_or(owner_key)
}

/// A governor quota from a rate, or a message naming `what` and the problem.
fn quota(what: &str, rate: Rate) -> Result<Quota, String> {
    let ps = rate.per_second;
    if !ps.is_finite() || ps <= 0.0 {
        return Err(format!(
            "{what}: per_second must be a finite number above 0 (got {ps})"
        ));
    }
    let burst =
        NonZeroU32::new(rate.burst).ok_or_else(|| format!("{what}: burst must be at least 1"))?;
    let period = Duration::try_from_secs_f64(1.0 / ps)
        .map_err(|_| format!("{what}: per_second {ps} is too small"))?;
    // with_period refuses a zero period (more than 10^9 per second).
    let q = Quota::with_period(period)
        .ok_or_else(|| format!("{what}: per_second {ps} is too large (at most 1e9)"))?;
    match period.checked_mul(burst.get()) {
        Some(refill) if refill <= MAX_REFILL => Ok(q.allow_burst(burst)),
        _ => Err(format!(
            "{what}: a burst of {} at {ps} per second takes more than a year to refill",
            burst.get()
        )),
    }
}

/// A keyed limiter that keeps its own size in check (see the module note).
pub(crate) struct Keyed<K: Hash + Eq + Clone> {
    limiter: DefaultKeyedRateLimiter<K>,
    checks: AtomicUsize,
    sweep_above: AtomicUsize,
}

impl<K: Hash + Eq + Clone> Keyed<K> {
    pub(crate) fn new(quota: Quota) -> Keyed<K> {
        Keyed {
            limiter: RateLimiter::keyed(quota),
            checks: AtomicUsize::new(0),
            sweep_above: AtomicUsize::new(SWEEP_MIN_KEYS),
        }
    }

    pub(crate) fn check(&self, key: &K) -> Result<(), Duration> {
        let outcome = self.limiter.check_key(key);
        self.housekeep();
        outcome.map_err(|not_until| not_until.wait_time_from(self.limiter.clock().now()))
    }

    /// Amortized O(1): one counter increment per check, a size look every `SWEEP_EVERY`.
    fn housekeep(&self) {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY != 0 {
            return;
        }
        let before = self.limiter.len();
        if before <= self.sweep_above.load(Ordering::Relaxed) {
            return;
        }
        self.limiter.retain_recent();
        let after = self.limiter.len();
        if after < before / 2 {
            self.limiter.shrink_to_fit();
        }
        self.sweep_above.store(
            SWEEP_MIN_KEYS.max(after.saturating_mul(2)),
            Ordering::Relaxed,
        );
    }

    pub(crate) fn len(&self) -> usize {
        self.limiter.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_second: f64, burst: u32) -> Rate {
        Rate { per_second, burst }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Spends `n` checks that must all pass, then returns the next one's refusal.
    fn exhaust(n: u32, mut check: impl FnMut() -> Result<(), Limited>) -> Limited {
        for i in 0..n {
            assert_eq!(check(), Ok(()), "check {i} of the burst of {n}");
        }
        check().expect_err("one past the burst is refused")
    }

    #[test]
    fn invalid_configs_are_refused_with_the_entry_named() {
        let cases: Vec<(&str, RateLimitsConfig, &str)> = vec![
            (
                "zero rate",
                RateLimitsConfig {
                    per_principal: Some(rate(0.0, 1)),
                    ..Default::default()
                },
                "per_principal: per_second",
            ),
            (
                "negative rate",
                RateLimitsConfig {
                    per_client_ip: Some(rate(-1.0, 1)),
                    ..Default::default()
                },
                "per_client_ip: per_second",
            ),
            (
                "NaN",
                RateLimitsConfig {
                    per_principal: Some(rate(f64::NAN, 1)),
                    ..Default::default()
                },
                "per_principal: per_second",
            ),
            (
                "infinite",
                RateLimitsConfig {
                    per_principal: Some(rate(f64::INFINITY, 1)),
                    ..Default::default()
                },
                "per_principal: per_second",
            ),
            (
                "zero burst",
                RateLimitsConfig {
                    per_client_ip: Some(rate(10.0, 0)),
                    ..Default::default()
                },
                "per_client_ip: burst",
            ),
            (
                "too fast",
                RateLimitsConfig {
                    per_principal: Some(rate(1e10, 1)),
                    ..Default::default()
                },
                "too large",
            ),
            (
                "subnormal",
                RateLimitsConfig {
                    per_principal: Some(rate(f64::MIN_POSITIVE / 4.0, 1)),
                    ..Default::default()
                },
                "too small",
            ),
            (
                "refill over a year",
                RateLimitsConfig {
                    per_principal: Some(rate(0.001, 1_000_000)),
                    ..Default::default()
                },
                "more than a year",
            ),
            (
                "bad method rate",
                RateLimitsConfig {
                    per_method: [("SendMessage".to_owned(), rate(1.0, 0))].into(),
                    ..Default::default()
                },
                "per_method.SendMessage: burst",
            ),
            (
                "bad override",
                RateLimitsConfig {
                    principal_overrides: [("ops".to_owned(), rate(f64::NAN, 5))].into(),
                    ..Default::default()
                },
                "principal_overrides.ops: per_second",
            ),
            (
                "empty method",
                RateLimitsConfig {
                    per_method: [(String::new(), rate(1.0, 1))].into(),
                    ..Default::default()
                },
                "per_method: a method name is empty",
            ),
            (
                "empty principal",
                RateLimitsConfig {
                    principal_overrides: [(String::new(), rate(1.0, 1))].into(),
                    ..Default::default()
                },
                "principal_overrides: a principal name is empty",
            ),
        ];
        for (name, cfg, want) in cases {
            let err = RateLimits::new(cfg).expect_err(name);
            assert!(
                err.contains(want),
                "{name}: {err:?} should contain {want:?}"
            );
        }
        // The edges that are allowed.
        for r in [
            rate(1e9, 1),
            rate(0.5, 1),
            rate(1.0 / 86_400.0, 300),
            rate(1000.0, u32::MAX),
        ] {
            let cfg = RateLimitsConfig {
                per_principal: Some(r),
                ..Default::default()
            };
            assert!(RateLimits::new(cfg).is_ok(), "{r:?}");
        }
    }

    #[test]
    fn burst_then_refused_with_a_plausible_retry_after() {
        // (rate, burst, the longest plausible wait)
        let cases = [
            (rate(1.0, 3), 3, Duration::from_secs(1)),
            (rate(10.0, 5), 5, Duration::from_millis(100)),
            (rate(0.5, 1), 1, Duration::from_secs(2)),
            (rate(0.25, 2), 2, Duration::from_secs(4)),
            (rate(1.0 / 60.0, 1), 1, Duration::from_secs(60)),
        ];
        for (r, burst, longest) in cases {
            let limits = RateLimits::new(RateLimitsConfig {
                per_client_ip: Some(r),
                ..Default::default()
            })
            .unwrap();
            let a = ip("192.0.2.1");
            let refused = exhaust(burst, || limits.check_client_ip(a));
            assert_eq!(refused.reason, "rate.client_ip");
            // Nearly one full interval: little time passed since the burst was spent.
            assert!(refused.retry_after <= longest, "{r:?}: {refused:?}");
            assert!(refused.retry_after > longest / 2, "{r:?}: {refused:?}");
            assert_eq!(
                refused.retry_after_secs(),
                longest.as_secs().max(1),
                "{r:?}"
            );
        }
    }

    /// New connections are keyed as the client address's requests (an IPv4-mapped address
    /// is its IPv4 address, IPv6 by its prefix) and spend a budget of their own.
    #[test]
    fn new_connections_have_their_own_budget_per_address() {
        let limits = RateLimits::new(RateLimitsConfig {
            per_client_ip: Some(rate(0.001, 5)),
            per_client_connection: Some(rate(0.001, 2)),
            ipv6_prefix: 64,
            ..Default::default()
        })
        .unwrap();
        // (the address spending the burst, one that shares its budget, one that does not)
        let rows = [
            ("192.0.2.1", "::ffff:192.0.2.1", "192.0.2.2"),
            ("2001:db8:0:1::1", "2001:db8:0:1:ffff::9", "2001:db8:0:2::1"),
        ];
        for (first, same, other) in rows {
            let refused = exhaust(2, || limits.check_connection(ip(first)));
            assert_eq!(refused.reason, "limits.connection_rate", "{first}");
            assert!(limits.check_connection(ip(same)).is_err(), "{same}");
            assert_eq!(limits.check_connection(ip(other)), Ok(()), "{other}");
            // The address's requests are another budget.
            assert_eq!(limits.check_client_ip(ip(first)), Ok(()), "{first}");
        }
    }

    #[test]
    fn the_budget_refills_after_retry_after() {
        let limits = RateLimits::new(RateLimitsConfig {
            per_principal: Some(rate(100.0, 1)),
            ..Default::default()
        })
        .unwrap();
        let refused = exhaust(1, || limits.check_principal("alice", None));
        std::thread::sleep(refused.retry_after + Duration::from_millis(2));
        assert_eq!(limits.check_principal("alice", None), Ok(()));
    }

    #[test]
    fn one_key_limited_while_another_is_not() {
        let limits = RateLimits::new(RateLimitsConfig {
            per_client_ip: Some(rate(1.0, 2)),
            per_principal: Some(rate(1.0, 2)),
            ..Default::default()
        })
        .unwrap();
        exhaust(2, || limits.check_client_ip(ip("192.0.2.1")));
        exhaust(2, || limits.check_principal("alice", None));
        // (address that must still pass, why)
        let others = [
            ("192.0.2.2", "another IPv4 address"),
            ("2001:db8::1", "an IPv6 address"),
            ("2001:db8:0:1::1", "another /64"),
        ];
        for (addr, why) in others {
            assert_eq!(limits.check_client_ip(ip(addr)), Ok(()), "{why}");
        }
        assert_eq!(limits.check_principal("bob", None), Ok(()));
        // The same key under another spelling is still the same key.
        let same = [("::ffff:192.0.2.1", "IPv4-mapped"), ("192.0.2.1", "itself")];
        for (addr, why) in same {
            let refused = limits.check_client_ip(ip(addr)).expect_err(why);
            assert_eq!(refused.reason, "rate.client_ip", "{why}");
        }
        let refused = limits.check_principal("alice", None).unwrap_err();
        assert_eq!(refused.reason, "rate.principal");
    }

    #[test]
    fn ipv6_is_keyed_per_slash_64() {
        let limits = RateLimits::new(RateLimitsConfig {
            per_client_ip: Some(rate(1.0, 2)),
            ..Default::default()
        })
        .unwrap();
        // Rotating the interface identifier does not buy a fresh budget.
        assert_eq!(limits.check_client_ip(ip("2001:db8:1:2::1")), Ok(()));
        assert_eq!(limits.check_client_ip(ip("2001:db8:1:2:ffff::7")), Ok(()));
        assert!(limits.check_client_ip(ip("2001:db8:1:2::99")).is_err());
        assert_eq!(limits.check_client_ip(ip("2001:db8:1:3::1")), Ok(()));
    }

    #[test]
    fn overrides_replace_the_principal_rate() {
        let limits = RateLimits::new(RateLimitsConfig {
            per_principal: Some(rate(1.0, 2)),
            principal_overrides: [
                ("ci-bot".to_owned(), rate(1.0, 10)),
                ("slow".to_owned(), rate(1.0, 1)),
            ]
            .into(),
            ..Default::default()
        })
        .unwrap();
        // (principal, its burst)
        for (who, burst) in [("ci-bot", 10), ("slow", 1), ("alice", 2)] {
            let refused = exhaust(burst, || limits.check_principal(who, Some("GetTask")));
            assert_eq!(refused.reason, "rate.principal", "{who}");
        }
        // An override applies even with no default per-principal rate.
        let limits = RateLimits::new(RateLimitsConfig {
            principal_overrides: [("slow".to_owned(), rate(1.0, 1))].into(),
            ..Default::default()
        })
        .unwrap();
        exhaust(1, || limits.check_principal("slow", None));
        for _ in 0..100 {
            assert_eq!(limits.check_principal("anyone", None), Ok(()));
        }
    }

    /// An override written for a JWT subject (`jwt:dora`) is that subject's rate in every
    /// tenant its tokens name, each owner (`jwt:dora` U+001E tenant) with a budget of its
    /// own; the bare subject (no tenant) has it too.
    #[test]
    fn an_override_applies_to_each_tenant_of_a_subject_apart() {
        let limits = RateLimits::new(RateLimitsConfig {
            per_principal: Some(rate(1.0, 100)),
            principal_overrides: [("jwt:dora".to_owned(), rate(1.0, 2))].into(),
            ..Default::default()
        })
        .unwrap();
        for owner in ["jwt:dora\u{1e}team-a", "jwt:dora\u{1e}team-b", "jwt:dora"] {
            let refused = exhaust(2, || limits.check_principal(owner, None));
            assert_eq!(refused.reason, "rate.principal", "{owner:?}");
        }
        // Another subject, and a name that merely starts alike, keep the default.
        for owner in ["jwt:dorothy\u{1e}team-a", "jwt:dor"] {
            for _ in 0..50 {
                assert_eq!(limits.check_principal(owner, None), Ok(()), "{owner:?}");
            }
        }
        assert_eq!(override_name("jwt:dora\u{1e}team-a"), "jwt:dora");
        assert_eq!(override_name("alice"), "alice");
    }

    #[test]
    fn per_method_is_keyed_with_the_principal() {
        let limits = RateLimits::new(RateLimitsConfig {
            per_principal: Some(rate(1.0, 100)),
            per_method: [("SendMessage".to_owned(), rate(1.0, 2))].into(),
            ..Default::default()
        })
        .unwrap();
        let refused = exhaust(2, || limits.check_principal("alice", Some("SendMessage")));
        assert_eq!(refused.reason, "rate.method");
        assert!(refused.retry_after <= Duration::from_secs(1));
        // (principal, method, passes, why)
        let cases = [
            (
                "alice",
                Some("GetTask"),
                true,
                "another method has no limit",
            ),
            ("alice", None, true, "no method (e.g. not JSON-RPC)"),
            ("alice", Some("sendmessage"), true, "method names are exact"),
            ("bob", Some("SendMessage"), true, "another principal"),
            ("alice", Some("SendMessage"), false, "still limited"),
        ];
        for (who, method, passes, why) in cases {
            assert_eq!(limits.check_principal(who, method).is_ok(), passes, "{why}");
        }
    }

    /// A reload keeps each limiter whose own rate it leaves alone: a spent key stays spent
    /// there, and only a limiter whose rate changed (or that is new) starts with full buckets.
    #[test]
    fn a_carried_limiter_keeps_its_spent_keys() {
        let before = RateLimitsConfig {
            per_principal: Some(rate(0.001, 1)),
            per_client_ip: Some(rate(0.001, 1)),
            per_client_connection: Some(rate(0.001, 1)),
            per_method: [("SendMessage".to_owned(), rate(0.001, 1))].into(),
            // bob's own rate is ample: only his method's rate is spent.
            principal_overrides: [
                ("vip".to_owned(), rate(0.001, 1)),
                ("bob".to_owned(), rate(1000.0, 1000)),
            ]
            .into(),
            ipv6_prefix: 0,
        };
        let spend = |limits: &RateLimits| {
            let _ = limits.check_client_ip(ip("192.0.2.1"));
            let _ = limits.check_connection(ip("192.0.2.1"));
            let _ = limits.check_principal("alice", None);
            let _ = limits.check_principal("bob", Some("SendMessage"));
            let _ = limits.check_principal("vip", None);
        };
        // (what the reload changes, client address spent, alice spent, bob's method spent,
        // vip spent, the client address's connections spent)
        type Change = fn(&mut RateLimitsConfig);
        let rows: [(&str, Change, [bool; 5]); 8] = [
            ("nothing", |_| {}, [true; 5]),
            (
                "a new override for someone else",
                |c| {
                    c.principal_overrides.insert("carol".into(), rate(1.0, 1));
                },
                [true; 5],
            ),
            (
                "a new method rate",
                |c| {
                    c.per_method.insert("GetTask".into(), rate(1.0, 1));
                },
                [true; 5],
            ),
            (
                "the per-principal rate",
                |c| c.per_principal = Some(rate(0.002, 1)),
                [true, false, true, true, true],
            ),
            (
                "the client address rate",
                |c| c.per_client_ip = Some(rate(0.002, 1)),
                [false, true, true, true, true],
            ),
            (
                "the client address's connection rate",
                |c| c.per_client_connection = Some(rate(0.002, 1)),
                [true, true, true, true, false],
            ),
            (
                "the IPv6 prefix",
                |c| c.ipv6_prefix = 48,
                [false, true, true, true, false],
            ),
            (
                "the method's and the override's rates",
                |c| {
                    c.per_method.insert("SendMessage".into(), rate(0.002, 1));
                    c.principal_overrides.insert("vip".into(), rate(0.002, 1));
                },
                [true, true, false, false, true],
            ),
        ];
        for (what, change, spent) in rows {
            let old = RateLimits::new(before.clone()).unwrap();
            spend(&old);
            let mut cfg = before.clone();
            change(&mut cfg);
            let new = RateLimits::carry(cfg, Some(&old)).unwrap();
            let now = [
                new.check_client_ip(ip("192.0.2.1")).is_err(),
                new.check_principal("alice", None).is_err(),
                new.check_principal("bob", Some("SendMessage")).is_err(),
                new.check_principal("vip", None).is_err(),
                new.check_connection(ip("192.0.2.1")).is_err(),
            ];
            assert_eq!(now, spent, "{what}");
        }
    }

    #[test]
    fn off_limits_never_refuse() {
        let limits = RateLimits::new(RateLimitsConfig::default()).unwrap();
        for _ in 0..10_000 {
            assert_eq!(limits.check_client_ip(ip("192.0.2.1")), Ok(()));
            assert_eq!(limits.check_connection(ip("192.0.2.1")), Ok(()));
            assert_eq!(limits.check_principal("alice", Some("SendMessage")), Ok(()));
        }
        assert_eq!(limits.tracked_keys(), 0);
    }

    #[test]
    fn keyed_limiters_stay_bounded_in_memory() {
        // One request every microsecond: a key is stale a microsecond after its last use.
        let limits = RateLimits::new(RateLimitsConfig {
            per_principal: Some(rate(1e6, 1)),
            per_client_ip: Some(rate(1e6, 1)),
            ..Default::default()
        })
        .unwrap();
        let mut most = 0;
        for i in 0..(4 * SWEEP_MIN_KEYS as u32) {
            let _ = limits.check_principal(&format!("p{i}"), None);
            let _ = limits.check_client_ip(IpAddr::from(std::net::Ipv4Addr::from(i)));
            most = most.max(limits.tracked_keys());
        }
        assert!(
            most <= 2 * (SWEEP_MIN_KEYS + SWEEP_EVERY + 1),
            "{most} keys held at most"
        );
    }

    #[test]
    fn retry_after_secs_rounds_up_and_is_never_zero() {
        // (wait, header seconds)
        let cases = [
            (Duration::ZERO, 1),
            (Duration::from_millis(1), 1),
            (Duration::from_secs(1), 1),
            (Duration::from_millis(1001), 2),
            (Duration::from_secs(30), 30),
        ];
        for (retry_after, want) in cases {
            let l = Limited {
                reason: reason::RATE_PRINCIPAL,
                retry_after,
            };
            assert_eq!(l.retry_after_secs(), want, "{retry_after:?}");
        }
    }
}
