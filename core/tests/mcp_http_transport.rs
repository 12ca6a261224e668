//! `POST /mcp` through the router with `tower::ServiceExt::oneshot` (no socket): transport
//! decisions, the envelope preflight, authentication, and the tools over real services.

use axum::body::Body;
use http::{Method, Request, StatusCode};
use serde_json::{Value, json};

mod support;

use support::mcp::{App, FULL, READ_ONLY, assert_error, assert_success, output_schema, start_args};

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

/// The preflight answers as the TypeScript SDK's stateless server does: a body that is not
/// one valid JSON-RPC message is `400`, `-32700`, `id: null`; a well-formed request for an
/// unknown method or tool is a JSON-RPC error with its own id; the contract's
/// credential-shaped refusals are `400`, `-32600`, `id: null`. Nothing of the call is echoed.
#[tokio::test]
async fn preflight_refuses_bad_envelopes_as_the_sdk_does_and_credentials_statically() {
    let app = App::new();
    let token = app.token("alice", FULL).await;
    let jwt_id = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzZWNyZXQifQ.c2lnbmF0dXJlLXZhbHVl";
    let cases = [
        (json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "owner": "me"}), 400, -32700, Value::Null),
        (json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]), 400, -32700, Value::Null),
        (json!({"jsonrpc": "2.0", "id": jwt_id, "method": "tools/list"}), 400, -32600, Value::Null),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "helix_run_inspect",
                "arguments": {"run_id": "run_0123456789", "token_id": "sk-live-0123456789abcdef"}}}),
            400,
            -32600,
            Value::Null,
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "helix_shell_exec", "arguments": {}}}),
            200,
            -32602,
            json!(1),
        ),
        (json!({"jsonrpc": "2.0", "id": "m-2", "method": "owner/exec"}), 200, -32601, json!("m-2")),
    ];
    for (msg, status, code, id) in cases {
        for token in [Some(token.as_str()), None] {
            let reply = app.post(token, msg.clone()).await;
            assert_eq!(reply.status.as_u16(), status, "{msg}");
            assert_eq!(reply.body["jsonrpc"], "2.0");
            assert_eq!((&reply.body["id"], &reply.body["error"]["code"]), (&id, &json!(code)), "{msg}");
            let text = reply.body.to_string();
            for echoed in ["owner", jwt_id, "helix_shell_exec", "token_id", "sk-live"] {
                assert!(!text.contains(echoed), "{text} echoes {echoed}");
            }
        }
    }
    let reply = app.post_raw(Some(&token), "{not json".into(), &[]).await;
    assert_eq!((reply.status, reply.body["error"]["code"].clone()), (StatusCode::BAD_REQUEST, json!(-32700)));
    // Without an id a message is a notification, whatever its method: accepted, unanswered.
    let reply = app.post(Some(&token), json!({"jsonrpc": "2.0", "method": "tools/call"})).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
}

/// Arguments off the input schema are a tool result (SEP-1303): `isError`, and the
/// `invalid_request` error naming the field and the rule (so a model can correct the
/// call), with the request's id; nothing of the call is repeated: not a value, not an
/// unknown key. An unauthenticated caller gets the `401`, as for any call.
#[tokio::test]
async fn argument_errors_are_tool_results_naming_the_field_and_rule() {
    let app = App::new();
    let token = app.token("alice", FULL).await;
    let tools = app.tools(&token).await;
    let call = |name: &str, arguments: Value| json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let start =
        |request: Value| call("helix_run_start", json!({"idempotency_key": "mcp-args-0001", "request": request}));
    let act = |action: Value| {
        call(
            "helix_minecraft_player_action",
            json!({"room_id": "room_1", "idempotency_key": "mcp-act-0001", "action": action}),
        )
    };
    let cases = [
        (call("helix_room_inspect", json!({"note": 1})), "arguments", "unknown field (allowed: room_id)", "note"),
        (
            start(json!({"objective": "x", "budget": {"max_steps": "lots_of_steps"}})),
            "request.budget.max_steps",
            "must be an integer or null",
            "lots_of_steps",
        ),
        (
            start(json!({"objective": "x", "tenant_override": "t-9"})),
            "request",
            "unknown field (allowed: budget, completion_contract, constraints, database_scope, objective)",
            "tenant_override",
        ),
        (call("helix_room_bind_run", json!({"request": {"room_id": "room_1"}})), "request.run_id", "missing", "room_1"),
        (
            act(json!({"type": "teleport_far", "x": 1, "y": 64, "z": 1})),
            "action.type",
            r#"must be one of "move_to", "look_at", "stop", "break_block", "place_block", "equip", "craft", "chat", "wait", "sequence""#,
            "teleport_far",
        ),
        (
            act(json!({"type": "move_to", "x": 1, "y": 64, "z": 1, "range": 97})),
            "action.range",
            "must be at most 3",
            "97",
        ),
        (act(json!({"type": "look_at", "x": 1, "y": 4321, "z": 1})), "action.y", "must be at most 320", "4321"),
        (
            act(json!({"type": "break_block", "x": -98765432, "y": 64, "z": 1, "expected_block": "minecraft:stone"})),
            "action.x",
            "must be at least -30000000",
            "98765432",
        ),
    ];
    for (msg, field, rule, caller) in cases {
        let name = msg["params"]["name"].as_str().unwrap().to_owned();
        let reply = app.post(Some(&token), msg.clone()).await;
        assert_eq!((reply.status, &reply.body["id"]), (StatusCode::OK, &json!(3)), "{msg}: {}", reply.body);
        let error = assert_error(&reply.body["result"], output_schema(&tools, &name), "invalid_request");
        assert_eq!(error["details"], json!({"field": field, "rule": rule}), "{msg}");
        assert_eq!(error["message"], format!("invalid request: {field}: {rule}"));
        assert!(!error.to_string().contains(caller), "{error} repeats {caller}");
        let anonymous = app.post(None, msg.clone()).await;
        assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
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

/// 2026-07-28 makes list, read and discover results cacheable (SEP-2549): they carry
/// `ttlMs` and `cacheScope`, "private" because every MCP request is authenticated; the
/// older revisions, whose results have no such fields, get none.
#[tokio::test]
async fn cacheable_results_carry_private_cache_hints_at_2026_07_28_only() {
    let app = App::new();
    let token = app.token("alice", FULL).await;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}
    });
    let ttl = json!(helix_core::mcp::server::CACHE_TTL_MS);
    assert!(ttl.as_u64().unwrap() > 0);
    for (id, method, params) in [
        (1, "server/discover", json!({})),
        (2, "tools/list", json!({})),
        (3, "resources/list", json!({})),
        (4, "resources/templates/list", json!({})),
        (5, "resources/read", json!({"uri": "ui://helix/run-view.html"})),
    ] {
        let mut params = params;
        params["_meta"] = meta.clone();
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut headers = vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", method)];
        if let Some(uri) = params["uri"].as_str() {
            headers.push(("mcp-name", uri));
        }
        let reply = app.post_raw(Some(&token), msg.to_string(), &headers).await;
        assert_eq!(reply.status, StatusCode::OK, "{method}: {}", reply.body);
        let result = &reply.body["result"];
        assert_eq!((&result["ttlMs"], &result["cacheScope"]), (&ttl, &json!("private")), "{method}: {result}");
    }
    for version in ["2025-06-18", "2025-11-25"] {
        let msg = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"});
        let reply = app.post_raw(Some(&token), msg.to_string(), &[("mcp-protocol-version", version)]).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let result = reply.body["result"].as_object().unwrap();
        assert!(!result.contains_key("ttlMs") && !result.contains_key("cacheScope"), "{version}: {result:?}");
    }
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

/// One challenge names every scope the operation needs, not only the first missing one: a
/// start over `research_library` needs `helix.agent_runs.write` and that data scope's OAuth
/// scope, whichever of them the token already holds, so one re-authorization is enough.
#[tokio::test]
async fn a_call_without_the_tool_scope_is_an_error_result_with_the_challenge() {
    let app = App::new();
    let metadata = "http://127.0.0.1:9000/.well-known/oauth-protected-resource/mcp";
    let all = ["helix.agent_runs.write", "helix.data.research_library.read"];
    for (subject, scopes) in [("bob", READ_ONLY), ("carol", &["helix.agent_runs.read"][..])] {
        let token = app.token(subject, scopes).await;
        let tools = app.tools(&token).await;
        let result = app.call(&token, "helix_run_start", start_args("mcp-scope-0001")).await;
        let error = assert_error(&result, output_schema(&tools, "helix_run_start"), "insufficient_scope");
        assert_eq!(error["details"]["required_scopes"], json!(all), "{scopes:?}");
        let challenge = result["_meta"]["mcp/www_authenticate"][0].as_str().unwrap();
        assert!(result["structuredContent"]["request_id"].as_str().unwrap().starts_with("req_"));
        assert_eq!(
            challenge,
            format!(
                "Bearer resource_metadata=\"{metadata}\", error=\"insufficient_scope\", scope=\"{}\"",
                all.join(" ")
            )
        );
    }
    // Without a data scope the start needs only the run scope.
    let token = app.token("dave", &["helix.agent_runs.read"]).await;
    let args = json!({"idempotency_key": "mcp-scope-0002", "request": {"objective": "x", "database_scope": []}});
    let result = app.call(&token, "helix_run_start", args).await;
    assert_eq!(result["structuredContent"]["error"]["details"]["required_scopes"], json!(["helix.agent_runs.write"]));
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
