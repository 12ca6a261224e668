//! `POST /mcp` (and the same front at `/mcp/device-check`) through the router with
//! `tower::ServiceExt::oneshot` (no socket): transport decisions, the envelope preflight,
//! authentication, and the tools over real services.

use std::sync::Arc;

use axum::body::Body;
use helix_core::config::{Config, DefaultMode};
use helix_core::domain::authority::TerminalSigner;
use helix_core::executor::scripted::{ScriptedExecutor, Step};
use helix_core::http::AppState;
use helix_core::mcp::validate::validate;
use helix_core::service::accounts::LinkIdentity;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

const SECRET: &str = "mcp-test-secret-0123456789abcdef-0123";
const FULL: &[&str] = &["helix.agent_runs.read", "helix.agent_runs.write", "helix.data.research_library.read"];
const READ_ONLY: &[&str] = &["helix.agent_runs.read", "helix.data.research_library.read"];

struct App {
    state: AppState,
    /// One router per app, as a server has: its `tools/list` cache lives across requests.
    router: axum::Router,
    _dir: tempfile::TempDir,
}

struct Reply {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Value,
}

impl App {
    fn new() -> Self {
        Self::scripted().0
    }

    /// An app whose turns are scripted, with the script's terminal signer trusted.
    fn scripted() -> (Self, Arc<ScriptedExecutor>) {
        let vars = [
            ("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"),
            ("HELIX_AGENT_LOCAL_JWT_SECRET", SECRET),
            ("HELIX_AGENT_DATABASE_SCOPES", "research_library"),
        ];
        let mut config = Config::from_lookup(DefaultMode::Development, &|k| {
            vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        })
        .expect("test config");
        let signer = TerminalSigner::from_seed("helix-ask-test", "k1", [42; 32]);
        config.trusted_terminal_keys.insert("helix-ask-test", "k1", signer.verifying_key());
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(helix_core::store::embedded::EmbeddedStore::open(&dir.path().join("helix.redb")).unwrap());
        let executor = Arc::new(ScriptedExecutor::new(vec![], Some(signer)));
        let state = helix_core::wiring::app_state(config, store, executor.clone());
        let router = helix_core::mcp::router(state.clone()).merge(helix_core::mcp::device_check_router(state.clone()));
        (App { router, state, _dir: dir }, executor)
    }

    async fn token(&self, subject: &str, scopes: &[&str]) -> String {
        let o = &self.state.services.config.oauth;
        let id = LinkIdentity { issuer: &o.issuer, tenant: "tenant-a", provider: &o.provider, subject };
        self.state.services.accounts.link_account(&id).await.unwrap();
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        let secret = o.local_hs256_secret.as_ref().unwrap();
        helix_core::auth::jwt::mint_local_hs256(secret, &o.issuer, &o.audience, subject, "tenant-a", &scopes, 600)
    }

    async fn send(&self, req: Request<Body>) -> Reply {
        let res = self.router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        Reply { status, headers, body }
    }

    async fn post_raw(&self, token: Option<&str>, body: String, extra: &[(&str, &str)]) -> Reply {
        self.post_to("/mcp", token, body, extra).await
    }

    async fn post_to(&self, path: &str, token: Option<&str>, body: String, extra: &[(&str, &str)]) -> Reply {
        let mut req = Request::post(path).header("host", "127.0.0.1:9000").header("content-type", "application/json");
        if !extra.iter().any(|(k, _)| *k == "accept") {
            req = req.header("accept", "application/json, text/event-stream");
        }
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        self.send(req.body(Body::from(body)).unwrap()).await
    }

    async fn post(&self, token: Option<&str>, msg: Value) -> Reply {
        self.post_raw(token, msg.to_string(), &[("mcp-protocol-version", "2025-11-25")]).await
    }

    async fn call(&self, token: &str, name: &str, arguments: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
        let reply = self.post(Some(token), msg).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        reply.body["result"].clone()
    }

    async fn tools(&self, token: &str) -> Vec<Value> {
        let reply = self.post(Some(token), json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        reply.body["result"]["tools"].as_array().unwrap().clone()
    }
}

fn start_args(key: &str) -> Value {
    json!({"idempotency_key": key, "request": {"objective": "Measure the Casimir force.", "database_scope": ["research_library"]}})
}

fn output_schema<'a>(tools: &'a [Value], name: &str) -> &'a Value {
    &tools.iter().find(|t| t["name"] == name).unwrap()["outputSchema"]
}

/// A successful result: text JSON equal to structuredContent, valid against outputSchema.
fn assert_success(result: &Value, schema: &Value) -> Value {
    assert_ne!(result["isError"], true, "{result}");
    let sc = result["structuredContent"].clone();
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, sc);
    assert!(validate(schema, &sc), "structuredContent does not validate: {sc}");
    sc
}

fn assert_error(result: &Value, schema: &Value, code: &str) -> Value {
    assert_eq!(result["isError"], true, "{result}");
    let sc = &result["structuredContent"];
    assert_eq!(sc["schema"], "helix.agent_api.error.v1");
    assert_eq!(sc["error"]["code"], code, "{sc}");
    assert!(validate(schema, sc), "error envelope does not validate against the outputSchema: {sc}");
    sc["error"].clone()
}

#[tokio::test]
async fn get_and_delete_are_405_with_allow_post() {
    let app = App::new();
    for method in [Method::GET, Method::DELETE, Method::PUT, Method::OPTIONS] {
        let req = Request::builder().method(method.clone()).uri("/mcp").header("host", "127.0.0.1");
        let reply = app.send(req.body(Body::empty()).unwrap()).await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert_eq!(reply.headers["allow"], "POST");
        assert_eq!(reply.body["error"]["code"], "method_not_allowed");
        assert_eq!(reply.headers["cache-control"], "no-store");
        assert!(reply.headers.contains_key("x-request-id"));
    }
}

#[tokio::test]
async fn a_notification_is_accepted_with_202() {
    let app = App::new();
    let token = app.token("alice", FULL).await;
    let reply = app.post(Some(&token), json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    assert!(!reply.headers.contains_key("mcp-session-id"));
}

#[tokio::test]
async fn no_bearer_is_401_with_the_mcp_resource_metadata_challenge() {
    let app = App::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let reply = app.post(None, init).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        reply.headers["www-authenticate"],
        "Bearer resource_metadata=\"http://127.0.0.1:9000/.well-known/oauth-protected-resource/mcp\""
    );
    assert_eq!(reply.body["error"]["code"], "authentication_required");

    let reply = app.post(Some("not-a-jwt"), json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert!(reply.headers["www-authenticate"].to_str().unwrap().contains("error=\"invalid_token\""));
}

#[tokio::test]
async fn preflight_refuses_bad_envelopes_with_a_static_error_and_null_id() {
    let app = App::new();
    let token = app.token("alice", FULL).await;
    let jwt_id = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzZWNyZXQifQ.c2lnbmF0dXJlLXZhbHVl";
    let cases = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "owner": "me"}),
        json!({"jsonrpc": "2.0", "id": jwt_id, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "helix_shell_exec", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "helix_run_inspect",
            "arguments": {"run_id": "run_0123456789", "token_id": "sk-live-0123456789abcdef"}}}),
        json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]),
    ];
    for msg in cases {
        for token in [Some(token.as_str()), None] {
            let reply = app.post(token, msg.clone()).await;
            assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{msg}");
            assert_eq!(reply.body["jsonrpc"], "2.0");
            assert_eq!(reply.body["id"], Value::Null);
            assert_eq!(reply.body["error"]["code"], -32600);
            let text = reply.body.to_string();
            for echoed in ["owner", jwt_id, "helix_shell_exec", "token_id", "sk-live"] {
                assert!(!text.contains(echoed), "{text} echoes {echoed}");
            }
        }
    }
    let reply = app.post_raw(Some(&token), "{not json".into(), &[]).await;
    assert_eq!((reply.status, reply.body["error"]["code"].clone()), (StatusCode::BAD_REQUEST, json!(-32700)));
}

/// Arguments off the input schema are `-32602 Invalid params` naming the path and the rule
/// (so a client, or a model, can correct the call), before authentication, with `id: null`
/// and nothing of the call repeated: not a value, not an unknown key.
#[tokio::test]
async fn argument_errors_name_the_path_and_rule_with_invalid_params() {
    let app = App::new();
    let token = app.token("alice", FULL).await;
    let call = |name: &str, arguments: Value| json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let start =
        |request: Value| call("helix_run_start", json!({"idempotency_key": "mcp-args-0001", "request": request}));
    let cases = [
        (call("helix_room_inspect", json!({"note": 1})), "arguments: unknown field (allowed: room_id)", "note"),
        (
            start(json!({"objective": "x", "budget": {"max_steps": "lots_of_steps"}})),
            "request.budget.max_steps: must be an integer or null",
            "lots_of_steps",
        ),
        (
            start(json!({"objective": "x", "tenant_override": "t-9"})),
            "request: unknown field (allowed: budget, completion_contract, constraints, database_scope, objective)",
            "tenant_override",
        ),
        (call("helix_room_bind_run", json!({"request": {"room_id": "room_1"}})), "request.run_id: missing", "room_1"),
    ];
    for (msg, want, caller) in cases {
        for token in [Some(token.as_str()), None] {
            let reply = app.post(token, msg.clone()).await;
            assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{msg}");
            assert_eq!(reply.body["id"], Value::Null);
            assert_eq!(reply.body["error"]["code"], -32602);
            assert_eq!(reply.body["error"]["message"], format!("Invalid params: {want}"));
            assert!(!reply.body.to_string().contains(caller), "{} repeats {caller}", reply.body);
        }
    }
}

#[tokio::test]
async fn initialize_negotiates_and_tools_list_publishes_the_full_catalog() {
    let app = App::new();
    let token = app.token("alice", READ_ONLY).await;
    for (asked, answered) in [("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25"), ("2024-11-05", "2025-11-25")]
    {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
        let reply = app.post_raw(Some(&token), init.to_string(), &[]).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert!(reply.headers["content-type"].to_str().unwrap().starts_with("application/json"));
        assert!(!reply.headers.contains_key("mcp-session-id"), "stateless: no session id");
        assert_eq!(reply.body["id"], 1);
        assert_eq!(reply.body["result"]["protocolVersion"], answered, "asked {asked}");
        assert!(reply.body["result"]["capabilities"]["tools"].is_object());
    }

    let tools = app.tools(&token).await;
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let catalog: Vec<&str> = helix_core::mcp::catalog::CATALOG.iter().map(|t| t.name).collect();
    assert_eq!(names, catalog, "the full catalog, whatever the token's scopes");
    // Run tools here; the room tools' scopes are checked in tests/api/rooms_mcp.rs.
    for t in tools.iter().filter(|t| t["name"].as_str().unwrap().starts_with("helix_run_")) {
        let scope =
            if t["annotations"]["readOnlyHint"] == true { "helix.agent_runs.read" } else { "helix.agent_runs.write" };
        let schemes = json!([{"type": "oauth2", "scopes": [scope]}]);
        assert_eq!(t["securitySchemes"], schemes, "{}", t["name"]);
        assert_eq!(t["_meta"]["securitySchemes"], schemes, "{}", t["name"]);
        assert_eq!(t["inputSchema"]["type"], "object");
        assert_eq!(t["inputSchema"]["additionalProperties"], false);
        assert_eq!(t["outputSchema"]["type"], "object");
    }
    assert_eq!(app.tools(&token).await, tools, "stable across requests");
}

#[tokio::test]
async fn server_discover_serves_the_2026_07_28_stateless_revision() {
    let app = App::new();
    let token = app.token("alice", FULL).await;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}});
    let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "server/discover")];
    let reply = app.post_raw(Some(&token), msg.to_string(), &headers).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let versions = &reply.body["result"]["supportedVersions"];
    for v in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        assert!(versions.as_array().unwrap().contains(&json!(v)), "{versions}");
    }

    let msg = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}});
    let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")];
    let reply = app.post_raw(Some(&token), msg.to_string(), &headers).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["result"]["tools"].as_array().unwrap().len(), helix_core::mcp::catalog::CATALOG.len());
    assert_eq!(reply.body["result"]["tools"][0]["securitySchemes"][0]["type"], "oauth2");
}

#[tokio::test]
async fn tool_calls_frame_the_run_services() {
    let app = App::new();
    let token = app.token("alice", FULL).await;
    let tools = app.tools(&token).await;

    let first = app.call(&token, "helix_run_start", start_args("mcp-start-0001")).await;
    let run = assert_success(&first, output_schema(&tools, "helix_run_start"));
    assert_eq!((run["schema"].clone(), run["version"].clone()), (json!("helix.agent_run.v1"), json!(1)));
    assert_eq!(first["_meta"]["helix/idempotency_replayed"], false);

    let again = app.call(&token, "helix_run_start", start_args("mcp-start-0001")).await;
    assert_eq!(assert_success(&again, output_schema(&tools, "helix_run_start"))["run_id"], run["run_id"]);
    assert_eq!(again["_meta"]["helix/idempotency_replayed"], true);

    let run_id = run["run_id"].as_str().unwrap();
    let inspected = app.call(&token, "helix_run_inspect", json!({"run_id": run_id})).await;
    assert_eq!(assert_success(&inspected, output_schema(&tools, "helix_run_inspect")), run);
    let bundle = app.call(&token, "helix_run_fetch_evidence", json!({"run_id": run_id})).await;
    assert_success(&bundle, output_schema(&tools, "helix_run_fetch_evidence"));
    let page = app.call(&token, "helix_run_list_events", json!({"run_id": run_id})).await;
    let page = assert_success(&page, output_schema(&tools, "helix_run_list_events"));
    assert_eq!(page["events"][0]["kind"], "run_started");

    let cancel = json!({"run_id": run_id, "idempotency_key": "mcp-cancel-01", "request": {"expected_version": 1}});
    let cancelled = app.call(&token, "helix_run_cancel", cancel).await;
    assert_eq!(assert_success(&cancelled, output_schema(&tools, "helix_run_cancel"))["lifecycle_status"], "cancelled");

    let stale = json!({"run_id": run_id, "idempotency_key": "mcp-cont-0001", "request": {"expected_version": 2, "instruction": "go"}});
    let refused = app.call(&token, "helix_run_continue", stale).await;
    assert_error(&refused, output_schema(&tools, "helix_run_continue"), "run_not_continuable");

    let conflict = app
        .call(
            &token,
            "helix_run_start",
            json!({"idempotency_key": "mcp-start-0001",
        "request": {"objective": "Something else entirely."}}),
        )
        .await;
    assert_error(&conflict, output_schema(&tools, "helix_run_start"), "idempotency_conflict");
    let bad_key = app.call(&token, "helix_run_start", start_args("short")).await;
    assert_error(&bad_key, output_schema(&tools, "helix_run_start"), "invalid_idempotency_key");
    let other = app.call(&token, "helix_run_inspect", json!({"run_id": "run_00000000000000000000"})).await;
    assert_error(&other, output_schema(&tools, "helix_run_inspect"), "not_found");
    let range = app.call(&token, "helix_run_list_events", json!({"run_id": run_id, "limit": 500})).await;
    assert_error(&range, output_schema(&tools, "helix_run_list_events"), "invalid_request");
}

#[tokio::test]
async fn a_call_without_the_tool_scope_is_an_error_result_with_the_challenge() {
    let app = App::new();
    let token = app.token("bob", READ_ONLY).await;
    let tools = app.tools(&token).await;
    let result = app.call(&token, "helix_run_start", start_args("mcp-scope-0001")).await;
    let error = assert_error(&result, output_schema(&tools, "helix_run_start"), "insufficient_scope");
    assert_eq!(error["details"]["required_scopes"], json!(["helix.agent_runs.write"]));
    let challenge = result["_meta"]["mcp/www_authenticate"][0].as_str().unwrap();
    assert!(result["structuredContent"]["request_id"].as_str().unwrap().starts_with("req_"));
    assert_eq!(
        challenge,
        "Bearer resource_metadata=\"http://127.0.0.1:9000/.well-known/oauth-protected-resource/mcp\", \
         error=\"insufficient_scope\", scope=\"helix.agent_runs.write\""
    );
}

#[tokio::test]
async fn the_sdk_answers_json_to_clients_that_only_accept_json() {
    let app = App::new();
    let token = app.token("alice", FULL).await;
    let reply = app
        .post_raw(
            Some(&token),
            json!({"jsonrpc": "2.0", "id": "a-1", "method": "tools/list"}).to_string(),
            &[("accept", "application/json")],
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["id"], "a-1");
}

#[tokio::test]
async fn a_tool_error_carries_the_request_id_of_the_http_response() {
    let app = App::new();
    let token = app.token("alice", FULL).await;
    let msg = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "helix_run_inspect", "arguments": {"run_id": "run_missing-0001"}}});
    let reply = app.post_raw(Some(&token), msg.to_string(), &[("x-request-id", "client-trace-42")]).await;
    assert_eq!(reply.headers["x-request-id"], "client-trace-42");
    assert_eq!(reply.body["result"]["structuredContent"]["request_id"], "client-trace-42");
    assert_eq!(reply.body["result"]["structuredContent"]["error"]["code"], "not_found");
}

/// Item 6 of issue 7: a warm `tools/list` cache answers exactly what the SDK answers
/// cold, for requests the SDK refuses as well as for ones it serves.
#[tokio::test]
async fn the_cached_tools_list_sits_behind_the_sdk_request_checks() {
    let plain = |id: Value| json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}).to_string();
    let huge = r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/list"}"#.to_owned();
    let v = ("mcp-protocol-version", "2025-11-25");
    type Headers<'a> = Vec<(&'a str, &'a str)>;
    let variants: Vec<(&str, String, Headers)> = vec![
        ("accept without application/json", plain(json!(4)), vec![v, ("accept", "text/plain")]),
        ("accept of event streams only", plain(json!(4)), vec![v, ("accept", "text/event-stream")]),
        ("an id above i64::MAX", huge.clone(), vec![v]),
        ("an unknown protocol version", plain(json!(4)), vec![("mcp-protocol-version", "1999-01-01")]),
        ("an Mcp-Method header naming another method", plain(json!(4)), vec![v, ("mcp-method", "tools/call")]),
        ("an accepted string id", plain(json!("list-7")), vec![v]),
        ("an accepted negative id", plain(json!(-3)), vec![v]),
    ];
    for (what, body, headers) in variants {
        // Cold: a fresh server, the SDK decides.
        let app = App::new();
        let token = app.token("alice", READ_ONLY).await;
        let cold = app.post_raw(Some(&token), body.clone(), &headers).await;
        // Warm: an accepted plain tools/list (same headers otherwise) fills the cache first.
        let warm_app = App::new();
        let warm_token = warm_app.token("alice", READ_ONLY).await;
        for _ in 0..2 {
            let prime = warm_app.post_raw(Some(&warm_token), plain(json!(1)), &[v]).await;
            assert_eq!(prime.status, StatusCode::OK);
        }
        let warm = warm_app.post_raw(Some(&warm_token), body.clone(), &headers).await;
        let again = warm_app.post_raw(Some(&warm_token), body.clone(), &headers).await;
        assert_eq!(cold.status, warm.status, "{what}: the warm answer differs from the cold one");
        assert_eq!(cold.body, warm.body, "{what}");
        assert_eq!((warm.status, &warm.body), (again.status, &again.body), "{what}: repeated");
        // Cold then warm on one server too.
        let twice = app.post_raw(Some(&token), body.clone(), &headers).await;
        assert_eq!((cold.status, &cold.body), (twice.status, &twice.body), "{what}: cold then warm");
    }
}

/// Item 15 of issue 7: a credential-shaped argument value is refused like a
/// credential-shaped id or tool name: static error, `id: null`, nothing echoed.
#[tokio::test]
async fn a_credential_shaped_argument_value_is_refused_by_the_preflight() {
    let app = App::new();
    let token = app.token("alice", FULL).await;
    let secret = "sk-live-0123456789abcdefghij";
    let msg = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "helix_run_start",
        "arguments": {"idempotency_key": "mcp-cred-0001", "request": {"objective": format!("Use the key {secret}")}}}});
    for token in [Some(token.as_str()), None] {
        let reply = app.post(token, msg.clone()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        assert_eq!(reply.body["id"], Value::Null);
        assert_eq!(reply.body["error"]["code"], -32600);
        assert!(!reply.body.to_string().contains(secret));
    }
    // The same call without the key is admitted (and starts a run).
    let plain = app.call(&token, "helix_run_start", start_args("mcp-cred-0002")).await;
    assert_ne!(plain["isError"], true, "{plain}");
}

/// A solver artifact with one research_library evidence item, plus `extra` fields.
fn artifact(extra: Value) -> helix_core::domain::turn::TurnArtifact {
    let mut a = json!({
        "solver_status": "succeeded",
        "summary": "found a passage",
        "satisfied_evidence_families": ["research_library_evidence"],
        "evidence": [{"ref": "evidence:t:0", "family": "research_library_evidence",
            "source": "research-library://doc0.md#p0", "content_sha256": "00".repeat(32), "excerpt": "passage"}],
    });
    for (k, v) in extra.as_object().unwrap() {
        a[k] = v.clone();
    }
    serde_json::from_value(a).unwrap()
}

/// Checks MCP results against the outputSchema each tool publishes, with a real JSON
/// Schema validator (the `jsonschema` crate), and records what was covered.
struct Published {
    validators: std::collections::HashMap<String, jsonschema::Validator>,
    seen: std::collections::BTreeSet<String>,
}

impl Published {
    fn new(tools: &[Value]) -> Self {
        let validators = tools
            .iter()
            .map(|t| {
                let name = t["name"].as_str().unwrap().to_owned();
                (name, jsonschema::validator_for(&t["outputSchema"]).expect("a valid JSON Schema"))
            })
            .collect();
        Published { validators, seen: Default::default() }
    }

    /// The structuredContent of `result`, checked: valid against the tool's schema, equal
    /// to the text block, and carrying the four false flags (on every event too).
    fn check(&mut self, tool: &str, result: &Value) -> Value {
        let sc = result["structuredContent"].clone();
        let errors: Vec<String> = self.validators[tool].iter_errors(&sc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{tool} result violates its published outputSchema: {errors:?}\n{sc}");
        let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, sc, "{tool}: text block and structuredContent differ");
        let mut objects = vec![&sc];
        objects.extend(sc["events"].as_array().into_iter().flatten());
        for o in objects {
            for flag in ["answer_authority", "assistant_answer", "terminal_eligible", "raw_content_included"] {
                assert_eq!(o[flag], false, "{tool}: {flag} in {o}");
            }
        }
        let state = if result["isError"] == true {
            format!("error:{}", sc["error"]["code"].as_str().unwrap())
        } else if let Some(action) = sc["recommended_next_action"].as_str() {
            format!("{}/{}", sc["completion_status"].as_str().unwrap(), action)
        } else {
            "ok".into()
        };
        self.seen.insert(format!("{tool} {state}"));
        sc
    }

    /// Inspect, evidence and events of a run, each checked.
    async fn reads(&mut self, app: &App, token: &str, run_id: &str) -> Value {
        let run = app.call(token, "helix_run_inspect", json!({"run_id": run_id})).await;
        let run = self.check("helix_run_inspect", &run);
        let bundle = app.call(token, "helix_run_fetch_evidence", json!({"run_id": run_id})).await;
        self.check("helix_run_fetch_evidence", &bundle);
        let page = app.call(token, "helix_run_list_events", json!({"run_id": run_id, "limit": 200})).await;
        self.check("helix_run_list_events", &page);
        run
    }
}

/// Items 9 and 10 of issue 7: in every run state (a live turn included) and for error
/// results, each tool's structuredContent validates against the outputSchema it
/// publishes and carries the four false flags.
#[tokio::test]
async fn every_tool_result_in_every_run_state_matches_its_published_output_schema() {
    let (app, script) = App::scripted();
    let app = Arc::new(app);
    let token = app.token("alice", FULL).await;
    let tools = app.tools(&token).await;
    let mut p = Published::new(&tools);
    let start = |key: &str, request: Value| json!({"idempotency_key": key, "request": request});
    let research = |extra: Value| {
        let mut r = json!({"objective": "Measure the Casimir force.", "database_scope": ["research_library"]});
        for (k, v) in extra.as_object().unwrap() {
            r[k] = v.clone();
        }
        r
    };
    let cont = |run: &Value, key: &str, request: Value| {
        let mut request = request;
        request["expected_version"] = run["version"].clone();
        json!({"run_id": run["run_id"], "idempotency_key": key, "request": request})
    };

    // waiting / needs_more_evidence, then needs_input.
    let run = app.call(&token, "helix_run_start", start("st-start-0001", research(json!({})))).await;
    let run = p.check("helix_run_start", &run);
    let id = run["run_id"].as_str().unwrap().to_owned();
    assert_eq!(p.reads(&app, &token, &id).await["lifecycle_status"], "waiting");
    script
        .push(Step::Artifact(artifact(json!({"pending_questions": [{"question_id": "q1", "prompt": "Which year?"}]}))));
    let asked = app.call(&token, "helix_run_continue", cont(&run, "st-cont-0001", json!({"instruction": "go"}))).await;
    let asked = p.check("helix_run_continue", &asked);
    assert_eq!(asked["completion_status"], "needs_input");
    p.reads(&app, &token, &id).await;

    // During a live turn: running / pending / wait.
    script.push(Step::Delay(
        std::time::Duration::from_millis(600),
        Box::new(Step::Artifact(artifact(
            json!({"contradictions": [{"id": "c1", "claim": "x", "evidence_refs": []}]}),
        ))),
    ));
    let answer = cont(&asked, "st-cont-0002", json!({"answers": [{"question_id": "q1", "value": 1997}]}));
    let turn = tokio::spawn({
        let (app, token) = (app.clone(), token.clone());
        async move { app.call(&token, "helix_run_continue", answer).await }
    });
    let mut live = None;
    for _ in 0..100 {
        let run = app.call(&token, "helix_run_inspect", json!({"run_id": id})).await;
        if run["structuredContent"]["recommended_next_action"] == "wait" {
            live = Some(run);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let live = p.check("helix_run_inspect", &live.expect("an inspect during the turn"));
    assert_eq!(
        (live["lifecycle_status"].as_str(), live["completion_status"].as_str()),
        (Some("running"), Some("pending"))
    );
    p.reads(&app, &token, &id).await;
    let conflicted = p.check("helix_run_continue", &turn.await.unwrap());
    assert_eq!(conflicted["completion_status"], "conflict_detected");
    p.reads(&app, &token, &id).await;

    // blocked (a failed turn), then completed with verified terminal authority.
    script.push(Step::Fail(helix_core::domain::turn::TurnFailure::ExecutorUnavailable));
    let blocked = app
        .call(&token, "helix_run_continue", cont(&conflicted, "st-cont-0003", json!({"instruction": "again"})))
        .await;
    let blocked = p.check("helix_run_continue", &blocked);
    assert_eq!(blocked["completion_status"], "blocked");
    p.reads(&app, &token, &id).await;

    let run = app.call(&token, "helix_run_start", start("st-start-0002", research(json!({})))).await;
    let run = p.check("helix_run_start", &run);
    script.push(Step::Signed {
        artifact: artifact(json!({})),
        text: "About 0.3 nN at 1 micrometre.".into(),
        refs: vec!["evidence:t:0".into()],
    });
    let done = app.call(&token, "helix_run_continue", cont(&run, "st-cont-0004", json!({"instruction": "go"}))).await;
    let done = p.check("helix_run_continue", &done);
    assert_eq!(
        (done["completion_status"].as_str(), done["terminal_authority_status"].as_str()),
        (Some("completed"), Some("authorized"))
    );
    p.reads(&app, &token, done["run_id"].as_str().unwrap()).await;

    // failed (the solver failed), budget_exhausted, cancelled.
    let run = app.call(&token, "helix_run_start", start("st-start-0003", research(json!({})))).await;
    let run = p.check("helix_run_start", &run);
    script.push(Step::Artifact(artifact(json!({"solver_status": "failed"}))));
    let failed = app.call(&token, "helix_run_continue", cont(&run, "st-cont-0005", json!({"instruction": "go"}))).await;
    assert_eq!(p.check("helix_run_continue", &failed)["completion_status"], "failed");
    p.reads(&app, &token, run["run_id"].as_str().unwrap()).await;

    let run = app
        .call(&token, "helix_run_start", start("st-start-0004", research(json!({"budget": {"max_steps": 1}}))))
        .await;
    let run = p.check("helix_run_start", &run);
    script.push(Step::Artifact(artifact(json!({"satisfied_evidence_families": []}))));
    let spent = app.call(&token, "helix_run_continue", cont(&run, "st-cont-0006", json!({"instruction": "go"}))).await;
    assert_eq!(p.check("helix_run_continue", &spent)["completion_status"], "budget_exhausted");
    p.reads(&app, &token, run["run_id"].as_str().unwrap()).await;

    let run = app.call(&token, "helix_run_start", start("st-start-0005", research(json!({})))).await;
    let run = p.check("helix_run_start", &run);
    let cancel =
        json!({"run_id": run["run_id"], "idempotency_key": "st-cancel-001", "request": {"expected_version": 1}});
    let cancelled = app.call(&token, "helix_run_cancel", cancel.clone()).await;
    assert_eq!(p.check("helix_run_cancel", &cancelled)["completion_status"], "cancelled");
    let replayed = app.call(&token, "helix_run_cancel", cancel).await;
    assert_eq!(replayed["_meta"]["helix/idempotency_replayed"], true);
    p.check("helix_run_cancel", &replayed);
    p.reads(&app, &token, run["run_id"].as_str().unwrap()).await;

    // Error results of every tool.
    let missing = json!({"run_id": "run_00000000000000000000"});
    for tool in ["helix_run_inspect", "helix_run_fetch_evidence", "helix_run_list_events"] {
        let r = app.call(&token, tool, missing.clone()).await;
        p.check(tool, &r);
    }
    let r = app.call(&token, "helix_run_list_events", json!({"run_id": id, "limit": 500})).await;
    p.check("helix_run_list_events", &r);
    let r = app.call(&token, "helix_run_continue", cont(&run, "st-cont-0007", json!({"instruction": "go"}))).await;
    p.check("helix_run_continue", &r);
    let r = app
        .call(
            &token,
            "helix_run_continue",
            cont(&json!({"run_id": id, "version": 1}), "st-cont-0008", json!({"instruction": "go"})),
        )
        .await;
    p.check("helix_run_continue", &r);
    let r = app
        .call(
            &token,
            "helix_run_cancel",
            json!({"run_id": run["run_id"], "idempotency_key": "st-cancel-002", "request": {"expected_version": 9}}),
        )
        .await;
    p.check("helix_run_cancel", &r);
    let r =
        app.call(&token, "helix_run_start", start("st-start-0001", research(json!({"constraints": ["other"]})))).await;
    p.check("helix_run_start", &r);
    let reader = app.token("bob", READ_ONLY).await;
    let r = app.call(&reader, "helix_run_start", start("st-start-0006", research(json!({})))).await;
    p.check("helix_run_start", &r);

    let seen: Vec<&str> = p.seen.iter().map(String::as_str).collect();
    for want in [
        "helix_run_start needs_more_evidence/continue",
        "helix_run_inspect needs_more_evidence/continue",
        "helix_run_continue needs_input/answer_questions",
        "helix_run_inspect pending/wait",
        "helix_run_continue conflict_detected/continue",
        "helix_run_continue blocked/continue",
        "helix_run_continue completed/stop",
        "helix_run_continue failed/stop",
        "helix_run_continue budget_exhausted/stop",
        "helix_run_cancel cancelled/stop",
        "helix_run_list_events ok",
        "helix_run_fetch_evidence ok",
        "helix_run_inspect error:not_found",
        "helix_run_fetch_evidence error:not_found",
        "helix_run_list_events error:not_found",
        "helix_run_list_events error:invalid_request",
        "helix_run_continue error:run_not_continuable",
        "helix_run_continue error:version_conflict",
        "helix_run_cancel error:run_not_continuable",
        "helix_run_start error:idempotency_conflict",
        "helix_run_start error:insufficient_scope",
    ] {
        assert!(seen.iter().any(|s| s.starts_with(want)), "not covered: {want}; seen {seen:#?}");
    }
}

/// Both fronts of the one MCP front type.
const FRONTS: [&str; 2] = ["/mcp", "/mcp/device-check"];

/// A body that stops arriving (the server's body-read deadline passed) is `408` on both
/// fronts, as on every REST route; the Device Check server once answered it `413`.
#[tokio::test]
async fn a_stalled_body_is_a_request_timeout_on_both_fronts() {
    let app = App::new();
    for path in FRONTS {
        let chunks: Vec<Result<bytes::Bytes, helix_core::http::server::BodyTimedOut>> =
            vec![Ok(bytes::Bytes::from_static(br#"{"jsonrpc":"#)), Err(helix_core::http::server::BodyTimedOut)];
        let req = Request::post(path)
            .header("host", "127.0.0.1:9000")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Body::from_stream(futures::stream::iter(chunks)))
            .unwrap();
        let reply = app.send(req).await;
        assert_eq!(reply.status, StatusCode::REQUEST_TIMEOUT, "{path}: {}", reply.body);
        assert_eq!(reply.body["error"]["code"], "request_timeout", "{path}");
    }
}

/// `Accept` is read as a list of media ranges on both fronts: one that admits JSON is
/// served as the SDK wants it, anything else gets the SDK's own answer. (The Device Check
/// server once matched substrings: `application/jsonx` passed, `application/*` did not.)
#[tokio::test]
async fn both_fronts_read_accept_as_media_ranges() {
    let app = App::new();
    let token = app.token("alice", &["helix.rooms.read"]).await;
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).to_string();
    let v = ("mcp-protocol-version", "2025-11-25");
    for (accept, served) in [
        ("application/json", true),
        ("application/*", true),
        ("*/*", true),
        ("text/html, Application/JSON;q=0.5", true),
        ("text/event-stream", false),
        ("application/jsonx", false),
        ("text/plain", false),
        ("", false),
    ] {
        let headers = [v, ("accept", accept)];
        let mut replies = vec![];
        for path in FRONTS {
            replies.push(app.post_to(path, Some(&token), list.clone(), &headers).await);
        }
        for (path, reply) in FRONTS.iter().zip(&replies) {
            assert_eq!(reply.status == StatusCode::OK, served, "{path} with Accept {accept:?}: {}", reply.body);
        }
        assert_eq!(replies[0].status, replies[1].status, "Accept {accept:?}: the fronts disagree");
    }
}

/// The Device Check front has the same shape caches and direct path as `/mcp`: repeated
/// `tools/list` and `tools/call` requests answer what its SDK answered the first time.
#[tokio::test]
async fn the_device_check_front_answers_repeated_shapes_as_its_sdk_did() {
    let app = App::new();
    let token = app.token("alice", &["helix.rooms.read"]).await;
    let dc = "/mcp/device-check";
    let v = [("mcp-protocol-version", "2025-11-25")];
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let listed: Vec<Reply> =
        futures::future::join_all((0..3).map(|_| app.post_to(dc, Some(&token), list.clone(), &v))).await;
    let tools = listed[0].body["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let rows: Vec<&str> = helix_core::mcp::catalog::DEVICE_CHECK.rows.iter().map(|t| t.name).collect();
    assert_eq!(names, rows);
    assert_eq!(tools[0]["securitySchemes"], json!([{"type": "oauth2", "scopes": ["helix.rooms.read"]}]));
    assert_eq!(tools[0]["_meta"]["securitySchemes"], tools[0]["securitySchemes"]);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": rows[0], "arguments": {}}})
    .to_string();
    let mut called = vec![];
    for _ in 0..3 {
        called.push(app.post_to(dc, Some(&token), call.clone(), &v).await);
    }
    assert_eq!(called[0].body["result"]["structuredContent"]["schema"], "helix.environment_device_check.v1");
    for (i, reply) in listed.iter().enumerate().skip(1) {
        assert_eq!((reply.status, &reply.body), (listed[0].status, &listed[0].body), "tools/list #{i}");
    }
    // The report's clock reading is the one value that moves between calls.
    let timeless = |reply: &Reply| {
        let mut body = reply.body.clone();
        let text = body["result"]["content"][0]["text"].as_str().unwrap();
        let mut text: Value = serde_json::from_str(text).unwrap();
        assert_eq!(text, body["result"]["structuredContent"], "the text copy is the structured content");
        text.as_object_mut().unwrap().remove("checked_at");
        body["result"]["content"][0]["text"] = text;
        body["result"]["structuredContent"].as_object_mut().unwrap().remove("checked_at");
        (reply.status, body)
    };
    for (i, reply) in called.iter().enumerate().skip(1) {
        assert_eq!(timeless(reply), timeless(&called[0]), "tools/call #{i}");
    }
}
