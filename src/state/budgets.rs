//! Rates (per client address, per principal, per principal and method), the authentication
//! failure throttle and the concurrency counters: the process's budgets.

use std::sync::Arc;

use std::net::IpAddr;
use std::time::Duration;

use super::redis::{RedisStore, StateUnavailable};
use crate::limits::concurrency::ConcurrencyLimits;
use crate::limits::rate::{client_key, Limited, Rate, RateLimits, RateLimitsConfig};
use crate::limits::FailureThrottle;
use crate::reason;

/// Why a budget refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Limited(Limited),
    /// The budget is shared and the store did not answer: fail closed.
    Unavailable,
}

impl From<StateUnavailable> for Refused {
    fn from(_: StateUnavailable) -> Refused {
        Refused::Unavailable
    }
}

/// What the budgets are built from (the policy's `[limits]` and `auth.throttle`, by
/// `crate::policy::Policy::budgets`): a reload that keeps one's settings keeps that budget.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetSettings {
    /// Per client address and per principal (`per_method` empty).
    pub rates: RateLimitsConfig,
    /// Per principal and method (`per_method` only).
    pub method_rates: RateLimitsConfig,
    /// failures per minute, burst, IPv6 prefix
    pub throttle: (u32, u32, u8),
    /// in flight, streams, stream bytes per principal
    pub concurrency: (usize, usize, usize),
    /// request bytes per principal, and in all
    pub request_bytes: (usize, usize),
}

/// The budgets of the process (cheap to clone: the counters are shared).
#[derive(Clone)]
pub struct Budgets {
    /// Per client address and per principal (checked before the body is read).
    pub rates: Arc<RateLimits>,
    /// Per principal and method (checked once the method is known).
    pub method_rates: Arc<RateLimits>,
    pub throttle: Arc<FailureThrottle>,
    pub concurrency: ConcurrencyLimits,
    /// With `[state] backend = "redis"`: the per-principal and per-method rates and the
    /// failure budgets live there, shared by every replica (the per-address rate, the
    /// concurrency counters and the throttle's blocks stay local).
    pub shared: Option<Arc<RedisStore>>,
    settings: BudgetSettings,
}

impl Budgets {
    /// The budgets of `settings`, carried from `previous`: each rate limiter whose own rate is
    /// the same ([`RateLimits::carry`]), the throttle's blocks ([`FailureThrottle::carry`]) and
    /// the concurrency counts under the new maxima ([`ConcurrencyLimits::with_maxima`]).
    pub fn carry(
        settings: BudgetSettings,
        previous: Option<&Budgets>,
        shared: Option<Arc<RedisStore>>,
    ) -> Result<Budgets, String> {
        let prev = previous.map(|p| (p, &p.settings));
        let rates = match prev {
            Some((p, s)) if s.rates == settings.rates => p.rates.clone(),
            _ => Arc::new(RateLimits::carry(
                settings.rates.clone(),
                previous.map(|p| &*p.rates),
            )?),
        };
        let method_rates = match prev {
            Some((p, s)) if s.method_rates == settings.method_rates => p.method_rates.clone(),
            _ => Arc::new(RateLimits::carry(
                settings.method_rates.clone(),
                previous.map(|p| &*p.method_rates),
            )?),
        };
        let (per_minute, burst, prefix) = settings.throttle;
        let throttle = match prev {
            Some((p, s)) if s.throttle == settings.throttle => p.throttle.clone(),
            Some((p, _)) => Arc::new(FailureThrottle::carry(
                per_minute,
                burst,
                prefix,
                &p.throttle,
            )),
            None => Arc::new(FailureThrottle::new(per_minute, burst, prefix)),
        };
        let (in_flight, streams, bytes) = settings.concurrency;
        let (per_principal, total) = settings.request_bytes;
        let concurrency = match prev {
            Some((p, _)) => p.concurrency.with_maxima(in_flight, streams),
            None => ConcurrencyLimits::new(in_flight, streams),
        }
        .with_stream_budget(bytes)
        .with_request_budget(per_principal, total);
        Ok(Budgets {
            rates,
            method_rates,
            throttle,
            concurrency,
            shared,
            settings,
        })
    }

    /// The principal's own rate (its override if any), then, with `method`, the (principal,
    /// method) rate: shared by the replicas with a shared store, else this process's.
    pub async fn check_principal(
        &self,
        principal: &str,
        method: Option<&str>,
    ) -> Result<(), Refused> {
        let Some(store) = &self.shared else {
            let local = if method.is_some() {
                &self.method_rates
            } else {
                &self.rates
            };
            return local
                .check_principal(principal, method)
                .map_err(Refused::Limited);
        };
        let (rate, kind, reason) = match method {
            None => (
                self.settings
                    .rates
                    .principal_overrides
                    .get(crate::limits::rate::override_name(principal))
                    .copied()
                    .or(self.settings.rates.per_principal),
                "rate:p".to_string(),
                reason::RATE_PRINCIPAL,
            ),
            Some(m) => (
                self.settings.method_rates.per_method.get(m).copied(),
                format!("rate:m:{m}"),
                reason::RATE_METHOD,
            ),
        };
        let Some(rate) = rate else {
            return Ok(());
        };
        match store.spend_leased(&kind, principal, rate).await? {
            Ok(()) => Ok(()),
            Err(retry_after) => Err(Refused::Limited(Limited {
                reason,
                retry_after,
            })),
        }
    }

    /// How long `ip` must still wait after failing too often (this replica's record of the
    /// block; the budget itself is shared).
    pub fn retry_after(&self, ip: IpAddr) -> Option<Duration> {
        self.throttle.retry_after(ip)
    }

    /// See [`crate::limits::FailureThrottle::blocks`].
    pub fn blocks(&self) -> usize {
        self.throttle.blocks()
    }

    /// Spends one authentication failure of `ip`; how long it is blocked if its budget (shared
    /// with a store) is now spent.
    pub async fn record_failure(&self, ip: IpAddr) -> Result<Option<Duration>, StateUnavailable> {
        let Some(store) = &self.shared else {
            return Ok(self.throttle.record_failure(ip));
        };
        let (per_minute, burst, prefix) = self.settings.throttle;
        let rate = Rate {
            per_second: f64::from(per_minute) / 60.0,
            burst,
        };
        let key = client_key(ip, prefix).to_string();
        match store.spend("fail", &key, rate).await? {
            Ok(()) => Ok(None),
            Err(wait) => {
                let wait = wait.max(Duration::from_secs(1));
                self.throttle.block(ip, wait);
                Ok(Some(wait))
            }
        }
    }
}
