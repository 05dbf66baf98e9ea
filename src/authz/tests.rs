use super::*;
use crate::auth::Scheme;

fn principal(name: &str, tenant: Option<&str>, groups: &[&str]) -> Principal {
    let mut p = Principal::new(name, Scheme::Bearer);
    p.tenant = tenant.map(str::to_string);
    p.groups = groups.iter().map(|g| g.to_string()).collect();
    p
}

fn rule(name: &str, m: Matcher, methods: &[&str], roots: &[&str], meta: &[&str]) -> Rule {
    let methods = MethodSet::parse(methods).unwrap();
    Rule {
        name: name.into(),
        matcher: m,
        methods,
        workspace_roots: roots
            .iter()
            .map(|r| RootTemplate::parse(r).unwrap())
            .collect(),
        metadata_allowed: Arc::new(
            Exceptions::parse(&meta.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap(),
        ),
        create_push_configs: methods.contains(Method::CreateTaskPushNotificationConfig),
        agents: None,
    }
}

fn m(principals: &[&str], groups: &[&str], tenants: &[&str]) -> Matcher {
    let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
    Matcher {
        principals: v(principals),
        groups: v(groups),
        tenants: v(tenants),
    }
}

fn policy(default_allow: bool) -> AuthzPolicy {
    AuthzPolicy {
        default_allow,
        require_workspace: true,
        rules: vec![
            rule(
                "members",
                m(&[], &[], &["*"]),
                &["read", "write"],
                &["/srv/ws/{tenant}"],
                &[],
            ),
            rule("auditors", m(&[], &["auditors"], &[]), &["read"], &[], &[]),
            rule(
                "ops",
                m(&[], &["ops"], &[]),
                &["push", "GetExtendedAgentCard"],
                &["/srv/ws/shared"],
                &["iac_code.iac_code_model"],
            ),
            rule(
                "ci",
                m(&["ci-bot"], &[], &[]),
                &["SendMessage"],
                &["/srv/ws/ci/{principal}"],
                &[],
            ),
        ],
    }
}

#[test]
fn method_classes() {
    let cases: Vec<(&[&str], Vec<Method>)> = vec![
        (
            &["read"],
            vec![Method::GetTask, Method::ListTasks, Method::SubscribeToTask],
        ),
        (
            &["write"],
            vec![
                Method::SendMessage,
                Method::SendStreamingMessage,
                Method::CancelTask,
            ],
        ),
        (
            &["push"],
            vec![
                Method::CreateTaskPushNotificationConfig,
                Method::GetTaskPushNotificationConfig,
                Method::ListTaskPushNotificationConfigs,
                Method::DeleteTaskPushNotificationConfig,
            ],
        ),
        (&["card"], vec![Method::GetExtendedAgentCard]),
        (&["*"], Method::ALL.to_vec()),
        (&["GetTask", "GetTask"], vec![Method::GetTask]),
        (&[], vec![]),
    ];
    for (entries, want) in cases {
        assert_eq!(
            MethodSet::parse(entries).unwrap().methods(),
            want,
            "{entries:?}"
        );
    }
    for bad in [
        "Read",
        "gettask",
        "message/send",
        "tasks/get",
        "",
        "all",
        " read",
    ] {
        assert_eq!(MethodSet::parse(&[bad]), Err(bad.to_string()), "{bad:?}");
    }
    // Every method has exactly one class, and the classes cover all methods.
    let mut union = MethodSet::EMPTY;
    for c in MethodClass::ALL {
        union = union.union(c.methods());
    }
    assert_eq!(union, MethodSet::ALL);
    for m in Method::ALL {
        assert!(MethodClass::of(m).methods().contains(m));
    }
}

#[test]
fn matching_and_union() {
    let p = policy(false);
    type Row<'a> = (
        Principal,
        &'a [&'a str],
        &'a [Method],
        &'a [Method],
        Vec<&'a str>,
        bool,
    );
    let rows: Vec<Row> = vec![
        // A tenant member: read + write in its own directory.
        (
            principal("alice", Some("team-a"), &[]),
            &["members"],
            &[Method::SendMessage, Method::GetTask, Method::CancelTask],
            &[
                Method::CreateTaskPushNotificationConfig,
                Method::GetExtendedAgentCard,
            ],
            vec!["/srv/ws/team-a"],
            false,
        ),
        // An auditor without tenant: tenants = ["*"] needs a tenant.
        (
            principal("carol", None, &["auditors"]),
            &["auditors"],
            &[Method::GetTask, Method::ListTasks],
            &[
                Method::CreateTaskPushNotificationConfig,
                Method::SendMessage,
                Method::CancelTask,
            ],
            vec![],
            false,
        ),
        // Union of members and ops: push methods, the card, two roots, push creation.
        (
            principal("dave", Some("team-b"), &["ops"]),
            &["members", "ops"],
            &[
                Method::SendMessage,
                Method::CreateTaskPushNotificationConfig,
                Method::GetExtendedAgentCard,
            ],
            &[],
            vec!["/srv/ws/team-b", "/srv/ws/shared"],
            true,
        ),
        // By principal name, with a {principal} root.
        (
            principal("ci-bot", Some("team-a"), &[]),
            &["members", "ci"],
            &[Method::SendMessage],
            &[Method::DeleteTaskPushNotificationConfig],
            vec!["/srv/ws/team-a", "/srv/ws/ci/ci-bot"],
            false,
        ),
        // Group names are exact: "Auditors" is not "auditors".
        (
            principal("eve", None, &["Auditors", "auditors-x"]),
            &[],
            &[],
            &[Method::GetTask],
            vec![],
            false,
        ),
    ];
    for (who, rules, allowed, refused, roots, push) in rows {
        let g = p.grant(&who).unwrap();
        let names: Vec<&str> = g.rules.iter().map(|r| &**r).collect();
        assert_eq!(names, rules, "{who:?}");
        for m in allowed {
            assert!(g.allows(*m).is_ok(), "{} {m}", who.name);
        }
        for m in refused {
            assert!(g.allows(*m).is_err(), "{} {m}", who.name);
        }
        let want: Vec<PathBuf> = roots.iter().map(PathBuf::from).collect();
        assert_eq!(g.roots, Roots::Only(want), "{}", who.name);
        assert_eq!(g.create_push_configs, push, "{}", who.name);
    }
    // ops' metadata exception is granted to ops only.
    let dave = p
        .grant(&principal("dave", Some("team-b"), &["ops"]))
        .unwrap();
    assert_eq!(dave.metadata_allowed.len(), 1);
    let alice = p.grant(&principal("alice", Some("team-a"), &[])).unwrap();
    assert!(alice.metadata_allowed.is_empty());
}

#[test]
fn refusals_name_the_missing_class() {
    let p = policy(false);
    let auditor = p.grant(&principal("carol", None, &["auditors"])).unwrap();
    let cases = [
        (Method::SendMessage, "write"),
        (Method::SendStreamingMessage, "write"),
        (Method::CancelTask, "write"),
        (Method::CreateTaskPushNotificationConfig, "push"),
        (Method::ListTaskPushNotificationConfigs, "push"),
        (Method::GetExtendedAgentCard, "card"),
    ];
    for (method, class) in cases {
        let r = auditor.allows(method).unwrap_err();
        assert_eq!(r.reason, "authz.method", "{method}");
        assert_eq!(r.missing, Some(class), "{method}");
    }
    // Push methods granted but push creation turned off: authz.push.
    let mut no_create = rule("r", m(&["*"], &[], &[]), &["push"], &[], &[]);
    no_create.create_push_configs = false;
    let p2 = AuthzPolicy {
        default_allow: false,
        require_workspace: true,
        rules: vec![no_create],
    };
    let g = p2.grant(&principal("x", None, &[])).unwrap();
    assert!(g.allows(Method::GetTaskPushNotificationConfig).is_ok());
    assert_eq!(
        g.allows(Method::CreateTaskPushNotificationConfig)
            .unwrap_err()
            .reason,
        "authz.push"
    );
}

#[test]
fn defaults_and_anonymous() {
    let nobody = principal("stranger", None, &[]);
    let deny = AuthzPolicy {
        default_allow: false,
        require_workspace: true,
        rules: vec![rule("ci", m(&["ci-bot"], &[], &[]), &["*"], &[], &[])],
    };
    let g = deny.grant(&nobody).unwrap();
    assert!(g.rules.is_empty());
    for method in Method::ALL {
        assert_eq!(g.allows(method).unwrap_err().reason, "authz.method");
    }
    assert_eq!(g.roots, Roots::Only(vec![]));
    let allow = AuthzPolicy {
        default_allow: true,
        ..deny.clone()
    };
    let g = allow.grant(&nobody).unwrap();
    assert!(Method::ALL.iter().all(|m| g.allows(*m).is_ok()));
    assert_eq!(g.roots, Roots::All);
    // "*" matches authenticated callers only; anonymous must be named.
    let star = AuthzPolicy {
        default_allow: false,
        require_workspace: true,
        rules: vec![rule("all", m(&["*"], &[], &[]), &["*"], &[], &[])],
    };
    let anon = Principal::new("anonymous", Scheme::Anonymous);
    assert!(star.grant(&anon).unwrap().rules.is_empty());
    // tenants = ["*"] / groups = ["*"]: callers that have one.
    let some = AuthzPolicy {
        default_allow: false,
        require_workspace: true,
        rules: vec![
            rule("t", m(&[], &[], &["*"]), &["read"], &[], &[]),
            rule("g", m(&[], &["*"], &[]), &["write"], &[], &[]),
        ],
    };
    let names = |p: &Principal| -> Vec<String> {
        some.grant(p)
            .unwrap()
            .rules
            .iter()
            .map(|r| r.to_string())
            .collect()
    };
    assert!(names(&nobody).is_empty());
    assert_eq!(names(&principal("a", Some("x"), &[])), ["t"]);
    assert_eq!(names(&principal("a", None, &["y"])), ["g"]);
    let mut anon_t = Principal::new("anonymous", Scheme::Anonymous);
    anon_t.tenant = Some("x".into());
    assert!(names(&anon_t).is_empty());
    assert_eq!(star.grant(&nobody).unwrap().rules.len(), 1);
}

#[test]
fn template_expansion_refuses_attack_values() {
    let t = RootTemplate::parse("/srv/ws/{tenant}").unwrap();
    let p = RootTemplate::parse("/srv/ws/{tenant}/users/{principal}").unwrap();
    let long = "t".repeat(129);
    let ok_long = "t".repeat(128);
    let rows: Vec<(&str, bool)> = vec![
        ("team-a", true),
        ("team_a.v2", true),
        ("jwt:alice@example.com", true),
        (ok_long.as_str(), true),
        ("..", false),
        (".", false),
        ("a/b", false),
        ("../team-b", false),
        ("%2e%2e", false),
        ("team-a%2fteam-b", false),
        ("a\0b", false),
        ("a\\b", false),
        ("team a", false),
        ("team\u{2010}a", false), // hyphen look-alike
        ("team\u{ff0f}b", false), // fullwidth solidus
        ("tеam-a", false),        // Cyrillic е
        ("", false),
        (long.as_str(), false),
    ];
    for (value, ok) in rows {
        let got = t.expand(Some(value), "alice");
        if ok {
            assert_eq!(
                got,
                Ok(Some(PathBuf::from(format!("/srv/ws/{value}")))),
                "{value:?}"
            );
        } else {
            assert_eq!(got, Err(template::NotAComponent), "tenant {value:?}");
        }
        let got = p.expand(Some("team-a"), value);
        assert_eq!(got.is_ok(), ok, "principal {value:?}");
    }
    assert_eq!(t.expand(None, "alice"), Ok(None));
    // The whole grant is refused when one of its templates cannot expand.
    let pol = policy(false);
    let r = pol
        .grant(&principal("x", Some("../team-b"), &[]))
        .unwrap_err();
    assert_eq!(r.reason, "authz.attribute_value");
    let users = AuthzPolicy {
        default_allow: false,
        require_workspace: true,
        rules: vec![rule(
            "users",
            m(&["*"], &[], &[]),
            &["read"],
            &["/srv/ws/users/{principal}"],
            &[],
        )],
    };
    let r = users
        .grant(&principal("ci/../x", Some("team-a"), &[]))
        .unwrap_err();
    assert_eq!(r.reason, "authz.attribute_value");
    assert!(users.grant(&principal("jwt:bob", None, &[])).is_ok());
}

#[test]
fn template_parsing() {
    for ok in [
        "/srv/ws/{tenant}",
        "/srv/{tenant}/{principal}/x",
        "/srv/ws/shared",
        "/srv/ws/team-{tenant}",
        "/srv/{tenant}/{principal}",
        "/srv/{tenant}/{tenant}-home",
    ] {
        assert!(RootTemplate::parse(ok).is_ok(), "{ok}");
    }
    for bad in [
        "srv/ws/{tenant}",
        "/srv/ws/{tenants}",
        "/srv/ws/{tenant",
        "/srv/ws/tenant}",
        "/srv/ws/{}",
        "/srv/ws/../{tenant}",
        "/srv/ws/./{tenant}",
        "/srv//ws/{tenant}",
        "/srv/ws/{tenant}/..",
        "/srv/ws/\n{tenant}",
        // (two callers would share one directory: `acme` + `dev-alice`, `acme-dev` + `alice`)
        "/srv/ws/{tenant}-{principal}",
        "/srv/ws/{tenant}{principal}",
        "/srv/ws/{principal}.{principal}/x",
        "/srv/{tenant}/x{tenant}y{principal}",
    ] {
        assert!(RootTemplate::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn workspace_roots_resolve_inside_allowed_roots() {
    use std::os::unix::fs::symlink;
    let dir = crate::validate::workspace::testdir::TestDir::new("authz-roots");
    let base = dir.path.clone();
    std::fs::create_dir_all(base.join("ws/team-a")).unwrap();
    std::fs::create_dir_all(base.join("ws/team-b")).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    // team-c's directory is a symlink out of the allowed root; team-d's into team-b.
    symlink(base.join("outside"), base.join("ws/team-c")).unwrap();
    symlink(base.join("ws/team-b"), base.join("ws/team-d")).unwrap();
    let allowed = WorkspacePolicy::new(vec![base.join("ws")], true).unwrap();
    let real = |p: &str| std::fs::canonicalize(base.join(p)).unwrap();
    let grant = |paths: &[&str]| Grant {
        roots: Roots::Only(paths.iter().map(|p| base.join(p)).collect()),
        ..Grant::everything()
    };
    let rows: Vec<(&[&str], Vec<PathBuf>)> = vec![
        (&["ws/team-a"], vec![real("ws/team-a")]),
        (&["ws/team-c"], vec![]),
        (&["ws/team-missing"], vec![]),
        (&["outside"], vec![]),
        // A symlink to another tenant resolves to that tenant's real directory: the
        // operator's own layout, kept (the roots are the real paths).
        (&["ws/team-d"], vec![real("ws/team-b")]),
        (&["ws/team-a", "ws/team-a"], vec![real("ws/team-a")]),
    ];
    for (paths, want) in rows {
        assert_eq!(grant(paths).workspace(&allowed).roots, want, "{paths:?}");
    }
    assert_eq!(Grant::everything().workspace(&allowed).roots, allowed.roots);
}
