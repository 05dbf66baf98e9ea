//! ListTasks, answered by the edge for the caller alone: the registry pages the caller's
//! tasks across the fleet; each listed task is read fresh from its agent and cleaned.
//!
//! What one ListTasks costs is bounded whatever the tasks hold: it keeps the caller's
//! concurrency slot for the whole fan-out, each task read spends one of the caller's rate
//! budget (a page stops where the budget does), tasks are read a few at a time, each read is
//! capped at the page's byte budget (`limits.list_tasks_page_bytes`), and the page ends
//! (with a `nextPageToken`) before the task that would take it over that budget. A task
//! larger than the whole budget is listed as what the registry knows of it (id, context,
//! state): read it whole with GetTask.
//!
//! What a page holds is charged to the caller's request budgets as a request's body and tree
//! are (`limits.request_bytes_per_principal`, `limits.request_bytes`): each read as its bytes
//! arrive, each task its tree (its strings and 192 bytes a value) once parsed, until the
//! answer is built; the answer's body then holds its own size until it is sent. A task that
//! does not fit what the caller's budgets have left ends the page there (`nextPageToken`), or,
//! the page's first, is refused (429 `concurrency.request_bytes`, 503
//! `overload.request_bytes`: the caller's other requests hold them, and give them back as
//! they end); one that could never fit beside the page's own request is listed as what the
//! edge knows of it, as one larger than the page is.

use super::*;
use crate::reason;

/// ListTasks reads this many listed tasks from their agents at once.
pub(super) const LIST_TASKS_CONCURRENCY: usize = 8;

/// How one listed task was read.
/// Whether the agent's fresh answer for a listed task still meets the query's filters: its
/// state is `state` (when asked), its status time at or after `from` (when asked and the
/// answer has one).
fn still_matches(task: &Value, state: &Option<String>, from: u64) -> bool {
    let status = &task["status"];
    let state_ok = match state.as_deref() {
        Some(s) => status["state"].as_str() == Some(s),
        None => true,
    };
    let time_ok = from == 0
        || match status["timestamp"]
            .as_str()
            .and_then(crate::time::parse_rfc3339)
        {
            Some(t) => t >= from,
            None => true,
        };
    state_ok && time_ok
}

enum Read {
    /// The agent's answer, and what it holds of the caller's request budgets.
    Task(UpstreamId, Bytes, RequestBytes),
    /// Its answer did not fit what the caller's request budgets had left.
    NoRoom(Reason),
    /// What the edge knows of it stands in for the agent's answer: the answer is larger
    /// than the page's byte budget, or the agent cannot be asked now (down, removed by a
    /// reload, or its read failed), so that one agent does not fail the caller's page.
    Summary,
}

impl Gate {
    /// ListTasks answered for the caller alone (see the module note).
    /// `owner`: the name the registry knows the caller by at this agent. `slot`: the caller's
    /// in-flight slot, held for the whole fan-out and then by the answer's body until it is
    /// sent; `held`: the request's share of the caller's request budgets, which the page's
    /// reads and tasks grow (see the module note), and then the answer's body holds.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn list_tasks(
        &self,
        at: &AgentGate,
        headers: HeaderMap,
        rpc: &RpcRequest,
        who: &Principal,
        owner: &str,
        trace: &Trace,
        (slot, mut held): (ConcurrencyGuard, RequestBytes),
    ) -> Result<Response<BoxBody>, Rejection> {
        let principal = owner;
        let p = &rpc.params;
        let text = |k: &str| p.get(k).and_then(Value::as_str);
        let page_size = p.get("pageSize").and_then(Value::as_u64).unwrap_or(50) as usize;
        // The page is chosen by what the edge last learned of each task; the agent's fresh
        // answer is held to the filters again (its state or time may have moved since).
        let want_state = text("status").map(str::to_string);
        let from = text("statusTimestampAfter")
            .and_then(crate::time::parse_rfc3339)
            .unwrap_or(0);
        let include_artifacts = p.get("includeArtifacts").and_then(Value::as_bool) == Some(true);
        let page = self
            .owners
            .list(
                principal,
                text("contextId"),
                text("status"),
                // Validated and put in UTC `Z` by the params check. The bound is inclusive
                // (proto: "greater than or equal to"); the registries list what is after
                // theirs, so theirs is one microsecond before.
                from.saturating_sub(1),
                page_size,
                text("pageToken"),
            )
            .await
            .map_err(|r| refusal(&rpc.id, r))?;
        let budget = self.list_page_bytes;
        let mut tasks: Vec<Value> = Vec::with_capacity(page.tasks.len());
        // The bytes read of the page's tasks (its budget's measure).
        let mut read = 0usize;
        // What the request and the tasks kept hold of the caller's request budget.
        let mut kept = held.bytes();
        let per_principal = held.per_principal();
        // Where the page was cut short (the index of the first task left for the next page).
        let mut cut: Option<usize> = None;
        // Batches sized by what is left of the budget and the tasks' size so far (the first
        // read alone), so that what a page reads stays close to what it holds.
        let mut first = 0;
        'batches: while first < page.tasks.len() {
            let size = match (tasks.len(), read) {
                (0, _) => 1,
                (n, h) => {
                    ((budget.saturating_sub(h)) / (h / n).max(1)).clamp(1, LIST_TASKS_CONCURRENCY)
                }
            };
            let batch = &page.tasks[first..(first + size).min(page.tasks.len())];
            // Each read spends the caller's rate; the page stops where the budget does.
            let mut allowed = 0;
            for _ in batch {
                match self.budgets.check_principal(&who.owner_key(), None).await {
                    Ok(()) => allowed += 1,
                    Err(crate::state::Refused::Limited(_)) => break,
                    Err(crate::state::Refused::Unavailable) => {
                        return Err(Rejection::rpc(
                            rpc.id.clone(),
                            crate::state::ownership::state_unavailable(),
                        ))
                    }
                }
            }
            if allowed == 0 && first == 0 {
                return Err(Rejection::TooManyRequests {
                    reason: reason::RATE_PRINCIPAL,
                    retry_after_secs: 1,
                });
            }
            let reads = self
                .read_tasks(at, &batch[..allowed], &headers, rpc, who, trace, &held)
                .await?;
            for (k, one) in reads.into_iter().enumerate() {
                let (task_id, _) = &batch[k];
                // A task that does not fit what the caller's request budgets have left: the
                // page ends before it, or (its first task) is refused, for the caller's other
                // requests hold them and give them back as they end; one that could never fit
                // beside the page's own request (`need`: what the two would hold) is listed as
                // what the edge knows of it, as one larger than the page is.
                // (past the caller's budget it could not fit everyone's either: whichever
                // budget had the smaller room this time)
                let no_room = |reason: Reason, need: usize| match tasks.is_empty() {
                    false => Ok(false),
                    true if need > per_principal => Ok(true),
                    true => Err(over_request_budget(reason)),
                };
                let summary = || self.owners.registry().task_summary(principal, task_id);
                let task = match one {
                    // (stopped midway: it may be as large as the page)
                    Some(Read::NoRoom(reason)) => match no_room(reason, kept + budget)? {
                        true => summary(),
                        false => {
                            cut = Some(first + k);
                            break 'batches;
                        }
                    },
                    Some(Read::Task(upstream, bytes, share)) => {
                        if read + bytes.len() > budget && !tasks.is_empty() {
                            cut = Some(first + k);
                            break 'batches;
                        }
                        read += bytes.len();
                        held.absorb(share);
                        let listed = self
                            .listed_task(
                                at,
                                &bytes,
                                &mut held,
                                (task_id, upstream),
                                principal,
                                include_artifacts,
                            )
                            .await;
                        // A task the page keeps holds what it was charged; any other gives
                        // it back.
                        let keep = matches!(&listed,
                            Ok(Listed::Task(t)) if still_matches(t, &want_state, from));
                        match keep {
                            true => kept = held.bytes(),
                            false => held.shrink_to(kept),
                        }
                        match listed {
                            Ok(Listed::Task(task)) if keep => Some(task),
                            // (no longer matching the query, or gone from the agent)
                            Ok(Listed::Task(_)) | Ok(Listed::Gone) => None,
                            Ok(Listed::NoRoom(reason, need)) => match no_room(reason, kept + need)?
                            {
                                true => summary(),
                                false => {
                                    cut = Some(first + k);
                                    break 'batches;
                                }
                            },
                            // Not this task: what the edge knows of it instead.
                            Ok(Listed::Other) => summary(),
                            Err(e) => return Err(Rejection::rpc(rpc.id.clone(), e)),
                        }
                    }
                    Some(Read::Summary) => summary(),
                    // The agent no longer has it: left out of the page.
                    None => None,
                };
                tasks.extend(task);
            }
            if allowed < batch.len() {
                cut = Some(first + allowed);
                break;
            }
            first += batch.len();
        }
        held.shrink_to(kept);
        let next_page_token = match cut {
            Some(0) | None => page.next_page_token.clone(),
            Some(i) => self.owners.registry().token_after(&page, i - 1),
        };
        let result = json!({
            "tasks": tasks,
            "nextPageToken": next_page_token,
            "pageSize": page_size,
            "totalSize": page.total_size,
        });
        let body = crate::a2a::result_body(&rpc.id, result);
        // (what the answer holds while it is sent)
        held.shrink_to(body.len());
        Ok(crate::body::json_response_holding(
            StatusCode::OK,
            body,
            (slot, held),
        ))
    }

    /// Reads these tasks from their agents at once, each capped at the page's budget and
    /// charged to the caller's request budgets as it arrives (`held`'s); in order.
    #[allow(clippy::too_many_arguments)]
    async fn read_tasks(
        &self,
        at: &AgentGate,
        batch: &[(String, UpstreamId)],
        headers: &HeaderMap,
        rpc: &RpcRequest,
        who: &Principal,
        trace: &Trace,
        held: &RequestBytes,
    ) -> Result<Vec<Option<Read>>, Rejection> {
        let cap = self.list_page_bytes;
        let mut reads = tokio::task::JoinSet::new();
        let mut out: Vec<Option<Read>> = (0..batch.len()).map(|_| None).collect();
        for (i, (task_id, upstream)) in batch.iter().enumerate() {
            let mut params = serde_json::Map::new();
            params.insert("id".into(), Value::String(task_id.clone()));
            if let Some(h) = rpc.params.get("historyLength") {
                params.insert("historyLength".into(), h.clone());
            }
            let get = RpcRequest {
                id: Value::from(1),
                method: Method::GetTask,
                params,
            };
            let Some(agent) = at.fleet.get(*upstream).filter(|a| a.is_healthy()).cloned() else {
                out[i] = Some(Read::Summary);
                continue;
            };
            let mut headers = headers.clone();
            self.caller_headers(&mut headers, &agent.upstream.name, who, &trace.request_id)
                .map_err(|e| Rejection::rpc(rpc.id.clone(), e))?;
            let upstream = *upstream;
            let mut share = held.sibling();
            reads.spawn(async move {
                let Ok(resp) = agent
                    .send_rpc(
                        headers,
                        Bytes::from(get.to_bytes()),
                        upstream::Answer::Whole,
                    )
                    .await
                else {
                    return (i, Read::Summary);
                };
                // As a relayed answer must be: a 200 of application/json.
                if !upstream::is_json_ok(&resp) {
                    return (i, Read::Summary);
                }
                match upstream::read_answer(resp.into_body(), cap, &mut share).await {
                    Ok(bytes) => (i, Read::Task(upstream, bytes, share)),
                    Err(UpstreamError::Refused(reason)) => (i, Read::NoRoom(reason)),
                    // Larger than the whole page, or not read whole.
                    Err(_) => (i, Read::Summary),
                }
            });
        }
        while let Some(joined) = reads.join_next().await {
            match joined {
                Ok((i, read)) => out[i] = Some(read),
                Err(_) => {
                    return Err(Rejection::rpc(
                        rpc.id.clone(),
                        RpcError::internal(reason::UPSTREAM_BAD_RESPONSE),
                    ))
                }
            }
        }
        Ok(out)
    }

    /// One listed task from the agent's GetTask answer of `task_id`: cleaned and learned
    /// from; `Gone` when the agent no longer has it; `Other` when the answer is not that
    /// task (a bare Task of another id, another shape: nothing learned from it); `NoRoom`
    /// when its tree does not fit the caller's request budget (`held`, grown by the tree
    /// otherwise); an error when it names another caller's task.
    async fn listed_task(
        &self,
        at: &AgentGate,
        bytes: &[u8],
        held: &mut RequestBytes,
        (task_id, upstream): (&str, UpstreamId),
        principal: &str,
        include_artifacts: bool,
    ) -> Result<Listed, RpcError> {
        let mut v = match upstream::parse_charged(bytes, at.requests.max_json_values, held) {
            Ok(v) => v,
            // (what it would hold: its bytes read, and its tree)
            Err(Some((reason, tree))) => return Ok(Listed::NoRoom(reason, bytes.len() + tree)),
            Err(None) => return Ok(Listed::Gone),
        };
        // The answer to the edge's own GetTask (id 1), as a relayed answer must echo its id.
        if v.get("id") != Some(&Value::from(1)) {
            return Ok(Listed::Other);
        }
        clean_response(&mut v, &at.requests.metadata, at.requests.redact_paths);
        let Some(mut task) = v.get_mut("result").map(Value::take) else {
            return Ok(Listed::Gone);
        };
        if !task.is_object() {
            return Ok(Listed::Gone);
        }
        // A bare Task of that id, nothing else (a `taskId` or `messageId` beside it would
        // make the registry read it as another shape).
        if !Shape::Task.holds(&task) || task.get("id").and_then(Value::as_str) != Some(task_id) {
            return Ok(Listed::Other);
        }
        match self.owners.learn(principal, upstream, &task).await {
            Ok(()) => {}
            Err(reason::STATE_UNAVAILABLE) => {
                return Err(crate::state::ownership::state_unavailable())
            }
            // The agent answered with another caller's task: never relayed.
            Err(_) => {
                return Err(RpcError::new(
                    upstream::answer_code(reason::UPSTREAM_FOREIGN_TASK),
                    "Upstream agent sent an answer the edge refuses",
                    reason::UPSTREAM_FOREIGN_TASK,
                ))
            }
        }
        if !include_artifacts {
            if let Some(t) = task.as_object_mut() {
                t.remove("artifacts");
            }
        }
        self.owners.registry().client_view(principal, &mut task);
        Ok(Listed::Task(task))
    }
}

/// What one GetTask answer gives a ListTasks page ([`Gate::listed_task`]).
enum Listed {
    Task(Value),
    Gone,
    Other,
    /// Its tree does not fit the caller's request budget; what it would hold.
    NoRoom(Reason, usize),
}
