//! Every API Gateway payload in events/ goes through lambda_http's own decoding and
//! the Lambda adapter into the same routers, as `cargo lambda invoke` would send it.

use axum::body::Body;
use helix_integration_tests::*;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

const EXAMPLE_RUN: &str = "run_exampleid0001";

async fn invoke(app: &TestApp, file: &str, token: &str, run_id: Option<&str>) -> (u16, Value) {
    invoke_from(app, file, token, run_id, None).await
}

/// As `invoke`, with the event's `requestContext.http.sourceIp` replaced by `source_ip`.
async fn invoke_from(
    app: &TestApp,
    file: &str,
    token: &str,
    run_id: Option<&str>,
    source_ip: Option<&str>,
) -> (u16, Value) {
    let path = format!("{}/../events/{file}", env!("CARGO_MANIFEST_DIR"));
    let mut raw = std::fs::read_to_string(&path).unwrap();
    if let Some(id) = run_id {
        raw = raw.replace(EXAMPLE_RUN, id);
    }
    if let Some(ip) = source_ip {
        let mut event: Value = serde_json::from_str(&raw).unwrap();
        event["requestContext"]["http"]["sourceIp"] = Value::from(ip);
        raw = event.to_string();
    }
    let req = lambda_http::request::from_str(&raw).unwrap_or_else(|e| panic!("{file}: {e}"));
    let (mut parts, body) = req.into_parts();
    parts.headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    let req = http::Request::from_parts(parts, Body::from(body.to_vec()));
    let router = helix_core::lambda::adapt(compose(app.state.clone()));
    let res = router.oneshot(req).await.unwrap();
    let status = res.status().as_u16();
    assert_eq!(res.headers()["cache-control"], "no-store", "{file}");
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn every_event_file_is_served_by_its_router() {
    let app = TestApp::spawn_with(Backend::Embedded, &[("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com")]).await;
    let token = app.token().await;
    let (status, run) = invoke(&app, "start.json", &token, None).await;
    assert_eq!(status, 201, "{run}");
    let id = run["run_id"].as_str().unwrap().to_owned();
    assert_eq!(run["budget"]["max_steps"], 4);

    for file in ["inspect.json", "events.json", "evidence.json"] {
        let (status, body) = invoke(&app, file, &token, Some(&id)).await;
        assert_eq!(status, 200, "{file}: {body}");
        assert_eq!(body["run_id"], id.as_str(), "{file}");
    }
    app.script(completing_step(2));
    let (status, body) = invoke(&app, "continue.json", &token, Some(&id)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["completion_status"], "completed");
    let (status, body) = invoke(&app, "cancel.json", &token, Some(&id)).await;
    assert_eq!(status, 409, "the completed run cannot be cancelled: {body}");
    assert_eq!(body["error"]["code"], "run_not_continuable");

    for file in ["discovery.json", "discovery-root.json"] {
        let (status, body) = invoke(&app, file, &token, None).await;
        assert_eq!(status, 200, "{file}");
        assert!(body["resource"].as_str().unwrap().ends_with("/mcp"));
    }
    let (status, body) = invoke(&app, "mcp-tools-list.json", &token, None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["result"]["tools"].as_array().is_some_and(|t| t.len() >= 6), "{body}");
}

#[tokio::test]
async fn the_lambda_adapter_passes_the_source_ip_to_the_rate_limit() {
    let app = TestApp::spawn_with(
        Backend::Embedded,
        &[("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com"), ("HELIX_AGENT_IP_RATE_LIMIT", "1")],
    )
    .await;
    let (first, _) = invoke_from(&app, "discovery.json", "unused", None, Some("198.51.100.1")).await;
    let (second, body) = invoke_from(&app, "discovery.json", "unused", None, Some("198.51.100.1")).await;
    assert_eq!((first, second), (200, 429), "{body}");
    // Fails if the adapter dropped the address: every event would share one bucket.
    let (other, body) = invoke_from(&app, "discovery.json", "unused", None, Some("198.51.100.2")).await;
    assert_eq!(other, 200, "another source IP has its own window: {body}");
}

#[tokio::test]
async fn api_gateway_events_count_as_https_in_production_with_trust_proxy_apigateway() {
    let mut vars = PRODUCTION.to_vec();
    vars.push(("TRUST_PROXY", "apigateway"));
    let app = TestApp::spawn_with(Backend::Embedded, &vars).await;
    let (status, body) = invoke(&app, "discovery.json", "unused", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["resource"], "https://api.example.com/mcp");
    // The same request over a socket is not an API Gateway event: nothing proves HTTPS.
    let res = app
        .http
        .get(format!("{}/.well-known/oauth-protected-resource/mcp", app.base))
        .header("Host", "api.example.com")
        .header("X-Forwarded-Proto", "https")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["code"], "https_required");
}
