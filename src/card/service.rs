//! The card the edge serves: verified (when upstream keys are configured), put in JSON names
//! ([`super::to_json_names`]), rewritten, signed by the active key, and cached with its
//! validators. The bytes only change when the canonical content changes, so an unchanged card
//! keeps its bytes, `ETag` and `Last-Modified` even with randomized (ECDSA) signatures and
//! agents that reorder keys.

use std::sync::{Arc, RwLock};

use bytes::Bytes;
use serde_json::{json, Value};

use super::canonical::canonical_card;
use super::http::{strong_etag, Validators};
use super::jws::{sign_card, SignOptions};
use super::settings::{CardPolicy, Jku};
use super::verify::verify_card;
use super::{rewrite, EdgeFace};
use crate::reason::{self, Reason};

/// Why an agent's card was not published: the reason code, and what went wrong in words
/// when the code alone does not say (for the log only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub reason: Reason,
    pub detail: Option<String>,
}

impl Refused {
    fn new(reason: Reason, detail: impl Into<String>) -> Refused {
        Refused {
            reason,
            detail: Some(detail.into()),
        }
    }
}

impl From<Reason> for Refused {
    fn from(reason: Reason) -> Refused {
        Refused {
            reason,
            detail: None,
        }
    }
}

/// One published card.
#[derive(Debug)]
pub struct Served {
    pub bytes: Bytes,
    pub validators: Validators,
    /// The canonical form it was built from (to detect real changes).
    canonical: Vec<u8>,
    /// `capabilities.extendedAgentCard`: the agent has an extended card to ask for.
    pub extended: bool,
    /// The agent's card it was made from, as fetched (a reload publishes it again under
    /// the new policy when the agent's card cannot be had then).
    source: Value,
}

pub struct CardService {
    face: EdgeFace,
    policy: CardPolicy,
    options: SignOptions,
    current: RwLock<Option<Arc<Served>>>,
    jwks: Option<Bytes>,
}

impl CardService {
    pub fn new(policy: CardPolicy, face: EdgeFace) -> CardService {
        let keys: Vec<Value> = policy
            .signing_keys
            .iter()
            .filter_map(|k| k.public_jwk())
            .collect();
        let jwks = (!keys.is_empty()).then(|| Bytes::from(json!({"keys": keys}).to_string()));
        CardService {
            options: SignOptions {
                jku: match &policy.jku {
                    Jku::Url(u) => Some(u.clone()),
                    Jku::Off => None,
                    // An asymmetric active key is published in the edge's JWKS: say where.
                    Jku::Auto => policy
                        .active
                        .and_then(|i| policy.signing_keys.get(i))
                        .and_then(|k| k.public_jwk())
                        .and_then(|_| url::Url::parse(&face.public_url).ok())
                        .and_then(|u| u.join(super::JWKS_PATH).ok())
                        .map(String::from),
                },
                jku_null: false,
            },
            face,
            policy,
            current: RwLock::new(None),
            jwks,
        }
    }

    pub fn policy(&self) -> &CardPolicy {
        &self.policy
    }

    /// The public JWKS (asymmetric keys only; HS256 secrets are never published).
    pub fn jwks(&self) -> Option<Bytes> {
        self.jwks.clone()
    }

    /// The card being served, if one was published.
    pub fn current(&self) -> Option<Arc<Served>> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Verifies (if configured), rewrites and signs an agent's card, and publishes it unless
    /// its canonical content is what is already served. Returns the card published (in JSON
    /// names, rewritten and signed), or the reason code on refusal.
    pub fn publish(&self, agent_card: Value) -> Result<Value, Refused> {
        let source = agent_card.clone();
        let card = self.prepare(agent_card)?;
        let canonical =
            canonical_card(&card).map_err(|e| Refused::new(reason::CARD_INVALID, e.0))?;
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|c| c.canonical == canonical) {
            return Ok(card);
        }
        let bytes = Bytes::from(card.to_string());
        let validators = Validators {
            etag: strong_etag(&bytes),
            last_modified: crate::time::now_secs(),
        };
        let extended = card["capabilities"]["extendedAgentCard"] == serde_json::json!(true);
        *current = Some(Arc::new(Served {
            bytes,
            validators,
            canonical,
            extended,
            source,
        }));
        Ok(card)
    }

    /// The agent's card the served one was made from, as fetched.
    pub fn source(&self) -> Option<Value> {
        self.current().map(|served| served.source.clone())
    }

    /// An agent's card (public or extended), verified, rewritten and signed for the edge.
    pub fn prepare(&self, agent_card: Value) -> Result<Value, Refused> {
        if let Some(keys) = &self.policy.upstream_keys {
            let verdict = verify_card(&agent_card, keys);
            if !verdict.is_valid() {
                return Err(Refused::new(
                    reason::CARD_UPSTREAM_SIGNATURE,
                    verdict.as_str(),
                ));
            }
        }
        // A ProtoJSON card may name its members by their proto names (`documentation_url`,
        // `supported_interfaces`): put in JSON names first, so the rewrite, the schema check,
        // the signature and `extendedAgentCard` each read one spelling and none passes them
        // by the other. After the verification, which reads the card as the agent signed it
        // (its canonical form takes either name).
        let mut agent_card = agent_card;
        super::to_json_names(&mut agent_card)
            .map_err(|e| Refused::new(reason::CARD_INVALID, e.0))?;
        // Cleaned as the agent's answers are (its local paths with `redact_paths`, secrets in
        // metadata), once its signature is verified: anyone may read the public card.
        if let Some(clean) = &self.face.cleaning {
            (clean.0)(&mut agent_card);
        }
        let mut card = rewrite(agent_card, &self.face)?;
        // Only an A2A 1.0 AgentCard is published (an SDK refuses a whole card for one
        // missing field); an incomplete optional `provider` is dropped first.
        if super::schema::repair(&mut card) {
            tracing::info!(
                event = "card_repaired",
                dropped = "provider",
                why = "AgentProvider needs url and organization"
            );
        }
        if let Err(e) = super::schema::check(&card) {
            tracing::warn!(event = "card_invalid", field = e.0.as_str());
            return Err(Refused::new(reason::CARD_INVALID, e.0));
        }
        if let Some(key) = self
            .policy
            .active
            .and_then(|i| self.policy.signing_keys.get(i))
        {
            sign_card(&mut card, key, &self.options)
                .map_err(|e| Refused::new(reason::CARD_SIGN_FAILED, e.0))?;
        }
        Ok(card)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::keys::SigningKey;
    use crate::card::settings::CardSource;
    use crate::card::verify::VerifyKeys;
    use std::sync::Arc;
    use std::time::Duration;

    fn service(upstream_keys: Option<VerifyKeys>) -> CardService {
        service_with(upstream_keys, serde_json::Map::new())
    }

    /// With the edge's security schemes (none: `allow_anonymous` and no scheme enabled).
    fn service_with(
        upstream_keys: Option<VerifyKeys>,
        security_schemes: serde_json::Map<String, Value>,
    ) -> CardService {
        let policy = CardPolicy {
            source: CardSource::Upstream,
            upstream: None,
            refresh_interval: Duration::from_secs(60),
            max_age_secs: 60,
            signing_keys: vec![Arc::new(SigningKey::hs256("edge", b"edge-secret").unwrap())],
            active: Some(0),
            jku: Jku::Off,
            upstream_keys: upstream_keys.map(Arc::new),
        };
        let face = EdgeFace {
            public_url: "https://edge.example/".into(),
            security_schemes,
            required_extensions: Vec::new(),
            agent_urls: Vec::new(),
            cleaning: None,
        };
        CardService::new(policy, face)
    }

    fn card() -> Value {
        json!({
            "name": "agent", "description": "d", "version": "1.0.0",
            "supportedInterfaces": [{"url": "http://agent:8000/", "protocolBinding": "JSONRPC",
                                     "protocolVersion": "1.0"}],
            "capabilities": {}, "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"], "skills": []
        })
    }

    #[test]
    fn a_refused_card_says_why_with_one_code_and_what_in_words() {
        let mut trusted = VerifyKeys::new();
        trusted.add_secret("agent", b"agent-secret");
        let rows: Vec<(&str, CardService, Value, Reason, Option<&str>)> = vec![
            (
                "no object",
                service(None),
                json!([1]),
                reason::CARD_NOT_OBJECT,
                None,
            ),
            (
                "no version",
                service(None),
                {
                    let mut c = card();
                    c.as_object_mut().unwrap().remove("version");
                    c
                },
                reason::CARD_MISSING_FIELD,
                None,
            ),
            (
                "unsigned, keys required",
                service(Some(trusted)),
                card(),
                reason::CARD_UPSTREAM_SIGNATURE,
                Some("unsigned"),
            ),
        ];
        for (what, svc, card, reason, detail) in rows {
            let got = svc.publish(card).unwrap_err();
            assert_eq!(got.reason, reason, "{what}");
            assert_eq!(got.detail.as_deref(), detail, "{what}");
            assert!(svc.current().is_none(), "{what}: published");
        }
        // Not an AgentCard: the schema says which field.
        let mut bad = card();
        bad["skills"] = json!("none");
        let got = service(None).publish(bad).unwrap_err();
        assert_eq!(got.reason, reason::CARD_INVALID);
        assert!(
            got.detail.as_deref().is_some_and(|d| d.contains("skills")),
            "{got:?}"
        );
        // And a good one is published, signed.
        let svc = service(None);
        svc.publish(card()).unwrap();
        let served: Value = serde_json::from_slice(&svc.current().unwrap().bytes).unwrap();
        assert_eq!(served["signatures"].as_array().map(Vec::len), Some(1));
    }

    /// An agent's card by the proto names of its members (as SDKs that print proto names
    /// serve it), and the same card by their JSON names.
    fn cards_both_ways() -> (Value, Value) {
        let by_proto = json!({
            "name": "agent", "description": "d", "version": "1.0.0",
            "supported_interfaces": [{"url": "http://10.0.0.5:8000/", "protocol_binding": "JSONRPC",
                                      "protocol_version": "1.0"}],
            "additional_interfaces": [{"url": "http://10.0.0.6:8000", "transport": "GRPC"}],
            "preferred_transport": "GRPC",
            "documentation_url": "http://10.0.0.5:8000/docs",
            "icon_url": "http://10.0.0.6:8000/icon.png",
            "provider": {"url": "https://example.com/", "organization": "o"},
            "capabilities": {"streaming": true, "push_notifications": false, "extended_agent_card": true},
            "security_schemes": {"agent_key": {"api_key_security_scheme": {"location": "header", "name": "X-Agent-Key"}}},
            "security_requirements": [{"schemes": {"agent_key": {"list": []}}}],
            "default_input_modes": ["text/plain"], "default_output_modes": ["text/plain"],
            "skills": [{"id": "s", "name": "S", "description": "d", "tags": [], "input_modes": ["text/csv"],
                        "output_modes": ["text/csv"]}]
        });
        let by_json = json!({
            "name": "agent", "description": "d", "version": "1.0.0",
            "supportedInterfaces": [{"url": "http://10.0.0.5:8000/", "protocolBinding": "JSONRPC",
                                     "protocolVersion": "1.0"}],
            "additionalInterfaces": [{"url": "http://10.0.0.6:8000", "transport": "GRPC"}],
            "preferredTransport": "GRPC",
            "documentationUrl": "http://10.0.0.5:8000/docs",
            "iconUrl": "http://10.0.0.6:8000/icon.png",
            "provider": {"url": "https://example.com/", "organization": "o"},
            "capabilities": {"streaming": true, "pushNotifications": false, "extendedAgentCard": true},
            "securitySchemes": {"agent_key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Agent-Key"}}},
            "securityRequirements": [{"schemes": {"agent_key": {"list": []}}}],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "s", "name": "S", "description": "d", "tags": [], "inputModes": ["text/csv"],
                        "outputModes": ["text/csv"]}]
        });
        (by_proto, by_json)
    }

    /// Security review: a card whose members are named by their proto names
    /// (`documentation_url`, `additional_interfaces`, `security_schemes`, ...) was published
    /// with the agent's internal address and its own schemes, or (`supported_interfaces`)
    /// never published at all; `extended_agent_card` was not read. It is the same card as by
    /// the JSON names: published byte for byte as that one.
    #[test]
    fn a_card_by_proto_names_is_published_as_the_same_card_by_json_names() {
        let mut bearer = serde_json::Map::new();
        bearer.insert(
            "bearerAuth".into(),
            json!({"httpAuthSecurityScheme": {"scheme": "Bearer"}}),
        );
        let (by_proto, by_json) = cards_both_ways();
        // (the edge's schemes: none is `allow_anonymous` without a scheme)
        for schemes in [serde_json::Map::new(), bearer] {
            let (from_proto, from_json) = (
                service_with(None, schemes.clone()),
                service_with(None, schemes.clone()),
            );
            let published = from_proto.publish(by_proto.clone()).unwrap();
            from_json.publish(by_json.clone()).unwrap();
            let served = from_proto.current().unwrap();
            assert_eq!(served.bytes, from_json.current().unwrap().bytes);
            assert!(served.extended, "extended_agent_card: true");
            let text = std::str::from_utf8(&served.bytes).unwrap();
            assert!(!text.contains("10.0.0."), "{text}");
            assert!(
                !text.contains("agent_key") && !text.contains("X-Agent-Key"),
                "{text}"
            );
            let card: Value = serde_json::from_slice(&served.bytes).unwrap();
            assert_eq!(card, published);
            for k in card.as_object().unwrap().keys() {
                assert!(!k.contains('_'), "{k}: {card}");
            }
            assert_eq!(
                card["supportedInterfaces"],
                json!([{"url": "https://edge.example/", "protocolBinding": "JSONRPC",
                        "protocolVersion": "1.0"}])
            );
            assert_eq!(card["preferredTransport"], "JSONRPC");
            assert_eq!(card["provider"]["url"], "https://example.com/");
            if schemes.is_empty() {
                assert!(card.get("securitySchemes").is_none(), "{card}");
                assert!(card.get("securityRequirements").is_none(), "{card}");
            } else {
                assert_eq!(card["securitySchemes"], Value::Object(schemes));
            }
            // What `a2a.input_media_types = "card"` learns from: the modes, by JSON names.
            assert_eq!(published["defaultInputModes"], json!(["text/plain"]));
            assert_eq!(published["skills"][0]["inputModes"], json!(["text/csv"]));
        }
        // Alone too: only the edge's interface is published, and the flag is read.
        let svc = service(None);
        let mut card = card();
        let obj = card.as_object_mut().unwrap();
        let interfaces = obj.remove("supportedInterfaces").unwrap();
        obj.insert("supported_interfaces".into(), interfaces);
        obj.insert("capabilities".into(), json!({"extended_agent_card": true}));
        svc.publish(card).unwrap();
        let served = svc.current().unwrap();
        assert!(served.extended);
        let card: Value = serde_json::from_slice(&served.bytes).unwrap();
        assert_eq!(
            card["supportedInterfaces"][0]["url"],
            "https://edge.example/"
        );
        assert!(card.get("supported_interfaces").is_none(), "{card}");
        // Signed by the agent by proto names (its canonical form takes either): verified,
        // then published as the unsigned one by JSON names (the same members and signature;
        // their order may differ, as the removal of the agent's signature moves one).
        let mut trusted = VerifyKeys::new();
        trusted.add_secret("agent", b"agent-secret");
        let mut signed = by_proto.clone();
        let key = SigningKey::hs256("agent", b"agent-secret").unwrap();
        sign_card(&mut signed, &key, &SignOptions::default()).unwrap();
        let (svc, plain) = (service(Some(trusted)), service(None));
        let published = svc.publish(signed).unwrap();
        assert_eq!(published, plain.publish(by_json).unwrap());
        let served: Value = serde_json::from_slice(&svc.current().unwrap().bytes).unwrap();
        assert_eq!(served, published);
        // The extended card goes the same way.
        let extended = service(None).prepare(by_proto).unwrap();
        assert!(!extended.to_string().contains("10.0.0."), "{extended}");
        assert_eq!(extended["capabilities"]["extendedAgentCard"], true);
    }

    /// One member by both names is refused, not merged: the agent's readers would each pick
    /// one (a parser differential), and the protobuf parser refuses it.
    #[test]
    fn a_member_by_both_names_is_refused() {
        let (_, by_json) = cards_both_ways();
        // (where, the member added by its other name)
        let rows: &[(&str, &[&str], &str, Value)] = &[
            (
                "card",
                &[],
                "documentation_url",
                json!("https://docs.example/"),
            ),
            ("card", &[], "icon_url", json!("https://cdn.example/i.png")),
            ("card", &[], "supported_interfaces", json!([])),
            ("card", &[], "additional_interfaces", json!([])),
            ("card", &[], "preferred_transport", json!("JSONRPC")),
            ("card", &[], "security_schemes", json!({})),
            ("card", &[], "security_requirements", json!([])),
            ("card", &[], "default_input_modes", json!(["text/plain"])),
            // A null is a member too (what would clear the field for one reader).
            ("card", &[], "documentation_url", Value::Null),
            (
                "card.capabilities",
                &["capabilities"],
                "extended_agent_card",
                json!(false),
            ),
            (
                "card.capabilities",
                &["capabilities"],
                "push_notifications",
                json!(true),
            ),
            (
                "card.supportedInterfaces[0]",
                &["supportedInterfaces", "0"],
                "protocol_binding",
                json!("GRPC"),
            ),
            (
                "card.securitySchemes.agent_key",
                &["securitySchemes", "agent_key"],
                "api_key_security_scheme",
                json!({"location": "query", "name": "k"}),
            ),
            (
                "card.skills[0]",
                &["skills", "0"],
                "input_modes",
                json!(["*/*"]),
            ),
        ];
        for (at, path, proto, value) in rows {
            let mut card = by_json.clone();
            let mut obj = &mut card;
            for step in *path {
                obj = match step.parse::<usize>() {
                    Ok(i) => &mut obj[i],
                    Err(_) => &mut obj[*step],
                };
            }
            obj[*proto] = value.clone();
            let svc = service(None);
            let got = svc.publish(card.clone()).unwrap_err();
            assert_eq!(got.reason, reason::CARD_INVALID, "{at}.{proto}");
            let detail = got.detail.unwrap_or_default();
            assert!(
                detail.starts_with(&format!("{at}.")) && detail.contains(&format!("as {proto})")),
                "{at}.{proto}: {detail}"
            );
            assert!(svc.current().is_none(), "{at}.{proto}: published");
            // The extended card too.
            assert_eq!(svc.prepare(card).unwrap_err().reason, reason::CARD_INVALID);
        }
        // Without the second name the same card is published.
        service(None).publish(by_json).unwrap();
    }
}
