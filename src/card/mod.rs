//! The Agent Card the edge publishes: the agent's card rewritten so that it points at the
//! edge (`server.public_url` only, never `Host` or `X-Forwarded-*`), advertises the edge's
//! security schemes, and carries no upstream signature that the rewrite has invalidated.
//!
//! A card is ProtoJSON: its readers (the SDKs, the canonical form signatures cover) take a
//! member by its JSON name (`documentationUrl`) or by its proto name (`documentation_url`).
//! So an agent's card is first put in JSON names ([`to_json_names`], by the canonical form's
//! table of the `AgentCard` message tree), and only then rewritten, checked and signed: each
//! rule reads one spelling, and none is passed by the other. A card naming one member both
//! ways is refused (`card.invalid`), as requests are (`validate/names.rs`).

pub mod canonical;
pub mod cli;
pub mod http;
pub mod jws;
pub mod keys;
pub mod schema;
pub mod service;
pub mod settings;
pub mod verify;

use serde_json::{json, Map, Value};

use crate::reason::{self, Reason};

/// What the edge puts into every card it serves.
#[derive(Debug, Clone)]
pub struct EdgeFace {
    /// The JSON-RPC URL callers use (`server.public_url`).
    pub public_url: String,
    /// `securitySchemes` of the card (ProtoJSON SecurityScheme objects by name).
    pub security_schemes: Map<String, Value>,
    /// Extension URIs every request must name; declared with `required: true`.
    pub required_extensions: Vec<String>,
    /// The agents' own URLs (the policy's `[[upstreams]]`): links to their origins are not
    /// published ([`rewrite`]).
    pub agent_urls: Vec<String>,
    /// How a card is cleaned once its signature is verified, as agents' answers are
    /// (`a2a.metadata`, `a2a.redact_paths`: the gate's cleaning); `None`: not cleaned.
    pub cleaning: Option<Cleaning>,
}

/// Cleans a card (in JSON names) in place: given by the gate, which knows the policy.
#[derive(Clone)]
pub struct Cleaning(pub std::sync::Arc<dyn Fn(&mut Value) + Send + Sync>);

impl std::fmt::Debug for Cleaning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cleaning")
    }
}

pub use canonical::CardError;

/// Where the edge publishes the public keys of its card signatures.
pub const JWKS_PATH: &str = "/.well-known/jwks.json";

/// The A2A 0.3 members of a card that [`rewrite`] replaces or removes and whose proto name
/// differs from their JSON name (a2a.proto v0.3 `AgentCard`; 0.3 agents still serve them next
/// to the 1.0 ones, and the a2a-sdk 0.3 models read both names). The 1.0 members are in the
/// canonical form's table; these are not, since no 1.0 signature covers them.
const LEGACY_NAMES: [(&str, &str); 2] = [
    ("additional_interfaces", "additionalInterfaces"),
    ("preferred_transport", "preferredTransport"),
];

/// The A2A 0.3 members [`rewrite`] keeps, set to the edge's values (0.3 clients read them; no
/// 1.0 signature covers them, and they say nothing of the agent).
const LEGACY_KEPT: [&str; 2] = ["url", "preferredTransport"];

/// Puts an agent's card in ProtoJSON JSON names, at every level the `AgentCard` schema knows
/// ([`canonical::to_json_names`]) and for the legacy members the rewrite touches; refused
/// when a member is given by both names. Done before anything reads the card.
pub fn to_json_names(card: &mut Value) -> Result<(), CardError> {
    canonical::to_json_names(card)?;
    if let Value::Object(obj) = card {
        canonical::rename_members(obj, LEGACY_NAMES.iter().copied(), "card")?;
    }
    Ok(())
}

/// Where each member of a card (in JSON names, [`to_json_names`]) the edge would not serve is:
/// those outside the `AgentCard` schema, but for the legacy members it sets and `signatures`
/// (which no signature covers, and which the edge replaces with its own).
pub fn unserved_members(card: &Value) -> Vec<String> {
    match card {
        Value::Object(o) => {
            let mut kept = LEGACY_KEPT.to_vec();
            kept.push("signatures");
            canonical::unknown_members(o, &kept)
        }
        _ => Vec::new(),
    }
}

/// Rewrites an agent's card for the edge; refused when it is no object or lacks a name or a
/// version. The card's members are in their JSON names ([`to_json_names`]): a member
/// spelled otherwise is not looked at.
pub fn rewrite(card: Value, face: &EdgeFace) -> Result<Value, Reason> {
    let Value::Object(mut card) = card else {
        return Err(reason::CARD_NOT_OBJECT);
    };
    for required in ["name", "version"] {
        if !card.get(required).is_some_and(Value::is_string) {
            return Err(reason::CARD_MISSING_FIELD);
        }
    }
    drop_internal_links(&mut card, face);
    // Only what the card's schema knows is served (and signed): the legacy members the
    // rewrite sets besides. (So an upstream signature, which no longer covers the rewritten
    // card, 0.3's `additionalInterfaces` and `security`, go too.)
    canonical::drop_unknown(&mut card, &LEGACY_KEPT);
    // Only the JSON-RPC binding of A2A 1.x is served by the edge; other interfaces (REST,
    // gRPC, 0.3) would bypass it or fail, so they are not advertised.
    let mut iface = json!({
        "url": face.public_url,
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    });
    if let Some(Value::Array(list)) = card.get("supportedInterfaces") {
        let upstream_json_rpc = list.iter().find(|i| {
            i.get("protocolBinding").and_then(Value::as_str) == Some("JSONRPC")
                && i.get("protocolVersion")
                    .and_then(Value::as_str)
                    .is_some_and(|v| v == "1" || v.starts_with("1."))
        });
        if let Some(Value::String(v)) = upstream_json_rpc.and_then(|i| i.get("protocolVersion")) {
            iface["protocolVersion"] = Value::String(v.clone());
        }
    }
    card.insert("supportedInterfaces".into(), Value::Array(vec![iface]));
    // Legacy (0.3) fields some agents still serve next to the 1.0 ones.
    if card.contains_key("url") {
        card.insert("url".into(), Value::String(face.public_url.clone()));
    }
    if card.contains_key("preferredTransport") {
        card.insert("preferredTransport".into(), Value::from("JSONRPC"));
    }
    require_extensions(&mut card, &face.required_extensions);
    // Callers authenticate to the edge, not to the agent: a skill's own requirements name
    // the agent's schemes (not served) and go; the edge's apply to every skill.
    if let Some(Value::Array(skills)) = card.get_mut("skills") {
        for skill in skills.iter_mut().filter_map(Value::as_object_mut) {
            skill.remove("securityRequirements");
        }
    }
    let names: Vec<String> = face.security_schemes.keys().cloned().collect();
    if names.is_empty() {
        card.remove("securitySchemes");
        card.remove("securityRequirements");
    } else {
        card.insert(
            "securitySchemes".into(),
            Value::Object(face.security_schemes.clone()),
        );
        let reqs: Vec<Value> = names
            .iter()
            .map(|n| json!({"schemes": {n.clone(): {"list": []}}}))
            .collect();
        card.insert("securityRequirements".into(), Value::Array(reqs));
    }
    Ok(Value::Object(card))
}

/// The links of a card besides its interfaces: a provider's site, documentation, an icon.
const LINKS: [&str; 3] = ["provider", "documentationUrl", "iconUrl"];

/// Drops the links that point at the agent itself: an agent behind the edge names its own,
/// internal address in its interfaces (rewritten to the edge's) and often elsewhere too (the
/// embedded engine's card, run standalone, gave `provider.url` its listen address). A link
/// whose origin (scheme, host, port, as the URL standard reads them: `0x7f.1`, `HTTP://`,
/// `:80` are spellings of one origin) is one the agent serves from (its interfaces, its
/// legacy `url` fields, the policy's upstream URLs) is removed, unless it is also the
/// edge's own; `provider` goes whole (its `url` is required).
fn drop_internal_links(card: &mut Map<String, Value>, face: &EdgeFace) {
    let origin = |s: &str| url::Url::parse(s).ok().map(|u| u.origin());
    let edge = origin(&face.public_url);
    let mut internal: Vec<url::Origin> = Vec::new();
    let mut add = |s: Option<&str>| {
        if let Some(o) = s.and_then(origin) {
            if o.is_tuple() && Some(&o) != edge.as_ref() && !internal.contains(&o) {
                internal.push(o);
            }
        }
    };
    for list in ["supportedInterfaces", "additionalInterfaces"] {
        if let Some(Value::Array(items)) = card.get(list) {
            items
                .iter()
                .take(64)
                .for_each(|i| add(i.get("url").and_then(Value::as_str)));
        }
    }
    add(card.get("url").and_then(Value::as_str));
    face.agent_urls.iter().for_each(|u| add(Some(u)));
    for field in LINKS {
        let link = match card.get(field) {
            Some(Value::Object(p)) => p.get("url").and_then(Value::as_str),
            Some(v) => v.as_str(),
            None => None,
        };
        if link.and_then(origin).is_some_and(|o| internal.contains(&o)) {
            card.remove(field);
            tracing::info!(
                event = "card_repaired",
                dropped = field,
                why = "names the agent's own address"
            );
        }
    }
}

/// Declares the policy's required extensions in `capabilities.extensions` with
/// `required: true` (adding them when the agent does not list them).
fn require_extensions(card: &mut Map<String, Value>, required: &[String]) {
    if required.is_empty() {
        return;
    }
    let caps = card
        .entry("capabilities")
        .or_insert_with(|| Value::Object(Map::new()));
    if !caps.is_object() {
        *caps = Value::Object(Map::new());
    }
    let Some(caps) = caps.as_object_mut() else {
        return;
    };
    let list = caps
        .entry("extensions")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    let Some(list) = list.as_array_mut() else {
        return;
    };
    for uri in required {
        match list
            .iter_mut()
            .find(|e| e.get("uri").and_then(Value::as_str) == Some(uri.as_str()))
        {
            Some(Value::Object(e)) => {
                e.insert("required".into(), Value::Bool(true));
            }
            _ => list.push(json!({"uri": uri, "required": true})),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face() -> EdgeFace {
        let mut schemes = Map::new();
        schemes.insert(
            "bearerAuth".into(),
            json!({"httpAuthSecurityScheme": {"scheme": "Bearer"}}),
        );
        EdgeFace {
            public_url: "https://edge.example/".into(),
            security_schemes: schemes,
            required_extensions: vec!["urn:x:req".into()],
            agent_urls: vec!["http://10.1.2.3:9000/".into()],
            cleaning: None,
        }
    }

    /// What `CardService::prepare` does to an agent's card before the schema check: JSON
    /// names first, then the rewrite.
    fn rewritten(mut card: Value) -> Value {
        to_json_names(&mut card).unwrap();
        rewrite(card, &face()).unwrap()
    }

    /// A proto field name's JSON name (`documentation_url` → `documentationUrl`).
    fn camel(proto: &str) -> String {
        let mut parts = proto.split('_');
        let first = parts.next().unwrap_or_default().to_string();
        parts.fold(first, |mut out, p| {
            let mut chars = p.chars();
            out.extend(chars.next().map(|c| c.to_ascii_uppercase()));
            out.extend(chars);
            out
        })
    }

    /// What the card's schema does not know is not served, at any level (it is outside what
    /// the signature covers, and may hold an internal address); extension `params` (a
    /// free-form `Struct`, signed) and the legacy `url` (set to the edge's) stay.
    #[test]
    fn members_the_schema_does_not_know_are_not_served() {
        let card = json!({"name": "n", "version": "1", "url": "http://10.0.0.5:8000/",
            "adminEndpoint": "http://10.0.0.5:8000/admin", "protocolVersion": "0.3.0",
            "capabilities": {"streaming": true, "x-debug": "http://10.0.0.5:9/",
                "extensions": [{"uri": "urn:x:e", "params": {"any": {"inside": 1}}, "extra": 1}]},
            "skills": [{"id": "s", "name": "s", "description": "d", "tags": [],
                "endpoint": "http://10.0.0.5:9000/"}],
            "provider": {"organization": "o", "url": "https://example.com/", "internal": "x"}});
        let out = rewritten(card);
        let text = out.to_string();
        assert!(!text.contains("10.0.0.5"), "{text}");
        assert!(out.get("protocolVersion").is_none(), "{text}");
        for gone in ["adminEndpoint", "x-debug", "endpoint", "internal", "extra"] {
            assert!(!text.contains(&format!("\"{gone}\"")), "{gone}: {text}");
        }
        assert_eq!(out["url"], "https://edge.example/");
        assert_eq!(out["capabilities"]["streaming"], true);
        assert_eq!(
            out["capabilities"]["extensions"][0]["params"],
            json!({"any": {"inside": 1}})
        );
        assert_eq!(out["provider"]["organization"], "o");
        assert_eq!(out["skills"][0]["id"], "s");
    }

    /// A skill's own security requirements name the agent's schemes, which the edge does not
    /// serve: they go, by either name (0.3's `security` too), and the edge's requirements
    /// apply to every skill.
    #[test]
    fn a_skills_own_security_requirements_are_dropped() {
        let agent_req = json!([{"schemes": {"agent_key": {"list": ["admin"]}}}]);
        for member in ["securityRequirements", "security_requirements", "security"] {
            let card = json!({"name": "n", "version": "1", "skills": [
                {"id": "s", "name": "s", "description": "d", "tags": [], member: agent_req},
                {"id": "t", "name": "t", "description": "d", "tags": []}
            ]});
            let out = rewritten(card);
            for skill in out["skills"].as_array().unwrap() {
                for gone in ["securityRequirements", "security_requirements", "security"] {
                    assert!(skill.get(gone).is_none(), "{member}: {skill}");
                }
            }
            assert_eq!(out["skills"][0]["id"], "s", "{member}: the skill stays");
            assert_eq!(
                out["securityRequirements"],
                json!([{"schemes": {"bearerAuth": {"list": []}}}]),
                "{member}"
            );
        }
    }

    /// Links to the agent's own origin are not published, by either name; others are,
    /// untouched, by their JSON name. The agent's interfaces name its origins by either name
    /// too.
    #[test]
    fn links_to_the_agents_own_address_are_dropped() {
        let iface = "http://127.0.0.1:18080/";
        // (field, value, kept)
        let rows: &[(&str, Value, bool)] = &[
            (
                "provider",
                json!({"url": iface, "organization": "o"}),
                false,
            ),
            (
                "provider",
                json!({"url": "http://127.0.0.1:18080/about/x", "organization": "o"}),
                false,
            ),
            (
                "provider",
                json!({"url": "HTTP://127.0.0.1:18080", "organization": "o"}),
                false,
            ),
            (
                "provider",
                json!({"url": "http://0x7f.0.0.1:18080/", "organization": "o"}),
                false,
            ),
            (
                "provider",
                json!({"url": "http://2130706433:18080/", "organization": "o"}),
                false,
            ),
            (
                "provider",
                json!({"url": "http://10.1.2.3:9000/doc", "organization": "o"}),
                false,
            ),
            (
                "provider",
                json!({"url": "http://legacy.internal:81/", "organization": "o"}),
                false,
            ),
            (
                "provider",
                json!({"url": "http://old.internal/", "organization": "o"}),
                false,
            ),
            (
                "provider",
                json!({"url": "http://127.0.0.1:18081/", "organization": "o"}),
                true,
            ),
            (
                "provider",
                json!({"url": "https://127.0.0.1:18080/", "organization": "o"}),
                true,
            ),
            (
                "provider",
                json!({"url": "https://example.com/", "organization": "o"}),
                true,
            ),
            (
                "provider",
                json!({"url": "https://edge.example/", "organization": "o"}),
                true,
            ),
            (
                "provider",
                json!({"url": "not a url", "organization": "o"}),
                true,
            ),
            ("provider", json!({"organization": "o"}), true),
            (
                "documentationUrl",
                json!("http://127.0.0.1:18080/docs"),
                false,
            ),
            ("documentationUrl", json!("https://docs.example/"), true),
            ("iconUrl", json!("http://127.0.0.1:18080/icon.png"), false),
            ("iconUrl", json!("data:image/png;base64,AAAA"), true),
            ("iconUrl", json!("https://cdn.example/icon.png"), true),
            // The proto names ProtoJSON readers take as well (security review: they were
            // published, and signed as documentationUrl and iconUrl).
            (
                "documentation_url",
                json!("http://127.0.0.1:18080/docs"),
                false,
            ),
            ("documentation_url", json!("http://10.1.2.3:9000/"), false),
            ("documentation_url", json!("HTTP://old.internal/d"), false),
            ("documentation_url", json!("https://docs.example/"), true),
            ("icon_url", json!("http://127.0.0.1:18080/icon.png"), false),
            ("icon_url", json!("http://0x7f.1:18080/icon.png"), false),
            ("icon_url", json!("http://legacy.internal:81/i.png"), false),
            ("icon_url", json!("https://cdn.example/icon.png"), true),
        ];
        // The agent's card names its interfaces by their JSON names, or by their proto names.
        let bases = [
            json!({
                "name": "n", "version": "1",
                "supportedInterfaces": [
                    {"url": iface, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                    {"url": "https://edge.example/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
                ],
                "url": "http://legacy.internal:81/",
                "additionalInterfaces": [{"url": "http://old.internal:80", "transport": "HTTP+JSON"}],
            }),
            json!({
                "name": "n", "version": "1",
                "supported_interfaces": [
                    {"url": iface, "protocol_binding": "JSONRPC", "protocol_version": "1.0"},
                    {"url": "https://edge.example/", "protocol_binding": "JSONRPC", "protocol_version": "1.0"}
                ],
                "url": "http://legacy.internal:81/",
                "additional_interfaces": [{"url": "http://old.internal:80", "transport": "HTTP+JSON"}],
            }),
        ];
        for base in &bases {
            for (field, value, kept) in rows {
                let mut card = base.clone();
                card[*field] = value.clone();
                let out = rewritten(card);
                let text = out.to_string();
                let published_as = camel(field);
                assert_eq!(
                    out.get(&published_as) == Some(value),
                    *kept,
                    "{field}: {value}: {out}"
                );
                assert!(
                    out.as_object().unwrap().keys().all(|k| !k.contains('_')),
                    "{out}"
                );
                if !*kept {
                    assert!(out.get(&published_as).is_none(), "{field}: {value}");
                    assert!(
                        !text.contains("18080") && !text.contains("internal"),
                        "{text}"
                    );
                }
            }
        }
    }

    /// The interfaces and schemes the rewrite replaces, and the legacy fields it rewrites or
    /// drops, by their proto names: rewritten as by their JSON names, none left beside them.
    #[test]
    fn members_by_their_proto_names_are_rewritten_as_by_their_json_names() {
        let anonymous = EdgeFace {
            security_schemes: Map::new(),
            required_extensions: Vec::new(),
            ..face()
        };
        let agent = "http://10.0.0.5:8000/";
        // (the card's members by their proto names, the same by their JSON names)
        let rows: &[(Value, Value)] = &[
            (
                json!({"supported_interfaces": [{"url": agent, "protocol_binding": "JSONRPC", "protocol_version": "1.1"}]}),
                json!({"supportedInterfaces": [{"url": agent, "protocolBinding": "JSONRPC", "protocolVersion": "1.1"}]}),
            ),
            (
                json!({"supported_interfaces": [{"url": agent, "protocol_binding": "GRPC", "protocol_version": "1.0"}],
                       "additional_interfaces": [{"url": "http://10.0.0.5:8001", "transport": "GRPC"}]}),
                json!({"supportedInterfaces": [{"url": agent, "protocolBinding": "GRPC", "protocolVersion": "1.0"}],
                       "additionalInterfaces": [{"url": "http://10.0.0.5:8001", "transport": "GRPC"}]}),
            ),
            (
                json!({"additional_interfaces": [{"url": agent, "transport": "JSONRPC"}], "url": agent,
                       "preferred_transport": "GRPC"}),
                json!({"additionalInterfaces": [{"url": agent, "transport": "JSONRPC"}], "url": agent,
                       "preferredTransport": "GRPC"}),
            ),
            (
                json!({"security_schemes": {"agent_key": {"api_key_security_scheme": {"location": "header", "name": "X-Agent"}}},
                       "security_requirements": [{"schemes": {"agent_key": {"list": []}}}], "security": [{"agent_key": []}]}),
                json!({"securitySchemes": {"agent_key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Agent"}}},
                       "securityRequirements": [{"schemes": {"agent_key": {"list": []}}}], "security": [{"agent_key": []}]}),
            ),
            (
                json!({"capabilities": {"extended_agent_card": true, "push_notifications": true,
                       "extensions": [{"uri": "urn:x:req"}]}}),
                json!({"capabilities": {"extendedAgentCard": true, "pushNotifications": true,
                       "extensions": [{"uri": "urn:x:req"}]}}),
            ),
            (
                json!({"documentation_url": "http://10.0.0.5:8001/docs", "icon_url": "http://10.0.0.5:8001/i.png",
                       "additional_interfaces": [{"url": "http://10.0.0.5:8001"}]}),
                json!({"documentationUrl": "http://10.0.0.5:8001/docs", "iconUrl": "http://10.0.0.5:8001/i.png",
                       "additionalInterfaces": [{"url": "http://10.0.0.5:8001"}]}),
            ),
        ];
        for face in [face(), anonymous] {
            for (proto, json) in rows {
                let mut by_proto = json!({"name": "n", "version": "1"});
                let mut by_json = by_proto.clone();
                for (k, v) in proto.as_object().unwrap() {
                    by_proto[k] = v.clone();
                }
                for (k, v) in json.as_object().unwrap() {
                    by_json[k] = v.clone();
                }
                assert_ne!(by_proto, by_json);
                let mut proto_card = by_proto.clone();
                to_json_names(&mut proto_card).unwrap();
                let out = rewrite(proto_card, &face).unwrap();
                assert_eq!(out, rewrite(by_json.clone(), &face).unwrap(), "{by_proto}");
                let text = out.to_string();
                assert!(!text.contains("10.0.0.5") && !text.contains('_'), "{text}");
                assert_eq!(
                    out["supportedInterfaces"][0]["url"], "https://edge.example/",
                    "{out}"
                );
                assert_eq!(out["supportedInterfaces"].as_array().unwrap().len(), 1);
                if face.security_schemes.is_empty() {
                    assert!(out.get("securitySchemes").is_none(), "{out}");
                    assert!(out.get("securityRequirements").is_none(), "{out}");
                } else {
                    assert_eq!(
                        out["securitySchemes"],
                        Value::Object(face.security_schemes.clone())
                    );
                }
            }
        }
        // An upstream JSON-RPC 1.x interface lends its version, by either name.
        let out = rewritten(
            json!({"name": "n", "version": "1", "supported_interfaces": [
            {"url": agent, "protocol_binding": "JSONRPC", "protocol_version": "1.1"}]}),
        );
        assert_eq!(out["supportedInterfaces"][0]["protocolVersion"], "1.1");
        let out = rewritten(json!({"name": "n", "version": "1", "preferred_transport": "GRPC"}));
        assert_eq!(
            out,
            rewritten(json!({"name": "n", "version": "1", "preferredTransport": "GRPC"}))
        );
        assert_eq!(out["preferredTransport"], "JSONRPC");
    }

    #[test]
    fn a_legacy_member_by_both_names_is_refused() {
        for (proto, json) in LEGACY_NAMES {
            let mut card = json!({"name": "n", "version": "1", proto: [], json: []});
            let e = to_json_names(&mut card).unwrap_err();
            assert_eq!(
                e.0,
                format!("card.{json} is given twice (as {json} and as {proto})")
            );
            let mut card = json!({"name": "n", "version": "1", proto: "x"});
            to_json_names(&mut card).unwrap();
            assert_eq!(card, json!({"name": "n", "version": "1", json: "x"}));
        }
    }

    #[test]
    fn rewrites_urls_schemes_and_drops_stale_signatures() {
        let card = json!({
            "name": "iac-code", "version": "0.16.0", "description": "d",
            "supportedInterfaces": [
                {"url": "http://127.0.0.1:18080/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "http://127.0.0.1:18080", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
            ],
            "url": "http://127.0.0.1:18080/", "preferredTransport": "JSONRPC",
            "additionalInterfaces": [{"url": "http://127.0.0.1:18080", "transport": "HTTP+JSON"}],
            "securitySchemes": {"internal": {"httpAuthSecurityScheme": {"scheme": "bearer"}}},
            "securityRequirements": [{"schemes": {"internal": {"list": [""]}}}],
            "signatures": [{"protected": "x", "signature": "y"}],
            "skills": []
        });
        let out = rewrite(card, &face()).unwrap();
        assert_eq!(out["supportedInterfaces"].as_array().unwrap().len(), 1);
        assert_eq!(
            out["supportedInterfaces"][0]["url"],
            "https://edge.example/"
        );
        assert_eq!(out["url"], "https://edge.example/");
        assert!(out.get("additionalInterfaces").is_none());
        assert!(out.get("signatures").is_none());
        assert!(out["securitySchemes"].get("internal").is_none());
        assert_eq!(
            out["securityRequirements"],
            json!([{"schemes": {"bearerAuth": {"list": []}}}])
        );
        assert!(!out.to_string().contains("127.0.0.1"));
        assert_eq!(
            out["capabilities"]["extensions"],
            json!([{"uri": "urn:x:req", "required": true}])
        );
    }

    #[test]
    fn refuses_what_is_not_a_card() {
        for bad in [
            json!([]),
            json!("x"),
            json!({"name": "n"}),
            json!({"name": 1, "version": "1"}),
        ] {
            assert!(rewrite(bad, &face()).is_err());
        }
    }
}
