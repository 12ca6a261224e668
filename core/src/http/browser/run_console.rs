//! The run console: `/runs` (the signed-in account's runs under the owner tuple the browser
//! signed in with,
//! newest first, cursor-paged, filterable by status) and `/runs/{run_id}` (the timeline,
//! pending questions, evidence with provenance, the verified terminal product and the
//! Cancel button), with their same-origin JSON twins under `/api/account/runs`. Cookie
//! lane only: no bearer is read. The run page's one script polls the events twin with
//! `after_seq` and cancels through the run's own cancel (`RunService::person_cancel`).

use crate::domain::event::EventKind;
use crate::domain::run::{Authority, CancelRequest, RunListQuery, TerminalProduct};
use crate::domain::wire::{EventPageView, EvidenceBundleView, RunView, to_value};
use crate::error::ApiError;
use crate::http::idempotent;
use crate::http::pages::human::{When, when};
use crate::http::pages::run_status::Statuses;
use crate::http::pages::sign_in_first::PageSession;
use crate::http::pages::{Asset, Csp, Page, Referrer, SameOriginSession, page_headers};
use crate::http::query::empty_request;
use crate::http::{AppState, Group, IdemKey, JsonBody, pipeline, run_response};
use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

pub const CONSOLE_SCRIPT_PATH: &str = "/runs/static/console.js";

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/runs", get(runs_page))
        .route("/runs/{run_id}", get(run_page))
        .route(CONSOLE_SCRIPT_PATH, get(console_script))
        .route("/api/account/runs", get(list))
        .route("/api/account/runs/{run_id}", get(inspect))
        .route("/api/account/runs/{run_id}/events", get(events))
        .route("/api/account/runs/{run_id}/evidence", get(evidence))
        .route("/api/account/runs/{run_id}/cancel", post(cancel))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Account), pipeline))
        .layer(page_headers(&state, Csp::SameOriginScript, Referrer::SameOrigin))
        .with_state(state)
}

const CONSOLE_SCRIPT: &str = include_str!("../../../templates/console.js");

async fn console_script() -> Asset {
    Asset::script(CONSOLE_SCRIPT)
}

// ---------------------------------------------------------------------------------------------
// Pages

/// One row of `/runs`.
struct RunRow {
    run: RunView,
    statuses: Statuses,
    started: When,
}

#[derive(Template)]
#[template(path = "runs.html")]
struct RunsPage {
    rows: Vec<RunRow>,
    /// The status the list is filtered by (empty: every run).
    status: String,
    next_cursor: Option<String>,
}

/// The raw `status` of a query, for the page's filter form and next-page link.
fn status_of(raw: Option<&str>) -> String {
    raw.unwrap_or("").split('&').find_map(|p| p.strip_prefix("status=")).unwrap_or_default().to_owned()
}

/// `GET /runs[?status=…][&cursor=…]` (signed out: sent to sign in, and back).
async fn runs_page(
    State(state): State<AppState>,
    PageSession(session): PageSession,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let query = RunListQuery::parse(q.as_deref())?;
    let listed = state.services.runs.person_runs(&session, &query).await?;
    let now = state.services.clock.now();
    let rows = listed
        .runs
        .into_iter()
        .map(|run| RunRow { started: when(run.created_at, now), statuses: Statuses::of(&run), run })
        .collect();
    let status = status_of(q.as_deref());
    Ok(Page(RunsPage { rows, status, next_cursor: listed.next_cursor }).into_response())
}

/// One event on the timeline, with its human label.
struct TimelineEntry {
    seq: u64,
    kind: String,
    label: &'static str,
    at: When,
}

/// One evidence item with its provenance.
#[derive(Clone)]
struct EvidenceRow {
    reference: String,
    family: String,
    source: String,
    step: u32,
    current: bool,
    excerpt: String,
}

#[derive(Template)]
#[template(path = "run.html")]
struct RunPage {
    run: RunView,
    statuses: Statuses,
    started: When,
    expires: When,
    timeline: Vec<TimelineEntry>,
    last_seq: u64,
    labels: Vec<(String, &'static str)>,
    /// What the page script shows for a status on a run waiting for an answer.
    status_words: Vec<(&'static str, &'static str)>,
    evidence: EvidenceBundleView,
    rows: Vec<EvidenceRow>,
    terminal: bool,
    /// The verified terminal product, when terminal authority was granted.
    product: Option<TerminalProduct>,
    /// The evidence the product cites, in its order (a ref the bundle does not hold: its
    /// reference alone).
    supporting: Vec<EvidenceRow>,
}

async fn run_page(
    State(state): State<AppState>,
    PageSession(session): PageSession,
    Path(run_id): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    empty_request(q.as_deref(), b"")?;
    let (run, evidence, events) = state.services.runs.person_page(&session, &run_id, 200).await?;
    let now = state.services.clock.now();
    let timeline: Vec<TimelineEntry> = events
        .events
        .iter()
        .map(|e| TimelineEntry { seq: e.seq, kind: e.kind.name(), label: e.kind.label(), at: when(e.created_at, now) })
        .collect();
    let steps_used = run.budget.steps_used;
    let rows: Vec<EvidenceRow> = evidence
        .evidence
        .iter()
        .map(|i| EvidenceRow {
            reference: i.reference.clone(),
            family: i.family.clone(),
            source: i.source.clone(),
            step: i.step,
            current: i.step == steps_used,
            excerpt: i.excerpt.clone(),
        })
        .collect();
    let product = (run.terminal_authority_status == Authority::Authorized)
        .then(|| run.latest_result.as_ref().and_then(|r| r.terminal_product.clone()))
        .flatten();
    let supporting = product.iter().flat_map(|p| &p.supporting_evidence_refs).map(|r| cited(&rows, r)).collect();
    let labels = EventKind::labels();
    let page = RunPage {
        started: when(run.created_at, now),
        expires: when(run.budget.expires_at, now),
        status_words: crate::http::pages::run_status::waiting_words(),
        supporting,
        statuses: Statuses::of(&run),
        terminal: run.completion_status.is_terminal(),
        last_seq: events.next_after_seq,
        run,
        timeline,
        labels,
        evidence,
        rows,
        product,
    };
    Ok(Page(page).into_response())
}

/// The evidence row a product cites by `reference`.
fn cited(rows: &[EvidenceRow], reference: &str) -> EvidenceRow {
    rows.iter().find(|r| r.reference == reference).cloned().unwrap_or_else(|| EvidenceRow {
        reference: reference.to_owned(),
        family: String::new(),
        source: String::new(),
        step: 0,
        current: false,
        excerpt: String::new(),
    })
}

// ---------------------------------------------------------------------------------------------
// JSON twins (same-origin)

async fn list(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let query = RunListQuery::parse(q.as_deref())?;
    Ok(Json(to_value(&state.services.runs.person_runs(&session, &query).await?)).into_response())
}

async fn inspect(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    Path(run_id): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    empty_request(q.as_deref(), b"")?;
    let run = state.services.runs.person_inspect(&session, &run_id).await?;
    Ok(run_response(http::StatusCode::OK, to_value(&run)))
}

async fn events(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    Path(run_id): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let (after, limit) = crate::http::query::event_query(q.as_deref())?;
    let page: EventPageView = state.services.runs.person_events(&session, &run_id, after, limit).await?;
    Ok(Json(to_value(&page)).into_response())
}

async fn evidence(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    Path(run_id): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    empty_request(q.as_deref(), b"")?;
    Ok(Json(to_value(&state.services.runs.person_evidence(&session, &run_id).await?)).into_response())
}

/// The person's cancel: `Idempotency-Key` and `{expected_version, reason?}` as on the
/// bearer route; the answer is the run (200), replayed for a retry of the same key.
async fn cancel(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    Path(run_id): Path<String>,
    IdemKey(key): IdemKey,
    JsonBody(req): JsonBody<CancelRequest>,
) -> Result<Response, ApiError> {
    let m = state.services.runs.person_cancel(&session, &run_id, &key, req).await?;
    Ok(idempotent::mutation_response(m, run_response, None))
}
