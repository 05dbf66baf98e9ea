//! ListTasks, answered by the edge for the caller alone: the registry pages the caller's
//! tasks across the fleet; each listed task is read fresh from its agent and cleaned.

use super::*;

/// ListTasks reads this many listed tasks from their agents at once.
pub(super) const LIST_TASKS_CONCURRENCY: usize = 8;

/// Largest task the edge reads from an agent for a ListTasks page.
pub(super) const MAX_TASK_BYTES: usize = 64 * 1024 * 1024;

impl Gate {
    /// ListTasks answered for the caller alone: the registry knows which tasks are theirs
    /// (across the fleet) and pages them with tamper-proof tokens; each task on the page is
    /// read fresh from its agent.
    pub(super) async fn list_tasks(
        &self,
        headers: HeaderMap,
        rpc: &RpcRequest,
        who: &Principal,
        trace: &Trace,
    ) -> Result<Response<BoxBody>, Rejection> {
        let principal = who.name.as_str();
        let p = &rpc.params;
        let text = |k: &str| p.get(k).and_then(Value::as_str);
        let page_size = p.get("pageSize").and_then(Value::as_u64).unwrap_or(50) as usize;
        let include_artifacts = p.get("includeArtifacts").and_then(Value::as_bool) == Some(true);
        let page = self
            .registry
            .list(
                principal,
                text("contextId"),
                text("status"),
                page_size,
                text("pageToken"),
            )
            .map_err(|d| Rejection::rpc(rpc.id.clone(), d.rpc_error()))?;
        // Each listed task is read from its agent, a few at a time, and then cleaned and
        // learned from like any answer of that agent.
        let n = page.tasks.len();
        let slots = Arc::new(tokio::sync::Semaphore::new(LIST_TASKS_CONCURRENCY));
        let mut reads = tokio::task::JoinSet::new();
        for (i, (task_id, upstream)) in page.tasks.into_iter().enumerate() {
            let mut params = serde_json::Map::new();
            params.insert("id".into(), Value::String(task_id));
            if let Some(h) = p.get("historyLength") {
                params.insert("historyLength".into(), h.clone());
            }
            let get = RpcRequest {
                id: Value::from(1),
                method: Method::GetTask,
                params,
            };
            let agent = self
                .fleet
                .get(upstream)
                .filter(|a| a.is_healthy())
                .cloned()
                .ok_or_else(|| unavailable(&rpc.id))?;
            let (mut headers, slots) = (headers.clone(), slots.clone());
            self.caller_headers(&mut headers, &agent.upstream.name, who, &trace.request_id)
                .map_err(|e| Rejection::rpc(rpc.id.clone(), e))?;
            reads.spawn(async move {
                let _slot = slots.acquire_owned().await;
                let resp = agent.send_rpc(headers, Bytes::from(get.to_bytes())).await?;
                let bytes = collect_limited(resp.into_body(), MAX_TASK_BYTES)
                    .await
                    .map_err(|_| UpstreamError::BadResponse)?;
                Ok::<_, UpstreamError>((i, upstream, bytes))
            });
        }
        let mut fetched: Vec<Option<(UpstreamId, Bytes)>> = vec![None; n];
        while let Some(joined) = reads.join_next().await {
            match joined {
                Ok(Ok((i, upstream, bytes))) => fetched[i] = Some((upstream, bytes)),
                Ok(Err(e)) => {
                    return Err(Rejection::rpc(
                        rpc.id.clone(),
                        RpcError::new(-32603, e.message(), e.reason()),
                    ))
                }
                Err(_) => {
                    return Err(Rejection::rpc(
                        rpc.id.clone(),
                        RpcError::internal("upstream.bad_response"),
                    ))
                }
            }
        }
        let mut tasks = Vec::with_capacity(n);
        for (upstream, bytes) in fetched.into_iter().flatten() {
            let Ok(mut v) = serde_json::from_slice::<Value>(&bytes) else {
                continue;
            };
            clean_response(&mut v, &self.requests.metadata, self.requests.redact_paths);
            // A task the agent no longer has is left out of the page.
            let Some(mut task) = v.get_mut("result").map(Value::take) else {
                continue;
            };
            if !task.is_object() {
                continue;
            }
            if self.registry.observe(principal, upstream, &task).is_err() {
                // The agent answered with another caller's task: never relayed.
                return Err(Rejection::rpc(
                    rpc.id.clone(),
                    RpcError::new(
                        -32603,
                        "Upstream agent sent an answer the edge refuses",
                        FOREIGN,
                    ),
                ));
            }
            if !include_artifacts {
                if let Some(t) = task.as_object_mut() {
                    t.remove("artifacts");
                }
            }
            tasks.push(task);
        }
        let result = json!({
            "tasks": tasks,
            "nextPageToken": page.next_page_token,
            "pageSize": page_size,
            "totalSize": page.total_size,
        });
        Ok(json_response(
            StatusCode::OK,
            crate::a2a::result_body(&rpc.id, result),
        ))
    }
}
