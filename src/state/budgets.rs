//! Rates (per client address, per principal, per principal and method), the authentication
//! failure throttle and the concurrency counters: the process's budgets.

use std::sync::Arc;

use crate::limits::concurrency::ConcurrencyLimits;
use crate::limits::rate::{RateLimits, RateLimitsConfig};
use crate::limits::FailureThrottle;
use crate::policy::Policy;

/// The settings one budget was built from: a reload that keeps them keeps the budget.
#[derive(Debug, Clone, PartialEq)]
struct Settings {
    rates: RateLimitsConfig,
    method_rates: RateLimitsConfig,
    /// failures per minute, burst, IPv6 prefix
    throttle: (u32, u32, u8),
    /// in flight, streams, stream bytes per principal
    concurrency: (usize, usize, usize),
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
    settings: Settings,
}

impl Budgets {
    /// The budgets `policy` asks for, keeping each of `previous` whose settings are the same.
    pub fn carry(policy: &Policy, previous: Option<&Budgets>) -> Result<Budgets, String> {
        let l = &policy.limits;
        let settings = Settings {
            rates: RateLimitsConfig {
                per_method: Default::default(),
                ..l.rates.clone()
            },
            method_rates: RateLimitsConfig {
                per_principal: None,
                per_client_ip: None,
                per_method: l.rates.per_method.clone(),
                principal_overrides: Default::default(),
                ipv6_prefix: l.rates.ipv6_prefix,
            },
            throttle: (
                policy.auth.throttle.failures_per_minute,
                policy.auth.throttle.failures_burst,
                l.rates.ipv6_prefix,
            ),
            concurrency: (
                l.max_in_flight_per_principal,
                l.max_streams_per_principal,
                l.stream_buffer_bytes_per_principal,
            ),
        };
        let prev = previous.map(|p| (p, &p.settings));
        let rates = match prev {
            Some((p, s)) if s.rates == settings.rates => p.rates.clone(),
            _ => Arc::new(RateLimits::new(settings.rates.clone())?),
        };
        let method_rates = match prev {
            Some((p, s)) if s.method_rates == settings.method_rates => p.method_rates.clone(),
            _ => Arc::new(RateLimits::new(settings.method_rates.clone())?),
        };
        let throttle = match prev {
            Some((p, s)) if s.throttle == settings.throttle => p.throttle.clone(),
            _ => {
                let (per_minute, burst, prefix) = settings.throttle;
                Arc::new(FailureThrottle::new(per_minute, burst, prefix))
            }
        };
        let concurrency = match prev {
            Some((p, s)) if s.concurrency == settings.concurrency => p.concurrency.clone(),
            _ => {
                let (in_flight, streams, bytes) = settings.concurrency;
                ConcurrencyLimits::new(in_flight, streams).with_stream_budget(bytes)
            }
        };
        Ok(Budgets {
            rates,
            method_rates,
            throttle,
            concurrency,
            settings,
        })
    }
}
