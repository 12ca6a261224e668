//! Tenant isolation of rooms over real HTTP on both store backends: the same subject (the
//! same Helix account) under another tenant reaches none of the first tenant's rooms, on
//! REST and on MCP, exactly as if they did not exist; chat claims stay in the tenant of the
//! browser that issued them; a room stored before tenants were recorded belongs to the
//! development tenant only; a chat observer is read only in the tenant of the browser that
//! created it, and one stored without a tenant is read by no one.

use helix_core::service::records::rooms::{LEGACY_TENANT, RoomRecord, observer_key, room_key};
use helix_integration_tests::support::browser::between;
use helix_integration_tests::support::runs::research_run;
use helix_integration_tests::support::sources::ALL as SOURCE_SCOPES;
use helix_integration_tests::*;
use serde_json::{Value, json};

const ALL: &[&str] = &[
    "helix.agent_runs.read",
    "helix.agent_runs.write",
    "helix.rooms.read",
    "helix.rooms.manage",
    "helix.room_sources.manage",
    "helix.data.research_library.read",
];
/// A well-formed room id no room has.
const NO_ROOM: &str = "room_00000000000000000000";

/// The parts of an error a caller can tell rooms apart by.
fn refusal(status: u16, v: &Value) -> (u16, Value, Value) {
    (status, v["error"]["code"].clone(), v["error"]["message"].clone())
}

async fn delete(app: &TestApp, token: &str, path: &str) -> (u16, Value) {
    read(app.http.delete(format!("{}{path}", app.base)).bearer_auth(token).send().await.unwrap()).await
}

async fn claim(app: &TestApp, token: &str, handle: &str, run_id: &str) -> (u16, Value) {
    let body = json!({ "claim_handle": handle, "run_id": run_id });
    read(app.post("/api/v1/rooms/chat-bindings/claim", token).json(&body).send().await.unwrap()).await
}

async fn issue_claim(app: &TestApp, cookie: &str) -> String {
    let (status, v) = read(
        app.browser(reqwest::Method::POST, "/api/agi/agent-run-observer/bindings", cookie)
            .json(&json!({ "chat_id": "chat-tenant-1" }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    v["claim_handle"].as_str().unwrap().to_owned()
}

/// A tool call's structured content and whether it is an error.
async fn tool(app: &TestApp, path: &str, token: &str, name: &str, arguments: Value) -> Value {
    let (status, v) = app.rpc(path, token, "tools/call", json!({ "name": name, "arguments": arguments })).await;
    assert_eq!(status, 200, "{v}");
    v["result"].clone()
}

fn tool_refusal(result: &Value) -> (Value, Value, Value) {
    assert_eq!(result["isError"], true, "{result}");
    let e = &result["structuredContent"]["error"];
    (result["isError"].clone(), e["code"].clone(), e["message"].clone())
}

/// Alice under tenant A owns a room with a source and a bound run; the same alice under
/// tenant B. Returns (token A, token B, room id, A's run-room binding ref).
async fn two_tenants(app: &TestApp) -> (String, String, String, String) {
    let a = app.token_for("alice", "tenant-a", ALL).await;
    let b = app.token_for("alice", "tenant-b", ALL).await;
    app.developer("alice").await;
    let room_id = app.room(&a, "Lab A").await;
    let (status, v) = app
        .create_source(&a, &room_id, "src-tenant-a-1", json!({ "adapter_profile": "fixture", "world_id": "w1" }))
        .await;
    assert_eq!(status, 201, "{v}");
    let run = app.started(&a, research_run()).await;
    let (status, bound) = app.bind(&a, &room_id, run["run_id"].as_str().unwrap()).await;
    assert_eq!(status, 201, "{bound}");
    (a, b, room_id, bound["binding_ref"].as_str().unwrap().to_owned())
}

async fn another_tenants_rooms_are_not_found_on_every_rest_room_route(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (a, b, room_id, binding_ref) = two_tenants(&app).await;

    // Inspect: the same refusal as for a room that does not exist.
    let missing = read(app.get(&format!("/api/v1/rooms/{NO_ROOM}"), &b).send().await.unwrap()).await;
    assert_eq!(missing.0, 404, "{}", missing.1);
    let (status, v) = read(app.get(&format!("/api/v1/rooms/{room_id}"), &b).send().await.unwrap()).await;
    assert_eq!(refusal(status, &v), refusal(missing.0, &missing.1));
    assert!(!v.to_string().contains(&room_id), "no hint of the room: {v}");

    // List: tenant B has no rooms; tenant A still has its own.
    let (status, v) = read(app.get("/api/v1/rooms", &b).send().await.unwrap()).await;
    assert_eq!((status, v["rooms"].as_array().map(Vec::len)), (200, Some(0)), "{v}");
    let (_, v) = read(app.get("/api/v1/rooms", &a).send().await.unwrap()).await;
    assert_eq!(v["rooms"][0]["room_id"], room_id.as_str(), "{v}");

    // Bind: tenant B's own run to tenant A's room, as to a missing room.
    let run_b = app.started(&b, research_run()).await;
    let run_b = run_b["run_id"].as_str().unwrap();
    let missing = app.bind(&b, NO_ROOM, run_b).await;
    let (status, v) = app.bind(&b, &room_id, run_b).await;
    assert_eq!(refusal(status, &v), refusal(missing.0, &missing.1));
    assert_eq!(status, 404, "{v}");

    // Withdraw: tenant A's binding is not tenant B's.
    let (status, v) = delete(&app, &b, &format!("/api/v1/rooms/run-bindings/{binding_ref}")).await;
    assert_eq!((status, code(&v)), (404, "not_found"), "{v}");

    // Sources: listing and creating under tenant A's room, as under a missing room.
    let missing = read(app.get(&format!("/api/v1/rooms/{NO_ROOM}/sources"), &b).send().await.unwrap()).await;
    let (status, v) = read(app.get(&format!("/api/v1/rooms/{room_id}/sources"), &b).send().await.unwrap()).await;
    assert_eq!(refusal(status, &v), refusal(missing.0, &missing.1));
    assert_eq!(status, 404, "{v}");
    let body = json!({ "adapter_profile": "fixture", "world_id": "w2" });
    let missing = app.create_source(&b, NO_ROOM, "src-tenant-b-0", body.clone()).await;
    let (status, v) = app.create_source(&b, &room_id, "src-tenant-b-1", body).await;
    assert_eq!(refusal(status, &v), refusal(missing.0, &missing.1));
    assert_eq!(status, 404, "{v}");
    let (_, v) = read(app.get(&format!("/api/v1/rooms/{room_id}/sources"), &a).send().await.unwrap()).await;
    assert_eq!(v["sources"].as_array().map(Vec::len), Some(1), "tenant B added nothing: {v}");

    // A room tenant B creates is its own, and tenant A does not see it.
    let room_b = app.room(&b, "Lab B").await;
    let (status, _) = read(app.get(&format!("/api/v1/rooms/{room_b}"), &b).send().await.unwrap()).await;
    assert_eq!(status, 200);
    let (status, _) = read(app.get(&format!("/api/v1/rooms/{room_b}"), &a).send().await.unwrap()).await;
    assert_eq!(status, 404);
    let (_, v) = read(app.get("/api/v1/rooms", &a).send().await.unwrap()).await;
    assert_eq!(v["rooms"].as_array().map(Vec::len), Some(1), "{v}");
}

async fn another_tenants_rooms_are_not_found_on_every_room_tool(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (a, b, room_id, binding_ref) = two_tenants(&app).await;
    let call = |token: &str, name: &str, args: Value| {
        let (app, token, name) = (&app, token.to_owned(), name.to_owned());
        async move { tool(app, "/mcp", &token, &name, args).await }
    };

    let missing = call(&b, "helix_room_inspect", json!({ "room_id": NO_ROOM })).await;
    let got = call(&b, "helix_room_inspect", json!({ "room_id": room_id })).await;
    assert_eq!(tool_refusal(&got), tool_refusal(&missing));
    assert_eq!(tool_refusal(&got).1, "not_found");
    assert!(!got.to_string().contains(&room_id), "no hint of the room: {got}");

    let listed = call(&b, "helix_room_list", json!({})).await;
    assert_eq!(listed["structuredContent"]["rooms"].as_array().map(Vec::len), Some(0), "{listed}");
    let listed = call(&a, "helix_room_list", json!({})).await;
    assert_eq!(listed["structuredContent"]["rooms"][0]["room_id"], room_id.as_str(), "{listed}");

    let run_b = app.started(&b, research_run()).await;
    let run_b = run_b["run_id"].as_str().unwrap();
    let missing = call(&b, "helix_room_bind_run", json!({ "request": { "room_id": NO_ROOM, "run_id": run_b } })).await;
    let got = call(&b, "helix_room_bind_run", json!({ "request": { "room_id": room_id, "run_id": run_b } })).await;
    assert_eq!(tool_refusal(&got), tool_refusal(&missing));

    let got = call(&b, "helix_room_unbind_run", json!({ "binding_ref": binding_ref })).await;
    assert_eq!(tool_refusal(&got).1, "not_found");

    let missing = call(&b, "helix_room_source_list", json!({ "room_id": NO_ROOM })).await;
    let got = call(&b, "helix_room_source_list", json!({ "room_id": room_id })).await;
    assert_eq!(tool_refusal(&got), tool_refusal(&missing));
    assert_eq!(tool_refusal(&got).1, "not_found");
    let create = |room: &str, key: &str| {
        json!({ "room_id": room, "idempotency_key": key,
                "request": { "adapter_profile": "fixture", "world_id": "w3" } })
    };
    let missing = call(&b, "helix_room_source_create", create(NO_ROOM, "mcp-src-tenant-0")).await;
    let got = call(&b, "helix_room_source_create", create(&room_id, "mcp-src-tenant-1")).await;
    assert_eq!(tool_refusal(&got), tool_refusal(&missing));

    // Device Check follows the room's tenant: tenant A sees its room and source, B nothing.
    let check = |token: &str| {
        let (app, token) = (&app, token.to_owned());
        async move { tool(app, "/mcp/device-check", &token, "helix_environment_device_check", json!({})).await }
    };
    let of_a = check(&a).await;
    assert_eq!(of_a["structuredContent"]["rooms"][0]["room_id"], room_id.as_str(), "{of_a}");
    let of_b = check(&b).await;
    assert_eq!(of_b["structuredContent"]["rooms"].as_array().map(Vec::len), Some(0), "{of_b}");
}

async fn a_chat_claim_is_claimed_only_in_the_tenant_of_the_browser_that_issued_it(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let a = app.token_for("alice", "tenant-a", ALL).await;
    let b = app.token_for("alice", "tenant-b", ALL).await;
    let cookie = app.session_in("alice", "tenant-a").await;
    let handle = issue_claim(&app, &cookie).await;
    let run_b = app.started(&b, research_run()).await;
    let (status, v) = claim(&app, &b, &handle, run_b["run_id"].as_str().unwrap()).await;
    assert_eq!((status, code(&v)), (404, "claim_handle_invalid"), "{v}");
    // Over MCP too; the refusal consumed nothing, so tenant A still claims it.
    let got = tool(
        &app,
        "/mcp",
        &b,
        "helix_room_claim_chat_binding",
        json!({ "request": { "claim_handle": handle, "run_id": run_b["run_id"] } }),
    )
    .await;
    assert_eq!(tool_refusal(&got).1, "claim_handle_invalid");
    let run_a = app.started(&a, research_run()).await;
    let (status, v) = claim(&app, &a, &handle, run_a["run_id"].as_str().unwrap()).await;
    assert_eq!(status, 201, "{v}");
    let chat_ref = v["binding_ref"].as_str().unwrap();
    let (status, v) = delete(&app, &b, &format!("/api/v1/rooms/chat-bindings/{chat_ref}")).await;
    assert_eq!((status, code(&v)), (404, "not_found"), "{v}");
}

async fn the_rooms_page_invites_and_joins_stay_in_the_tenant_the_browser_signed_in_with(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let a = app.token_for("alice", "tenant-a", ALL).await;
    let room_id = app.room(&a, "Lab A").await;
    let (alice_a, alice_b) = (app.session_in("alice", "tenant-a").await, app.session_in("alice", "tenant-b").await);
    let page = |cookie: String| {
        let app = &app;
        async move {
            let res = app.http.get(format!("{}/rooms", app.base)).header("cookie", cookie).send().await.unwrap();
            res.text().await.unwrap()
        }
    };
    assert!(page(alice_a.clone()).await.contains(&room_id));
    assert!(!page(alice_b.clone()).await.contains(&room_id), "tenant B's page lists no room of tenant A");

    // Managing the room from tenant B: as for a room that does not exist.
    for (path, extra) in [("/rooms/invite", None), ("/rooms/consent/raise", Some(("confirm", "yes")))] {
        let (mut missing_fields, mut real_fields) = (vec![("room_id", NO_ROOM)], vec![("room_id", room_id.as_str())]);
        missing_fields.extend(extra);
        real_fields.extend(extra);
        let missing = app.form(&alice_b, path, &missing_fields).await.0;
        let real = app.form(&alice_b, path, &real_fields).await.0;
        assert_eq!(real, missing, "{path}");
        assert_eq!(missing, 404);
    }

    // An invite to a tenant A room cannot be previewed or accepted under tenant B.
    let (status, html) = app.form(&alice_a, "/rooms/invite", &[("room_id", &room_id)]).await;
    assert_eq!(status, 200);
    let code = between(&html, "id=\"invite-code\">", "<").to_owned();
    let (bob_a, bob_b) = (app.session_in("bob", "tenant-a").await, app.session_in("bob", "tenant-b").await);
    let (status, body) = app.form(&bob_b, "/rooms/join/preview", &[("code", &code)]).await;
    assert_eq!(status, 404);
    assert!(body.contains("invite_invalid") && !body.contains("Lab A"), "{body}");
    let (status, body) = app.form(&bob_b, "/rooms/join", &[("code", &code), ("consent_version", "1")]).await;
    assert_eq!(status, 404);
    assert!(body.contains("invite_invalid"), "{body}");
    // Nothing was consumed: bob joins under tenant A, and his tenant B agent still sees nothing.
    assert_eq!(app.form(&bob_a, "/rooms/join", &[("code", &code), ("consent_version", "1")]).await.0, 303);
    let bob_agent_a = app.token_for("bob", "tenant-a", ALL).await;
    let bob_agent_b = app.token_for("bob", "tenant-b", ALL).await;
    let (_, v) = read(app.get("/api/v1/rooms", &bob_agent_a).send().await.unwrap()).await;
    assert_eq!(v["rooms"][0]["room_id"], room_id.as_str(), "{v}");
    let (_, v) = read(app.get("/api/v1/rooms", &bob_agent_b).send().await.unwrap()).await;
    assert_eq!(v["rooms"].as_array().map(Vec::len), Some(0), "{v}");
}

async fn a_room_stored_without_a_tenant_belongs_to_the_development_tenant_only(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let dev = app.token_for("alice", LEGACY_TENANT, SOURCE_SCOPES).await;
    let a = app.token_for("alice", "tenant-a", SOURCE_SCOPES).await;
    let room_id = app.room(&dev, "Old lab").await;
    // As the build before tenants were recorded stored it: the same item without the tenant.
    let store = app.state.services.store.clone();
    let item = store.get(&room_key(&room_id)).await.unwrap().unwrap();
    let legacy = RoomRecord { tenant_ref: None, ..RoomRecord::from_item(&item).unwrap() };
    store.put(legacy.to_item().unwrap(), None).await.unwrap();
    let stored = store.get(&room_key(&room_id)).await.unwrap().unwrap();
    assert_eq!(RoomRecord::from_item(&stored).unwrap().tenant_ref, None);

    let (status, v) = read(app.get(&format!("/api/v1/rooms/{room_id}"), &dev).send().await.unwrap()).await;
    assert_eq!((status, v["room_id"].as_str()), (200, Some(room_id.as_str())), "{v}");
    let (_, v) = read(app.get("/api/v1/rooms", &dev).send().await.unwrap()).await;
    assert_eq!(v["rooms"].as_array().map(Vec::len), Some(1), "{v}");
    let (status, v) = read(app.get(&format!("/api/v1/rooms/{room_id}"), &a).send().await.unwrap()).await;
    assert_eq!((status, code(&v)), (404, "not_found"), "{v}");
    let (_, v) = read(app.get("/api/v1/rooms", &a).send().await.unwrap()).await;
    assert_eq!(v["rooms"].as_array().map(Vec::len), Some(0), "{v}");
}

/// What the observer lane answers `cookie` on an observer: the view, its events, and a
/// disconnect (each as status and error code, the view's binding status when it is read).
async fn observer_lane(app: &TestApp, cookie: &str, observer_ref: &str) -> Vec<(u16, Value)> {
    use reqwest::Method;
    let path = format!("/api/agi/agent-run-observer/bindings/{observer_ref}");
    let mut got = vec![];
    for (method, path) in
        [(Method::GET, path.clone()), (Method::GET, format!("{path}/events")), (Method::DELETE, path.clone())]
    {
        let (status, v) = read(app.browser(method, &path, cookie).send().await.unwrap()).await;
        got.push((status, v["error"]["code"].clone()));
    }
    got
}

/// The observer a browser of `cookie` creates, by its ref.
async fn observer_of(app: &TestApp, cookie: &str) -> String {
    let (status, v) = read(
        app.browser(reqwest::Method::POST, "/api/agi/agent-run-observer/bindings", cookie)
            .json(&json!({ "chat_id": "chat-tenant-2", "snapshot": [{ "role": "user", "content": "hello" }] }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    v["observer_binding_ref"].as_str().unwrap().to_owned()
}

async fn a_chat_observer_is_read_only_in_the_tenant_of_the_browser_that_created_it(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (alice_a, alice_b) = (app.session_in("alice", "tenant-a").await, app.session_in("alice", "tenant-b").await);
    let observer_ref = observer_of(&app, &alice_a).await;
    // The same account under tenant B: exactly what an observer that does not exist gets,
    // on the view, the events and the disconnect.
    let missing = observer_lane(&app, &alice_b, &format!("obs_{}", "0".repeat(24))).await;
    assert!(missing.iter().all(|(status, code)| (*status, code.as_str()) == (404, Some("not_found"))), "{missing:?}");
    assert_eq!(observer_lane(&app, &alice_b, &observer_ref).await, missing);
    // Tenant B's disconnect changed nothing: tenant A still reads it, awaiting its claim.
    let path = format!("/api/agi/agent-run-observer/bindings/{observer_ref}");
    let (status, v) = read(app.browser(reqwest::Method::GET, &path, &alice_a).send().await.unwrap()).await;
    assert_eq!((status, v["binding_status"].as_str()), (200, Some("awaiting_claim")), "{v}");
    let (status, v) = read(app.browser(reqwest::Method::DELETE, &path, &alice_a).send().await.unwrap()).await;
    assert_eq!((status, v["disconnect_status"].as_str()), (200, Some("disconnected")), "{v}");
}

async fn a_chat_observer_stored_without_a_tenant_is_read_by_no_one(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.session_in("alice", "tenant-a").await;
    let observer_ref = observer_of(&app, &alice).await;
    // As the build before observers recorded their tenant stored it: no tenant attribute.
    let store = app.state.services.store.clone();
    let mut item = store.get(&observer_key(&observer_ref)).await.unwrap().unwrap();
    item.attrs.remove("tenant_ref");
    store.put(item, None).await.unwrap();
    let missing = observer_lane(&app, &alice, &format!("obs_{}", "0".repeat(24))).await;
    assert_eq!(observer_lane(&app, &alice, &observer_ref).await, missing, "refused, as if it did not exist");
    let dev = app.session_in("alice", LEGACY_TENANT).await;
    assert_eq!(observer_lane(&app, &dev, &observer_ref).await, missing, "not the development tenant's either");
    let stored = store.get(&observer_key(&observer_ref)).await.unwrap().unwrap();
    assert!(stored.s("body").unwrap().contains("awaiting_claim"), "nothing was rewritten");
}

on_both_backends!(
    another_tenants_rooms_are_not_found_on_every_rest_room_route,
    another_tenants_rooms_are_not_found_on_every_room_tool,
    a_chat_claim_is_claimed_only_in_the_tenant_of_the_browser_that_issued_it,
    the_rooms_page_invites_and_joins_stay_in_the_tenant_the_browser_signed_in_with,
    a_room_stored_without_a_tenant_belongs_to_the_development_tenant_only,
    a_chat_observer_is_read_only_in_the_tenant_of_the_browser_that_created_it,
    a_chat_observer_stored_without_a_tenant_is_read_by_no_one,
);
