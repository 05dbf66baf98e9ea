//! Which route a request takes. Only the routes the edge serves exist; everything else is
//! 404, and a known path with the wrong method is 405 with `Allow`.

use http::Method;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Health,
    Card,
    Jwks,
    /// `/.well-known/agents.json`: the agents behind the edge.
    Catalog,
    Rpc,
    /// A path of the agents that the policy exposes (`server.agent_paths`).
    AgentPath,
    NotFound,
    MethodNotAllowed(&'static str),
}

pub const HEALTH_PATH: &str = "/health";
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
pub const JWKS_PATH: &str = crate::card::JWKS_PATH;
pub const CATALOG_PATH: &str = "/.well-known/agents.json";

/// `rpc_path` is the path of `server.public_url`; it is served with and without a trailing
/// slash (the A2A TCK appends one).
pub fn classify(method: &Method, path: &str, rpc_path: &str, agent_paths: &[String]) -> Route {
    if let Some(r) = classify_edge(method, path) {
        return r;
    }
    if path == CARD_PATH {
        return get_or_head_only(method, Route::Card);
    }
    let bare = rpc_path.trim_end_matches('/');
    let is_rpc =
        path == rpc_path || path.trim_end_matches('/') == bare && path.len() <= bare.len() + 1;
    if is_rpc {
        return post_only(method, Route::Rpc);
    }
    if agent_paths.iter().any(|p| p == path) {
        return agent_path(method);
    }
    Route::NotFound
}

/// The edge's own paths, on every host: `/health`, the JWKS, the catalog.
pub fn classify_edge(method: &Method, path: &str) -> Option<Route> {
    let route = match path {
        HEALTH_PATH => Route::Health,
        JWKS_PATH => Route::Jwks,
        CATALOG_PATH => Route::Catalog,
        _ => return None,
    };
    Some(get_or_head_only(method, route))
}

/// The route of a path under an agent's prefix ([`crate::policy::routes::AgentRoutes::route`]).
pub fn classify_agent(method: &Method, kind: crate::policy::routes::AgentPath) -> Route {
    use crate::policy::routes::AgentPath;
    match kind {
        AgentPath::Rpc => post_only(method, Route::Rpc),
        AgentPath::Card => get_or_head_only(method, Route::Card),
        AgentPath::Agent => agent_path(method),
    }
}

fn get_or_head_only(method: &Method, route: Route) -> Route {
    if method == Method::GET || method == Method::HEAD {
        route
    } else {
        Route::MethodNotAllowed("GET, HEAD")
    }
}

fn post_only(method: &Method, route: Route) -> Route {
    if method == Method::POST {
        route
    } else {
        Route::MethodNotAllowed("POST")
    }
}

fn agent_path(method: &Method) -> Route {
    if method == Method::GET || method == Method::POST {
        Route::AgentPath
    } else {
        Route::MethodNotAllowed("GET, POST")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_table() {
        let cases: &[(&str, &str, &str, Route)] = &[
            ("GET", "/health", "/", Route::Health),
            ("HEAD", "/health", "/", Route::Health),
            ("POST", "/health", "/", Route::MethodNotAllowed("GET, HEAD")),
            ("GET", "/.well-known/agent-card.json", "/", Route::Card),
            ("HEAD", "/.well-known/agent-card.json", "/", Route::Card),
            (
                "POST",
                "/.well-known/agent-card.json",
                "/",
                Route::MethodNotAllowed("GET, HEAD"),
            ),
            ("POST", "/", "/", Route::Rpc),
            ("GET", "/", "/", Route::MethodNotAllowed("POST")),
            ("OPTIONS", "/", "/", Route::MethodNotAllowed("POST")),
            ("POST", "//", "/", Route::NotFound),
            ("POST", "/a2a", "/a2a", Route::Rpc),
            ("POST", "/a2a/", "/a2a", Route::Rpc),
            ("POST", "/a2a//", "/a2a", Route::NotFound),
            ("POST", "/a2a", "/a2a/", Route::Rpc),
            ("POST", "/", "/a2a", Route::NotFound),
            ("GET", "/iac-code/readiness", "/", Route::NotFound),
            ("POST", "/message:send", "/", Route::NotFound),
            ("GET", "/tasks", "/", Route::NotFound),
            ("GET", "/health/", "/", Route::NotFound),
            ("GET", "/.well-known/agent.json", "/", Route::NotFound),
            ("GET", "/.well-known/jwks.json", "/", Route::Jwks),
            (
                "DELETE",
                "/.well-known/jwks.json",
                "/",
                Route::MethodNotAllowed("GET, HEAD"),
            ),
        ];
        for (m, path, rpc, want) in cases {
            let got = classify(&Method::from_bytes(m.as_bytes()).unwrap(), path, rpc, &[]);
            assert_eq!(got, *want, "{m} {path} (rpc {rpc})");
        }
    }
}
