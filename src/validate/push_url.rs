//! Push callback URLs: the SSRF guard for `CreateTaskPushNotificationConfig.url` and
//! `SendMessage.configuration.taskPushNotificationConfig.url`.
//!
//! The agent behind the proxy (iac-code 0.16.0) checks these URLs with Python's `urlparse` and
//! `ipaddress`, so `http://127.1/`, `http://2130706433/`, `http://LOCALHOST./` and CGNAT
//! addresses pass its registration check. Here the URL is parsed once with the WHATWG parser
//! (the `url` crate), which normalizes every IPv4 spelling (`127.1`, `2130706433`, `0x7f.1`,
//! `0177.0.0.1`), IPv6 spelling, percent-encoded and full-width host, upper case and trailing
//! dot before the host is judged. The proxy forwards the normalized serialization
//! (`url.as_str()`), never the caller's bytes, so the agent sees exactly what was checked.
//!
//! | reason | when |
//! |---|---|
//! | `push.url_too_long` | the raw URL or its normalized form is longer than 2048 bytes |
//! | `push.url_syntax` | not a URL for the WHATWG parser (this includes IPv6 zone ids such as `[fe80::1%25eth0]`), or it contains whitespace or control characters |
//! | `push.url_scheme` | the scheme is not `https` (or `http` when `allow_http`): `ftp`, `file`, `gopher`, `javascript`, `data`, ... |
//! | `push.url_userinfo` | a user name or password is present (`https://user:pw@host/`) |
//! | `push.url_host` | no host, an empty label (`a..b`), a host longer than 253 bytes |
//! | `push.localhost` | `localhost` or `*.localhost`, after lower-casing and stripping one trailing dot |
//! | `push.local_name` | a single-label name (`http://metadata/`, `https://redis/`: resolved through the search domains of the agent's host), a name under a local-only suffix (`.local`, `.internal`, `.arpa`, `.localdomain`, `.lan`, `.home`, `.corp`, `.intranet`, `.onion`, Kubernetes' `.svc`, `.cluster` and `.default`), or one whose last label is no delegated top-level domain (the ICANN section of the Public Suffix List, `tlds.rs`: a Kubernetes namespace as in `vault.vault` or `redis.kube-system`, `.consul`, `.docker`, `.test`; resolved through the search domains too). A partial defence: a namespace named like a delegated domain (`redis.prod`, `vault.security`) passes, and a domain delegated after the list's date is refused (`allowed_hosts` admits a name); `resolve_names` judges what a name resolves to |
//! | `push.private_address` | an IP literal (or, with `resolve_names`, a resolved address) that reaches the host itself or a private network: unspecified/"this network", loopback, RFC 1918, CGNAT, link-local, unique-local, site-local, and the IPv6 forms that embed such an IPv4 |
//! | `push.special_address` | any other special-purpose address: documentation, benchmarking, multicast, reserved, broadcast, IETF protocol assignments, 6to4 relay, Teredo, discard-only, SRv6 SIDs, IPv4-mapped/-compatible forms, and IPv6 outside the global unicast block 2000::/3 |
//! | `push.resolve_failed` | with `resolve_names`: the name did not resolve, resolved to nothing, or took longer than 2 s |
//!
//! Decisions:
//! - IPv4-mapped (`::ffff:0:0/96`) and IPv4-compatible (`::/96`) addresses are always rejected,
//!   even when the embedded IPv4 is public: IANA marks them not globally reachable, their meaning
//!   depends on the socket stack of the agent's host, and no real webhook is spelled that way.
//!   The embedded IPv4 is classified only to name the kind in the message.
//! - 6to4 (`2002::/16`, deprecated by RFC 7526) is always rejected; the embedded IPv4 only names
//!   the kind. The local-use NAT64 prefix `64:ff9b:1::/48` is always rejected (its mapping is
//!   the local operator's). The well-known NAT64 prefix `64:ff9b::/96` is judged by its embedded
//!   IPv4: a public IPv4 behind it is accepted, a special one is rejected as that kind.
//! - `2001::/23` is rejected as a whole (Teredo included), even the few globally reachable
//!   anycast sub-blocks (PCP, AMT, AS112, ORCHIDv2): none of them hosts a webhook.
//! - IPv6 outside `2000::/3` (other than `64:ff9b::/96`) is not allocated for global unicast,
//!   so it is rejected as reserved; this covers every deprecated or future special block there.
//! - `192.0.0.0/24` is rejected as a whole, including its two anycast /32s.
//! - Names are judged by their spelling only in [`check_push_url`]: `127.0.0.1.nip.io` or any
//!   name whose DNS answer is private passes the pure check. [`check_resolved`] (enabled by
//!   `resolve_names`) resolves the name and rejects it if any answer is special-purpose; it
//!   cannot stop DNS rebinding between this check and the agent's delivery, which is why the
//!   agent must still check (and pin) the address at delivery time.
#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ipnet::{Ipv4Net, Ipv6Net};
use url::{Host, Url};

use crate::a2a::RpcError;
use crate::reason::{self, Reason};

mod tlds;

/// The longest push URL accepted, raw and normalized, in bytes.
pub const MAX_PUSH_URL_LEN: usize = 2048;
/// How long [`check_resolved`] waits for the resolver.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// The most name lookups the process runs at once ([`check_resolved`]). A lookup runs on a
/// blocking thread that the timeout cannot stop (the system resolver may go on for tens of
/// seconds against a name server that never answers): each holds one of these until it ends,
/// so slow names cannot fill the blocking pool that the edge's other checks use. Past them a
/// lookup waits within its timeout, then fails (`push.resolve_failed`).
pub const MAX_LOOKUPS: usize = 16;
/// The most lookups one caller runs at once, of [`MAX_LOOKUPS`]: a caller whose callback
/// names hang holds a quarter of them, and the others' lookups go on. Past it a lookup fails
/// at once (`push.resolve_failed`).
pub const MAX_LOOKUPS_PER_CALLER: usize = 4;

static LOOKUPS: Lookups = Lookups::new(MAX_LOOKUPS, MAX_LOOKUPS_PER_CALLER);

/// The lookups in progress: everyone's (permits) and each caller's (counts).
struct Lookups {
    all: tokio::sync::Semaphore,
    callers: std::sync::Mutex<std::collections::BTreeMap<Box<str>, usize>>,
    per_caller: usize,
}

impl Lookups {
    const fn new(all: usize, per_caller: usize) -> Lookups {
        Lookups {
            all: tokio::sync::Semaphore::const_new(all),
            callers: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            per_caller,
        }
    }

    /// One more of `caller`'s lookups, unless it runs its share already.
    fn enter(&'static self, caller: &str) -> Option<CallersLookup> {
        let mut callers = self.callers.lock().ok()?;
        let n = callers.entry(caller.into()).or_insert(0);
        if *n >= self.per_caller {
            return None;
        }
        *n += 1;
        Some(CallersLookup {
            lookups: self,
            caller: caller.into(),
        })
    }
}

/// One of a caller's lookups in progress, counted until dropped.
struct CallersLookup {
    lookups: &'static Lookups,
    caller: Box<str>,
}

impl Drop for CallersLookup {
    fn drop(&mut self) {
        let Ok(mut callers) = self.lookups.callers.lock() else {
            return;
        };
        if let Some(n) = callers.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                callers.remove(&self.caller);
            }
        }
    }
}

/// The longest host name (DNS limit, without the trailing dot).
const MAX_HOST_LEN: usize = 253;

/// Suffixes of names that only ever resolve inside a site (RFC 6762 `.local`, ICANN's private-use
/// `.internal`, `.arpa` incl. RFC 8375 `home.arpa`, and the common unofficial private TLDs).
const LOCAL_SUFFIXES: &[&str] = &[
    "local",
    "internal",
    "arpa",
    "localdomain",
    "lan",
    "home",
    "corp",
    "intranet",
    // Kubernetes: `<service>.<namespace>.svc[.cluster.local]`, and the namespace every
    // cluster has, resolved through the pods' search domains.
    "svc",
    "cluster",
    "default",
    // RFC 7686: reached through Tor, never by a webhook sender's resolver.
    "onion",
];

/// What the push URL check allows beyond the safe default.
#[derive(Debug, Clone, Default)]
pub struct PushUrlPolicy {
    /// Accept `http` as well as `https`.
    pub allow_http: bool,
    /// Make [`check_resolved`] resolve host names and reject private answers.
    pub resolve_names: bool,
    /// `allowed_networks`: addresses in these are accepted although special-purpose (the
    /// operator's own receivers). An address that reaches the host itself (loopback,
    /// unspecified) only by a network that lies inside its block (`127.0.0.1/32`, `::1/128`),
    /// never by a broader one.
    pub allowed_networks: Vec<ipnet::IpNet>,
    /// `allowed_hosts`: exact names (lower case, no trailing dot) accepted although the name
    /// rules refuse them (single-label, `.internal`, ...); with `resolve_names` their answers
    /// are still judged, and a private answer needs `allowed_networks` too.
    pub allowed_hosts: Vec<String>,
}

/// Blocks whose addresses reach the host itself: allowed only by a network inside them.
const SELF_BLOCKS: [ipnet::IpNet; 4] = [
    ipnet::IpNet::V4(v4(127, 0, 0, 0, 8)),
    ipnet::IpNet::V4(v4(0, 0, 0, 0, 8)),
    ipnet::IpNet::V6(v6(0, 0, 0, 0, 0, 0, 0, 1, 128)),
    ipnet::IpNet::V6(v6(0, 0, 0, 0, 0, 0, 0, 0, 128)),
];

impl PushUrlPolicy {
    /// Whether the operator allowed this special-purpose address. An IPv6 spelling of an
    /// IPv4 address (mapped, compatible) is never allowed, whatever network holds it (it is
    /// another address than the IPv4 one an operator allows, and `::/16` would otherwise
    /// let `[::ffff:127.0.0.1]` in), nor a 6to4 or NAT64 one that embeds an address of the
    /// host itself.
    fn allows(&self, ip: IpAddr) -> bool {
        if let IpAddr::V6(v6) = ip {
            let own_self = V6_LOOPBACK.contains(&v6) || V6_UNSPECIFIED.contains(&v6);
            if !own_self && (V6_MAPPED.contains(&v6) || V6_COMPATIBLE.contains(&v6)) {
                return false;
            }
            let embedded = if V6_NAT64.contains(&v6) {
                Some(low_v4(v6))
            } else if V6_6TO4.contains(&v6) {
                Some(six_to_four_v4(v6))
            } else {
                None
            };
            if embedded.is_some_and(|e| SELF_BLOCKS.iter().any(|b| b.contains(&IpAddr::V4(e)))) {
                return false;
            }
        }
        let own = SELF_BLOCKS.iter().find(|b| b.contains(&ip));
        self.allowed_networks.iter().any(|n| {
            n.contains(&ip)
                && match own {
                    Some(block) => block.contains(n),
                    None => true,
                }
        })
    }

    fn allows_host(&self, name: &str) -> bool {
        self.allowed_hosts.iter().any(|h| h == name)
    }
}

/// Whether a special-purpose address reaches into the host or its private network, or is
/// special for another reason. Chooses the reason code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    Local,
    Special,
}

impl Reach {
    fn reason(self) -> Reason {
        match self {
            Reach::Local => reason::PUSH_PRIVATE_ADDRESS,
            Reach::Special => reason::PUSH_SPECIAL_ADDRESS,
        }
    }
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)
}

#[allow(clippy::too_many_arguments)]
const fn v6(a: u16, b: u16, c: u16, d: u16, e: u16, f: u16, g: u16, h: u16, len: u8) -> Ipv6Net {
    Ipv6Net::new_assert(Ipv6Addr::new(a, b, c, d, e, f, g, h), len)
}

/// IPv4 special-purpose blocks (IANA IPv4 Special-Purpose Address Registry, RFC 6890 and
/// successors). 255.255.255.255 is inside 240.0.0.0/4.
const V4_SPECIAL: &[(Ipv4Net, &str, Reach)] = &[
    (v4(0, 0, 0, 0, 8), "\"this network\"", Reach::Local),
    (v4(10, 0, 0, 0, 8), "private", Reach::Local),
    (v4(100, 64, 0, 0, 10), "shared (CGNAT)", Reach::Local),
    (v4(127, 0, 0, 0, 8), "loopback", Reach::Local),
    (v4(169, 254, 0, 0, 16), "link-local", Reach::Local),
    (v4(172, 16, 0, 0, 12), "private", Reach::Local),
    (
        v4(192, 0, 0, 0, 24),
        "IETF protocol assignment",
        Reach::Special,
    ),
    (v4(192, 0, 2, 0, 24), "documentation", Reach::Special),
    (v4(192, 88, 99, 0, 24), "6to4 relay anycast", Reach::Special),
    (v4(192, 168, 0, 0, 16), "private", Reach::Local),
    (v4(198, 18, 0, 0, 15), "benchmarking", Reach::Special),
    (v4(198, 51, 100, 0, 24), "documentation", Reach::Special),
    (v4(203, 0, 113, 0, 24), "documentation", Reach::Special),
    (v4(224, 0, 0, 0, 4), "multicast", Reach::Special),
    (v4(240, 0, 0, 0, 4), "reserved", Reach::Special),
];

const V6_UNSPECIFIED: Ipv6Net = v6(0, 0, 0, 0, 0, 0, 0, 0, 128);
const V6_LOOPBACK: Ipv6Net = v6(0, 0, 0, 0, 0, 0, 0, 1, 128);
const V6_MAPPED: Ipv6Net = v6(0, 0, 0, 0, 0, 0xffff, 0, 0, 96);
const V6_COMPATIBLE: Ipv6Net = v6(0, 0, 0, 0, 0, 0, 0, 0, 96);
const V6_NAT64: Ipv6Net = v6(0x64, 0xff9b, 0, 0, 0, 0, 0, 0, 96);
const V6_6TO4: Ipv6Net = v6(0x2002, 0, 0, 0, 0, 0, 0, 0, 16);
const V6_GLOBAL_UNICAST: Ipv6Net = v6(0x2000, 0, 0, 0, 0, 0, 0, 0, 3);

/// IPv6 special-purpose blocks without an embedded IPv4 (IANA IPv6 Special-Purpose Address
/// Registry, RFC 6890 and successors). Checked after the embedded-IPv4 forms above.
const V6_SPECIAL: &[(Ipv6Net, &str, Reach)] = &[
    (
        v6(0x64, 0xff9b, 1, 0, 0, 0, 0, 0, 48),
        "local-use NAT64",
        Reach::Local,
    ),
    (
        v6(0x100, 0, 0, 0, 0, 0, 0, 0, 64),
        "discard-only",
        Reach::Special,
    ),
    (
        v6(0x2001, 0, 0, 0, 0, 0, 0, 0, 32),
        "Teredo",
        Reach::Special,
    ),
    (
        v6(0x2001, 0, 0, 0, 0, 0, 0, 0, 23),
        "IETF protocol assignment",
        Reach::Special,
    ),
    (
        v6(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0, 32),
        "documentation",
        Reach::Special,
    ),
    (
        v6(0x3fff, 0, 0, 0, 0, 0, 0, 0, 20),
        "documentation",
        Reach::Special,
    ),
    (
        v6(0x5f00, 0, 0, 0, 0, 0, 0, 0, 16),
        "SRv6 SID",
        Reach::Special,
    ),
    (
        v6(0xfc00, 0, 0, 0, 0, 0, 0, 0, 7),
        "unique-local",
        Reach::Local,
    ),
    (
        v6(0xfe80, 0, 0, 0, 0, 0, 0, 0, 10),
        "link-local",
        Reach::Local,
    ),
    (
        v6(0xfec0, 0, 0, 0, 0, 0, 0, 0, 10),
        "site-local",
        Reach::Local,
    ),
    (
        v6(0xff00, 0, 0, 0, 0, 0, 0, 0, 8),
        "multicast",
        Reach::Special,
    ),
];

fn classify_v4(ip: Ipv4Addr) -> Option<(&'static str, Reach)> {
    V4_SPECIAL
        .iter()
        .find(|(net, _, _)| net.contains(&ip))
        .map(|&(_, kind, reach)| (kind, reach))
}

/// The IPv4 address a 6to4 address (2002::/16) embeds, in its bits 16-47.
fn six_to_four_v4(ip: Ipv6Addr) -> Ipv4Addr {
    let o = ip.octets();
    Ipv4Addr::new(o[2], o[3], o[4], o[5])
}

/// The IPv4 address in the last 32 bits of `ip` (mapped, compatible and NAT64 forms).
fn low_v4(ip: Ipv6Addr) -> Ipv4Addr {
    let o = ip.octets();
    Ipv4Addr::new(o[12], o[13], o[14], o[15])
}

fn classify_v6(ip: Ipv6Addr) -> Option<(&'static str, Reach)> {
    if V6_UNSPECIFIED.contains(&ip) {
        return Some(("unspecified", Reach::Local));
    }
    if V6_LOOPBACK.contains(&ip) {
        return Some(("loopback", Reach::Local));
    }
    if V6_MAPPED.contains(&ip) {
        return Some(classify_v4(low_v4(ip)).unwrap_or(("IPv4-mapped", Reach::Special)));
    }
    if V6_COMPATIBLE.contains(&ip) {
        return Some(classify_v4(low_v4(ip)).unwrap_or(("IPv4-compatible", Reach::Special)));
    }
    if V6_NAT64.contains(&ip) {
        // The well-known prefix is globally reachable: the embedded IPv4 decides.
        return classify_v4(low_v4(ip));
    }
    if V6_6TO4.contains(&ip) {
        return Some(classify_v4(six_to_four_v4(ip)).unwrap_or(("6to4", Reach::Special)));
    }
    if let Some(&(_, kind, reach)) = V6_SPECIAL.iter().find(|(net, _, _)| net.contains(&ip)) {
        return Some((kind, reach));
    }
    if !V6_GLOBAL_UNICAST.contains(&ip) {
        return Some(("reserved", Reach::Special));
    }
    None
}

fn classify(ip: IpAddr) -> Option<(&'static str, Reach)> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Why an address is not public (the kind of special-purpose block it is in, as short static
/// text), or `None` if it is a public unicast address a webhook may live at.
pub fn special_purpose(ip: IpAddr) -> Option<&'static str> {
    classify(ip).map(|(kind, _)| kind)
}

fn reject_ip(ip: IpAddr, resolved: bool, policy: &PushUrlPolicy) -> Result<(), RpcError> {
    match classify(ip) {
        None => Ok(()),
        Some(_) if policy.allows(ip) => Ok(()),
        Some((kind, reach)) => {
            let verb = if resolved { "resolve to" } else { "target" };
            Err(RpcError::invalid_params(
                format!("Push notification URL must not {verb} a {kind} address"),
                reach.reason(),
            ))
        }
    }
}

fn host_error(message: &str, reason: Reason) -> RpcError {
    RpcError::invalid_params(message, reason)
}

/// Judges a host name (already lower-cased, IDNA-mapped and percent-decoded by the parser).
fn check_domain(domain: &str, policy: &PushUrlPolicy) -> Result<(), RpcError> {
    let name = domain.strip_suffix('.').unwrap_or(domain);
    if name.is_empty() || name.len() > MAX_HOST_LEN || name.split('.').any(str::is_empty) {
        return Err(host_error(
            "Push notification URL has an invalid host",
            reason::PUSH_URL_HOST,
        ));
    }
    // The parser lower-cases ASCII hosts; do it again so this function stands alone.
    let name = name.to_ascii_lowercase();
    if policy.allows_host(&name) {
        return Ok(());
    }
    if name == "localhost" || name.ends_with(".localhost") {
        return Err(host_error(
            "Push notification URL must not target localhost",
            reason::PUSH_LOCALHOST,
        ));
    }
    let tld = name.rsplit('.').next().unwrap_or(name.as_str());
    // A last label that is no delegated top-level domain makes no public name, but one the
    // agent's search domains complete: a Kubernetes namespace (`vault.vault`,
    // `redis.kube-system`), `.consul`, `.docker`, `.test`.
    let public_tld = tlds::TLDS.binary_search(&tld).is_ok();
    if !name.contains('.') || !public_tld || LOCAL_SUFFIXES.contains(&tld) {
        return Err(host_error(
            "Push notification URL must use a public, fully qualified host name",
            reason::PUSH_LOCAL_NAME,
        ));
    }
    Ok(())
}

/// Pure check of a push callback URL (no DNS). Returns the parsed URL; the proxy forwards
/// `url.as_str()`, the normalized serialization that was checked.
pub fn check_push_url(raw: &str, policy: &PushUrlPolicy) -> Result<Url, RpcError> {
    if raw.len() > MAX_PUSH_URL_LEN {
        return Err(RpcError::invalid_params(
            "Push notification URL is too long",
            reason::PUSH_URL_TOO_LONG,
        ));
    }
    // The WHATWG parser silently drops tabs/newlines and trims spaces and controls; refuse them
    // instead, so the value the caller sent and the value checked cannot differ that way.
    if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(RpcError::invalid_params(
            "Push notification URL is not a valid URL",
            reason::PUSH_URL_SYNTAX,
        ));
    }
    let url = Url::parse(raw).map_err(|_| {
        RpcError::invalid_params(
            "Push notification URL is not a valid URL",
            reason::PUSH_URL_SYNTAX,
        )
    })?;
    match url.scheme() {
        "https" => {}
        "http" if policy.allow_http => {}
        _ => {
            let message = if policy.allow_http {
                "Push notification URL must use https or http"
            } else {
                "Push notification URL must use https"
            };
            return Err(RpcError::invalid_params(message, reason::PUSH_URL_SCHEME));
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(RpcError::invalid_params(
            "Push notification URL must not carry credentials",
            reason::PUSH_URL_USERINFO,
        ));
    }
    match url.host() {
        None => {
            return Err(host_error(
                "Push notification URL has no host",
                reason::PUSH_URL_HOST,
            ))
        }
        Some(Host::Domain(domain)) => check_domain(domain, policy)?,
        Some(Host::Ipv4(ip)) => reject_ip(IpAddr::V4(ip), false, policy)?,
        Some(Host::Ipv6(ip)) => reject_ip(IpAddr::V6(ip), false, policy)?,
    }
    // Normalization can lengthen a URL (punycode, percent-encoding).
    if url.as_str().len() > MAX_PUSH_URL_LEN {
        return Err(RpcError::invalid_params(
            "Push notification URL is too long",
            reason::PUSH_URL_TOO_LONG,
        ));
    }
    Ok(url)
}

/// The addresses of `domain` by the system resolver, on a blocking thread that holds one of
/// `lookups`' permits, and counts as one of `caller`'s lookups, until the resolver returns
/// (whenever that is); `None` when the caller runs its share of lookups already, when no
/// permit came, or no answer, within `timeout`, or when the name did not resolve.
async fn lookup(
    lookups: &'static Lookups,
    caller: &str,
    domain: &str,
    port: u16,
    timeout: Duration,
) -> Option<Vec<std::net::SocketAddr>> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mine = lookups.enter(caller)?;
    let permit = tokio::time::timeout_at(deadline, lookups.all.acquire())
        .await
        .ok()?
        .ok()?;
    let domain = domain.to_owned();
    let resolving = tokio::task::spawn_blocking(move || {
        let _held = (permit, mine);
        std::net::ToSocketAddrs::to_socket_addrs(&(domain.as_str(), port))
            .map(|a| a.collect::<Vec<_>>())
    });
    tokio::time::timeout_at(deadline, resolving)
        .await
        .ok()?
        .ok()?
        .ok()
}

/// With `policy.resolve_names`, resolves the host of a URL that passed [`check_push_url`]
/// (bounded by [`RESOLVE_TIMEOUT`], as one of `caller`'s lookups: [`MAX_LOOKUPS_PER_CALLER`])
/// and rejects it if ANY answer is special-purpose, or if the resolution fails, times out or
/// returns nothing (fail closed). Without `resolve_names` it
/// does nothing. IP literals are judged without DNS. Only the local resolver is asked; no
/// traffic goes to the host itself.
pub async fn check_resolved(
    url: &Url,
    policy: &PushUrlPolicy,
    caller: &str,
) -> Result<(), RpcError> {
    if !policy.resolve_names {
        return Ok(());
    }
    let domain = match url.host() {
        None => {
            return Err(host_error(
                "Push notification URL has no host",
                reason::PUSH_URL_HOST,
            ))
        }
        Some(Host::Ipv4(ip)) => return reject_ip(IpAddr::V4(ip), false, policy),
        Some(Host::Ipv6(ip)) => return reject_ip(IpAddr::V6(ip), false, policy),
        Some(Host::Domain(domain)) => domain,
    };
    let failed = || {
        RpcError::invalid_params(
            "Push notification URL host could not be resolved",
            reason::PUSH_RESOLVE_FAILED,
        )
    };
    let port = url.port_or_known_default().unwrap_or(443);
    let answers = lookup(&LOOKUPS, caller, domain, port, RESOLVE_TIMEOUT)
        .await
        .ok_or_else(failed)?;
    let mut any = false;
    for addr in answers {
        any = true;
        reject_ip(addr.ip(), true, policy)?;
    }
    if any {
        Ok(())
    } else {
        Err(failed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::{SecureRandom, SystemRandom};
    use std::str::FromStr;

    fn http() -> PushUrlPolicy {
        PushUrlPolicy {
            allow_http: true,
            ..Default::default()
        }
    }

    fn reason_of(raw: &str, policy: &PushUrlPolicy) -> Option<&'static str> {
        match check_push_url(raw, policy) {
            Ok(_) => None,
            Err(e) => {
                assert_eq!(e.code, -32602, "{raw}");
                assert!(!e.message.contains(raw), "message echoes the URL: {raw}");
                assert!(!e.message.contains("://"), "message echoes a URL: {raw}");
                Some(e.reason.as_str())
            }
        }
    }

    const PRIVATE: &str = "push.private_address";
    const SPECIAL: &str = "push.special_address";

    /// One row per spelling: (URL, allow_http, expected reason or None for accepted).
    const TABLE: &[(&str, bool, Option<&str>)] = &[
        // IPv4 spellings the WHATWG parser normalizes to loopback.
        ("http://127.1/", true, Some(PRIVATE)),
        ("http://2130706433/", true, Some(PRIVATE)),
        ("http://0x7f.1/", true, Some(PRIVATE)),
        ("http://0177.0.0.1/", true, Some(PRIVATE)),
        ("http://0x7F000001/", true, Some(PRIVATE)),
        ("http://127.0.0.1./", true, Some(PRIVATE)),
        ("http://%31%32%37.0.0.1/", true, Some(PRIVATE)),
        (
            "https://127\u{3002}0\u{3002}0\u{3002}1/",
            false,
            Some(PRIVATE),
        ),
        ("http://0/", true, Some(PRIVATE)),
        ("https://127.0.0.1\\@example.com/", false, Some(PRIVATE)),
        // A name that resolves to loopback: passes the pure check (resolve_names covers it).
        ("http://127.0.0.1.nip.io/", true, None),
        // IPv6 spellings.
        ("http://[::ffff:127.0.0.1]/", true, Some(PRIVATE)),
        ("http://[::ffff:7f00:1]/", true, Some(PRIVATE)),
        ("http://[::1]/", true, Some(PRIVATE)),
        ("http://[0:0:0:0:0:0:0:1]/", true, Some(PRIVATE)),
        ("http://[::127.0.0.1]/", true, Some(PRIVATE)),
        ("https://[::ffff:8.8.8.8]/", false, Some(SPECIAL)),
        ("http://[fe80::1%25eth0]/", true, Some("push.url_syntax")),
        ("http://[fe80::1]/", true, Some(PRIVATE)),
        // localhost in every spelling.
        ("https://LOCALHOST./", false, Some("push.localhost")),
        ("http://LOCALHOST./x", true, Some("push.localhost")),
        ("https://foo.localhost/", false, Some("push.localhost")),
        ("https://localhost:443/", false, Some("push.localhost")),
        ("https://%6c%6fcalhost/", false, Some("push.localhost")),
        (
            "https://\u{ff4c}\u{ff4f}\u{ff43}\u{ff41}\u{ff4c}\u{ff48}\u{ff4f}\u{ff53}\u{ff54}/",
            false,
            Some("push.localhost"),
        ),
        ("https://localhost../", false, Some("push.url_host")),
        // Local-only names.
        ("https://metadata/", false, Some("push.local_name")),
        (
            "https://metadata.google.internal/computeMetadata/v1/",
            false,
            Some("push.local_name"),
        ),
        ("https://printer.local/", false, Some("push.local_name")),
        ("https://router.home.arpa/", false, Some("push.local_name")),
        // Names the agent's search domains complete (Kubernetes: `svc.cluster.local`).
        (
            "https://kubernetes.default.svc/",
            false,
            Some("push.local_name"),
        ),
        (
            "https://kubernetes.default/",
            false,
            Some("push.local_name"),
        ),
        (
            "https://vault.vault.svc:8200/x",
            false,
            Some("push.local_name"),
        ),
        ("https://redis.kube-system/", false, Some("push.local_name")),
        ("https://db.prod2/", false, Some("push.local_name")),
        (
            "https://KUBERNETES.Default.SVC./",
            false,
            Some("push.local_name"),
        ),
        (
            "https://a.svc.cluster.local/",
            false,
            Some("push.local_name"),
        ),
        // A last label that is no delegated top-level domain: a Kubernetes namespace of
        // letters only, other internal zones (resolved through the search domains).
        ("https://vault.vault:8200/", false, Some("push.local_name")),
        (
            "https://prometheus.monitoring:9090/",
            false,
            Some("push.local_name"),
        ),
        ("https://x.service.consul/", false, Some("push.local_name")),
        ("https://api.docker/", false, Some("push.local_name")),
        (
            "https://hooks.example.test/",
            false,
            Some("push.local_name"),
        ),
        ("https://hooks.xn--zzzzz/", false, Some("push.local_name")),
        // Public names pass (an IDNA top-level domain too, spelled either way).
        ("https://hooks.example.co.uk/", false, None),
        ("https://hooks.xn--p1ai/", false, None),
        ("https://hooks.\u{440}\u{444}/", false, None),
        ("https://hooks.\u{4e2d}\u{56fd}/", false, None),
        ("https://hooks.example.dev/", false, None),
        ("https://hooks.example.google/", false, None),
        (
            "https://hooks.example.onion/",
            false,
            Some("push.local_name"),
        ),
        // The list's limit: a namespace named like a delegated top-level domain passes the
        // name rules (`resolve_names`, or the agent's own check at delivery, must judge it).
        ("https://redis.prod/", false, None),
        ("https://my-hooks.example.com/", false, None),
        (
            "https://localhost.localdomain/",
            false,
            Some("push.local_name"),
        ),
        // Credentials.
        (
            "https://user:pw@example.com/",
            false,
            Some("push.url_userinfo"),
        ),
        (
            "https://user@example.com/",
            false,
            Some("push.url_userinfo"),
        ),
        ("https://:pw@example.com/", false, Some("push.url_userinfo")),
        (
            "https://example.com@127.0.0.1/",
            false,
            Some("push.url_userinfo"),
        ),
        // Schemes.
        ("ftp://example.com/", true, Some("push.url_scheme")),
        ("file:///etc/passwd", true, Some("push.url_scheme")),
        ("gopher://x/", true, Some("push.url_scheme")),
        ("javascript:alert(1)", true, Some("push.url_scheme")),
        ("data:text/plain,x", true, Some("push.url_scheme")),
        ("ws://example.com/", true, Some("push.url_scheme")),
        ("http://hooks.example.com/", false, Some("push.url_scheme")),
        // Syntax.
        ("not a url", true, Some("push.url_syntax")),
        ("https://", false, Some("push.url_syntax")),
        ("/relative/path", false, Some("push.url_syntax")),
        (
            " https://hooks.example.com/",
            false,
            Some("push.url_syntax"),
        ),
        (
            "https://hooks.example.com/\n",
            false,
            Some("push.url_syntax"),
        ),
        (
            "https://hooks.exa\tmple.com/",
            false,
            Some("push.url_syntax"),
        ),
        ("https://1.2.3.4.5/", false, Some("push.url_syntax")),
        // Private and special IPv4.
        ("https://10.0.0.1/", false, Some(PRIVATE)),
        ("https://100.64.0.1/", false, Some(PRIVATE)),
        (
            "https://100.100.100.200/latest/meta-data/",
            false,
            Some(PRIVATE),
        ),
        (
            "https://169.254.169.254/latest/meta-data/",
            false,
            Some(PRIVATE),
        ),
        ("https://172.31.255.255/", false, Some(PRIVATE)),
        ("https://192.168.1.1/", false, Some(PRIVATE)),
        ("https://0.0.0.0/", false, Some(PRIVATE)),
        ("https://224.0.0.1/", false, Some(SPECIAL)),
        ("https://255.255.255.255/", false, Some(SPECIAL)),
        ("https://192.0.2.1/", false, Some(SPECIAL)),
        ("https://198.18.0.1/", false, Some(SPECIAL)),
        // Private and special IPv6.
        ("https://[fd00::1]/", false, Some(PRIVATE)),
        ("https://[fd00:ec2::254]/", false, Some(PRIVATE)),
        ("https://[2001:db8::1]/", false, Some(SPECIAL)),
        ("https://[::]/", false, Some(PRIVATE)),
        ("https://[64:ff9b::a00:1]/", false, Some(PRIVATE)),
        ("https://[64:ff9b:1::808:808]/", false, Some(PRIVATE)),
        ("https://[2002:a00:1::]/", false, Some(PRIVATE)),
        ("https://[2002:808:808::]/", false, Some(SPECIAL)),
        ("https://[2001::1]/", false, Some(SPECIAL)),
        ("https://[ff02::1]/", false, Some(SPECIAL)),
        ("https://[3fff::1]/", false, Some(SPECIAL)),
        ("https://[5f00::1]/", false, Some(SPECIAL)),
        ("https://[100::1]/", false, Some(SPECIAL)),
        ("https://[4000::1]/", false, Some(SPECIAL)),
        // Accepted.
        ("https://hooks.example.com/a2a", false, None),
        ("https://hooks.example.com:8443/a2a?x=1#frag", false, None),
        ("https://8.8.8.8/x", false, None),
        ("https://[2606:4700::1111]/", false, None),
        ("https://[64:ff9b::808:808]/", false, None),
        ("http://hooks.example.com/", true, None),
        ("https://b\u{fc}cher.example.com/", false, None),
    ];

    #[test]
    fn the_top_level_domains_are_sorted_and_spelled_as_the_parser_spells_them() {
        assert!(
            tlds::TLDS.windows(2).all(|w| w[0] < w[1]),
            "sorted, once each"
        );
        for tld in tlds::TLDS {
            let url = Url::parse(&format!("https://hooks.{tld}/")).expect(tld);
            assert_eq!(url.host_str(), Some(format!("hooks.{tld}").as_str()));
        }
    }

    #[test]
    fn spellings_table() {
        let mut failures = Vec::new();
        for &(raw, allow_http, expected) in TABLE {
            let policy = PushUrlPolicy {
                allow_http,
                resolve_names: false,
                ..Default::default()
            };
            let got = reason_of(raw, &policy);
            if got != expected {
                failures.push(format!("{raw:?}: expected {expected:?}, got {got:?}"));
            }
            // Nothing the table rejects with allow_http passes without it.
            if expected.is_some() {
                assert!(
                    check_push_url(raw, &PushUrlPolicy::default()).is_err(),
                    "{raw}"
                );
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn too_long() {
        let long = format!("https://hooks.example.com/{}", "a".repeat(MAX_PUSH_URL_LEN));
        assert_eq!(reason_of(&long, &http()), Some("push.url_too_long"));
        let at_limit = format!(
            "https://hooks.example.com/{}",
            "a".repeat(MAX_PUSH_URL_LEN - "https://hooks.example.com/".len())
        );
        assert_eq!(at_limit.len(), MAX_PUSH_URL_LEN);
        assert_eq!(reason_of(&at_limit, &http()), None);
        // Normalization that grows the URL past the limit is caught too.
        let grows = format!("https://hooks.example.com/{}", "\u{e9}".repeat(1000));
        assert!(grows.len() <= MAX_PUSH_URL_LEN);
        assert_eq!(reason_of(&grows, &http()), Some("push.url_too_long"));
    }

    #[test]
    fn returns_normalized_url() {
        let url = check_push_url("https://HOOKS.Example.COM./a2a", &PushUrlPolicy::default());
        assert_eq!(
            url.as_ref().map(Url::as_str),
            Ok("https://hooks.example.com./a2a")
        );
        let url = check_push_url(
            "https://b\u{fc}cher.example.com/",
            &PushUrlPolicy::default(),
        );
        assert_eq!(
            url.as_ref().map(Url::as_str),
            Ok("https://xn--bcher-kva.example.com/")
        );
        let url = check_push_url(
            "https://[2606:4700:0:0::1111]:443/",
            &PushUrlPolicy::default(),
        );
        assert_eq!(
            url.as_ref().map(Url::as_str),
            Ok("https://[2606:4700::1111]/")
        );
    }

    /// The special-purpose blocks as listed in the brief (IANA registries), independent of the
    /// implementation's table, so a typo there is caught here.
    const LISTED: &[&str] = &[
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "::1/128",
        "::ffff:0:0/96",
        "::/96",
        "64:ff9b::/96",
        "64:ff9b:1::/48",
        "100::/64",
        "2001::/23",
        "2001::/32",
        "2001:db8::/32",
        "2002::/16",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
        "3fff::/20",
        "5f00::/16",
    ];

    fn url_for(ip: IpAddr) -> String {
        match ip {
            IpAddr::V4(a) => format!("https://{a}/"),
            IpAddr::V6(a) => format!("https://[{a}]/"),
        }
    }

    /// A random address inside `net`: its network address with the host bits from `bytes`.
    fn random_in(net: ipnet::IpNet, bytes: &[u8; 16]) -> IpAddr {
        match (net.network(), net.hostmask()) {
            (IpAddr::V4(n), IpAddr::V4(m)) => {
                let r = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                IpAddr::V4(Ipv4Addr::from(u32::from(n) | (r & u32::from(m))))
            }
            (IpAddr::V6(n), IpAddr::V6(m)) => {
                let r = u128::from_be_bytes(*bytes);
                IpAddr::V6(Ipv6Addr::from(u128::from(n) | (r & u128::from(m))))
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn every_listed_block_is_rejected_at_its_edges_and_inside() {
        let rng = SystemRandom::new();
        for cidr in LISTED {
            let net = ipnet::IpNet::from_str(cidr).unwrap();
            let mut probes = vec![net.network(), net.broadcast()];
            // Inside the well-known NAT64 prefix the embedded IPv4 decides (public ones pass),
            // so only its edges (0.0.0.0 and 255.255.255.255 embedded) are probed.
            let interior = if *cidr == "64:ff9b::/96" { 0 } else { 64 };
            for _ in 0..interior {
                let mut bytes = [0u8; 16];
                rng.fill(&mut bytes).unwrap();
                probes.push(random_in(net, &bytes));
            }
            for ip in probes {
                assert!(special_purpose(ip).is_some(), "{cidr}: {ip} not special");
                let reason = reason_of(&url_for(ip), &PushUrlPolicy::default());
                assert!(
                    reason == Some(PRIVATE) || reason == Some(SPECIAL),
                    "{cidr}: {ip} -> {reason:?}"
                );
            }
        }
    }

    #[test]
    fn accepts_exactly_the_public_addresses() {
        let rng = SystemRandom::new();
        let mut accepted = 0usize;
        // Random IPv4, random IPv6, and random IPv6 inside the blocks where public and special
        // addresses mix (global unicast, NAT64, 6to4, mapped).
        let blocks: Vec<Option<ipnet::IpNet>> = vec![
            None,
            Some("2000::/3".parse().unwrap()),
            Some("2001::/16".parse().unwrap()),
            Some("64:ff9b::/96".parse().unwrap()),
            Some("2002::/16".parse().unwrap()),
            Some("::ffff:0:0/96".parse().unwrap()),
            Some("::/96".parse().unwrap()),
        ];
        for round in 0..20_000 {
            let mut bytes = [0u8; 16];
            rng.fill(&mut bytes).unwrap();
            let ip = match &blocks[round % blocks.len()] {
                None if round % 2 == 0 => {
                    IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]))
                }
                None => IpAddr::V6(Ipv6Addr::from(bytes)),
                Some(net) => random_in(*net, &bytes),
            };
            let ok = check_push_url(&url_for(ip), &PushUrlPolicy::default()).is_ok();
            assert_eq!(ok, special_purpose(ip).is_none(), "{ip}");
            // Whatever spelling reaches the parser, an IPv4 is judged the same: the decimal form.
            if let IpAddr::V4(a) = ip {
                let decimal = format!("https://{}/", u32::from(a));
                let ok2 = check_push_url(&decimal, &PushUrlPolicy::default()).is_ok();
                assert_eq!(ok2, ok, "{ip} as {decimal}");
                let mapped = url_for(IpAddr::V6(a.to_ipv6_mapped()));
                assert!(check_push_url(&mapped, &PushUrlPolicy::default()).is_err());
            }
            accepted += usize::from(ok);
        }
        assert!(
            accepted > 1000,
            "too few public addresses drawn: {accepted}"
        );
    }

    #[test]
    fn operator_allowed_networks_and_hosts() {
        let policy = PushUrlPolicy {
            allow_http: true,
            allowed_networks: ["10.20.0.0/16", "fd00:a2a::/32", "127.0.0.1/32"]
                .iter()
                .map(|n| n.parse().unwrap())
                .collect(),
            allowed_hosts: vec!["hooks.internal".into(), "receiver".into()],
            ..Default::default()
        };
        let broad_loopback = PushUrlPolicy {
            allowed_networks: vec!["::/16".parse().unwrap(), "0.0.0.0/8".parse().unwrap()],
            ..Default::default()
        };
        let tunnels = PushUrlPolicy {
            allowed_networks: vec![
                "2002::/16".parse().unwrap(),
                "64:ff9b::/96".parse().unwrap(),
            ],
            ..Default::default()
        };
        let none = PushUrlPolicy::default();
        // (url, policy, expected reason or None)
        let rows: Vec<(&str, &PushUrlPolicy, Option<&str>)> = vec![
            ("https://10.20.1.2/hook", &policy, None),
            ("https://0x0a.20.1.2/hook", &policy, None),
            ("https://10.20.255.255/", &policy, None),
            ("https://10.21.0.1/", &policy, Some("push.private_address")),
            (
                "https://192.168.1.1/",
                &policy,
                Some("push.private_address"),
            ),
            ("https://[fd00:a2a::1]/", &policy, None),
            (
                "https://[fd00:a2b::1]/",
                &policy,
                Some("push.private_address"),
            ),
            // The mapped form of an allowed IPv4 is another address: refused as ever.
            (
                "https://[::ffff:10.20.1.2]/",
                &policy,
                Some("push.private_address"),
            ),
            // Loopback by a network inside the loopback block only.
            ("http://127.0.0.1:8080/", &policy, None),
            ("http://127.0.0.2/", &policy, Some("push.private_address")),
            (
                "https://[::1]/",
                &broad_loopback,
                Some("push.private_address"),
            ),
            ("https://0.0.0.1/", &broad_loopback, None),
            ("https://0.0.0.0/", &broad_loopback, None),
            // IPv6 spellings of the host's own (or any IPv4) address: never by a network.
            (
                "https://[::ffff:127.0.0.1]:6379/",
                &broad_loopback,
                Some("push.private_address"),
            ),
            (
                "https://[::127.0.0.1]/",
                &broad_loopback,
                Some("push.private_address"),
            ),
            (
                "https://[::ffff:169.254.169.254]/",
                &broad_loopback,
                Some("push.private_address"),
            ),
            (
                "https://[::ffff:7f00:1]/",
                &broad_loopback,
                Some("push.private_address"),
            ),
            // 6to4 and NAT64 forms: allowed by their networks, but never embedding the host.
            ("https://[2002:a14:102::1]/", &tunnels, None),
            ("https://[64:ff9b::a14:102]/", &tunnels, None),
            (
                "https://[2002:7f00:1::1]/",
                &tunnels,
                Some("push.private_address"),
            ),
            (
                "https://[64:ff9b::7f00:1]/",
                &tunnels,
                Some("push.private_address"),
            ),
            (
                "https://[64:ff9b::]/",
                &tunnels,
                Some("push.private_address"),
            ),
            // Names: exactly those listed, in any case, with a trailing dot.
            ("https://hooks.internal/a", &policy, None),
            ("https://HOOKS.Internal./a", &policy, None),
            ("https://receiver/", &policy, None),
            ("https://other.internal/", &policy, Some("push.local_name")),
            (
                "https://x.hooks.internal/",
                &policy,
                Some("push.local_name"),
            ),
            ("https://localhost/", &policy, Some("push.localhost")),
            ("https://hooks.internal/", &none, Some("push.local_name")),
            ("https://10.20.1.2/", &none, Some("push.private_address")),
        ];
        for (url, p, want) in rows {
            let got = check_push_url(url, p).err().map(|e| e.reason.as_str());
            assert_eq!(got, want, "{url}");
        }
    }

    #[tokio::test]
    async fn allowed_networks_hold_after_resolution() {
        let policy = PushUrlPolicy {
            resolve_names: true,
            allowed_networks: vec!["10.20.0.0/16".parse().unwrap()],
            ..Default::default()
        };
        let ok = Url::parse("https://10.20.1.2/").unwrap();
        check_resolved(&ok, &policy, "alice").await.unwrap();
        let bad = Url::parse("https://10.30.1.2/").unwrap();
        assert_eq!(
            check_resolved(&bad, &policy, "alice")
                .await
                .unwrap_err()
                .reason,
            "push.private_address"
        );
    }

    #[test]
    fn public_examples() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2a00:1450::1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(special_purpose(ip), None, "{ip}");
        }
        assert_eq!(
            special_purpose("::ffff:127.0.0.1".parse().unwrap()),
            Some("loopback")
        );
        assert_eq!(
            special_purpose("::ffff:8.8.8.8".parse().unwrap()),
            Some("IPv4-mapped")
        );
    }

    #[test]
    fn reject_messages_name_the_kind_not_the_value() {
        let e = check_push_url("https://169.254.169.254/", &PushUrlPolicy::default()).unwrap_err();
        assert_eq!(e.reason, PRIVATE);
        assert!(e.message.contains("link-local"), "{}", e.message);
        assert!(!e.message.contains("169"), "{}", e.message);
    }

    #[tokio::test]
    async fn resolved_localhost_is_rejected() {
        let policy = PushUrlPolicy {
            allow_http: false,
            resolve_names: true,
            ..Default::default()
        };
        let url = Url::parse("https://localhost/").unwrap();
        let e = check_resolved(&url, &policy, "alice").await.unwrap_err();
        // Loopback on any host with /etc/hosts; a resolver that fails is rejected too.
        assert!(
            e.reason == PRIVATE || e.reason == "push.resolve_failed",
            "{e}"
        );
        assert!(!e.message.contains("localhost"), "{e}");
        // Without resolve_names nothing is looked up.
        assert!(check_resolved(&url, &PushUrlPolicy::default(), "alice")
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn resolved_literal_needs_no_dns() {
        let policy = PushUrlPolicy {
            allow_http: false,
            resolve_names: true,
            ..Default::default()
        };
        let public = check_push_url("https://8.8.8.8/x", &policy).unwrap();
        assert!(check_resolved(&public, &policy, "alice").await.is_ok());
        // A literal is judged again even if the URL did not come from check_push_url.
        let private = Url::parse("https://10.1.2.3/").unwrap();
        assert_eq!(
            check_resolved(&private, &policy, "alice")
                .await
                .unwrap_err()
                .reason,
            PRIVATE
        );
    }

    #[tokio::test]
    async fn unresolvable_name_fails_closed() {
        let policy = PushUrlPolicy {
            allow_http: false,
            resolve_names: true,
            ..Default::default()
        };
        // `.invalid` never resolves (RFC 6761); the local resolver answers NXDOMAIN or fails.
        let url = Url::parse("https://hooks.example.invalid/").unwrap();
        let e = check_resolved(&url, &policy, "alice").await.unwrap_err();
        assert_eq!(e.reason, "push.resolve_failed");
    }

    /// A lookup holds a permit until the resolver returns; with none free within its time it
    /// fails at once, asking no resolver (so slow names cannot take every blocking thread).
    #[tokio::test]
    async fn lookups_are_bounded_by_their_permits() {
        static NONE: Lookups = Lookups::new(0, 4);
        static ONE: Lookups = Lookups::new(1, 4);
        let started = std::time::Instant::now();
        let got = lookup(&NONE, "a", "localhost", 443, Duration::from_millis(100)).await;
        assert!(got.is_none());
        assert!(started.elapsed() >= Duration::from_millis(100));
        let got = lookup(&ONE, "a", "localhost", 443, Duration::from_secs(2)).await;
        let addrs = got.expect("localhost resolves");
        assert!(
            addrs
                .iter()
                .all(|a| a.ip().is_loopback() && a.port() == 443),
            "{addrs:?}"
        );
        assert_eq!(ONE.all.available_permits(), 1, "the permit is given back");
        assert!(
            ONE.callers.lock().unwrap().is_empty(),
            "and the caller's count"
        );
        let held = ONE.all.acquire().await.unwrap();
        assert!(
            lookup(&ONE, "a", "localhost", 443, Duration::from_millis(50))
                .await
                .is_none()
        );
        drop(held);
        assert!(lookup(&ONE, "a", "localhost", 443, Duration::from_secs(2))
            .await
            .is_some());
        assert!(lookup(
            &ONE,
            "a",
            "no-such-name.invalid",
            443,
            Duration::from_secs(2)
        )
        .await
        .is_none());
    }

    /// A caller runs at most its share of lookups at once: past it its next fails at once,
    /// asking no resolver and waiting for no permit, while another caller's goes on; a
    /// lookup that ends gives its share back.
    #[tokio::test]
    async fn a_caller_runs_its_share_of_lookups_and_no_more() {
        static SHARED: Lookups = Lookups::new(16, 4);
        let hung: Vec<_> = (0..4).map(|_| SHARED.enter("mallory").unwrap()).collect();
        let started = std::time::Instant::now();
        assert!(
            lookup(&SHARED, "mallory", "localhost", 443, Duration::from_secs(2))
                .await
                .is_none()
        );
        assert!(started.elapsed() < Duration::from_secs(1), "failed at once");
        assert!(
            lookup(&SHARED, "alice", "localhost", 443, Duration::from_secs(2))
                .await
                .is_some()
        );
        drop(hung);
        assert!(
            lookup(&SHARED, "mallory", "localhost", 443, Duration::from_secs(2))
                .await
                .is_some()
        );
        assert!(SHARED.callers.lock().unwrap().is_empty());
    }
}
