//! What an `[[upstreams]]` entry compiles to (built by `crate::policy`, read by the fleet):
//! where an agent is, how the edge reaches it and what it presents.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamTarget {
    /// The in-process task engine.
    Embedded,
    /// An agent's JSON-RPC endpoint over plain HTTP.
    Http(http::Uri),
}

#[derive(Clone)]
pub struct UpstreamPolicy {
    pub name: String,
    pub target: UpstreamTarget,
    /// The bearer token the proxy presents to this agent.
    pub token: Option<String>,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    /// For https agents: the CA to trust (None: the system roots) and the client certificate
    /// the proxy presents, if any.
    pub ca_file: Option<PathBuf>,
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Active health checks: `GET /health` with the agent's credential every interval.
    pub health_interval: Duration,
    /// Consecutive failures (checks or connection errors) that take the agent out.
    pub unhealthy_threshold: u32,
    /// Consecutive successful checks that bring it back.
    pub healthy_threshold: u32,
    /// HTTP/2 to the agent: requests and streams share connections.
    pub http2: bool,
    /// With `http2`: requests one connection carries at once; beyond, another opens.
    pub http2_max_streams: usize,
}

impl fmt::Debug for UpstreamPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamPolicy")
            .field("name", &self.name)
            .field("target", &self.target)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The most streams one connection to an agent may carry (`http2_max_streams`).
pub const MAX_HTTP2_STREAMS: usize = 1000;
