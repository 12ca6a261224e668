//! The REST twins of the player-embodiment tools under `/api/v1/rooms/{room_id}/…`: the
//! same services, scopes and typed refusals as the MCP tools, over the bearer lane.

use helix_integration_tests::*;
use serde_json::{Value, json};

use crate::embodiment::{ALL, STEVE, paired, poll, register, tool};

async fn get(app: &TestApp, token: &str, path: &str) -> (u16, Value) {
    read(app.get(path, token).send().await.unwrap()).await
}

async fn post(app: &TestApp, token: &str, path: &str, key: Option<&str>, body: Value) -> (u16, Value, String) {
    let mut req = app.post(path, token).json(&body);
    if let Some(k) = key {
        req = req.header("idempotency-key", k);
    }
    let res = req.send().await.unwrap();
    let replayed =
        res.headers().get("idempotency-replayed").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let (status, v) = read(res).await;
    (status, v, replayed)
}

async fn the_rest_twins_call_the_same_services_as_the_tools(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register(&app, &w).await;
    let room = format!("/api/v1/rooms/{}", w.room_id);

    let (status, list) = get(&app, &w.token, &format!("{room}/environment-subjects")).await;
    assert_eq!(status, 200, "{list}");
    assert!(!list.to_string().contains(STEVE), "native ids never leave: {list}");
    let (_, from_tool) = tool(&app, &w.token, "helix_environment_subject_list", json!({ "room_id": w.room_id })).await;
    assert_eq!(list, from_tool, "the same service answers both");
    let subject_ref = list["environments"][0]["subjects"][0]["subject_ref"].clone();

    let select = format!("{room}/environment-subjects/select");
    let body = json!({ "environment_binding_id": w.binding_id, "subject_ref": subject_ref });
    let (status, v, _) = post(&app, &w.token, &select, None, json!({ "subject_ref": subject_ref, "extra": 1 })).await;
    assert_eq!((status, code(&v)), (400, "invalid_request"), "unknown fields are refused: {v}");
    let (status, sel, _) = post(&app, &w.token, &select, None, body).await;
    assert_eq!(status, 200, "{sel}");
    assert_eq!(sel["schema"], "helix.environment_subject_selection.v1", "{sel}");

    // Scopes are the tools' scopes: acting needs helix.environment_actions.write.
    let reader = app.token_for("alice", "tenant-a", &["helix.rooms.read", "helix.environment_actions.read"]).await;
    let actions = format!("{room}/player-actions");
    let move_to = json!({ "action": {"type": "move_to", "x": 2, "y": 64, "z": 0} });
    let (status, v, _) = post(&app, &reader, &actions, Some("rest-act-0001"), move_to.clone()).await;
    assert_eq!((status, code(&v)), (403, "insufficient_scope"), "{v}");

    let (status, wf, replayed) = post(&app, &w.token, &actions, Some("rest-act-0001"), move_to.clone()).await;
    assert_eq!((status, wf["status"].as_str(), replayed.as_str()), (202, Some("queued"), "false"), "{wf}");
    let (status, again, replayed) = post(&app, &w.token, &actions, Some("rest-act-0001"), move_to).await;
    assert_eq!((status, replayed.as_str()), (202, "true"));
    assert_eq!(again["workflow_ref"], wf["workflow_ref"], "one key, one workflow");
    let (status, v, _) = post(&app, &w.token, &actions, None, json!({ "action": {"type": "wait", "ticks": 1} })).await;
    assert_eq!(status, 400, "the Idempotency-Key header is required: {v}");
    let chat = json!({ "action": {"type": "chat", "text": "/op me"} });
    let (status, v, _) = post(&app, &w.token, &actions, Some("rest-act-0002"), chat).await;
    assert_eq!(code(&v), "action_refused", "{status} {v}");

    let wf_ref = wf["workflow_ref"].as_str().unwrap();
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!(p["commands"][0]["workflow_ref"], wf_ref, "{p}");
    let (status, st) = get(&app, &reader, &format!("{room}/player-workflows/{wf_ref}")).await;
    assert_eq!((status, st["status"].as_str()), (200, Some("dispatched")), "{st}");
    let (status, v) = get(&app, &w.token, &format!("{room}/player-workflows/wf_00000000000000000000")).await;
    assert_eq!((status, code(&v)), (404, "not_found"), "{v}");

    let control = format!("{room}/player-workflows/{wf_ref}/control");
    let (status, v, _) = post(&app, &w.token, &control, None, json!({ "control": "reboot" })).await;
    assert_eq!(status, 400, "{v}");
    let (status, v, _) = post(&app, &reader, &control, None, json!({ "control": "cancel" })).await;
    assert_eq!((status, code(&v)), (403, "insufficient_scope"), "{v}");
    let (status, stopped, _) = post(&app, &w.token, &control, None, json!({ "control": "emergency_stop" })).await;
    assert_eq!((status, stopped["status"].as_str()), (200, Some("stopped")), "{stopped}");
    let (_, v) = tool(
        &app,
        &w.token,
        "helix_minecraft_workflow_status",
        json!({ "room_id": w.room_id, "workflow_ref": wf_ref }),
    )
    .await;
    assert_eq!(v["status"], "stopped");

    // Another account's bearer sees nothing of this room.
    let mallory = app.token_for("mallory", "tenant-a", ALL).await;
    let (status, v) = get(&app, &mallory, &format!("{room}/environment-subjects")).await;
    assert!(status == 404 || status == 403, "{status} {v}");
}

on_both_backends!(the_rest_twins_call_the_same_services_as_the_tools);
