//! The `[authz]` table (rules: who may do what) and `[auth.identity_assertion]` (the signed
//! statement of the caller the agents receive), validated into their compiled forms.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{file, Ctx, PolicyError};
use crate::auth::attributes::{valid_group, valid_principal, valid_tenant};
use crate::auth::settings::IdentityAssertionPolicy;
use crate::authz::{AuthzPolicy, Matcher, MethodSet, RootTemplate, Rule};
use crate::card::keys::{SigningAlg, SigningKey};
use crate::validate::metadata::Exceptions;
use crate::validate::workspace::{normalize_lexically, within_any, WorkspacePolicy};

/// Most rules in `[authz]` (each request walks them all).
const MAX_RULES: usize = 256;
/// Longest identity assertion lifetime.
const MAX_ASSERTION_TTL_SECS: u64 = 3600;

impl Ctx<'_> {
    pub(super) fn authz(
        &self,
        section: Option<file::AuthzSection>,
        workspace: &WorkspacePolicy,
        agent_names: &[&str],
    ) -> Result<Option<AuthzPolicy>, PolicyError> {
        let Some(a) = section else {
            return Ok(None);
        };
        let default_allow = match a.default.as_ref().map(|d| d.get_ref().as_str()) {
            None | Some("deny") => false,
            Some("allow") => true,
            Some(_) => {
                let d = a.default.as_ref().map(|d| d.span());
                return self.err("authz.default", d, "must be \"deny\" or \"allow\"".into());
            }
        };
        if a.rules.len() > MAX_RULES {
            return self.err("authz.rules", None, format!("at most {MAX_RULES} rules"));
        }
        let mut rules: Vec<Rule> = Vec::with_capacity(a.rules.len());
        for (i, r) in a.rules.into_iter().enumerate() {
            let key = |k: &str| format!("authz.rules[{i}].{k}");
            let name = r.name.get_ref();
            if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
                return self.spanned_err(&key("name"), &r.name, "must be 1-128 characters");
            }
            if rules.iter().any(|o| &*o.name == name.as_str()) {
                return self.spanned_err(&key("name"), &r.name, "duplicate rule name");
            }
            if r.principals.is_empty() && r.groups.is_empty() && r.tenants.is_empty() {
                return self.spanned_err(
                    &key("name"),
                    &r.name,
                    "matches nobody: give principals, groups or tenants (\"*\" = any authenticated caller)",
                );
            }
            let star_or = |l: &[String], ok: fn(&str) -> bool| l.iter().all(|x| x == "*" || ok(x));
            for (k, list, ok) in [
                (
                    "principals",
                    &r.principals,
                    valid_principal as fn(&str) -> bool,
                ),
                ("groups", &r.groups, valid_group),
                ("tenants", &r.tenants, valid_tenant),
            ] {
                if !star_or(list, ok) {
                    return self.spanned_err(
                        &key(k),
                        &r.name,
                        "names must be 1-128 characters without control characters (groups: no white space; principals: one U+001E between a JWT subject and its tenant), or \"*\"",
                    );
                }
            }
            let methods = match &r.methods {
                None => MethodSet::EMPTY,
                Some(m) => MethodSet::parse(m.get_ref()).or_else(|bad| {
                    self.spanned_err(
                        &key("methods"),
                        m,
                        format!("{bad:?} is neither an A2A 1.0 method name nor one of read, write, push, card, *"),
                    )
                })?,
            };
            let mut workspace_roots = Vec::new();
            for (j, t) in r.workspace_roots.iter().enumerate() {
                let k = format!("authz.rules[{i}].workspace_roots[{j}]");
                // Relative to the process directory, like the allowed roots.
                let text = if t.get_ref().starts_with('/') {
                    t.get_ref().clone()
                } else {
                    let cwd = std::env::current_dir().or_else(|e| {
                        self.spanned_err(&k, t, format!("the process directory is unknown: {e}"))
                    })?;
                    format!("{}/{}", cwd.display(), t.get_ref())
                };
                let template =
                    RootTemplate::parse(&text).or_else(|m| self.spanned_err(&k, t, m))?;
                self.root_inside(&template, workspace)
                    .or_else(|m| self.spanned_err(&k, t, m))?;
                workspace_roots.push(template);
            }
            let metadata_allowed = Exceptions::parse(&r.metadata_allowed)
                .or_else(|m| self.spanned_err(&key("metadata_allowed"), &r.name, m))?;
            let create_push_configs = r
                .create_push_configs
                .unwrap_or(methods.contains(crate::a2a::Method::CreateTaskPushNotificationConfig));
            let agents = match &r.agents {
                None => None,
                Some(list) if agent_names.is_empty() => {
                    return self.spanned_err(
                        &key("agents"),
                        list,
                        "only meaningful with [[agents]]",
                    )
                }
                Some(list) => {
                    if let Some(bad) = list
                        .get_ref()
                        .iter()
                        .find(|n| !agent_names.contains(&n.as_str()))
                    {
                        return self.spanned_err(
                            &key("agents"),
                            list,
                            format!("{bad:?} names no agent (one of {agent_names:?})"),
                        );
                    }
                    Some(list.get_ref().clone())
                }
            };
            rules.push(Rule {
                agents,
                name: Arc::from(name.as_str()),
                matcher: Matcher {
                    principals: r.principals,
                    groups: r.groups,
                    tenants: r.tenants,
                },
                methods,
                workspace_roots,
                metadata_allowed: Arc::new(metadata_allowed),
                create_push_configs,
            });
        }
        // By default only where the rules manage workspaces at all.
        let require_workspace = a
            .require_workspace
            .unwrap_or_else(|| rules.iter().any(|r| !r.workspace_roots.is_empty()));
        Ok(Some(AuthzPolicy {
            default_allow,
            rules,
            require_workspace,
        }))
    }

    /// Whether a template lies inside the allowed roots: its fixed part (the directories
    /// before the first placeholder) resolved like a root, the rest appended, compared
    /// component-wise. Each expansion is resolved and checked again per request.
    fn root_inside(&self, t: &RootTemplate, workspace: &WorkspacePolicy) -> Result<(), String> {
        let text = &t.text;
        let cut = match text.find('{') {
            Some(i) => text[..i].rfind('/').map(|j| j + 1).unwrap_or(1),
            None => text.rfind('/').map(|j| j + 1).unwrap_or(1),
        };
        let (fixed, rest) = text.split_at(cut);
        let fixed = normalize_lexically(Path::new(fixed))
            .ok_or_else(|| "must be a normalized absolute path".to_string())?;
        let fixed = if workspace.check_filesystem {
            std::fs::canonicalize(&fixed).map_err(|e| {
                format!(
                    "{} (the directory the template starts in): {e}",
                    fixed.display()
                )
            })?
        } else {
            fixed
        };
        let sample: PathBuf = fixed.join(rest.replace("{tenant}", "t").replace("{principal}", "p"));
        if !within_any(&sample, &workspace.roots) {
            return Err("is not inside workspace.allowed_roots".into());
        }
        Ok(())
    }

    pub(super) fn identity_assertion(
        &self,
        section: Option<file::IdentityAssertionSection>,
        keys: &[Arc<SigningKey>],
    ) -> Result<Option<IdentityAssertionPolicy>, PolicyError> {
        let Some(s) = section else {
            return Ok(None);
        };
        let key = match keys.iter().find(|k| k.kid == *s.kid.get_ref()) {
            None => {
                return self.spanned_err(
                    "auth.identity_assertion.kid",
                    &s.kid,
                    "names no [[card.signing_keys]] entry",
                )
            }
            Some(k) if k.alg == SigningAlg::HS256 => {
                return self.spanned_err(
                    "auth.identity_assertion.kid",
                    &s.kid,
                    "must name an asymmetric key (RS256, ES256 or EdDSA): agents verify with the published JWKS, which never holds a secret",
                )
            }
            Some(k) => k.clone(),
        };
        let header = self.x_header(
            "auth.identity_assertion.header",
            &s.header,
            "x-a2a-edge-identity",
        )?;
        let ttl = match &s.ttl_secs {
            None => 60,
            Some(t) if (1..=MAX_ASSERTION_TTL_SECS).contains(t.get_ref()) => *t.get_ref(),
            Some(t) => {
                return self.spanned_err(
                    "auth.identity_assertion.ttl_secs",
                    t,
                    format!("must be between 1 and {MAX_ASSERTION_TTL_SECS}"),
                )
            }
        };
        Ok(Some(IdentityAssertionPolicy {
            key,
            header,
            ttl: Duration::from_secs(ttl),
        }))
    }
}
