//! `/api/v1/agent-runs/*`: REST framing of the run services.

use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};

use super::actor::AgentActor;
use crate::domain::run::{CancelRequest, ContinueRequest, RunListQuery, StartRequest};
use crate::domain::wire::{RunJson, RunView};
use crate::error::ApiError;
use crate::http::idempotent;
use crate::http::query::event_query;
use crate::http::{AppState, Authed, Group, IdemKey, Invocation, JsonBody, pipeline, run_json_response, run_response};
use crate::service::Mutation;
use crate::service::runs::{Continued, RETRY_AFTER};

pub fn router(state: AppState) -> Router {
    let routes = Router::new()
        .route("/api/v1/agent-runs", get(list).post(start).fallback(method_not_allowed_get_post))
        .route("/api/v1/agent-runs/{run_id}", get(inspect).fallback(method_not_allowed_get))
        .route("/api/v1/agent-runs/{run_id}/continue", post(continue_run).fallback(method_not_allowed_post))
        .route("/api/v1/agent-runs/{run_id}/cancel", post(cancel).fallback(method_not_allowed_post))
        .route("/api/v1/agent-runs/{run_id}/events", get(events).fallback(method_not_allowed_get))
        .route("/api/v1/agent-runs/{run_id}/evidence", get(evidence).fallback(method_not_allowed_get))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::AgentRuns), pipeline));
    // Every route here takes an `Idempotency-Key` on POST.
    idempotent::replayed_on_every_post(routes).with_state(state)
}

async fn method_not_allowed_post() -> ApiError {
    ApiError::MethodNotAllowed { allow: "POST" }
}

async fn method_not_allowed_get_post() -> ApiError {
    ApiError::MethodNotAllowed { allow: "GET, POST" }
}

async fn method_not_allowed_get() -> ApiError {
    ApiError::MethodNotAllowed { allow: "GET" }
}

/// A start, continue or cancel answer; a fresh or replayed start also says where its run lives.
fn mutation_response(m: Mutation<RunView>) -> Response {
    idempotent::mutation_response(m, run_response)
}

async fn start(
    State(app): State<AppState>,
    Authed(p): Authed,
    IdemKey(key): IdemKey,
    JsonBody(req): JsonBody<StartRequest>,
) -> Result<Response, ApiError> {
    Ok(mutation_response(app.services.runs.start_run(&p, &key, req).await?))
}

/// `GET /api/v1/agent-runs[?status=…][&cursor=…]`: the caller's own runs, newest first.
async fn list(
    State(app): State<AppState>,
    AgentActor(agent): AgentActor,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let q = RunListQuery::parse(query.as_deref())?;
    Ok(axum::Json(crate::domain::wire::to_value(&app.services.runs.list_runs(&agent, &q).await?)).into_response())
}

async fn inspect(
    State(app): State<AppState>,
    AgentActor(agent): AgentActor,
    Path(run_id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(run_json_response(RunJson::of(&app.services.runs.inspect_run(&agent, &run_id).await?)))
}

async fn evidence(
    State(app): State<AppState>,
    AgentActor(agent): AgentActor,
    Path(run_id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(axum::Json(crate::domain::wire::to_value(&app.services.runs.run_evidence(&agent, &run_id).await?))
        .into_response())
}

async fn continue_run(
    State(app): State<AppState>,
    Authed(p): Authed,
    Path(run_id): Path<String>,
    IdemKey(key): IdemKey,
    invocation: Option<Extension<Invocation>>,
    headers: http::HeaderMap,
    JsonBody(req): JsonBody<ContinueRequest>,
) -> Result<Response, ApiError> {
    let invocation = invocation.map(|Extension(i)| i).unwrap_or_default();
    // A preference the server cannot honour here is ignored (RFC 7240): the turn is served
    // synchronously, within the request's own limits.
    if super::prefer::respond_async(&headers) && app.services.runs.accepts_async(invocation) {
        return Ok(match app.services.runs.continue_run_async(&p, &run_id, &key, req, invocation).await? {
            Continued::Answered(m) => mutation_response(m),
            Continued::Accepted(run) => accepted(&run_id, run),
        });
    }
    Ok(mutation_response(app.services.runs.continue_run(&p, &run_id, &key, req, invocation).await?))
}

/// `202 Accepted` for a turn claimed under `Prefer: respond-async`: the run as it stands,
/// where to poll it, and when.
fn accepted(run_id: &str, run: crate::domain::wire::RunJson) -> Response {
    use http::HeaderValue;
    let mut res = run_json_response(run);
    *res.status_mut() = http::StatusCode::ACCEPTED;
    let h = res.headers_mut();
    h.insert(super::prefer::PREFERENCE_APPLIED, HeaderValue::from_static(super::prefer::RESPOND_ASYNC));
    let location = format!("/api/v1/agent-runs/{run_id}");
    h.insert(http::header::LOCATION, HeaderValue::from_str(&location).expect("a claimed run's id is ascii"));
    h.insert(http::header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER.as_secs()));
    h.insert(crate::http::idempotent::IDEMPOTENCY_REPLAYED, HeaderValue::from_static("false"));
    res
}

async fn cancel(
    State(app): State<AppState>,
    AgentActor(agent): AgentActor,
    Path(run_id): Path<String>,
    IdemKey(key): IdemKey,
    JsonBody(req): JsonBody<CancelRequest>,
) -> Result<Response, ApiError> {
    Ok(mutation_response(app.services.runs.cancel_run(&agent, &run_id, &key, req).await?))
}

async fn events(
    State(app): State<AppState>,
    AgentActor(agent): AgentActor,
    Path(run_id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let (after, limit) = event_query(query.as_deref())?;
    let page = app.services.runs.list_events(&agent, &run_id, after, limit).await?;
    Ok(axum::Json(crate::domain::wire::to_value(&page)).into_response())
}
