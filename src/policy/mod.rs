//! The policy: the TOML file model, its validation into an immutable [`Policy`], and the
//! secrets it names (resolved once, at load). Knows nothing of sockets.
//!
//! Relative paths in a policy are relative to the working directory of the process.

mod agents;
mod auth;
mod authz;
mod card;
mod file;
mod limits;
pub mod routes;
mod secret;
mod state;
mod telemetry;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;

use file::PolicyFile;

use crate::validate::media::MediaTypes;
use crate::validate::metadata::MetadataPolicy;
use crate::validate::push_url::PushUrlPolicy;
use crate::validate::request::RequestPolicy;
use crate::validate::workspace::WorkspacePolicy;
use toml::Spanned;

pub use crate::auth::settings::{
    ApiKeyPolicy, AuthPolicy, BasicCredential, BasicSecret, BearerCredential, ClientAuth,
    GeneratedToken, IdentityAssertionPolicy, JwksLocation, JwtPolicy, ThrottlePolicy,
};
pub use crate::card::settings::{CardPolicy, CardSource, Jku};
pub use crate::state::redis::RedisConfig;
pub use crate::telemetry::settings::{LogFormat, TelemetryPolicy};
pub use crate::upstream::settings::{UpstreamPolicy, UpstreamTarget, MAX_HTTP2_STREAMS};
pub use agents::AgentPolicy;
pub use limits::LimitsPolicy;
pub use secret::{random_token, sha256, write_private};
pub use state::StatePolicy;

/// Why a policy was refused: names the file, the line and the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub key: String,
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": {}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for PolicyError {}

/// What loading may do besides reading: `Check` has no side effects; `Serve` may generate
/// the dev credential files the policy asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadMode {
    Check,
    Serve,
}

/// A validated policy. Immutable; a reload builds a new one.
#[derive(Debug, Clone)]
pub struct Policy {
    pub source: PathBuf,
    pub server: ServerPolicy,
    pub tls: TlsPolicy,
    pub upstreams: Vec<UpstreamPolicy>,
    pub auth: AuthPolicy,
    pub a2a: A2aPolicy,
    pub card: CardPolicy,
    pub limits: LimitsPolicy,
    pub network: crate::limits::network::NetworkPolicy,
    /// `[authz]`; `None`: every authenticated caller may do everything.
    pub authz: Option<Arc<crate::authz::AuthzPolicy>>,
    /// `[state]`.
    pub state: StatePolicy,
    /// `[[agents]]`; empty: one agent at `server.public_url` served by every upstream.
    pub agents: Vec<AgentPolicy>,
    /// `[telemetry]` (fixed at start: a reload does not change it).
    pub telemetry: TelemetryPolicy,
}

/// `server.send_buffer_bytes`'s bounds: below 4 KiB a TLS record needs several writes;
/// above 16 MiB is more than the kernel's autotuning would give one connection.
const MIN_SEND_BUFFER: u64 = 4 * 1024;
const MAX_SEND_BUFFER: u64 = 16 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct ServerPolicy {
    pub listen: SocketAddr,
    /// The one source of the URL the card advertises. A port 0 here is replaced by the bound
    /// port at start-up (for tests and scripts that listen on port 0).
    pub public_url: url::Url,
    pub drain_timeout: Duration,
    pub tls_handshake_timeout: Duration,
    pub max_header_bytes: usize,
    /// `send_buffer_bytes`: each caller connection's fixed `SO_SNDBUF`; `None`: the
    /// kernel's autotuning.
    pub send_buffer_bytes: Option<usize>,
    /// Agent paths exposed to authenticated callers (exact paths).
    pub agent_paths: Vec<String>,
    /// The admin listener (`/metrics`, `/ready`, `/health`), plain HTTP; off when `None`.
    pub admin_listen: Option<SocketAddr>,
}

#[derive(Debug, Clone)]
pub struct TlsPolicy {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// Set when `tls.dev = true`: the directory where a dev CA and server certificate are
    /// generated when missing.
    pub dev_dir: Option<PathBuf>,
    pub client_auth: ClientAuth,
    /// CAs that client certificates must chain to (with client_auth optional or required).
    pub client_ca_file: Option<PathBuf>,
    /// CRLs that client certificates (and their intermediates) are checked against.
    pub client_crl_file: Option<PathBuf>,
    /// Keys the policy sets that mean nothing with its other settings (ignored, with a
    /// warning: `client_ca_file` with `client_auth = "off"`, as POLICY.md's example has it).
    pub ignored: Vec<&'static str>,
}

#[derive(Debug, Clone)]
pub struct A2aPolicy {
    pub max_body_bytes: usize,
    /// Everything a JSON-RPC request is checked against.
    pub requests: Arc<RequestPolicy>,
}

/// Below the stream limits HTTP/2 servers announce by default (hyper 200, Go 250, nginx 128).
const DEFAULT_HTTP2_MAX_STREAMS: usize = 100;
const DEFAULT_MAX_BODY_BYTES: u64 = 32 * 1024 * 1024;
const MAX_MAX_BODY_BYTES: u64 = 1024 * 1024 * 1024;
/// `a2a.max_json_values`: a request of a few parts and an answer's envelope need a few dozen;
/// above 2^26 a tree may take gigabytes.
const MIN_MAX_JSON_VALUES: u64 = 1024;
const MAX_MAX_JSON_VALUES: u64 = 1 << 26;

impl Policy {
    /// Reads and validates a policy file.
    pub fn load(path: &Path, mode: LoadMode) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError {
            file: path.to_path_buf(),
            line: None,
            key: String::new(),
            message: format!("cannot read the policy: {e}"),
        })?;
        Policy::from_toml(path, &text, mode)
    }

    /// Validates policy text; `path` only names the file in errors.
    pub fn from_toml(path: &Path, text: &str, mode: LoadMode) -> Result<Policy, PolicyError> {
        let ctx = Ctx { path, text };
        let raw: PolicyFile = toml::from_str(text).map_err(|e| PolicyError {
            file: path.to_path_buf(),
            line: e.span().map(|s| ctx.line_of(s.start)),
            key: String::new(),
            message: e.message().trim().to_string(),
        })?;
        ctx.validate(raw, mode)
    }

    /// A short human summary of what this policy makes the proxy do (for `check`).
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let tls = match &self.tls.dev_dir {
            Some(dir) => format!("dev certificates in {}", dir.display()),
            None => format!(
                "certificate {} (key {})",
                self.tls.cert_file.display(),
                self.tls.key_file.display()
            ),
        };
        s.push_str(&format!(
            "listen   https://{} (TLS 1.2/1.3, h2 + http/1.1; {tls})\n",
            self.server.listen
        ));
        s.push_str(&format!("public   {}\n", self.server.public_url));
        if let Some(admin) = self.server.admin_listen {
            s.push_str(&format!(
                "admin    http://{admin}/ (/metrics, /ready, /health; no TLS, no auth)\n"
            ));
        }
        for u in &self.upstreams {
            let target = match &u.target {
                UpstreamTarget::Embedded => "embedded task engine".to_string(),
                UpstreamTarget::Http(uri) => uri.to_string(),
            };
            let cred = if u.token.is_some() {
                "with its own bearer token"
            } else {
                "without credential"
            };
            let via = if u.http2 {
                format!(
                    ", HTTP/2, at most {} streams a connection",
                    u.http2_max_streams
                )
            } else {
                String::new()
            };
            s.push_str(&format!("upstream {} -> {target} ({cred}{via})\n", u.name));
        }
        for agent in &self.agents {
            s.push_str(&format!(
                "agent    {} at {} (card at {}.well-known/agent-card.json) served by {}\n",
                agent.name,
                agent.public_url,
                agent.public_url,
                agent.upstreams.join(", ")
            ));
        }
        if !self.agents.is_empty() {
            s.push_str("catalog  /.well-known/agents.json on every host (signed like the cards)\n");
        }
        let a = &self.auth;
        if !a.any_scheme() {
            s.push_str("auth     none: anonymous access allowed (allow_anonymous = true)\n");
        }
        for var in &a.from_environment {
            s.push_str(&format!(
                "auth     from the environment, not the policy: {var} (iac-code compatibility; \
                 set the scheme in [auth] to turn this off)\n"
            ));
        }
        for b in &a.bearer {
            s.push_str(&format!(
                "auth     bearer token for principal {:?}\n",
                b.principal
            ));
        }
        for b in &a.basic {
            s.push_str(&format!(
                "auth     basic password for user {:?}\n",
                b.username
            ));
        }
        if let Some(k) = &a.api_key {
            for (p, _) in &k.keys {
                s.push_str(&format!(
                    "auth     API key in header {} for principal {p:?}\n",
                    k.header
                ));
            }
        }
        if let Some(j) = &a.jwt {
            let keys = match &j.jwks {
                JwksLocation::File(f) => f.display().to_string(),
                JwksLocation::Url { url, .. } => url.to_string(),
            };
            s.push_str(&format!(
                "auth     JWT from issuer {:?} for audience {:?} ({:?}), keys {keys}, principal jwt:<{}>\n",
                j.issuer, j.audience, j.algorithms, j.principal_claim
            ));
        }
        if a.client_auth != ClientAuth::Off {
            s.push_str(&format!(
                "auth     client certificates {:?}, principal mtls:<URI SAN | DNS SAN | CN>\n",
                a.client_auth
            ));
        }
        if a.allow_anonymous && a.any_scheme() {
            s.push_str("auth     callers without any credential are let in as \"anonymous\"\n");
        }
        s.push_str(&format!(
            "limits   request body <= {} bytes and {} JSON values, request head <= {} bytes\n",
            self.a2a.max_body_bytes,
            self.a2a.requests.max_json_values,
            self.server.max_header_bytes
        ));
        s.push_str(&format!(
            "limits   requests being read and checked hold <= {} bytes a caller, {} in all\n",
            self.limits.request_bytes_per_principal, self.limits.request_bytes
        ));
        let r = &self.a2a.requests;
        if !r.required_extensions.is_empty() {
            s.push_str(&format!(
                "a2a      required extensions: {}\n",
                r.required_extensions.join(", ")
            ));
        }
        if r.media.is_from_card() {
            s.push_str("parts    media types: the served card's defaultInputModes and skills' inputModes (text-like: text/* and JSON/YAML types; the rest multimodal)\n");
        } else {
            s.push_str(&format!(
                "parts    text-like: {}; multimodal: {}\n",
                r.media.text().join(", "),
                r.media.multimodal().join(", ")
            ));
        }
        let roots: Vec<String> = r
            .workspace
            .roots
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        s.push_str(&format!(
            "workspace roots: {} ({})\n",
            roots.join(", "),
            if r.workspace.check_filesystem {
                "checked on the filesystem"
            } else {
                "lexical checks only"
            }
        ));
        match &self.authz {
            None => s.push_str(
                "authz    none: every authenticated caller may call every method, use every workspace root and register push callbacks (add [authz] rules to restrict)\n",
            ),
            Some(z) => {
                s.push_str(&format!(
                    "authz    {} rule(s); a caller no rule matches is {}\n",
                    z.rules.len(),
                    if z.default_allow {
                        "allowed everything (default = \"allow\")"
                    } else {
                        "refused every method (default = \"deny\")"
                    }
                ));
                for r in &z.rules {
                    s.push_str(&format!("authz    rule {:?}: {}\n", r.name, r.describe()));
                }
            }
        }
        match &self.state.redis {
            None => s.push_str(&format!(
                "state    memory: ownership, budgets and page tokens live in this process ({})\n",
                if self.state.page_token_secret.is_some() {
                    "page tokens and context aliases keyed by state.page_token_secret_env"
                } else {
                    "a random key per process"
                }
            )),
            Some(r) => s.push_str(&format!(
                "state    redis {} (prefix {:?}, {} ms a round trip): task and context ownership, workspace bindings, busy contexts (lease {} ms), ListTasks pages, per-principal and per-method rates (a fast caller's tokens taken up to {} at a time, spent within {} ms) and the authentication failure budget are shared by the replicas; ownership is kept {} after its last write; per replica: the per-address rate, concurrency slots and stream buffers\n",
                r.url,
                r.key_prefix,
                r.timeout.as_millis(),
                self.state.busy_lease.as_millis(),
                r.rate_lease_max,
                r.rate_lease.as_millis(),
                crate::time::human_duration(self.state.task_retention),
            )),
        }
        if let Some(endpoint) = &self.telemetry.otlp_endpoint {
            s.push_str(&format!(
                "traces   OTLP/HTTP to {}, {} of the requests' spans{}\n",
                endpoint
                    .join("v1/traces")
                    .map_or_else(|_| endpoint.to_string(), |u| u.to_string()),
                match self.telemetry.otlp_sample_ratio {
                    r if r >= 1.0 => "all".to_string(),
                    r =>
                        format!("{:.4}", r * 100.0)
                            .trim_end_matches('0')
                            .trim_end_matches('.')
                            .to_string()
                            + " %",
                },
                if self.telemetry.otlp_ca_file.is_some() {
                    " (the collector's certificate checked against telemetry.otlp_ca_file)"
                } else {
                    ""
                },
            ));
        }
        if let Some(ia) = &self.auth.identity_assertion {
            s.push_str(&format!(
                "identity every forwarded request carries a {} JWS (kid {:?}, {} s) in {}\n",
                ia.key.alg,
                ia.key.kid,
                ia.ttl.as_secs(),
                ia.header
            ));
        }
        s.push_str(&format!(
            "push     callback URLs: {}{}\n",
            if r.push.allow_http {
                "https or http"
            } else {
                "https only"
            },
            if r.push.resolve_names {
                ", names resolved and checked"
            } else {
                ""
            }
        ));
        s
    }
}

struct Ctx<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Ctx<'_> {
    fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1
    }

    fn err<T>(
        &self,
        key: &str,
        span: Option<std::ops::Range<usize>>,
        msg: String,
    ) -> Result<T, PolicyError> {
        Err(PolicyError {
            file: self.path.to_path_buf(),
            line: span.map(|s| self.line_of(s.start)),
            key: key.to_string(),
            message: msg,
        })
    }

    fn spanned_err<T, V>(
        &self,
        key: &str,
        v: &Spanned<V>,
        msg: impl Into<String>,
    ) -> Result<T, PolicyError> {
        self.err(key, Some(v.span()), msg.into())
    }

    fn validate(&self, mut raw: PolicyFile, mode: LoadMode) -> Result<Policy, PolicyError> {
        let server = self.server(raw.server)?;
        let tls = self.tls(raw.tls)?;
        if raw.upstreams.is_empty() {
            return self.err(
                "upstreams",
                None,
                "at least one [[upstreams]] entry is required".into(),
            );
        }
        let mut upstreams = Vec::new();
        for (i, u) in raw.upstreams.into_iter().enumerate() {
            let up = self.upstream(i, u)?;
            if upstreams.iter().any(|o: &UpstreamPolicy| o.name == up.name) {
                return self.err(
                    &format!("upstreams[{i}].name"),
                    None,
                    format!("duplicate upstream name {:?}", up.name),
                );
            }
            upstreams.push(up);
        }
        if upstreams
            .iter()
            .filter(|u| matches!(u.target, UpstreamTarget::Embedded))
            .count()
            > 1
        {
            return self.err(
                "upstreams",
                None,
                "at most one upstream may be \"embedded\"".into(),
            );
        }
        let identity_assertion = raw.auth.identity_assertion.take();
        let mut auth = self.auth(raw.auth, tls.client_auth, mode)?;
        let agent_sections = std::mem::take(&mut raw.agents);
        if !agent_sections.is_empty() {
            let card_static = raw.card.source.as_ref().filter(|s| s.get_ref() == "static");
            if let Some(s) = card_static {
                return self.spanned_err(
                    "card.source",
                    s,
                    "with [[agents]], a static card belongs in the agent's own card section",
                );
            }
            if let Some(u) = &raw.card.upstream {
                return self.spanned_err(
                    "card.upstream",
                    u,
                    "with [[agents]], card.upstream belongs in the agent's own card section",
                );
            }
        }
        let (global_a2a, global_workspace) = (raw.a2a.clone(), raw.workspace.clone());
        let a2a = self.a2a_policy(raw.a2a, raw.workspace)?;
        let requests = a2a.requests.clone();
        let names: Vec<&str> = upstreams.iter().map(|u| u.name.as_str()).collect();
        let card = self.card(raw.card, mode, &names)?;
        auth.identity_assertion =
            self.identity_assertion(identity_assertion, &card.signing_keys)?;
        let mut limits = self.limits(raw.limits, Some(&auth))?;
        let globals = agents::Globals {
            a2a: &global_a2a,
            workspace: &global_workspace,
            card: &card,
            method_rates: &limits.rates.per_method,
        };
        let agents = self.agents(agent_sections, &upstreams, globals, mode)?;
        // (with [[agents]], each agent's own bounds: the global ones where it keeps them)
        let bounds: Vec<&A2aPolicy> = match agents.is_empty() {
            true => vec![&a2a],
            false => agents.iter().map(|a| &a.a2a).collect(),
        };
        // (and the largest task a ListTasks page may read of an agent's, held as a request)
        let largest = bounds
            .into_iter()
            .map(|a| {
                let values = a.requests.max_json_values;
                let largest = crate::limits::concurrency::largest_request;
                largest(a.max_body_bytes, values).max(largest(limits.list_tasks_page_bytes, values))
            })
            .max()
            .unwrap_or(0);
        self.settle_request_bytes(&mut limits, largest)?;
        if !agents.is_empty() {
            // Per-method rates are per agent: keyed `<agent>/<method>`.
            limits.rates.per_method = agents
                .iter()
                .flat_map(|a| {
                    a.method_rates
                        .iter()
                        .map(|(m, r)| (format!("{}/{m}", a.name), *r))
                })
                .collect();
        }
        // Rules' roots lie inside the global roots or an agent's.
        let mut all_roots = requests.workspace.clone();
        for a in &agents {
            for r in &a.a2a.requests.workspace.roots {
                if !all_roots.roots.contains(r) {
                    all_roots.roots.push(r.clone());
                }
            }
        }
        let agent_names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
        let authz = self
            .authz(raw.authz, &all_roots, &agent_names)?
            .map(Arc::new);
        let network = self.network(raw.network)?;
        let state = self.state(raw.state)?;
        let telemetry = self.telemetry(raw.telemetry)?;
        Ok(Policy {
            source: self.path.to_path_buf(),
            server,
            tls,
            upstreams,
            auth,
            a2a,
            card,
            limits,
            network,
            authz,
            state,
            agents,
            telemetry,
        })
    }

    /// `[a2a]` with `[workspace]`: the body cap and the request rules.
    fn a2a_policy(
        &self,
        mut a: file::A2aSection,
        w: file::WorkspaceSection,
    ) -> Result<A2aPolicy, PolicyError> {
        let max_body_bytes = match a.max_body_bytes.take() {
            None => DEFAULT_MAX_BODY_BYTES,
            Some(v) if *v.get_ref() == 0 || *v.get_ref() > MAX_MAX_BODY_BYTES => {
                return self.spanned_err(
                    "a2a.max_body_bytes",
                    &v,
                    format!("must be between 1 and {MAX_MAX_BODY_BYTES}"),
                )
            }
            Some(v) => v.into_inner(),
        };
        Ok(A2aPolicy {
            max_body_bytes: usize::try_from(max_body_bytes).unwrap_or(usize::MAX),
            requests: Arc::new(self.requests(a, w)?),
        })
    }

    /// The request rules: `[a2a]` and `[workspace]`, with the iac-code environment variables
    /// where the policy is silent.
    /// `[a2a.push]`.
    fn push_policy(&self, p: &file::PushSection) -> Result<PushUrlPolicy, PolicyError> {
        let mut allowed_networks = Vec::new();
        if let Some(nets) = &p.allowed_networks {
            for (i, raw) in nets.get_ref().iter().enumerate() {
                let key = format!("a2a.push.allowed_networks[{i}]");
                let net: ipnet::IpNet = match raw.parse() {
                    Ok(n) => n,
                    // A bare address is its own /32 or /128.
                    Err(_) => match raw.parse::<std::net::IpAddr>() {
                        Ok(ip) => ipnet::IpNet::from(ip),
                        Err(_) => {
                            return self.spanned_err(
                                &key,
                                nets,
                                "not a CIDR (10.20.0.0/16) or an address",
                            )
                        }
                    },
                };
                let too_broad = match net {
                    ipnet::IpNet::V4(n) => n.prefix_len() < 8,
                    ipnet::IpNet::V6(n) => n.prefix_len() < 16,
                };
                if too_broad {
                    return self.spanned_err(
                        &key,
                        nets,
                        "too broad (at least /8 for IPv4, /16 for IPv6): name the receivers' networks",
                    );
                }
                allowed_networks.push(net.trunc());
            }
        }
        let mut allowed_hosts = Vec::new();
        if let Some(hosts) = &p.allowed_hosts {
            for (i, raw) in hosts.get_ref().iter().enumerate() {
                let key = format!("a2a.push.allowed_hosts[{i}]");
                let name = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
                let label_ok = |l: &str| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                };
                if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
                    return self.spanned_err(&key, hosts, "not a host name");
                }
                if name == "localhost" || name.ends_with(".localhost") {
                    return self.spanned_err(
                        &key,
                        hosts,
                        "localhost is never allowed by name: allow the loopback address in allowed_networks (127.0.0.1/32) and use it",
                    );
                }
                allowed_hosts.push(name);
            }
        }
        Ok(PushUrlPolicy {
            allow_http: p.allow_http,
            resolve_names: p.resolve_names,
            allowed_networks,
            allowed_hosts,
        })
    }

    fn requests(
        &self,
        a: file::A2aSection,
        w: file::WorkspaceSection,
    ) -> Result<RequestPolicy, PolicyError> {
        let mut required_extensions = Vec::new();
        for (i, uri) in a.required_extensions.iter().enumerate() {
            let u = uri.get_ref();
            if u.is_empty()
                || u.len() > 512
                || !u.contains(':')
                || !u.bytes().all(|b| b.is_ascii_graphic() && b != b',')
            {
                return self.spanned_err(
                    &format!("a2a.required_extensions[{i}]"),
                    uri,
                    "must be an extension URI (printable ASCII with a scheme, no commas)",
                );
            }
            required_extensions.push(u.clone());
        }
        let extras = |given: Option<Spanned<Vec<String>>>,
                      key: &str,
                      env: &str|
         -> (Vec<String>, Option<std::ops::Range<usize>>, String) {
            match given {
                Some(v) => (v.get_ref().clone(), Some(v.span()), key.to_string()),
                None => (
                    std::env::var(env)
                        .map(|s| {
                            s.split([',', ';'])
                                .map(|t| t.trim().to_string())
                                .filter(|t| !t.is_empty())
                                .collect()
                        })
                        .unwrap_or_default(),
                    None,
                    format!("{key} (from environment variable {env})"),
                ),
            }
        };
        let (text, text_span, text_key) = extras(
            a.extra_text_media_types,
            "a2a.extra_text_media_types",
            "IACCODE_A2A_TEXT_MIME_TYPES",
        );
        let (multi, multi_span, multi_key) = extras(
            a.extra_multimodal_media_types,
            "a2a.extra_multimodal_media_types",
            "IACCODE_A2A_MULTIMODAL_MIME_TYPES",
        );
        let media = match a
            .input_media_types
            .as_ref()
            .map(|v| (v, v.get_ref().as_str()))
        {
            Some((_, "card")) => {
                if let Some((key, span)) = [
                    (text_key.clone(), &text_span),
                    (multi_key.clone(), &multi_span),
                ]
                .into_iter()
                .find(|(_, s)| s.is_some())
                {
                    return self.err(
                        &key,
                        span.clone(),
                        "only meaningful with the built-in classes (a2a.input_media_types = \"builtin\"); with \"card\" the card's input modes decide".into(),
                    );
                }
                MediaTypes::from_card()
            }
            None | Some((_, "builtin")) => match MediaTypes::new(&text, &[]) {
                Err(m) => return self.err(&text_key, text_span, m),
                Ok(_) => MediaTypes::new(&text, &multi)
                    .or_else(|m| self.err(&multi_key, multi_span, m))?,
            },
            Some((v, _)) => {
                return self.spanned_err(
                    "a2a.input_media_types",
                    v,
                    "must be \"builtin\" or \"card\"",
                )
            }
        };
        let denied = a
            .metadata
            .denied_keys
            .as_ref()
            .map(|d| d.get_ref().clone())
            .unwrap_or_else(MetadataPolicy::default_denied);
        let allowed_for = a
            .metadata
            .allowed_for
            .as_ref()
            .map(|m| m.get_ref().clone())
            .unwrap_or_default();
        let metadata = MetadataPolicy::new(&denied, &allowed_for).or_else(|m| {
            let span = a.metadata.denied_keys.as_ref().map(|d| d.span()).or(a
                .metadata
                .allowed_for
                .as_ref()
                .map(|d| d.span()));
            self.err("a2a.metadata", span, m)
        })?;
        let (roots, roots_span) = match &w.allowed_roots {
            Some(r) => (r.get_ref().clone(), Some(r.span())),
            None => (WorkspacePolicy::default_roots(), None),
        };
        let workspace = WorkspacePolicy::new(roots, w.check_filesystem.unwrap_or(true))
            .or_else(|m| self.err("workspace.allowed_roots", roots_span, m))?;
        let max_json_values = match &a.max_json_values {
            None => crate::a2a::json::DEFAULT_MAX_VALUES,
            Some(v) if *v.get_ref() < MIN_MAX_JSON_VALUES || *v.get_ref() > MAX_MAX_JSON_VALUES => {
                return self.spanned_err(
                    "a2a.max_json_values",
                    v,
                    format!("must be between {MIN_MAX_JSON_VALUES} and {MAX_MAX_JSON_VALUES}"),
                )
            }
            Some(v) => usize::try_from(*v.get_ref()).unwrap_or(usize::MAX),
        };
        Ok(RequestPolicy {
            media,
            workspace,
            metadata,
            push: self.push_policy(&a.push)?,
            required_extensions,
            redact_paths: a.redact_paths,
            max_json_values,
        })
    }

    fn server(&self, s: file::ServerSection) -> Result<ServerPolicy, PolicyError> {
        let listen: SocketAddr = match s.listen.get_ref().parse() {
            Ok(a) => a,
            Err(_) => {
                return self.spanned_err(
                    "server.listen",
                    &s.listen,
                    "must be an IP address and port, e.g. \"127.0.0.1:8443\"",
                )
            }
        };
        let public_url = match url::Url::parse(s.public_url.get_ref()) {
            Ok(u)
                if u.scheme() == "https"
                    && u.host().is_some()
                    && u.query().is_none()
                    && u.fragment().is_none()
                    && u.username().is_empty()
                    && u.password().is_none() =>
            {
                u
            }
            Ok(_) => {
                return self.spanned_err(
                    "server.public_url",
                    &s.public_url,
                    "must be an https:// URL with a host and no credentials, query or fragment",
                )
            }
            Err(e) => {
                return self.spanned_err(
                    "server.public_url",
                    &s.public_url,
                    format!("not a URL: {e}"),
                )
            }
        };
        let max_header_bytes = match s.max_header_bytes {
            None => 64 * 1024,
            Some(v) if !(1024..=1024 * 1024).contains(v.get_ref()) => {
                return self.spanned_err(
                    "server.max_header_bytes",
                    &v,
                    "must be between 1024 and 1048576",
                )
            }
            Some(v) => v.into_inner() as usize,
        };
        let send_buffer_bytes = match s.send_buffer_bytes {
            None => None,
            Some(v) if !(MIN_SEND_BUFFER..=MAX_SEND_BUFFER).contains(v.get_ref()) => {
                return self.spanned_err(
                    "server.send_buffer_bytes",
                    &v,
                    format!("must be between {MIN_SEND_BUFFER} and {MAX_SEND_BUFFER}"),
                )
            }
            Some(v) => Some(v.into_inner() as usize),
        };
        let mut agent_paths = Vec::new();
        for (i, p) in s.agent_paths.iter().enumerate() {
            let path = p.get_ref();
            let reserved = [
                "/health",
                "/.well-known/agent-card.json",
                "/.well-known/jwks.json",
            ];
            let ok = path.starts_with('/')
                && path.len() <= 256
                && !path.contains("..")
                && !path.contains("//")
                && path
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/-._~:".contains(&b))
                && !reserved.contains(&path.as_str())
                && path.trim_end_matches('/') != public_url.path().trim_end_matches('/');
            if !ok {
                return self.spanned_err(&format!("server.agent_paths[{i}]"), p, "must be an absolute path of [A-Za-z0-9/-._~:], without '..' or '//', other than the edge's own routes");
            }
            agent_paths.push(path.clone());
        }
        let admin_listen = match &s.admin_listen {
            None => None,
            Some(a) => match a.get_ref().parse::<SocketAddr>() {
                Err(_) => {
                    return self.spanned_err(
                        "server.admin_listen",
                        a,
                        "must be an IP address and port, e.g. \"127.0.0.1:9901\"",
                    )
                }
                Ok(addr) if !addr.ip().is_loopback() && !s.admin_allow_non_loopback => {
                    return self.spanned_err(
                        "server.admin_listen",
                        a,
                        "must be a loopback address (the admin listener has no TLS and no authentication); set server.admin_allow_non_loopback = true to expose it",
                    )
                }
                Ok(addr) if addr.port() != 0 && addr == listen => {
                    return self.spanned_err(
                        "server.admin_listen",
                        a,
                        "must differ from server.listen",
                    )
                }
                Ok(addr) => Some(addr),
            },
        };
        Ok(ServerPolicy {
            agent_paths,
            admin_listen,
            listen,
            public_url,
            drain_timeout: Duration::from_millis(s.drain_timeout_ms.unwrap_or(30_000)),
            tls_handshake_timeout: Duration::from_millis(
                s.tls_handshake_timeout_ms.unwrap_or(10_000).max(1),
            ),
            max_header_bytes,
            send_buffer_bytes,
        })
    }

    fn tls(&self, t: file::TlsSection) -> Result<TlsPolicy, PolicyError> {
        let client_auth = match t.client_auth.as_ref().map(|m| m.get_ref().as_str()) {
            None | Some("off") => ClientAuth::Off,
            Some("optional") => ClientAuth::Optional,
            Some("required") => ClientAuth::Required,
            Some(_) => {
                return self.spanned_err(
                    "tls.client_auth",
                    t.client_auth
                        .as_ref()
                        .unwrap_or(&Spanned::new(0..0, String::new())),
                    "must be \"off\", \"optional\" or \"required\"",
                )
            }
        };
        // With client certificates turned off in so many words, a CA or CRL file is ignored
        // (said by `check` and in the log at start): the policy contract's own example sets
        // `client_ca_file` beside `client_auth = "off"`. Nothing is weaker for it: no
        // certificate is asked for. Without `client_auth`, a CA or CRL file says the operator
        // meant client certificates: refused, so that a forgotten `client_auth` does not
        // start an edge without the check they meant to add.
        let off = client_auth == ClientAuth::Off;
        let files_set = [
            ("tls.client_ca_file", t.client_ca_file.is_some()),
            ("tls.client_crl_file", t.client_crl_file.is_some()),
        ];
        let set = files_set
            .iter()
            .filter(|(_, set)| *set)
            .map(|(key, _)| *key);
        if t.client_auth.is_none() {
            if let Some(key) = set.clone().next() {
                return self.err(
                    key,
                    None,
                    "needs client_auth = \"optional\" or \"required\" (or \"off\" to ignore it)"
                        .into(),
                );
            }
        }
        let ignored = if off { set.collect() } else { Vec::new() };
        let (client_ca_file, client_crl_file) = if off {
            (None, None)
        } else {
            match t.client_ca_file {
                Some(f) => (Some(f), t.client_crl_file),
                None => {
                    return self.err(
                        "tls.client_ca_file",
                        None,
                        "required with client_auth = \"optional\" or \"required\"".into(),
                    )
                }
            }
        };
        if t.dev {
            let dir = t.dev_dir.unwrap_or_else(|| PathBuf::from("certs/dev"));
            return Ok(TlsPolicy {
                cert_file: t.cert_file.unwrap_or_else(|| dir.join("server.pem")),
                key_file: t.key_file.unwrap_or_else(|| dir.join("server.key")),
                dev_dir: Some(dir),
                client_auth,
                client_ca_file,
                client_crl_file,
                ignored,
            });
        }
        if t.dev_dir.is_some() {
            return self.err(
                "tls.dev_dir",
                None,
                "only meaningful with tls.dev = true".into(),
            );
        }
        match (t.cert_file, t.key_file) {
            (Some(cert_file), Some(key_file)) => Ok(TlsPolicy {
                cert_file,
                key_file,
                dev_dir: None,
                client_auth,
                client_ca_file,
                client_crl_file,
                ignored,
            }),
            _ => self.err(
                "tls",
                None,
                "cert_file and key_file are required unless dev = true".into(),
            ),
        }
    }

    fn upstream(&self, i: usize, u: file::UpstreamSection) -> Result<UpstreamPolicy, PolicyError> {
        let key = |k: &str| format!("upstreams[{i}].{k}");
        let name = u.name.get_ref().clone();
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return self.spanned_err(
                &key("name"),
                &u.name,
                "must be 1-64 characters of letters, digits, '-', '_' or '.'",
            );
        }
        let target = if u.url.get_ref() == "embedded" {
            UpstreamTarget::Embedded
        } else {
            match url::Url::parse(u.url.get_ref()) {
                Ok(parsed)
                    if matches!(parsed.scheme(), "http" | "https")
                        && parsed.host().is_some()
                        && parsed.username().is_empty()
                        && parsed.password().is_none() =>
                {
                    let tls_keys = u.ca_file.is_some()
                        || u.client_cert_file.is_some()
                        || u.client_key_file.is_some();
                    if parsed.scheme() == "http" && tls_keys {
                        return self.spanned_err(
                            &key("url"),
                            &u.url,
                            "ca_file and client certificates need an https:// URL",
                        );
                    }
                    match parsed.as_str().parse::<http::Uri>() {
                        Ok(uri) => UpstreamTarget::Http(uri),
                        Err(_) => return self.spanned_err(&key("url"), &u.url, "not a valid URI"),
                    }
                }
                Ok(_) => {
                    return self.spanned_err(
                        &key("url"),
                        &u.url,
                        "must be \"embedded\" or an http:// or https:// URL without credentials",
                    )
                }
                Err(e) => return self.spanned_err(&key("url"), &u.url, format!("not a URL: {e}")),
            }
        };
        let http2 = u.http2.unwrap_or(false);
        if http2 && matches!(target, UpstreamTarget::Embedded) {
            return self.spanned_err(
                &key("http2"),
                &u.url,
                "http2 needs an http:// or https:// URL (the embedded engine is in-process)",
            );
        }
        let http2_max_streams = match u.http2_max_streams {
            None => DEFAULT_HTTP2_MAX_STREAMS,
            Some(_) if !http2 => {
                return self.spanned_err(
                    &key("http2_max_streams"),
                    &u.url,
                    "http2_max_streams needs http2 = true",
                )
            }
            Some(n) if (1..=MAX_HTTP2_STREAMS as u64).contains(&n) => n as usize,
            Some(_) => {
                return self.spanned_err(
                    &key("http2_max_streams"),
                    &u.url,
                    format!("must be 1 to {}", MAX_HTTP2_STREAMS),
                )
            }
        };
        let token = match &u.token_env {
            None => None,
            Some(var) => Some(
                secret::from_env(var.get_ref())
                    .or_else(|m| self.spanned_err(&key("token_env"), var, m))?,
            ),
        };
        Ok(UpstreamPolicy {
            name,
            target,
            token,
            connect_timeout: Duration::from_millis(u.connect_timeout_ms.unwrap_or(5_000).max(1)),
            response_timeout: Duration::from_millis(
                u.response_timeout_ms.unwrap_or(300_000).max(1),
            ),
            ca_file: u.ca_file.clone(),
            client_cert: match (&u.client_cert_file, &u.client_key_file) {
                (Some(c), Some(k)) => Some((c.clone(), k.clone())),
                (None, None) => None,
                _ => {
                    return self.spanned_err(
                        &key("client_cert_file"),
                        &u.url,
                        "client_cert_file and client_key_file go together",
                    )
                }
            },
            health_interval: Duration::from_millis(u.health_interval_ms.unwrap_or(5_000).max(100)),
            unhealthy_threshold: u.unhealthy_threshold.unwrap_or(2).max(1),
            healthy_threshold: u.healthy_threshold.unwrap_or(1).max(1),
            http2,
            http2_max_streams,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests;
