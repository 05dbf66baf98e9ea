//! Per-method checks of A2A 1.0 params: which fields each method takes, what each must be,
//! and the sanitized params to forward (unknown fields dropped, values normalized).
//!
//! | reason | when |
//! |---|---|
//! | `message.id` | `messageId` missing, empty, over 256 bytes or with control characters |
//! | `message.role` | `role` other than `ROLE_USER` |
//! | `message.parts` | `parts` missing, empty, over 256 items, or an item that is not an object |
//! | `task_state.invalid` | `status` is not a TaskState name |
//! | `timestamp.invalid` | `statusTimestampAfter` is not RFC 3339 |
//! | `workspace.conflict` | request-level and message-level `iac_code.cwd` differ |
//!
//! plus the reasons of [`super::fields`], [`super::parts`], [`super::workspace`],
//! [`super::metadata`] and [`super::push_url`].

use serde_json::{Map, Value};

use super::fields::{invalid, is_valid_id, Fields, MAX_ID_LEN};
use super::media::MediaTypes;
use super::metadata::{
    check_metadata, check_metadata_object, Exceptions, MetadataCaller, MetadataPolicy,
};
use super::parts::{check_part, PartRules, TextFileReads};
use super::push_url::{check_push_url, PushUrlPolicy};
use super::workspace::{resolve_cwd, Workspace, WorkspacePolicy};
use crate::a2a::{Method, RpcError};
use crate::reason;

/// Most parts in one message.
pub const MAX_PARTS: usize = 256;
const MAX_MESSAGE_ID: usize = 256;
const MAX_PAGE_TOKEN: usize = 1024;
const MAX_TOKEN: usize = 4096;
const INT32_MAX: i64 = i32::MAX as i64;

/// The A2A 1.0 task states a task can be in (`status.state`).
pub(crate) const TASK_STATES: [&str; 8] = [
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
];

/// The request rules of a policy, built once at load.
#[derive(Debug, Clone)]
pub struct RequestPolicy {
    pub media: MediaTypes,
    pub workspace: WorkspacePolicy,
    pub metadata: MetadataPolicy,
    pub push: PushUrlPolicy,
    /// Extension URIs every request must name in `A2A-Extensions`.
    pub required_extensions: Vec<String>,
    /// Replace absolute paths in agents' answers with `[PATH]`.
    pub redact_paths: bool,
    /// Most JSON values a request body, or an agent's answer the edge rebuilds, may hold
    /// (`a2a.max_json_values`).
    pub max_json_values: usize,
}

impl RequestPolicy {
    /// The rules for one caller without authorization rules: every allowed root, the
    /// `allowed_for` metadata exceptions of its name.
    pub fn rules<'a>(&'a self, principal: &'a str) -> Rules<'a> {
        self.rules_for(principal, &self.workspace, &[])
    }

    /// The rules for one caller whose grant gives these workspace roots and metadata
    /// exceptions.
    pub fn rules_for<'a>(
        &'a self,
        principal: &'a str,
        workspace: &'a WorkspacePolicy,
        granted: &'a [std::sync::Arc<Exceptions>],
    ) -> Rules<'a> {
        Rules {
            media: &self.media,
            workspace,
            metadata: &self.metadata,
            push: &self.push,
            principal,
            granted,
        }
    }
}

/// Everything a request is checked against, for one caller.
pub struct Rules<'a> {
    pub media: &'a MediaTypes,
    pub workspace: &'a WorkspacePolicy,
    pub metadata: &'a MetadataPolicy,
    pub push: &'a PushUrlPolicy,
    pub principal: &'a str,
    /// Metadata exceptions of the caller's grant.
    pub granted: &'a [std::sync::Arc<Exceptions>],
}

impl Rules<'_> {
    fn caller(&self) -> MetadataCaller<'_> {
        MetadataCaller {
            principal: self.principal,
            granted: self.granted,
        }
    }
}

/// What the checks learned that later stages need.
#[derive(Debug, Default)]
pub struct Checked {
    /// A push callback URL in the request (checked; for an optional DNS check).
    pub push_url: Option<url::Url>,
    /// The workspace the request names, if any.
    pub workspace: Option<Workspace>,
}

/// Checks `params` for `method` and returns the params to forward.
pub fn check_params(
    method: Method,
    params: Map<String, Value>,
    rules: &Rules,
) -> Result<(Map<String, Value>, Checked), RpcError> {
    let mut f = Fields::new(params, "params")?;
    let mut checked = Checked::default();
    f.tenant("tenant")?;
    match method {
        Method::SendMessage | Method::SendStreamingMessage => {
            send_message(&mut f, rules, &mut checked)?
        }
        Method::GetTask => {
            f.required_id("id")?;
            f.int("historyLength", 0..=INT32_MAX)?;
        }
        Method::ListTasks => {
            // Fields without presence (proto3): their default is their absence.
            for key in ["contextId", "pageToken"] {
                f.drop_empty(key);
            }
            f.id("contextId")?;
            task_state(&mut f, "status")?;
            // `optional`: an explicit 0 is a page size, and out of range.
            f.int("pageSize", 1..=100)?;
            f.string("pageToken", MAX_PAGE_TOKEN)?;
            f.int("historyLength", 0..=INT32_MAX)?;
            timestamp(&mut f, "statusTimestampAfter")?;
            f.bool("includeArtifacts")?;
        }
        Method::CancelTask => {
            f.required_id("id")?;
            metadata(&mut f, rules)?;
        }
        Method::SubscribeToTask => {
            f.required_id("id")?;
        }
        Method::CreateTaskPushNotificationConfig => {
            checked.push_url = Some(push_config(&mut f, rules, true)?);
        }
        Method::GetTaskPushNotificationConfig | Method::DeleteTaskPushNotificationConfig => {
            f.required_id("taskId")?;
            f.required_id("id")?;
        }
        Method::ListTaskPushNotificationConfigs => {
            f.required_id("taskId")?;
            // Here `page_size` has no presence: 0 is the default, absent.
            f.drop_default("pageSize");
            f.drop_empty("pageToken");
            f.int("pageSize", 1..=100)?;
            f.string("pageToken", MAX_PAGE_TOKEN)?;
        }
        Method::GetExtendedAgentCard => {}
    }
    Ok((f.finish(), checked))
}

fn send_message(f: &mut Fields, rules: &Rules, checked: &mut Checked) -> Result<(), RpcError> {
    let message = f.required_object("message")?;
    let mut m = Fields::new(message, "params.message")?;
    // The workspace first: file parts are checked against it.
    let request_meta = f.object("metadata")?;
    let message_meta = m.object("metadata")?;
    let mut cwds = Vec::new();
    for meta in [&request_meta, &message_meta].into_iter().flatten() {
        check_metadata_object(meta, &rules.caller(), rules.metadata)?;
        if let Some(cwd) = meta.get("iac_code").and_then(|v| v.get("cwd")) {
            cwds.push(resolve_cwd(cwd, rules.workspace)?);
        }
    }
    let workspace = match cwds.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        [a, b, ..] if a.logical == b.logical => Some(a.clone()),
        _ => {
            return Err(invalid(
                "the request and the message name different workspaces",
                reason::WORKSPACE_CONFLICT,
            ))
        }
    };
    let logical = workspace.as_ref().map(|w| Value::String(w.forward_cwd()));
    // iac-code reads the request's metadata when it is a non-empty object, else the
    // message's (`context.metadata or message.metadata`): the workspace must be in the one it
    // reads, or it runs in its own directory. So a workspace named (or given by the edge) in
    // the message goes into a non-empty request metadata too.
    let mut request_meta = request_meta;
    if let (Some(cwd), Some(meta)) = (&logical, request_meta.as_mut()) {
        if !meta.is_empty() {
            let iac = meta
                .entry("iac_code")
                .or_insert_with(|| Value::Object(Default::default()));
            if iac.is_null() {
                *iac = Value::Object(Default::default());
            }
            let Value::Object(iac) = iac else {
                return Err(invalid(
                    "params.metadata.iac_code must be an object (the workspace goes there)",
                    reason::METADATA_TYPE,
                ));
            };
            iac.insert("cwd".into(), cwd.clone());
        }
    }
    for (meta, target) in [(request_meta, &mut *f), (message_meta, &mut m)] {
        if let Some(mut meta) = meta {
            if let (Some(cwd), Some(Value::Object(iac))) = (&logical, meta.get_mut("iac_code")) {
                if iac.contains_key("cwd") {
                    iac.insert("cwd".into(), cwd.clone());
                }
            }
            target.put("metadata", Value::Object(meta));
        }
    }

    match m.take("messageId") {
        Some(Value::String(id))
            if !id.is_empty()
                && id.len() <= MAX_MESSAGE_ID
                && !id.chars().any(char::is_control) =>
        {
            m.put("messageId", Value::String(id))
        }
        _ => {
            return Err(invalid(
                format!("params.message.messageId must be 1-{MAX_MESSAGE_ID} bytes"),
                reason::MESSAGE_ID,
            ))
        }
    }
    match m.take("role") {
        Some(Value::String(r)) if r == "ROLE_USER" => {}
        // ProtoJSON also accepts the enum number.
        Some(Value::Number(n)) if n.as_i64() == Some(1) => {}
        _ => {
            return Err(invalid(
                "params.message.role must be ROLE_USER",
                reason::MESSAGE_ROLE,
            ))
        }
    }
    m.put("role", Value::from("ROLE_USER"));
    // Without presence (proto3): "" is absent, a new context or task.
    for key in ["contextId", "taskId"] {
        m.drop_empty(key);
    }
    m.id("contextId")?;
    m.id("taskId")?;
    m.strings("extensions", 32, 512, |s| s.contains(':'))?;
    m.strings("referenceTaskIds", 64, MAX_ID_LEN, is_valid_id)?;
    let parts = match m.take("parts") {
        Some(Value::Array(p)) if !p.is_empty() && p.len() <= MAX_PARTS => p,
        _ => {
            return Err(invalid(
                format!("params.message.parts must hold 1-{MAX_PARTS} parts"),
                reason::MESSAGE_PARTS,
            ))
        }
    };
    let part_rules = PartRules {
        media: rules.media,
        workspace: workspace.as_ref(),
        policy: rules.workspace,
        reads: TextFileReads::default(),
    };
    let mut clean = Vec::with_capacity(parts.len());
    for part in parts {
        let Value::Object(mut part) = part else {
            return Err(invalid(
                "params.message.parts must hold objects",
                reason::MESSAGE_PARTS,
            ));
        };
        super::names::to_json_names(&mut part, "params.message.parts")?;
        check_part(&mut part, &part_rules)?;
        clean.push(Value::Object(part));
    }
    m.put("parts", Value::Array(clean));
    f.put("message", Value::Object(m.finish()));

    if let Some(config) = f.object("configuration")? {
        let mut c = Fields::new(config, "params.configuration")?;
        c.strings("acceptedOutputModes", 64, 255, |s| s.contains('/'))?;
        c.int("historyLength", 0..=INT32_MAX)?;
        c.bool("returnImmediately")?;
        if let Some(push) = c.object("taskPushNotificationConfig")? {
            let mut p = Fields::new(push, "params.configuration.taskPushNotificationConfig")?;
            checked.push_url = Some(push_config(&mut p, rules, false)?);
            c.put("taskPushNotificationConfig", Value::Object(p.finish()));
        }
        f.put("configuration", Value::Object(c.finish()));
    }
    checked.workspace = workspace;
    Ok(())
}

/// A TaskPushNotificationConfig (top level of Create, or inside SendMessage's configuration,
/// where the task id is not known yet).
fn push_config(f: &mut Fields, rules: &Rules, task_required: bool) -> Result<url::Url, RpcError> {
    // Without presence (proto3): "" is absent (a required taskId is then missing).
    for key in ["taskId", "id"] {
        f.drop_empty(key);
    }
    if task_required {
        f.required_id("taskId")?;
    } else {
        f.id("taskId")?;
    }
    f.id("id")?;
    f.tenant("tenant")?;
    let url = match f.take_required("url")? {
        Value::String(s) => check_push_url(&s, rules.push)?,
        _ => return Err(invalid("push url must be a string", reason::PARAMS_TYPE)),
    };
    f.put("url", Value::String(url.as_str().to_string()));
    f.string("token", MAX_TOKEN)?;
    if let Some(auth) = f.object("authentication")? {
        let mut a = Fields::new(auth, "authentication")?;
        a.string("scheme", 64)?;
        a.string("credentials", MAX_TOKEN)?;
        f.put("authentication", Value::Object(a.finish()));
    }
    Ok(url)
}

fn metadata(f: &mut Fields, rules: &Rules) -> Result<(), RpcError> {
    if let Some(meta) = f.object("metadata")? {
        let v = Value::Object(meta);
        check_metadata(&v, &rules.caller(), rules.metadata)?;
        f.put("metadata", v);
    }
    Ok(())
}

fn task_state(f: &mut Fields, key: &str) -> Result<(), RpcError> {
    let name = match f.take(key) {
        // The enum's default (a field without presence): no filter.
        None => return Ok(()),
        Some(Value::String(s)) if s == "TASK_STATE_UNSPECIFIED" => return Ok(()),
        Some(Value::Number(n)) if n.as_u64() == Some(0) => return Ok(()),
        Some(Value::String(s)) if TASK_STATES.contains(&s.as_str()) => s,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(i @ 1..=8) => TASK_STATES[(i - 1) as usize].to_string(),
            _ => {
                return Err(invalid(
                    "status must be a TaskState",
                    reason::TASK_STATE_INVALID,
                ))
            }
        },
        Some(_) => {
            return Err(invalid(
                "status must be a TaskState",
                reason::TASK_STATE_INVALID,
            ))
        }
    };
    f.put(key, Value::String(name));
    Ok(())
}

fn timestamp(f: &mut Fields, key: &str) -> Result<(), RpcError> {
    match f.take(key) {
        None => Ok(()),
        // Any fraction and offset in; UTC `Z` (microseconds) out.
        Some(Value::String(s)) if s.len() <= 64 => match crate::time::parse_rfc3339(&s) {
            Some(micros) => {
                f.put(key, Value::String(crate::time::format_rfc3339(micros)));
                Ok(())
            }
            None => Err(invalid(
                format!("{key} must be an RFC 3339 timestamp"),
                reason::TIMESTAMP_INVALID,
            )),
        },
        Some(_) => Err(invalid(
            format!("{key} must be an RFC 3339 timestamp"),
            reason::TIMESTAMP_INVALID,
        )),
    }
}
