//! Vectors produced by the reference implementation, a2a-sdk 1.3.0 (Python, protobuf 7,
//! PyJWT 2.15): its canonical form of an awkward served card, and cards it signed. They pin
//! byte-for-byte interop in both directions (the SDK verified this module's signatures over
//! the same cards with all four algorithms when these vectors were made).

use serde_json::{json, Value};

use super::*;

/// A served card with everything the canonical form has to get right: legacy and unknown
/// members, snake_case proto names, nulls, empties at every depth, proto3 defaults, oneofs,
/// `Struct` numbers and UTF-16 key order.
const TRICKY_CARD: &str = r###"{"name": "trïcky € 😀 \"q\" \\ \n\t\u0001", "description": "", "version": "2", "supported_interfaces": [{"url": "https://x/", "protocol_binding": "JSONRPC", "protocolVersion": "1.0", "tenant": ""}], "provider": {"url": "", "organization": "o"}, "iconUrl": "", "documentationUrl": null, "capabilities": {"streaming": false, "push_notifications": false, "extendedAgentCard": true, "extensions": [{"uri": "urn:a", "required": false, "params": {"big": 1e+21, "small": 1e-07, "tenth": 0.1, "int": 1024, "f": 1048576.0, "neg0": -0.0, "huge": 12345678901234567890, "n": null, "e": "", "l": [1, null, "", [], {"x": {}}], "deep": {"a": {"b": {"c": []}}}, "s": " é", "€": 1, "\r": 2, "😀": 3, "דּ": 4, "1": 5, "10": 6, "t": true, "ff": false}}, {"uri": "urn:b", "required": true, "description": "d"}, {"uri": "", "params": {}}]}, "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "bearer", "bearerFormat": ""}}, "mtls": {"mtlsSecurityScheme": {}}, "none": {}, "oauth": {"oauth2SecurityScheme": {"flows": {"authorizationCode": {"authorizationUrl": "https://a", "tokenUrl": "https://t", "scopes": {"r": "read", "e": ""}, "pkceRequired": false}}, "oauth2MetadataUrl": "https://m"}}, "dev": {"oauth2SecurityScheme": {"flows": {"device_code": {"deviceAuthorizationUrl": "https://d", "tokenUrl": "https://t", "scopes": {}}}}}, "oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://o/.well-known/openid-configuration", "description": "x"}}, "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}}}, "securityRequirements": [{"schemes": {"bearer": {"list": [""]}}}, {"schemes": {"oauth": {"list": ["r", "", ""]}}}, {"schemes": {"mtls": {}}}, {}], "defaultInputModes": ["", "text/plain"], "defaultOutputModes": [], "skills": [{"id": "s", "name": "S", "description": "", "tags": [], "examples": [""], "inputModes": ["a"], "security_requirements": [{"schemes": {"key": {"list": ["x"]}}}], "unknown": 1}, {"id": "", "name": "", "description": "", "tags": []}], "url": "http://legacy/", "preferredTransport": "JSONRPC", "additionalInterfaces": [{"url": "x", "transport": "GRPC"}], "signatures": [{"protected": "x", "signature": "y"}], "whatever": {"a": 1}}"###;

/// `_canonicalize_agent_card(ParseDict(TRICKY_CARD, AgentCard(), ignore_unknown_fields=True))`.
const TRICKY_SDK_CANONICAL: &str = r###"{"capabilities":{"extendedAgentCard":true,"extensions":[{"params":{"\r":2,"1":5,"10":6,"big":1e+21,"f":1048576,"ff":false,"huge":12345678901234567000,"int":1024,"l":[1],"neg0":0,"s":" é","small":1e-7,"t":true,"tenth":0.1,"€":1,"😀":3,"דּ":4},"uri":"urn:a"},{"description":"d","required":true,"uri":"urn:b"}],"pushNotifications":false,"streaming":false},"defaultInputModes":["text/plain"],"name":"trïcky € 😀 \"q\" \\ \n\t\u0001","provider":{"organization":"o"},"securityRequirements":[{"schemes":{"oauth":{"list":["r"]}}}],"securitySchemes":{"bearer":{"httpAuthSecurityScheme":{"scheme":"bearer"}},"dev":{"oauth2SecurityScheme":{"flows":{"deviceCode":{"deviceAuthorizationUrl":"https://d","tokenUrl":"https://t"}}}},"key":{"apiKeySecurityScheme":{"location":"header","name":"X-Key"}},"oauth":{"oauth2SecurityScheme":{"flows":{"authorizationCode":{"authorizationUrl":"https://a","scopes":{"r":"read"},"tokenUrl":"https://t"}},"oauth2MetadataUrl":"https://m"}},"oidc":{"openIdConnectSecurityScheme":{"description":"x","openIdConnectUrl":"https://o/.well-known/openid-configuration"}}},"skills":[{"id":"s","inputModes":["a"],"name":"S","securityRequirements":[{"schemes":{"key":{"list":["x"]}}}]}],"supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0","url":"https://x/"}],"version":"2"}"###;

/// The signatures the SDK's `create_agent_card_signer` added to TRICKY_CARD (EdDSA, `sdk-ed`).
const TRICKY_SDK_SIGNATURES: &str = r###"[{"protected": "eyJhbGciOiJFZERTQSIsImprdSI6Imh0dHBzOi8vZXhhbXBsZS5jb20vandrcy5qc29uIiwia2lkIjoic2RrLWVkIiwidHlwIjoiSk9TRSJ9", "signature": "JCorwVybNYiNgZjGi5MtpKD4gIm4WEXLNHX5564nce-c_GYY824OQ6he4tx4YOLjKgu96uY0DXzoA5zH1c5mBg"}]"###;

/// The worked-example card signed by the SDK with ES256 (`sdk-es`, with a `jku`).
const TINY_SDK_ES256: &str = r###"{"name": "tiny", "description": "Tiny card", "version": "1.0.0", "supportedInterfaces": [{"url": "http://127.0.0.1:1/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}], "capabilities": {"streaming": true}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": [], "signatures": [{"protected": "eyJhbGciOiJFUzI1NiIsImprdSI6Imh0dHBzOi8vZXhhbXBsZS5jb20vandrcy5qc29uIiwia2lkIjoic2RrLWVzIiwidHlwIjoiSk9TRSJ9", "signature": "sCRiC4fUOGA9mnBZIz4uh1QJhjWU0ncR58KXWWJKDSYyXeA5ehB5shDGvMsexgx3HdeTSNK-nOn_MKh0pdOM9w"}]}"###;

const SDK_JWKS: &str = r###"{"keys": [{"kty": "EC", "crv": "P-256", "x": "8XixMzhzJ0h-RPNq_rUqgbig0x84ZBNJzviAHVcL2eM", "y": "vmlo2ni7Vt0NprJ9If8clDdZZhS1gTOs_MeYRdkJf9U", "kid": "sdk-es"}, {"x": "Kh2G_SSH2Te2hXuSS7SIt-v9H2famvRArPBET3t5Oho", "kty": "OKP", "crv": "Ed25519", "kid": "sdk-ed"}]}"###;

fn sdk_keys() -> VerifyKeys {
    let mut keys = VerifyKeys::new();
    keys.add_jwks(&serde_json::from_str(SDK_JWKS).unwrap())
        .unwrap();
    keys
}

#[test]
fn canonical_form_matches_the_sdk_byte_for_byte() {
    let card: Value = serde_json::from_str(TRICKY_CARD).unwrap();
    assert_eq!(
        String::from_utf8(canonical_card(&card).unwrap()).unwrap(),
        TRICKY_SDK_CANONICAL
    );
}

#[test]
fn sdk_signed_cards_verify() {
    let mut card: Value = serde_json::from_str(TRICKY_CARD).unwrap();
    card["signatures"] = serde_json::from_str(TRICKY_SDK_SIGNATURES).unwrap();
    assert_eq!(
        verify_card(&card, &sdk_keys()),
        Verdict::Valid {
            kid: "sdk-ed".into()
        }
    );
    card["capabilities"]["extensions"][0]["params"]["tenth"] = json!(0.2);
    assert_eq!(verify_card(&card, &sdk_keys()), Verdict::SignatureMismatch);

    let mut tiny: Value = serde_json::from_str(TINY_SDK_ES256).unwrap();
    assert_eq!(
        verify_card(&tiny, &sdk_keys()),
        Verdict::Valid {
            kid: "sdk-es".into()
        }
    );
    tiny["version"] = json!("1.0.1");
    assert_eq!(verify_card(&tiny, &sdk_keys()), Verdict::SignatureMismatch);
}

#[test]
fn the_card_in_json_names_is_the_card_the_sdk_signed() {
    // Mixed spellings, renamed into JSON names: the same canonical form, so the SDK's
    // signatures still verify (the edge reads a card only after renaming it).
    let mut card: Value = serde_json::from_str(TRICKY_CARD).unwrap();
    card["signatures"] = serde_json::from_str(TRICKY_SDK_SIGNATURES).unwrap();
    crate::card::to_json_names(&mut card).unwrap();
    let text = card.to_string();
    for proto in [
        "supported_interfaces",
        "protocol_binding",
        "push_notifications",
        "device_code",
        "security_requirements",
    ] {
        assert!(!text.contains(proto), "{proto}: {text}");
    }
    assert_eq!(
        String::from_utf8(canonical_card(&card).unwrap()).unwrap(),
        TRICKY_SDK_CANONICAL
    );
    assert_eq!(
        verify_card(&card, &sdk_keys()),
        Verdict::Valid {
            kid: "sdk-ed".into()
        }
    );
}
