//! `a2a-edge check --explain PRINCIPAL[,tenant=T][,groups=a|b]`: what one caller may do under
//! a policy, in words, for operators.

use super::methods::describe;
use super::{AuthzPolicy, Grant, Roots};
use crate::auth::attributes::{groups_from_list, valid_tenant};
use crate::auth::{Principal, Scheme};
use crate::validate::workspace::WorkspacePolicy;

/// Parses `NAME[,tenant=T][,groups=a|b]` (an authenticated caller).
pub fn parse_caller(spec: &str) -> Result<Principal, String> {
    let mut parts = spec.split(',');
    let name = parts.next().unwrap_or_default();
    if !valid_tenant(name) {
        return Err("--explain: the principal must be 1-128 characters".into());
    }
    let mut p = Principal::new(name, Scheme::Bearer);
    for part in parts {
        match part.split_once('=') {
            Some(("tenant", t)) if valid_tenant(t) => p.tenant = Some(t.to_string()),
            Some(("groups", g)) => {
                let list: Vec<&str> = g.split('|').filter(|s| !s.is_empty()).collect();
                p.groups =
                    groups_from_list(&list).map_err(|_| format!("--explain: bad groups {g:?}"))?;
            }
            _ => {
                return Err(format!(
                    "--explain: {part:?} is not tenant=NAME or groups=a|b"
                ))
            }
        }
    }
    Ok(p)
}

/// What `p` may do: methods, workspace roots (expanded and resolved), metadata exceptions,
/// push, tenant. `agent`: at that agent of a policy with `[[agents]]` (only the rules that
/// apply there; `allowed` and `allowed_for` its own), `None` for a policy without.
pub fn explain(
    authz: Option<&AuthzPolicy>,
    p: &Principal,
    agent: Option<&str>,
    allowed: &WorkspacePolicy,
    allowed_for: &[&str],
) -> String {
    let mut s = String::new();
    let attrs = match (&p.tenant, p.groups.is_empty()) {
        (None, true) => String::new(),
        (t, _) => format!(
            " (tenant {}; groups {})",
            t.as_deref().unwrap_or("none"),
            if p.groups.is_empty() {
                "none".to_string()
            } else {
                p.groups.join(", ")
            }
        ),
    };
    s.push_str(&format!("caller   {}{attrs}\n", p.name));
    if let Some(a) = agent {
        s.push_str(&format!("agent    {a}\n"));
    }
    let grant = match authz {
        None => {
            s.push_str(
                "rules    no [authz] section: every authenticated caller may do everything\n",
            );
            Grant::everything()
        }
        Some(a) => match a.grant_at(p, agent) {
            Err(r) => {
                s.push_str(&format!(
                    "refused  every request ({}): a workspace template cannot take this caller's tenant or name (not one plain path component)\n",
                    r.reason
                ));
                return s;
            }
            Ok(g) => {
                if g.rules.is_empty() {
                    s.push_str(&format!(
                        "rules    none match; default = \"{}\"\n",
                        if a.default_allow { "allow" } else { "deny" }
                    ));
                } else {
                    let names: Vec<&str> = g.rules.iter().map(|r| &**r).collect();
                    s.push_str(&format!("rules    {}\n", names.join(", ")));
                }
                g
            }
        },
    };
    let methods = grant.methods.methods();
    if methods.is_empty() {
        s.push_str("methods  none: every request is refused (authz.method)\n");
    } else {
        s.push_str(&format!(
            "methods  {} ({})\n",
            describe(grant.methods),
            methods
                .iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    match &grant.roots {
        Roots::All => {
            let roots: Vec<String> = allowed
                .roots
                .iter()
                .map(|r| r.display().to_string())
                .collect();
            s.push_str(&format!(
                "roots    every allowed root: {}\n",
                roots.join(", ")
            ));
        }
        Roots::Only(paths) if paths.is_empty() => {
            s.push_str("roots    none: requests naming a workspace or a file are refused\n");
        }
        Roots::Only(paths) => {
            let resolved = grant.workspace(allowed).roots;
            for path in paths {
                let real = if allowed.check_filesystem {
                    crate::validate::workspace::real_path(path)
                } else {
                    Some(path.clone())
                };
                let note = match real {
                    Some(r) if resolved.contains(&r) && r == *path => String::new(),
                    Some(r) if resolved.contains(&r) => format!(" (real path {})", r.display()),
                    Some(_) => " (outside workspace.allowed_roots: refused)".to_string(),
                    None => " (does not exist now: refused until it does)".to_string(),
                };
                s.push_str(&format!("roots    {}{note}\n", path.display()));
            }
        }
    }
    let mut meta: Vec<&str> = allowed_for.to_vec();
    for e in &grant.metadata_allowed {
        meta.extend(e.texts());
    }
    s.push_str(&format!(
        "metadata {}\n",
        if meta.is_empty() {
            "no exception to a2a.metadata.denied_keys".to_string()
        } else {
            format!("may set {}", meta.join(", "))
        }
    ));
    s.push_str(&format!(
        "push     {}\n",
        if grant.create_push_configs
            && grant
                .allows(crate::a2a::Method::CreateTaskPushNotificationConfig)
                .is_ok()
        {
            "may register push callbacks"
        } else if grant.create_push_configs
            && grant.methods.contains(crate::a2a::Method::SendMessage)
        {
            "may register push callbacks with SendMessage only"
        } else {
            "may not register push callbacks"
        }
    ));
    match &p.tenant {
        Some(t) => s.push_str(&format!(
            "tenant   requests may name tenant {t:?} only; agents get it in X-A2A-Edge-Tenant\n"
        )),
        None => s.push_str("tenant   none\n"),
    }
    s
}
