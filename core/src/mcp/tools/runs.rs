//! The run tools: their strict arguments (unknown keys are refused at every level) and one
//! handler each over the run services REST uses.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Cx, Reply, key};
use crate::domain::run::{CancelRequest, ContinueRequest, StartRequest};
use crate::domain::wire::RunJson;
use crate::error::ApiError;
use crate::service::runs::DEFAULT_EVENT_LIMIT;

/// Arguments of helix_run_start.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// Caller-chosen key of 8-200 visible ASCII characters, fresh for each distinct start. The same key with the same request replays the stored result; with a different request it is idempotency_conflict.
    pub idempotency_key: String,
    /// The start request (the body of POST /api/v1/agent-runs).
    pub request: StartRequest,
}

/// Arguments of helix_run_continue.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinueArgs {
    /// The run to continue (run_...), as returned by helix_run_start.
    pub run_id: String,
    /// Caller-chosen key of 8-200 visible ASCII characters, fresh for each turn. A retry with the same key and request replays the stored result.
    pub idempotency_key: String,
    /// The continue request: the run's current version as expected_version, plus an instruction, answers to pending_questions, or both.
    pub request: ContinueRequest,
}

/// Arguments of helix_run_cancel.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelArgs {
    /// The run to cancel (run_...).
    pub run_id: String,
    /// Caller-chosen key of 8-200 visible ASCII characters. A retry with the same key and request replays the stored result.
    pub idempotency_key: String,
    /// The cancel request: the run's current version as expected_version, and an optional reason.
    pub request: CancelRequest,
}

/// Arguments of the run read tools.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// The run (run_...).
    pub run_id: String,
}

/// Arguments of helix_run_list_events.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListEventsArgs {
    /// The run (run_...).
    pub run_id: String,
    /// Return events with seq greater than this (default 0: from the first event).
    #[serde(default)]
    pub after_seq: Option<u64>,
    /// Page size, 1-200 (default 50).
    #[serde(default)]
    pub limit: Option<u32>,
}

pub async fn start(cx: Cx<'_>, a: StartArgs) -> Result<impl Reply, ApiError> {
    cx.services.runs.start_run(cx.caller, &key(&a.idempotency_key)?, a.request).await
}

pub async fn continue_run(cx: Cx<'_>, a: ContinueArgs) -> Result<impl Reply, ApiError> {
    let k = key(&a.idempotency_key)?;
    cx.services.runs.continue_run(cx.caller, &a.run_id, &k, a.request, cx.invocation).await
}

pub async fn cancel(cx: Cx<'_>, a: CancelArgs) -> Result<impl Reply, ApiError> {
    cx.services.runs.cancel_run(cx.actor, &a.run_id, &key(&a.idempotency_key)?, a.request).await
}

pub async fn inspect(cx: Cx<'_>, a: RunArgs) -> Result<impl Reply, ApiError> {
    cx.services.runs.inspect_run(cx.actor, &a.run_id).await.map(|run| RunJson::of(&run))
}

pub async fn evidence(cx: Cx<'_>, a: RunArgs) -> Result<impl Reply, ApiError> {
    cx.services.runs.run_evidence(cx.actor, &a.run_id).await
}

pub async fn events(cx: Cx<'_>, a: ListEventsArgs) -> Result<impl Reply, ApiError> {
    let (after, limit) = (a.after_seq.unwrap_or(0), a.limit.unwrap_or(DEFAULT_EVENT_LIMIT));
    cx.services.runs.list_events(cx.actor, &a.run_id, after, limit).await
}
