use serde_json::{json, Value};

use super::schema::Field;
use super::*;

fn jcs_str(v: &Value) -> String {
    String::from_utf8(jcs(v).unwrap()).unwrap()
}

fn canon(v: &Value) -> String {
    String::from_utf8(canonical_card(v).unwrap()).unwrap()
}

/// The card of reference/iac-code-upstream.md §4 (worked example).
pub(crate) fn tiny_card() -> Value {
    serde_json::from_str(
        r#"{"name":"tiny","description":"Tiny card","version":"1.0.0","supportedInterfaces":[{"url":"http://127.0.0.1:1/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"streaming":true},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]}"#,
    )
    .unwrap()
}

#[test]
fn worked_example_payload_is_byte_identical() {
    assert_eq!(
        canon(&tiny_card()),
        r#"{"capabilities":{"streaming":true},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"description":"Tiny card","name":"tiny","supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0","url":"http://127.0.0.1:1/"}],"version":"1.0.0"}"#
    );
}

#[test]
#[allow(clippy::excessive_precision)] // the RFC's own literal
fn rfc8785_sample_object() {
    // RFC 8785 §3.2.2. The numbers are Rust literals: serde_json without its
    // `float_roundtrip` feature parses 333333333.33333329 one ULP off (see numbers_from_json_text).
    let input = r#"{
        "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
        "literals": [null, true, false]
    }"#;
    let mut v: Value = serde_json::from_str(input).unwrap();
    v["numbers"] = json!([
        333333333.33333329_f64,
        1E30,
        4.50,
        2e-3,
        0.000000000000000000000000001
    ]);
    assert_eq!(
        jcs_str(&v),
        "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\"string\":\"\u{20ac}$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}"
    );
}

#[test]
fn rfc8785_key_order_is_by_utf16_code_units() {
    // RFC 8785 §3.2.3: the emoji (U+1F600, D83D DE00) sorts before U+FB33.
    let v: Value = serde_json::from_str(
        r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","10":"Ten"}"#,
    )
    .unwrap();
    let out = jcs_str(&v);
    let keys: Vec<&str> = [
        "\\r",
        "1",
        "10",
        "\u{80}",
        "\u{f6}",
        "\u{20ac}",
        "\u{1f600}",
        "\u{fb33}",
    ]
    .to_vec();
    let mut pos = 0;
    for k in keys {
        let at = out[pos..]
            .find(&format!("\"{k}\":"))
            .unwrap_or_else(|| panic!("{k} out of order in {out}"));
        pos += at + 1;
    }
}

#[test]
fn rfc8785_numbers() {
    let rows: &[(u64, &str)] = &[
        (0x0000000000000000, "0"),
        (0x8000000000000000, "0"),
        (0x0000000000000001, "5e-324"),
        (0x8000000000000001, "-5e-324"),
        (0x7fefffffffffffff, "1.7976931348623157e+308"),
        (0xffefffffffffffff, "-1.7976931348623157e+308"),
        (0x4340000000000000, "9007199254740992"),
        (0xc340000000000000, "-9007199254740992"),
        (0x4430000000000000, "295147905179352830000"),
        (0x44b52d02c7e14af5, "9.999999999999997e+22"),
        (0x44b52d02c7e14af6, "1e+23"),
        (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
        (0x444b1ae4d6e2ef4e, "999999999999999700000"),
        (0x444b1ae4d6e2ef4f, "999999999999999900000"),
        (0x444b1ae4d6e2ef50, "1e+21"),
        (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
        (0x3eb0c6f7a0b5ed8d, "0.000001"),
        (0x41b3de4355555553, "333333333.3333332"),
        (0x41b3de4355555554, "333333333.33333325"),
        (0x41b3de4355555555, "333333333.3333333"),
        (0x41b3de4355555556, "333333333.3333334"),
        (0x41b3de4355555557, "333333333.33333343"),
        (0xbecbf647612f3696, "-0.0000033333333333333333"),
        (0x43143ff3c1cb0959, "1424953923781206.2"),
    ];
    for (bits, want) in rows {
        assert_eq!(
            format_number(f64::from_bits(*bits)).unwrap(),
            *want,
            "{bits:#x}"
        );
    }
}

#[test]
fn numbers_from_json_text() {
    let rows = [
        ("1e30", "1e+30"),
        ("4.50", "4.5"),
        ("2e-3", "0.002"),
        ("0.000001", "0.000001"),
        ("1e-7", "1e-7"),
        ("-0", "0"),
        ("-0.0", "0"),
        ("1048576.0", "1048576"),
        ("1e21", "1e+21"),
        ("1e20", "100000000000000000000"),
        ("100", "100"),
        ("-1e-7", "-1e-7"),
        ("5e-7", "5e-7"),
        ("0.1", "0.1"),
        ("1.5e-10", "1.5e-10"),
        // Large integers are doubles in JCS: 2^53 + 1 is not representable.
        ("9007199254740993", "9007199254740992"),
        ("18446744073709551615", "18446744073709552000"),
        ("-9223372036854775808", "-9223372036854776000"),
        ("123456789012345678901234567890", "1.2345678901234568e+29"),
    ];
    for (text, want) in rows {
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(jcs_str(&v), want, "{text}");
    }
}

#[test]
fn strings_escape_only_what_rfc8785_requires() {
    let v = json!("a\u{0}\u{1f}\u{7f}\u{8}\u{c}\t\n\r\"\\/\u{2028}é😀");
    assert_eq!(
        jcs_str(&v),
        "\"a\\u0000\\u001f\u{7f}\\b\\f\\t\\n\\r\\\"\\\\/\u{2028}é😀\""
    );
}

#[test]
fn depth_limit_is_128_containers() {
    fn nest(levels: usize, inner: Value) -> Value {
        (0..levels).fold(inner, |v, _| Value::Array(vec![v]))
    }
    assert!(jcs(&nest(128, json!(1))).is_ok());
    assert!(jcs(&nest(129, json!(1))).is_err());
    assert!(jcs(&nest(129, json!([]))).is_err());
    assert!(jcs(&nest(128, json!([]))).is_ok());
    let mut card = tiny_card();
    card["capabilities"]["extensions"] =
        json!([{"uri": "u", "params": {"deep": nest(200, json!(1))}}]);
    assert!(canonical_card(&card).is_err());
}

#[test]
fn params_nesting_stops_where_the_protobuf_parser_does() {
    // Measured with a2a-sdk 1.3.0 / protobuf 7: ParseDict fails from 48 nested containers
    // under a params member, whatever the containers and the innermost value.
    fn nest(levels: usize, inner: Value, object: bool) -> Value {
        (0..levels).fold(inner, |v, _| {
            if object {
                json!({ "a": v })
            } else {
                json!([v])
            }
        })
    }
    for object in [false, true] {
        for inner in [json!(1), json!([]), json!({})] {
            let mut card = tiny_card();
            card["capabilities"]["extensions"] =
                json!([{"uri": "u", "params": {"d": nest(47, inner.clone(), object)}}]);
            assert!(canonical_card(&card).is_ok(), "47 {object} {inner}");
            card["capabilities"]["extensions"] =
                json!([{"uri": "u", "params": {"d": nest(48, inner.clone(), object)}}]);
            assert!(canonical_card(&card).is_err(), "48 {object} {inner}");
        }
    }
}

#[test]
fn prunes_empty_strings_lists_objects_and_nulls_recursively() {
    let v = json!({
        "a": "", "b": [], "c": {}, "d": null, "e": false, "f": 0, "g": [""], "h": {"x": {"y": []}},
        "i": ["", "k", [], {}, null, 0], "j": {"keep": false}
    });
    let pruned = prune(v, 0).unwrap().unwrap();
    assert_eq!(
        pruned,
        json!({"e": false, "f": 0, "i": ["k", 0], "j": {"keep": false}})
    );
    assert_eq!(prune(json!({"a": {"b": [""]}}), 0).unwrap(), None);
}

#[test]
fn unknown_legacy_fields_and_signatures_are_not_signed() {
    let mut card = tiny_card();
    let base = canon(&card);
    let obj = card.as_object_mut().unwrap();
    obj.insert("url".into(), json!("http://evil/"));
    obj.insert("preferredTransport".into(), json!("GRPC"));
    obj.insert("protocolVersion".into(), json!("0.3"));
    obj.insert(
        "additionalInterfaces".into(),
        json!([{"url": "http://evil"}]),
    );
    obj.insert("supportsAuthenticatedExtendedCard".into(), json!(true));
    obj.insert("security".into(), json!([{"x": []}]));
    obj.insert("metadata".into(), json!({"iac_code_signature": "x"}));
    obj.insert(
        "signatures".into(),
        json!([{"protected": "p", "signature": "s", "header": {}}]),
    );
    obj.insert("iconUrl".into(), json!(""));
    obj.insert("documentationUrl".into(), Value::Null);
    card["supportedInterfaces"][0]["transport"] = json!("JSONRPC");
    card["capabilities"]["unknown"] = json!(true);
    assert_eq!(canon(&card), base);
}

#[test]
fn proto3_defaults_follow_field_presence() {
    let mut card = tiny_card();
    card["capabilities"] = json!({
        "streaming": false, "pushNotifications": false,
        "extensions": [{"uri": "urn:x", "required": false}, {"uri": "urn:y", "required": true}]
    });
    let out = canon(&card);
    // `optional bool` keeps an explicit false; a plain proto3 bool drops it.
    assert!(out.contains(r#""capabilities":{"extensions":[{"uri":"urn:x"},{"required":true,"uri":"urn:y"}],"pushNotifications":false,"streaming":false}"#), "{out}");
}

#[test]
fn extension_params_are_a_struct_kept_but_pruned_inside() {
    let mut card = tiny_card();
    card["capabilities"]["extensions"] = json!([{
        "uri": "urn:iac-code:a2a:pipeline-events:v1",
        "params": {"maxBatchBytes": 1048576.0, "enabled": false, "empty": "", "list": [], "obj": {"a": {}},
                   "mixed": [1, null, "", 2.50], "anything": {"x-custom": {"deep": true}}, "n": null}
    }]);
    let out = canon(&card);
    assert!(out.contains(r#""params":{"anything":{"x-custom":{"deep":true}},"enabled":false,"maxBatchBytes":1048576,"mixed":[1,2.5]}"#), "{out}");
    card["capabilities"]["extensions"][0]["params"] = json!({"only": {}});
    assert!(!canon(&card).contains("params"));
    card["capabilities"]["extensions"][0]["params"] = json!([1]);
    assert!(canonical_card(&card).is_err());
}

#[test]
fn security_schemes_and_requirements() {
    let mut card = tiny_card();
    card["securitySchemes"] = json!({
        "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT", "extra": 1}},
        "mtls": {"mtlsSecurityScheme": {}},
        "oauth": {"oauth2SecurityScheme": {"flows": {"authorizationCode": {
            "authorizationUrl": "https://a", "tokenUrl": "https://t", "scopes": {"read": "r", "none": ""},
            "pkceRequired": false}}}}
    });
    card["securityRequirements"] = json!([
        {"schemes": {"bearer": {"list": [""]}}},
        {"schemes": {"oauth": {"list": ["read"]}}},
        {"schemes": {"mtls": {}}}
    ]);
    let out = canon(&card);
    assert!(
        out.contains(r#""securityRequirements":[{"schemes":{"oauth":{"list":["read"]}}}]"#),
        "{out}"
    );
    assert!(out.contains(r#""securitySchemes":{"bearer":{"httpAuthSecurityScheme":{"bearerFormat":"JWT","scheme":"Bearer"}},"oauth":{"oauth2SecurityScheme":{"flows":{"authorizationCode":{"authorizationUrl":"https://a","scopes":{"read":"r"},"tokenUrl":"https://t"}}}}}"#), "{out}");
}

#[test]
fn proto_field_names_are_accepted_and_printed_as_json_names() {
    let camel = canon(&tiny_card());
    let snake: Value = serde_json::from_str(
        r#"{"name":"tiny","description":"Tiny card","version":"1.0.0","supported_interfaces":[{"url":"http://127.0.0.1:1/","protocol_binding":"JSONRPC","protocol_version":"1.0"}],"capabilities":{"streaming":true},"default_input_modes":["text/plain"],"default_output_modes":["text/plain"]}"#,
    )
    .unwrap();
    assert_eq!(canon(&snake), camel);
    let mut both = tiny_card();
    both["default_input_modes"] = json!(["x"]);
    assert!(canonical_card(&both).is_err());
}

#[test]
fn what_the_protobuf_parser_refuses_is_an_error() {
    let bad: Vec<(&str, Value)> = vec![
        ("name", json!(1)),
        ("skills", json!({})),
        ("skills", json!([null])),
        ("skills", json!(["x"])),
        ("defaultInputModes", json!("text/plain")),
        ("defaultInputModes", json!([1])),
        ("capabilities", json!({"streaming": "true"})),
        (
            "capabilities",
            json!({"extensions": [{"uri": "u", "required": 1}]}),
        ),
        ("securitySchemes", json!({"x": null})),
        (
            "securitySchemes",
            json!({"x": {"httpAuthSecurityScheme": {"scheme": "b"}, "mtlsSecurityScheme": {}}}),
        ),
        (
            "securityRequirements",
            json!([{"schemes": {"x": {"list": [null]}}}]),
        ),
    ];
    for (field, value) in bad {
        let mut card = tiny_card();
        card[field] = value.clone();
        assert!(canonical_card(&card).is_err(), "{field}: {value}");
    }
    assert!(canonical_card(&json!([])).is_err());
    // A null member is a cleared field, and a null oneof member does not count.
    let mut card = tiny_card();
    card["securitySchemes"] =
        json!({"x": {"httpAuthSecurityScheme": {"scheme": "b"}, "mtlsSecurityScheme": null}});
    card["provider"] = Value::Null;
    assert!(canonical_card(&card).is_ok());
    assert_eq!(canonical_card(&json!({})).unwrap(), b"null");
}

/// A step from a message to a field's value: the member itself, an element of it (repeated),
/// or an entry of it (map, under a key with an underscore that must stay as it is).
fn wrap(steps: &[(&Field, bool)], leaf: Value) -> Value {
    steps.iter().rev().fold(leaf, |inner, (field, proto)| {
        let name = if *proto { field.proto } else { field.json };
        let inner = match field.kind {
            Kind::RepMsg(_) => json!([inner]),
            Kind::MapMsg(_) => json!({ "my_key": inner }),
            _ => inner,
        };
        json!({ name: inner })
    })
}

/// A value of the field's type (an empty message where one belongs).
fn sample(kind: Kind) -> Value {
    match kind {
        Kind::Str => json!("x"),
        Kind::Bool | Kind::OptBool => json!(true),
        Kind::RepStr => json!(["x"]),
        Kind::MapStr => json!({"my_key": "x"}),
        Kind::Struct => json!({"task_id": {"context_id": 1}}),
        Kind::Msg(_) => json!({}),
        Kind::RepMsg(_) => json!([{}]),
        Kind::MapMsg(_) => json!({"my_key": {}}),
    }
}

/// Every field of the `AgentCard` tree, with the steps from the card to the object holding it.
type Steps = Vec<(&'static Field, bool)>;

fn every_field(msg: &'static Message, above: &mut Steps, out: &mut Vec<(Steps, &'static Field)>) {
    for field in msg.fields {
        out.push((above.clone(), field));
        let inner = match field.kind {
            Kind::Msg(m) | Kind::RepMsg(m) | Kind::MapMsg(m) => m,
            _ => continue,
        };
        above.push((field, true));
        every_field(inner, above, out);
        above.pop();
    }
}

#[test]
fn every_proto_name_of_the_card_tree_becomes_its_json_name_at_its_depth() {
    let mut fields = Vec::new();
    every_field(&AGENT_CARD, &mut Vec::new(), &mut fields);
    let renamed = fields.iter().filter(|(_, f)| f.proto != f.json).count();
    assert_eq!(
        renamed, 38,
        "the table's proto names, each at every place it is reached"
    );
    for (above, field) in &fields {
        // The field by its proto name, under parents by their proto names too.
        let mut card = wrap(above, json!({ field.proto: sample(field.kind) }));
        to_json_names(&mut card).unwrap();
        let json_steps: Steps = above.iter().map(|(f, _)| (*f, false)).collect();
        let want = wrap(&json_steps, json!({ field.json: sample(field.kind) }));
        assert_eq!(card, want, "{}", field.proto);
        // Already in JSON names: unchanged, and the same canonical form either way.
        let mut again = want.clone();
        to_json_names(&mut again).unwrap();
        assert_eq!(again, want, "{}", field.json);
        // Both names in one object: refused, saying where.
        if field.proto != field.json {
            let mut both = wrap(
                above,
                json!({ field.proto: sample(field.kind), field.json: sample(field.kind) }),
            );
            assert!(canonical_card(&both).is_err(), "{}", field.proto);
            let e = to_json_names(&mut both).unwrap_err();
            assert!(
                e.0.contains(&format!(".{} is given twice", field.json))
                    && e.0.contains(field.proto)
                    && e.0.starts_with("card"),
                "{}: {e}",
                field.proto
            );
        }
    }
}

#[test]
fn what_is_not_a_proto_name_of_its_place_keeps_its_name() {
    // (card, the same card after to_json_names)
    let rows: Vec<(Value, Value)> = vec![
        // Look-alikes: no ProtoJSON parser reads them as documentationUrl.
        (
            json!({"Documentation_Url": 1, "documentation__url": 2, "_documentation_url": 3,
                   "documentation-url": 4, "DOCUMENTATION_URL": 5, "documentationURL": 6}),
            json!({"Documentation_Url": 1, "documentation__url": 2, "_documentation_url": 3,
                   "documentation-url": 4, "DOCUMENTATION_URL": 5, "documentationURL": 6}),
        ),
        // A proto name of another message, in the wrong place.
        (
            json!({"protocol_binding": "JSONRPC", "input_modes": ["x"]}),
            json!({"protocol_binding": "JSONRPC", "input_modes": ["x"]}),
        ),
        // Map keys are names the agent chose; extension params are a free-form Struct.
        (
            json!({"security_schemes": {"agent_key": {"api_key_security_scheme": {"name": "X"}}},
                   "capabilities": {"extensions": [{"uri": "u", "params": {"task_id": {"icon_url": 1}}}]}}),
            json!({"securitySchemes": {"agent_key": {"apiKeySecurityScheme": {"name": "X"}}},
                   "capabilities": {"extensions": [{"uri": "u", "params": {"task_id": {"icon_url": 1}}}]}}),
        ),
        // A member of the wrong type is renamed, not entered (the schema check refuses it).
        (
            json!({"supported_interfaces": "x", "skills": [1, null, {"input_modes": []}],
                   "capabilities": [{"extended_agent_card": true}]}),
            json!({"supportedInterfaces": "x", "skills": [1, null, {"inputModes": []}],
                   "capabilities": [{"extended_agent_card": true}]}),
        ),
        (json!([{"icon_url": "x"}]), json!([{"icon_url": "x"}])),
        (json!("icon_url"), json!("icon_url")),
    ];
    for (card, want) in rows {
        let mut got = card.clone();
        to_json_names(&mut got).unwrap();
        assert_eq!(got, want, "{card}");
    }
    // A null beside a value is two spellings all the same (the protobuf parser refuses it).
    for card in [
        json!({"documentationUrl": null, "documentation_url": "http://10.0.0.5:8000/docs"}),
        json!({"documentation_url": null, "documentationUrl": "https://docs.example/"}),
        json!({"skills": [{}, {"inputModes": [], "input_modes": null}]}),
    ] {
        let e = to_json_names(&mut card.clone()).unwrap_err();
        assert!(e.0.contains("given twice"), "{card}: {e}");
    }
    let e = to_json_names(&mut json!({"skills": [{}, {"inputModes": [], "input_modes": []}]}))
        .unwrap_err();
    assert_eq!(
        e.0,
        "card.skills[1].inputModes is given twice (as inputModes and as input_modes)"
    );
}

/// `drop_unknown` names where each member it drops was, at every level the schema knows
/// (objects, lists of messages, maps of messages), and keeps what it is told to at the top.
#[test]
fn dropped_members_are_named_where_they_were() {
    let card = json!({
        "name": "a", "version": "1", "url": "https://legacy.example/",
        "x-vendor": {"internal": "10.0.0.5"},
        "capabilities": {"streaming": true, "extra": 1},
        "skills": [{"id": "s", "name": "n", "more": []}, {"id": "t", "name": "m"}],
        "securitySchemes": {"bearer": {"httpAuthSecuritySchemeX": {}}},
        "provider": {"organization": "o", "url": "https://o.example/", "note": "x"}
    });
    let Value::Object(obj) = card else {
        unreachable!()
    };
    // (what is kept at the top, the members named)
    let rows: [(&[&str], &[&str]); 2] = [
        (
            &["url"],
            &[
                "x-vendor",
                "capabilities.extra",
                "skills[0].more",
                "securitySchemes.bearer.httpAuthSecuritySchemeX",
                "provider.note",
            ],
        ),
        (
            &[],
            &[
                "url",
                "x-vendor",
                "capabilities.extra",
                "skills[0].more",
                "securitySchemes.bearer.httpAuthSecuritySchemeX",
                "provider.note",
            ],
        ),
    ];
    for (keep, named) in rows {
        let mut names = unknown_members(&obj, keep);
        names.sort();
        let mut want: Vec<String> = named.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(names, want, "{keep:?}");
        let mut dropped = obj.clone();
        let mut gone = drop_unknown(&mut dropped, keep);
        gone.sort();
        assert_eq!(gone, want, "{keep:?}");
        assert!(unknown_members(&dropped, keep).is_empty(), "{keep:?}");
        assert_eq!(dropped.contains_key("url"), !keep.is_empty());
    }
}
