//! The JWK set that verifies JWT bearer tokens: read from a file or fetched over https, shared by
//! all requests, refreshed on an unknown `kid` (at most once per interval, whoever asks) and, for
//! a URL, when older than its maximum age. A failed refresh keeps the last good set.
//!
//! Key material is never logged: errors name the source and say what went wrong, not what was read.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use url::Url;

/// Upper bound on a JWK set document, file or response body.
pub const MAX_JWKS_BYTES: usize = 1024 * 1024;
/// Upper bound on one fetch over https: connect, TLS, request and body together.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest `kid` kept; a longer one in a token cannot be known and triggers no refresh.
pub const MAX_KID_CHARS: usize = 256;

/// Where the key set comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum JwksSource {
    File(PathBuf),
    /// https only; `ca_file` (PEM) replaces the system roots when set.
    Url {
        url: Url,
        ca_file: Option<PathBuf>,
    },
}

type KeyMap = HashMap<String, Arc<Jwk>>;

/// The cached key set. Cheap to share: clones see the same keys and the same refresh state.
#[derive(Clone)]
pub struct JwksCache {
    inner: Arc<Inner>,
}

struct Inner {
    /// As configured: a reload with the same source may keep this cache.
    source: JwksSource,
    fetcher: Fetcher,
    min_refresh_interval: Duration,
    max_age: Duration,
    state: RwLock<State>,
    /// Held for the whole of a refresh, so concurrent callers wait for one fetch and share it.
    refresh: tokio::sync::Mutex<()>,
    /// A background refresh is spawned: requests meanwhile spawn no other.
    background: AtomicBool,
}

struct State {
    keys: KeyMap,
    fetched_at: Instant,
    /// End of the last refresh attempt (good or bad); `None` until the first one after loading,
    /// so a rotation right after start is picked up at once.
    last_attempt: Option<Instant>,
    /// Refresh attempts since loading: tells a waiting caller that a refresh happened meanwhile.
    refreshes: u64,
}

enum Fetcher {
    File(PathBuf),
    Https { url: Url, tls: Arc<ClientConfig> },
}

impl std::fmt::Debug for JwksCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A count only: the keys themselves stay out of debug output.
        f.debug_struct("JwksCache")
            .field("source", &self.inner.fetcher.describe())
            .field("keys", &self.inner.read().keys.len())
            .finish()
    }
}

impl JwksCache {
    /// Loads the key set once. Fails if it cannot, or if the set holds no usable key: the proxy
    /// does not start with an unusable JWT configuration.
    pub async fn load(
        source: JwksSource,
        min_refresh_interval: Duration,
        max_age: Duration,
    ) -> Result<JwksCache, String> {
        let fetcher = Fetcher::new(source.clone())?;
        let keys = fetcher
            .fetch()
            .await
            .map_err(|e| format!("JWKS {}: {e}", fetcher.describe()))?;
        Ok(JwksCache {
            inner: Arc::new(Inner {
                source,
                fetcher,
                min_refresh_interval,
                max_age,
                state: RwLock::new(State {
                    keys,
                    fetched_at: Instant::now(),
                    last_attempt: None,
                    refreshes: 0,
                }),
                refresh: tokio::sync::Mutex::new(()),
                background: AtomicBool::new(false),
            }),
        })
    }

    /// A policy reload: loads the key set afresh (a new CA file or key set is taken), but
    /// when a URL source cannot be fetched now and `previous` is the same source with the
    /// same intervals, keeps `previous` (its last good set, refreshed as before), so an
    /// issuer that is down does not block every reload (a TLS certificate renewal among
    /// them). A file source is the operator's own: an unreadable one fails the reload.
    pub async fn reload(
        source: JwksSource,
        min_refresh_interval: Duration,
        max_age: Duration,
        previous: Option<&JwksCache>,
    ) -> Result<JwksCache, String> {
        let kept = previous.filter(|p| {
            matches!(source, JwksSource::Url { .. })
                && p.inner.source == source
                && p.inner.min_refresh_interval == min_refresh_interval
                && p.inner.max_age == max_age
        });
        match JwksCache::load(source, min_refresh_interval, max_age).await {
            Ok(cache) => Ok(cache),
            Err(e) => match kept {
                Some(kept) => {
                    tracing::warn!(
                        event = "jwks_kept_across_reload",
                        source = %kept.inner.fetcher.describe(),
                        error = %e
                    );
                    Ok(kept.clone())
                }
                None => Err(e),
            },
        }
    }

    /// The key with this kid. If unknown, one refresh is attempted (shared with concurrent
    /// callers, at most one per `min_refresh_interval`). A known key from a URL set older than
    /// `max_age` is returned at once while the set is refreshed in the background.
    pub async fn key(&self, kid: &str) -> Option<Arc<Jwk>> {
        if !valid_kid(kid) {
            return None;
        }
        let (found, seen, refresh_due) = {
            let s = self.inner.read();
            (
                s.keys.get(kid).cloned(),
                s.refreshes,
                self.inner.is_stale(&s) && self.inner.may_refresh(&s),
            )
        };
        if let Some(key) = found {
            if refresh_due && !self.inner.background.swap(true, Ordering::AcqRel) {
                let inner = Arc::clone(&self.inner);
                tokio::spawn(async move {
                    let _pending = BackgroundPending(&inner.background);
                    inner.refresh_in_background().await;
                });
            }
            return Some(key);
        }
        // Boxed: a fetch of the key set is rare, and every token's check would otherwise carry
        // its future (~2.7 KiB).
        Box::pin(self.inner.refresh_after(seen)).await;
        self.inner.read().keys.get(kid).cloned()
    }

    /// Number of keys in the current set.
    pub fn len(&self) -> usize {
        self.inner.read().keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[cfg(test)]
    pub(crate) fn refresh_count(&self) -> u64 {
        self.inner.read().refreshes
    }

    /// Makes the rate limit and the age pass as if time had gone by, without waiting.
    #[cfg(test)]
    pub(crate) fn age_for_test(&self) {
        let mut s = self.inner.write();
        s.last_attempt = None;
        if let Some(t) = Instant::now().checked_sub(self.inner.max_age + Duration::from_secs(1)) {
            s.fetched_at = t;
        }
    }
}

impl Inner {
    // A poisoned lock only means a panic elsewhere while holding it; the map is still whole.
    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    fn may_refresh(&self, s: &State) -> bool {
        match s.last_attempt {
            None => true,
            Some(t) => t.elapsed() >= self.min_refresh_interval,
        }
    }

    fn is_stale(&self, s: &State) -> bool {
        matches!(self.fetcher, Fetcher::Https { .. }) && s.fetched_at.elapsed() >= self.max_age
    }

    /// Refreshes unless someone did since the caller looked (`seen`) or the rate limit forbids.
    async fn refresh_after(&self, seen: u64) {
        let allowed = self.may_refresh(&self.read());
        if !allowed {
            // Nothing in flight to wait for: answer at once, so a flood of unknown kids never
            // queues behind the lock.
            if self.refresh.try_lock().is_ok() {
                return;
            }
        }
        let _guard = self.refresh.lock().await;
        {
            let s = self.read();
            if s.refreshes != seen || !self.may_refresh(&s) {
                return;
            }
        }
        self.refresh_now().await;
    }

    async fn refresh_in_background(&self) {
        // One refresh at a time; a request that finds one running has nothing more to do.
        let Ok(_guard) = self.refresh.try_lock() else {
            return;
        };
        let due = {
            let s = self.read();
            self.is_stale(&s) && self.may_refresh(&s)
        };
        if due {
            self.refresh_now().await;
        }
    }

    /// Fetches and swaps in the new set; the caller holds `refresh`.
    async fn refresh_now(&self) {
        let result = self.fetcher.fetch().await;
        let outcome = {
            let mut s = self.write();
            s.refreshes += 1;
            s.last_attempt = Some(Instant::now());
            result.map(|keys| {
                let count = keys.len();
                s.keys = keys;
                s.fetched_at = Instant::now();
                count
            })
        };
        let source = self.fetcher.describe();
        match outcome {
            Ok(keys) => {
                tracing::info!(event = "jwks_refreshed", source = %source, keys)
            }
            Err(e) => tracing::warn!(
                event = "jwks_refresh_failed",
                source = %source,
                error = %e,
                kept_last_good_set = true
            ),
        }
    }
}

impl Fetcher {
    fn new(source: JwksSource) -> Result<Fetcher, String> {
        match source {
            JwksSource::File(path) => Ok(Fetcher::File(path)),
            JwksSource::Url { url, ca_file } => {
                // Keys decide who gets in: they never travel in clear text.
                if url.scheme() != "https" {
                    return Err(format!("JWKS URL {} must use https", describe_url(&url)));
                }
                if url.host().is_none() {
                    return Err("JWKS URL has no host".into());
                }
                if !url.username().is_empty() || url.password().is_some() {
                    return Err("JWKS URL must not carry credentials".into());
                }
                let tls = match ca_file {
                    Some(ca) => crate::tls::client_config(&ca, &[b"http/1.1"])
                        .map_err(|e| format!("JWKS CA file: {e}"))?,
                    None => native_roots_config()?,
                };
                Ok(Fetcher::Https { url, tls })
            }
        }
    }

    /// The source for logs and errors: a path, or a URL without query or fragment.
    fn describe(&self) -> String {
        match self {
            Fetcher::File(path) => path.display().to_string(),
            Fetcher::Https { url, .. } => describe_url(url),
        }
    }

    async fn fetch(&self) -> Result<KeyMap, String> {
        let bytes = match self {
            Fetcher::File(path) => read_file(path).await?,
            Fetcher::Https { url, tls } => {
                tokio::time::timeout(FETCH_TIMEOUT, fetch_https(url, Arc::clone(tls)))
                    .await
                    .map_err(|_| format!("no answer within {}s", FETCH_TIMEOUT.as_secs()))??
            }
        };
        parse_key_set(&bytes)
    }
}

fn describe_url(url: &Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    // Not for https URLs with credentials (refused), but keep them out of logs anyway.
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}

fn native_roots_config() -> Result<Arc<ClientConfig>, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(
            "no system root certificate could be loaded for the JWKS URL (set a CA file)".into(),
        );
    }
    let mut cfg =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("TLS configuration: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

async fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| format!("cannot open: {e}"))?;
    let mut bytes = Vec::new();
    // One byte more than allowed tells an oversize file from one exactly at the limit.
    file.take(MAX_JWKS_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() > MAX_JWKS_BYTES {
        return Err(format!("larger than {MAX_JWKS_BYTES} bytes"));
    }
    Ok(bytes)
}

/// Clears the background flag however the task ends, so a later refresh can be spawned.
struct BackgroundPending<'a>(&'a AtomicBool);

impl Drop for BackgroundPending<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Aborts the HTTP connection task when the fetch ends or times out, so no socket lingers.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn fetch_https(url: &Url, tls: Arc<ClientConfig>) -> Result<Vec<u8>, String> {
    let port = url.port_or_known_default().unwrap_or(443);
    let (tcp, server_name) = match url.host() {
        Some(url::Host::Domain(d)) => (
            tokio::net::TcpStream::connect((d, port)).await,
            ServerName::try_from(d.to_string()).map_err(|_| "invalid host name".to_string())?,
        ),
        Some(url::Host::Ipv4(ip)) => (
            tokio::net::TcpStream::connect(SocketAddr::new(IpAddr::V4(ip), port)).await,
            ServerName::from(IpAddr::V4(ip)),
        ),
        Some(url::Host::Ipv6(ip)) => (
            tokio::net::TcpStream::connect(SocketAddr::new(IpAddr::V6(ip), port)).await,
            ServerName::from(IpAddr::V6(ip)),
        ),
        None => return Err("no host".into()),
    };
    let tcp = tcp.map_err(|e| format!("cannot connect: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(server_name, tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
    let _driver = AbortOnDrop(tokio::spawn(async move {
        let _ = conn.await;
    }));

    let host = url.host_str().unwrap_or_default();
    let authority = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let target = &url[url::Position::BeforePath..url::Position::AfterQuery];
    let request = http::Request::get(target)
        .header(http::header::HOST, authority)
        .header(
            http::header::ACCEPT,
            "application/jwk-set+json, application/json",
        )
        .header(
            http::header::USER_AGENT,
            concat!("a2a-edge/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("request: {e}"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
    if response.status() != http::StatusCode::OK {
        return Err(format!("status {}", response.status().as_u16()));
    }
    let declared = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_JWKS_BYTES as u64) {
        return Err(format!("response larger than {MAX_JWKS_BYTES} bytes"));
    }
    let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                format!("response larger than {MAX_JWKS_BYTES} bytes")
            } else {
                format!("reading the response: {e}")
            }
        })?
        .to_bytes();
    Ok(body.to_vec())
}

fn valid_kid(kid: &str) -> bool {
    !kid.is_empty() && kid.chars().count() <= MAX_KID_CHARS && !kid.chars().any(char::is_control)
}

/// A JWK set document → the usable keys by kid. Entries this build cannot use (other key
/// types, curves or algorithms), without a kid, or carrying private key material are skipped;
/// a set with no usable key at all is an error.
fn parse_key_set(bytes: &[u8]) -> Result<KeyMap, String> {
    // serde_json messages may quote the input: report the position only.
    let doc: Value = serde_json::from_slice(bytes)
        .map_err(|e| format!("not JSON (line {}, column {})", e.line(), e.column()))?;
    let Some(entries) = doc.get("keys").and_then(Value::as_array) else {
        return Err(r#"not a JWK set (no "keys" array)"#.into());
    };
    let mut keys = KeyMap::new();
    let mut private = 0usize;
    for entry in entries {
        let Some(obj) = entry.as_object() else {
            continue;
        };
        // A published private key means anyone can sign: never trust it.
        if ["d", "p", "q", "dp", "dq", "qi"]
            .iter()
            .any(|k| obj.contains_key(*k))
        {
            private += 1;
            continue;
        }
        let Some(kid) = obj.get("kid").and_then(Value::as_str) else {
            continue;
        };
        if !valid_kid(kid) {
            continue;
        }
        let Ok(jwk) = serde_json::from_value::<Jwk>(entry.clone()) else {
            continue;
        };
        // The same kid twice (e.g. a `sig` and an `enc` key): a signing key wins, else the first.
        let replace = match keys.get(kid) {
            None => true,
            Some(old) => !for_signing(old) && for_signing(&jwk),
        };
        if replace {
            keys.insert(kid.to_string(), Arc::new(jwk));
        }
    }
    if private > 0 {
        tracing::warn!(event = "jwks_private_key_skipped", count = private);
    }
    if keys.is_empty() {
        return Err("no usable key in the JWK set".into());
    }
    Ok(keys)
}

fn for_signing(jwk: &Jwk) -> bool {
    matches!(
        jwk.common.public_key_use,
        None | Some(PublicKeyUse::Signature)
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;

    /// A temporary directory removed on drop.
    pub(crate) struct TempDir(pub PathBuf);

    impl TempDir {
        pub(crate) fn new(tag: &str) -> TempDir {
            let dir = std::env::temp_dir()
                .join(format!("a2a-edge-{tag}-{}", crate::crypto::random_token()));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A public P-256 JWK with this kid (the private half is thrown away).
    pub(crate) fn ec_jwk(kid: &str) -> Value {
        let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let raw = kp.public_key_raw();
        json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(&raw[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&raw[33..65]),
        })
    }

    fn set(keys: &[Value]) -> String {
        json!({ "keys": keys }).to_string()
    }

    const HOUR: Duration = Duration::from_secs(3600);

    /// A fresh directory with `jwks.json` holding these keys, and a cache loaded from that file
    /// (refresh interval and max age an hour).
    async fn file_cache(keys: &[Value]) -> (TempDir, PathBuf, JwksCache) {
        let dir = TempDir::new("jwks");
        let path = dir.0.join("jwks.json");
        std::fs::write(&path, set(keys)).unwrap();
        let cache = JwksCache::load(JwksSource::File(path.clone()), HOUR, HOUR)
            .await
            .unwrap();
        (dir, path, cache)
    }

    /// Loads a cache from a URL, trusting the CA in `ca_file` (else the system roots); an hour
    /// as above.
    async fn load_url(url: Url, ca_file: Option<PathBuf>) -> Result<JwksCache, String> {
        JwksCache::load(JwksSource::Url { url, ca_file }, HOUR, HOUR).await
    }

    #[tokio::test]
    async fn file_source_loads_and_refreshes_once_per_interval() {
        let (_dir, path, cache) = file_cache(&[ec_jwk("k1")]).await;
        assert!(cache.key("k1").await.is_some());
        assert_eq!(cache.refresh_count(), 0, "a known kid needs no re-read");

        // Rotation: the first unknown kid re-reads the file and finds the new key.
        std::fs::write(&path, set(&[ec_jwk("k1"), ec_jwk("k2")])).unwrap();
        assert!(cache.key("k2").await.is_some());
        assert_eq!(cache.refresh_count(), 1);

        // Another rotation within the interval: no second re-read.
        std::fs::write(&path, set(&[ec_jwk("k3")])).unwrap();
        assert!(cache.key("k3").await.is_none());
        assert!(cache.key("k4").await.is_none());
        assert_eq!(cache.refresh_count(), 1);
        assert!(
            cache.key("k2").await.is_some(),
            "the loaded set is unchanged"
        );

        // Once the interval has passed, the next unknown kid refreshes again.
        cache.age_for_test();
        assert!(cache.key("k3").await.is_some());
        assert_eq!(cache.refresh_count(), 2);
        assert!(
            cache.key("k1").await.is_none(),
            "k1 was removed from the set"
        );
        // A file source never refreshes by age.
        assert!(cache.key("k3").await.is_some());
        assert_eq!(cache.refresh_count(), 2);
    }

    #[tokio::test]
    async fn concurrent_unknown_kids_share_one_refresh() {
        let (_dir, path, cache) = file_cache(&[ec_jwk("k1")]).await;
        std::fs::write(&path, set(&[ec_jwk("k1"), ec_jwk("k2")])).unwrap();
        let tasks: Vec<_> = (0..32)
            .map(|i| {
                let cache = cache.clone();
                tokio::spawn(async move {
                    let kid = if i % 2 == 0 { "k2" } else { "nope" };
                    (kid, cache.key(kid).await.is_some())
                })
            })
            .collect();
        for t in tasks {
            let (kid, found) = t.await.unwrap();
            assert_eq!(found, kid == "k2", "{kid}");
        }
        assert_eq!(cache.refresh_count(), 1);
    }

    #[tokio::test]
    async fn failed_refresh_keeps_the_last_good_set() {
        let (_dir, path, cache) = file_cache(&[ec_jwk("k1")]).await;
        for broken in [
            "{not json".to_string(),
            set(&[]),
            r#"{"keys": "x"}"#.to_string(),
        ] {
            std::fs::write(&path, broken).unwrap();
            cache.age_for_test();
            assert!(cache.key("k2").await.is_none());
            assert!(cache.key("k1").await.is_some());
        }
        std::fs::remove_file(&path).unwrap();
        cache.age_for_test();
        assert!(cache.key("k2").await.is_none());
        assert!(cache.key("k1").await.is_some());
        assert_eq!(cache.refresh_count(), 4);
    }

    #[tokio::test]
    async fn load_refuses_unusable_sources() {
        let dir = TempDir::new("jwks");
        let path = dir.0.join("jwks.json");
        let load = |p: PathBuf| JwksCache::load(JwksSource::File(p), HOUR, HOUR);
        assert!(load(dir.0.join("missing.json")).await.is_err());
        for bad in [
            "[]".to_string(),
            "{}".to_string(),
            set(&[]),
            // Only keys this proxy can never use.
            set(&[json!({"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"})]), // no kid
            set(&[json!({"kty": "XYZ", "kid": "a"})]),
            set(&[{
                let mut k = ec_jwk("priv");
                k["d"] = json!("AAAA");
                k
            }]),
        ] {
            std::fs::write(&path, &bad).unwrap();
            assert!(load(path.clone()).await.is_err(), "{bad}");
        }
        let mut big = vec![b' '; MAX_JWKS_BYTES + 1];
        big[..set(&[ec_jwk("k")]).len()].copy_from_slice(set(&[ec_jwk("k")]).as_bytes());
        std::fs::write(&path, &big).unwrap();
        let err = load(path.clone()).await.unwrap_err();
        assert!(err.contains("larger than"), "{err}");

        let http = Url::parse("http://127.0.0.1:1/jwks.json").unwrap();
        let err = load_url(http, None).await.unwrap_err();
        assert!(err.contains("https"), "{err}");
    }

    #[test]
    fn parse_skips_what_it_cannot_use_and_never_echoes_input() {
        let doc = set(&[
            ec_jwk("good"),
            json!({"kty": "EC", "crv": "P-521", "kid": "p521", "x": "AA", "y": "AA", "alg": "ES512"}),
            json!({"kty": "RSA", "kid": "enc-only", "alg": "RSA-OAEP-256", "use": "enc", "n": "AQAB", "e": "AQAB"}),
            json!("not an object"),
            json!({"kty": "EC", "crv": "P-256", "kid": "", "x": "AA", "y": "AA"}),
        ]);
        let keys = parse_key_set(doc.as_bytes()).unwrap();
        let mut kids: Vec<_> = keys.keys().cloned().collect();
        kids.sort();
        assert_eq!(kids, ["enc-only", "good"]);

        // Duplicate kid: the signing key wins whatever the order.
        let mut enc = ec_jwk("dup");
        enc["use"] = json!("enc");
        let sig = ec_jwk("dup");
        for order in [[enc.clone(), sig.clone()], [sig.clone(), enc.clone()]] {
            let keys = parse_key_set(set(&order).as_bytes()).unwrap();
            assert!(for_signing(&keys["dup"]));
        }

        let err = parse_key_set(br#"{"keys": "SECRET-MATERIAL"}"#).unwrap_err();
        assert!(!err.contains("SECRET"), "{err}");
        let err = parse_key_set(b"{\"keys\": [SECRET").unwrap_err();
        assert!(!err.contains("SECRET"), "{err}");
    }

    /// A fresh directory with a dev CA, a local https server of these keys signed by it, and
    /// a cache loaded from that server trusting that CA.
    async fn https_cache(keys: &[Value]) -> (TempDir, JwksServer, JwksCache) {
        let dir = TempDir::new("jwks-https");
        let server = JwksServer::start(&dir.0, set(keys)).await;
        let cache = load_url(server.url.clone(), Some(dir.0.join("ca.pem")))
            .await
            .unwrap();
        (dir, server, cache)
    }

    /// A local https JWKS server: serves `body` at /jwks.json, counts requests, stops on drop.
    struct JwksServer {
        url: Url,
        body: Arc<Mutex<(u16, String)>>,
        hits: Arc<AtomicUsize>,
        task: tokio::task::JoinHandle<()>,
    }

    impl JwksServer {
        async fn start(dir: &Path, body: String) -> JwksServer {
            let certs = crate::tls::dev::ensure(dir).unwrap();
            let config = crate::tls::server_config(&certs.server_cert, &certs.server_key).unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let body = Arc::new(Mutex::new((200u16, body)));
            let hits = Arc::new(AtomicUsize::new(0));
            let (b, h) = (Arc::clone(&body), Arc::clone(&hits));
            let task = tokio::spawn(async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    let (acceptor, b, h) = (acceptor.clone(), Arc::clone(&b), Arc::clone(&h));
                    tokio::spawn(async move {
                        let Ok(tls) = acceptor.accept(tcp).await else {
                            return;
                        };
                        let svc = hyper::service::service_fn(
                            move |req: http::Request<hyper::body::Incoming>| {
                                let (b, h) = (Arc::clone(&b), Arc::clone(&h));
                                async move {
                                    h.fetch_add(1, Ordering::SeqCst);
                                    let (status, text) = b.lock().unwrap().clone();
                                    let status = if req.uri().path() == "/jwks.json" {
                                        status
                                    } else {
                                        404
                                    };
                                    http::Response::builder()
                                        .status(status)
                                        .header("content-type", "application/json")
                                        .body(http_body_util::Full::new(Bytes::from(text)))
                                }
                            },
                        );
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tls), svc)
                            .await;
                    });
                }
            });
            JwksServer {
                url: Url::parse(&format!("https://127.0.0.1:{port}/jwks.json")).unwrap(),
                body,
                hits,
                task,
            }
        }

        fn serve(&self, status: u16, body: String) {
            *self.body.lock().unwrap() = (status, body);
        }

        fn hits(&self) -> usize {
            self.hits.load(Ordering::SeqCst)
        }
    }

    impl JwksServer {
        /// Stops accepting and waits until the listening socket is closed.
        async fn stop(mut self) {
            self.task.abort();
            let _ = (&mut self.task).await;
        }
    }

    impl Drop for JwksServer {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    #[tokio::test]
    async fn https_source_rotates_and_keeps_the_last_good_set_when_down() {
        let (dir, server, cache) = https_cache(&[ec_jwk("k1")]).await;
        assert_eq!(server.hits(), 1);
        assert!(cache.key("k1").await.is_some());
        assert_eq!(server.hits(), 1);

        // Rotation: an unknown kid fetches once; a second one within the interval does not.
        server.serve(200, set(&[ec_jwk("k1"), ec_jwk("k2")]));
        assert!(cache.key("k2").await.is_some());
        assert_eq!(server.hits(), 2);
        server.serve(200, set(&[ec_jwk("k3")]));
        assert!(cache.key("k3").await.is_none());
        assert_eq!(server.hits(), 2);

        // Error answers keep the last good set.
        for (status, body) in [
            (500, set(&[ec_jwk("k3")])),
            (200, "not json".to_string()),
            (200, " ".repeat(MAX_JWKS_BYTES + 1)),
        ] {
            server.serve(status, body);
            cache.age_for_test();
            assert!(cache.key("k3").await.is_none());
            assert!(cache.key("k2").await.is_some());
        }

        // Server down: the refresh fails, the last good set stays.
        let url = server.url.clone();
        server.stop().await;
        cache.age_for_test();
        let before = cache.refresh_count();
        assert!(cache.key("k9").await.is_none());
        assert_eq!(cache.refresh_count(), before + 1);
        assert!(cache.key("k1").await.is_some());
        assert!(cache.key("k2").await.is_some());

        // A load against a down server fails: no start without keys.
        let err = load_url(url, Some(dir.0.join("ca.pem"))).await.unwrap_err();
        assert!(err.contains("connect"), "{err}");
    }

    /// A reload while the issuer is down keeps the running cache of the same source; any
    /// other change, or a file source, fails as a load does.
    #[tokio::test]
    async fn a_reload_while_the_issuer_is_down_keeps_the_same_sources_cache() {
        let (dir, server, cache) = https_cache(&[ec_jwk("k1")]).await;
        let ca = Some(dir.0.join("ca.pem"));
        let same = JwksSource::Url {
            url: server.url.clone(),
            ca_file: ca.clone(),
        };
        // Up: a reload fetches afresh (a new cache, the server asked again).
        let fresh = JwksCache::reload(same.clone(), HOUR, HOUR, Some(&cache))
            .await
            .unwrap();
        assert!(!Arc::ptr_eq(&fresh.inner, &cache.inner));
        assert_eq!(server.hits(), 2);
        let mut other_url = server.url.clone();
        other_url.set_path("/other.json");
        server.stop().await;
        let kept = JwksCache::reload(same.clone(), HOUR, HOUR, Some(&cache))
            .await
            .unwrap();
        assert!(Arc::ptr_eq(&kept.inner, &cache.inner), "the running cache");
        assert!(kept.key("k1").await.is_some());
        // (what differs, previous given)
        let other_ca = dir.0.join("other-ca.pem");
        std::fs::copy(dir.0.join("ca.pem"), &other_ca).unwrap();
        let refused = [
            ("no previous cache", same.clone(), HOUR, HOUR, false),
            (
                "another URL",
                JwksSource::Url {
                    url: other_url,
                    ca_file: ca.clone(),
                },
                HOUR,
                HOUR,
                true,
            ),
            (
                "another CA file",
                JwksSource::Url {
                    url: server_url(&same),
                    ca_file: Some(other_ca),
                },
                HOUR,
                HOUR,
                true,
            ),
            (
                "another refresh interval",
                same.clone(),
                HOUR * 2,
                HOUR,
                true,
            ),
            ("another max age", same.clone(), HOUR, HOUR * 2, true),
        ];
        for (what, source, min_refresh, max_age, with_previous) in refused {
            let previous = with_previous.then_some(&cache);
            let err = JwksCache::reload(source, min_refresh, max_age, previous)
                .await
                .expect_err(what);
            assert!(err.contains("connect"), "{what}: {err}");
        }
        // A file source that cannot be read fails the reload whatever ran before.
        let (_fdir, path, file) = file_cache(&[ec_jwk("k1")]).await;
        std::fs::remove_file(&path).unwrap();
        let err = JwksCache::reload(JwksSource::File(path), HOUR, HOUR, Some(&file))
            .await
            .expect_err("an unreadable file");
        assert!(err.contains("JWKS"), "{err}");
    }

    fn server_url(source: &JwksSource) -> Url {
        match source {
            JwksSource::Url { url, .. } => url.clone(),
            JwksSource::File(_) => unreachable!(),
        }
    }

    #[tokio::test]
    async fn https_source_refreshes_by_age_in_the_background() {
        let (_dir, server, cache) = https_cache(&[ec_jwk("k1")]).await;
        server.serve(200, set(&[ec_jwk("k1"), ec_jwk("k5")]));
        // Younger than max_age: no fetch.
        assert!(cache.key("k1").await.is_some());
        tokio::task::yield_now().await;
        assert_eq!(server.hits(), 1);
        // Older: the known key answers at once and the set is refreshed behind it.
        cache.age_for_test();
        assert!(cache.key("k1").await.is_some());
        let deadline = Instant::now() + Duration::from_secs(10);
        while cache.refresh_count() == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(cache.refresh_count(), 1);
        assert_eq!(server.hits(), 2);
        assert_eq!(cache.len(), 2);
    }

    #[tokio::test]
    async fn https_source_refuses_an_untrusted_server() {
        let dir = TempDir::new("jwks-https");
        let server = JwksServer::start(&dir.0, set(&[ec_jwk("k1")])).await;
        // Another CA than the one that signed the server certificate.
        let other = TempDir::new("jwks-other-ca");
        crate::tls::dev::ensure(&other.0).unwrap();
        let err = load_url(server.url.clone(), Some(other.0.join("ca.pem")))
            .await
            .unwrap_err();
        assert!(err.contains("TLS"), "{err}");
        assert_eq!(server.hits(), 0);
    }
}
