//! The shared pipeline: headers, request ids, host/origin admission, body limits, 404/405.

use helix_integration_tests::support::runs::research_run;
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

/// A standard trace id, or a whole `traceparent` value, is a caller's correlation id: it
/// comes back in the header and the error body; a longer hex run (a hex secret) does not.
#[tokio::test]
async fn w3c_trace_ids_are_kept_as_request_ids_and_longer_hex_runs_replaced() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    for kept in ["4bf92f3577b34da6a3ce929d0e0e4736", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"] {
        let res =
            app.get("/api/v1/agent-runs/run_missing0001", &token).header("X-Request-Id", kept).send().await.unwrap();
        assert_eq!(res.headers()["x-request-id"], kept);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["request_id"], kept);
    }
    for replaced in
        ["4bf92f3577b34da6a3ce929d0e0e47364bf92f35", "sk-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"]
    {
        let res = app
            .get("/api/v1/agent-runs/run_missing0001", &token)
            .header("X-Request-Id", replaced)
            .send()
            .await
            .unwrap();
        assert!(res.headers()["x-request-id"].to_str().unwrap().starts_with("req_"));
        assert!(!res.text().await.unwrap().contains(replaced));
    }
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
    assert_eq!(res.headers()["allow"], "GET, POST");
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

async fn metadata(app: &TestApp, path: &str) -> Value {
    let url = format!("{}/.well-known/oauth-protected-resource{path}", app.base);
    app.http.get(url).send().await.unwrap().json().await.unwrap()
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
    let device = metadata(&app, "/mcp/device-check").await;
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

#[tokio::test]
async fn the_metadata_resource_is_the_configured_audience() {
    let app =
        TestApp::spawn_with(Backend::Embedded, &[("HELIX_AGENT_OAUTH_AUDIENCE", "http://127.0.0.1:9000/api")]).await;
    assert_eq!(metadata(&app, "/mcp").await["resource"], "http://127.0.0.1:9000/api");
    let token = app.token().await;
    let res = app.get("/api/v1/agent-runs/run_missing0001", &token).send().await.unwrap();
    assert_eq!(res.status(), 404, "tokens for that audience are accepted");
}

// ----------------------------------------------------------------- the direct tools/call path

async fn tools_call(app: &TestApp, token: &str, body: Value, headers: &[(&str, &str)]) -> (u16, String) {
    let mut req = app.post("/mcp", token).header("Accept", "application/json, text/event-stream");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let res = req.json(&body).send().await.unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

fn inspect_call(id: Value, run_id: &str) -> Value {
    serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": "helix_run_inspect", "arguments": { "run_id": run_id } } })
}

/// A call of a request shape the SDK accepted once is dispatched without it: the answers
/// (success and error results, numeric and string ids) are the ones the SDK gave.
#[tokio::test]
async fn a_repeated_tools_call_answers_as_the_sdk_did() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let id = run["run_id"].as_str().unwrap();
    let v = ("MCP-Protocol-Version", "2025-11-25");
    for (run_id, shape) in [(id, "ok"), ("run_0123456789abcdef0123456789abcdef", "missing")] {
        // A fixed request id: an error result carries it.
        let headers = [v, ("x-shape", shape), ("x-request-id", "direct-path-test-0001")];
        let (s1, first) = tools_call(&app, &token, inspect_call(serde_json::json!(1), run_id), &headers).await;
        let (s2, second) = tools_call(&app, &token, inspect_call(serde_json::json!(1), run_id), &headers).await;
        assert_eq!((s1, s2), (200, 200), "{first}\n{second}");
        if shape == "missing" {
            assert_eq!(first, second, "byte for byte: the direct path writes the frame the SDK wrote");
        }
        // A run view is serialized once in its declared member order (wire::RunJson), which
        // is its text copy on both paths; the SDK's model re-sorts `structuredContent`'s
        // members, so there only the JSON values are equal.
        if shape == "ok" {
            let text = |body: &str| serde_json::from_str::<Value>(body).unwrap()["result"]["content"].clone();
            assert_eq!(text(&first), text(&second), "the text copy is the same string on both paths");
        }
        let (first, second): (Value, Value) =
            (serde_json::from_str(&first).unwrap(), serde_json::from_str(&second).unwrap());
        assert_eq!(first, second, "the same call answers the same whichever path served it");
        let (s3, third) = tools_call(&app, &token, inspect_call(serde_json::json!("call-3"), run_id), &headers).await;
        let third: Value = serde_json::from_str(&third).unwrap();
        assert_eq!((s3, &third["id"]), (200, &serde_json::json!("call-3")));
        assert_eq!(third["result"], first["result"]);
    }
    let (_, ok) = tools_call(&app, &token, inspect_call(serde_json::json!(2), id), &[v]).await;
    let ok: Value = serde_json::from_str(&ok).unwrap();
    assert_eq!(ok["result"]["structuredContent"]["run_id"], id);
    assert_eq!(ok["result"]["isError"], false);
    let text = ok["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), ok["result"]["structuredContent"]);
    let (_, missing) =
        tools_call(&app, &token, inspect_call(serde_json::json!(3), "run_0123456789abcdef0123456789abcdef"), &[v])
            .await;
    let missing: Value = serde_json::from_str(&missing).unwrap();
    assert_eq!(missing["result"]["isError"], true);
    assert_eq!(missing["result"]["structuredContent"]["error"]["code"], "not_found");
}

/// What the SDK refuses stays refused after a call of another shape was accepted, and
/// every check before the SDK (preflight, authentication, scopes) still runs.
#[tokio::test]
async fn the_direct_tools_call_path_keeps_every_check() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let id = run["run_id"].as_str().unwrap();
    let v = ("MCP-Protocol-Version", "2025-11-25");
    for _ in 0..2 {
        let (status, _) = tools_call(&app, &token, inspect_call(serde_json::json!(1), id), &[v]).await;
        assert_eq!(status, 200);
    }
    let (bad_version, _) =
        tools_call(&app, &token, inspect_call(serde_json::json!(1), id), &[("MCP-Protocol-Version", "1999-01-01")])
            .await;
    assert_eq!(bad_version, 400, "an unsupported protocol version is the SDK's refusal, every time");
    let (unauthenticated, _) = tools_call(&app, "not-a-token", inspect_call(serde_json::json!(1), id), &[v]).await;
    assert_eq!(unauthenticated, 401);
    let (bad_args, body) = tools_call(
        &app,
        &token,
        serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": "helix_run_inspect", "arguments": { "run_id": id, "owner": "x" } } }),
        &[v],
    )
    .await;
    let bad: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(bad_args, 200, "arguments off the schema are a tool result: {body}");
    assert_eq!(bad["result"]["isError"], true, "{body}");
    assert_eq!(bad["result"]["structuredContent"]["error"]["code"], "invalid_request", "{body}");
    assert_eq!(bad["result"]["structuredContent"]["error"]["details"]["field"], "arguments", "{body}");
    let reader = app.token_for("reader-less", "tenant-a", &["helix.agent_runs.write"]).await;
    let (status, body) = tools_call(&app, &reader, inspect_call(serde_json::json!(1), id), &[v]).await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status, 200);
    assert_eq!(body["result"]["isError"], true, "{body}");
    assert_eq!(body["result"]["structuredContent"]["error"]["code"], "insufficient_scope", "{body}");
    let with_meta = serde_json::json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": { "name": "helix_run_inspect", "arguments": { "run_id": id }, "_meta": { "progressToken": "p1" } } });
    let (status, body) = tools_call(&app, &token, with_meta, &[v]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["result"]["structuredContent"]["run_id"], id);
}
