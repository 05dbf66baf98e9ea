//! Tenants and authorization through the proxy (real TLS, HTTP/1.1 and HTTP/2): two tenants
//! share one root, each with its own `{tenant}` directory; every cross-tenant spelling is
//! refused exactly like a path outside every root and never reaches the agent; a read-only
//! group gets the authorization error; JWT callers take tenant and groups from claims; a
//! request's `tenant` must be the caller's; the agents get the tenant and a signed identity
//! assertion; a reload that removes a grant applies to the next request.

mod common;

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use common::*;
use serde_json::{json, Value};

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";
const CAROL: &str = "carol-token-0123456789";

fn bearer(principal: &str, token: &str, attrs: &str) -> String {
    format!(
        "[[auth.bearer]]\nprincipal = \"{principal}\"\ntoken_sha256 = \"{}\"\n{attrs}\n",
        hex(&a2a_edge::policy::sha256(token.as_bytes()))
    )
}

/// The shared root with `team-a` and `team-b`, files in each, and the attacker's links:
/// `team-a/evil` → team-b, `team-a/link-b` → team-b (for a file path through it).
struct Layout {
    _dir: TempDir,
    /// Canonical.
    ws: PathBuf,
}

fn layout() -> Layout {
    let dir = TempDir::new("authz");
    let ws = dir.path().join("ws");
    for t in ["team-a", "team-b"] {
        std::fs::create_dir_all(ws.join(t).join("sub")).unwrap();
        std::fs::write(ws.join(t).join("main.tf"), format!("# {t}\n")).unwrap();
    }
    std::os::unix::fs::symlink(ws.join("team-b"), ws.join("team-a/evil")).unwrap();
    std::os::unix::fs::symlink(ws.join("team-b"), ws.join("team-a/link-b")).unwrap();
    std::fs::create_dir_all(dir.path().join("outside")).unwrap();
    let ws = std::fs::canonicalize(&ws).unwrap();
    Layout { _dir: dir, ws }
}

fn tenants_policy(ws: &Path, rules: &str) -> String {
    format!(
        "{}{}{}[workspace]\nallowed_roots = [\"{ws}\"]\n[authz]\ndefault = \"deny\"\n{rules}",
        bearer(
            "alice",
            ALICE,
            "tenant = \"team-a\"\ngroups = [\"deployers\"]"
        ),
        bearer("bob", BOB, "tenant = \"team-b\"\ngroups = [\"deployers\"]"),
        bearer("carol", CAROL, "groups = [\"auditors\"]"),
        ws = ws.display()
    )
}

fn rules(ws: &Path) -> String {
    format!(
        "[[authz.rules]]\nname = \"members\"\ngroups = [\"deployers\"]\nmethods = [\"read\", \"write\"]\nworkspace_roots = [\"{}/{{tenant}}\"]\n[[authz.rules]]\nname = \"auditors\"\ngroups = [\"auditors\"]\nmethods = [\"read\"]\n",
        ws.display()
    )
}

async fn call(c: &mut Client, token: &str, method: &str, params: Value) -> Value {
    call_with(c, token, method, params, &[]).await
}

async fn call_with(
    c: &mut Client,
    token: &str,
    method: &str,
    params: Value,
    extra: &[(&'static str, &'static str)],
) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
    let auth = format!("Bearer {token}");
    let mut headers = vec![
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
        ("a2a-version", "1.0"),
    ];
    headers.extend_from_slice(extra);
    let (status, _, rb) = c.request("POST", "/", &headers, body.to_string()).await;
    assert_eq!(status, 200, "{method}: {}", String::from_utf8_lossy(&rb));
    serde_json::from_slice(&rb).unwrap()
}

fn message(parts: Value, message_meta: Value, request_meta: Value) -> Value {
    let mut p = json!({"message": {"messageId": format!("m-{}", a2a_edge::policy::random_token()),
        "role": "ROLE_USER", "parts": parts}});
    if !message_meta.is_null() {
        p["message"]["metadata"] = message_meta;
    }
    if !request_meta.is_null() {
        p["metadata"] = request_meta;
    }
    p
}

fn cwd(path: &str) -> Value {
    json!({"iac_code": {"cwd": path}})
}

fn text() -> Value {
    json!([{"text": "plan"}])
}

fn reason(v: &Value) -> &str {
    v["error"]["data"][0]["reason"].as_str().unwrap_or("")
}

#[tokio::test]
async fn cross_tenant_spellings_are_refused_like_outside_paths_and_never_forwarded() {
    let l = layout();
    let ws = l.ws.display().to_string();
    let (up, p) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_policy: tenants_policy(&l.ws, &rules(&l.ws)),
            ..Default::default()
        },
    )
    .await;
    let a = format!("{ws}/team-a");
    let b = format!("{ws}/team-b");
    let file = |p: &str| json!([{"url": format!("file://{p}"), "mediaType": "text/plain"}]);
    // (name, params) sent by alice (tenant team-a): all refused, reason as for /etc.
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "other tenant's directory",
            message(text(), cwd(&b), Value::Null),
            "workspace.outside_roots",
        ),
        (
            "dot-dot into the other",
            message(text(), cwd(&format!("{a}/../team-b")), Value::Null),
            "workspace.outside_roots",
        ),
        (
            "symlink into the other",
            message(text(), cwd(&format!("{a}/evil")), Value::Null),
            "workspace.outside_roots",
        ),
        (
            "double slash",
            message(text(), cwd(&format!("{ws}//team-b")), Value::Null),
            "workspace.outside_roots",
        ),
        (
            "trailing /.",
            message(text(), cwd(&format!("{b}/.")), Value::Null),
            "workspace.outside_roots",
        ),
        (
            "the shared root itself",
            message(text(), cwd(&ws), Value::Null),
            "workspace.outside_roots",
        ),
        (
            "other tenant's subdirectory",
            message(text(), cwd(&format!("{b}/sub")), Value::Null),
            "workspace.outside_roots",
        ),
        (
            "request-level cwd of the other",
            message(text(), Value::Null, cwd(&b)),
            "workspace.outside_roots",
        ),
        (
            "message and request cwd disagree",
            message(text(), cwd(&a), cwd(&b)),
            "workspace.outside_roots",
        ),
        (
            "file part by absolute path",
            message(file(&format!("{b}/main.tf")), cwd(&a), Value::Null),
            "part.outside_workspace",
        ),
        (
            "file part with dot-dot",
            message(
                file(&format!("{a}/../team-b/main.tf")),
                cwd(&a),
                Value::Null,
            ),
            "part.outside_workspace",
        ),
        (
            "file part through a symlinked directory",
            message(file(&format!("{a}/link-b/main.tf")), cwd(&a), Value::Null),
            "part.outside_workspace",
        ),
        (
            "file part with cwd of the other",
            message(file(&format!("{b}/main.tf")), cwd(&b), Value::Null),
            "workspace.outside_roots",
        ),
        (
            "missing directory of the other",
            message(text(), cwd(&format!("{b}/nope")), Value::Null),
            "workspace.outside_roots",
        ),
        (
            "a path outside every root",
            message(text(), cwd("/etc"), Value::Null),
            "workspace.outside_roots",
        ),
    ];
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        let mut outside_message = None;
        for (name, params, want) in &cases {
            let v = call(&mut c, ALICE, "SendMessage", params.clone()).await;
            assert_eq!(v["error"]["code"], -32602, "{proto:?} {name}: {v}");
            assert_eq!(reason(&v), *want, "{proto:?} {name}: {v}");
            assert!(
                !v.to_string().contains("team-b"),
                "{name}: the answer names the path: {v}"
            );
            if *want == "workspace.outside_roots" {
                // The same message whatever exists there: no oracle.
                let m = v["error"]["message"].clone();
                assert_eq!(outside_message.get_or_insert(m.clone()), &m, "{name}");
            }
        }
        // Bob is refused alice's spellings the same way.
        let v = call(
            &mut c,
            BOB,
            "SendMessage",
            message(text(), cwd(&a), Value::Null),
        )
        .await;
        assert_eq!(reason(&v), "workspace.outside_roots");
    }
    assert!(
        up.rpc_requests().is_empty(),
        "a refused request reached the agent"
    );

    // Each tenant in its own directory is served, and the agent learns the caller's tenant
    // (the caller's own spelling of the edge headers is dropped).
    let mut c = p.client(Proto::H2).await;
    let forged = [
        ("x-a2a-edge-tenant", "team-b"),
        ("x-a2a-edge-principal", "bob"),
    ];
    let v = call_with(
        &mut c,
        ALICE,
        "SendMessage",
        message(
            file(&format!("{a}/main.tf")),
            cwd(&format!("{a}/sub/..")),
            Value::Null,
        ),
        &forged,
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
    let v = call(
        &mut c,
        BOB,
        "SendMessage",
        message(text(), cwd(&b), Value::Null),
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
    let seen = up.rpc_requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].headers["x-a2a-edge-tenant"], "team-a");
    assert_eq!(seen[0].headers["x-a2a-edge-principal"], "alice");
    assert_eq!(
        seen[0].headers.get_all("x-a2a-edge-tenant").iter().count(),
        1
    );
    let body: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(body["params"]["message"]["metadata"]["iac_code"]["cwd"], a);
    assert_eq!(seen[1].headers["x-a2a-edge-tenant"], "team-b");
}

#[tokio::test]
async fn a_read_only_group_and_a_caller_without_rules_get_the_authorization_error() {
    let l = layout();
    let (up, p) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_policy: tenants_policy(&l.ws, &rules(&l.ws)),
            ..Default::default()
        },
    )
    .await;
    let push = json!({"taskId": "t1", "url": "https://hooks.example.com/x"});
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            CAROL,
            "SendMessage",
            message(text(), Value::Null, Value::Null),
            "write",
        ),
        (
            CAROL,
            "SendStreamingMessage",
            message(text(), Value::Null, Value::Null),
            "write",
        ),
        (CAROL, "CancelTask", json!({"id": "t1"}), "write"),
        (
            CAROL,
            "CreateTaskPushNotificationConfig",
            push.clone(),
            "push",
        ),
        (
            CAROL,
            "GetTaskPushNotificationConfig",
            json!({"taskId": "t1", "id": "c"}),
            "push",
        ),
        (
            CAROL,
            "ListTaskPushNotificationConfigs",
            json!({"taskId": "t1"}),
            "push",
        ),
        (
            CAROL,
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": "t1", "id": "c"}),
            "push",
        ),
        (CAROL, "GetExtendedAgentCard", json!({}), "card"),
        // Members may not register push callbacks, not even inline in SendMessage.
        (
            ALICE,
            "CreateTaskPushNotificationConfig",
            push.clone(),
            "push",
        ),
    ];
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        for (who, method, params, class) in &cases {
            let v = call(&mut c, who, method, params.clone()).await;
            assert_eq!(v["error"]["code"], -32050, "{method}: {v}");
            assert_eq!(reason(&v), "authz.method", "{method}: {v}");
            assert_eq!(
                v["error"]["data"][0]["metadata"]["missing"], *class,
                "{method}"
            );
            assert_eq!(v["error"]["data"][0]["metadata"]["method"], *method);
            assert_eq!(v["id"], 9);
        }
        let mut inline = message(text(), Value::Null, Value::Null);
        inline["configuration"] =
            json!({"taskPushNotificationConfig": {"url": "https://hooks.example.com/x"}});
        let v = call(&mut c, ALICE, "SendMessage", inline).await;
        assert_eq!(reason(&v), "authz.push", "{v}");
        // ... nor in the proto spelling of the same field (ProtoJSON accepts both).
        let mut proto_spelling = message(text(), Value::Null, Value::Null);
        proto_spelling["configuration"] =
            json!({"task_push_notification_config": {"url": "https://hooks.example.com/x"}});
        let v = call(&mut c, ALICE, "SendMessage", proto_spelling).await;
        assert_eq!(reason(&v), "authz.push", "{v}");
        let v = call(
            &mut c,
            ALICE,
            "CreateTaskPushNotificationConfig",
            json!({"task_id": "t1", "url": "https://hooks.example.com/x"}),
        )
        .await;
        assert_eq!(v["error"]["code"], -32050, "{v}");
        // The harness's own principal matches no rule: refused before its body is read.
        let v = call(&mut c, TOKEN, "GetTask", json!({"id": "t1"})).await;
        assert_eq!(v["error"]["code"], -32050, "{v}");
        assert_eq!(reason(&v), "authz.method");
        // The auditor is served on reads (the registry answers: not its task).
        let v = call(&mut c, CAROL, "GetTask", json!({"id": "t1"})).await;
        assert_eq!(v["error"]["code"], -32001, "{v}");
        let v = call(&mut c, CAROL, "ListTasks", json!({})).await;
        assert_eq!(v["result"]["tasks"], json!([]), "{v}");
    }
    assert!(
        up.rpc_requests().is_empty(),
        "a refused request reached the agent"
    );
}

#[tokio::test]
async fn the_request_tenant_must_be_the_callers() {
    let l = layout();
    const DAN: &str = "dan-token-0123456789";
    const ERIN: &str = "erin-token-0123456789";
    let (up, p) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_policy: format!(
                "{}{}{}",
                tenants_policy(&l.ws, &rules(&l.ws)),
                bearer("dan", DAN, "groups = [\"deployers\"]"),
                bearer(
                    "erin",
                    ERIN,
                    "tenant = \"team+e@corp\"\ngroups = [\"deployers\"]"
                )
            ),
            ..Default::default()
        },
    )
    .await;
    let mut c = p.client(Proto::H1).await;
    let with = |tenant: &str| {
        let mut m = message(text(), Value::Null, Value::Null);
        m["tenant"] = json!(tenant);
        m
    };
    for bad in ["team-b", "TEAM-A", "team-a ", "team-a/../team-b"] {
        let v = call(&mut c, ALICE, "SendMessage", with(bad)).await;
        assert_eq!(v["error"]["code"], -32602, "{bad:?}: {v}");
        assert_eq!(reason(&v), "tenant.mismatch", "{bad:?}");
    }
    let v = call(
        &mut c,
        ALICE,
        "GetTask",
        json!({"id": "t", "tenant": "team-b"}),
    )
    .await;
    assert_eq!(reason(&v), "tenant.mismatch");
    // A caller without a tenant names none: not team-a's, not any.
    for bad in ["team-a", "team-b", " "] {
        let v = call(&mut c, DAN, "SendMessage", with(bad)).await;
        assert_eq!(reason(&v), "tenant.mismatch", "{bad:?}: {v}");
        let v = call(&mut c, DAN, "GetTask", json!({"id": "t", "tenant": bad})).await;
        assert_eq!(reason(&v), "tenant.mismatch", "{bad:?}: {v}");
    }
    assert!(up.rpc_requests().is_empty());
    let v = call(&mut c, ALICE, "SendMessage", with("team-a")).await;
    assert!(v.get("result").is_some(), "{v}");
    assert_eq!(up.rpc_requests().len(), 1);
    // An empty tenant is proto3's unset (a client that writes default values sends it): the
    // caller's request goes on, and the agent gets no tenant member.
    let v = call(&mut c, ALICE, "SendMessage", with("")).await;
    assert!(v.get("result").is_some(), "{v}");
    let sent: Value = serde_json::from_slice(&up.rpc_requests().pop().unwrap().body).unwrap();
    assert!(sent["params"].get("tenant").is_none(), "{sent}");
    // A tenant the policy spells with characters no id has is the caller's to name.
    let v = call(
        &mut c,
        ERIN,
        "GetTask",
        json!({"id": "t", "tenant": "team+e@corp"}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    for bad in ["team+f@corp", "team+e@corp\t"] {
        let v = call(&mut c, ERIN, "GetTask", json!({"id": "t", "tenant": bad})).await;
        assert_eq!(v["error"]["code"], -32602, "{bad:?}: {v}");
    }
}

#[tokio::test]
async fn a_reload_that_removes_a_grant_applies_to_the_next_request() {
    let l = layout();
    let grants = |carol_groups: &str| {
        format!(
            "{}{}[workspace]\nallowed_roots = [\"{ws}\"]\n[authz]\n{}",
            bearer(
                "alice",
                ALICE,
                "tenant = \"team-a\"\ngroups = [\"deployers\"]"
            ),
            bearer(
                "carol",
                CAROL,
                &format!("tenant = \"team-a\"\ngroups = {carol_groups}")
            ),
            rules(&l.ws),
            ws = l.ws.display()
        )
    };
    let opts = |carol_groups: &str| ProxyOpts {
        extra_policy: grants(carol_groups),
        ..Default::default()
    };
    let p = Proxy::start(opts("[\"deployers\", \"auditors\"]")).await;
    let mut c = p.client(Proto::H2).await;
    let v = call(
        &mut c,
        CAROL,
        "SendMessage",
        message(text(), Value::Null, Value::Null),
    )
    .await;
    let task = v["result"]["task"]["id"].as_str().unwrap().to_string();
    // Carol leaves the deployers: reads only, from the next request on, on the same connection.
    let text_now = policy_text(p.dir.path(), &opts("[\"auditors\"]"));
    p.reload(&text_now).await;
    let v = call(
        &mut c,
        CAROL,
        "SendMessage",
        message(text(), Value::Null, Value::Null),
    )
    .await;
    assert_eq!(reason(&v), "authz.method", "{v}");
    let v = call(&mut c, CAROL, "CancelTask", json!({"id": task})).await;
    assert_eq!(reason(&v), "authz.method", "{v}");
    let v = call(&mut c, CAROL, "GetTask", json!({"id": task})).await;
    assert_eq!(v["result"]["id"], task, "her own task stays readable: {v}");
    let v = call(&mut c, CAROL, "ListTasks", json!({})).await;
    assert_eq!(v["result"]["tasks"][0]["id"], task, "{v}");
    // Alice cannot read carol's task (ownership, not authorization: -32001).
    let v = call(&mut c, ALICE, "GetTask", json!({"id": task})).await;
    assert_eq!(v["error"]["code"], -32001);
    // Removing the rule set's match altogether: nothing at all.
    p.reload(&policy_text(p.dir.path(), &opts("[]"))).await;
    let v = call(&mut c, CAROL, "GetTask", json!({"id": task})).await;
    assert_eq!(reason(&v), "authz.method", "{v}");
}

// ---- JWT callers: tenant and groups from claims ---------------------------------------------

struct Jwt {
    kid: &'static str,
    pair: rcgen::KeyPair,
}

impl Jwt {
    fn new() -> Jwt {
        Jwt {
            kid: "k1",
            pair: rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap(),
        }
    }
    fn jwks(&self) -> Value {
        let raw = self.pair.public_key_raw();
        json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": self.kid, "alg": "ES256", "use": "sig",
               "x": URL_SAFE_NO_PAD.encode(&raw[1..33]), "y": URL_SAFE_NO_PAD.encode(&raw[33..65])}]})
    }
    /// An `[auth.jwt]` of this issuer whose tokens name their tenant (`tenant_claim =
    /// "tenant"`), its key set written beside `l`'s workspaces.
    fn issuer_with_tenants(&self, l: &Layout) -> String {
        let jwks = l.ws.parent().unwrap().join("jwks.json");
        std::fs::write(&jwks, self.jwks().to_string()).unwrap();
        format!(
            "[auth.jwt]\nissuer = \"https://issuer.test\"\naudience = \"a2a-edge\"\njwks_file = \"{}\"\nalgorithms = [\"ES256\"]\ntenant_claim = \"tenant\"\n",
            jwks.display()
        )
    }
    fn token(&self, extra: Value) -> String {
        let now = now();
        let mut claims = json!({"iss": "https://issuer.test", "aud": "a2a-edge", "sub": "dora",
            "exp": now + 600, "iat": now});
        if let (Value::Object(c), Value::Object(e)) = (&mut claims, extra) {
            c.extend(e);
        }
        let mut h = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        h.kid = Some(self.kid.into());
        let key = jsonwebtoken::EncodingKey::from_ec_der(&self.pair.serialize_der());
        jsonwebtoken::encode(&h, &claims, &key).unwrap()
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn jwt_callers_take_tenant_and_groups_from_claims() {
    let l = layout();
    let jwt = Jwt::new();
    let jwks = l.ws.parent().unwrap().join("jwks.json");
    std::fs::write(&jwks, jwt.jwks().to_string()).unwrap();
    let auth = format!(
        "[auth.jwt]\nissuer = \"https://issuer.test\"\naudience = \"a2a-edge\"\njwks_file = \"{}\"\nalgorithms = [\"ES256\"]\ntenant_claim = \"org.tenant\"\ngroups_claim = \"roles\"\n",
        jwks.display()
    );
    let (up, p) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_auth: auth,
            extra_policy: format!(
                "[workspace]\nallowed_roots = [\"{ws}\"]\n[authz]\n{}",
                rules(&l.ws),
                ws = l.ws.display()
            ),
            ..Default::default()
        },
    )
    .await;
    let b = format!("{}/team-b", l.ws.display());
    let a = format!("{}/team-a", l.ws.display());
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        let member = jwt.token(json!({"org": {"tenant": "team-b"}, "roles": "deployers viewers"}));
        let v = call(
            &mut c,
            &member,
            "SendMessage",
            message(text(), cwd(&b), Value::Null),
        )
        .await;
        assert!(v.get("result").is_some(), "{v}");
        let v = call(
            &mut c,
            &member,
            "SendMessage",
            message(text(), cwd(&a), Value::Null),
        )
        .await;
        assert_eq!(reason(&v), "workspace.outside_roots", "{v}");
        let auditor = jwt.token(json!({"roles": ["auditors"]}));
        let v = call(
            &mut c,
            &auditor,
            "SendMessage",
            message(text(), Value::Null, Value::Null),
        )
        .await;
        assert_eq!(reason(&v), "authz.method", "{v}");
        // A malformed attribute claim is an authentication failure: 401.
        for bad in [
            json!({"org": {"tenant": 7}}),
            json!({"org": {"tenant": "a\u{0}b"}}),
            json!({"roles": {"admin": true}}),
            json!({"roles": ["ok", "not ok"]}),
        ] {
            let token = jwt.token(bad.clone());
            let auth = format!("Bearer {token}");
            let body =
                json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}});
            let headers = [
                ("authorization", auth.as_str()),
                ("content-type", "application/json"),
                ("a2a-version", "1.0"),
            ];
            let (status, _, _) = c.request("POST", "/", &headers, body.to_string()).await;
            assert_eq!(status, 401, "{bad}");
        }
    }
    let seen = up.rpc_requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].headers["x-a2a-edge-tenant"], "team-b");
    assert_eq!(seen[0].headers["x-a2a-edge-principal"], "jwt:dora");
}

/// One JWT subject calling as two tenants (a multi-tenant issuer whose subjects are unique
/// per tenant only) owns two sets of tasks: as team-b it cannot read, cancel, list or
/// continue what it made as team-a, and gets the answer of a task that does not exist; a
/// token without the tenant claim is a third owner.
#[tokio::test]
async fn one_jwt_subject_in_two_tenants_owns_two_sets_of_tasks() {
    let l = layout();
    let jwt = Jwt::new();
    let p = Proxy::start(ProxyOpts {
        extra_auth: jwt.issuer_with_tenants(&l),
        ..Default::default()
    })
    .await;
    let a = jwt.token(json!({"tenant": "team-a"}));
    let b = jwt.token(json!({"tenant": "team-b"}));
    let none = jwt.token(json!({}));
    let send = |text: &str, meta: Value| {
        let mut m = json!({"role": "ROLE_USER", "messageId": format!("m-{text}"),
            "parts": [{"text": text}]});
        if let (Value::Object(m), Value::Object(meta)) = (&mut m, meta) {
            m.extend(meta);
        }
        json!({"message": m})
    };
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        let v = call(
            &mut c,
            &a,
            "SendMessage",
            send("[[input]] team-a's", json!({})),
        )
        .await;
        let task = v["result"]["task"]["id"].as_str().unwrap().to_string();
        let context = v["result"]["task"]["contextId"]
            .as_str()
            .unwrap()
            .to_string();
        let absent = call(&mut c, &b, "GetTask", json!({"id": "no-such-task"})).await;
        assert_eq!(absent["error"]["code"], -32001, "{absent}");
        for other in [&b, &none] {
            for (method, params) in [
                ("GetTask", json!({"id": task})),
                ("CancelTask", json!({"id": task})),
                ("ListTaskPushNotificationConfigs", json!({"taskId": task})),
                (
                    "SendMessage",
                    send("[[input]] theirs", json!({"taskId": task})),
                ),
            ] {
                let v = call(&mut c, other, method, params).await;
                assert_eq!(v["error"], absent["error"], "{method}: {v}");
            }
            let v = call(&mut c, other, "ListTasks", json!({})).await;
            let ids = v["result"]["tasks"].as_array().unwrap().iter();
            assert!(ids.clone().all(|t| t["id"] != task.as_str()), "{v}");
            assert!(!v.to_string().contains("team-a's"), "history leaked: {v}");
            // Naming team-a's context gives this owner a context of its own by that name.
            let v = call(
                &mut c,
                other,
                "SendMessage",
                send("[[input]] join", json!({"contextId": context})),
            )
            .await;
            assert_ne!(v["result"]["task"]["id"], task.as_str(), "{v}");
            assert!(!v.to_string().contains("team-a's"), "history leaked: {v}");
        }
        // team-a still has it, untouched.
        let v = call(&mut c, &a, "GetTask", json!({"id": task})).await;
        assert_eq!(
            v["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{v}"
        );
        let v = call(&mut c, &a, "ListTasks", json!({})).await;
        let ids = v["result"]["tasks"].as_array().unwrap().iter();
        assert!(ids.clone().any(|t| t["id"] == task.as_str()), "{v}");
        assert!(!v.to_string().contains("theirs"), "{v}");
    }
}

/// One JWT subject calling as two tenants is granted as two callers: a workspace template
/// that names the subject without its tenant gives it nothing (both tenants' `jwt:dora`
/// would share one path), a rule naming the bare `jwt:dora` is not a grant to either, one
/// naming `jwt:dora` U+001E `team-a` is team-a's only; a token without the tenant claim is
/// the bare name's. Refused requests never reach the agent.
#[tokio::test]
async fn one_jwt_subject_in_two_tenants_is_granted_as_two_callers() {
    let l = layout();
    let ws = l.ws.display().to_string();
    for d in [
        "jwt:dora",
        "team-a/jwt:dora",
        "team-b/jwt:dora",
        "named",
        "exact",
    ] {
        std::fs::create_dir_all(l.ws.join(d)).unwrap();
    }
    let jwt = Jwt::new();
    let (up, p) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_auth: jwt.issuer_with_tenants(&l),
            extra_policy: format!(
                "[workspace]\nallowed_roots = [\"{ws}\"]\n[authz]\n\
                 [[authz.rules]]\nname = \"own\"\nprincipals = [\"*\"]\nmethods = [\"*\"]\nworkspace_roots = [\"{ws}/{{principal}}\", \"{ws}/{{tenant}}/{{principal}}\"]\n\
                 [[authz.rules]]\nname = \"named\"\nprincipals = [\"jwt:dora\"]\nmethods = [\"*\"]\nworkspace_roots = [\"{ws}/named\"]\n\
                 [[authz.rules]]\nname = \"exact\"\nprincipals = [\"jwt:dora\\u001Eteam-a\"]\nmethods = [\"*\"]\nworkspace_roots = [\"{ws}/exact\"]\n"
            ),
            ..Default::default()
        },
    )
    .await;
    let a = jwt.token(json!({"tenant": "team-a"}));
    let b = jwt.token(json!({"tenant": "team-b"}));
    let none = jwt.token(json!({}));
    // (caller, workspace, allowed)
    let cases = [
        ("team-a", &a, "jwt:dora", false),
        ("team-b", &b, "jwt:dora", false),
        ("none", &none, "jwt:dora", true),
        ("team-a", &a, "team-a/jwt:dora", true),
        ("team-b", &b, "team-a/jwt:dora", false),
        ("team-b", &b, "team-b/jwt:dora", true),
        ("team-a", &a, "named", false),
        ("team-b", &b, "named", false),
        ("none", &none, "named", true),
        ("team-a", &a, "exact", true),
        ("team-b", &b, "exact", false),
        ("none", &none, "exact", false),
    ];
    let mut forwarded = 0;
    for proto in PROTOS {
        let mut c = p.client(proto).await;
        for (who, token, dir, allowed) in cases {
            let path = format!("{ws}/{dir}");
            let v = call(
                &mut c,
                token,
                "SendMessage",
                message(text(), cwd(&path), Value::Null),
            )
            .await;
            if allowed {
                assert!(v.get("result").is_some(), "{who} in {dir}: {v}");
                forwarded += 1;
            } else {
                assert_eq!(reason(&v), "workspace.outside_roots", "{who} in {dir}: {v}");
            }
            assert_eq!(up.rpc_requests().len(), forwarded, "{who} in {dir}");
        }
    }
}

/// The rate budget of a JWT subject is its own in each tenant: one tenant's `jwt:dora`
/// spending hers leaves the other's whole.
#[tokio::test]
async fn one_jwt_subject_in_two_tenants_has_two_rate_budgets() {
    let l = layout();
    let jwt = Jwt::new();
    let p = Proxy::start(ProxyOpts {
        extra_auth: jwt.issuer_with_tenants(&l),
        extra_policy: "[limits]\nrequests_per_second = 0.01\nburst = 2\n".into(),
        ..Default::default()
    })
    .await;
    let a = jwt.token(json!({"tenant": "team-a"}));
    let b = jwt.token(json!({"tenant": "team-b"}));
    let mut c = p.client(Proto::H2).await;
    let get = || json!({"id": "no-such-task"});
    for _ in 0..2 {
        let v = call(&mut c, &a, "GetTask", get()).await;
        assert_eq!(v["error"]["code"], -32001, "{v}");
    }
    let auth = format!("Bearer {a}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
        ("a2a-version", "1.0"),
    ];
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "GetTask", "params": get()});
    let (status, _, _) = c.request("POST", "/", &headers, body.to_string()).await;
    assert_eq!(status, 429, "team-a's dora spent her budget");
    for _ in 0..2 {
        let v = call(&mut c, &b, "GetTask", get()).await;
        assert_eq!(v["error"]["code"], -32001, "team-b's dora has her own: {v}");
    }
}

// ---- the identity assertion ------------------------------------------------------------------

async fn jwks_of(c: &mut Client) -> jsonwebtoken::jwk::JwkSet {
    let (status, _, body) = c
        .request("GET", "/.well-known/jwks.json", &[], String::new())
        .await;
    assert_eq!(status, 200);
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test]
async fn agents_get_a_signed_identity_assertion_that_expires() {
    let l = layout();
    let card_key = l.ws.parent().unwrap().join("card.pem");
    let card = format!(
        "[card]\nactive_kid = \"e1\"\n[[card.signing_keys]]\nkid = \"e1\"\nalg = \"ES256\"\nprivate_key_file = \"{}\"\ngenerate_if_missing = true\n",
        card_key.display()
    );
    let (up, p) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_auth: "[auth.identity_assertion]\nkid = \"e1\"\nttl_secs = 1\n".into(),
            extra_policy: format!("{}{card}", tenants_policy(&l.ws, &rules(&l.ws))),
            ..Default::default()
        },
    )
    .await;
    let mut c = p.client(Proto::H2).await;
    let forged = [("x-a2a-edge-identity", "forged.by.caller")];
    let sent = a2a_edge::time::now_secs();
    let v = call_with(
        &mut c,
        ALICE,
        "SendMessage",
        message(text(), Value::Null, Value::Null),
        &forged,
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
    let seen = up.rpc_requests();
    let h = &seen[0].headers;
    assert_eq!(h.get_all("x-a2a-edge-identity").iter().count(), 1);
    let token = h["x-a2a-edge-identity"].to_str().unwrap().to_string();
    assert_ne!(token, "forged.by.caller");
    let jwks = jwks_of(&mut c).await;
    let header = jsonwebtoken::decode_header(&token).unwrap();
    assert_eq!(header.kid.as_deref(), Some("e1"));
    let key = jsonwebtoken::DecodingKey::from_jwk(jwks.find("e1").unwrap()).unwrap();
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    v.leeway = 0;
    v.set_audience(&["agent-1"]);
    v.set_issuer(&[p.public_url.as_str()]);
    // Its lifetime (1 s) is checked from the claims, so that a slow machine taking more
    // than a second to get here does not fail the signature's check; its expiry is checked
    // by the library further down.
    let mut unexpired = v.clone();
    unexpired.validate_exp = false;
    let claims = jsonwebtoken::decode::<Value>(&token, &key, &unexpired)
        .unwrap()
        .claims;
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["tenant"], "team-a");
    assert_eq!(claims["groups"], json!(["deployers"]));
    assert_eq!(claims["scheme"], "bearer");
    assert_eq!(claims["jti"], h["x-request-id"].to_str().unwrap());
    // Issued when the request was made, valid for 1 s.
    assert!(claims["iat"].as_u64().unwrap() >= sent, "{claims}");
    assert_eq!(
        claims["exp"].as_u64().unwrap(),
        claims["iat"].as_u64().unwrap() + 1
    );
    // Addressed to this agent only, and refused once expired.
    let mut other = unexpired.clone();
    other.set_audience(&["agent-2"]);
    assert!(jsonwebtoken::decode::<Value>(&token, &key, &other).is_err());
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let err = jsonwebtoken::decode::<Value>(&token, &key, &v).unwrap_err();
    assert_eq!(
        err.kind(),
        &jsonwebtoken::errors::ErrorKind::ExpiredSignature
    );
}

#[tokio::test]
async fn refusals_are_counted_by_reason_on_the_admin_listener() {
    let l = layout();
    let p = Proxy::start(ProxyOpts {
        extra_server: "admin_listen = \"127.0.0.1:0\"\n".into(),
        extra_policy: tenants_policy(&l.ws, &rules(&l.ws)),
        ..Default::default()
    })
    .await;
    let mut c = p.client(Proto::H1).await;
    call(
        &mut c,
        CAROL,
        "SendMessage",
        message(text(), Value::Null, Value::Null),
    )
    .await;
    call(&mut c, CAROL, "CancelTask", json!({"id": "t"})).await;
    let b = format!("{}/team-b", l.ws.display());
    call(
        &mut c,
        ALICE,
        "SendMessage",
        message(text(), cwd(&b), Value::Null),
    )
    .await;
    let (_, text) = admin_get(&p, "/metrics").await;
    assert!(
        text.contains("a2a_edge_authz_refusals_total{reason=\"authz.method\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("a2a_edge_authz_refusals_total{reason=\"workspace.outside_roots\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn without_authz_every_authenticated_caller_keeps_todays_behaviour() {
    let l = layout();
    let (up, p) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_policy: format!(
                "{}[workspace]\nallowed_roots = [\"{ws}\"]\n",
                bearer("alice", ALICE, "tenant = \"team-a\""),
                ws = l.ws.display()
            ),
            ..Default::default()
        },
    )
    .await;
    let mut c = p.client(Proto::H1).await;
    let b = format!("{}/team-b", l.ws.display());
    let v = call(
        &mut c,
        ALICE,
        "SendMessage",
        message(text(), cwd(&b), Value::Null),
    )
    .await;
    assert!(v.get("result").is_some(), "no [authz]: every root: {v}");
    let v = call(
        &mut c,
        TOKEN,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": "t", "url": "https://hooks.example.com/x"}),
    )
    .await;
    assert_eq!(
        v["error"]["code"], -32001,
        "every method (the task is unknown): {v}"
    );
    assert_eq!(up.rpc_requests().len(), 1);
    assert_eq!(up.rpc_requests()[0].headers["x-a2a-edge-tenant"], "team-a");
}

// ---- mTLS callers: tenant and groups from identity patterns ---------------------------------

/// A client CA (written to `dir/client-ca.pem`) and a client certificate with the URI SAN `uri`.
fn client_cert(
    dir: &Path,
    uri: &str,
) -> (Vec<rustls::pki_types::CertificateDer<'static>>, Vec<u8>) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        SanType,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, "client CA");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = p.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("client-ca.pem"), ca.pem()).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.subject_alt_names = vec![SanType::URI(uri.try_into().unwrap())];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = p.signed_by(&key, &ca, &ca_key).unwrap();
    (vec![cert.der().clone()], key.serialize_der())
}

#[tokio::test]
async fn mtls_callers_take_tenant_and_groups_from_identity_patterns() {
    let l = layout();
    let dir = l.ws.parent().unwrap().to_path_buf();
    let cert = client_cert(&dir, "spiffe://example.org/ns/team-b/sa/ci");
    let (up, p) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_tls: format!(
                "client_auth = \"optional\"\nclient_ca_file = \"{}\"\n",
                dir.join("client-ca.pem").display()
            ),
            extra_auth: "[auth.mtls]\n[[auth.mtls.identities]]\nmatch = \"spiffe://example.org/ns/team-a/*\"\ntenant = \"team-a\"\ngroups = [\"deployers\"]\n[[auth.mtls.identities]]\nmatch = \"spiffe://example.org/ns/team-b/*\"\ntenant = \"team-b\"\ngroups = [\"deployers\"]\n".into(),
            extra_policy: format!(
                "[workspace]\nallowed_roots = [\"{ws}\"]\n[authz]\n{}",
                rules(&l.ws),
                ws = l.ws.display()
            ),
            ..Default::default()
        },
    )
    .await;
    let a = format!("{}/team-a", l.ws.display());
    let b = format!("{}/team-b", l.ws.display());
    for proto in PROTOS {
        let mut c = Client::try_connect(p.addr, &p.ca, proto, Some(cert.clone()))
            .await
            .unwrap();
        let send = |params: Value| {
            let body =
                json!({"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": params});
            body.to_string()
        };
        let headers = [("content-type", "application/json"), ("a2a-version", "1.0")];
        let (_, _, ok) = c
            .request(
                "POST",
                "/",
                &headers,
                send(message(text(), cwd(&b), Value::Null)),
            )
            .await;
        let ok: Value = serde_json::from_slice(&ok).unwrap();
        assert!(ok.get("result").is_some(), "{ok}");
        let (_, _, refused) = c
            .request(
                "POST",
                "/",
                &headers,
                send(message(text(), cwd(&a), Value::Null)),
            )
            .await;
        let refused: Value = serde_json::from_slice(&refused).unwrap();
        assert_eq!(reason(&refused), "workspace.outside_roots", "{refused}");
    }
    let seen = up.rpc_requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].headers["x-a2a-edge-tenant"], "team-b");
    assert_eq!(
        seen[0].headers["x-a2a-edge-principal"],
        "mtls:spiffe://example.org/ns/team-b/sa/ci"
    );
}

/// A streaming turn of the harness principal over HTTP/2 that lasts about a second and a
/// quarter (four chunks, 300 ms apart), its message's metadata `meta`, once its first
/// event has come.
async fn long_stream(p: &Proxy, meta: Value) -> EventReader {
    let mut c = p.client(Proto::H2).await;
    let resp = c
        .rpc_stream(
            "SendStreamingMessage",
            message(
                json!([{"text": "[[slow:300]] [[chunks:4]] long turn"}]),
                meta,
                Value::Null,
            ),
        )
        .await;
    let mut events = EventReader::new(resp);
    assert!(events.next().await.is_some(), "the stream started");
    events
}

/// A reload that takes a caller's grant away ends its stream in flight (`auth.revoked`: a
/// stream may last an hour), and refuses its next request.
#[tokio::test]
async fn a_stream_in_flight_loses_its_grant_at_a_reload() {
    let l = layout();
    // The harness principal ("tester") is a deployer of team-a, then nothing.
    let opts = |groups: &str| ProxyOpts {
        extra_tester: format!("tenant = \"team-a\"\ngroups = {groups}\n"),
        extra_policy: format!(
            "[workspace]\nallowed_roots = [\"{ws}\"]\n[authz]\n{}",
            rules(&l.ws),
            ws = l.ws.display()
        ),
        ..Default::default()
    };
    let p = Proxy::start(opts("[\"deployers\"]")).await;
    let mut events = long_stream(&p, Value::Null).await;
    p.reload(&policy_text(p.dir.path(), &opts("[]"))).await;
    // The admitted stream ends with the reload; the next request is refused.
    let rest = events.rest().await;
    let last = rest.last().map(|(_, v)| v.clone()).unwrap_or_default();
    assert_eq!(reason(&last), "auth.revoked", "{rest:?}");
    assert!(
        !rest
            .iter()
            .any(|(_, v)| v.to_string().contains("TASK_STATE_INPUT_REQUIRED")),
        "the turn ran to its end: {rest:?}"
    );
    let mut c2 = p.client(Proto::H1).await;
    let v = call(&mut c2, TOKEN, "GetTask", json!({"id": "x"})).await;
    assert_eq!(reason(&v), "authz.method", "{v}");
}

/// A reload that takes a streaming turn's workspace out of the caller's roots ends the
/// stream (`auth.revoked`), whether the caller's rule moved its roots or the agent's
/// `allowed_roots` no longer hold them; a reload that keeps the workspace within them (a
/// root added) leaves the stream to run to its end.
#[tokio::test]
async fn a_stream_whose_workspace_a_reload_takes_away_ends() {
    let l = layout();
    let ws = l.ws.display().to_string();
    let policy = |allowed: &str, roots: Option<&str>| {
        ProxyOpts {
        extra_tester: "tenant = \"team-a\"\ngroups = [\"deployers\"]\n".into(),
        extra_policy: format!(
            "[workspace]\nallowed_roots = [{allowed}]\n{}",
            roots.map_or(String::new(), |roots| format!("[authz]\n[[authz.rules]]\nname = \"members\"\ngroups = [\"deployers\"]\nmethods = [\"read\", \"write\"]\nworkspace_roots = [{roots}]\n"))
        ),
        ..Default::default()
    }
    };
    let all = format!("\"{ws}\"");
    let own = format!("\"{ws}/{{tenant}}\"");
    let p = Proxy::start(policy(&all, Some(&own))).await;
    let text = |o: ProxyOpts| policy_text(p.dir.path(), &o);
    let b_root = format!("\"{ws}/team-b\"");
    for (why, start, reloaded, revoked) in [
        (
            "a root added",
            text(policy(&all, Some(&own))),
            text(policy(&all, Some(&format!("{b_root}, {own}")))),
            false,
        ),
        (
            "the rule's roots moved",
            text(policy(&all, Some(&own))),
            text(policy(&all, Some(&b_root))),
            true,
        ),
        (
            "allowed_roots narrowed (no authz)",
            text(policy(&all, None)),
            text(policy(&b_root, None)),
            true,
        ),
        (
            "allowed_roots kept (no authz)",
            text(policy(&all, None)),
            text(policy(&format!("{b_root}, {all}"), None)),
            false,
        ),
    ] {
        p.reload(&start).await;
        let mut events = long_stream(&p, cwd(&format!("{ws}/team-a/sub"))).await;
        p.reload(&reloaded).await;
        let rest = events.rest().await;
        let last = rest.last().map(|(_, v)| v.clone()).unwrap_or_default();
        let ran_to_its_end = rest
            .iter()
            .any(|(_, v)| v.to_string().contains("TASK_STATE_INPUT_REQUIRED"));
        if revoked {
            assert_eq!(reason(&last), "auth.revoked", "{why}: {rest:?}");
            assert!(!ran_to_its_end, "{why}: {rest:?}");
        } else {
            assert!(ran_to_its_end, "{why}: {rest:?}");
        }
    }
}

/// A turn that names no workspace runs in the caller's own (its first root); a caller with
/// its own roots but none to use is refused; `require_workspace = false` leaves it to the agent.
#[tokio::test]
async fn a_turn_without_a_workspace_runs_in_the_callers_own() {
    let l = layout();
    const DAN: &str = "dan-token-0123456789";
    let policy = |extra: &str| {
        format!(
            "{}{}",
            tenants_policy(&l.ws, &format!("{extra}\n{}", rules(&l.ws))),
            bearer("dan", DAN, "groups = [\"deployers\"]")
        )
    };
    let (up, p) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_policy: policy(""),
            ..Default::default()
        },
    )
    .await;
    let a = format!("{}/team-a", l.ws.display());
    let mut c = p.client(Proto::H2).await;
    let v = call(
        &mut c,
        ALICE,
        "SendMessage",
        message(text(), Value::Null, Value::Null),
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
    let v = call(
        &mut c,
        ALICE,
        "SendMessage",
        message(text(), json!({"other": 1}), Value::Null),
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
    // iac-code reads the request's metadata when it is a non-empty object, else the
    // message's: the workspace is in the one it reads, whichever names it (or neither).
    let rows = [
        (Value::Null, json!({"other": 1})),
        (Value::Null, json!({"iac_code": null})),
        (
            Value::Null,
            json!({"iac_code": {"preferredLanguage": "en"}}),
        ),
        (Value::Null, json!({})),
        (cwd(&a), json!({"other": 1})),
        (cwd(&a), json!({})),
        (json!({"other": 1}), json!({"iac_code": {"cwd": a.clone()}})),
    ];
    for (message_meta, request_meta) in &rows {
        let v = call(
            &mut c,
            ALICE,
            "SendMessage",
            message(text(), message_meta.clone(), request_meta.clone()),
        )
        .await;
        assert!(v.get("result").is_some(), "{request_meta}: {v}");
    }
    let seen = up.rpc_requests();
    assert_eq!(seen.len(), 2 + rows.len());
    for r in &seen {
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        let read = match &body["params"]["metadata"] {
            Value::Object(m) if !m.is_empty() => &body["params"]["metadata"],
            _ => &body["params"]["message"]["metadata"],
        };
        assert_eq!(read["iac_code"]["cwd"], a, "{body}");
    }
    let v = call(
        &mut c,
        ALICE,
        "SendMessage",
        message(text(), cwd(&a), json!({"iac_code": "x"})),
    )
    .await;
    assert_eq!(reason(&v), "metadata.type", "{v}");
    // No root to work in (no tenant for {tenant}), or no way to say where: refused.
    let v = call(
        &mut c,
        DAN,
        "SendMessage",
        message(text(), Value::Null, Value::Null),
    )
    .await;
    assert_eq!(reason(&v), "workspace.required", "{v}");
    let v = call(
        &mut c,
        ALICE,
        "SendMessage",
        message(text(), json!({"iac_code": "x"}), Value::Null),
    )
    .await;
    assert_eq!(reason(&v), "workspace.required", "{v}");
    assert_eq!(up.rpc_requests().len(), 2 + rows.len());
    // A follow-up in a context started without a workspace names the same (inserted) one.
    let engine = Proxy::start(ProxyOpts {
        extra_policy: policy(""),
        ..Default::default()
    })
    .await;
    let mut e = engine.client(Proto::H1).await;
    let v = call(
        &mut e,
        ALICE,
        "SendMessage",
        message(text(), Value::Null, Value::Null),
    )
    .await;
    let ctx = v["result"]["task"]["contextId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut follow = message(text(), Value::Null, Value::Null);
    follow["message"]["contextId"] = json!(ctx);
    let v = call(&mut e, ALICE, "SendMessage", follow).await;
    assert!(v.get("result").is_some(), "{v}");
    // Off: the agent decides.
    let (up2, p2) = Proxy::with_recorder(
        Reply::Echo,
        ProxyOpts {
            extra_policy: policy("").replace("[authz]\n", "[authz]\nrequire_workspace = false\n"),
            ..Default::default()
        },
    )
    .await;
    let mut c2 = p2.client(Proto::H1).await;
    let v = call(
        &mut c2,
        DAN,
        "SendMessage",
        message(text(), Value::Null, Value::Null),
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
    let body: Value = serde_json::from_slice(&up2.rpc_requests()[0].body).unwrap();
    assert!(
        body["params"]["message"].get("metadata").is_none(),
        "{body}"
    );
}
