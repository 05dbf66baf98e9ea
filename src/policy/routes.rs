//! Which agent a request is for, when several agents sit behind one edge (`[[agents]]`, issue
//! 17): the request's authority (HTTP/2 `:authority` or HTTP/1.1 `Host`) must be an agent's
//! public host and port exactly, and its path one of that agent's exact paths under its
//! prefix. Nothing is normalized into a match: the edge serves exact paths only, so `..`,
//! `%2F`, `//`, `\` or a mixed-case prefix name no path of any agent and are 404.
//!
//! Hosts compare case-insensitively; one trailing dot (a fully qualified name) is the same
//! host, more than one is no host. A missing port is the scheme's (443 for https). Agents whose
//! prefixes nest on one host are refused when the table is built (a path must never be able to
//! belong to two agents).
//!
//! The gate asks this table first when the policy has `[[agents]]`; the edge's own paths
//! (`/health`, the JWKS, the catalog) are answered on every host before it.

use url::Url;

/// One agent's public place: host, port and path prefix (ending in `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPlace {
    pub name: String,
    host: String,
    port: u16,
    prefix: String,
}

/// What a path under an agent's prefix is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentPath {
    /// The JSON-RPC endpoint: the prefix, with or without its trailing slash.
    Rpc,
    /// `<prefix>.well-known/agent-card.json`.
    Card,
    /// `<prefix>` + one of `server.agent_paths` (without its leading `/`).
    Agent,
}

/// The routing table of the agents.
#[derive(Debug, Clone, Default)]
pub struct AgentRoutes {
    places: Vec<AgentPlace>,
    /// `server.agent_paths`, served under each prefix.
    agent_paths: Vec<String>,
}

const CARD_SUFFIX: &str = ".well-known/agent-card.json";

impl AgentRoutes {
    /// The table for `agents` (name, public URL). Refused: a URL that is not https, has no
    /// host, carries credentials, a query or a fragment, a path that does not end in `/` or is
    /// not already in its plain form; two agents with one name; two agents whose prefixes on
    /// one host and port are equal or nest.
    pub fn new<'a>(
        agents: impl IntoIterator<Item = (&'a str, &'a Url)>,
    ) -> Result<AgentRoutes, String> {
        let mut places: Vec<AgentPlace> = Vec::new();
        for (name, url) in agents {
            let what = |m: &str| format!("agents {name:?}: public_url {m}");
            if url.scheme() != "https" {
                return Err(what("must be https"));
            }
            if !url.username().is_empty() || url.password().is_some() {
                return Err(what("must not carry credentials"));
            }
            if url.query().is_some() || url.fragment().is_some() {
                return Err(what("must have no query or fragment"));
            }
            let host = match url.host().ok_or_else(|| what("needs a host"))? {
                url::Host::Domain(d) => d.trim_end_matches('.').to_ascii_lowercase(),
                url::Host::Ipv4(a) => a.to_string(),
                url::Host::Ipv6(a) => a.to_string(),
            };
            let port = url.port_or_known_default().unwrap_or(443);
            let prefix = url.path().to_string();
            if !prefix.ends_with('/') {
                return Err(what("path must end with '/'"));
            }
            if !plain_path(&prefix) {
                return Err(what(
                    "path must be plain: no '%', '\\', empty, '.' or '..' segments",
                ));
            }
            if places.iter().any(|p| p.name == name) {
                return Err(format!("agents {name:?}: the name is given twice"));
            }
            if let Some(other) = places.iter().find(|p| {
                p.host == host
                    && p.port == port
                    && (p.prefix.starts_with(&prefix) || prefix.starts_with(&p.prefix))
            }) {
                return Err(what(&format!(
                    "overlaps agent {:?} (prefixes on one host must not be equal or nest)",
                    other.name
                )));
            }
            places.push(AgentPlace {
                name: name.to_string(),
                host,
                port,
                prefix,
            });
        }
        Ok(AgentRoutes {
            places,
            agent_paths: Vec::new(),
        })
    }

    /// The table that also serves `paths` (`server.agent_paths`, each starting with `/`)
    /// under every agent's prefix.
    pub fn with_agent_paths(mut self, paths: &[String]) -> AgentRoutes {
        self.agent_paths = paths.to_vec();
        self
    }

    /// The agent and the path a request is for, or `None` (404). `authority` is the
    /// request's `:authority` or `Host` value; `path` its path, as received.
    pub fn route(&self, authority: &str, path: &str) -> Option<(&AgentPlace, AgentPath)> {
        self.route_index(authority, path)
            .map(|(i, kind)| (&self.places[i], kind))
    }

    /// [`AgentRoutes::route`] by the agent's index (the policy's order).
    pub fn route_index(&self, authority: &str, path: &str) -> Option<(usize, AgentPath)> {
        let (host, port) = parse_authority(authority)?;
        self.places
            .iter()
            .enumerate()
            .filter(|(_, p)| p.host == host && p.port == port)
            .find_map(|(i, p)| {
                let rest = path.strip_prefix(p.prefix.as_str());
                let bare = p.prefix.trim_end_matches('/');
                match rest {
                    Some("") => Some((i, AgentPath::Rpc)),
                    Some(CARD_SUFFIX) => Some((i, AgentPath::Card)),
                    Some(r)
                        if self
                            .agent_paths
                            .iter()
                            .any(|a| a.strip_prefix('/') == Some(r)) =>
                    {
                        Some((i, AgentPath::Agent))
                    }
                    None if path == bare && !bare.is_empty() => Some((i, AgentPath::Rpc)),
                    _ => None,
                }
            })
    }

    /// The part of `path` after the prefix of agent `i`, as a path (`/` + the rest).
    pub fn inner_path(&self, i: usize, path: &str) -> Option<String> {
        let p = self.places.get(i)?;
        path.strip_prefix(p.prefix.as_str())
            .map(|rest| format!("/{rest}"))
    }

    /// The agents, in the policy's order.
    pub fn places(&self) -> &[AgentPlace] {
        &self.places
    }
}

impl AgentPlace {
    /// Where this agent's card is served (a path).
    pub fn card_path(&self) -> String {
        format!("{}{CARD_SUFFIX}", self.prefix)
    }
}

/// A path with nothing to normalize: starts with `/`, no `%`, no `\`, no empty, `.` or `..`
/// segment (but for the trailing slash).
fn plain_path(path: &str) -> bool {
    let Some(inner) = path.strip_prefix('/') else {
        return false;
    };
    if path.contains(['%', '\\']) || path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return false;
    }
    let inner = inner.strip_suffix('/').unwrap_or(inner);
    inner.is_empty()
        || inner
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

/// `host[:port]` of a request: the host lowercased, one trailing dot dropped, an IPv6 literal
/// kept in its brackets' content; the port 443 when absent. `None` for anything else (empty
/// host, two trailing dots, userinfo, a port that is not a number, whitespace).
fn parse_authority(authority: &str) -> Option<(String, u16)> {
    if authority.is_empty()
        || authority.contains(['@', '/', '\\', '?', '#', '%'])
        || authority
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return None;
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        // One address, however it is spelled.
        (h.parse::<std::net::Ipv6Addr>().ok()?.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    let port = match port {
        None => 443,
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => {
            p.parse().ok()?
        }
        Some(_) => return None,
    };
    let mut host = host.to_ascii_lowercase();
    if host.ends_with('.') {
        host.pop();
    }
    if host.is_empty() || host.ends_with('.') || host.contains(':') && !authority.starts_with('[') {
        return None;
    }
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> AgentRoutes {
        let urls = [
            ("iac", "https://edge.example/agents/iac-code/"),
            ("ros", "https://edge.example/agents/ros/"),
            ("third", "https://other.example:8443/"),
            ("v6", "https://[::1]:9443/a/"),
        ];
        let parsed: Vec<(String, Url)> = urls
            .iter()
            .map(|(n, u)| (n.to_string(), Url::parse(u).unwrap()))
            .collect();
        AgentRoutes::new(parsed.iter().map(|(n, u)| (n.as_str(), u))).unwrap()
    }

    #[test]
    fn requests_reach_exactly_their_agent() {
        let t = table();
        type Case = (
            &'static str,
            &'static str,
            Option<(&'static str, AgentPath)>,
        );
        let cases: &[Case] = &[
            (
                "edge.example",
                "/agents/iac-code/",
                Some(("iac", AgentPath::Rpc)),
            ),
            (
                "edge.example",
                "/agents/iac-code",
                Some(("iac", AgentPath::Rpc)),
            ),
            (
                "edge.example:443",
                "/agents/ros/",
                Some(("ros", AgentPath::Rpc)),
            ),
            (
                "EDGE.Example",
                "/agents/ros/",
                Some(("ros", AgentPath::Rpc)),
            ),
            (
                "edge.example.",
                "/agents/ros/",
                Some(("ros", AgentPath::Rpc)),
            ),
            (
                "edge.example",
                "/agents/ros/.well-known/agent-card.json",
                Some(("ros", AgentPath::Card)),
            ),
            ("other.example:8443", "/", Some(("third", AgentPath::Rpc))),
            (
                "other.example:8443",
                "/.well-known/agent-card.json",
                Some(("third", AgentPath::Card)),
            ),
            ("[::1]:9443", "/a/", Some(("v6", AgentPath::Rpc))),
            ("[::1]:9443", "/a", Some(("v6", AgentPath::Rpc))),
            (
                "[0:0:0:0:0:0:0:1]:9443",
                "/a/",
                Some(("v6", AgentPath::Rpc)),
            ),
            ("[::1%25eth0]:9443", "/a/", None),
            ("[::2]:9443", "/a/", None),
            // Attack spellings: never another agent, never a normalized match.
            ("edge.example", "/agents/iac-code/../ros/", None),
            ("edge.example", "/agents/iac-code/%2E%2E/ros/", None),
            ("edge.example", "/agents/iac-code%2F..%2Fros/", None),
            ("edge.example", "/agents/iac-code/..%2Fros/", None),
            ("edge.example", "//agents/ros/", None),
            ("edge.example", "/agents//ros/", None),
            ("edge.example", "/agents/ros//", None),
            ("edge.example", "/Agents/ros/", None),
            ("edge.example", "/agents/ROS/", None),
            ("edge.example", "/agents/ros/./", None),
            ("edge.example", "/agents\\ros/", None),
            ("edge.example", "/agents/ros/x", None),
            ("edge.example", "/agents/rosx/", None),
            ("edge.example", "/agents/ro", None),
            ("edge.example", "/agents/", None),
            ("edge.example", "/", None),
            (
                "edge.example",
                "/agents/ros/.well-known/agent-card.json/",
                None,
            ),
            ("edge.example..", "/agents/ros/", None),
            ("edge.example:8443", "/agents/ros/", None),
            ("edge.example:", "/agents/ros/", None),
            (
                "edge.example:0443",
                "/agents/ros/",
                Some(("ros", AgentPath::Rpc)),
            ),
            ("edge.example:65536", "/agents/ros/", None),
            ("edge.example:+443", "/agents/ros/", None),
            ("user@edge.example", "/agents/ros/", None),
            ("edge.example%2e", "/agents/ros/", None),
            ("edge.example ", "/agents/ros/", None),
            ("other.example", "/", None),
            ("other.example:443", "/", None),
            ("[::1]", "/a/", None),
            ("::1:9443", "/a/", None),
            ("[::1]9443", "/a/", None),
            ("", "/agents/ros/", None),
            ("evil.example", "/agents/ros/", None),
            ("edge.example.evil", "/agents/ros/", None),
        ];
        for (authority, path, want) in cases {
            let got = t
                .route(authority, path)
                .map(|(p, what)| (p.name.as_str(), what));
            assert_eq!(got, *want, "{authority} {path}");
        }
    }

    #[test]
    fn tables_that_could_route_one_path_to_two_agents_are_refused() {
        let bad: &[(&[(&str, &str)], &str)] = &[
            (&[("a", "http://edge.example/a/")], "https"),
            (&[("a", "https://edge.example/a")], "end with '/'"),
            (&[("a", "https://edge.example/a/?x=1")], "query"),
            (&[("a", "https://u:p@edge.example/a/")], "credentials"),
            (&[("a", "https://edge.example/a%2Fb/")], "plain"),
            (&[("a", "https://edge.example/a//b/")], "plain"),
            (
                &[
                    ("a", "https://edge.example/x/"),
                    ("a", "https://edge.example/y/"),
                ],
                "twice",
            ),
            (
                &[
                    ("a", "https://edge.example/x/"),
                    ("b", "https://EDGE.example/x/"),
                ],
                "overlaps",
            ),
            (
                &[
                    ("a", "https://edge.example/x/"),
                    ("b", "https://edge.example/x/y/"),
                ],
                "overlaps",
            ),
            (
                &[
                    ("a", "https://edge.example/"),
                    ("b", "https://edge.example/x/"),
                ],
                "overlaps",
            ),
        ];
        for (agents, want) in bad {
            let parsed: Vec<(String, Url)> = agents
                .iter()
                .map(|(n, u)| (n.to_string(), Url::parse(u).unwrap()))
                .collect();
            let e = AgentRoutes::new(parsed.iter().map(|(n, u)| (n.as_str(), u))).unwrap_err();
            assert!(e.contains(want), "{agents:?}: {e}");
        }
        // The same prefix on another host or port is another place.
        let ok = [
            ("a", Url::parse("https://edge.example/x/").unwrap()),
            ("b", Url::parse("https://edge.example:8443/x/").unwrap()),
            ("c", Url::parse("https://other.example/x/").unwrap()),
        ];
        let t = AgentRoutes::new(ok.iter().map(|(n, u)| (*n, u))).unwrap();
        assert_eq!(t.places().len(), 3);
        assert_eq!(t.places()[0].card_path(), "/x/.well-known/agent-card.json");
    }
}
