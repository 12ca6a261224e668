use http_body_util::BodyExt;
use serde_json::json;
use tower::ServiceExt;

use super::*;
use crate::domain::authority::TrustedKeys;

const BEARER: &str = "solver-caller-credential-0001";

fn service() -> Arc<TurnService> {
    let signer = TerminalSigner::from_seed("helix-ask", "ask-test", [4; 32]);
    Arc::new(TurnService::new(LocalExecutor::bundled(signer), Some(&Secret::new(BEARER))))
}

fn turn_body(deadline_secs: i64) -> Value {
    json!({
        "schema": "helix.turn_request.v1", "mode": "read", "run_id": "run_solverunit01", "step": 1,
        "claim_token": "claim-unit-1",
        "objective": "What force did Lamoreaux measure between a sphere and a plate?",
        "constraints": [], "instruction": null, "answers": [],
        "capabilities": ["research-library.read_document"],
        "required_evidence_families": ["research_library_evidence"], "prior_evidence_refs": [],
        "deadline": (chrono::Utc::now() + chrono::Duration::seconds(deadline_secs)).to_rfc3339(),
    })
}

async fn post(body: &Value, bearer: Option<&str>, schema_header: Option<&str>) -> (StatusCode, HeaderMap, Value) {
    let mut req = axum::http::Request::post(TURNS_PATH).header("content-type", "application/json");
    if let Some(b) = bearer {
        req = req.header("authorization", format!("Bearer {b}"));
    }
    if let Some(s) = schema_header {
        req = req.header(TURN_SCHEMA_HEADER, s);
    }
    send(req.body(axum::body::Body::from(body.to_string())).unwrap()).await
}

async fn send(req: axum::http::Request<axum::body::Body>) -> (StatusCode, HeaderMap, Value) {
    let res = router(service()).oneshot(req).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (status, headers, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn an_authorized_turn_is_answered_with_a_candidate_its_published_key_verifies() {
    let (status, headers, body) = post(&turn_body(30), Some(BEARER), Some("helix.turn_request.v1")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["cache-control"], "no-store");
    let response: TurnResponse = serde_json::from_value(body).unwrap();
    assert_eq!(response.schema, TURN_ARTIFACT_SCHEMA);
    let artifact = response.artifact;
    let candidate = artifact.terminal_candidate.clone().expect("a signed candidate");
    let refs: Vec<String> = artifact.evidence.iter().map(|e| e.reference.clone()).collect();
    let keys = TrustedKeys::from_json(&service().public_keys().to_string()).unwrap();
    assert_eq!(keys.verify(&candidate, "run_solverunit01", 1, "claim-unit-1", &refs), Ok(()));
    let (status, _, keys) = send(axum::http::Request::get(KEYS_PATH).body(Default::default()).unwrap()).await;
    assert_eq!((status, keys), (StatusCode::OK, service().public_keys()));
}

#[tokio::test]
async fn a_turn_without_the_bearer_is_refused_before_it_is_read() {
    for bearer in [None, Some("solver-caller-credential-0002"), Some("")] {
        let (status, headers, body) = post(&json!({"not": "a turn"}), bearer, None).await;
        assert_eq!(status, 401, "{body}");
        assert_eq!(headers["www-authenticate"], "Bearer");
        assert_eq!(body["error"]["code"], "unauthorized");
        assert!(!body.to_string().contains("credential"), "{body}");
    }
}

#[tokio::test]
async fn malformed_or_mismatched_turns_are_invalid_and_a_passed_deadline_times_out() {
    let mut extra = turn_body(30);
    extra["surprise"] = json!(1);
    let mut v2_named = turn_body(30);
    v2_named["schema"] = json!("helix.turn_request.v2");
    for (body, header) in [(extra, None), (v2_named, None), (turn_body(30), Some("helix.turn_request.v2"))] {
        let (status, _, answer) = post(&body, Some(BEARER), header).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_turn_request")));
        assert!(!answer.to_string().contains("Lamoreaux"), "the body is never echoed: {answer}");
    }
    let (status, _, answer) = post(&turn_body(-1), Some(BEARER), None).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (StatusCode::GATEWAY_TIMEOUT, Some("turn_timeout")));
    let req = axum::http::Request::post(TURNS_PATH).header("authorization", format!("Bearer {BEARER}"));
    let (status, _, _) = send(req.body(axum::body::Body::from(turn_body(30).to_string())).unwrap()).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
}
