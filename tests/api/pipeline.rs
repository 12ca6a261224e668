//! The shared pipeline: headers, request ids, host/origin admission, body limits, 404/405.

use helix_integration_tests::support::runs::{completing_step, research_run};
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

// ----------------------------------------------------------------- hardening

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn get_with_host(host: &str) -> Vec<u8> {
    format!("GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
        .into_bytes()
}

#[tokio::test]
async fn malformed_hosts_are_400_in_the_error_schema_and_the_server_lives_on() {
    let app = TestApp::spawn().await;
    for host in
        ["[::1", "[", "[:", "[::1]junk", "127.0.0.1:notaport", "127.0.0.1:99999", "user@127.0.0.1", "127.0.0.1:"]
    {
        let answer = raw_exchange(&app.base, &get_with_host(host), Duration::from_secs(5)).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{host:?}: {answer:?}");
        let body = raw_json(&answer);
        assert_eq!(body["schema"], "helix.agent_api.error.v1", "{host:?}");
        assert_eq!(body["error"]["code"], "host_not_allowed", "{host:?}");
    }
    for host in ["127.0.0.1", "127.0.0.1:9000", "[::1]:80", "LOCALHOST"] {
        let answer = raw_exchange(&app.base, &get_with_host(host), Duration::from_secs(5)).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{host:?}: {answer:?}");
    }
}

#[tokio::test]
async fn repeated_security_headers_are_400_on_rest_and_mcp() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let auth = format!("Authorization: Bearer {token}\r\n");
    let cases = [
        ("Host: 127.0.0.1\r\n", "host"),
        ("X-Tenant-Id: tenant-a\r\nX-Tenant-Id: tenant-b\r\n", "x-tenant-id"),
        ("X-Customer-Id: tenant-a\r\nX-Customer-Id: tenant-a\r\n", "x-customer-id"),
        ("X-Org-Id: tenant-a\r\nX-Org-Id: tenant-b\r\n", "x-org-id"),
        (auth.as_str(), "authorization"),
        ("Idempotency-Key: key-one-0001\r\nIdempotency-Key: key-two-0002\r\n", "idempotency-key"),
    ];
    for (path, body) in [
        ("/api/v1/agent-runs", r#"{"objective":"x","database_scope":["research_library"]}"#),
        ("/mcp", r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
    ] {
        for (extra, name) in cases {
            let request = format!(
                "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n{extra}\
                 Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let answer = raw_exchange(&app.base, request.as_bytes(), Duration::from_secs(5)).await;
            assert!(answer.starts_with("HTTP/1.1 400"), "{path} {name}: {answer}");
            let json = raw_json(&answer);
            assert_eq!(json["error"]["code"], "duplicate_header", "{path} {name}");
            assert_eq!(json["error"]["details"]["header"], name, "{path} {name}");
        }
    }
}

#[tokio::test]
async fn h2c_requests_are_admitted_by_their_authority() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let h2 = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let res = h2.get(format!("{}/.well-known/oauth-protected-resource/mcp", app.base)).send().await.unwrap();
    assert_eq!(res.version(), reqwest::Version::HTTP_2);
    assert_eq!(res.status(), 200);
    let res =
        h2.get(format!("{}/api/v1/agent-runs/run_missing0001", app.base)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(res.status(), 404, "admitted and authenticated; the run is simply missing");
    let res = h2
        .post(format!("{}/mcp", app.base))
        .bearer_auth(&token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25")
        .json(&serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert!(body["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "{body}");
    let started = h2
        .post(format!("{}/api/v1/agent-runs", app.base))
        .bearer_auth(&token)
        .header("Idempotency-Key", "h2c-start-0001")
        .json(&research_run())
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 201);
}

#[tokio::test]
async fn a_socket_that_stalls_mid_header_is_closed_after_the_header_timeout() {
    let app = TestApp::spawn_with(Backend::Embedded, &[("HELIX_SERVE_HEADER_TIMEOUT_MS", "300")]).await;
    let started = std::time::Instant::now();
    let answer =
        raw_exchange(&app.base, b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: a", Duration::from_secs(10)).await;
    assert_eq!(answer, "", "no answer, just a close");
    assert!(started.elapsed() < Duration::from_secs(5), "closed by the header timeout, not by the test's wait");
    // A socket that sends nothing at all is closed by the same timeout.
    let started = std::time::Instant::now();
    raw_exchange(&app.base, b"", Duration::from_secs(10)).await;
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_but_a_long_request_is_not_cut() {
    let app = TestApp::spawn_with(
        Backend::Embedded,
        &[("HELIX_SERVE_IDLE_TIMEOUT_MS", "300"), ("HELIX_SERVE_HEADER_TIMEOUT_MS", "20000")],
    )
    .await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let id = run["run_id"].as_str().unwrap();
    // A turn that outlasts the idle timeout still gets its answer.
    app.script(helix_core::executor::scripted::Step::Delay(Duration::from_millis(900), Box::new(completing_step(1))));
    let res = app
        .continue_run(
            &token,
            id,
            "slow-turn-0001",
            serde_json::json!({ "expected_version": 1, "instruction": "Find the measured force." }),
        )
        .await;
    assert_eq!(res.status(), 200);
    // After its answer, a kept-alive connection that stays quiet is closed.
    let mut sock = tokio::net::TcpStream::connect(app.base.trim_start_matches("http://")).await.unwrap();
    sock.write_all(b"GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    let started = std::time::Instant::now();
    let mut out = vec![];
    tokio::time::timeout(Duration::from_secs(10), sock.read_to_end(&mut out)).await.expect("closed").unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(!text.to_ascii_lowercase().contains("connection: close"), "kept alive until idle: {text}");
    assert!(started.elapsed() < Duration::from_secs(5), "closed by the idle timeout, not the header timeout");
}

#[tokio::test]
async fn a_stalled_body_is_answered_408_with_connection_close() {
    let app = TestApp::spawn_with(Backend::Embedded, &[("HELIX_SERVE_BODY_TIMEOUT_MS", "300")]).await;
    let token = app.token().await;
    let request = format!(
        "POST /api/v1/agent-runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Idempotency-Key: stalled-body-01\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"objec"
    );
    for request in [request.clone(), request.replace("/api/v1/agent-runs", "/mcp")] {
        let answer = raw_exchange(&app.base, request.as_bytes(), Duration::from_secs(10)).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
        assert_eq!(raw_json(&answer)["error"]["code"], "request_timeout");
    }
}

#[tokio::test]
async fn the_connection_cap_holds_further_connections_until_one_ends() {
    let app = TestApp::spawn_with(Backend::Embedded, &[("HELIX_SERVE_MAX_CONNECTIONS", "2")]).await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    // Two connections with a request head under way: busy, so neither gives up its slot.
    let mut first = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut second = tokio::net::TcpStream::connect(&addr).await.unwrap();
    for sock in [&mut first, &mut second] {
        sock.write_all(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = tokio::net::TcpStream::connect(&addr).await.unwrap();
    third.write_all(&get_with_host("127.0.0.1")).await.unwrap();
    let mut out = vec![];
    let early = tokio::time::timeout(Duration::from_millis(700), third.read_to_end(&mut out)).await;
    assert!(early.is_err() && out.is_empty(), "a third connection is not served while two are open");
    drop(first);
    tokio::time::timeout(Duration::from_secs(5), third.read_to_end(&mut out)).await.expect("served").unwrap();
    assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn a_post_refused_before_its_body_is_read_says_connection_close() {
    let app = TestApp::spawn_with(Backend::Embedded, &[("HELIX_AGENT_IP_RATE_LIMIT", "1")]).await;
    let body = r#"{"objective":"x","database_scope":["research_library"]}"#;
    let post = format!(
        "POST /api/v1/agent-runs HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: refused-post-01\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut sock = tokio::net::TcpStream::connect(app.base.trim_start_matches("http://")).await.unwrap();
    // First: 401 without reading the body. Second (a fresh socket): 429.
    for expected in ["HTTP/1.1 401", "HTTP/1.1 429"] {
        sock.write_all(post.as_bytes()).await.unwrap();
        let mut out = vec![];
        tokio::time::timeout(Duration::from_secs(5), sock.read_to_end(&mut out)).await.expect("closed").unwrap();
        let text = String::from_utf8_lossy(&out).to_string();
        assert!(text.starts_with(expected), "{text}");
        assert!(text.to_ascii_lowercase().contains("connection: close"), "{text}");
        assert!(raw_json(&text)["error"]["code"].is_string(), "the whole answer arrived: {text}");
        sock = tokio::net::TcpStream::connect(app.base.trim_start_matches("http://")).await.unwrap();
    }
    // A request whose body was read keeps its connection.
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let authed = post.replace("Host: 127.0.0.1\r\n", &format!("Host: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"));
    let answer = raw_exchange(&app.base, authed.as_bytes(), Duration::from_millis(800)).await;
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert!(!answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
}

async fn boom() -> &'static str {
    let nothing: Option<&str> = std::hint::black_box(None);
    nothing.expect("secret-panic-payload")
}

#[tokio::test]
async fn a_panicking_handler_answers_500_in_the_error_schema_and_the_server_lives_on() {
    use axum::routing::get;
    let app = TestApp::spawn().await;
    let router = axum::Router::new()
        .route("/inside", get(boom))
        .layer(axum::middleware::from_fn_with_state(
            (app.state.clone(), helix_core::http::Group::AgentRuns),
            helix_core::http::pipeline,
        ))
        .merge(axum::Router::new().route("/outside", get(boom)))
        .merge(axum::Router::new().route("/fine", get(|| async { "fine" })));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let limits = app.state.services.config.server;
    tokio::spawn(helix_core::http::server::serve(listener, router, limits, std::future::pending()));
    for path in ["/inside", "/outside", "/inside"] {
        let res = app.http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(res.status(), 500, "{path}");
        assert_eq!(res.headers()["cache-control"], "no-store");
        assert!(res.headers().contains_key("x-request-id"));
        let text = res.text().await.unwrap();
        assert!(!text.contains("secret-panic-payload"), "{text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["schema"], "helix.agent_api.error.v1");
        assert_eq!(body["error"]["code"], "internal_error");
    }
    assert_eq!(app.http.get(format!("{base}/fine")).send().await.unwrap().text().await.unwrap(), "fine");
}

#[tokio::test]
async fn production_admits_only_https_proven_by_a_trusted_proxy() {
    let discovery = |forwarded: Option<&str>| {
        let xfp = forwarded.map(|p| format!("X-Forwarded-Proto: {p}\r\n")).unwrap_or_default();
        format!(
            "GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: api.example.com\r\n{xfp}Connection: close\r\n\r\n"
        )
    };
    let app = TestApp::spawn_with(Backend::Embedded, PRODUCTION).await;
    for (xfp, status) in [(None, "400"), (Some("http"), "400"), (Some("https, https"), "400"), (Some("https"), "200")] {
        let answer = raw_exchange(&app.base, discovery(xfp).as_bytes(), Duration::from_secs(5)).await;
        assert!(answer.starts_with(&format!("HTTP/1.1 {status}")), "{xfp:?}: {answer}");
        if status == "400" {
            assert_eq!(raw_json(&answer)["error"]["code"], "https_required", "{xfp:?}");
        }
    }
    let mut vars = PRODUCTION.to_vec();
    vars.push(("TRUST_PROXY", "192.0.2.1"));
    let app = TestApp::spawn_with(Backend::Embedded, &vars).await;
    let answer = raw_exchange(&app.base, discovery(Some("https")).as_bytes(), Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "an untrusted peer's X-Forwarded-Proto proves nothing: {answer}");
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
    assert_eq!(bad_args, 400, "the preflight still checks the arguments: {body}");
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
