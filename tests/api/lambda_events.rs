//! Every API Gateway payload in events/ goes through lambda_http's own decoding and
//! the Lambda adapter into the same routers, as `cargo lambda invoke` would send it.

use helix_integration_tests::support::events::{event_text, through_adapter};
use helix_integration_tests::support::runs::completing_step;
use helix_integration_tests::*;
use serde_json::Value;

const EXAMPLE_RUN: &str = "RUN_ID_EXAMPLE";

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
    let replace: Vec<(&str, &str)> = run_id.map(|id| (EXAMPLE_RUN, id)).into_iter().collect();
    let mut raw = event_text(file, &replace);
    if let Some(ip) = source_ip {
        let mut event: Value = serde_json::from_str(&raw).unwrap();
        event["requestContext"]["http"]["sourceIp"] = Value::from(ip);
        raw = event.to_string();
    }
    let (status, _, bytes) = through_adapter(compose(app.state.clone()), file, &raw, Some(token)).await;
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

/// One payload of events/ through lambda_http's decoding and the Lambda adapter into one
/// function's own router (as its Lambda serves it), with the placeholders replaced, the
/// producer's `observed_at` set to now, and a bearer when given.
async fn invoke_fn(
    router: axum::Router,
    file: &str,
    bearer: Option<&str>,
    replace: &[(&str, &str)],
) -> (u16, http::HeaderMap, Value) {
    let mut raw = event_text(file, replace);
    raw = raw.replace("OBSERVED_AT_EXAMPLE", &chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    let (status, headers, bytes) = through_adapter(router, file, &raw, bearer).await;
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, headers, body)
}

/// The source, credential, ingress and Device Check payloads, each through the router of
/// the function the template routes it to (rooms, account, ingress, mcp).
#[tokio::test]
async fn every_source_ingress_and_device_check_event_reaches_its_function() {
    use helix_core::domain::source::adapter;
    use helix_integration_tests::support::sources::ALL;
    let app = TestApp::spawn_with(Backend::Embedded, EVENTS_HOST).await;
    let rooms = || helix_rooms::router(app.state.clone());
    let account = || helix_account::router(app.state.clone());
    let ingress = || helix_ingress::router(app.state.clone());
    let mcp = || helix_mcp::router(app.state.clone());
    let token = app.token_for("alice", "tenant-a", ALL).await;
    app.developer("alice").await;
    let cookie = app.session("alice").await;
    let s = ("SESSION_EXAMPLE", cookie.trim_start_matches("helix_session="));
    let (status, _, room) = invoke_fn(rooms(), "rooms-create.json", Some(&token), &[]).await;
    assert_eq!(status, 201, "{room}");
    let room_id = room["room_id"].as_str().unwrap().to_owned();
    let r = ("ROOM_ID_EXAMPLE", room_id.as_str());

    // Sources (rooms function): create, then list without any credential.
    let (status, _, created) = invoke_fn(rooms(), "sources-create.json", Some(&token), &[r]).await;
    assert_eq!(status, 201, "{created}");
    let handle = created["credential_delivery"]["claim_handle"].as_str().unwrap().to_owned();
    let source_id = created["source"]["source_id"].as_str().unwrap().to_owned();
    let (status, _, list) = invoke_fn(rooms(), "sources-list.json", Some(&token), &[r]).await;
    assert_eq!((status, list["sources"][0]["source_id"].as_str()), (200, Some(source_id.as_str())), "{list}");
    let (status, _, err) = invoke_fn(rooms(), "sources-list.json", None, &[r]).await;
    assert_eq!((status, err["error"]["code"].as_str()), (401, Some("authentication_required")), "{err}");

    // The claim page, its script and the one claim (account function, cookie lane).
    let (status, headers, page) = invoke_fn(account(), "source-claim-page.json", None, &[s]).await;
    assert_eq!(status, 200);
    assert!(page.as_str().unwrap().contains("id=\"claim-form\""), "{page}");
    assert!(headers["content-security-policy"].to_str().unwrap().contains("frame-ancestors 'none'"));
    let (status, headers, _) = invoke_fn(account(), "source-claim-script.json", None, &[s]).await;
    assert_eq!(status, 200);
    assert!(headers["content-type"].to_str().unwrap().starts_with("text/javascript"));
    let h = ("CLAIM_HANDLE_EXAMPLE", handle.as_str());
    let (status, _, cred) = invoke_fn(account(), "source-credential-claim.json", None, &[s, h]).await;
    assert_eq!(status, 201, "{cred}");
    let bearer = cred["source_bearer"].as_str().unwrap().to_owned();
    let (status, _, err) = invoke_fn(account(), "source-credential-claim.json", None, &[s, h]).await;
    assert_eq!((status, err["error"]["code"].as_str()), (404, Some("claim_handle_invalid")), "once: {err}");

    // Ingress (ingress function): the source bearer only; the event's manifest is the
    // registry's fixture manifest for its world, exactly.
    let (status, _, err) = invoke_fn(ingress(), "ingress-manifest.json", None, &[]).await;
    assert_eq!(status, 401, "{err}");
    assert_eq!(
        (err["schema"].as_str(), err["error"]["code"].as_str()),
        (Some("helix.agent_api.error.v1"), Some("source_credential_invalid")),
        "{err}"
    );
    let (status, _, err) = invoke_fn(ingress(), "ingress-observations.json", Some(&token), &[]).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (401, Some("source_credential_invalid")),
        "an OAuth token: {err}"
    );
    let fixture = adapter("fixture").unwrap();
    let (status, _, receipt) = invoke_fn(ingress(), "ingress-manifest.json", Some(&bearer), &[]).await;
    assert_eq!(
        status,
        200,
        "{receipt} (expected adapter_hash {} manifest_hash {})",
        fixture.adapter_hash(),
        fixture.manifest_hash("demo-world")
    );
    assert_eq!(receipt["admitted"], true);
    let (status, _, receipt) = invoke_fn(ingress(), "ingress-observations.json", Some(&bearer), &[]).await;
    assert_eq!((status, receipt["accepted"].as_u64()), (202, Some(2)), "{receipt}");

    // The probe routes (ingress function): the poll lists this source's pending probes
    // (none), an answer needs a probe of this source; without a bearer, 401.
    let (status, _, list) = invoke_fn(ingress(), "ingress-probes.json", Some(&bearer), &[]).await;
    assert_eq!((status, list["probes"].as_array().map(Vec::len)), (200, Some(0)), "{list}");
    let (status, _, err) = invoke_fn(ingress(), "ingress-probes.json", None, &[]).await;
    assert_eq!((status, err["error"]["code"].as_str()), (401, Some("source_credential_invalid")), "{err}");
    let unknown = format!("prb_{}", "0".repeat(24));
    let manifest_hash = fixture.manifest_hash("demo-world");
    let answer = [("PROBE_ID_EXAMPLE", unknown.as_str()), ("MANIFEST_HASH_EXAMPLE", manifest_hash.as_str())];
    let (status, _, err) = invoke_fn(ingress(), "ingress-probe-answer.json", Some(&bearer), &answer).await;
    assert_eq!((status, err["error"]["code"].as_str()), (404, Some("probe_not_found")), "{err}");

    // Device Check (mcp function): without a token, the challenge names this server's
    // metadata; with helix.rooms.read, one tool, and the source fresh.
    let (status, headers, _) = invoke_fn(mcp(), "device-check-tools-list.json", None, &[]).await;
    assert_eq!(status, 401);
    let challenge = headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains(
            "resource_metadata=\"https://api.example.com/.well-known/oauth-protected-resource/mcp/device-check\""
        ),
        "{challenge}"
    );
    let reader = app.token_for("alice", "tenant-a", &["helix.rooms.read"]).await;
    let (status, _, list) = invoke_fn(mcp(), "device-check-tools-list.json", Some(&reader), &[]).await;
    assert_eq!(status, 200, "{list}");
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(
        tools.iter().map(|t| t["name"].as_str().unwrap()).collect::<Vec<_>>(),
        helix_core::mcp::catalog::DEVICE_CHECK.rows.iter().map(|t| t.name).collect::<Vec<_>>()
    );
    let (status, _, report) = invoke_fn(mcp(), "device-check.json", Some(&reader), &[]).await;
    assert_eq!(status, 200, "{report}");
    let health = &report["result"]["structuredContent"]["rooms"][0]["sources"][0];
    assert_eq!((health["admitted"].as_bool(), health["freshness"].as_str()), (Some(true), Some("fresh")), "{report}");
    assert!(!report.to_string().contains(&bearer));

    // Rotation and revocation (account function, cookie lane).
    let ids = [s, r, ("SOURCE_ID_EXAMPLE", source_id.as_str())];
    let (status, _, rotated) = invoke_fn(account(), "source-rotate.json", None, &ids).await;
    assert_eq!((status, rotated["credential_generation"].as_u64()), (201, Some(2)), "{rotated}");
    let (status, _, _) = invoke_fn(ingress(), "ingress-manifest.json", Some(&bearer), &[]).await;
    assert_eq!(status, 401, "the rotated-out bearer");
    let (status, _, revoked) = invoke_fn(account(), "source-revoke.json", None, &ids).await;
    assert_eq!((status, revoked["revocation_status"].as_str()), (200, Some("revoked")), "{revoked}");

    // An event sent to the wrong function is that function's enveloped 404.
    let (status, _, err) = invoke_fn(rooms(), "ingress-manifest.json", None, &[]).await;
    assert_eq!((status, err["error"]["code"].as_str()), (404, Some("not_found")), "{err}");
}

/// Every payload in events/ parses as an API Gateway request and is fed to a router by
/// some test here (by its quoted file name), so a new route's event cannot go untested.
#[test]
fn every_event_file_parses_and_some_test_invokes_it() {
    let root = env!("CARGO_MANIFEST_DIR");
    let sources: String = std::fs::read_dir(format!("{root}/api"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(format!("{root}/../events"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    assert!(files.len() >= 46, "{files:?}");
    for file in &files {
        let raw = std::fs::read_to_string(format!("{root}/../events/{file}")).unwrap();
        let worker =
            serde_json::from_str(&raw).ok().and_then(|v| helix_core::service::runs::WorkerEvent::from_document(&v));
        match worker {
            // The worker invocation's own event (not API Gateway's).
            Some(parsed) => assert!(parsed.is_ok(), "{file}"),
            None => {
                lambda_http::request::from_str(&raw).unwrap_or_else(|e| panic!("{file}: {e}"));
            }
        }
        assert!(sources.contains(&format!("\"{file}\"")), "events/{file} is not invoked by any test in tests/api");
    }
}

/// The solver function's payloads (a Lambda function URL's v2 events) through its router:
/// the turn answered with a candidate the published key verifies, only with the bearer.
#[tokio::test]
async fn the_solver_function_answers_its_events() {
    use helix_core::domain::authority::{TerminalSigner, TrustedKeys};
    use helix_core::executor::local::LocalExecutor;
    let bearer = "solver-event-bearer-0001";
    let signer = TerminalSigner::from_seed("helix-ask", "ask-events-1", [6; 32]);
    let service = std::sync::Arc::new(helix_solver::TurnService::new(
        LocalExecutor::bundled(signer),
        Some(&helix_core::config::Secret::new(bearer)),
    ));
    let solver = || helix_solver::router(service.clone());
    let (status, _, keys) = invoke_fn(solver(), "solver-keys.json", None, &[]).await;
    assert_eq!(status, 200, "{keys}");
    assert_eq!(keys[0]["key_id"], "ask-events-1");
    let (status, headers, _) = invoke_fn(solver(), "solver-turn.json", Some("another-bearer-0000"), &[]).await;
    assert_eq!((status, &headers["www-authenticate"]), (401, &http::HeaderValue::from_static("Bearer")));
    let (status, _, answer) = invoke_fn(solver(), "solver-turn.json", Some(bearer), &[]).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["schema"], "helix.turn_artifact.v1");
    let artifact = &answer["artifact"];
    assert_eq!(artifact["solver_status"], "succeeded", "{answer}");
    let refs: Vec<String> =
        artifact["evidence"].as_array().unwrap().iter().map(|e| e["ref"].as_str().unwrap().to_owned()).collect();
    let candidate = serde_json::from_value(artifact["terminal_candidate"].clone()).unwrap();
    let trusted = TrustedKeys::from_json(&keys.to_string()).unwrap();
    assert_eq!(trusted.verify(&candidate, "run_exampleid0001", 1, "claim-example-0001", &refs), Ok(()));
}

/// The remaining time the Lambda adapter hands a handler for `events/continue.json`, with
/// the event's `requestContext.domainName` set to `domain`.
async fn invocation_limit(domain: &str) -> Option<std::time::Duration> {
    use tower::ServiceExt;
    let mut event: Value =
        serde_json::from_str(&event_text("continue.json", &[(EXAMPLE_RUN, "run_0123456789")])).unwrap();
    event["requestContext"]["domainName"] = Value::from(domain);
    event["headers"]["host"] = Value::from(domain);
    let req = lambda_http::request::from_str(&event.to_string()).unwrap();
    let (parts, body) = req.into_parts();
    let req = http::Request::from_parts(parts, axum::body::Body::from(body.to_vec()));
    let echo = axum::Router::new().route(
        "/api/v1/agent-runs/{run_id}/continue",
        axum::routing::post(|inv: Option<axum::Extension<helix_core::http::Invocation>>| async move {
            format!("{:?}", inv.and_then(|i| i.0.remaining.map(|d| d.as_millis())))
        }),
    );
    let res = helix_core::lambda::adapt(echo).oneshot(req).await.unwrap();
    let bytes = http_body_util::BodyExt::collect(res.into_body()).await.unwrap().to_bytes();
    match std::str::from_utf8(&bytes).unwrap() {
        "None" => None,
        some => Some(std::time::Duration::from_millis(
            some.trim_start_matches("Some(").trim_end_matches(')').parse().unwrap(),
        )),
    }
}

/// A function fronted both by the HTTP API and by its function URL: a turn that came
/// through the gateway is held to the gateway's fixed 30 s whatever the function's
/// HELIX_GATEWAY_TIMEOUT_MS; one that came through the function URL only to the function's
/// own time (the Lambda deadline) and HELIX_GATEWAY_TIMEOUT_MS.
#[tokio::test]
async fn a_turn_through_the_gateway_keeps_the_gateway_limit_and_one_through_a_function_url_does_not() {
    assert_eq!(invocation_limit("api.example.com").await, Some(helix_core::lambda::HTTP_API_LIMIT));
    assert_eq!(
        invocation_limit("a1b2c3d4e5.execute-api.us-east-1.amazonaws.com").await,
        Some(std::time::Duration::from_secs(30))
    );
    assert_eq!(invocation_limit("abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws").await, None);
    // Not a function URL host, only a look-alike: still the gateway's limit.
    assert_eq!(
        invocation_limit("lambda-url.example.on.aws.example.com").await,
        Some(std::time::Duration::from_secs(30))
    );
}

/// `file` as its Lambda function URL would deliver it: `requestContext.domainName` and the
/// Host header set to `host`.
fn through_function_url(file: &str, host: &str) -> String {
    let mut event: Value = serde_json::from_str(&event_text(file, &[])).unwrap();
    event["requestContext"]["domainName"] = Value::from(host);
    event["requestContext"]["domainPrefix"] = Value::from(host.split('.').next().unwrap());
    event["headers"]["host"] = Value::from(host);
    event.to_string()
}

/// The MCP function deployed with its function URL as its own public origin (the
/// template's McpFunctionUrlOrigin): an OAuth client given the function URL is challenged
/// with metadata on that origin, and the function itself serves that metadata, whose
/// `resource` is the URL the client connected to (RFC 9728), all under TRUST_PROXY=apigateway.
#[tokio::test]
async fn the_mcp_function_url_serves_its_own_challenge_and_metadata() {
    const FN_HOST: &str = "abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws";
    let origin = format!("https://{FN_HOST}");
    let resource = format!("{origin}/mcp");
    let hosts = format!("api.example.com,{FN_HOST}");
    let mut vars = PRODUCTION.to_vec();
    vars.extend([
        ("TRUST_PROXY", "apigateway"),
        ("CASIMIR_PUBLIC_BASE_URL", origin.as_str()),
        ("HELIX_AGENT_OAUTH_AUDIENCE", resource.as_str()),
        ("HELIX_AGENT_ALLOWED_HOSTS", hosts.as_str()),
    ]);
    let app = TestApp::spawn_with(Backend::Embedded, &vars).await;
    let mcp = || helix_mcp::router(app.state.clone());

    let raw = through_function_url("mcp-tools-list.json", FN_HOST);
    let (status, headers, _) = through_adapter(mcp(), "mcp-tools-list.json", &raw, None).await;
    assert_eq!(status, 401);
    let challenge = headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains(&format!("resource_metadata=\"{origin}/.well-known/oauth-protected-resource/mcp\"")),
        "{challenge}"
    );

    for path in ["/mcp", "/mcp/device-check"] {
        let well_known = format!("/.well-known/oauth-protected-resource{path}");
        let raw = through_function_url("discovery.json", FN_HOST)
            .replace("/.well-known/oauth-protected-resource/mcp", &well_known);
        let (status, _, bytes) = through_adapter(mcp(), "discovery.json", &raw, None).await;
        assert_eq!(status, 200, "{well_known} is served by the MCP function");
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body["resource"], resource.as_str(), "{well_known}");
    }
    // A look-alike host is still refused: only the named function URL host is admitted.
    let raw = through_function_url("discovery.json", "zzzz.lambda-url.us-east-1.on.aws");
    let (status, _, bytes) = through_adapter(mcp(), "discovery.json", &raw, None).await;
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&bytes));
}

/// A Lambda invocation may be frozen once it has answered, so no turn is left running in
/// it: `Prefer: respond-async` is ignored there (RFC 7240 lets a server ignore a
/// preference) and the turn is served synchronously, within the invocation.
#[tokio::test]
async fn a_lambda_invocation_serves_respond_async_synchronously() {
    let app = TestApp::spawn_with(Backend::Embedded, &[("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com")]).await;
    let token = app.token().await;
    let (_, run) = invoke(&app, "start.json", &token, None).await;
    let id = run["run_id"].as_str().unwrap().to_owned();
    app.script(completing_step(2));
    let mut event: Value = serde_json::from_str(&event_text("continue.json", &[(EXAMPLE_RUN, id.as_str())])).unwrap();
    event["headers"]["prefer"] = Value::from("respond-async");
    let (status, headers, bytes) =
        through_adapter(compose(app.state.clone()), "continue.json", &event.to_string(), Some(&token)).await;
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    assert_eq!(status, 200, "{body}");
    assert!(headers.get("preference-applied").is_none());
    assert_eq!(body["completion_status"], "completed");
}
