//! The loader against a fake Secrets Manager over real HTTP (the JSON 1.1 protocol the SDK
//! speaks: `POST /`, `X-Amz-Target: secretsmanager.GetSecretValue`), no AWS.

use std::sync::{Arc, Mutex};

use aws_sdk_secretsmanager::config::{BehaviorVersion, Credentials, Region};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::*;

pub(crate) const VALUE: &str = "value-that-must-never-be-printed-0001";
/// What the fake puts in its error messages: must never reach an error of ours.
const LEAK: &str = "message-that-must-never-be-printed";

type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// Answers `found*` with [`VALUE`], `missing*` as not found, `denied*` as access denied,
/// `binary*` with a binary value only, anything else with a 500.
pub(crate) async fn fake_secrets_manager() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let app = axum::Router::new().route(
        "/",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let log = log.clone();
            async move {
                let target = headers.get("x-amz-target").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                let id =
                    serde_json::from_str::<Value>(&body).ok().and_then(|b| b["SecretId"].as_str().map(String::from));
                let id = id.unwrap_or_default();
                log.lock().unwrap().push((target, id.clone()));
                answer(&id)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

fn answer(id: &str) -> Response {
    let json_type = [("content-type", "application/x-amz-json-1.1")];
    let error = |status: StatusCode, kind: &str| {
        let body = json!({ "__type": kind, "message": format!("{LEAK} {VALUE}") }).to_string();
        (status, json_type, [("x-amzn-errortype", kind.to_owned())], body).into_response()
    };
    let ok = |value: Value| (StatusCode::OK, json_type, value.to_string()).into_response();
    if id.starts_with("found") {
        ok(json!({ "ARN": id, "Name": id, "SecretString": format!(" {VALUE}\n"), "VersionId": "v1" }))
    } else if id.starts_with("missing") {
        error(StatusCode::BAD_REQUEST, "ResourceNotFoundException")
    } else if id.starts_with("denied") {
        error(StatusCode::BAD_REQUEST, "AccessDeniedException")
    } else if id.starts_with("binary") {
        ok(json!({ "ARN": id, "Name": id, "SecretBinary": "AAEC", "VersionId": "v1" }))
    } else {
        error(StatusCode::INTERNAL_SERVER_ERROR, "InternalServiceError")
    }
}

fn client(url: &str) -> Client {
    let config = aws_sdk_secretsmanager::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("AKIDTEST", "not-a-real-secret-key", None, None, "test"))
        .endpoint_url(url)
        .build();
    Client::from_conf(config)
}

fn one(var: &str, secret_id: &str) -> Vec<SecretRef> {
    vec![SecretRef { var: var.into(), secret_id: secret_id.into() }]
}

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn every_secret_arn_variable_names_its_variable() {
    let refs = secret_refs(vars(&[
        ("HELIX_ASK_BEARER_TOKEN_SECRET_ARN", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:ask"),
        ("HELIX_BROWSER_OIDC_CLIENT_SECRET_SECRET_ARN", "helix/oidc"),
        ("HELIX_EMPTY_SECRET_ARN", "  "),
        ("_SECRET_ARN", "x"),
        ("HELIX_AGENT_TURN_TIMEOUT_MS", "120000"),
    ]))
    .unwrap();
    let names: Vec<&str> = refs.iter().map(|r| r.var.as_str()).collect();
    assert_eq!(names, ["HELIX_ASK_BEARER_TOKEN", "HELIX_BROWSER_OIDC_CLIENT_SECRET"]);
    assert_eq!(refs[1].secret_id, "helix/oidc");
    let both = secret_refs(vars(&[("HELIX_ASK_BEARER_TOKEN", "x"), ("HELIX_ASK_BEARER_TOKEN_SECRET_ARN", "a")]));
    assert_eq!(both, Err(SecretStoreError::Ambiguous { var: "HELIX_ASK_BEARER_TOKEN".into() }));
}

#[tokio::test]
async fn a_found_secret_fills_its_variable_once() {
    let (url, seen) = fake_secrets_manager().await;
    let overlay = load(&client(&url), &one("HELIX_ASK_BEARER_TOKEN", "found-ask")).await.unwrap();
    assert_eq!(overlay.get("HELIX_ASK_BEARER_TOKEN").as_deref(), Some(VALUE), "trimmed");
    assert_eq!(overlay.get("HELIX_OTHER"), None);
    assert_eq!(overlay.names().collect::<Vec<_>>(), ["HELIX_ASK_BEARER_TOKEN"]);
    assert!(!format!("{overlay:?}").contains(VALUE));
    assert_eq!(*seen.lock().unwrap(), [("secretsmanager.GetSecretValue".to_owned(), "found-ask".to_owned())]);
}

#[tokio::test]
async fn a_missing_secret_names_the_variable_and_the_secret_never_a_value() {
    let (url, _) = fake_secrets_manager().await;
    let err = load(&client(&url), &one("HELIX_SOLVER_SIGNING_KEY", "missing-key")).await.unwrap_err();
    assert_eq!(
        err,
        SecretStoreError::NotFound { var: "HELIX_SOLVER_SIGNING_KEY".into(), secret_id: "missing-key".into() }
    );
    let text = format!("{err} {err:?}");
    assert!(text.contains("HELIX_SOLVER_SIGNING_KEY_SECRET_ARN"), "{text}");
    assert!(!text.contains(VALUE) && !text.contains(LEAK), "{text}");
}

#[tokio::test]
async fn an_unreadable_secret_fails_with_the_service_code_only() {
    let (url, _) = fake_secrets_manager().await;
    let c = client(&url);
    for (id, reason) in [
        ("denied-oidc", "AccessDeniedException"),
        ("binary-oidc", "it has no text value (SecretString)"),
        ("broken-oidc", "InternalServiceError"),
    ] {
        let refs = [one("HELIX_ASK_BEARER_TOKEN", "found-first"), one("HELIX_BROWSER_OIDC_CLIENT_SECRET", id)].concat();
        let err = load(&c, &refs).await.unwrap_err();
        let SecretStoreError::Unreadable { var, secret_id, reason: got } = &err else { panic!("{err:?}") };
        assert_eq!((var.as_str(), secret_id.as_str(), got.as_str()), ("HELIX_BROWSER_OIDC_CLIENT_SECRET", id, reason));
        let text = format!("{err} {err:?}");
        assert!(!text.contains(VALUE) && !text.contains(LEAK), "{text}");
    }
}

#[tokio::test]
async fn an_unreachable_store_is_unreadable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let err = load(&client(&url), &one("HELIX_ASK_BEARER_TOKEN", "found-x")).await.unwrap_err();
    assert!(
        matches!(err, SecretStoreError::Unreadable { ref reason, .. } if reason == "the secret store did not answer"),
        "{err:?}"
    );
}
