//! The solver function's cold start: production defaults, its bearer and signing key read
//! once from the secret store (a fake Secrets Manager over real HTTP, reached through
//! AWS_ENDPOINT_URL_SECRETS_MANAGER), failing with the secret's name, never a value.

use std::process::Command;

use axum::http::HeaderMap;
use serde_json::{Value, json};

const BEARER: &str = "bearer-value-that-must-never-be-printed";
/// `{"issuer":"helix-ask","key_id":"ask-boot-1","private_key": base64 of 32 bytes of 7}`.
const KEY: &str =
    r#"{"issuer":"helix-ask","key_id":"ask-boot-1","private_key":"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="}"#;

/// `bearer` and `key` are found; anything else is not.
async fn fake_secrets_manager() -> String {
    let app = axum::Router::new().route(
        "/",
        axum::routing::post(|headers: HeaderMap, body: String| async move {
            assert_eq!(headers["x-amz-target"], "secretsmanager.GetSecretValue");
            let id = serde_json::from_str::<Value>(&body).unwrap()["SecretId"].as_str().unwrap().to_owned();
            let value = match id.as_str() {
                "bearer" => Some(BEARER),
                "key" => Some(KEY),
                _ => None,
            };
            let json_type = [("content-type", "application/x-amz-json-1.1")];
            match value {
                Some(v) => (
                    axum::http::StatusCode::OK,
                    json_type,
                    json!({"ARN": id, "Name": id, "SecretString": v}).to_string(),
                ),
                None => (
                    axum::http::StatusCode::BAD_REQUEST,
                    json_type,
                    json!({"__type": "ResourceNotFoundException", "message": "not found"}).to_string(),
                ),
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

fn cold_start(endpoint: &str, bearer_id: &str, key_id: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_helix-solver"))
        .env_clear()
        .env("HELIX_ASK_BEARER_TOKEN_SECRET_ARN", bearer_id)
        .env("HELIX_SOLVER_SIGNING_KEY_SECRET_ARN", key_id)
        .env("AWS_ENDPOINT_URL_SECRETS_MANAGER", endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "AKIDTEST")
        .env("AWS_SECRET_ACCESS_KEY", "not-a-real-secret-key")
        // Reached only after a successful start: nothing listens there, so the runtime fails.
        .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
        .env("AWS_LAMBDA_FUNCTION_NAME", "helix-solver")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_solver_reads_its_secrets_once_and_never_prints_them() {
    let endpoint = fake_secrets_manager().await;
    let (_, text) = tokio::task::spawn_blocking(move || cold_start(&endpoint, "bearer", "key")).await.unwrap();
    assert!(text.contains("turn service ready") && text.contains("ask-boot-1"), "started: {text}");
    assert!(text.contains("HELIX_SOLVER_SIGNING_KEY"), "names what it read: {text}");
    assert!(!text.contains(BEARER) && !text.contains("BwcHBwcH"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_secret_fails_start_with_its_name() {
    let endpoint = fake_secrets_manager().await;
    let (ok, text) = tokio::task::spawn_blocking(move || cold_start(&endpoint, "bearer", "gone")).await.unwrap();
    assert!(!ok);
    assert!(text.contains("HELIX_SOLVER_SIGNING_KEY_SECRET_ARN") && text.contains("gone"), "{text}");
    assert!(!text.contains("turn service ready") && !text.contains(BEARER), "{text}");
}

#[test]
fn the_function_refuses_to_start_without_a_bearer_or_a_key() {
    let out = Command::new(env!("CARGO_BIN_EXE_helix-solver")).env_clear().output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("HELIX_ASK_BEARER_TOKEN"));
}
