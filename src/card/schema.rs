//! The A2A 1.0 AgentCard's required fields and types (a2a.proto: AgentCard, AgentProvider,
//! AgentInterface, AgentCapabilities, AgentExtension, AgentSkill, SecurityScheme and its
//! schemes, OAuthFlows), checked on every card the edge publishes, so that no client is
//! served a card its SDK cannot read (the Rust SDK refuses a whole card for one missing
//! field). One declarative table per message; [`check`] walks a card against it.
//!
//! Decisions: a REQUIRED string must be a non-empty string; a REQUIRED repeated field, when
//! present, must be an array, and may be absent or empty (ProtoJSON omits an empty list, as
//! the a2a-sdk signer does), except `supportedInterfaces`, which needs one interface to be
//! usable at all; unknown fields are left alone (the rewrite has dropped them from an agent's
//! card: [`super::rewrite`]). [`repair`] drops an incomplete
//! `provider` (an optional field whose required `url` or `organization` is missing, as
//! iac-code 0.16.0's card has it) before the check, since the card is valid without it.

use serde_json::{Map, Value};

#[derive(Clone, Copy)]
enum Ty {
    Str,
    Bool,
    Strings,
    Object(&'static Msg),
    List(&'static Msg),
    /// `map<string, M>`.
    MapOf(&'static Msg),
    /// `map<string, string>`.
    StringMap,
    /// A free-form Struct.
    Struct,
}

struct Field {
    name: &'static str,
    ty: Ty,
    required: bool,
}

struct Msg {
    name: &'static str,
    fields: &'static [Field],
    /// Exactly one of these must be present (a proto `oneof` that the message is made of).
    oneof: &'static [&'static str],
}

const fn req(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: true,
    }
}

const fn opt(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: false,
    }
}

static INTERFACE: Msg = Msg {
    name: "AgentInterface",
    fields: &[
        req("url", Ty::Str),
        req("protocolBinding", Ty::Str),
        opt("tenant", Ty::Str),
        req("protocolVersion", Ty::Str),
    ],
    oneof: &[],
};

static PROVIDER: Msg = Msg {
    name: "AgentProvider",
    fields: &[req("url", Ty::Str), req("organization", Ty::Str)],
    oneof: &[],
};

static EXTENSION: Msg = Msg {
    name: "AgentExtension",
    fields: &[
        opt("uri", Ty::Str),
        opt("description", Ty::Str),
        opt("required", Ty::Bool),
        opt("params", Ty::Struct),
    ],
    oneof: &[],
};

static CAPABILITIES: Msg = Msg {
    name: "AgentCapabilities",
    fields: &[
        opt("streaming", Ty::Bool),
        opt("pushNotifications", Ty::Bool),
        opt("extensions", Ty::List(&EXTENSION)),
        opt("extendedAgentCard", Ty::Bool),
    ],
    oneof: &[],
};

static SKILL: Msg = Msg {
    name: "AgentSkill",
    fields: &[
        req("id", Ty::Str),
        req("name", Ty::Str),
        req("description", Ty::Str),
        req("tags", Ty::Strings),
        opt("examples", Ty::Strings),
        opt("inputModes", Ty::Strings),
        opt("outputModes", Ty::Strings),
    ],
    oneof: &[],
};

static API_KEY: Msg = Msg {
    name: "APIKeySecurityScheme",
    fields: &[
        opt("description", Ty::Str),
        req("location", Ty::Str),
        req("name", Ty::Str),
    ],
    oneof: &[],
};

static HTTP_AUTH: Msg = Msg {
    name: "HTTPAuthSecurityScheme",
    fields: &[
        opt("description", Ty::Str),
        req("scheme", Ty::Str),
        opt("bearerFormat", Ty::Str),
    ],
    oneof: &[],
};

static AUTH_CODE: Msg = Msg {
    name: "AuthorizationCodeOAuthFlow",
    fields: &[
        req("authorizationUrl", Ty::Str),
        req("tokenUrl", Ty::Str),
        opt("refreshUrl", Ty::Str),
        req("scopes", Ty::StringMap),
        opt("pkceRequired", Ty::Bool),
    ],
    oneof: &[],
};

static CLIENT_CREDENTIALS: Msg = Msg {
    name: "ClientCredentialsOAuthFlow",
    fields: &[
        req("tokenUrl", Ty::Str),
        opt("refreshUrl", Ty::Str),
        req("scopes", Ty::StringMap),
    ],
    oneof: &[],
};

static LEGACY_FLOW: Msg = Msg {
    name: "OAuthFlow",
    fields: &[
        opt("authorizationUrl", Ty::Str),
        opt("tokenUrl", Ty::Str),
        opt("refreshUrl", Ty::Str),
        opt("scopes", Ty::StringMap),
    ],
    oneof: &[],
};

static DEVICE_CODE: Msg = Msg {
    name: "DeviceCodeOAuthFlow",
    fields: &[
        req("deviceAuthorizationUrl", Ty::Str),
        req("tokenUrl", Ty::Str),
        opt("refreshUrl", Ty::Str),
        req("scopes", Ty::StringMap),
    ],
    oneof: &[],
};

static FLOWS: Msg = Msg {
    name: "OAuthFlows",
    fields: &[
        opt("authorizationCode", Ty::Object(&AUTH_CODE)),
        opt("clientCredentials", Ty::Object(&CLIENT_CREDENTIALS)),
        opt("implicit", Ty::Object(&LEGACY_FLOW)),
        opt("password", Ty::Object(&LEGACY_FLOW)),
        opt("deviceCode", Ty::Object(&DEVICE_CODE)),
    ],
    oneof: &[
        "authorizationCode",
        "clientCredentials",
        "implicit",
        "password",
        "deviceCode",
    ],
};

static OAUTH2: Msg = Msg {
    name: "OAuth2SecurityScheme",
    fields: &[
        opt("description", Ty::Str),
        req("flows", Ty::Object(&FLOWS)),
        opt("oauth2MetadataUrl", Ty::Str),
    ],
    oneof: &[],
};

static OIDC: Msg = Msg {
    name: "OpenIdConnectSecurityScheme",
    fields: &[
        opt("description", Ty::Str),
        req("openIdConnectUrl", Ty::Str),
    ],
    oneof: &[],
};

static MTLS: Msg = Msg {
    name: "MutualTlsSecurityScheme",
    fields: &[opt("description", Ty::Str)],
    oneof: &[],
};

static SCHEME: Msg = Msg {
    name: "SecurityScheme",
    fields: &[
        opt("apiKeySecurityScheme", Ty::Object(&API_KEY)),
        opt("httpAuthSecurityScheme", Ty::Object(&HTTP_AUTH)),
        opt("oauth2SecurityScheme", Ty::Object(&OAUTH2)),
        opt("openIdConnectSecurityScheme", Ty::Object(&OIDC)),
        opt("mtlsSecurityScheme", Ty::Object(&MTLS)),
    ],
    oneof: &[
        "apiKeySecurityScheme",
        "httpAuthSecurityScheme",
        "oauth2SecurityScheme",
        "openIdConnectSecurityScheme",
        "mtlsSecurityScheme",
    ],
};

static SIGNATURE: Msg = Msg {
    name: "AgentCardSignature",
    fields: &[
        req("protected", Ty::Str),
        req("signature", Ty::Str),
        opt("header", Ty::Struct),
    ],
    oneof: &[],
};

static CARD: Msg = Msg {
    name: "AgentCard",
    fields: &[
        req("name", Ty::Str),
        req("description", Ty::Str),
        req("supportedInterfaces", Ty::List(&INTERFACE)),
        opt("provider", Ty::Object(&PROVIDER)),
        req("version", Ty::Str),
        opt("documentationUrl", Ty::Str),
        req("capabilities", Ty::Object(&CAPABILITIES)),
        opt("securitySchemes", Ty::MapOf(&SCHEME)),
        opt("securityRequirements", Ty::List(&REQUIREMENT)),
        req("defaultInputModes", Ty::Strings),
        req("defaultOutputModes", Ty::Strings),
        req("skills", Ty::List(&SKILL)),
        opt("signatures", Ty::List(&SIGNATURE)),
        opt("iconUrl", Ty::Str),
    ],
    oneof: &[],
};

/// `SecurityRequirement`: `schemes` is a map of scheme name to a StringList.
static REQUIREMENT: Msg = Msg {
    name: "SecurityRequirement",
    fields: &[opt("schemes", Ty::MapOf(&STRING_LIST))],
    oneof: &[],
};

static STRING_LIST: Msg = Msg {
    name: "StringList",
    fields: &[opt("list", Ty::Strings)],
    oneof: &[],
};

/// Why a card is not an A2A 1.0 AgentCard: the path of the first field that is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks `card` against the AgentCard schema.
pub fn check(card: &Value) -> Result<(), Invalid> {
    let Value::Object(map) = card else {
        return Err(Invalid("AgentCard: not an object".into()));
    };
    message(map, &CARD, "card")?;
    let interfaces = map.get("supportedInterfaces").and_then(Value::as_array);
    if !interfaces.is_some_and(|i| !i.is_empty()) {
        return Err(Invalid(
            "card.supportedInterfaces: at least one interface is required".into(),
        ));
    }
    Ok(())
}

/// Removes an optional `provider` that lacks a required field (the card is valid without
/// one); returns whether it did.
pub fn repair(card: &mut Value) -> bool {
    let Some(map) = card.as_object_mut() else {
        return false;
    };
    let incomplete = match map.get("provider") {
        Some(Value::Object(p)) => message(p, &PROVIDER, "card.provider").is_err(),
        _ => false,
    };
    if incomplete {
        map.remove("provider");
    }
    incomplete
}

fn message(map: &Map<String, Value>, msg: &Msg, path: &str) -> Result<(), Invalid> {
    for f in msg.fields {
        let at = format!("{path}.{}", f.name);
        match map.get(f.name) {
            // ProtoJSON omits an empty list, so a required repeated field may be absent.
            None | Some(Value::Null)
                if f.required && !matches!(f.ty, Ty::Strings | Ty::List(_)) =>
            {
                return Err(Invalid(format!("{at}: required by {}", msg.name)))
            }
            None | Some(Value::Null) => {}
            Some(v) => value(v, f, &at)?,
        }
    }
    if !msg.oneof.is_empty() {
        let set = msg.oneof.iter().filter(|k| map.contains_key(**k)).count();
        if set != 1 {
            return Err(Invalid(format!(
                "{path}: exactly one of {} is required by {}",
                msg.oneof.join(", "),
                msg.name
            )));
        }
    }
    Ok(())
}

fn value(v: &Value, f: &Field, at: &str) -> Result<(), Invalid> {
    let wrong = |what: &str| Err(Invalid(format!("{at}: must be {what}")));
    match (f.ty, v) {
        (Ty::Str, Value::String(s)) if f.required && s.is_empty() => {
            Err(Invalid(format!("{at}: must not be empty")))
        }
        (Ty::Str, Value::String(_))
        | (Ty::Bool, Value::Bool(_))
        | (Ty::Struct, Value::Object(_)) => Ok(()),
        (Ty::Strings, Value::Array(items)) => {
            if items.iter().all(Value::is_string) {
                Ok(())
            } else {
                wrong("an array of strings")
            }
        }
        (Ty::StringMap, Value::Object(m)) => {
            if m.values().all(Value::is_string) {
                Ok(())
            } else {
                wrong("a map of strings")
            }
        }
        (Ty::Object(msg), Value::Object(m)) => message(m, msg, at),
        (Ty::List(msg), Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::Object(m) => message(m, msg, &format!("{at}[{i}]"))?,
                    _ => return wrong(&format!("an array of {}", msg.name)),
                }
            }
            Ok(())
        }
        (Ty::MapOf(msg), Value::Object(m)) => {
            for (k, item) in m {
                match item {
                    Value::Object(o) => message(o, msg, &format!("{at}.{k}"))?,
                    _ => return wrong(&format!("a map of {}", msg.name)),
                }
            }
            Ok(())
        }
        (Ty::Str, _) => wrong("a string"),
        (Ty::Bool, _) => wrong("a boolean"),
        (Ty::Strings, _) => wrong("an array of strings"),
        (Ty::StringMap, _) | (Ty::Struct, _) => wrong("an object"),
        (Ty::Object(msg), _) => wrong(&format!("a {} object", msg.name)),
        (Ty::List(msg), _) => wrong(&format!("an array of {}", msg.name)),
        (Ty::MapOf(msg), _) => wrong(&format!("a map of {}", msg.name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn good() -> Value {
        json!({
            "name": "a", "description": "d", "version": "1",
            "supportedInterfaces": [{"url": "https://e/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "provider": {"url": "https://p", "organization": "o"},
            "capabilities": {"streaming": true, "extensions": [{"uri": "urn:x", "params": {"a": 1}}]},
            "securitySchemes": {
                "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
                "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
                "oauth": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {"tokenUrl": "https://t", "scopes": {"a": "b"}}}}},
                "mtls": {"mtlsSecurityScheme": {}}
            },
            "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "s", "name": "n", "description": "d", "tags": ["t"]}],
            "signatures": [{"protected": "p", "signature": "s"}],
            "extraField": {"left": "alone"}
        })
    }

    /// Removes or replaces the value at a `/`-separated path.
    fn edit(mut card: Value, path: &str, to: Option<Value>) -> Value {
        let mut keys: Vec<&str> = path.split('/').collect();
        let last = keys.pop().unwrap();
        let mut at = &mut card;
        for k in keys {
            at = match k.parse::<usize>() {
                Ok(i) => &mut at[i],
                Err(_) => &mut at[k],
            };
        }
        if let (Ok(i), Some(items)) = (last.parse::<usize>(), at.as_array_mut()) {
            match to {
                None => {
                    items.remove(i);
                }
                Some(v) => items[i] = v,
            }
            return card;
        }
        let obj = at.as_object_mut().unwrap();
        match to {
            None => {
                obj.remove(last);
            }
            Some(v) => {
                obj.insert(last.into(), v);
            }
        }
        card
    }

    #[test]
    fn a_complete_card_passes() {
        check(&good()).unwrap();
        // ProtoJSON omits empty lists: required repeated fields may be absent.
        for list in [
            "defaultInputModes",
            "defaultOutputModes",
            "skills",
            "skills/0/tags",
        ] {
            check(&edit(good(), list, None)).unwrap_or_else(|e| panic!("{list}: {e}"));
        }
        check(&edit(good(), "skills", Some(json!([])))).unwrap();
        check(&edit(good(), "provider", None)).unwrap();
    }

    #[test]
    fn each_required_field_missing_is_refused() {
        let required = [
            "name",
            "description",
            "supportedInterfaces",
            "version",
            "capabilities",
            "supportedInterfaces/0/url",
            "supportedInterfaces/0/protocolBinding",
            "supportedInterfaces/0/protocolVersion",
            "provider/url",
            "provider/organization",
            "skills/0/id",
            "skills/0/name",
            "skills/0/description",
            "securitySchemes/bearer/httpAuthSecurityScheme/scheme",
            "securitySchemes/key/apiKeySecurityScheme/location",
            "securitySchemes/key/apiKeySecurityScheme/name",
            "securitySchemes/oauth/oauth2SecurityScheme/flows",
            "securitySchemes/oauth/oauth2SecurityScheme/flows/clientCredentials/tokenUrl",
            "signatures/0/protected",
            "signatures/0/signature",
        ];
        for path in required {
            let card = edit(good(), path, None);
            let e = check(&card).unwrap_err();
            let field = path.rsplit('/').next().unwrap();
            assert!(e.0.contains(field), "{path}: {e}");
            // null is absent, and an empty required string is refused too.
            let card = edit(good(), path, Some(Value::Null));
            assert!(check(&card).is_err(), "{path} null");
        }
        for path in ["name", "version", "skills/0/id", "provider/url"] {
            assert!(
                check(&edit(good(), path, Some(json!("")))).is_err(),
                "{path}"
            );
        }
        assert!(check(&edit(good(), "supportedInterfaces", Some(json!([])))).is_err());
    }

    #[test]
    fn wrong_types_are_refused() {
        let cases = [
            ("name", json!(1)),
            ("capabilities", json!([])),
            ("capabilities/streaming", json!("yes")),
            ("defaultInputModes", json!("text/plain")),
            ("defaultInputModes", json!([1])),
            ("skills", json!({})),
            ("skills", json!(["s"])),
            ("skills/0/tags", json!("t")),
            ("securitySchemes", json!([])),
            ("securitySchemes/bearer", json!("Bearer")),
            ("supportedInterfaces/0", json!("https://e/")),
            ("capabilities/extensions/0/params", json!("x")),
            (
                "securitySchemes/oauth/oauth2SecurityScheme/flows/clientCredentials/scopes",
                json!({"a": 1}),
            ),
        ];
        for (path, v) in cases {
            assert!(
                check(&edit(good(), path, Some(v.clone()))).is_err(),
                "{path} = {v}"
            );
        }
        assert!(check(&json!([])).is_err());
    }

    #[test]
    fn a_security_scheme_is_exactly_one_scheme() {
        let none = edit(good(), "securitySchemes/bearer", Some(json!({})));
        assert!(check(&none).unwrap_err().0.contains("exactly one"));
        let two = edit(
            good(),
            "securitySchemes/bearer/mtlsSecurityScheme",
            Some(json!({})),
        );
        assert!(check(&two).is_err());
        let no_flow = edit(
            good(),
            "securitySchemes/oauth/oauth2SecurityScheme/flows",
            Some(json!({})),
        );
        assert!(check(&no_flow).is_err());
    }

    #[test]
    fn an_incomplete_provider_is_dropped_and_a_complete_one_kept() {
        // iac-code 0.16.0 serves `provider` without `url`.
        let mut card = edit(
            good(),
            "provider",
            Some(json!({"organization": "iac-code"})),
        );
        assert!(check(&card).is_err());
        assert!(repair(&mut card));
        assert!(card.get("provider").is_none());
        check(&card).unwrap();
        let mut card = good();
        assert!(!repair(&mut card));
        assert_eq!(card["provider"]["organization"], "o");
    }
}
