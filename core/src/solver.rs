//! The reference Helix Ask turn service: `docs/turn-contract.md` over HTTP, backed by the
//! local corpus solver (BM25 over documents, terminal candidates signed with Ed25519).
//! Served as the `solver` Lambda function and by `helix solver serve`.
//!
//! - `POST /v1/turns`: a `helix.turn_request.v1`-`v4` body with `Authorization: Bearer`
//!   (compared in constant time, never logged) -> `200` `helix.turn_artifact.v1`;
//! - `GET /v1/terminal-authority-keys`: the public key list the service trusts
//!   (`HELIX_TERMINAL_AUTHORITY_PUBLIC_KEYS_JSON`), public and unauthenticated.
//!
//! Refusals use the `helix.agent_api.error.v1` envelope: `401 unauthorized`, `415`,
//! `400 invalid_turn_request` (malformed, unknown field, or a schema that does not match
//! the body or the `Helix-Turn-Schema` header), `504 turn_timeout` (deadline passed).
//! Only run id, step, solver status and latency are logged: never the body, the claim
//! token or the bearer.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::config::{Secret, SolverConfig};
use crate::domain::authority::TerminalSigner;
use crate::domain::turn::TurnFailure;
use crate::domain::wire::{ErrorDetail, ErrorEnvelope, ErrorSchemaName};
use crate::executor::http::{TURN_ARTIFACT_SCHEMA, TURN_SCHEMA_HEADER, TurnResponse};
use crate::executor::local::{CorpusError, LocalExecutor};
use crate::executor::{TurnExecutor, TurnRequest};

pub const TURNS_PATH: &str = "/v1/turns";
pub const KEYS_PATH: &str = "/v1/terminal-authority-keys";
/// Largest accepted turn request (the service's own bounds keep a request well below).
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// The turn service: one index and one signer, shared by every request.
pub struct TurnService {
    executor: LocalExecutor,
    /// SHA-256 of the expected bearer (fixed length, compared in constant time).
    bearer_digest: Option<[u8; 32]>,
}

impl std::fmt::Debug for TurnService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnService").field("executor", &self.executor).finish_non_exhaustive()
    }
}

impl TurnService {
    /// `bearer: None` admits any caller (development only: the configuration requires one
    /// in production).
    pub fn new(executor: LocalExecutor, bearer: Option<&Secret>) -> Self {
        Self { executor, bearer_digest: bearer.map(|b| digest(b.expose())) }
    }

    /// The corpus of `config` (a directory, else the bundled one) signed by `signer`.
    pub fn from_config(config: &SolverConfig, signer: TerminalSigner) -> Result<Self, CorpusError> {
        let executor = match &config.corpus_dir {
            Some(dir) => LocalExecutor::from_dir(dir, signer)?,
            None => LocalExecutor::bundled(signer),
        };
        Ok(Self::new(executor, config.bearer.as_ref()))
    }

    /// `[{"issuer","key_id","public_key"}]`: the value of
    /// `HELIX_TERMINAL_AUTHORITY_PUBLIC_KEYS_JSON` that trusts this solver.
    pub fn public_keys(&self) -> Value {
        Value::Array(vec![self.executor.signer().public_entry()])
    }

    pub fn document_count(&self) -> usize {
        self.executor.document_count()
    }

    fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(expected) = &self.bearer_digest else { return true };
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(|t| digest(t.trim()));
        presented.is_some_and(|p| bool::from(p.ct_eq(expected)))
    }
}

fn digest(s: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes()).into()
}

/// The service's routes, with `no-store` and a request id on every answer.
pub fn router(service: Arc<TurnService>) -> Router {
    Router::new()
        .route(TURNS_PATH, post(turn))
        .route(KEYS_PATH, get(keys))
        .fallback(|| async { refuse(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .layer(axum::middleware::from_fn(no_store))
        .with_state(service)
}

async fn no_store(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let id = res.headers().get(crate::http::REQUEST_ID).and_then(|v| v.to_str().ok()).map(str::to_owned);
    crate::http::no_store(res.headers_mut(), &id.unwrap_or_else(request_id));
    res
}

fn request_id() -> String {
    crate::domain::request_id()
}

async fn keys(State(service): State<Arc<TurnService>>) -> Response {
    axum::Json(service.public_keys()).into_response()
}

async fn turn(State(service): State<Arc<TurnService>>, headers: HeaderMap, body: Bytes) -> Response {
    if !service.admits(&headers) {
        tracing::warn!("turn refused: missing or wrong bearer");
        let mut res = refuse(StatusCode::UNAUTHORIZED, "unauthorized", "a valid bearer token is required");
        res.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return res;
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", "send application/json");
    }
    // The parser's message may quote the body: it is not echoed.
    let Ok(request) = serde_json::from_slice::<TurnRequest>(&body) else {
        return invalid("the body is not a turn request (malformed, or a field this version does not have)");
    };
    let schema = request.schema_version();
    if request.schema != schema {
        return invalid("schema does not name the version its fields make it");
    }
    if headers.get(TURN_SCHEMA_HEADER).is_some_and(|v| v.as_bytes() != schema.as_bytes()) {
        return invalid("the Helix-Turn-Schema header does not match the body's schema");
    }
    let (run_id, step, started) = (request.run_id.clone(), request.step, Instant::now());
    let outcome = service.executor.execute(request, CancellationToken::new()).await;
    let elapsed_ms = started.elapsed().as_millis() as u64;
    match outcome {
        Ok(artifact) => {
            let status = format!("{:?}", artifact.solver_status).to_lowercase();
            let signed = artifact.terminal_candidate.is_some();
            tracing::info!(run_id, step, solver_status = status, signed, elapsed_ms, "turn answered");
            axum::Json(TurnResponse { schema: TURN_ARTIFACT_SCHEMA.into(), artifact }).into_response()
        }
        Err(failure) => {
            tracing::warn!(run_id, step, failure = failure.code(), elapsed_ms, "turn failed");
            match failure {
                TurnFailure::TurnTimeout => {
                    refuse(StatusCode::GATEWAY_TIMEOUT, "turn_timeout", "the turn's deadline has passed")
                }
                _ => refuse(StatusCode::SERVICE_UNAVAILABLE, "executor_unavailable", "the solver cannot run the turn"),
            }
        }
    }
}

fn invalid(message: &str) -> Response {
    refuse(StatusCode::BAD_REQUEST, "invalid_turn_request", message)
}

fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    let envelope = ErrorEnvelope {
        schema: ErrorSchemaName,
        error: ErrorDetail {
            code: code.into(),
            message: message.into(),
            retryable: status.is_server_error(),
            details: None,
        },
        request_id: request_id(),
    };
    let id = HeaderValue::from_str(&envelope.request_id).ok();
    let mut res = (status, axum::Json(envelope)).into_response();
    if let Some(id) = id {
        res.headers_mut().insert(crate::http::REQUEST_ID, id);
    }
    res
}

#[cfg(test)]
mod tests;
