//! The policy file as written (TOML), before validation. Every table refuses unknown keys.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    pub server: ServerSection,
    #[serde(default)]
    pub tls: TlsSection,
    #[serde(default)]
    pub upstreams: Vec<UpstreamSection>,
    #[serde(default)]
    pub auth: AuthSection,
    #[serde(default)]
    pub a2a: A2aSection,
    #[serde(default)]
    pub workspace: WorkspaceSection,
    #[serde(default)]
    pub card: CardSection,
    #[serde(default)]
    pub limits: LimitsSection,
    #[serde(default)]
    pub network: NetworkSection,
    pub authz: Option<AuthzSection>,
    #[serde(default)]
    pub state: StateSection,
    /// `[[agents]]`: several agents behind one edge (absent: one agent at server.public_url).
    #[serde(default)]
    pub agents: Vec<AgentSection>,
    #[serde(default)]
    pub telemetry: TelemetrySection,
}

/// `[telemetry]`: log format and level, trace export.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySection {
    pub otlp_endpoint: Option<Spanned<String>>,
    pub otlp_ca_file: Option<Spanned<PathBuf>>,
    pub otlp_sample_ratio: Option<Spanned<f64>>,
    pub log_format: Option<Spanned<String>>,
    pub log_level: Option<Spanned<String>>,
}

/// One `[[agents]]` entry: where the agent is published, which upstreams serve it, and the
/// sections of its own that replace the global ones for it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    pub name: Spanned<String>,
    pub public_url: Spanned<String>,
    pub upstreams: Spanned<Vec<String>>,
    pub card: Option<CardSection>,
    pub a2a: Option<A2aSection>,
    pub workspace: Option<WorkspaceSection>,
    pub limits: Option<AgentLimitsSection>,
}

/// `[agents.limits]`: only the per-method rates are the agent's own.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentLimitsSection {
    #[serde(default)]
    pub methods: std::collections::BTreeMap<String, RateSection>,
}

/// `[state]`: where the process state lives.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSection {
    /// "memory" (default) or "redis".
    pub backend: Option<Spanned<String>>,
    pub redis_url: Option<Spanned<String>>,
    pub redis_password_env: Option<Spanned<String>>,
    pub redis_password_file: Option<Spanned<PathBuf>>,
    /// PEM CAs for a `rediss://` URL.
    pub redis_ca_file: Option<Spanned<PathBuf>>,
    pub key_prefix: Option<Spanned<String>>,
    pub timeout_ms: Option<Spanned<u64>>,
    /// The key of page tokens and context aliases: the same on every replica (required with
    /// redis), and across restarts.
    pub page_token_secret_env: Option<Spanned<String>>,
    /// How long ownership is remembered after a task's or context's last write (redis).
    pub task_retention_ms: Option<Spanned<u64>>,
    /// How long a busy context stays busy unless its replica renews the lease (redis).
    pub busy_lease_ms: Option<Spanned<u64>>,
    /// The most rate tokens one round trip takes for a principal (redis; 1 = one per request).
    pub rate_lease_max: Option<Spanned<u64>>,
    /// How long leased rate tokens may wait to be spent (redis).
    pub rate_lease_ms: Option<Spanned<u64>>,
    /// The most tasks Redis keeps per owner (redis): past it, its least recently written go.
    pub max_tasks_per_owner: Option<Spanned<u64>>,
}

/// `[authz]`: what each authenticated caller may do.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthzSection {
    /// A caller no rule matches: "deny" (default) or "allow".
    pub default: Option<Spanned<String>>,
    /// A turn of a caller with its own roots must run in one of them (default true).
    pub require_workspace: Option<bool>,
    #[serde(default)]
    pub rules: Vec<AuthzRuleSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthzRuleSection {
    pub name: Spanned<String>,
    #[serde(default)]
    pub principals: Vec<String>,
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default)]
    pub tenants: Vec<String>,
    pub methods: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub workspace_roots: Vec<Spanned<String>>,
    #[serde(default)]
    pub metadata_allowed: Vec<String>,
    /// Whether push configs may be created (default: when the methods grant
    /// CreateTaskPushNotificationConfig).
    pub create_push_configs: Option<bool>,
    /// The agents (`[[agents]]` names) at which the rule applies; absent: every agent.
    pub agents: Option<Spanned<Vec<String>>>,
}

/// `[auth.identity_assertion]`: a signed statement of the caller for the agents.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityAssertionSection {
    pub kid: Spanned<String>,
    pub header: Option<Spanned<String>>,
    pub ttl_secs: Option<Spanned<u64>>,
}

/// `[auth.mtls]`: attributes of client-certificate identities.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MtlsSection {
    #[serde(default)]
    pub identities: Vec<MtlsIdentitySection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MtlsIdentitySection {
    /// The identity (URI SAN, DNS SAN or CN) exactly, or a prefix ending in `*`.
    #[serde(rename = "match")]
    pub pattern: Spanned<String>,
    pub tenant: Option<Spanned<String>>,
    pub groups: Option<Spanned<Vec<String>>>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateSection {
    pub requests_per_second: f64,
    pub burst: u32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSection {
    /// Per principal (after authentication).
    pub requests_per_second: Option<f64>,
    pub burst: Option<u32>,
    /// Per client address (before authentication).
    pub client_ip_requests_per_second: Option<f64>,
    pub client_ip_burst: Option<u32>,
    /// New connections per client address (at accept, before TLS).
    pub client_ip_connections_per_second: Option<f64>,
    pub client_ip_connection_burst: Option<u32>,
    /// IPv6 clients are keyed by this prefix for rates and the failure throttle.
    pub client_ipv6_prefix: Option<Spanned<u8>>,
    /// Per principal and JSON-RPC method, e.g. `SendMessage = { requests_per_second = 2, burst = 5 }`.
    #[serde(default)]
    pub methods: std::collections::BTreeMap<String, RateSection>,
    /// Per-principal overrides of `requests_per_second`/`burst`.
    #[serde(default)]
    pub principals: std::collections::BTreeMap<String, RateSection>,
    pub max_connections: Option<u32>,
    pub max_connections_per_client: Option<u32>,
    /// Accept request bodies without Content-Length (Transfer-Encoding: chunked).
    pub allow_chunked_requests: Option<bool>,
    pub max_in_flight_per_principal: Option<u32>,
    pub max_streams_per_principal: Option<u32>,
    pub max_h2_streams_per_connection: Option<u32>,
    /// Tasks (and, apart, contexts) whose owner the edge remembers (fixed at start).
    pub max_registry_entries: Option<u32>,
    pub max_headers: Option<u32>,
    pub header_read_timeout_ms: Option<u64>,
    /// A connection (HTTP/1.1 or HTTP/2) with no request in flight this long is closed.
    pub idle_timeout_ms: Option<u64>,
    /// A connection whose peer takes nothing written to it for this long is closed.
    pub write_timeout_ms: Option<u64>,
    pub body_read_timeout_ms: Option<u64>,
    pub min_body_bytes_per_second: Option<u64>,
    /// A `:` keep-alive comment on an SSE stream whose agent is silent this long.
    pub stream_keepalive_ms: Option<u64>,
    /// An SSE stream whose agent is silent this long ends with an error frame.
    pub stream_idle_timeout_ms: Option<u64>,
    /// An SSE stream ends (with an error frame) after this long.
    pub stream_max_duration_ms: Option<u64>,
    /// What one SSE stream may hold queued for a caller that reads slowly.
    pub stream_buffer_bytes: Option<u64>,
    /// What all SSE streams of one principal may hold queued together.
    pub stream_buffer_bytes_per_principal: Option<u64>,
    /// The bytes of tasks one ListTasks page may hold.
    pub list_tasks_page_bytes: Option<u64>,
    /// What one principal's requests being read and checked may hold together.
    pub request_bytes_per_principal: Option<u64>,
    /// What all requests being read and checked may hold together.
    pub request_bytes: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSection {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// Which header the trusted proxies write: "x-forwarded-for" or "forwarded" (default:
    /// both read, and they must agree).
    pub client_address_header: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardSection {
    /// "upstream" (default) or "static".
    pub source: Option<Spanned<String>>,
    /// With source = "upstream": the agent (by `upstreams[].name`) whose card, and extended
    /// card, the edge serves. Default: any healthy agent (a homogeneous fleet).
    pub upstream: Option<Spanned<String>>,
    /// How often the agents' card is fetched again.
    pub refresh_interval_ms: Option<u64>,
    /// `Cache-Control: public, max-age=N` of the served card and JWKS.
    pub max_age_secs: Option<u32>,
    /// The kid of the key that signs; the others stay published for verification.
    pub active_kid: Option<Spanned<String>>,
    /// `jku` of the protected header (where verifiers find the public keys): a URL, or
    /// `false` for none; absent or `true`: the edge's own JWKS URL with an asymmetric key.
    pub jku: Option<Spanned<JkuSetting>>,
    #[serde(default)]
    pub signing_keys: Vec<SigningKeySection>,
    /// Keys that must verify the agents' own card before the edge trusts it.
    pub upstream_keys: Option<UpstreamKeysSection>,
    /// The card itself, with `source = "static"`.
    #[serde(rename = "static")]
    pub static_card: Option<Spanned<toml::Table>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SigningKeySection {
    pub kid: Spanned<String>,
    pub alg: Spanned<String>,
    pub secret_env: Option<Spanned<String>>,
    pub private_key_file: Option<Spanned<PathBuf>>,
    /// ES256/EdDSA: `serve` creates `private_key_file` (0600) with a fresh key when missing.
    #[serde(default)]
    pub generate_if_missing: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamKeysSection {
    /// HS256 secrets by kid: kid = "ENV_VAR_NAME".
    #[serde(default)]
    pub secrets_env: std::collections::BTreeMap<String, String>,
    pub jwks_file: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    pub listen: Spanned<String>,
    pub public_url: Spanned<String>,
    /// How long a shutdown waits for in-flight requests and streams.
    pub drain_timeout_ms: Option<u64>,
    /// Maximum time to complete a TLS handshake.
    pub tls_handshake_timeout_ms: Option<u64>,
    /// Maximum size of the request head (request line and headers), HTTP/1.1 and HTTP/2.
    pub max_header_bytes: Option<Spanned<u64>>,
    /// A fixed send buffer for each caller's connection (`SO_SNDBUF`); none: the kernel's
    /// autotuning.
    pub send_buffer_bytes: Option<Spanned<u64>>,
    /// Agent paths (e.g. iac-code's private `/iac-code/readiness`) the edge forwards, to
    /// authenticated callers only. None by default.
    #[serde(default)]
    pub agent_paths: Vec<Spanned<String>>,
    /// Plain-HTTP listener for `/metrics`, `/ready` and `/health` (operators only).
    pub admin_listen: Option<Spanned<String>>,
    /// The admin listener may bind a non-loopback address (it has no TLS and no auth).
    #[serde(default)]
    pub admin_allow_non_loopback: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub client_ca_file: Option<PathBuf>,
    /// PEM certificate revocation lists for client certificates.
    pub client_crl_file: Option<PathBuf>,
    pub client_auth: Option<Spanned<String>>,
    #[serde(default)]
    pub dev: bool,
    pub dev_dir: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSection {
    pub name: Spanned<String>,
    pub url: Spanned<String>,
    pub token_env: Option<Spanned<String>>,
    pub connect_timeout_ms: Option<u64>,
    /// Maximum wait for the response head (first byte) from the agent.
    pub response_timeout_ms: Option<u64>,
    /// https upstreams: CA bundle to trust (default: the system roots).
    pub ca_file: Option<PathBuf>,
    /// https upstreams: a client certificate and key the proxy presents (mTLS to agents).
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
    pub health_interval_ms: Option<u64>,
    pub unhealthy_threshold: Option<u32>,
    pub healthy_threshold: Option<u32>,
    /// HTTP/2 to the agent (h2c for http://, ALPN h2 for https://).
    pub http2: Option<bool>,
    /// With `http2`: requests one connection carries at once.
    pub http2_max_streams: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSection {
    #[serde(default)]
    pub allow_anonymous: bool,
    #[serde(default)]
    pub bearer: Vec<BearerSection>,
    #[serde(default)]
    pub basic: Vec<BasicSection>,
    pub api_key: Option<ApiKeySection>,
    pub jwt: Option<JwtSection>,
    pub mtls: Option<MtlsSection>,
    pub identity_assertion: Option<IdentityAssertionSection>,
    /// The header that carries the authenticated principal to the agents.
    pub principal_header: Option<Spanned<String>>,
    /// Authentication failures one client address may have per minute before 429.
    pub failures_per_minute: Option<Spanned<u32>>,
    /// How many failures may come at once before the per-minute rate applies.
    pub failures_burst: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicSection {
    pub username: Spanned<String>,
    pub password_hash: Option<Spanned<String>>,
    pub password_env: Option<Spanned<String>>,
    pub tenant: Option<Spanned<String>>,
    pub groups: Option<Spanned<Vec<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeySection {
    pub header: Option<Spanned<String>>,
    #[serde(default)]
    pub keys: Vec<ApiKeyEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyEntry {
    pub principal: Spanned<String>,
    pub key_sha256: Option<Spanned<String>>,
    pub key_env: Option<Spanned<String>>,
    pub tenant: Option<Spanned<String>>,
    pub groups: Option<Spanned<Vec<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtSection {
    pub issuer: Spanned<String>,
    pub audience: Spanned<String>,
    pub jwks_file: Option<Spanned<PathBuf>>,
    pub jwks_url: Option<Spanned<String>>,
    /// PEM CA bundle to trust for `jwks_url` (default: the system roots).
    pub jwks_ca_file: Option<PathBuf>,
    pub algorithms: Spanned<Vec<String>>,
    pub principal_claim: Option<Spanned<String>>,
    /// Dotted claim path of the caller's tenant.
    pub tenant_claim: Option<Spanned<String>>,
    /// Dotted claim path of the caller's groups (array of strings or one space-separated string).
    pub groups_claim: Option<Spanned<String>>,
    pub leeway_ms: Option<u64>,
    /// Least time between two refreshes of the key set on an unknown `kid`.
    pub jwks_min_refresh_ms: Option<Spanned<u64>>,
    /// A key set fetched from `jwks_url` is refreshed when older than this.
    pub jwks_max_age_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BearerSection {
    pub principal: Spanned<String>,
    pub token_sha256: Option<Spanned<String>>,
    pub token_env: Option<Spanned<String>>,
    pub token_file: Option<Spanned<PathBuf>>,
    /// With `token_file`: create the file with a fresh random token when it is missing.
    #[serde(default)]
    pub generate_if_missing: bool,
    pub tenant: Option<Spanned<String>>,
    pub groups: Option<Spanned<Vec<String>>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aSection {
    pub max_body_bytes: Option<Spanned<u64>>,
    pub max_json_values: Option<Spanned<u64>>,
    #[serde(default)]
    pub required_extensions: Vec<Spanned<String>>,
    /// `"builtin"` (default: iac-code's classes plus the extras) or `"card"` (the served
    /// card's input modes).
    pub input_media_types: Option<Spanned<String>>,
    pub extra_text_media_types: Option<Spanned<Vec<String>>>,
    pub extra_multimodal_media_types: Option<Spanned<Vec<String>>>,
    /// Replace absolute paths in agents' answers with `[PATH]` (as iac-code's safe mode).
    #[serde(default)]
    pub redact_paths: bool,
    #[serde(default)]
    pub metadata: MetadataSection,
    #[serde(default)]
    pub push: PushSection,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetadataSection {
    pub denied_keys: Option<Spanned<Vec<String>>>,
    pub allowed_for: Option<Spanned<std::collections::BTreeMap<String, Vec<String>>>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushSection {
    /// Accept `http://` callback URLs (default: https only).
    #[serde(default)]
    pub allow_http: bool,
    /// Resolve callback host names at registration and refuse private answers.
    #[serde(default)]
    pub resolve_names: bool,
    /// CIDRs of the operator's own receivers, accepted although special-purpose.
    pub allowed_networks: Option<Spanned<Vec<String>>>,
    /// Exact host names accepted although local-only.
    pub allowed_hosts: Option<Spanned<Vec<String>>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceSection {
    pub allowed_roots: Option<Spanned<Vec<PathBuf>>>,
    pub check_filesystem: Option<bool>,
}

/// `card.jku`: `true`/`false` or a URL.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum JkuSetting {
    Switch(bool),
    Url(String),
}
