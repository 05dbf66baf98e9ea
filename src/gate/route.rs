//! Which route a request takes. Only the routes the edge serves exist; everything else is
//! 404, and a known path with the wrong method is 405 with `Allow`.

use http::Method;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Health,
    Card,
    Jwks,
    Rpc,
    /// A path of the agents that the policy exposes (`server.agent_paths`).
    AgentPath,
    NotFound,
    MethodNotAllowed(&'static str),
}

pub const HEALTH_PATH: &str = "/health";
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
pub const JWKS_PATH: &str = crate::card::JWKS_PATH;

/// `rpc_path` is the path of `server.public_url`; it is served with and without a trailing
/// slash (the A2A TCK appends one).
pub fn classify(method: &Method, path: &str, rpc_path: &str, agent_paths: &[String]) -> Route {
    let get_or_head = method == Method::GET || method == Method::HEAD;
    if path == HEALTH_PATH {
        return if get_or_head {
            Route::Health
        } else {
            Route::MethodNotAllowed("GET, HEAD")
        };
    }
    for (public, route) in [(CARD_PATH, Route::Card), (JWKS_PATH, Route::Jwks)] {
        if path == public {
            return if get_or_head {
                route
            } else {
                Route::MethodNotAllowed("GET, HEAD")
            };
        }
    }
    let bare = rpc_path.trim_end_matches('/');
    let is_rpc =
        path == rpc_path || path.trim_end_matches('/') == bare && path.len() <= bare.len() + 1;
    if is_rpc {
        return if method == Method::POST {
            Route::Rpc
        } else {
            Route::MethodNotAllowed("POST")
        };
    }
    if agent_paths.iter().any(|p| p == path) {
        return if method == Method::GET || method == Method::POST {
            Route::AgentPath
        } else {
            Route::MethodNotAllowed("GET, POST")
        };
    }
    Route::NotFound
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
