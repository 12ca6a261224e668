//! Minecraft Player Embodiment over real HTTP on both store backends: the one-time
//! pairing, the connector lane's credential boundary, subjects and selection, typed
//! actions through a scripted connector to a verified `succeeded`, typed refusals,
//! idempotency, epoch fencing and Emergency Stop.

use helix_core::domain::embodiment::action_schema_hash;
use helix_integration_tests::support::browser::between;
use helix_integration_tests::support::sources::manifest;
use helix_integration_tests::*;
use reqwest::Method;
use serde_json::{Value, json};

pub(crate) const ALL: &[&str] = &[
    "helix.rooms.read",
    "helix.rooms.manage",
    "helix.room_sources.manage",
    "helix.environment_actions.read",
    "helix.environment_actions.write",
];
pub(crate) const STEVE: &str = "069a79f4-44e9-4726-a5be-fca90e38aaf5";

pub(crate) struct World {
    pub(crate) token: String,
    pub(crate) cookie: String,
    pub(crate) room_id: String,
    pub(crate) binding_id: String,
    pub(crate) credential: String,
}

/// alice, a developer, owns a room and pairs a connector for world `overworld`.
pub(crate) async fn paired(app: &TestApp) -> World {
    let token = app.token_for("alice", "tenant-a", ALL).await;
    app.developer("alice").await;
    let cookie = app.session("alice").await;
    let room_id = app.room(&token, "Lab").await;
    let (status, p) = pair(app, &cookie, &room_id).await;
    assert_eq!(status, 201, "{p}");
    World {
        token,
        cookie,
        room_id,
        binding_id: p["environment_binding_id"].as_str().unwrap().to_owned(),
        credential: p["connector_credential"].as_str().unwrap().to_owned(),
    }
}

async fn pair(app: &TestApp, cookie: &str, room_id: &str) -> (u16, Value) {
    let body = json!({ "room_id": room_id, "world_id": "overworld" });
    read(app.browser(Method::POST, "/api/account/room-connectors/pairings", cookie).json(&body).send().await.unwrap())
        .await
}

pub(crate) async fn connector(app: &TestApp, credential: &str, path: &str, body: Value) -> (u16, Value) {
    let url = format!("{}/api/connectors/v1/{path}", app.base);
    read(app.http.post(url).bearer_auth(credential).json(&body).send().await.unwrap()).await
}

pub(crate) fn registration(subjects: Value) -> Value {
    json!({
        "protocol": "helix.connector.v1",
        "manifest": { "connector_name": "scripted", "connector_version": "1.0.0", "world_id": "overworld" },
        "schema_hash": action_schema_hash(),
        "capabilities": ["move_to", "look_at", "stop", "break_block", "place_block", "equip", "craft", "chat", "wait"],
        "subjects": subjects,
    })
}

fn steve() -> Value {
    json!([{ "native_id": STEVE, "display_name": "Steve", "online": true }])
}

pub(crate) async fn register(app: &TestApp, w: &World) -> u64 {
    let (status, r) = connector(app, &w.credential, "register", registration(steve())).await;
    assert_eq!(status, 200, "{r}");
    r["epoch"].as_u64().unwrap()
}

pub(crate) async fn poll(app: &TestApp, w: &World, epoch: u64, acks: Value) -> (u16, Value) {
    connector(app, &w.credential, "poll", json!({ "epoch": epoch, "acks": acks })).await
}

/// Calls a tool: (isError, structuredContent), the result checked against its outputSchema.
pub(crate) async fn tool(app: &TestApp, token: &str, name: &str, arguments: Value) -> (bool, Value) {
    let (status, body) = app.rpc("/mcp", token, "tools/call", json!({ "name": name, "arguments": arguments })).await;
    assert_eq!(status, 200, "{body}");
    let result = &body["result"];
    assert!(result.is_object(), "{name}: {body}");
    let (_, list) = app.rpc("/mcp", token, "tools/list", json!({})).await;
    let listed = list["result"]["tools"].as_array().unwrap();
    let schema = &listed.iter().find(|t| t["name"] == name).unwrap()["outputSchema"];
    let content = result["structuredContent"].clone();
    assert!(helix_core::mcp::validate::validate(schema, &content), "{name}: {content} does not match its outputSchema");
    (result["isError"] == true, content)
}

pub(crate) fn err(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

pub(crate) async fn subjects(app: &TestApp, w: &World, token: &str) -> Value {
    let (is_error, list) = tool(app, token, "helix_environment_subject_list", json!({ "room_id": w.room_id })).await;
    assert!(!is_error, "{list}");
    list
}

pub(crate) async fn select_first(app: &TestApp, w: &World, token: &str) -> (bool, Value) {
    let list = subjects(app, w, token).await;
    let subject_ref = list["environments"][0]["subjects"][0]["subject_ref"].as_str().unwrap().to_owned();
    let args = json!({ "room_id": w.room_id, "environment_binding_id": w.binding_id, "subject_ref": subject_ref });
    tool(app, token, "helix_environment_subject_select", args).await
}

pub(crate) async fn act(app: &TestApp, w: &World, token: &str, key: &str, action: Value) -> (bool, Value) {
    let args = json!({ "room_id": w.room_id, "idempotency_key": key, "action": action });
    tool(app, token, "helix_minecraft_player_action", args).await
}

pub(crate) async fn status(app: &TestApp, w: &World, workflow_ref: &str) -> Value {
    let args = json!({ "room_id": w.room_id, "workflow_ref": workflow_ref });
    let (is_error, v) = tool(app, &w.token, "helix_minecraft_workflow_status", args).await;
    assert!(!is_error, "{v}");
    v
}

pub(crate) fn ack(cmd: &Value, seq: u32, status: &str, observation: Value) -> Value {
    json!({
        "workflow_ref": cmd["workflow_ref"], "lease_token": cmd["lease_token"], "step_index": cmd["step_index"],
        "seq": seq, "status": status, "observation": observation,
    })
}

/// bob joins alice's room through a single-use invite.
pub(crate) async fn join_bob(app: &TestApp, w: &World) -> String {
    let bob = app.token_for("bob", "tenant-a", ALL).await;
    let bob_web = app.session("bob").await;
    let (_, html) = app.form(&w.cookie, "/rooms/invite", &[("room_id", &w.room_id)]).await;
    let code = between(&html, "id=\"invite-code\">", "<").to_owned();
    assert_eq!(app.form(&bob_web, "/rooms/join", &[("code", &code), ("consent_version", "1")]).await.0, 303);
    bob
}

// ---------------------------------------------------------------------------------------------

async fn pairing_shows_the_credential_once_and_admits_only_the_connector_routes(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    assert!(w.credential.starts_with("hac_"));
    // The binding and its lookup keep the credential's hash only.
    let hash = helix_core::domain::source::ConnectorCredential::parse(&w.credential).unwrap().hash();
    let key = helix_core::service::records::embodiment::env_key(&w.room_id, &w.binding_id);
    let stored = app.state.services.store.get(&key).await.unwrap().unwrap();
    let text = format!("{stored:?}");
    assert!(text.contains(&hash) && !text.contains(&w.credential), "{text}");
    // Only the room's owner pairs, only same-origin, only a developer.
    let bob_web = app.session("bob").await;
    let (status, e) = pair(&app, &bob_web, &w.room_id).await;
    assert_eq!((status, code(&e)), (403, "developer_required"));
    app.developer("bob").await;
    assert_eq!(pair(&app, &bob_web, &w.room_id).await.0, 404, "a developer, but not the room's owner");
    let body = json!({ "room_id": w.room_id, "world_id": "overworld" });
    let url = format!("{}/api/account/room-connectors/pairings", app.base);
    let cross = app.http.post(url).header("cookie", &w.cookie).json(&body).send().await.unwrap();
    assert_eq!(cross.status(), 403);
    let (status, e) = pair(&app, &w.cookie, "room_nope").await;
    assert_eq!((status, code(&e)), (404, "not_found"));
    // The page is linked from /rooms.
    let rooms = app.browser(Method::GET, "/rooms", &w.cookie).send().await.unwrap().text().await.unwrap();
    assert!(rooms.contains("href=\"/account/room-connectors\""));
    let page = app.browser(Method::GET, "/account/room-connectors", &w.cookie).send().await.unwrap();
    assert_eq!(page.status(), 200);

    // A source bearer is refused on the connector routes, the connector credential on ingress.
    let (_, bearer) = app.claimed_source(&w.token, &w.cookie, &w.room_id, "overworld").await;
    let (status, e) = connector(&app, &bearer, "register", registration(steve())).await;
    assert_eq!((status, code(&e)), (401, "connector_credential_invalid"));
    let (status, e) = app.ingress(&w.credential, "manifest", &manifest("overworld", 1)).await;
    assert_eq!((status, code(&e)), (401, "source_credential_invalid"));
    let (status, e) = connector(&app, &w.token, "poll", json!({ "epoch": 1 })).await;
    assert_eq!((status, code(&e)), (401, "connector_credential_invalid"), "an OAuth token is not a credential here");
    // A registration must match the pairing's world and the admitted action schema.
    let mut wrong = registration(steve());
    wrong["schema_hash"] = json!("0".repeat(64));
    let (status, e) = connector(&app, &w.credential, "register", wrong).await;
    assert_eq!(
        (status, code(&e), e["error"]["details"]["reason"].as_str()),
        (409, "connector_registration_refused", Some("schema_hash"))
    );
    assert_eq!(register(&app, &w).await, 1);
    assert_eq!(register(&app, &w).await, 2, "each registration raises the epoch");
}

async fn a_move_reaches_succeeded_only_on_a_verified_position(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register(&app, &w).await;
    let list = subjects(&app, &w, &w.token).await;
    assert!(!list.to_string().contains(STEVE), "native ids never leave: {list}");
    assert_eq!(list["environments"][0]["subjects"][0]["display_name"], "Steve");
    let (is_error, sel) = select_first(&app, &w, &w.token).await;
    assert!(!is_error, "{sel}");

    let (is_error, wf) =
        act(&app, &w, &w.token, "move-key-0001", json!({"type": "move_to", "x": 10, "y": 64, "z": -3})).await;
    assert!(!is_error, "{wf}");
    assert_eq!((wf["status"].as_str(), wf["poll_after_ms"].as_u64()), (Some("queued"), Some(500)));
    assert_eq!(wf["answer_authority"], false);
    assert_eq!(wf["terminal_eligible"], false);
    let wf_ref = wf["workflow_ref"].as_str().unwrap().to_owned();

    let (s, p) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!(s, 200, "{p}");
    let cmd = p["commands"][0].clone();
    assert_eq!((cmd["workflow_ref"].as_str(), cmd["native_id"].as_str()), (Some(wf_ref.as_str()), Some(STEVE)));
    assert_eq!(cmd["step"], json!({"type": "move_to", "x": 10, "y": 64, "z": -3, "range": 1}));
    assert_eq!(status(&app, &w, &wf_ref).await["status"], "dispatched");
    let (_, p) = poll(&app, &w, epoch, json!([ack(&cmd, 1, "accepted", Value::Null)])).await;
    assert_eq!(p["acks"][0]["outcome"], "applied");
    assert!(p["commands"].as_array().unwrap().is_empty(), "an accepted command is not redelivered: {p}");
    assert_eq!(status(&app, &w, &wf_ref).await["status"], "running");
    // A replayed sequence number is refused; the connector's "ok" alone is not enough.
    let (_, p) = poll(&app, &w, epoch, json!([ack(&cmd, 1, "progress", Value::Null)])).await;
    assert_eq!(p["acks"][0]["outcome"], "stale_seq");
    let (_, p) = poll(&app, &w, epoch, json!([ack(&cmd, 2, "completed", json!({"position": [11, 64, -3]}))])).await;
    assert_eq!(p["acks"][0]["outcome"], "applied");
    let done = status(&app, &w, &wf_ref).await;
    assert_eq!((done["status"].as_str(), done["poll_after_ms"].clone()), (Some("succeeded"), Value::Null));
    assert!(done["last_observation_at"].is_string());
    assert_eq!(done["late_effects_possible"], false);

    // Reported two blocks off with range 1: postcondition_unmet.
    let (_, wf) = act(&app, &w, &w.token, "move-key-0002", json!({"type": "move_to", "x": 0, "y": 64, "z": 0})).await;
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    let cmd = p["commands"][0].clone();
    poll(&app, &w, epoch, json!([ack(&cmd, 1, "completed", json!({"position": [2, 64, 0]}))])).await;
    let failed = status(&app, &w, wf["workflow_ref"].as_str().unwrap()).await;
    assert_eq!((failed["status"].as_str(), failed["reason"].as_str()), (Some("failed"), Some("postcondition_unmet")));
}

async fn every_typed_refusal_of_scope_membership_authority_and_bounds(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    register(&app, &w).await;
    let mv = json!({"type": "move_to", "x": 1, "y": 64, "z": 1});
    // Before any selection.
    let (is_error, e) = act(&app, &w, &w.token, "refuse-key-01", mv.clone()).await;
    assert_eq!((is_error, err(&e)), (true, "subject_not_selected"));
    select_first(&app, &w, &w.token).await;
    // Scope: reading the room is not enough to act.
    let reader = app.token_for("alice", "tenant-a", &["helix.rooms.read"]).await;
    let (is_error, e) = act(&app, &w, &reader, "refuse-key-02", mv.clone()).await;
    assert_eq!((is_error, err(&e)), (true, "insufficient_scope"));
    // Membership: another account's room is not found.
    let carol = app.token_for("carol", "tenant-a", ALL).await;
    let (_, e) = act(&app, &w, &carol, "refuse-key-03", mv.clone()).await;
    assert_eq!(err(&e), "not_found");
    // Authority: a member without it.
    let bob = join_bob(&app, &w).await;
    let (_, e) = act(&app, &w, &bob, "refuse-key-04", mv.clone()).await;
    assert_eq!(err(&e), "action_authority_required");
    // Bounds the service enforces (after the published schema): each a typed refusal.
    for (action, reason) in [
        (json!({"type": "chat", "text": "/op alice"}), "chat_command"),
        (json!({"type": "place_block", "x": 1, "y": 64, "z": 1, "item": "minecraft:tnt", "face": "up"}), "denied"),
        (json!({"type": "sequence", "steps": [{"type": "chat", "text": "/kill @a"}]}), "chat_command"),
    ] {
        let (is_error, e) = act(&app, &w, &w.token, "refuse-key-05", action.clone()).await;
        assert_eq!(
            (is_error, err(&e), e["error"]["details"]["reason"].as_str()),
            (true, "action_refused", Some(reason)),
            "{action}"
        );
    }
    // An unknown type or an out-of-range field never reaches the service: the published
    // schema refuses it (a tool result naming the field and the rule), and nothing is queued.
    for action in [
        json!({"type": "run_command", "command": "/op alice"}),
        json!({"type": "wait", "ticks": 0}),
        json!({"type": "move_to", "x": 1, "y": 64, "z": 1, "range": 4}),
        json!({"type": "move_to", "x": 1, "y": 400, "z": 1}),
        json!({"type": "chat", "text": "x".repeat(257)}),
    ] {
        let args = json!({ "room_id": w.room_id, "idempotency_key": "refuse-key-06", "action": action });
        let (code, body) = app
            .rpc("/mcp", &w.token, "tools/call", json!({ "name": "helix_minecraft_player_action", "arguments": args }))
            .await;
        let result = &body["result"];
        assert_eq!((code, &result["isError"]), (200, &json!(true)), "{body}");
        assert_eq!(result["structuredContent"]["error"]["code"], "invalid_request", "{body}");
        assert!(result["structuredContent"]["error"]["details"]["field"].as_str().unwrap().starts_with("action"));
    }
    let (_, p) = poll(&app, &w, 1, json!([])).await;
    assert!(p["commands"].as_array().unwrap().is_empty(), "nothing was queued: {p}");
}

async fn one_subject_has_one_holder_and_a_changed_directory_makes_refs_stale(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    register(&app, &w).await;
    let bob = join_bob(&app, &w).await;
    let (a, b) = tokio::join!(select_first(&app, &w, &w.token), select_first(&app, &w, &bob));
    let outcomes = [a, b];
    let held = outcomes.iter().filter(|(is_error, _)| !is_error).count();
    assert_eq!(held, 1, "exactly one holds it: {outcomes:?}");
    let loser = outcomes.iter().find(|(is_error, _)| *is_error).unwrap();
    assert_eq!(err(&loser.1), "subject_conflict");
    // The directory changes: the old subject_ref is stale.
    let old = subjects(&app, &w, &w.token).await["environments"][0]["subjects"][0]["subject_ref"].clone();
    let alex = json!([{ "native_id": STEVE, "display_name": "Steve", "online": true }, { "native_id": "b3f1", "display_name": "Alex", "online": true }]);
    let (s, _) = connector(&app, &w.credential, "poll", json!({ "epoch": 1, "subjects": alex })).await;
    assert_eq!(s, 200);
    let args = json!({ "room_id": w.room_id, "environment_binding_id": w.binding_id, "subject_ref": old });
    let (is_error, e) = tool(&app, &w.token, "helix_environment_subject_select", args).await;
    assert_eq!((is_error, err(&e)), (true, "subject_stale"));
}

async fn sixteen_concurrent_identical_actions_make_one_workflow(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    register(&app, &w).await;
    select_first(&app, &w, &w.token).await;
    let calls = (0..16).map(|_| act(&app, &w, &w.token, "same-key-0001", json!({"type": "wait", "ticks": 5})));
    let results = futures::future::join_all(calls).await;
    let refs: std::collections::BTreeSet<String> = results
        .iter()
        .filter(|(is_error, _)| !is_error)
        .map(|(_, v)| v["workflow_ref"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(refs.len(), 1, "{results:?}");
    for (is_error, v) in results.iter().filter(|(is_error, _)| *is_error) {
        assert!(*is_error && v["error"]["retryable"] == true, "only a retryable in-progress answer: {v}");
    }
    let (_, p) = poll(&app, &w, 1, json!([])).await;
    assert_eq!(p["commands"].as_array().unwrap().len(), 1, "{p}");
    // The same key with another action is a conflict.
    let (_, e) = act(&app, &w, &w.token, "same-key-0001", json!({"type": "wait", "ticks": 6})).await;
    assert_eq!(err(&e), "idempotency_conflict");
}

async fn an_old_epoch_cannot_acknowledge_and_a_new_one_pauses_its_work(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let old = register(&app, &w).await;
    select_first(&app, &w, &w.token).await;
    let (_, wf) = act(&app, &w, &w.token, "epoch-key-01", json!({"type": "move_to", "x": 3, "y": 64, "z": 3})).await;
    let wf_ref = wf["workflow_ref"].as_str().unwrap().to_owned();
    let (_, p) = poll(&app, &w, old, json!([])).await;
    let cmd = p["commands"][0].clone();
    let new = register(&app, &w).await;
    assert_eq!(new, old + 1);
    let paused = status(&app, &w, &wf_ref).await;
    assert_eq!(
        (paused["status"].as_str(), paused["reason"].as_str()),
        (Some("paused"), Some("connector_epoch_changed"))
    );
    let (s, e) = poll(&app, &w, old, json!([ack(&cmd, 1, "completed", json!({"position": [3, 64, 3]}))])).await;
    assert_eq!(
        (s, code(&e), e["error"]["details"]["current_epoch"].as_u64()),
        (409, "connector_epoch_stale", Some(new))
    );
    assert_eq!(status(&app, &w, &wf_ref).await["status"], "paused", "the old epoch's ack was not applied");
    // The new epoch cannot acknowledge the old lease either; resume re-dispatches it.
    let (_, p) = poll(&app, &w, new, json!([ack(&cmd, 1, "completed", json!({"position": [3, 64, 3]}))])).await;
    assert_eq!(p["acks"][0]["outcome"], "stale_epoch");
    let args = json!({ "room_id": w.room_id, "workflow_ref": wf_ref, "control": "resume" });
    let (is_error, v) = tool(&app, &w.token, "helix_minecraft_workflow_control", args).await;
    assert_eq!((is_error, v["status"].as_str()), (false, Some("queued")), "{v}");
    let (_, p) = poll(&app, &w, new, json!([])).await;
    let cmd = p["commands"][0].clone();
    poll(&app, &w, new, json!([ack(&cmd, 1, "completed", json!({"position": [3, 64, 3]}))])).await;
    assert_eq!(status(&app, &w, &wf_ref).await["status"], "succeeded");
}

async fn emergency_stop_stops_and_refuses_new_actions_until_a_person_clears_it(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    register(&app, &w).await;
    select_first(&app, &w, &w.token).await;
    let (_, a) = act(&app, &w, &w.token, "stop-key-0001", json!({"type": "wait", "ticks": 100})).await;
    let (_, b) = act(&app, &w, &w.token, "stop-key-0002", json!({"type": "chat", "text": "hello"})).await;
    let (_, p) = poll(&app, &w, 1, json!([])).await;
    assert_eq!(p["commands"].as_array().unwrap().len(), 2);
    let args = json!({ "room_id": w.room_id, "workflow_ref": a["workflow_ref"], "control": "emergency_stop" });
    let (is_error, v) = tool(&app, &w.token, "helix_minecraft_workflow_control", args).await;
    assert_eq!((is_error, v["status"].as_str()), (false, Some("stopped")), "{v}");
    assert_eq!(status(&app, &w, b["workflow_ref"].as_str().unwrap()).await["status"], "stopped");
    // The connector learns it on its next poll.
    let (_, p) = poll(&app, &w, 1, json!([])).await;
    assert_eq!((p["emergency_stop_active"].as_bool(), p["emergency_stop_generation"].as_u64()), (Some(true), Some(1)));
    assert!(p["commands"].as_array().unwrap().is_empty());
    let (_, e) = act(&app, &w, &w.token, "stop-key-0003", json!({"type": "wait", "ticks": 1})).await;
    assert_eq!(err(&e), "emergency_stop_active");
    // Only a person in the browser clears it.
    let clear = json!({ "room_id": w.room_id, "environment_binding_id": w.binding_id });
    let res = app
        .browser(Method::POST, "/api/account/room-connectors/emergency-stop/clear", &w.cookie)
        .json(&clear)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let (is_error, v) = act(&app, &w, &w.token, "stop-key-0003", json!({"type": "wait", "ticks": 1})).await;
    assert_eq!((is_error, v["status"].as_str()), (false, Some("queued")), "{v}");
    // Cancel is idempotent on a terminal workflow.
    let args = json!({ "room_id": w.room_id, "workflow_ref": a["workflow_ref"], "control": "cancel" });
    assert_eq!(tool(&app, &w.token, "helix_minecraft_workflow_control", args).await.1["status"], "stopped");
}

/// The built `helix` binary beside this test binary (`target/debug/helix`).
pub(crate) fn helix_bin() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("helix");
    assert!(bin.exists(), "build the cli first (cargo build -p helix-cli): {}", bin.display());
    bin
}

/// `helix connector-sim` on the configuration the pairing page showed, pointed at this
/// server, once it has registered. The directory holds that configuration: keep it while
/// the simulator runs.
pub(crate) async fn connector_sim(app: &TestApp, w: &World) -> (tempfile::TempDir, std::process::Child) {
    let dir = tempfile::tempdir().unwrap();
    // The configuration the pairing page showed, pointed at this server.
    let config = json!({
        "protocol": "helix.connector.v1", "base_url": app.base, "environment_binding_id": w.binding_id,
        "room_id": w.room_id, "world_id": "overworld", "credential_env": "HELIX_CONNECTOR_CREDENTIAL",
        "poll_interval_ms": 100,
    });
    let path = dir.path().join("connector.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let sim = std::process::Command::new(helix_bin())
        .args(["connector-sim", "--config", path.to_str().unwrap(), "--interval-ms", "100", "--polls", "80"])
        .env("HELIX_CONNECTOR_CREDENTIAL", &w.credential)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Registered: the subject appears.
    let mut tries = 0;
    while subjects(app, w, &w.token).await["environments"][0]["subjects"].as_array().is_none_or(|s| s.is_empty()) {
        tries += 1;
        assert!(tries < 50, "the simulator never registered");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    (dir, sim)
}

async fn connector_sim_drives_a_sequence_to_succeeded_with_verified_postconditions(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let (_dir, mut sim) = connector_sim(&app, &w).await;
    select_first(&app, &w, &w.token).await;
    let sequence = json!({"type": "sequence", "steps": [
        {"type": "move_to", "x": 5, "y": 64, "z": 4},
        {"type": "break_block", "x": 5, "y": 64, "z": 5, "expected_block": "minecraft:oak_log"},
        {"type": "craft", "item": "minecraft:oak_planks", "times": 2},
        {"type": "chat", "text": "done"},
    ]});
    let (is_error, wf) = act(&app, &w, &w.token, "sim-key-0001", sequence).await;
    assert!(!is_error, "{wf}");
    let wf_ref = wf["workflow_ref"].as_str().unwrap().to_owned();
    let mut last = Value::Null;
    for _ in 0..60 {
        last = status(&app, &w, &wf_ref).await;
        if !["queued", "dispatched", "running", "verifying"].contains(&last["status"].as_str().unwrap_or("")) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(last["status"], "succeeded", "{last}");
    assert_eq!((last["budget"]["steps_done"].as_u64(), last["budget"]["steps_total"].as_u64()), (Some(4), Some(4)));
    // The block is gone now: breaking it again fails in the world, not in Helix's checks.
    let again = json!({"type": "break_block", "x": 5, "y": 64, "z": 5, "expected_block": "minecraft:oak_log"});
    let (_, wf) = act(&app, &w, &w.token, "sim-key-0002", again).await;
    let wf_ref = wf["workflow_ref"].as_str().unwrap().to_owned();
    for _ in 0..60 {
        last = status(&app, &w, &wf_ref).await;
        if last["status"] == "failed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        (last["status"].as_str(), last["reason"].as_str()),
        (Some("failed"), Some("step_failed:unexpected_block"))
    );
    sim.kill().ok();
    sim.wait().ok();
}

on_both_backends!(
    connector_sim_drives_a_sequence_to_succeeded_with_verified_postconditions,
    pairing_shows_the_credential_once_and_admits_only_the_connector_routes,
    a_move_reaches_succeeded_only_on_a_verified_position,
    every_typed_refusal_of_scope_membership_authority_and_bounds,
    one_subject_has_one_holder_and_a_changed_directory_makes_refs_stale,
    sixteen_concurrent_identical_actions_make_one_workflow,
    an_old_epoch_cannot_acknowledge_and_a_new_one_pauses_its_work,
    emergency_stop_stops_and_refuses_new_actions_until_a_person_clears_it,
);
