//! The MCP Tasks extension (`io.modelcontextprotocol/tasks`) for `helix_run_continue`:
//! a client that declares the extension on its request may be answered `CreateTaskResult`
//! (the turn claimed and running in the background, as REST's `Prefer: respond-async`);
//! `tasks/get` reads the turn from its key's receipt, and its result is the tool result
//! the synchronous call would have returned; `tasks/cancel` cancels the run at its current
//! version. Any other client is served exactly as before.
//!
//! A task id is a name, never a capability: `<run_id>/<idempotency_key>`, resolved on every
//! call under the caller's own identity and owner (another caller finds nothing).

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use rmcp::model::{
    CallToolResponse, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject, Task, TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use super::call_context::call_context;
use super::catalog::ToolSpec;
use super::server::{HelixMcp, ToolOutput};
use super::tools::runs::ContinueArgs;
use crate::domain::ids::IdempotencyKey;
use crate::error::ApiError;
use crate::service::Caller;
use crate::service::runs::{BackgroundTurn, Continued, RETRY_AFTER, TurnState};

fn task_id(run_id: &str, key: &IdempotencyKey) -> String {
    format!("{run_id}/{}", key.as_str())
}

/// The run and key a task id names; anything else is an unknown task.
fn parse_task_id(id: &str) -> Result<(&str, IdempotencyKey), ErrorData> {
    let (run_id, key) = id.split_once('/').ok_or_else(unknown_task)?;
    Ok((run_id, IdempotencyKey::parse(key).ok_or_else(unknown_task)?))
}

fn unknown_task() -> ErrorData {
    ErrorData::invalid_params("Unknown task", None)
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn epoch(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0).single().unwrap_or_default()
}

/// A service refusal of a `tasks/*` request as a JSON-RPC error: an unknown task for a
/// missing or foreign one, otherwise the error envelope as the error's data.
fn task_error(err: ApiError, request_id: &str) -> ErrorData {
    match err {
        ApiError::NotFound => unknown_task(),
        err => {
            err.log(request_id);
            let data = serde_json::to_value(err.envelope(request_id)).ok();
            ErrorData::invalid_request(err.code().to_string(), data)
        }
    }
}

/// The authenticated agent and the request id of a task method.
fn caller_of(context: &RequestContext<RoleServer>) -> (Option<Caller>, String) {
    let cx = call_context(context);
    (cx.caller(), cx.request_id)
}

fn principal(caller: Option<Caller>) -> Result<Caller, ErrorData> {
    caller.ok_or_else(|| ErrorData::invalid_request("authentication required", None))
}

impl HelixMcp {
    /// `helix_run_continue` for a client that declared the extension: the claim as a
    /// synchronous call makes it; a task once claimed, the synchronous answer otherwise.
    pub(crate) async fn call_as_task(
        &self,
        spec: &ToolSpec,
        arguments: &Value,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let cx = call_context(context);
        let (caller, rid) = (cx.caller(), cx.request_id);
        let result = async {
            let p = caller.ok_or(ApiError::AuthenticationRequired)?;
            self.check_arguments(spec, arguments)?;
            let a: ContinueArgs = crate::http::parse_strict_value(arguments)?;
            let key = IdempotencyKey::parse(&a.idempotency_key).ok_or_else(|| ApiError::InvalidArgument {
                field: "idempotency_key".into(),
                rule: "8-200 visible ASCII characters".into(),
            })?;
            let continued =
                self.services().runs.continue_run_async(&p, &a.run_id, &key, a.request, cx.invocation).await?;
            Ok::<_, ApiError>((a.run_id, key, continued))
        }
        .await;
        match result {
            Ok((_, _, Continued::Answered(m))) => ToolOutput::of_mutation(m).into_result().into(),
            Ok((run_id, key, Continued::Accepted(_))) => {
                let now = rfc3339(Utc::now());
                let task = Task::new(task_id(&run_id, &key), TaskStatus::Working, now.clone(), now)
                    .with_ttl_ms(crate::service::records::RECEIPT_TTL_SECS as u64 * 1000)
                    .with_poll_interval_ms(RETRY_AFTER.as_millis() as u64);
                CallToolResponse::Task(CreateTaskResult::new(task))
            }
            Err(err) => self.refusal(spec, err, &rid).into_result().into(),
        }
    }

    /// `tasks/get`: the task's state; once terminal, the tool result of the call.
    pub(crate) async fn task_state(
        &self,
        id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let (caller, rid) = caller_of(context);
        let p = principal(caller)?;
        let (run_id, key) = parse_task_id(id)?;
        let turn = self.services().runs.background_turn(&p, run_id, &key).await.map_err(|e| task_error(e, &rid))?;
        Ok(GetTaskResult::new(self.detailed(id, turn, &rid)))
    }

    /// `tasks/cancel`: the run's cancel at its current version while the turn runs. A task
    /// already terminal is refused (its run is left as its turn left it).
    pub(crate) async fn cancel_task(&self, id: &str, context: &RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let (caller, rid) = caller_of(context);
        let p = principal(caller)?;
        let (run_id, key) = parse_task_id(id)?;
        match self.services().runs.cancel_background_turn(&p, run_id, &key).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(ErrorData::invalid_params("Task is already terminal", Some(json!({"taskId": id})))),
            Err(e) => Err(task_error(e, &rid)),
        }
    }

    fn detailed(&self, id: &str, turn: BackgroundTurn, request_id: &str) -> DetailedTask {
        let created = epoch(turn.claimed_at);
        let ttl_ms = (turn.expires_at - turn.claimed_at).max(0) as u64 * 1000;
        let task = |updated: DateTime<Utc>| {
            Task::new(id, TaskStatus::Working, rfc3339(created), rfc3339(updated.max(created))).with_ttl_ms(ttl_ms)
        };
        match turn.state {
            TurnState::Running => DetailedTask::new(
                task(created).with_poll_interval_ms(RETRY_AFTER.as_millis() as u64),
                TaskPayload::Working,
            ),
            TurnState::Finished(answer) => {
                let output = match answer {
                    Ok(m) => ToolOutput::of_mutation(m),
                    Err(e) => self.refusal_output(&e, request_id),
                };
                let result = serde_json::to_value(output.into_result()).ok();
                let cancelled = result.as_ref().is_some_and(was_cancelled);
                let payload = match result {
                    _ if cancelled => TaskPayload::Cancelled,
                    Some(Value::Object(result)) => TaskPayload::Completed { result },
                    _ => TaskPayload::Failed { error: JsonObject::from_iter([("code".into(), json!(-32603))]) },
                };
                DetailedTask::new(task(turn.updated_at), payload)
            }
        }
    }
}

/// A turn whose run was cancelled under it: its stored answer is the refusal
/// `run_not_continuable` with `completion_status: cancelled`.
fn was_cancelled(result: &Value) -> bool {
    let error = &result["structuredContent"]["error"];
    error["code"] == "run_not_continuable" && error["details"]["completion_status"] == "cancelled"
}
