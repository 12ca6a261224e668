//! The `http` executor against a local axum server speaking (and breaking) the turn
//! contract: each server behaviour maps to one typed outcome.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::Utc;
use helix_core::domain::authority::{TerminalSigner, TrustedKeys};
use helix_core::domain::run::Answer;
use helix_core::domain::turn::{ArtifactEvidence, SolverStatus, TurnArtifact, TurnFailure};
use helix_core::executor::http::{DEFAULT_MAX_RESPONSE_BYTES, HttpExecutor, TURN_ARTIFACT_SCHEMA, TurnResponse};
use helix_core::executor::{TURN_REQUEST_SCHEMA, TurnExecutor, TurnRequest};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const REF: &str = "evidence:research_library:sha256:0123456789abcdef";

#[derive(Clone, Default)]
struct Seen {
    requests: Arc<Mutex<Vec<(HeaderMap, Bytes)>>>,
}

fn signer() -> TerminalSigner {
    TerminalSigner::from_seed("helix-ask", "ask-1", [21; 32])
}

fn artifact_for(req: &TurnRequest) -> TurnArtifact {
    let text = format!("The answer [{REF}]");
    TurnArtifact {
        capabilities_used: vec![],
        room_mutation: None,
        solver_status: SolverStatus::Succeeded,
        summary: "one passage".into(),
        observation_refs: vec![],
        evidence: vec![ArtifactEvidence {
            reference: REF.into(),
            family: "research_library_evidence".into(),
            source: "research-library://doc.md#p1".into(),
            content_sha256: "0123456789abcdef".repeat(4),
            excerpt: "excerpt".into(),
        }],
        receipt_refs: vec![],
        satisfied_evidence_families: vec!["research_library_evidence".into()],
        unresolved_requirements: vec![],
        resolved_requirements: vec![],
        contradictions: vec![],
        supported_claims: vec!["a claim".into()],
        pending_questions: vec![],
        terminal_candidate: Some(signer().sign(&req.run_id, req.step, &req.claim_token, &text, vec![REF.into()])),
    }
}

fn json_response(status: StatusCode, body: impl Into<Body>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.into()).into_response()
}

async fn good(State(seen): State<Seen>, headers: HeaderMap, body: Bytes) -> Response {
    seen.requests.lock().unwrap().push((headers, body.clone()));
    let Ok(req) = serde_json::from_slice::<TurnRequest>(&body) else {
        return json_response(StatusCode::BAD_REQUEST, "{}");
    };
    let resp = TurnResponse { schema: TURN_ARTIFACT_SCHEMA.into(), artifact: artifact_for(&req) };
    json_response(StatusCode::OK, serde_json::to_vec(&resp).unwrap())
}

async fn slow(State(seen): State<Seen>, headers: HeaderMap, body: Bytes) -> Response {
    tokio::time::sleep(Duration::from_secs(10)).await;
    good(State(seen), headers, body).await
}

async fn malformed() -> Response {
    json_response(StatusCode::OK, r#"{"schema":"helix.turn_artifact.v1","artifact":{"solver_status":"#)
}

fn huge_summary_response() -> Vec<u8> {
    let summary = "x".repeat(2 * 1024 * 1024);
    serde_json::to_vec(
        &json!({ "schema": TURN_ARTIFACT_SCHEMA, "artifact": { "solver_status": "partial", "summary": summary } }),
    )
    .unwrap()
}

/// 2 MiB of otherwise valid JSON, with a Content-Length.
async fn oversized() -> Response {
    json_response(StatusCode::OK, huge_summary_response())
}

/// The same, streamed without a Content-Length: the reader must stop by itself.
async fn oversized_streamed() -> Response {
    let body = huge_summary_response();
    let chunks: Vec<Result<Bytes, std::io::Error>> =
        body.chunks(64 * 1024).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
    json_response(StatusCode::OK, Body::from_stream(futures::stream::iter(chunks)))
}

async fn server_error() -> Response {
    json_response(StatusCode::INTERNAL_SERVER_ERROR, r#"{"error":"boom"}"#)
}

async fn unavailable() -> Response {
    json_response(StatusCode::SERVICE_UNAVAILABLE, r#"{"error":"later"}"#)
}

async fn not_found() -> Response {
    json_response(StatusCode::NOT_FOUND, r#"{"error":"no such route"}"#)
}

async fn unknown_field(body: Bytes) -> Response {
    let req: TurnRequest = serde_json::from_slice(&body).unwrap();
    let mut v =
        serde_json::to_value(TurnResponse { schema: TURN_ARTIFACT_SCHEMA.into(), artifact: artifact_for(&req) })
            .unwrap();
    v["debug"] = json!({ "trace": "extra" });
    json_response(StatusCode::OK, serde_json::to_vec(&v).unwrap())
}

async fn unknown_artifact_field(body: Bytes) -> Response {
    let req: TurnRequest = serde_json::from_slice(&body).unwrap();
    let mut v =
        serde_json::to_value(TurnResponse { schema: TURN_ARTIFACT_SCHEMA.into(), artifact: artifact_for(&req) })
            .unwrap();
    v["artifact"]["confidence"] = json!(0.9);
    json_response(StatusCode::OK, serde_json::to_vec(&v).unwrap())
}

async fn wrong_schema(body: Bytes) -> Response {
    let req: TurnRequest = serde_json::from_slice(&body).unwrap();
    let resp = TurnResponse { schema: "helix.turn_artifact.v2".into(), artifact: artifact_for(&req) };
    json_response(StatusCode::OK, serde_json::to_vec(&resp).unwrap())
}

async fn not_json(body: Bytes) -> Response {
    let req: TurnRequest = serde_json::from_slice(&body).unwrap();
    let resp = TurnResponse { schema: TURN_ARTIFACT_SCHEMA.into(), artifact: artifact_for(&req) };
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/html")], serde_json::to_vec(&resp).unwrap()).into_response()
}

async fn redirect() -> Response {
    (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, "/good")]).into_response()
}

struct Server {
    base: String,
    seen: Seen,
}

async fn server() -> Server {
    let seen = Seen::default();
    let app = Router::new()
        .route("/good", post(good))
        .route("/slow", post(slow))
        .route("/malformed", post(malformed))
        .route("/oversized", post(oversized))
        .route("/oversized-streamed", post(oversized_streamed))
        .route("/error", post(server_error))
        .route("/unavailable", post(unavailable))
        .route("/missing", post(not_found))
        .route("/unknown-field", post(unknown_field))
        .route("/unknown-artifact-field", post(unknown_artifact_field))
        .route("/wrong-schema", post(wrong_schema))
        .route("/not-json", post(not_json))
        .route("/redirect", post(redirect))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Server { base, seen }
}

fn request(deadline_ms: i64) -> TurnRequest {
    TurnRequest {
        schema: TURN_REQUEST_SCHEMA.into(),
        mode: helix_core::executor::TurnMode::Read,
        run_id: "run_httptest0001".into(),
        step: 3,
        claim_token: "claim-xyz".into(),
        objective: "Casimir force between a sphere and a plate".into(),
        constraints: vec!["cite sources".into()],
        instruction: Some("Use the research library.".into()),
        answers: vec![Answer { question_id: "q_step2_focus".into(), value: json!("proximity force approximation") }],
        capabilities: vec!["research-library.read_document".into()],
        required_evidence_families: vec!["research_library_evidence".into()],
        prior_evidence_refs: vec!["evidence:research_library:sha256:fedcba9876543210".into()],
        deadline: Utc::now() + chrono::Duration::milliseconds(deadline_ms),
        room_evidence: None,
        room_probe: None,
        conversation_context: None,
    }
}

async fn call(base: &str, path: &str, req: TurnRequest) -> Result<TurnArtifact, TurnFailure> {
    HttpExecutor::new(format!("{base}{path}")).execute(req, CancellationToken::new()).await
}

#[tokio::test]
async fn a_good_artifact_round_trips_and_the_request_follows_the_contract() {
    let s = server().await;
    let req = request(5_000);
    let artifact = call(&s.base, "/good", req.clone()).await.expect("a good artifact");
    assert_eq!(artifact, artifact_for(&req));

    // The terminal candidate survives the wire and verifies for this exact turn.
    let mut keys = TrustedKeys::default();
    keys.insert("helix-ask", "ask-1", signer().verifying_key());
    let c = artifact.terminal_candidate.unwrap();
    assert_eq!(keys.verify(&c, &req.run_id, req.step, &req.claim_token, &[REF.to_string()]), Ok(()));

    let seen = s.seen.requests.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let (headers, body) = &seen[0];
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(headers["helix-turn-schema"], TURN_REQUEST_SCHEMA);
    assert!(!headers.contains_key(header::AUTHORIZATION), "no bearer unless configured");
    let v: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(v["schema"], TURN_REQUEST_SCHEMA);
    assert_eq!(v["mode"], "read", "every turn request declares read mode");
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "answers",
            "capabilities",
            "claim_token",
            "constraints",
            "deadline",
            "instruction",
            "mode",
            "objective",
            "prior_evidence_refs",
            "required_evidence_families",
            "run_id",
            "schema",
            "step"
        ]
    );
    assert_eq!(v["run_id"], "run_httptest0001");
    assert_eq!(v["step"], 3);
    assert_eq!(v["answers"][0], json!({ "question_id": "q_step2_focus", "value": "proximity force approximation" }));
    assert_eq!(v["capabilities"], json!(["research-library.read_document"]));
    assert_eq!(v["required_evidence_families"], json!(["research_library_evidence"]));
    assert!(v["deadline"].as_str().unwrap().parse::<chrono::DateTime<Utc>>().is_ok());
    let received: TurnRequest = serde_json::from_slice(body).unwrap();
    assert_eq!(received, req);
}

#[tokio::test]
async fn the_schema_field_is_always_v1_on_the_wire() {
    let s = server().await;
    let mut req = request(5_000);
    req.schema = "something-else".into();
    call(&s.base, "/good", req).await.unwrap();
    let seen = s.seen.requests.lock().unwrap();
    let v: Value = serde_json::from_slice(&seen[0].1).unwrap();
    assert_eq!(v["schema"], TURN_REQUEST_SCHEMA);
}

#[tokio::test]
async fn a_slow_executor_is_a_turn_timeout_at_the_deadline() {
    let s = server().await;
    let started = Instant::now();
    assert_eq!(call(&s.base, "/slow", request(300)).await, Err(TurnFailure::TurnTimeout));
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(250) && took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn a_passed_deadline_sends_nothing() {
    let s = server().await;
    assert_eq!(call(&s.base, "/good", request(-1)).await, Err(TurnFailure::TurnTimeout));
    assert!(s.seen.requests.lock().unwrap().is_empty());
}

#[tokio::test]
async fn cancellation_is_reported_as_a_turn_timeout() {
    let s = server().await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let ex = HttpExecutor::new(format!("{}/slow", s.base));
    assert_eq!(ex.execute(request(10_000), cancel).await, Err(TurnFailure::TurnTimeout));
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn malformed_json_is_an_invalid_response() {
    let s = server().await;
    assert_eq!(call(&s.base, "/malformed", request(5_000)).await, Err(TurnFailure::ExecutorInvalidResponse));
}

#[tokio::test]
async fn an_oversized_body_is_an_invalid_response() {
    let s = server().await;
    const { assert!(2 * 1024 * 1024 > DEFAULT_MAX_RESPONSE_BYTES) }; // the premise of this test
    assert_eq!(call(&s.base, "/oversized", request(5_000)).await, Err(TurnFailure::ExecutorInvalidResponse));
    assert_eq!(call(&s.base, "/oversized-streamed", request(5_000)).await, Err(TurnFailure::ExecutorInvalidResponse));
    // The same body is accepted under a larger limit: the limit, not the content, refused it.
    let roomy = HttpExecutor::new(format!("{}/oversized-streamed", s.base)).with_max_response_bytes(4 * 1024 * 1024);
    let a = roomy.execute(request(5_000), CancellationToken::new()).await.unwrap();
    assert_eq!(a.summary.len(), 2 * 1024 * 1024);
}

#[tokio::test]
async fn server_errors_and_refused_connections_are_unavailable() {
    let s = server().await;
    assert_eq!(call(&s.base, "/error", request(5_000)).await, Err(TurnFailure::ExecutorUnavailable));
    assert_eq!(call(&s.base, "/unavailable", request(5_000)).await, Err(TurnFailure::ExecutorUnavailable));
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    assert_eq!(call(&format!("http://{addr}"), "/turns", request(5_000)).await, Err(TurnFailure::ExecutorUnavailable));
}

#[tokio::test]
async fn unknown_fields_wrong_schema_and_other_statuses_are_invalid_responses() {
    let s = server().await;
    for path in ["/unknown-field", "/unknown-artifact-field", "/wrong-schema", "/not-json", "/missing", "/redirect"] {
        assert_eq!(call(&s.base, path, request(5_000)).await, Err(TurnFailure::ExecutorInvalidResponse), "{path}");
    }
    // No redirect was followed.
    assert!(s.seen.requests.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_configured_bearer_authenticates_every_turn_request() {
    let s = server().await;
    let req = request(5_000);
    let executor = HttpExecutor::new(format!("{}/good", s.base))
        .with_bearer(Some(helix_core::config::Secret::new("ask-service-credential")));
    executor.execute(req, CancellationToken::new()).await.expect("a good artifact");
    let seen = s.seen.requests.lock().unwrap();
    assert_eq!(seen[0].0[header::AUTHORIZATION], "Bearer ask-service-credential");
    assert!(!format!("{executor:?}").contains("ask-service-credential"));
}
