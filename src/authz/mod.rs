//! Authorization: what an authenticated caller may do. Rules from `[authz]` match a
//! principal by name, tenant or group; a caller's [`Grant`] is the union of what the matching
//! rules give: methods, workspace roots (templates over `{tenant}` and `{principal}`),
//! metadata exceptions and whether it may register push callbacks. Knows nothing of sockets
//! or backends; the gate asks, this module answers.
//!
//! | reason | when |
//! |---|---|
//! | `authz.method` | the caller's grant does not include the method (or no rule matched and `default = "deny"`) |
//! | `authz.push` | the caller may not register push callbacks (`create_push_configs`) |
//! | `authz.attribute_value` | a workspace template of the caller's grant would expand its tenant or principal into something that is not one plain path component |

pub mod explain;
pub mod methods;
pub mod template;

use std::path::PathBuf;
use std::sync::Arc;

pub use methods::{MethodClass, MethodSet};
pub use template::RootTemplate;

use crate::a2a::Method;
use crate::auth::Principal;
use crate::reason::{self, Reason};
use crate::validate::metadata::Exceptions;
use crate::validate::workspace::{normalize_lexically, real_path, within_any, WorkspacePolicy};

/// The JSON-RPC code of an authorization error. A2A 1.0 defines none (spec §13: "JSON-RPC
/// custom error"); JSON-RPC reserves -32000..-32099 for implementation-defined server errors
/// and A2A counts up from -32001, so the edge takes -32050, clear of A2A's future codes.
pub const AUTHZ_ERROR_CODE: i64 = -32050;

/// Who a rule matches: any listed principal name, group or tenant. `"*"` matches every
/// authenticated caller in `principals`, every caller that has a tenant in `tenants`, and
/// every caller with at least one group in `groups` (so `tenants = ["*"]` never reaches a
/// caller without a tenant). An anonymous caller matches only by its name.
#[derive(Debug, Clone, Default)]
pub struct Matcher {
    pub principals: Vec<String>,
    pub groups: Vec<String>,
    pub tenants: Vec<String>,
}

impl Matcher {
    /// `named`: the caller as grants by name see it ([`Principal::owner_key`]).
    fn matches(&self, p: &Principal, named: &str) -> bool {
        let star = |l: &[String]| l.iter().any(|x| x == "*");
        if p.is_authenticated()
            && (star(&self.principals)
                || (p.tenant.is_some() && star(&self.tenants))
                || (!p.groups.is_empty() && star(&self.groups)))
        {
            return true;
        }
        self.principals.iter().any(|x| x == named)
            || self.groups.iter().any(|g| p.groups.contains(g))
            || p.tenant
                .as_ref()
                .is_some_and(|t| self.tenants.iter().any(|x| x == t))
    }
}

/// One `[[authz.rules]]` entry, compiled.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: Arc<str>,
    pub matcher: Matcher,
    pub methods: MethodSet,
    pub workspace_roots: Vec<RootTemplate>,
    pub metadata_allowed: Arc<Exceptions>,
    pub create_push_configs: bool,
    /// The agents (`[[agents]]` names) the rule applies at; `None`: every agent.
    pub agents: Option<Vec<String>>,
}

/// The compiled `[authz]` section.
#[derive(Debug, Clone)]
pub struct AuthzPolicy {
    /// A caller no rule matches gets everything (as without `[authz]`) instead of nothing.
    pub default_allow: bool,
    pub rules: Vec<Rule>,
    /// A turn of a caller with its own roots runs in one of them: a SendMessage without a
    /// workspace gets the caller's first root, and is refused (`workspace.required`) when it
    /// has none. Off: such a turn runs wherever the agent would run it.
    pub require_workspace: bool,
}

/// Where a caller may work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roots {
    /// Every root of `workspace.allowed_roots` (no `[authz]`, or `default = "allow"`).
    All,
    /// These paths (expanded templates, normalized lexically; not yet resolved).
    Only(Vec<PathBuf>),
}

/// What one caller may do, decided once per request (a reload never changes a decision
/// already made: the request holds its grant).
#[derive(Debug, Clone)]
pub struct Grant {
    pub methods: MethodSet,
    pub roots: Roots,
    pub metadata_allowed: Vec<Arc<Exceptions>>,
    pub create_push_configs: bool,
    /// The names of the rules that matched (for the audit log); empty: none did.
    pub rules: Vec<Arc<str>>,
    /// See [`AuthzPolicy::require_workspace`]; only with `Roots::Only`.
    pub require_workspace: bool,
}

/// Why a request was refused by authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: Reason,
    /// The method class the caller lacks, when a method was refused.
    pub missing: Option<&'static str>,
}

impl Grant {
    /// Everything: no `[authz]` section (today's behaviour), or `default = "allow"`.
    pub fn everything() -> Grant {
        Grant {
            methods: MethodSet::ALL,
            roots: Roots::All,
            metadata_allowed: Vec::new(),
            create_push_configs: true,
            rules: Vec::new(),
            require_workspace: false,
        }
    }

    /// May the caller call `method`?
    pub fn allows(&self, method: Method) -> Result<(), Refusal> {
        if !self.methods.contains(method) {
            return Err(Refusal {
                reason: reason::AUTHZ_METHOD,
                missing: Some(MethodClass::of(method).as_str()),
            });
        }
        if method == Method::CreateTaskPushNotificationConfig && !self.create_push_configs {
            return Err(Refusal {
                reason: reason::AUTHZ_PUSH,
                missing: Some(MethodClass::Push.as_str()),
            });
        }
        Ok(())
    }

    /// The caller's workspace policy: its roots resolved (with `check_filesystem`, each to
    /// its real path by the bounded walk; a root that does not exist, or whose real path leaves every allowed
    /// root, is dropped: fail closed).
    pub fn workspace(&self, allowed: &WorkspacePolicy) -> WorkspacePolicy {
        let Roots::Only(paths) = &self.roots else {
            return allowed.clone();
        };
        let mut roots = Vec::with_capacity(paths.len());
        for p in paths {
            let resolved = if allowed.check_filesystem {
                match real_path(p) {
                    Some(real) if real.is_dir() => real,
                    _ => continue,
                }
            } else {
                p.clone()
            };
            if within_any(&resolved, &allowed.roots) && !roots.contains(&resolved) {
                roots.push(resolved);
            }
        }
        WorkspacePolicy {
            roots,
            check_filesystem: allowed.check_filesystem,
        }
    }
}

impl Rule {
    /// One line for `check`: whom it matches and what it grants.
    pub fn describe(&self) -> String {
        let list = |k: &str, l: &[String]| (!l.is_empty()).then(|| format!("{k} {}", l.join(", ")));
        let who: Vec<String> = [
            list("principals", &self.matcher.principals),
            list("groups", &self.matcher.groups),
            list("tenants", &self.matcher.tenants),
        ]
        .into_iter()
        .flatten()
        .collect();
        let roots: Vec<&str> = self
            .workspace_roots
            .iter()
            .map(|t| t.text.as_str())
            .collect();
        let at = match &self.agents {
            Some(list) => format!(" at agents {}", list.join(", ")),
            None => String::new(),
        };
        format!(
            "{}{at} -> methods [{}], workspace roots [{}], metadata [{}], push configs {}",
            who.join("; "),
            methods::describe(self.methods),
            roots.join(", "),
            self.metadata_allowed.texts().join(", "),
            if self.create_push_configs {
                "yes"
            } else {
                "no"
            }
        )
    }
}

impl AuthzPolicy {
    /// The union of what the rules matching `p` give; the default when none matches.
    pub fn grant(&self, p: &Principal) -> Result<Grant, Refusal> {
        self.grant_at(p, None)
    }

    /// The grant of `p` at the agent named `agent` (`None`: the one agent of a policy
    /// without `[[agents]]`): only the rules that apply there count.
    pub fn grant_at(&self, p: &Principal, agent: Option<&str>) -> Result<Grant, Refusal> {
        let mut g = Grant {
            methods: MethodSet::EMPTY,
            roots: Roots::Only(Vec::new()),
            metadata_allowed: Vec::new(),
            create_push_configs: false,
            rules: Vec::new(),
            require_workspace: self.require_workspace,
        };
        let mut roots = Vec::new();
        let here = |r: &&Rule| match (&r.agents, agent) {
            (Some(list), Some(a)) => list.iter().any(|n| n == a),
            _ => true,
        };
        let named = p.owner_key();
        for rule in self
            .rules
            .iter()
            .filter(here)
            .filter(|r| r.matcher.matches(p, &named))
        {
            g.rules.push(rule.name.clone());
            g.methods = g.methods.union(rule.methods);
            g.create_push_configs |= rule.create_push_configs;
            if !rule.metadata_allowed.texts().is_empty() {
                g.metadata_allowed.push(rule.metadata_allowed.clone());
            }
            for t in &rule.workspace_roots {
                // A JWT subject with a tenant is one caller only within it: a template that
                // names it without its tenant (the same path for every tenant's `jwt:dora`)
                // gives it nothing.
                if t.uses_principal() && !t.uses_tenant() && p.is_named_within_tenant() {
                    continue;
                }
                match t.expand(p.tenant.as_deref(), &p.name) {
                    Ok(Some(path)) => {
                        if let Some(n) = normalize_lexically(&path) {
                            if !roots.contains(&n) {
                                roots.push(n);
                            }
                        }
                    }
                    // A template naming a tenant the caller does not have gives nothing.
                    Ok(None) => {}
                    Err(template::NotAComponent) => {
                        return Err(Refusal {
                            reason: reason::AUTHZ_ATTRIBUTE_VALUE,
                            missing: None,
                        })
                    }
                }
            }
        }
        if g.rules.is_empty() && self.default_allow {
            return Ok(Grant::everything());
        }
        g.roots = Roots::Only(roots);
        Ok(g)
    }
}

#[cfg(test)]
mod tests;
