use super::*;
use std::os::unix::fs::PermissionsExt;

/// A small good policy (the embedded engine, bearer `ci-bot` with the token `test`); other
/// modules' tests build on it.
pub(crate) const GOOD: &str = r#"
[server]
listen = "127.0.0.1:8443"
public_url = "https://127.0.0.1:8443/"

[tls]
dev = true

[[upstreams]]
name = "engine"
url = "embedded"

[auth]
[[auth.bearer]]
principal = "ci-bot"
token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
"#;

fn load(text: &str) -> Result<Policy, PolicyError> {
    Policy::from_toml(Path::new("p.toml"), text, LoadMode::Check)
}

#[test]
fn good_policy_loads_with_defaults() {
    let p = load(GOOD).unwrap();
    assert_eq!(p.server.listen.port(), 8443);
    assert_eq!(p.tls.cert_file, PathBuf::from("certs/dev/server.pem"));
    assert_eq!(p.a2a.max_body_bytes, 32 * 1024 * 1024);
    assert_eq!(p.a2a.requests.max_json_values, 1 << 20);
    assert_eq!(p.limits.request_bytes_per_principal, 256 << 20);
    assert_eq!(p.limits.request_bytes, 1 << 30);
    let bounded = load(&GOOD.replacen("[auth]\n", "[a2a]\nmax_json_values = 1024\n[auth]\n", 1));
    assert_eq!(bounded.unwrap().a2a.requests.max_json_values, 1024);
    assert_eq!(p.auth.bearer[0].token_sha256, sha256(b"test"));
    assert!(p.summary().contains("ci-bot"));
}

#[test]
fn admin_listener_is_loopback_unless_exposed_explicitly() {
    assert_eq!(load(GOOD).unwrap().server.admin_listen, None);
    let with = |extra: &str| GOOD.replacen("[server]\n", &format!("[server]\n{extra}"), 1);
    let p = load(&with("admin_listen = \"127.0.0.1:9901\"\n")).unwrap();
    assert_eq!(
        p.server.admin_listen,
        Some("127.0.0.1:9901".parse().unwrap())
    );
    assert!(p.summary().contains("admin    http://127.0.0.1:9901/"));
    assert!(load(&with("admin_listen = \"[::1]:0\"\n")).is_ok());
    let exposed = "admin_listen = \"0.0.0.0:9901\"\nadmin_allow_non_loopback = true\n";
    assert_eq!(
        load(&with(exposed)).unwrap().server.admin_listen,
        Some("0.0.0.0:9901".parse().unwrap())
    );
    let e = load(&with("admin_listen = \"0.0.0.0:9901\"\n")).unwrap_err();
    assert!(e.message.contains("admin_allow_non_loopback"), "{e}");
}

#[test]
fn http2_to_an_agent_is_off_unless_asked_and_its_stream_bound_defaults_to_100() {
    let at = |extra: &str| {
        GOOD.replacen(
            "url = \"embedded\"",
            &format!("url = \"http://127.0.0.1:1/\"\n{extra}"),
            1,
        )
    };
    let p = load(&at("")).unwrap();
    assert!(!p.upstreams[0].http2);
    let p = load(&at("http2 = true")).unwrap();
    assert!(p.upstreams[0].http2);
    assert_eq!(p.upstreams[0].http2_max_streams, 100);
    assert!(
        p.summary()
            .contains("HTTP/2, at most 100 streams a connection"),
        "{}",
        p.summary()
    );
    let p = load(&at("http2 = true\nhttp2_max_streams = 1000")).unwrap();
    assert_eq!(p.upstreams[0].http2_max_streams, 1000);
}

#[test]
fn errors_name_file_line_and_key() {
    // (edit applied to GOOD: (from, to)), expected key fragment, expected line (None = any)
    let cases: &[(&str, &str, &str, Option<usize>)] = &[
        ("[tls]\n", "[tls]\nbogus = 1\n", "bogus", Some(7)),
        (
            "listen = \"127.0.0.1:8443\"",
            "listen = \"localhost\"",
            "server.listen",
            Some(3),
        ),
        (
            "public_url = \"https://127.0.0.1:8443/\"",
            "public_url = \"http://127.0.0.1:8443/\"",
            "server.public_url",
            Some(4),
        ),
        (
            "public_url = \"https://127.0.0.1:8443/\"",
            "public_url = \"https://u:p@127.0.0.1:8443/\"",
            "server.public_url",
            Some(4),
        ),
        (
            "url = \"embedded\"",
            "url = \"ftp://x/\"",
            "upstreams[0].url",
            Some(11),
        ),
        (
            "url = \"embedded\"",
            "url = \"http://u:p@127.0.0.1:1/\"",
            "upstreams[0].url",
            Some(11),
        ),
        (
            "name = \"engine\"",
            "name = \"a b\"",
            "upstreams[0].name",
            Some(10),
        ),
        // HTTP/2 to agents: not for the in-process engine; its stream bound needs it on, and
        // stays within 1-1000.
        ("url = \"embedded\"", "url = \"embedded\"\nhttp2 = true", "upstreams[0].http2", Some(11)),
        (
            "url = \"embedded\"",
            "url = \"http://127.0.0.1:1/\"\nhttp2_max_streams = 10",
            "upstreams[0].http2_max_streams",
            Some(11),
        ),
        (
            "url = \"embedded\"",
            "url = \"http://127.0.0.1:1/\"\nhttp2 = true\nhttp2_max_streams = 0",
            "upstreams[0].http2_max_streams",
            Some(11),
        ),
        (
            "url = \"embedded\"",
            "url = \"http://127.0.0.1:1/\"\nhttp2 = true\nhttp2_max_streams = 1001",
            "upstreams[0].http2_max_streams",
            Some(11),
        ),
        ("url = \"embedded\"", "url = \"http://127.0.0.1:1/\"\nhttp2 = \"yes\"", "expected a boolean", Some(12)),
        (
            "token_sha256 = \"9f86",
            "token_sha256 = \"zz86",
            "auth.bearer[0].token_sha256",
            Some(16),
        ),
        (
            "principal = \"ci-bot\"",
            "principal = \"ci-bot\"\ntoken_env = \"X\"",
            "auth.bearer[0].principal",
            Some(15),
        ),
        ("dev = true", "dev = false", "tls", None),
        ("[tls]\n", "[tls]\nclient_auth = \"sometimes\"\n", "tls.client_auth", Some(7)),
        ("[tls]\n", "[tls]\nclient_auth = \"required\"\n", "tls.client_ca_file", None),
        // A CA or CRL file without client_auth: client certificates were meant, not set.
        ("[tls]\n", "[tls]\nclient_ca_file = \"ca.pem\"\n", "tls.client_ca_file", None),
        ("[tls]\n", "[tls]\nclient_crl_file = \"c.pem\"\n", "tls.client_crl_file", None),
        ("[auth]\n", "[auth]\n[auth.jwt]\nissuer = \"i\"\naudience = \"a\"\njwks_file = \"j\"\nalgorithms = [\"HS256\"]\n", "auth.jwt.algorithms", Some(18)),
        ("[auth]\n", "[auth]\n[auth.jwt]\nissuer = \"i\"\naudience = \"a\"\njwks_url = \"http://x/\"\nalgorithms = [\"ES256\"]\n", "auth.jwt.jwks_url", Some(17)),
        ("[auth]\n", "[auth]\n[auth.api_key]\nheader = \"Authorization\"\n[[auth.api_key.keys]]\nprincipal = \"p\"\nkey_env = \"HOME\"\n", "auth.api_key.header", Some(15)),
        ("[auth]\n", "[auth]\n[[auth.basic]]\nusername = \"a:b\"\npassword_env = \"HOME\"\n", "auth.basic[0].username", Some(15)),
        ("[auth]\n", "[auth]\n[[auth.basic]]\nusername = \"alice\"\npassword_hash = \"$2b$10$bcrypt\"\n", "auth.basic[0].password_hash", Some(16)),
        ("[auth]\n", "[auth]\nprincipal_header = \"Authorization\"\n", "auth.principal_header", Some(14)),
        ("[auth]\n", "[auth]\nfailures_per_minute = 0\n", "auth.failures_per_minute", Some(14)),
        // A refresh per forged `kid`, unbounded: refused below a second.
        ("[auth]\n", "[auth]\n[auth.jwt]\nissuer = \"i\"\naudience = \"a\"\njwks_file = \"j\"\nalgorithms = [\"ES256\"]\njwks_min_refresh_ms = 0\n", "auth.jwt.jwks_min_refresh_ms", Some(19)),
        ("[auth]\n", "[auth]\n[auth.jwt]\nissuer = \"i\"\naudience = \"a\"\njwks_file = \"j\"\nalgorithms = [\"ES256\"]\njwks_min_refresh_ms = 999\n", "auth.jwt.jwks_min_refresh_ms", Some(19)),
        ("[server]\n", "[server]\nagent_paths = [\"/iac-code/../x\"]\n", "server.agent_paths[0]", Some(3)),
        ("[server]\n", "[server]\nagent_paths = [\"/health\"]\n", "server.agent_paths[0]", Some(3)),
        ("[server]\n", "[server]\nadmin_listen = \"localhost:9901\"\n", "server.admin_listen", Some(3)),
        ("[auth]\n", "[card]\nupstream = \"nobody\"\n[auth]\n", "card.upstream", Some(14)),
        ("[auth]\n", "[card]\nsource = \"static\"\nupstream = \"engine\"\n[card.static]\nname = \"x\"\n[auth]\n", "card.upstream", None),
        // A static card must be an A2A 1.0 AgentCard (here: no description, version, ...).
        ("[auth]\n", "[card]\nsource = \"static\"\n[card.static]\nname = \"x\"\n[auth]\n", "card.static", None),
        // ... checked by JSON names, as the edge publishes it: one member by both names is refused.
        ("[auth]\n", "[card]\nsource = \"static\"\n[card.static]\nname = \"x\"\ndescription = \"d\"\nversion = \"1\"\ndocumentationUrl = \"https://docs.example/\"\ndocumentation_url = \"http://10.0.0.5:8000/\"\n[card.static.capabilities]\n[auth]\n", "is given twice", None),
        // ... and only what the schema knows is served: a member it does not know is named.
        ("[auth]\n", "[card]\nsource = \"static\"\n[card.static]\nname = \"x\"\ndescription = \"d\"\nversion = \"1\"\ninternalUrl = \"http://10.0.0.5:8000/\"\n[card.static.capabilities]\nstreaming = true\nx-vendor = 1\n[auth]\n", "internalUrl, capabilities.x-vendor", None),
        ("[server]\n", "[server]\nadmin_listen = \"0.0.0.0:9901\"\n", "server.admin_listen", Some(3)),
        ("[server]\n", "[server]\nadmin_listen = \"[::]:9901\"\n", "server.admin_listen", Some(3)),
        ("[server]\n", "[server]\nadmin_listen = \"10.0.0.1:9901\"\n", "server.admin_listen", Some(3)),
        // Other spellings of loopback that are not plain loopback addresses: refused too.
        ("[server]\n", "[server]\nadmin_listen = \"127.1:9901\"\n", "server.admin_listen", Some(3)),
        ("[server]\n", "[server]\nadmin_listen = \"[::ffff:127.0.0.1]:9901\"\n", "server.admin_listen", Some(3)),
        ("[server]\n", "[server]\nadmin_listen = \"2130706433:9901\"\n", "server.admin_listen", Some(3)),
        ("[server]\n", "[server]\nadmin_listen = \"127.0.0.1:8443\"\n", "server.admin_listen", Some(3)),
        (
            "[server]\n",
            "[server]\nmax_header_bytes = 10\n",
            "server.max_header_bytes",
            Some(3),
        ),
        ("[server]\n", "[server]\nsend_buffer_bytes = 4095\n", "server.send_buffer_bytes", Some(3)),
        ("[server]\n", "[server]\nsend_buffer_bytes = 16777217\n", "server.send_buffer_bytes", Some(3)),
        ("[server]\n", "[server]\nsend_buffer_bytes = -1\n", "expected u64", Some(3)),
        ("[server]\n", "[server]\nsend_buffer_bytes = \"64k\"\n", "expected u64", Some(3)),
        (
            "[auth]\n",
            "[a2a]\nmax_body_bytes = 0\n[auth]\n",
            "a2a.max_body_bytes",
            Some(14),
        ),
        (
            "[auth]\n",
            "[a2a]\nmax_json_values = 1023\n[auth]\n",
            "a2a.max_json_values",
            Some(14),
        ),
        (
            "[auth]\n",
            "[a2a]\nmax_json_values = 67108865\n[auth]\n",
            "a2a.max_json_values",
            Some(14),
        ),
        (
            "[auth]\n",
            "[limits]\nrequest_bytes_per_principal = 65535\n[auth]\n",
            "limits.request_bytes_per_principal",
            None,
        ),
        (
            "[auth]\n",
            "[limits]\nrequest_bytes = 1099511627777\n[auth]\n",
            "limits.request_bytes",
            None,
        ),
    ];
    for (from, to, key, line) in cases {
        assert!(GOOD.contains(from), "{from}");
        let text = GOOD.replacen(from, to, 1);
        let e = load(&text).unwrap_err();
        let shown = e.to_string();
        assert!(shown.starts_with("p.toml"), "{shown}");
        assert!(
            e.key.contains(key) || e.message.contains(key),
            "{key}: {shown}"
        );
        if let Some(l) = line {
            assert_eq!(e.line, Some(*l), "{shown}");
        }
    }
}

#[test]
fn refuses_to_start_without_authentication_unless_anonymous_is_explicit() {
    let no_auth = GOOD.split("[auth]").next().unwrap().to_string();
    let e = load(&no_auth).unwrap_err();
    assert_eq!(e.key, "auth");
    assert!(e.message.contains("allow_anonymous"));
    let anon = format!("{no_auth}[auth]\nallow_anonymous = true\n");
    assert!(load(&anon).unwrap().auth.bearer.is_empty());
}

#[test]
fn env_secret_must_exist() {
    let text = GOOD.replacen(
        "token_sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"",
        "token_env = \"A2A_EDGE_TEST_SURELY_UNSET_VAR\"",
        1,
    );
    let e = load(&text).unwrap_err();
    assert!(e.message.contains("not set"), "{e}");
    assert!(!e.to_string().contains("9f86"));
}

#[test]
fn token_file_is_generated_only_when_serving_and_read_back() {
    let dir = std::env::temp_dir().join(format!("a2a-edge-policy-{}", random_token()));
    let file = dir.join("sub").join("token");
    let text = GOOD.replacen(
        "token_sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"",
        &format!(
            "token_file = {:?}\ngenerate_if_missing = true",
            file.display().to_string()
        ),
        1,
    );
    let checked = load(&text).unwrap();
    assert!(checked.auth.bearer[0].generated.is_none());
    assert!(!file.exists(), "check must not create files");
    let served = Policy::from_toml(Path::new("p.toml"), &text, LoadMode::Serve).unwrap();
    let g = served.auth.bearer[0].generated.clone().unwrap();
    assert!(g.created);
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let again = Policy::from_toml(Path::new("p.toml"), &text, LoadMode::Serve).unwrap();
    let g2 = again.auth.bearer[0].generated.clone().unwrap();
    assert!(!g2.created);
    assert_eq!(g.token, g2.token);
    assert_eq!(
        again.auth.bearer[0].token_sha256,
        sha256(g.token.as_bytes())
    );
    // A token file others can read is refused.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(Policy::from_toml(Path::new("p.toml"), &text, LoadMode::Serve).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An operator's own token file (no `generate_if_missing`) is a secret, never a dev token
/// to print; its secret is its one line (CRLF or LF ended), and a file with a second
/// non-empty line is refused rather than read one way or the other.
#[test]
fn an_operators_token_file_is_a_secret_of_one_line() {
    let dir = std::env::temp_dir().join(format!("a2a-edge-policy-{}", random_token()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("token");
    let text = GOOD.replacen(
        "token_sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"",
        &format!("token_file = {:?}", file.display().to_string()),
        1,
    );
    // (file contents, the token read, or None: refused)
    let cases: [(&str, Option<&str>); 7] = [
        ("s3cret-one\n", Some("s3cret-one")),
        ("s3cret-one", Some("s3cret-one")),
        ("s3cret-one\r\n", Some("s3cret-one")),
        ("s3cret-one\n\n  \n", Some("s3cret-one")),
        ("s3cret-one\n# rotated 2024\n", None),
        ("\ns3cret-one\n", None),
        ("", None),
    ];
    for (contents, token) in cases {
        std::fs::write(&file, contents).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let served = Policy::from_toml(Path::new("p.toml"), &text, LoadMode::Serve);
        match token {
            Some(t) => {
                let p = served.unwrap_or_else(|e| panic!("{contents:?}: {e}"));
                assert!(p.auth.bearer[0].generated.is_none(), "{contents:?}");
                assert_eq!(p.auth.bearer[0].token_sha256, sha256(t.as_bytes()));
            }
            None => assert!(served.is_err(), "{contents:?}"),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `[limits.principals]` name must name a caller: a misspelt one would leave the principal
/// it meant at the default rate.
#[test]
fn rate_overrides_name_principals_that_exist() {
    // (the override's name, allowed anonymous callers, loads)
    let cases = [
        ("ci-bot", false, true),
        ("\"jwt:dora\"", false, true),
        ("\"mtls:spiffe://example.org/ci\"", false, true),
        ("anonymous", true, true),
        ("ci-bto", false, false),
        ("anonymous", false, false),
        ("\"jwt:\"", false, false),
        ("\"mtls:\"", false, false),
        ("CI-BOT", false, false),
    ];
    for (name, anonymous, loads) in cases {
        let auth = if anonymous {
            "[auth]\nallow_anonymous = true\n"
        } else {
            "[auth]\n"
        };
        let text = format!(
            "{}[limits.principals]\n{name} = {{ requests_per_second = 1, burst = 1 }}\n",
            GOOD.replace("[auth]\n", auth)
        );
        match load(&text) {
            Ok(p) => {
                assert!(loads, "{name} loaded");
                assert_eq!(p.limits.rates.principal_overrides.len(), 1);
            }
            Err(e) => {
                assert!(!loads, "{name}: {e}");
                assert!(e.to_string().contains("limits.principals."), "{e}");
            }
        }
    }
}

#[test]
fn request_rules_come_from_the_policy_or_the_iac_code_defaults() {
    let text = GOOD.replacen(
        "[auth]\n",
        "[a2a]\nrequired_extensions = [\"urn:x:req\"]\nextra_text_media_types = [\"text/csv\"]\n[a2a.push]\nallow_http = true\n[workspace]\nallowed_roots = [\"/tmp\"]\ncheck_filesystem = false\n[auth]\n",
        1,
    );
    let p = load(&text).unwrap();
    let r = &p.a2a.requests;
    assert_eq!(r.required_extensions, ["urn:x:req"]);
    assert!(r.media.text().iter().any(|t| t == "text/csv"));
    assert!(r.push.allow_http);
    assert!(!r.workspace.check_filesystem);
    let summary = p.summary();
    assert!(
        summary.contains("urn:x:req") && summary.contains("lexical"),
        "{summary}"
    );
    // Defaults: the iac-code media types, https-only callbacks, filesystem checks.
    let d = load(GOOD).unwrap();
    assert!(d
        .a2a
        .requests
        .media
        .multimodal()
        .iter()
        .any(|t| t == "image/png"));
    assert!(!d.a2a.requests.push.allow_http);
    assert!(d.a2a.requests.workspace.check_filesystem);
}

/// GOOD with the workspace root `root`, `[authz]` and extra auth lines.
fn tenants_policy(root: &Path, auth: &str, authz: &str) -> String {
    format!(
        "{GOOD}tenant = \"team-a\"\ngroups = [\"deployers\", \"ops\"]\n{auth}\n[workspace]\nallowed_roots = [\"{}\"]\n{authz}",
        root.display()
    )
}

#[test]
fn tenants_groups_and_rules_load() {
    let dir = crate::validate::workspace::testdir::TestDir::new("policy-authz");
    dir.mkdir("ws/team-a");
    let root = dir.join("ws");
    let authz = format!(
        r#"
[authz]
default = "deny"
[[authz.rules]]
name = "members"
tenants = ["*"]
methods = ["read", "write", "CreateTaskPushNotificationConfig"]
workspace_roots = ["{root}/{{tenant}}"]
metadata_allowed = ["iac_code.iac_code_model"]
[[authz.rules]]
name = "auditors"
groups = ["auditors"]
methods = ["read"]
"#,
        root = root.display()
    );
    let p = load(&tenants_policy(&root, "", &authz)).unwrap();
    let b = &p.auth.bearer[0];
    assert_eq!(b.attributes.tenant.as_deref(), Some("team-a"));
    assert_eq!(b.attributes.groups, ["deployers", "ops"]);
    let z = p.authz.as_ref().unwrap();
    assert!(!z.default_allow);
    assert_eq!(z.rules.len(), 2);
    assert!(z.rules[0].create_push_configs, "granted with the method");
    assert!(!z.rules[1].create_push_configs);
    assert!(p.summary().contains("authz    2 rule(s)"));
    // Without [authz] the summary says in plain words that everything is allowed.
    let open = load(&tenants_policy(&root, "", "")).unwrap();
    assert!(open.authz.is_none());
    assert!(open
        .summary()
        .contains("every authenticated caller may call every method"));
}

#[test]
fn tenant_and_authz_errors_name_the_key() {
    let dir = crate::validate::workspace::testdir::TestDir::new("policy-authz-bad");
    dir.mkdir("ws/team-a");
    dir.mkdir("outside");
    let root = dir.join("ws");
    let r = root.display().to_string();
    let o = dir.join("outside").display().to_string();
    let rule = |body: &str| format!("[authz]\n[[authz.rules]]\nname = \"r\"\n{body}\n");
    let cases: Vec<(String, String, &str)> = vec![
        // (auth lines, authz section, key in the error)
        ("[[auth.bearer]]\nprincipal = \"x\"\ntoken_sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\ntenant = \"\"\n".into(), String::new(), "auth.bearer[1].tenant"),
        ("[[auth.bearer]]\nprincipal = \"x\"\ntoken_sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\ngroups = [\"a b\"]\n".into(), String::new(), "auth.bearer[1].groups"),
        (String::new(), rule("tenants = [\"*\"]\nmethods = [\"tasks/get\"]"), "authz.rules[0].methods"),
        (String::new(), rule("methods = [\"read\"]"), "authz.rules[0].name"),
        (String::new(), rule(&format!("tenants = [\"*\"]\nworkspace_roots = [\"{o}/{{tenant}}\"]")), "authz.rules[0].workspace_roots[0]"),
        (String::new(), rule(&format!("tenants = [\"*\"]\nworkspace_roots = [\"{r}/../outside/{{tenant}}\"]")), "authz.rules[0].workspace_roots[0]"),
        (String::new(), rule(&format!("tenants = [\"*\"]\nworkspace_roots = [\"{r}/{{team}}\"]")), "authz.rules[0].workspace_roots[0]"),
        (String::new(), rule("tenants = [\"*\"]\nmetadata_allowed = [\"a.*.b\"]"), "authz.rules[0].metadata_allowed"),
        (String::new(), rule("tenants = [\"*\"]\nbogus = 1"), "bogus"),
        (String::new(), "[authz]\ndefault = \"maybe\"\n".into(), "authz.default"),
        ("[auth.identity_assertion]\nkid = \"nope\"\n".into(), String::new(), "auth.identity_assertion.kid"),
        ("[auth.jwt]\nissuer = \"https://i\"\naudience = \"a\"\njwks_file = \"j.json\"\nalgorithms = [\"ES256\"]\ntenant_claim = \"org..tenant\"\n".into(), String::new(), "auth.jwt.tenant_claim"),
        ("[auth.mtls]\n[[auth.mtls.identities]]\nmatch = \"spiffe://x/*\"\ntenant = \"t\"\n".into(), String::new(), "auth.mtls.identities"),
    ];
    for (auth, authz, key) in cases {
        let text = tenants_policy(&root, &auth, &authz);
        let e = load(&text).unwrap_err();
        assert!(
            e.key.contains(key) || e.message.contains(key),
            "{key}: {e}\n{text}"
        );
    }
}

#[test]
fn identity_assertion_needs_an_asymmetric_card_key() {
    let dir = crate::validate::workspace::testdir::TestDir::new("policy-identity");
    let pem = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .unwrap()
        .serialize_pem();
    let key_file = dir.write("card.pem", pem.as_bytes());
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::env::set_var(
        "A2A_EDGE_TEST_HS_SECRET",
        "0123456789abcdef0123456789abcdef",
    );
    let card = format!(
        "[card]\nactive_kid = \"e1\"\n[[card.signing_keys]]\nkid = \"e1\"\nalg = \"ES256\"\nprivate_key_file = \"{}\"\n[[card.signing_keys]]\nkid = \"h1\"\nalg = \"HS256\"\nsecret_env = \"A2A_EDGE_TEST_HS_SECRET\"\n",
        key_file.display()
    );
    let with = |ia: &str| format!("{GOOD}{ia}\n{card}");
    let p = load(&with(
        "[auth.identity_assertion]\nkid = \"e1\"\nttl_secs = 30",
    ))
    .unwrap();
    let ia = p.auth.identity_assertion.as_ref().unwrap();
    assert_eq!(ia.header, "x-a2a-edge-identity");
    assert_eq!(ia.ttl.as_secs(), 30);
    for (ia, key) in [
        (
            "[auth.identity_assertion]\nkid = \"h1\"",
            "auth.identity_assertion.kid",
        ),
        (
            "[auth.identity_assertion]\nkid = \"e1\"\nttl_secs = 0",
            "auth.identity_assertion.ttl_secs",
        ),
        (
            "[auth.identity_assertion]\nkid = \"e1\"\nheader = \"Authorization\"",
            "auth.identity_assertion.header",
        ),
    ] {
        let e = load(&with(ia)).unwrap_err();
        assert_eq!(e.key, key, "{e}");
    }
    // A card key others can read is refused at load, whatever else the policy says.
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = load(&format!("{GOOD}\n{card}")).unwrap_err();
    assert_eq!(e.key, "card.signing_keys[0].private_key_file", "{e}");
    assert!(e.message.contains("chmod 600"), "{e}");
}

#[test]
fn static_principals_may_not_take_names_of_other_schemes() {
    let digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let bearer = |name: &str| {
        format!("[[auth.bearer]]\nprincipal = \"{name}\"\ntoken_sha256 = \"{digest}\"\n")
    };
    let api = |name: &str| {
        format!("[auth.api_key]\n[[auth.api_key.keys]]\nprincipal = \"{name}\"\nkey_sha256 = \"{digest}\"\n")
    };
    let basic =
        |name: &str| format!("[[auth.basic]]\nusername = \"{name}\"\npassword_env = \"HOME\"\n");
    let rows: Vec<(String, &str, bool)> = vec![
        (bearer("anonymous"), "auth.bearer[1].principal", false),
        (bearer("Anonymous"), "auth.bearer[1].principal", false),
        (bearer("jwt:alice"), "auth.bearer[1].principal", false),
        (bearer("JWT:alice"), "auth.bearer[1].principal", false),
        (
            bearer("mtls:spiffe://x/y"),
            "auth.bearer[1].principal",
            false,
        ),
        (
            bearer("api-key:X-API-Key"),
            "auth.bearer[1].principal",
            false,
        ),
        (api("anonymous"), "auth.api_key.keys[0].principal", false),
        (api("jwt:bob"), "auth.api_key.keys[0].principal", false),
        (basic("anonymous"), "auth.basic[0].username", false),
        (bearer("anonymous-bot"), "", true),
        (bearer("jwt-bot"), "", true),
        (bearer("ops:jwt:x"), "", true),
    ];
    for (extra, key, ok) in rows {
        let text = format!("{GOOD}{extra}");
        match load(&text) {
            Ok(_) => assert!(ok, "accepted {extra}"),
            Err(e) => {
                assert!(!ok, "refused {extra}: {e}");
                assert_eq!(e.key, key, "{e}");
                assert!(e.message.contains("anonymous"), "{e}");
                assert!(e.line.is_some(), "{e}");
            }
        }
    }
}

/// One name under two static schemes is one principal (one owner of tasks): it may carry
/// one tenant only, or two tenants' callers would share its tasks.
#[test]
fn a_principal_named_under_two_schemes_has_one_tenant() {
    let digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let tenant = |t: Option<&str>| t.map(|t| format!("tenant = \"{t}\"\n")).unwrap_or_default();
    let bearer = |name: &str, t: Option<&str>| {
        format!(
            "[[auth.bearer]]\nprincipal = \"{name}\"\ntoken_sha256 = \"{digest}\"\n{}",
            tenant(t)
        )
    };
    let api = |name: &str, t: Option<&str>| {
        format!("[auth.api_key]\n[[auth.api_key.keys]]\nprincipal = \"{name}\"\nkey_sha256 = \"{digest}\"\n{}", tenant(t))
    };
    let basic = |name: &str, t: Option<&str>| {
        format!(
            "[[auth.basic]]\nusername = \"{name}\"\npassword_env = \"HOME\"\n{}",
            tenant(t)
        )
    };
    // (extra entries after GOOD's bearer `ci-bot` with no tenant, the key refused or "")
    let rows: Vec<(String, &str)> = vec![
        (
            bearer("ci", Some("a")) + &api("ci", Some("b")),
            "auth.api_key.keys[0].principal",
        ),
        (
            bearer("ci", Some("a")) + &api("ci", None),
            "auth.api_key.keys[0].principal",
        ),
        (api("ci-bot", Some("a")), "auth.api_key.keys[0].principal"),
        (basic("ci-bot", Some("a")), "auth.basic[0].username"),
        (
            bearer("ci", Some("a")) + &basic("ci", Some("A")),
            "auth.basic[0].username",
        ),
        (
            bearer("ci", Some("a")) + &basic("ci", Some("a")) + &api("ci", Some("a")),
            "",
        ),
        (api("ci-bot", None) + &basic("ci-bot", None), ""),
        (bearer("ci", Some("a")) + &api("ci2", Some("b")), ""),
    ];
    for (extra, key) in rows {
        let text = format!("{GOOD}{extra}");
        match load(&text) {
            Ok(_) => assert_eq!(key, "", "accepted {extra}"),
            Err(e) => {
                assert_eq!(e.key, key, "{extra}: {e}");
                assert!(e.message.contains("one principal"), "{e}");
            }
        }
    }
}

#[test]
fn require_workspace_defaults_to_whether_rules_manage_workspaces() {
    let dir = crate::validate::workspace::testdir::TestDir::new("policy-reqws");
    dir.mkdir("ws/team-a");
    let root = dir.join("ws");
    let with_roots = format!(
        "[authz]\n[[authz.rules]]\nname = \"m\"\ntenants = [\"*\"]\nmethods = [\"*\"]\nworkspace_roots = [\"{}/{{tenant}}\"]\n",
        root.display()
    );
    let methods_only =
        "[authz]\n[[authz.rules]]\nname = \"m\"\nprincipals = [\"*\"]\nmethods = [\"*\"]\n";
    let rows = [
        (with_roots.clone(), true),
        (methods_only.to_string(), false),
        (
            with_roots.replace("[authz]\n", "[authz]\nrequire_workspace = false\n"),
            false,
        ),
        (
            methods_only.replace("[authz]\n", "[authz]\nrequire_workspace = true\n"),
            true,
        ),
    ];
    for (authz, want) in rows {
        let p = load(&tenants_policy(&root, "", &authz)).unwrap();
        assert_eq!(p.authz.unwrap().require_workspace, want, "{authz}");
    }
}

#[test]
fn state_settings_are_checked_where_they_are_written() {
    std::env::set_var("A2A_EDGE_POLICY_TEST_SECRET", "x".repeat(40));
    std::env::set_var("A2A_EDGE_POLICY_TEST_SHORT", "short");
    let base = "[state]\nbackend = \"redis\"\nredis_url = \"redis://127.0.0.1:6379/0\"\npage_token_secret_env = \"A2A_EDGE_POLICY_TEST_SECRET\"\n";
    let with = |extra: &str| format!("{GOOD}{base}{extra}");
    let p = load(&with("")).unwrap();
    assert_eq!(p.state.backend(), "redis");
    // The secret never shows in a debug print of the policy.
    assert_eq!(p.state.page_token_secret, Some("x".repeat(40)));
    let printed = format!("{p:?}");
    assert!(!printed.contains(&"x".repeat(40)), "{printed}");
    assert!(
        printed.contains("page_token_secret: Some(\"<redacted>\")"),
        "{printed}"
    );
    assert_eq!(p.state.busy_lease, Duration::from_secs(30));
    assert_eq!(p.state.task_retention, Duration::from_secs(7 * 24 * 3600));
    assert!(
        p.summary().contains("busy contexts (lease 30000 ms)"),
        "{}",
        p.summary()
    );
    assert!(
        p.summary().contains("kept 7 d after its last write"),
        "{}",
        p.summary()
    );
    assert!(
        p.summary()
            .contains("up to 64 at a time, spent within 100 ms"),
        "{}",
        p.summary()
    );
    let p = load(&with("task_retention_ms = 3600000\nbusy_lease_ms = 5000\n")).unwrap();
    assert_eq!(p.state.task_retention, Duration::from_secs(3600));
    assert_eq!(p.state.busy_lease, Duration::from_secs(5));
    assert_eq!(p.state.max_tasks_per_owner, 100_000);
    let p = load(&with("max_tasks_per_owner = 16\n")).unwrap();
    assert_eq!(p.state.max_tasks_per_owner, 16);
    let p = load(&with("rate_lease_max = 1\nrate_lease_ms = 1000\n")).unwrap();
    let r = p.state.redis.as_ref().unwrap();
    assert_eq!(
        (r.rate_lease_max, r.rate_lease),
        (1, Duration::from_secs(1))
    );
    // (policy, the key the error names)
    let cases: Vec<(String, &str)> = vec![
        (with("task_retention_ms = 999\n"), "state.task_retention_ms"),
        (with("task_retention_ms = 99999999999999\n"), "state.task_retention_ms"),
        (with("busy_lease_ms = 299\n"), "state.busy_lease_ms"),
        (with("busy_lease_ms = 3600001\n"), "state.busy_lease_ms"),
        // A lease is renewed every third of it: three round trips must fit.
        (with("timeout_ms = 1000\nbusy_lease_ms = 3000\n"), "state.busy_lease_ms"),
        (with("max_tasks_per_owner = 15\n"), "state.max_tasks_per_owner"),
        (with("max_tasks_per_owner = 100000001\n"), "state.max_tasks_per_owner"),
        (
            format!("{GOOD}[state]\nbackend = \"memory\"\nmax_tasks_per_owner = 100\n"),
            "state.max_tasks_per_owner",
        ),
        (with("rate_lease_max = 0\n"), "state.rate_lease_max"),
        (with("rate_lease_max = 1025\n"), "state.rate_lease_max"),
        (with("rate_lease_ms = 0\n"), "state.rate_lease_ms"),
        (with("rate_lease_ms = 1001\n"), "state.rate_lease_ms"),
        (with("timeout_ms = 0\n"), "state.timeout_ms"),
        (with("timeout_ms = 60001\n"), "state.timeout_ms"),
        (with("key_prefix = \"\"\n"), "state.key_prefix"),
        (with("key_prefix = \"a b\"\n"), "state.key_prefix"),
        (with(&format!("key_prefix = \"{}\"\n", "k".repeat(65))), "state.key_prefix"),
        (with("redis_ca_file = \"ca.pem\"\n"), "state.redis_ca_file"),
        (
            with("redis_password_env = \"HOME\"\nredis_password_file = \"p\"\n"),
            "state.redis_password_env",
        ),
        (with("bogus = 1\n"), "bogus"),
        (
            format!("{GOOD}[state]\nbackend = \"valkey\"\n"),
            "state.backend",
        ),
        (
            format!("{GOOD}[state]\nbackend = \"memory\"\nbusy_lease_ms = 5000\n"),
            "state.busy_lease_ms",
        ),
        (
            format!("{GOOD}[state]\ntask_retention_ms = 3600000\n"),
            "state.task_retention_ms",
        ),
        (
            format!("{GOOD}[state]\nrate_lease_max = 8\n"),
            "state.rate_lease_max",
        ),
        (
            format!("{GOOD}[state]\nbackend = \"redis\"\nredis_url = \"redis://h/0\"\npage_token_secret_env = \"A2A_EDGE_POLICY_TEST_SHORT\"\n"),
            "state.page_token_secret_env",
        ),
    ];
    for (text, key) in cases {
        match load(&text) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => assert!(
                e.key.contains(key) || e.message.contains(key),
                "{key}: {e}\n{text}"
            ),
        }
    }
    // URLs: redis:// and rediss:// with a host, or a Unix socket on this host; never a
    // password inside.
    for url in [
        "redis://127.0.0.1:6379/0",
        "rediss://redis.internal:6380/2",
        "unix:///run/redis/redis.sock",
        "unix:///run/redis.sock?db=3",
        "redis+unix:///tmp/r/redis.sock?db=0",
        &format!("unix:///{}/redis.sock", "d".repeat(95)),
    ] {
        let text = format!("{GOOD}{}", base.replace("redis://127.0.0.1:6379/0", url));
        let p = load(&text).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(p.state.redis.unwrap().url.as_str(), url);
    }
    for url in [
        "http://127.0.0.1:6379/0",
        "redis://:hunter2@127.0.0.1/0",
        "redis://user:hunter2@127.0.0.1/0",
        "redis:///0",
        "unix://redis.internal/run/redis.sock",
        "unix:///run/redis.sock?pass=hunter2",
        "unix:///run/redis.sock?db=0&user=default&pass=hunter2",
        "unix:///run/redis.sock?db=zero",
        "unix:///run/redis.sock?db=",
        "unix:///run/redis.sock#hunter2",
        "unix:///",
        "unix:///run/",
        "unix:relative/redis.sock",
        &format!("unix:///{}/redis.sock", "d".repeat(96)),
        "not a url",
    ] {
        let text = format!("{GOOD}{}", base.replace("redis://127.0.0.1:6379/0", url));
        let e = load(&text).unwrap_err();
        assert_eq!(e.key, "state.redis_url", "{url}: {e}");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}

#[test]
fn push_allow_lists_are_checked_at_load() {
    let with = |extra: &str| format!("{GOOD}[a2a.push]\n{extra}");
    let p = load(&with(
        "allowed_networks = [\"10.20.0.0/16\", \"fd00::1\", \"10.1.2.3/8\"]\nallowed_hosts = [\"Hooks.Internal.\"]\n",
    ))
    .unwrap();
    let push = &p.a2a.requests.push;
    let nets: Vec<String> = push
        .allowed_networks
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(nets, ["10.20.0.0/16", "fd00::1/128", "10.0.0.0/8"]);
    assert_eq!(push.allowed_hosts, ["hooks.internal"]);
    let cases = [
        (
            "allowed_networks = [\"0.0.0.0/0\"]\n",
            "a2a.push.allowed_networks[0]",
        ),
        (
            "allowed_networks = [\"10.0.0.0/8\", \"::/0\"]\n",
            "a2a.push.allowed_networks[1]",
        ),
        (
            "allowed_networks = [\"10.0.0.0/33\"]\n",
            "a2a.push.allowed_networks[0]",
        ),
        (
            "allowed_networks = [\"intranet\"]\n",
            "a2a.push.allowed_networks[0]",
        ),
        (
            "allowed_hosts = [\"localhost\"]\n",
            "a2a.push.allowed_hosts[0]",
        ),
        (
            "allowed_hosts = [\"a.localhost\"]\n",
            "a2a.push.allowed_hosts[0]",
        ),
        ("allowed_hosts = [\"a b\"]\n", "a2a.push.allowed_hosts[0]"),
        (
            "allowed_hosts = [\"*.internal\"]\n",
            "a2a.push.allowed_hosts[0]",
        ),
        ("allowed_hosts = [\"\"]\n", "a2a.push.allowed_hosts[0]"),
    ];
    for (extra, key) in cases {
        let e = load(&with(extra)).unwrap_err();
        assert_eq!(e.key, key, "{extra}: {e}");
    }
}

/// Two upstreams and two agents (`tf`, `ros`), with `extra` appended.
fn agents_policy(agents: &str, extra: &str) -> String {
    format!(
        "{GOOD}\n[[upstreams]]\nname = \"second\"\nurl = \"http://127.0.0.1:9/\"\n{extra}\n{agents}"
    )
}

const TWO_AGENTS: &str = r#"
[[agents]]
name = "tf"
public_url = "https://edge.example/agents/tf/"
upstreams = ["engine"]

[[agents]]
name = "ros"
public_url = "https://edge.example/agents/ros/"
upstreams = ["second"]
"#;

/// The request byte budgets hold the largest request the policy's `[a2a]` bounds admit
/// (an agent's own included: twice `max_body_bytes` and 192 bytes for each of
/// `max_json_values`), and the largest task a ListTasks page reads (`list_tasks_page_bytes`
/// in place of `max_body_bytes`): a default grows to it, an explicit budget below it is refused (it would
/// answer such a request 429 for ever), and the total holds at least one principal's.
#[test]
fn request_budgets_hold_the_largest_request() {
    const MIB: usize = 1 << 20;
    let small = "[a2a]\nmax_body_bytes = 4096\nmax_json_values = 1024\n";
    // (a ListTasks page of a task as large as such a body)
    let page = "list_tasks_page_bytes = 4096\n";
    // (the [a2a] and [limits] sections, per principal and total, or the refused key)
    type Budgets = Result<(usize, usize), &'static str>;
    let rows: [(&str, String, Budgets); 13] = [
        // (an explicit total bounds the default per principal, and must hold the largest)
        (
            small,
            format!("{page}request_bytes = 1048576\n"),
            Ok((1_048_576, 1_048_576)),
        ),
        (
            "[a2a]\nmax_body_bytes = 1048576\n",
            "request_bytes = 134217728\n".into(),
            Err("limits.request_bytes"),
        ),
        ("", String::new(), Ok((256 * MIB, 1024 * MIB))),
        (
            "[a2a]\nmax_body_bytes = 134217728\n",
            String::new(),
            Ok((448 * MIB, 1024 * MIB)),
        ),
        (
            "[a2a]\nmax_json_values = 8388608\n",
            String::new(),
            Ok((1600 * MIB, 1600 * MIB)),
        ),
        (
            small,
            format!("{page}request_bytes_per_principal = 204800\nrequest_bytes = 204800\n"),
            Ok((204_800, 204_800)),
        ),
        (
            small,
            format!("{page}request_bytes_per_principal = 204799\n"),
            Err("limits.request_bytes_per_principal"),
        ),
        (
            "",
            "request_bytes_per_principal = 268435455\n".into(),
            Err("limits.request_bytes_per_principal"),
        ),
        (
            "",
            "request_bytes = 268435455\n".into(),
            Err("limits.request_bytes"),
        ),
        (
            small,
            format!("{page}request_bytes_per_principal = 1048576\nrequest_bytes = 1048575\n"),
            Err("limits.request_bytes"),
        ),
        // A ListTasks page may read a task as large as its budget, held as a request is: the
        // budgets hold that too (at the default page budget, 4 MiB: 8 MiB and the tree).
        (
            small,
            "request_bytes_per_principal = 1048576\n".into(),
            Err("limits.request_bytes_per_principal"),
        ),
        (
            small,
            "list_tasks_page_bytes = 8192\nrequest_bytes_per_principal = 212991\n".into(),
            Err("limits.request_bytes_per_principal"),
        ),
        (
            "",
            "list_tasks_page_bytes = 134217728\n".into(),
            Ok((448 * MIB, 1024 * MIB)),
        ),
    ];
    for (a2a, limits, want) in rows {
        let text = GOOD.replacen("[auth]\n", &format!("{a2a}[limits]\n{limits}[auth]\n"), 1);
        match (load(&text), want) {
            (Ok(p), Ok(budgets)) => assert_eq!(
                (p.limits.request_bytes_per_principal, p.limits.request_bytes),
                budgets,
                "{a2a}{limits}"
            ),
            (Err(e), Err(key)) => {
                assert_eq!(e.key, key, "{a2a}{limits}: {e}");
                assert!(e.message.contains("must be at least"), "{e}");
            }
            (got, _) => panic!("{a2a}{limits}: {:?}", got.map(|p| p.limits.request_bytes)),
        }
    }
    // An agent's own bounds count too.
    let own = "[agents.a2a]\nmax_body_bytes = 134217728\n";
    let agents = TWO_AGENTS.replacen(
        "upstreams = [\"second\"]\n",
        &format!("upstreams = [\"second\"]\n{own}"),
        1,
    );
    let p = load(&agents_policy(&agents, "")).unwrap();
    assert_eq!(p.limits.request_bytes_per_principal, 448 * MIB);
    assert!(
        p.summary().contains(&format!(
            "limits   requests being read and checked hold <= {} bytes a caller, {} in all\n",
            448 * MIB,
            1024 * MIB
        )),
        "{}",
        p.summary()
    );
    // With [[agents]] each with bounds of its own, the global ones bind nothing.
    let own = "[agents.a2a]\nmax_body_bytes = 4096\nmax_json_values = 1024\n";
    let agents = TWO_AGENTS
        .replacen(
            "upstreams = [\"engine\"]\n",
            &format!("upstreams = [\"engine\"]\n{own}"),
            1,
        )
        .replacen(
            "upstreams = [\"second\"]\n",
            &format!("upstreams = [\"second\"]\n{own}"),
            1,
        );
    let limits = "[limits]\nlist_tasks_page_bytes = 4096\nrequest_bytes_per_principal = 204800\n";
    let p = load(&agents_policy(&agents, limits)).unwrap();
    assert_eq!(p.limits.request_bytes_per_principal, 204_800);
}

#[test]
fn agents_load_with_their_own_sections() {
    let p = load(GOOD).unwrap();
    assert!(p.agents.is_empty(), "no [[agents]]: one agent, as before");
    let own = r#"
[agents.a2a]
max_body_bytes = 4096
required_extensions = ["https://example.com/ext/v1"]
[agents.limits.methods]
SendMessage = { requests_per_second = 1, burst = 2 }
"#;
    let agents = TWO_AGENTS.replacen(
        "upstreams = [\"second\"]\n",
        &format!("upstreams = [\"second\"]\n{own}"),
        1,
    );
    let extra = "[limits.methods]\nGetTask = { requests_per_second = 5, burst = 5 }\n";
    let p = load(&agents_policy(&agents, extra)).unwrap();
    let names: Vec<&str> = p.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["tf", "ros"]);
    let (tf, ros) = (&p.agents[0], &p.agents[1]);
    assert_eq!(
        tf.a2a.max_body_bytes,
        32 * 1024 * 1024,
        "tf keeps the global a2a"
    );
    assert_eq!(ros.a2a.max_body_bytes, 4096);
    assert_eq!(
        ros.a2a.requests.required_extensions,
        ["https://example.com/ext/v1"]
    );
    // Method rates are keyed per agent: tf keeps the global ones, ros has its own only.
    let keys: Vec<&str> = p
        .limits
        .rates
        .per_method
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["ros/SendMessage", "tf/GetTask"]);
}

#[test]
fn agent_errors_name_the_key() {
    let agent = |name: &str, url: &str, ups: &str, extra: &str| {
        format!(
            "\n[[agents]]\nname = \"{name}\"\npublic_url = \"{url}\"\nupstreams = {ups}\n{extra}"
        )
    };
    let tf = agent("tf", "https://edge.example/agents/tf/", "[\"engine\"]", "");
    let cases: Vec<(String, &str, &str)> = vec![
        // (agents, extra global lines, key or message in the error)
        (agent("tf", "https://edge.example/a/", "[\"engine\", \"second\"]", "") + &agent("tf", "https://edge.example/b/", "[]", ""), "", "agents[1].name"),
        (agent("bad/name", "https://edge.example/a/", "[\"engine\", \"second\"]", ""), "", "agents[0].name"),
        (agent("", "https://edge.example/a/", "[\"engine\", \"second\"]", ""), "", "agents[0].name"),
        (agent("tf", "http://edge.example/a/", "[\"engine\", \"second\"]", ""), "", "agents[0].public_url"),
        (agent("tf", "https://edge.example/a", "[\"engine\", \"second\"]", ""), "", "agents[0].public_url"),
        (agent("tf", "https://edge.example/a/../b/", "[\"engine\", \"second\"]", ""), "", "agents[0].public_url"),
        (agent("tf", "https://edge.example/a%2Fb/", "[\"engine\", \"second\"]", ""), "", "agents[0].public_url"),
        (agent("tf", "https://edge.example//a/", "[\"engine\", \"second\"]", ""), "", "agents[0].public_url"),
        (agent("tf", "https://u:p@edge.example/a/", "[\"engine\", \"second\"]", ""), "", "agents[0].public_url"),
        (agent("tf", "https://edge.example/a/?x=1", "[\"engine\", \"second\"]", ""), "", "agents[0].public_url"),
        (agent("tf", "not a url", "[\"engine\", \"second\"]", ""), "", "agents[0].public_url"),
        (agent("tf", "https://edge.example/a/", "[]", ""), "", "agents[0].upstreams"),
        (agent("tf", "https://edge.example/a/", "[\"engine\", \"nope\"]", ""), "", "agents[0].upstreams[1]"),
        (agent("tf", "https://edge.example/a/", "[\"engine\", \"engine\"]", ""), "", "agents[0].upstreams[1]"),
        (tf.clone() + &agent("ros", "https://edge.example/agents/ros/", "[\"engine\", \"second\"]", ""), "", "agents[1].upstreams[0]"),
        (tf.clone(), "", "serves no agent"),
        (tf.clone() + &agent("ros", "https://edge.example/agents/tf/", "[\"second\"]", ""), "", "overlaps"),
        (tf.clone() + &agent("ros", "https://EDGE.example:443/agents/tf/sub/", "[\"second\"]", ""), "", "overlaps"),
        (tf.clone() + &agent("ros", "https://edge.example/agents/", "[\"second\"]", ""), "", "overlaps"),
        (tf.clone() + &agent("ros", "https://edge.example/r/", "[\"second\"]", "[agents.a2a]\nmax_body_bytes = 0\n"), "", "agents[1].a2a.max_body_bytes"),
        (tf.clone() + &agent("ros", "https://edge.example/r/", "[\"second\"]", "[agents.limits.methods]\nNoSuchMethod = { requests_per_second = 1, burst = 1 }\n"), "", "agents[1].limits.methods.NoSuchMethod"),
        (tf.clone() + &agent("ros", "https://edge.example/r/", "[\"second\"]", "[agents.card]\nupstream = \"engine\"\n"), "", "agents[1].card.upstream"),
        (tf.clone() + &agent("ros", "https://edge.example/r/", "[\"second\"]", "[agents.limits]\nrequests_per_second = 1\n"), "", "requests_per_second"),
        (tf.clone() + &agent("ros", "https://edge.example/r/", "[\"second\"]", "bogus = 1\n"), "", "bogus"),
        (tf.clone() + &agent("ros", "https://edge.example/r/", "[\"second\"]", ""), "[card]\nupstream = \"engine\"\n", "card.upstream"),
        (tf.clone() + &agent("ros", "https://edge.example/r/", "[\"second\"]", ""), "[authz]\n[[authz.rules]]\nname = \"r\"\nprincipals = [\"*\"]\nmethods = [\"read\"]\nagents = [\"nope\"]\n", "authz.rules[0].agents"),
        (String::new(), "[authz]\n[[authz.rules]]\nname = \"r\"\nprincipals = [\"*\"]\nmethods = [\"read\"]\nagents = [\"tf\"]\n", "only meaningful with [[agents]]"),
    ];
    for (agents, extra, key) in cases {
        let text = agents_policy(&agents, extra);
        let e = match load(&text) {
            Err(e) => e,
            Ok(_) => panic!("{key}: loaded\n{text}"),
        };
        assert!(
            e.key.contains(key) || e.message.contains(key),
            "{key}: {e}\n{text}"
        );
    }
    // A kid names one key across agents.
    let dir = crate::validate::workspace::testdir::TestDir::new("policy-agents-kid");
    let key = |name: &str| {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, pair.serialize_pem()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path.display().to_string()
    };
    let card = |file: &str| {
        format!("[agents.card]\nactive_kid = \"k\"\n[[agents.card.signing_keys]]\nkid = \"k\"\nalg = \"ES256\"\nprivate_key_file = \"{file}\"\n")
    };
    let (a, b) = (key("a.pem"), key("b.pem"));
    let same = agent("tf", "https://edge.example/t/", "[\"engine\"]", &card(&a))
        + &agent("ros", "https://edge.example/r/", "[\"second\"]", &card(&a));
    load(&agents_policy(&same, "")).unwrap();
    let two = agent("tf", "https://edge.example/t/", "[\"engine\"]", &card(&a))
        + &agent("ros", "https://edge.example/r/", "[\"second\"]", &card(&b));
    let e = load(&agents_policy(&two, "")).unwrap_err();
    assert!(
        e.message.contains("kid \"k\" names two different keys"),
        "{e}"
    );
}

#[test]
fn otlp_endpoints_and_their_ca_file_are_checked_at_load() {
    let dir = std::env::temp_dir().join(format!("a2a-edge-policy-{}", random_token()));
    std::fs::create_dir_all(&dir).unwrap();
    let certs = crate::tls::dev::ensure(&dir.join("certs")).unwrap();
    let ca = certs.ca_cert;
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "no certificate here\n").unwrap();
    let key_only = certs.server_key;
    let with = |lines: &str| format!("{GOOD}[telemetry]\n{lines}\n");
    let q = |p: &Path| format!("{:?}", p.display().to_string());
    // Accepted: http and https, a path prefix; a CA file only beside https.
    for (lines, want, ca_file) in [
        (
            "otlp_endpoint = \"http://127.0.0.1:4318\"".to_string(),
            "http://127.0.0.1:4318/",
            None,
        ),
        (
            "otlp_endpoint = \"https://otel.example:4318/\"".to_string(),
            "https://otel.example:4318/",
            None,
        ),
        (
            "otlp_endpoint = \"https://[::1]:4318/otlp/\"".to_string(),
            "https://[::1]:4318/otlp/",
            None,
        ),
        (
            format!(
                "otlp_endpoint = \"https://otel.example/\"\notlp_ca_file = {}",
                q(&ca)
            ),
            "https://otel.example/",
            Some(ca.clone()),
        ),
    ] {
        let t = load(&with(&lines))
            .unwrap_or_else(|e| panic!("{lines}: {e}"))
            .telemetry;
        assert_eq!(
            t.otlp_endpoint.as_ref().map(url::Url::as_str),
            Some(want),
            "{lines}"
        );
        assert_eq!(t.otlp_ca_file, ca_file, "{lines}");
    }
    // Refused, each naming its key; never echoing a credential.
    for (lines, key) in [
        (
            "otlp_endpoint = \"grpc://127.0.0.1:4317\"".to_string(),
            "telemetry.otlp_endpoint",
        ),
        (
            "otlp_endpoint = \"ftp://127.0.0.1:4318\"".to_string(),
            "telemetry.otlp_endpoint",
        ),
        (
            "otlp_endpoint = \"https://user:hunter2@otel.example/\"".to_string(),
            "telemetry.otlp_endpoint",
        ),
        (
            "otlp_endpoint = \"https://:hunter2@otel.example/\"".to_string(),
            "telemetry.otlp_endpoint",
        ),
        (
            "otlp_endpoint = \"https://otel.example/?key=hunter2\"".to_string(),
            "telemetry.otlp_endpoint",
        ),
        (
            "otlp_endpoint = \"https://otel.example/#hunter2\"".to_string(),
            "telemetry.otlp_endpoint",
        ),
        (
            "otlp_endpoint = \"https://:4318/\"".to_string(),
            "telemetry.otlp_endpoint",
        ),
        (
            "otlp_endpoint = \"127.0.0.1:4318\"".to_string(),
            "telemetry.otlp_endpoint",
        ),
        (
            format!("otlp_ca_file = {}", q(&ca)),
            "telemetry.otlp_ca_file",
        ),
        (
            format!(
                "otlp_endpoint = \"http://127.0.0.1:4318\"\notlp_ca_file = {}",
                q(&ca)
            ),
            "telemetry.otlp_ca_file",
        ),
        (
            format!(
                "otlp_endpoint = \"https://otel.example/\"\notlp_ca_file = {}",
                q(&dir.join("missing.pem"))
            ),
            "telemetry.otlp_ca_file",
        ),
        (
            format!(
                "otlp_endpoint = \"https://otel.example/\"\notlp_ca_file = {}",
                q(&empty)
            ),
            "telemetry.otlp_ca_file",
        ),
        (
            format!(
                "otlp_endpoint = \"https://otel.example/\"\notlp_ca_file = {}",
                q(&key_only)
            ),
            "telemetry.otlp_ca_file",
        ),
    ] {
        let Err(e) = load(&with(&lines)) else {
            panic!("accepted: {lines}")
        };
        assert_eq!(e.key, key, "{lines}: {e}");
        assert!(!e.to_string().contains("hunter2"), "{lines}: {e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_otlp_sample_ratio_is_a_fraction_beside_an_endpoint() {
    let with = |lines: &str| format!("{GOOD}[telemetry]\n{lines}\n");
    let endpoint = "otlp_endpoint = \"http://127.0.0.1:4318\"\n";
    // Absent: every request's spans.
    let t = load(&with(endpoint)).unwrap().telemetry;
    assert_eq!(t.otlp_sample_ratio, 1.0);
    for (ratio, want) in [
        ("0", 0.0),
        ("0.0", 0.0),
        ("0.001", 0.001),
        ("0.25", 0.25),
        ("1", 1.0),
        ("1.0", 1.0),
        ("1e-3", 0.001),
    ] {
        let lines = format!("{endpoint}otlp_sample_ratio = {ratio}");
        let p = load(&with(&lines)).unwrap_or_else(|e| panic!("{lines}: {e}"));
        assert_eq!(p.telemetry.otlp_sample_ratio, want, "{lines}");
        assert!(p
            .summary()
            .contains("traces   OTLP/HTTP to http://127.0.0.1:4318/v1/traces"));
    }
    let p = load(&with(&format!("{endpoint}otlp_sample_ratio = 0.05"))).unwrap();
    assert!(
        p.summary().contains(", 5 % of the requests' spans"),
        "{}",
        p.summary()
    );
    let p = load(&with(endpoint)).unwrap();
    assert!(
        p.summary().contains(", all of the requests' spans"),
        "{}",
        p.summary()
    );
    // Refused: outside [0, 1], not a number, NaN and infinities, without an endpoint.
    for lines in [
        format!("{endpoint}otlp_sample_ratio = -0.1"),
        format!("{endpoint}otlp_sample_ratio = -0.0000001"),
        format!("{endpoint}otlp_sample_ratio = 1.0000001"),
        format!("{endpoint}otlp_sample_ratio = 2"),
        format!("{endpoint}otlp_sample_ratio = 100"),
        format!("{endpoint}otlp_sample_ratio = nan"),
        format!("{endpoint}otlp_sample_ratio = -nan"),
        format!("{endpoint}otlp_sample_ratio = inf"),
        format!("{endpoint}otlp_sample_ratio = -inf"),
        "otlp_sample_ratio = 0.5".to_string(),
    ] {
        let Err(e) = load(&with(&lines)) else {
            panic!("accepted: {lines}")
        };
        assert_eq!(e.key, "telemetry.otlp_sample_ratio", "{lines}: {e}");
    }
    // Not a number at all: the file's own type error, at its line.
    for v in ["\"0.5\"", "\"50%\"", "true", "[0.5]"] {
        let lines = format!("{endpoint}otlp_sample_ratio = {v}");
        let Err(e) = load(&with(&lines)) else {
            panic!("accepted: {lines}")
        };
        assert!(e.to_string().contains("expected f64"), "{lines}: {e}");
    }
}

/// `limits.client_ip_connections_per_second` and `client_ip_connection_burst`: on by default
/// (the client-address request rate's 200 a second, burst 400), a rate alone has a burst of
/// the rate rounded up, and a rate that is no positive number, a zero burst, or a burst
/// without its rate are refused with the key named.
#[test]
fn the_connection_rate_of_a_client_address() {
    let rate = |per_second: f64, burst: u32| Some(crate::limits::rate::Rate { per_second, burst });
    let rows = [
        ("", Ok(rate(200.0, 400))),
        ("client_ip_connections_per_second = 2.5\n", Ok(rate(2.5, 3))),
        (
            "client_ip_connections_per_second = 1\nclient_ip_connection_burst = 10\n",
            Ok(rate(1.0, 10)),
        ),
        ("client_ip_connections_per_second = 0\n", Err("positive")),
        ("client_ip_connections_per_second = -5\n", Err("positive")),
        ("client_ip_connections_per_second = nan\n", Err("positive")),
        ("client_ip_connections_per_second = inf\n", Err("positive")),
        (
            "client_ip_connections_per_second = 1\nclient_ip_connection_burst = 0\n",
            Err("at least 1"),
        ),
        ("client_ip_connection_burst = 10\n", Err("needs its rate")),
    ];
    for (limits, want) in rows {
        let text = GOOD.replacen("[auth]\n", &format!("[limits]\n{limits}[auth]\n"), 1);
        match (load(&text), want) {
            (Ok(p), Ok(rate)) => {
                assert_eq!(p.limits.rates.per_client_connection, rate, "{limits}");
                // Edge-wide, never a method's rate.
                assert_eq!(p.budgets().method_rates.per_client_connection, None);
            }
            (Err(e), Err(words)) => {
                assert_eq!(e.key, "limits.client_ip_connections_per_second", "{limits}");
                assert!(e.message.contains(words), "{limits}: {e}");
            }
            (got, _) => panic!("{limits}: {:?}", got.map(|p| p.limits.rates)),
        }
    }
}

/// `network.client_address_header`: the header the trusted proxies write, in any case;
/// anything else is refused with the key named.
#[test]
fn the_client_address_header() {
    use crate::limits::network::ClientAddressHeader;
    let with = |value: &str| {
        GOOD.replacen(
            "[auth]\n",
            &format!(
                "[network]\ntrusted_proxies = [\"10.0.0.0/8\"]\nclient_address_header = {value}\n[auth]\n"
            ),
            1,
        )
    };
    let unset = load(GOOD).unwrap().network;
    assert_eq!(unset, unset.clone().reading(ClientAddressHeader::Both));
    for (value, header) in [
        ("\"x-forwarded-for\"", ClientAddressHeader::XForwardedFor),
        ("\"Forwarded\"", ClientAddressHeader::Forwarded),
    ] {
        let p = load(&with(value)).unwrap();
        let proxies =
            crate::limits::network::NetworkPolicy::new(&[], &[], &["10.0.0.0/8".to_owned()])
                .unwrap();
        assert_eq!(p.network, proxies.reading(header), "{value}");
    }
    for value in ["\"x-real-ip\"", "\"both\"", "\"\""] {
        let e = load(&with(value)).unwrap_err();
        assert_eq!(e.key, "network.client_address_header", "{value}: {e}");
    }
}

/// A static card that carries `signatures` (checked against `[card.upstream_keys]` when they
/// are set; none here) loads:
/// no signature covers itself, and the edge serves its own.
#[test]
fn a_static_card_may_carry_its_signatures() {
    let card = "[card]\nsource = \"static\"\n[card.static]\nname = \"x\"\ndescription = \"d\"\nversion = \"1\"\ndefaultInputModes = [\"text/plain\"]\ndefaultOutputModes = [\"text/plain\"]\nskills = []\nsignatures = [{ protected = \"e30\", signature = \"AA\" }]\n[card.static.capabilities]\nstreaming = true\n";
    let text = GOOD.replacen("[auth]\n", &format!("{card}[auth]\n"), 1);
    load(&text).unwrap();
    let unknown = text.replacen("signatures = ", "signaturez = ", 1);
    let e = load(&unknown).unwrap_err();
    assert!(e.message.contains("signaturez"), "{e}");
}
