//! The fleet: every agent with its health. Active checks (`GET /health` with the agent's
//! credential) and passive ejection (connection errors) take an agent out after
//! `unhealthy_threshold` consecutive failures and bring it back after `healthy_threshold`
//! successful checks. New contexts go to the healthy agent with the fewest requests in flight;
//! a context stays with its agent (the registry remembers which), and an agent that is down
//! yields a clear error for its contexts, never a silent move to an agent that does not know
//! them.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};

use super::settings::{UpstreamPolicy, UpstreamTarget};
use super::{Upstream, UpstreamError};
use crate::body::BoxBody;
use crate::state::registry::{TaskRegistry, UpstreamId};

/// One agent and what the edge knows of its health.
pub struct Agent {
    /// Stable across reloads (by name): what the task registry remembers.
    pub id: UpstreamId,
    pub upstream: Upstream,
    /// What the health of this agent was learned about (a reload keeps the health of an
    /// agent whose name and target did not change).
    target: UpstreamTarget,
    healthy: AtomicBool,
    failures: AtomicU32,
    successes: AtomicU32,
    in_flight: AtomicUsize,
    unhealthy_threshold: u32,
    healthy_threshold: u32,
}

impl Agent {
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Requests sent to this agent that have not been answered yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Sends a JSON-RPC body; a connection failure counts against the agent's health.
    pub async fn send_rpc(
        &self,
        headers: HeaderMap,
        body: Bytes,
        answer: super::Answer,
    ) -> Result<Response<BoxBody>, UpstreamError> {
        // Counted until the answer's head, or until the caller gives up (the future dropped).
        let _in_flight = InFlight::enter(&self.in_flight);
        let result = self.upstream.send_rpc(headers, body, answer).await;
        drop(_in_flight);
        match &result {
            Err(UpstreamError::Unavailable) => self.failed("connection"),
            Ok(_) => self.failures.store(0, Ordering::Relaxed),
            // A timeout here is as often a long turn as a dead agent: the active checks,
            // whose timeouts do count, decide.
            Err(_) => {}
        }
        result
    }

    fn failed(&self, how: &str) {
        self.successes.store(0, Ordering::Relaxed);
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= self.unhealthy_threshold && self.healthy.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                event = "upstream_unhealthy",
                upstream = self.upstream.name.as_str(),
                after = how
            );
        }
    }

    fn succeeded(&self) {
        self.failures.store(0, Ordering::Relaxed);
        let n = self.successes.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= self.healthy_threshold && !self.healthy.swap(true, Ordering::Relaxed) {
            tracing::info!(
                event = "upstream_healthy",
                upstream = self.upstream.name.as_str()
            );
        }
    }

    /// One active health check: a `200` within `within` (and the agent's response timeout)
    /// passes; anything else, no answer in time included, is a failure.
    pub async fn check(&self, within: Duration) {
        match self.upstream.get("/health", within).await {
            Ok(resp) if resp.status() == StatusCode::OK => self.succeeded(),
            Err(UpstreamError::Timeout) => self.failed("health_check_timeout"),
            _ => self.failed("health_check"),
        }
    }
}

/// One request in flight to an agent: counted while this lives.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(n: &'a AtomicUsize) -> InFlight<'a> {
        n.fetch_add(1, Ordering::Relaxed);
        InFlight(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

pub struct Fleet {
    agents: Vec<Arc<Agent>>,
    interval: Duration,
    /// Rotates the start of the search so that ties spread over the fleet.
    next: AtomicUsize,
}

impl Fleet {
    /// The agents of a policy. Ids come from `registry` (stable by name across reloads);
    /// an agent that `previous` (the fleet being replaced) had under the same name and
    /// target keeps its health, so a reload neither revives a dead agent nor ejects a live one.
    pub fn from_policy(
        upstreams: &[UpstreamPolicy],
        registry: &TaskRegistry,
        previous: Option<&Fleet>,
        local: Option<&Arc<dyn super::LocalAgent>>,
    ) -> Result<Fleet, String> {
        let mut agents = Vec::new();
        for u in upstreams {
            let id = registry.upstream_id(&u.name);
            let target = u.target.clone();
            let before = previous
                .and_then(|f| f.get(id))
                .filter(|a| a.target == target);
            let load =
                |f: fn(&Agent) -> &AtomicU32| before.map_or(0, |a| f(a).load(Ordering::Relaxed));
            agents.push(Arc::new(Agent {
                id,
                upstream: Upstream::from_policy(u, local)?,
                // Healthy until proven otherwise: the first check runs at start-up.
                healthy: AtomicBool::new(before.map_or(true, |a| a.is_healthy())),
                failures: AtomicU32::new(load(|a| &a.failures)),
                successes: AtomicU32::new(load(|a| &a.successes)),
                in_flight: AtomicUsize::new(0),
                unhealthy_threshold: u.unhealthy_threshold,
                healthy_threshold: u.healthy_threshold,
                target,
            }));
        }
        if agents.is_empty() {
            return Err("no upstream configured".into());
        }
        let interval = upstreams
            .iter()
            .map(|u| u.health_interval)
            .min()
            .unwrap_or(Duration::from_secs(5));
        Ok(Fleet {
            agents,
            interval,
            next: AtomicUsize::new(0),
        })
    }

    /// Every agent, in policy order.
    pub fn agents(&self) -> &[Arc<Agent>] {
        &self.agents
    }

    pub fn get(&self, id: UpstreamId) -> Option<&Arc<Agent>> {
        self.agents.iter().find(|a| a.id == id)
    }

    /// The agent for a new context: healthy, fewest requests in flight; ties go round-robin.
    pub fn pick(&self) -> Option<UpstreamId> {
        let n = self.agents.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        (0..n)
            .map(|k| &self.agents[(start + k) % n])
            .filter(|a| a.is_healthy())
            .min_by_key(|a| a.in_flight.load(Ordering::Relaxed))
            .map(|a| a.id)
    }

    /// How often the health checker runs.
    pub fn health_interval(&self) -> Duration {
        self.interval
    }

    /// Checks every agent once, concurrently, each within `within`.
    pub async fn check_all(&self, within: Duration) {
        let mut set = tokio::task::JoinSet::new();
        for a in &self.agents {
            let a = a.clone();
            set.spawn(async move { a.check(within).await });
        }
        while set.join_next().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str, port: u16) -> UpstreamPolicy {
        UpstreamPolicy {
            name: name.into(),
            target: UpstreamTarget::Http(format!("http://127.0.0.1:{port}/").parse().unwrap()),
            token: None,
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            ca_file: None,
            client_cert: None,
            health_interval: Duration::from_secs(60),
            unhealthy_threshold: 1,
            healthy_threshold: 2,
            http2: false,
            http2_max_streams: 100,
        }
    }

    #[test]
    fn ids_follow_names_and_health_carries_over_for_unchanged_agents() {
        let registry = TaskRegistry::new(10);
        let before =
            Fleet::from_policy(&[agent("a", 1), agent("b", 2)], &registry, None, None).unwrap();
        let (a, b) = (registry.upstream_id("a"), registry.upstream_id("b"));
        before.get(b).unwrap().failed("test");
        assert!(!before.get(b).unwrap().is_healthy());
        // Reordered, "a" moved to another port, "c" new.
        let after = Fleet::from_policy(
            &[agent("c", 3), agent("b", 2), agent("a", 9)],
            &registry,
            Some(&before),
            None,
        )
        .unwrap();
        assert_eq!(after.get(b).unwrap().upstream.name, "b");
        assert_eq!(after.get(a).unwrap().upstream.name, "a");
        let c = registry.upstream_id("c");
        assert!(c != a && c != b, "a new name gets a new id");
        assert!(
            !after.get(b).unwrap().is_healthy(),
            "b was down and is unchanged"
        );
        assert!(
            after.get(a).unwrap().is_healthy(),
            "a moved: healthy until checked"
        );
        assert!(after.get(c).unwrap().is_healthy());
        // One success of two needed does not bring b back; the count carried over does.
        after.get(b).unwrap().succeeded();
        assert!(!after.get(b).unwrap().is_healthy());
        let again = Fleet::from_policy(&[agent("b", 2)], &registry, Some(&after), None).unwrap();
        again.get(b).unwrap().succeeded();
        assert!(
            again.get(b).unwrap().is_healthy(),
            "the first success was kept"
        );
        // Only healthy agents are picked, by their stable id.
        assert_eq!(again.pick(), Some(b));
        assert!(
            again.get(a).is_none(),
            "a removed agent is gone, its id not reused"
        );
    }
}
