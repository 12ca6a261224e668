//! HTTP executor: the production seam to Helix Ask. One turn is one POST of the
//! versioned turn request (`helix.turn_request.v1`) to the configured endpoint; the
//! answer is the turn artifact wrapped as `helix.turn_artifact.v1`. The contract is
//! documented in `docs/turn-contract.md`.
//!
//! Failure mapping (the service turns each into the step's typed failure):
//! - deadline reached (before sending, while connecting, waiting or reading) -> `TurnTimeout`;
//! - cancellation -> `TurnTimeout` as well: the service has already recorded the
//!   cancellation itself (the run is cancelled, or the claim was lost), so the step's
//!   failure code is never what the caller sees; dropping the request closes the
//!   connection, which tells Helix Ask to stop;
//! - connection failure, a transport error mid-body, 5xx, 408 or 429 -> `ExecutorUnavailable`;
//! - any other status, a non-JSON content type, a body over `max_response_bytes`,
//!   malformed JSON, an unknown field, or another schema -> `ExecutorInvalidResponse`.
//!
//! The request body is never logged (it carries the user's objective and answers),
//! and neither is the endpoint or a transport error's text; only run id, step,
//! status, outcome code and latency are.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{TurnExecutor, TurnRequest};
use crate::domain::turn::{TurnArtifact, TurnFailure};

pub const TURN_ARTIFACT_SCHEMA: &str = "helix.turn_artifact.v1";
/// Request header naming the request body's schema.
pub const TURN_SCHEMA_HEADER: &str = "Helix-Turn-Schema";
/// Largest accepted response body.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// Connecting never takes longer than this, whatever the deadline.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The response body: exactly these two fields (unknown fields are rejected, here and
/// inside the artifact).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnResponse {
    pub schema: String,
    pub artifact: TurnArtifact,
}

/// Why an endpoint cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HttpExecutorError {
    #[error("the Helix Ask endpoint must be an absolute http(s) URL")]
    InvalidEndpoint,
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

pub struct HttpExecutor {
    /// `None` only when the endpoint is unusable (see [`HttpExecutor::new`]); the client
    /// itself is built by the first turn, not at cold start (`outbound`).
    client: Option<crate::outbound::LazyClient>,
    endpoint: String,
    max_response_bytes: usize,
    /// Sent as `Authorization: Bearer` to Helix Ask; never logged.
    bearer: Option<crate::config::Secret>,
}

impl std::fmt::Debug for HttpExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The endpoint may carry a credential in its query or user info: not printed.
        f.debug_struct("HttpExecutor")
            .field("usable", &self.client.is_some())
            .field("max_response_bytes", &self.max_response_bytes)
            .finish_non_exhaustive()
    }
}

impl HttpExecutor {
    /// An executor for `endpoint`. Never fails: an endpoint that is not an http(s) URL
    /// makes every turn `ExecutorUnavailable` (and is logged once here), and so does a
    /// client that cannot be built (logged by each turn that tries). Use
    /// [`HttpExecutor::try_new`] to refuse a bad endpoint at start instead.
    pub fn new(endpoint: impl Into<String>) -> Self {
        let endpoint = endpoint.into();
        match Self::try_new(endpoint.clone()) {
            Ok(executor) => executor,
            Err(error) => {
                tracing::error!(%error, "Helix Ask executor unusable; every turn will fail as executor_unavailable");
                Self { client: None, endpoint, max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES, bearer: None }
            }
        }
    }

    pub fn try_new(endpoint: impl Into<String>) -> Result<Self, HttpExecutorError> {
        let endpoint = endpoint.into();
        let url = reqwest::Url::parse(&endpoint).map_err(|_| HttpExecutorError::InvalidEndpoint)?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(HttpExecutorError::InvalidEndpoint);
        }
        let client = crate::outbound::LazyClient::new(|| {
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("helix-agent-api/", env!("CARGO_PKG_VERSION")))
        });
        Ok(Self { client: Some(client), endpoint, max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES, bearer: None })
    }

    /// Authenticates every turn request to Helix Ask with this bearer token.
    pub fn with_bearer(mut self, bearer: Option<crate::config::Secret>) -> Self {
        self.bearer = bearer;
        self
    }

    /// Overrides the response body limit (default [`DEFAULT_MAX_RESPONSE_BYTES`]).
    pub fn with_max_response_bytes(mut self, max: usize) -> Self {
        self.max_response_bytes = max;
        self
    }

    pub fn max_response_bytes(&self) -> usize {
        self.max_response_bytes
    }

    async fn round_trip(
        &self,
        client: &reqwest::Client,
        body: Vec<u8>,
        schema: &'static str,
        timeout: Duration,
    ) -> Result<(u16, TurnArtifact), (Option<u16>, TurnFailure)> {
        let mut request = client
            .post(&self.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json")
            .header(TURN_SCHEMA_HEADER, schema)
            .timeout(timeout)
            .body(body);
        if let Some(bearer) = &self.bearer {
            request = request.bearer_auth(bearer.expose());
        }
        // The caller's trace goes on in Helix Ask (`traceparent`, when traces are exported).
        let mut trace = http::HeaderMap::new();
        crate::telemetry::inject_current(&mut trace);
        request = request.headers(trace);
        let mut response = request.send().await.map_err(|e| (None, transport_failure(&e)))?;
        let status = response.status().as_u16();
        let fail = |f| (Some(status), f);
        match status {
            200 => {}
            408 | 429 | 500..=599 => return Err(fail(TurnFailure::ExecutorUnavailable)),
            _ => return Err(fail(TurnFailure::ExecutorInvalidResponse)),
        }
        let json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return Err(fail(TurnFailure::ExecutorInvalidResponse));
        }
        let max = self.max_response_bytes;
        if response.content_length().is_some_and(|n| n > max as u64) {
            return Err(fail(TurnFailure::ExecutorInvalidResponse));
        }
        // Read incrementally and stop at the limit, whatever Content-Length claimed.
        let mut buf = Vec::with_capacity(response.content_length().map_or(8192, |n| n as usize));
        while let Some(chunk) = response.chunk().await.map_err(|e| fail(transport_failure(&e)))? {
            if buf.len() + chunk.len() > max {
                return Err(fail(TurnFailure::ExecutorInvalidResponse));
            }
            buf.extend_from_slice(&chunk);
        }
        let parsed: TurnResponse =
            serde_json::from_slice(&buf).map_err(|_| fail(TurnFailure::ExecutorInvalidResponse))?;
        if parsed.schema != TURN_ARTIFACT_SCHEMA {
            return Err(fail(TurnFailure::ExecutorInvalidResponse));
        }
        Ok((status, parsed.artifact))
    }
}

fn transport_failure(e: &reqwest::Error) -> TurnFailure {
    if e.is_timeout() { TurnFailure::TurnTimeout } else { TurnFailure::ExecutorUnavailable }
}

#[async_trait]
impl TurnExecutor for HttpExecutor {
    async fn execute(&self, mut request: TurnRequest, cancel: CancellationToken) -> Result<TurnArtifact, TurnFailure> {
        let (run_id, step) = (request.run_id.clone(), request.step);
        if cancel.is_cancelled() {
            return Err(TurnFailure::TurnTimeout);
        }
        let Some(remaining) = (request.deadline - Utc::now()).to_std().ok().filter(|d| !d.is_zero()) else {
            tracing::warn!(run_id, step, failure = "turn_timeout", "turn deadline passed before the request was sent");
            return Err(TurnFailure::TurnTimeout);
        };
        let Some(client) = &self.client else {
            return Err(TurnFailure::ExecutorUnavailable);
        };
        let client = client.get().map_err(|error| {
            tracing::error!(run_id, step, %error, "Helix Ask client cannot be built");
            TurnFailure::ExecutorUnavailable
        })?;
        // The body names its version (v2 only with room evidence); the header says the same.
        let schema = request.schema_version();
        request.schema = schema.into();
        let body = serde_json::to_vec(&request).map_err(|_| TurnFailure::ExecutorUnavailable)?;
        let started = Instant::now();
        let outcome = tokio::select! {
            biased;
            _ = cancel.cancelled() => Err((None, TurnFailure::TurnTimeout)),
            r = tokio::time::timeout(remaining, self.round_trip(client, body, schema, remaining)) => {
                r.unwrap_or(Err((None, TurnFailure::TurnTimeout)))
            }
        };
        let elapsed_ms = started.elapsed().as_millis() as u64;
        match outcome {
            Ok((status, artifact)) => {
                tracing::debug!(run_id, step, status, elapsed_ms, "Helix Ask turn answered");
                Ok(artifact)
            }
            Err((status, failure)) => {
                tracing::warn!(
                    run_id,
                    step,
                    status,
                    failure = failure.code(),
                    cancelled = cancel.is_cancelled(),
                    elapsed_ms,
                    "Helix Ask turn failed"
                );
                Err(failure)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_must_be_http_urls() {
        assert!(HttpExecutor::try_new("https://ask.example.com/v1/turns").is_ok());
        assert!(HttpExecutor::try_new("http://127.0.0.1:9/turns").is_ok());
        for bad in ["", "ask.example.com/turns", "ftp://ask.example.com", "file:///etc/passwd"] {
            assert!(matches!(HttpExecutor::try_new(bad), Err(HttpExecutorError::InvalidEndpoint)), "{bad}");
        }
        let unusable = HttpExecutor::new("not a url");
        assert!(unusable.client.is_none());
        assert_eq!(unusable.max_response_bytes(), DEFAULT_MAX_RESPONSE_BYTES);
        assert!(!format!("{unusable:?}").contains("not a url"));
    }

    #[tokio::test]
    async fn an_unusable_endpoint_fails_every_turn_as_unavailable() {
        let req = TurnRequest {
            schema: crate::executor::TURN_REQUEST_SCHEMA.into(),
            mode: crate::executor::TurnMode::Read,
            run_id: "run_httpunit01".into(),
            step: 1,
            claim_token: "c".into(),
            objective: "o".into(),
            constraints: vec![],
            instruction: None,
            answers: vec![],
            capabilities: vec![],
            required_evidence_families: vec![],
            prior_evidence_refs: vec![],
            deadline: Utc::now() + chrono::Duration::seconds(5),
            room_evidence: None,
            room_probe: None,
            conversation_context: None,
        };
        let ex = HttpExecutor::new("::");
        assert_eq!(ex.execute(req, CancellationToken::new()).await, Err(TurnFailure::ExecutorUnavailable));
    }

    #[test]
    fn the_response_wrapper_is_strict() {
        let ok = r#"{"schema":"helix.turn_artifact.v1","artifact":{"solver_status":"partial","summary":"s"}}"#;
        assert!(serde_json::from_str::<TurnResponse>(ok).is_ok());
        let extra = r#"{"schema":"helix.turn_artifact.v1","artifact":{"solver_status":"partial","summary":"s"},"x":1}"#;
        assert!(serde_json::from_str::<TurnResponse>(extra).is_err());
        let inner = r#"{"schema":"helix.turn_artifact.v1","artifact":{"solver_status":"partial","summary":"s","x":1}}"#;
        assert!(serde_json::from_str::<TurnResponse>(inner).is_err());
    }
}
