//! The shared pipeline's hardening at the socket: malformed hosts, repeated security
//! headers, h2c, header/body/idle timeouts, the connection cap, a panicking handler and
//! production's HTTPS admission behind a trusted proxy.

use std::time::Duration;

use helix_integration_tests::support::runs::{completing_step, research_run};
use helix_integration_tests::*;
use serde_json::Value;
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
