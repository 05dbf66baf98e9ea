//! One agent behind the edge: what differs from one agent to another (its public URL and card,
//! its fleet, its request rules and body cap, its scope of ownership and method rates). A
//! policy without `[[agents]]` has exactly one, unnamed, at `server.public_url`, served by every
//! upstream: today's edge.

use super::*;

/// One agent's part of the pipeline.
pub(super) struct AgentGate {
    /// `[[agents]]` name; `None`: the one agent of a policy without `[[agents]]`.
    pub(super) name: Option<Arc<str>>,
    /// The name as a metrics label (empty without `[[agents]]`).
    label: Arc<str>,
    /// Its JSON-RPC URL (the card's interface URL).
    pub(super) public_url: String,
    /// The path of that URL (with `[[agents]]`: its prefix, ending in `/`).
    pub(super) rpc_path: String,
    pub(super) card: CardService,
    pub(super) fleet: Fleet,
    pub(super) body_limits: BodyLimits,
    pub(super) requests: Arc<RequestPolicy>,
    /// One card refresh at a time, and the backoff after a failed one.
    pub(super) card_refresh: tokio::sync::Mutex<card_routes::CardBackoff>,
    /// The last refresh refused the card as not an A2A 1.0 AgentCard (`/ready`, metrics).
    pub(super) card_invalid: std::sync::atomic::AtomicBool,
    /// The agent's card the policy before a reload served (as fetched): published under
    /// this policy if this gate's first fetch fails, so that a reload while the agent is
    /// down or serves a bad card does not lose the last good one. Taken once.
    pub(super) card_before_reload: std::sync::Mutex<Option<Value>>,
}

/// What the agents share, to build each.
pub(super) struct Shared<'a> {
    pub policy: &'a Policy,
    pub schemes: &'a serde_json::Map<String, Value>,
    pub registry: &'a TaskRegistry,
    pub local: Option<&'a Arc<dyn upstream::LocalAgent>>,
    pub previous: Option<&'a Gate>,
    pub body: BodyLimits,
}

impl AgentGate {
    /// The one agent of a policy without `[[agents]]`.
    pub(super) fn single(s: &Shared<'_>, public_url: &url::Url) -> Result<AgentGate, String> {
        let p = s.policy;
        let previous = s.previous.and_then(|g| g.agents.first());
        AgentGate::build(
            s,
            None,
            public_url,
            p.card.clone(),
            &p.a2a,
            &p.upstreams,
            previous,
        )
    }

    /// An agent of `[[agents]]`; a port 0 in its URL becomes the listener's `bound_port`.
    pub(super) fn named(
        s: &Shared<'_>,
        a: &crate::policy::AgentPolicy,
        bound_port: u16,
    ) -> Result<AgentGate, String> {
        let mut url = a.public_url.clone();
        if url.port() == Some(0) {
            let _ = url.set_port(Some(bound_port));
        }
        let upstreams: Vec<_> = s
            .policy
            .upstreams
            .iter()
            .filter(|u| a.upstreams.contains(&u.name))
            .cloned()
            .collect();
        let previous = s
            .previous
            .and_then(|g| g.agents.iter().find(|p| p.name.as_deref() == Some(&a.name)));
        AgentGate::build(
            s,
            Some(Arc::from(a.name.as_str())),
            &url,
            a.card.clone(),
            &a.a2a,
            &upstreams,
            previous,
        )
    }

    fn build(
        s: &Shared<'_>,
        name: Option<Arc<str>>,
        url: &url::Url,
        card: crate::policy::CardPolicy,
        a2a: &crate::policy::A2aPolicy,
        upstreams: &[crate::policy::UpstreamPolicy],
        previous: Option<&AgentGate>,
    ) -> Result<AgentGate, String> {
        let fetched = matches!(card.source, CardSource::Upstream);
        Ok(AgentGate {
            public_url: url.to_string(),
            rpc_path: url.path().to_string(),
            card: CardService::new(
                card,
                EdgeFace {
                    public_url: url.to_string(),
                    security_schemes: s.schemes.clone(),
                    required_extensions: a2a.requests.required_extensions.clone(),
                    agent_urls: upstreams
                        .iter()
                        .filter_map(|u| match &u.target {
                            crate::policy::UpstreamTarget::Http(uri) => Some(uri.to_string()),
                            crate::policy::UpstreamTarget::Embedded => None,
                        })
                        .collect(),
                    cleaning: Some(card_cleaning(&a2a.requests)),
                },
            ),
            fleet: Fleet::from_policy(upstreams, s.registry, previous.map(|g| &g.fleet), s.local)?,
            body_limits: BodyLimits {
                cap: a2a.max_body_bytes,
                ..s.body
            },
            requests: a2a.requests.clone(),
            card_refresh: tokio::sync::Mutex::new(Default::default()),
            card_invalid: Default::default(),
            card_before_reload: std::sync::Mutex::new(
                previous.filter(|_| fetched).and_then(|p| p.card.source()),
            ),
            label: name.clone().unwrap_or_else(|| Arc::from("")),
            name,
        })
    }

    /// The name the registry knows the caller by at this agent: the principal itself for
    /// the one agent of a policy without `[[agents]]`, else scoped to the agent, so that one
    /// agent's tasks and contexts are never found at another (principal names never hold
    /// control characters; agent names never hold `/` or them).
    pub(super) fn owner(&self, principal: &str) -> String {
        match &self.name {
            None => principal.to_string(),
            Some(agent) => format!("{agent}\u{1f}{principal}"),
        }
    }

    /// The key of a per-method rate at this agent (`<agent>/<method>` with `[[agents]]`).
    pub(super) fn method_key(&self, method: Method) -> std::borrow::Cow<'static, str> {
        match &self.name {
            None => method.as_str().into(),
            Some(agent) => format!("{agent}/{}", method.as_str()).into(),
        }
    }

    /// The agent's name as a metrics label and log field (`""` without `[[agents]]`).
    pub(super) fn label(&self) -> &Arc<str> {
        &self.label
    }
}

/// A card cleaned as an agent's answers are (`a2a.metadata`, `a2a.redact_paths`), for the
/// card service to run once the agent's signature is verified.
fn card_cleaning(requests: &crate::validate::request::RequestPolicy) -> crate::card::Cleaning {
    let (metadata, redact_paths) = (requests.metadata.clone(), requests.redact_paths);
    crate::card::Cleaning(Arc::new(move |card: &mut Value| {
        let mut envelope = serde_json::json!({ "result": card.take() });
        crate::upstream::clean::clean_response(&mut envelope, &metadata, redact_paths);
        *card = envelope["result"].take();
    }))
}
