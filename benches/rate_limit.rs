//! The cost of the rate-limit checks on every request: `check_client_ip` (before
//! authentication) then `check_principal` (after it, with a per-method limit), for one hot key
//! and for 10_000 distinct keys (addresses and principals) taken in turn. The rates are set high
//! enough that every check passes, so this measures the admitted path (a refusal does the same
//! work plus a clock read).

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use a2a_edge::limits::rate::{Rate, RateLimits, RateLimitsConfig};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const DISTINCT: usize = 10_000;

fn limits() -> RateLimits {
    let plenty = Rate {
        per_second: 1e9,
        burst: 1_000_000,
    };
    RateLimits::new(RateLimitsConfig {
        per_principal: Some(plenty),
        per_client_ip: Some(plenty),
        per_client_connection: Some(plenty),
        per_method: [("SendMessage".to_owned(), plenty)].into(),
        principal_overrides: [("ops".to_owned(), plenty)].into(),
        ipv6_prefix: 64,
    })
    .expect("a valid configuration")
}

fn check(limits: &RateLimits, ip: IpAddr, principal: &str) {
    black_box(limits.check_client_ip(black_box(ip))).expect("admitted");
    black_box(limits.check_principal(black_box(principal), Some("SendMessage"))).expect("admitted");
}

fn rate_limit(c: &mut Criterion) {
    let mut group = c.benchmark_group("rate_limit");
    group.throughput(Throughput::Elements(1));

    let hot = limits();
    let ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    group.bench_function("one_hot_key", |b| b.iter(|| check(&hot, ip, "alice")));

    let spread = limits();
    let keys: Vec<(IpAddr, String)> = (0..DISTINCT)
        .map(|i| {
            // Half IPv4, half IPv6 in distinct /64s (IPv6 is keyed per /64).
            let ip = if i % 2 == 0 {
                IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i as u32))
            } else {
                IpAddr::V6(Ipv6Addr::from(
                    (0x2001_0db8_u128 << 96) | ((i as u128) << 64) | 1,
                ))
            };
            (ip, format!("principal-{i}"))
        })
        .collect();
    for (ip, principal) in &keys {
        check(&spread, *ip, principal);
    }
    let mut next = 0;
    group.bench_function("10000_distinct_keys", |b| {
        b.iter(|| {
            let (ip, principal) = &keys[next];
            next = (next + 1) % DISTINCT;
            check(&spread, *ip, principal);
        })
    });

    let overridden = limits();
    group.bench_function("one_overridden_principal", |b| {
        b.iter(|| check(&overridden, ip, "ops"))
    });
    group.finish();
}

criterion_group!(benches, rate_limit);
criterion_main!(benches);
