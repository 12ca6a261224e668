//! The Shared Live Room MCP tools over real HTTP (`POST /mcp`) on both store backends:
//! catalog entries, scopes, structured results validated against the published output
//! schemas, the claim-handle preflight exception, and withdrawals under the policy lock.

use helix_core::domain::account::PolicyChange;
use helix_integration_tests::support::runs::research_run;
use helix_integration_tests::*;
use serde_json::{Value, json};

const ALL: &[&str] = &[
    "helix.agent_runs.read",
    "helix.agent_runs.write",
    "helix.rooms.read",
    "helix.rooms.manage",
    "helix.data.research_library.read",
];
/// The room tools of the published catalog (their rows in `mcp::catalog`).
fn room_tools() -> impl Iterator<Item = &'static helix_core::mcp::catalog::ToolSpec> {
    helix_core::mcp::catalog::CATALOG.iter().filter(|t| t.name.starts_with("helix_room_"))
}

async fn rpc(app: &TestApp, token: &str, msg: Value) -> (u16, Value) {
    let res = app
        .http
        .post(format!("{}/mcp", app.base))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&msg)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn tools(app: &TestApp, token: &str) -> Vec<Value> {
    let (_, body) = rpc(app, token, json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
    body["result"]["tools"].as_array().unwrap().clone()
}

/// Calls a tool; checks the result against the tool's published outputSchema.
async fn call(app: &TestApp, token: &str, name: &str, arguments: Value) -> Value {
    let msg =
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let (status, body) = rpc(app, token, msg).await;
    assert_eq!(status, 200, "{body}");
    let result = body["result"].clone();
    assert!(result.is_object(), "{body}");
    let listed = tools(app, token).await;
    let schema = &listed.iter().find(|t| t["name"] == name).unwrap()["outputSchema"];
    assert!(
        helix_core::mcp::validate::validate(schema, &result["structuredContent"]),
        "{name}: {} does not match its outputSchema",
        result["structuredContent"]
    );
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, result["structuredContent"], "text JSON and structuredContent agree");
    result
}

fn ok(result: &Value) -> &Value {
    assert_ne!(result["isError"], true, "{result}");
    &result["structuredContent"]
}

fn err_code(result: &Value) -> &str {
    assert_eq!(result["isError"], true, "{result}");
    result["structuredContent"]["error"]["code"].as_str().unwrap()
}

async fn issue_claim(app: &TestApp, cookie: &str) -> Value {
    let res = app
        .http
        .post(format!("{}/api/agi/agent-run-observer/bindings", app.base))
        .header("cookie", cookie)
        .header("origin", app.state.services.config.browser.public_origin.clone())
        .json(&json!({ "chat_id": "chat-mcp-1" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    res.json().await.unwrap()
}

async fn the_room_tools_are_listed_with_scopes_and_output_schemas(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    // A token with no room scope still sees the full catalog.
    let token = app.token_for("alice", "tenant-a", &["helix.agent_runs.read"]).await;
    let listed = tools(&app, &token).await;
    assert!(room_tools().count() >= 8, "the room tools are in the catalog");
    for spec in room_tools() {
        let name = spec.name;
        let t = listed.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} listed"));
        assert!(t["outputSchema"].is_object() && t["inputSchema"]["additionalProperties"] == false, "{name}");
        let scopes = &t["securitySchemes"][0]["scopes"];
        assert_eq!(&t["_meta"]["securitySchemes"][0]["scopes"], scopes, "{name}");
        // The row's scopes, which docs/wire.md lists per tool (`mcp::catalog` keeps the two equal).
        assert_eq!(scopes, &json!(spec.scopes), "{name}");
    }
    // Catalog visibility is not permission: the handler refuses with a challenge.
    let result = call(&app, &token, "helix_room_list", json!({})).await;
    assert_eq!(err_code(&result), "insufficient_scope");
    assert!(result["_meta"]["mcp/www_authenticate"][0].as_str().unwrap().contains("helix.rooms.read"));
}

async fn an_agent_creates_binds_claims_and_withdraws_over_mcp(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token_for("alice", "tenant-a", ALL).await;
    let args = json!({ "idempotency_key": "mcp-room-create-01", "request": { "name": "Bench" } });
    let created = call(&app, &token, "helix_room_create", args.clone()).await;
    assert_eq!(created["_meta"]["helix/idempotency_replayed"], false);
    let room = ok(&created).clone();
    assert_eq!(room["schema"], "helix.room.v1");
    let replay = call(&app, &token, "helix_room_create", args).await;
    assert_eq!(replay["_meta"]["helix/idempotency_replayed"], true);
    assert_eq!(ok(&replay), &room);
    let room_id = room["room_id"].as_str().unwrap();
    let listed = call(&app, &token, "helix_room_list", json!({})).await;
    assert_eq!(ok(&listed)["rooms"][0]["room_id"], room_id);
    assert_eq!(ok(&call(&app, &token, "helix_room_inspect", json!({ "room_id": room_id })).await), &room);

    let run = app.started(&token, research_run()).await;
    let run_id = run["run_id"].as_str().unwrap();
    let bound =
        call(&app, &token, "helix_room_bind_run", json!({ "request": { "room_id": room_id, "run_id": run_id } })).await;
    let binding_ref = ok(&bound)["binding_ref"].as_str().unwrap().to_owned();
    let again =
        call(&app, &token, "helix_room_bind_run", json!({ "request": { "room_id": room_id, "run_id": run_id } })).await;
    assert_eq!(ok(&again)["binding_ref"], binding_ref.as_str());

    let cookie = app.session("alice").await;
    let issued = issue_claim(&app, &cookie).await;
    let handle = issued["claim_handle"].as_str().unwrap();
    let claimed = call(
        &app,
        &token,
        "helix_room_claim_chat_binding",
        json!({ "request": { "claim_handle": handle, "run_id": run_id } }),
    )
    .await;
    let chat_ref = ok(&claimed)["binding_ref"].as_str().unwrap().to_owned();
    assert!(!claimed.to_string().contains("chat-mcp-1"));
    let reused = call(
        &app,
        &token,
        "helix_room_claim_chat_binding",
        json!({ "request": { "claim_handle": handle, "run_id": run_id } }),
    )
    .await;
    assert_eq!(err_code(&reused), "claim_handle_invalid");

    let command = call(
        &app,
        &token,
        "helix_room_command_request",
        json!({ "room_id": room_id, "request": { "command": "say hi" } }),
    )
    .await;
    assert_eq!(err_code(&command), "command_execution_not_enabled");

    // Under the policy lock, reads and binds are refused (not as a scope error); withdrawals work.
    app.set_policy("alice", PolicyChange { rooms_locked: Some(true), ..Default::default() }).await;
    let refused = call(&app, &token, "helix_room_list", json!({})).await;
    assert_eq!(err_code(&refused), "room_feature_locked");
    assert!(refused.get("_meta").is_none_or(|m| m.get("mcp/www_authenticate").is_none()));
    let w = call(&app, &token, "helix_room_unbind_run", json!({ "binding_ref": binding_ref })).await;
    assert_eq!(ok(&w)["revocation_status"], "revoked");
    let w = call(&app, &token, "helix_room_unbind_chat", json!({ "binding_ref": chat_ref })).await;
    assert_eq!(ok(&w)["revocation_status"], "revoked");
    let w = call(&app, &token, "helix_room_unbind_chat", json!({ "binding_ref": chat_ref })).await;
    assert_eq!(ok(&w)["revocation_status"], "already_revoked");
}

async fn the_preflight_admits_a_claim_handle_only_to_its_claim_tool(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token_for("alice", "tenant-a", ALL).await;
    let cookie = app.session("alice").await;
    let handle = issue_claim(&app, &cookie).await["claim_handle"].as_str().unwrap().to_owned();
    let refused = |name: &str, arguments: Value| json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    for msg in [
        refused("helix_room_create", json!({ "idempotency_key": "mcp-room-0001", "request": { "name": handle } })),
        refused("helix_room_inspect", json!({ "room_id": handle })),
        refused("helix_room_unbind_chat", json!({ "binding_ref": handle })),
        refused("helix_run_inspect", json!({ "run_id": handle })),
        // The right tool, the wrong place.
        refused("helix_room_claim_chat_binding", json!({ "request": { "claim_handle": handle, "run_id": handle } })),
    ] {
        let (status, body) = rpc(&app, &token, msg.clone()).await;
        assert_eq!(body["id"], Value::Null, "{msg} -> {body}");
        assert!(body["error"].is_object(), "{status} {body}");
        assert!(!body.to_string().contains(&handle), "never echoed");
    }
    // Nothing was consumed: the handle still works on its own tool.
    let run = app.started(&token, research_run()).await;
    let claimed = call(
        &app,
        &token,
        "helix_room_claim_chat_binding",
        json!({ "request": { "claim_handle": handle, "run_id": run["run_id"] } }),
    )
    .await;
    assert!(ok(&claimed)["binding_ref"].as_str().unwrap().starts_with("rcb_"));
}

on_both_backends!(
    the_room_tools_are_listed_with_scopes_and_output_schemas,
    an_agent_creates_binds_claims_and_withdraws_over_mcp,
    the_preflight_admits_a_claim_handle_only_to_its_claim_tool,
);
