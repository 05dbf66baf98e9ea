//! `[[agents]]`: several agents behind one edge. Each has a name, a public URL (host and path
//! prefix under the edge's listener), the upstreams that serve it (each upstream serves exactly
//! one agent), and optionally sections of its own (`card`, `a2a`, `workspace`,
//! `limits.methods`) that replace the global ones for it, whole: what an agent's section does
//! not say takes the defaults, not the global section's values. An agent without a `card`
//! section is published with the global `[card]` settings and keys, its card fetched from its
//! own upstreams.

use std::collections::BTreeMap;

use super::file;
use super::routes::AgentRoutes;
use super::{A2aPolicy, CardPolicy, Ctx, PolicyError, UpstreamPolicy};
use crate::limits::rate::Rate;

/// One agent behind the edge.
#[derive(Debug, Clone)]
pub struct AgentPolicy {
    /// `[A-Za-z0-9._-]`, 1-64 characters: a metrics label, a log field, a scope of ownership.
    pub name: String,
    /// Its JSON-RPC endpoint; its card at `<public_url>.well-known/agent-card.json`. A port 0
    /// is replaced by the listener's port at start-up, like `server.public_url`'s.
    pub public_url: url::Url,
    /// The `[[upstreams]]` names that serve it.
    pub upstreams: Vec<String>,
    pub card: CardPolicy,
    pub a2a: A2aPolicy,
    /// Its per-method rates (its own `limits.methods`, else the global ones).
    pub method_rates: BTreeMap<String, Rate>,
}

/// What an agent section falls back to: the global sections as written.
pub(super) struct Globals<'a> {
    pub a2a: &'a file::A2aSection,
    pub workspace: &'a file::WorkspaceSection,
    pub card: &'a CardPolicy,
    pub method_rates: &'a BTreeMap<String, Rate>,
}

/// The path of a URL as written: after the authority, before any query or fragment.
fn raw_path(url: &str) -> Option<&str> {
    let rest = &url[url.find("://")? + 3..];
    let path = &rest[rest.find('/')?..];
    Some(path.split(['?', '#']).next().unwrap_or(path))
}

/// Whether a name may name an agent.
fn valid_name(n: &str) -> bool {
    (1..=64).contains(&n.len())
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Ctx<'_> {
    pub(super) fn agents(
        &self,
        sections: Vec<file::AgentSection>,
        upstreams: &[UpstreamPolicy],
        globals: Globals<'_>,
        mode: super::LoadMode,
    ) -> Result<Vec<AgentPolicy>, PolicyError> {
        let mut agents: Vec<AgentPolicy> = Vec::new();
        for (i, a) in sections.into_iter().enumerate() {
            let key = |k: &str| format!("agents[{i}].{k}");
            let name = a.name.get_ref().clone();
            if !valid_name(&name) {
                return self.spanned_err(
                    &key("name"),
                    &a.name,
                    "must be 1-64 characters of letters, digits, '.', '_' or '-'",
                );
            }
            if agents.iter().any(|o| o.name == name) {
                return self.spanned_err(
                    &key("name"),
                    &a.name,
                    format!("agent {name:?} is given twice"),
                );
            }
            let raw = a.public_url.get_ref();
            let public_url = url::Url::parse(raw)
                .map_err(|e| format!("is not a URL: {e}"))
                .and_then(|u| {
                    // The parser would resolve `..` and `.`: the path must be written plain.
                    if raw_path(raw) != Some(u.path()) {
                        return Err(
                            "path must be plain: no '%', '\\', empty, '.' or '..' segments"
                                .to_string(),
                        );
                    }
                    Ok(u)
                })
                .and_then(|u| {
                    AgentRoutes::new([(name.as_str(), &u)])
                        .map(|_| u)
                        .map_err(|m| m.replace(&format!("agents {name:?}: public_url "), ""))
                })
                .or_else(|m| self.spanned_err(&key("public_url"), &a.public_url, m))?;
            let names = a.upstreams.get_ref();
            if names.is_empty() {
                return self.spanned_err(
                    &key("upstreams"),
                    &a.upstreams,
                    "names no upstream: an agent needs at least one",
                );
            }
            for (j, n) in names.iter().enumerate() {
                if !upstreams.iter().any(|u| &u.name == n) {
                    return self.spanned_err(
                        &format!("agents[{i}].upstreams[{j}]"),
                        &a.upstreams,
                        format!("names no [[upstreams]] entry ({n:?})"),
                    );
                }
                if names[..j].contains(n) {
                    return self.spanned_err(
                        &format!("agents[{i}].upstreams[{j}]"),
                        &a.upstreams,
                        format!("{n:?} is listed twice"),
                    );
                }
                if let Some(other) = agents.iter().find(|o| o.upstreams.contains(n)) {
                    return self.spanned_err(
                        &format!("agents[{i}].upstreams[{j}]"),
                        &a.upstreams,
                        format!(
                            "{n:?} already serves agent {:?}: an upstream serves one agent",
                            other.name
                        ),
                    );
                }
            }
            let prefixed = |mut e: PolicyError| {
                e.key = format!("agents[{i}].{}", e.key);
                e
            };
            let own: Vec<&str> = names.iter().map(String::as_str).collect();
            let card = match a.card {
                Some(c) => self.card(c, mode, &own).map_err(prefixed)?,
                None => globals.card.clone(),
            };
            let a2a = self
                .a2a_policy(
                    a.a2a.unwrap_or_else(|| globals.a2a.clone()),
                    a.workspace.unwrap_or_else(|| globals.workspace.clone()),
                )
                .map_err(prefixed)?;
            let method_rates = match a.limits {
                Some(l) => {
                    self.limits(
                        file::LimitsSection {
                            methods: l.methods,
                            ..Default::default()
                        },
                        None,
                    )
                    .map_err(prefixed)?
                    .rates
                    .per_method
                }
                None => globals.method_rates.clone(),
            };
            agents.push(AgentPolicy {
                name,
                public_url,
                upstreams: names.clone(),
                card,
                a2a,
                method_rates,
            });
        }
        if agents.is_empty() {
            return Ok(agents);
        }
        if let Some(u) = upstreams
            .iter()
            .find(|u| !agents.iter().any(|a| a.upstreams.contains(&u.name)))
        {
            return self.err(
                "agents",
                None,
                format!(
                    "upstream {:?} serves no agent: name it in an agent's upstreams, or remove it",
                    u.name
                ),
            );
        }
        AgentRoutes::new(agents.iter().map(|a| (a.name.as_str(), &a.public_url)))
            .or_else(|m| self.err("agents", None, m))?;
        // One kid, one key: the root JWKS publishes every agent's keys together.
        let mut kids: BTreeMap<&str, Option<serde_json::Value>> = BTreeMap::new();
        for a in &agents {
            for k in &a.card.signing_keys {
                let public = k.public_jwk();
                if let Some(seen) = kids.get(k.kid.as_str()) {
                    if *seen != public {
                        return self.err(
                            &format!("agents ({})", a.name),
                            None,
                            format!(
                                "card signing key kid {:?} names two different keys: kids must be unique across agents",
                                k.kid
                            ),
                        );
                    }
                }
                kids.insert(&k.kid, public);
            }
        }
        Ok(agents)
    }
}
