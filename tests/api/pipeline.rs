//! The shared pipeline: headers, request ids, host/origin admission, body limits, 404/405.

use helix_integration_tests::*;
use serde_json::Value;

#[tokio::test]
async fn safe_request_ids_are_kept_and_credential_shaped_ones_replaced() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let res = app
        .get("/api/v1/agent-runs/run_missing0001", &token)
        .header("X-Request-Id", "client-trace-42")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], "client-trace-42");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["request_id"], "client-trace-42");
    let jwt_like = token.clone();
    let res =
        app.get("/api/v1/agent-runs/run_missing0001", &token).header("X-Request-Id", &jwt_like).send().await.unwrap();
    let id = res.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(id.starts_with("req_"));
    let text = res.text().await.unwrap();
    assert!(!text.contains(&jwt_like));
    let long = "a".repeat(161);
    let res = app.get("/api/v1/agent-runs/run_missing0001", &token).header("X-Request-Id", &long).send().await.unwrap();
    assert_ne!(res.headers()["x-request-id"], long.as_str());
}

#[tokio::test]
async fn a_disallowed_host_is_refused_before_auth() {
    let app = TestApp::spawn().await;
    let res = app
        .http
        .get(format!("{}/api/v1/agent-runs/run_missing0001", app.base))
        .header("Host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(res.headers()["cache-control"], "no-store");
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["code"], "host_not_allowed");
}

#[tokio::test]
async fn a_disallowed_origin_is_refused_and_an_allowed_one_admitted() {
    let app = TestApp::spawn_with(Backend::Embedded, &[("HELIX_AGENT_ALLOWED_ORIGINS", "https://app.example")]).await;
    let token = app.token().await;
    let res = app
        .get("/api/v1/agent-runs/run_missing0001", &token)
        .header("Origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["code"], "origin_not_allowed");
    let res = app
        .get("/api/v1/agent-runs/run_missing0001", &token)
        .header("Origin", "https://app.example")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404, "admitted, then the run is simply missing");
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let app = TestApp::spawn_with(Backend::Embedded, &[("HELIX_AGENT_BODY_LIMIT", "2048")]).await;
    let token = app.token().await;
    let big = serde_json::json!({ "objective": "x".repeat(4000) });
    let res = app.start(&token, "too-large-0001", big).await;
    assert_eq!(res.status(), 413);
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["code"], "payload_too_large");
}

#[tokio::test]
async fn a_non_json_body_is_415_and_malformed_json_400() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let res = app
        .post("/api/v1/agent-runs", &token)
        .header("Idempotency-Key", "media-type-001")
        .body("objective=x")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 415);
    let res = app
        .post("/api/v1/agent-runs", &token)
        .header("Idempotency-Key", "malformed-0001")
        .header("Content-Type", "application/json")
        .body("{\"objective\": \"sk-live-secret-value")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert!(!res.text().await.unwrap().contains("sk-live-secret-value"), "parser errors never echo values");
}

#[tokio::test]
async fn unknown_paths_are_404_and_wrong_methods_405_with_allow() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let res = app.get("/api/v2/nothing", &token).send().await.unwrap();
    assert_eq!(res.status(), 404);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let res = app.http.delete(format!("{}/api/v1/agent-runs", app.base)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(res.status(), 405);
    assert_eq!(res.headers()["allow"], "POST");
    let res = app
        .http
        .post(format!("{}/api/v1/agent-runs/run_abcdefgh12", app.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405);
    assert_eq!(res.headers()["allow"], "GET");
}

#[tokio::test]
async fn discovery_serves_rfc9728_metadata_at_every_well_known_path() {
    let app = TestApp::spawn().await;
    for path in ["", "/mcp", "/api/v1/agent-runs", "/api/v1/rooms"] {
        let res =
            app.http.get(format!("{}/.well-known/oauth-protected-resource{path}", app.base)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        assert_eq!(res.headers()["cache-control"], "no-store");
        let meta: Value = res.json().await.unwrap();
        assert_eq!(meta["resource"], "http://127.0.0.1:9000/mcp");
        assert_eq!(meta["authorization_servers"][0], "helix-local-issuer");
        assert_eq!(meta["bearer_methods_supported"], serde_json::json!(["header"]));
        let scopes = meta["scopes_supported"].as_array().unwrap();
        assert!(scopes.iter().any(|s| s == "helix.agent_runs.write"));
        assert!(scopes.iter().any(|s| s == "helix.data.research_library.read"));
    }
    let device: Value = app
        .http
        .get(format!("{}/.well-known/oauth-protected-resource/mcp/device-check", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(device["scopes_supported"], serde_json::json!(["helix.rooms.read"]));
    assert_eq!(device["resource"], "http://127.0.0.1:9000/mcp");
}

#[tokio::test]
async fn the_ip_rate_limit_answers_429_with_retry_after() {
    let app = TestApp::spawn_with(Backend::Embedded, &[("HELIX_AGENT_IP_RATE_LIMIT", "3")]).await;
    let mut statuses = vec![];
    for _ in 0..5 {
        let res = app.http.get(format!("{}/api/v1/agent-runs/run_abcdefgh12", app.base)).send().await.unwrap();
        statuses.push(res.status().as_u16());
        if res.status() == 429 {
            assert!(res.headers().contains_key("retry-after"));
        }
    }
    assert!(statuses.contains(&429), "{statuses:?}");
}

#[tokio::test]
async fn the_mcp_body_limit_is_independent_of_the_rest_limit() {
    let app = TestApp::spawn_with(Backend::Embedded, &[("HELIX_MCP_BODY_LIMIT", "2048")]).await;
    let token = app.token().await;
    let call = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "helix_run_start", "arguments": {
            "idempotency_key": "mcp-too-large-01", "request": { "objective": "x".repeat(4000) } } }
    });
    let res = app
        .post("/mcp", &token)
        .header("Accept", "application/json, text/event-stream")
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["code"], "payload_too_large");
    let rest = app.start(&token, "rest-still-fine-1", serde_json::json!({ "objective": "x".repeat(4000) })).await;
    assert_eq!(rest.status(), 201, "the REST limit (default 256 KiB) is separate");
}

async fn tools_list(app: &TestApp, token: &str, id: serde_json::Value, version: &str) -> (u16, Value) {
    let res = app
        .post("/mcp", token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", version)
        .json(&serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": "tools/list" }))
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_repeated_tools_list_answers_identically_with_its_own_id() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let (s1, first) = tools_list(&app, &token, serde_json::json!(1), "2025-11-25").await;
    let (s2, second) = tools_list(&app, &token, serde_json::json!("second"), "2025-11-25").await;
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(second["id"], "second");
    assert_eq!(second["jsonrpc"], "2.0");
    assert_eq!(first["result"], second["result"]);
    assert!(second["result"]["tools"][0]["securitySchemes"].is_array(), "{second}");
    let (s3, older) = tools_list(&app, &token, serde_json::json!(3), "2025-06-18").await;
    assert_eq!(s3, 200);
    assert_eq!(older["result"]["tools"].as_array().unwrap().len(), helix_core::mcp::catalog::CATALOG.len());
    let (bad, _) = tools_list(&app, &token, serde_json::json!(4), "1999-01-01").await;
    assert_eq!(bad, 400, "an unsupported protocol version is refused, cached answers or not");
    let (unauthenticated, _) = tools_list(&app, "not-a-token", serde_json::json!(5), "2025-11-25").await;
    assert_eq!(unauthenticated, 401, "the cache sits behind authentication");
}
