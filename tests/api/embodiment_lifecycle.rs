//! The action connector's lifecycle on both store backends: the owner rotates its
//! credential (the old one refused at once) or revokes the pairing (its open workflows
//! ended, the connector refused), both from the pairing page's form with a confirmation
//! step; the cancel list names what Helix took away from the connector; a dead-man halt
//! is recorded; a re-registration never leaves a held mutation resumable.

use helix_integration_tests::*;
use reqwest::Method;
use serde_json::{Value, json};

use super::embodiment::{World, ack, act, err, paired, poll, register, select_first, status};

async fn credential_route(app: &TestApp, cookie: &str, w: &World, op: &str, body: Value) -> (u16, Value) {
    let path = format!("/api/account/room-connectors/{}/{op}", w.binding_id);
    read(app.browser(Method::POST, &path, cookie).json(&body).send().await.unwrap()).await
}

async fn poll_as(app: &TestApp, credential: &str, epoch: u64) -> (u16, Value) {
    let url = format!("{}/api/connectors/v1/poll", app.base);
    let body = json!({ "epoch": epoch, "acks": [] });
    read(app.http.post(url).bearer_auth(credential).json(&body).send().await.unwrap()).await
}

async fn form(app: &TestApp, w: &World, op: &str, confirm: bool) -> (u16, String) {
    let mut fields =
        vec![("room_id", w.room_id.as_str()), ("environment_binding_id", w.binding_id.as_str()), ("op", op)];
    if confirm {
        fields.push(("confirm", "yes"));
    }
    app.form(&w.cookie, "/account/room-connectors/credential", &fields).await
}

async fn rotation_refuses_the_old_credential_at_once_and_the_new_one_polls_on(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register(&app, &w).await;
    // Another signed-in person, a foreign origin and an unknown field change nothing.
    let bob = app.session("bob").await;
    app.developer("bob").await;
    let (s, e) = credential_route(&app, &bob, &w, "rotate", json!({ "room_id": w.room_id })).await;
    assert_eq!((s, code(&e)), (404, "not_found"), "{e}");
    let path = format!("{}/api/account/room-connectors/{}/rotate", app.base, w.binding_id);
    let res = app
        .http
        .post(&path)
        .header("cookie", &w.cookie)
        .header("origin", "https://evil.example")
        .header("sec-fetch-site", "cross-site")
        .json(&json!({ "room_id": w.room_id }))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_client_error(), "a cross-site rotation is refused: {}", res.status());
    let (s, _) = credential_route(&app, &w.cookie, &w, "rotate", json!({ "room_id": w.room_id, "x": 1 })).await;
    assert_eq!(s, 400);
    assert_eq!(poll_as(&app, &w.credential, epoch).await.0, 200, "nothing rotated yet");

    let (s, r) = credential_route(&app, &w.cookie, &w, "rotate", json!({ "room_id": w.room_id })).await;
    assert_eq!(s, 200, "{r}");
    let fresh = r["connector_credential"].as_str().unwrap().to_owned();
    assert!(fresh.starts_with("hac_") && fresh != w.credential);
    assert_eq!(
        (r["shown_once"].as_bool(), r["connector_config"]["environment_binding_id"].as_str()),
        (Some(true), Some(w.binding_id.as_str()))
    );
    let (s, e) = poll_as(&app, &w.credential, epoch).await;
    assert_eq!((s, code(&e)), (401, "connector_credential_invalid"), "the old credential is refused at once");
    let (s, p) = poll_as(&app, &fresh, epoch).await;
    assert_eq!((s, p["epoch"].as_u64()), (200, Some(epoch)), "the epoch stays: {p}");

    // The page's form: a confirmation first (nothing rotated), then the credential once.
    let (s, html) = form(&app, &w, "rotate", false).await;
    assert!(s == 200 && html.contains("id=\"confirm-rotate\""), "{html}");
    assert_eq!(poll_as(&app, &fresh, epoch).await.0, 200, "an unconfirmed rotation changes nothing");
    let (s, html) = form(&app, &w, "rotate", true).await;
    assert_eq!(s, 200);
    let shown = helix_integration_tests::support::browser::between(&html, "id=\"rotated-credential\">", "<");
    assert!(shown.starts_with("hac_") && shown != fresh, "{html}");
    assert_eq!(poll_as(&app, &fresh, epoch).await.0, 401);
    assert_eq!(poll_as(&app, shown, epoch).await.0, 200);
}

async fn revocation_ends_every_open_workflow_and_refuses_the_connector(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register(&app, &w).await;
    select_first(&app, &w, &w.token).await;
    let brk = json!({"type": "break_block", "x": 5, "y": 64, "z": 5, "expected_block": "minecraft:oak_log"});
    let (_, held) = act(&app, &w, &w.token, "revoke-key-01", brk).await;
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!(p["commands"][0]["workflow_ref"], held["workflow_ref"], "{p}");
    let (_, queued) = act(&app, &w, &w.token, "revoke-key-02", json!({"type": "wait", "ticks": 5})).await;

    let (s, html) = form(&app, &w, "revoke", false).await;
    assert!(s == 200 && html.contains("id=\"confirm-revoke\""), "{html}");
    assert_eq!(status(&app, &w, queued["workflow_ref"].as_str().unwrap()).await["status"], "queued");
    assert_eq!(form(&app, &w, "revoke", true).await.0, 303, "post/redirect/get");

    let s = status(&app, &w, held["workflow_ref"].as_str().unwrap()).await;
    assert_eq!(
        (s["status"].as_str(), s["reason"].as_str(), s["late_effects_possible"].as_bool()),
        (Some("outcome_unknown"), Some("connector_revoked"), Some(true)),
        "a block break the connector held may have happened: {s}"
    );
    let s = status(&app, &w, queued["workflow_ref"].as_str().unwrap()).await;
    assert_eq!((s["status"].as_str(), s["reason"].as_str()), (Some("stopped"), Some("connector_revoked")));
    let (s, e) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!((s, code(&e)), (401, "connector_credential_invalid"));
    // Revoking again answers the same; a revoked pairing cannot be rotated back to life.
    let (s, r) = credential_route(&app, &w.cookie, &w, "revoke", json!({ "room_id": w.room_id })).await;
    assert_eq!((s, r["status"].as_str(), r["workflows_ended"].as_u64()), (200, Some("revoked"), Some(0)), "{r}");
    let (s, _) = credential_route(&app, &w.cookie, &w, "rotate", json!({ "room_id": w.room_id })).await;
    assert_eq!(s, 404);
    // The revoked environment is gone for agents: no selection in it survives.
    let (is_error, e) = act(&app, &w, &w.token, "revoke-key-03", json!({"type": "wait", "ticks": 5})).await;
    assert_eq!((is_error, err(&e)), (true, "subject_not_selected"), "{e}");
}

async fn a_dead_man_halt_pauses_held_moves_and_marks_held_mutations_unknown(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register(&app, &w).await;
    select_first(&app, &w, &w.token).await;
    let (_, mv) = act(&app, &w, &w.token, "deadman-key-1", json!({"type": "move_to", "x": 90, "y": 64, "z": 0})).await;
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    let cmd = p["commands"][0].clone();
    poll(&app, &w, epoch, json!([ack(&cmd, 1, "accepted", Value::Null)])).await;
    assert_eq!(status(&app, &w, mv["workflow_ref"].as_str().unwrap()).await["status"], "running");
    let brk = json!({"type": "break_block", "x": 6, "y": 64, "z": 5, "expected_block": "minecraft:oak_log"});
    let (_, b) = act(&app, &w, &w.token, "deadman-key-2", brk).await;
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert!(p["commands"].as_array().unwrap().iter().any(|c| c["workflow_ref"] == b["workflow_ref"]), "{p}");

    let body = json!({ "epoch": epoch, "acks": [], "dead_man_halted": true });
    let url = format!("{}/api/connectors/v1/poll", app.base);
    let (s, p) = read(app.http.post(url).bearer_auth(&w.credential).json(&body).send().await.unwrap()).await;
    assert_eq!(s, 200, "{p}");
    let moved = status(&app, &w, mv["workflow_ref"].as_str().unwrap()).await;
    assert_eq!((moved["status"].as_str(), moved["reason"].as_str()), (Some("paused"), Some("dead_man_halted")));
    let broke = status(&app, &w, b["workflow_ref"].as_str().unwrap()).await;
    assert_eq!(
        (broke["status"].as_str(), broke["reason"].as_str()),
        (Some("outcome_unknown"), Some("dead_man_halted"))
    );
    assert!(p["commands"].as_array().unwrap().is_empty(), "nothing is redelivered after the halt: {p}");
    assert_eq!(p["cancel"], json!([mv["workflow_ref"]]), "the paused move is in the cancel list: {p}");
    // The paused move resumes under a fresh lease; the halted command's late acknowledgement
    // is recorded (not applied) and answered as final.
    let args = json!({ "room_id": w.room_id, "workflow_ref": mv["workflow_ref"], "control": "resume" });
    let (_, v) = super::embodiment::tool(&app, &w.token, "helix_minecraft_workflow_control", args).await;
    assert_eq!(v["status"], "queued", "{v}");
    let (_, p) = poll(&app, &w, epoch, json!([ack(&cmd, 2, "completed", json!({"position": [90, 64, 0]}))])).await;
    assert_eq!(p["acks"][0]["outcome"], "recorded_late", "{p}");
    assert_ne!(p["commands"][0]["lease_token"], cmd["lease_token"], "{p}");
    let resumed = status(&app, &w, mv["workflow_ref"].as_str().unwrap()).await;
    assert_eq!(resumed["status"], "dispatched", "{resumed}");
    assert_eq!(resumed["late_acknowledgements"][0]["status"], "completed", "{resumed}");
}

async fn the_cancel_list_names_what_helix_took_from_the_connector_and_a_new_epoch_never_resumes_a_held_mutation(
    backend: Backend,
) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let old = register(&app, &w).await;
    select_first(&app, &w, &w.token).await;
    // A workflow the owner cancels while the connector holds it: in the list until acknowledged.
    let (_, a) = act(&app, &w, &w.token, "cancel-key-01", json!({"type": "wait", "ticks": 200})).await;
    let (_, p) = poll(&app, &w, old, json!([])).await;
    let cmd = p["commands"][0].clone();
    let args = json!({ "room_id": w.room_id, "workflow_ref": a["workflow_ref"], "control": "cancel" });
    let (_, v) = super::embodiment::tool(&app, &w.token, "helix_minecraft_workflow_control", args).await;
    assert_eq!(v["status"], "cancel_requested", "{v}");
    let (_, p) = poll(&app, &w, old, json!([])).await;
    assert_eq!(p["cancel"], json!([a["workflow_ref"]]), "{p}");
    let (_, p) = poll(&app, &w, old, json!([ack(&cmd, 1, "completed", json!({"position": [0, 64, 0]}))])).await;
    assert_eq!(p["acks"][0]["outcome"], "applied", "{p}");
    assert_eq!(status(&app, &w, a["workflow_ref"].as_str().unwrap()).await["status"], "cancelled");
    assert_eq!(p["cancel"], json!([]), "{p}");
    // A re-registration: a held wait pauses, a held mutation is never left resumable.
    let (_, c) = act(&app, &w, &w.token, "cancel-key-02", json!({"type": "chat", "text": "hello"})).await;
    let (_, p) = poll(&app, &w, old, json!([])).await;
    assert_eq!(p["commands"][0]["workflow_ref"], c["workflow_ref"], "{p}");
    let new = register(&app, &w).await;
    let s = status(&app, &w, c["workflow_ref"].as_str().unwrap()).await;
    assert_eq!(
        (s["status"].as_str(), s["reason"].as_str()),
        (Some("outcome_unknown"), Some("connector_epoch_changed"))
    );
    let args = json!({ "room_id": w.room_id, "workflow_ref": c["workflow_ref"], "control": "resume" });
    let (is_error, e) = super::embodiment::tool(&app, &w.token, "helix_minecraft_workflow_control", args).await;
    assert_eq!((is_error, err(&e)), (true, "workflow_not_resumable"), "{e}");
    let (s, _) = poll(&app, &w, new, json!([])).await;
    assert_eq!(s, 200);
}

async fn a_closed_rooms_open_workflows_end_at_its_connectors_next_request(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register(&app, &w).await;
    select_first(&app, &w, &w.token).await;
    let (_, held) = act(&app, &w, &w.token, "closed-key-01", json!({"type": "wait", "ticks": 200})).await;
    poll(&app, &w, epoch, json!([])).await;
    let (_, queued) = act(&app, &w, &w.token, "closed-key-02", json!({"type": "chat", "text": "hi"})).await;
    // The room closes (there is no external close operation: the stored status changes).
    let store = app.state.services.store.clone();
    let mut room = store.get(&helix_core::service::records::rooms::room_key(&w.room_id)).await.unwrap().unwrap();
    room.attrs.insert("status".into(), helix_core::store::Attr::S("closed".into()));
    store.put(room, None).await.unwrap();
    let (s, e) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!((s, code(&e)), (401, "connector_credential_invalid"));
    for wf in [&held, &queued] {
        let r = wf["workflow_ref"].as_str().unwrap();
        let got = helix_core::service::records::embodiment::read_workflow(store.as_ref(), &w.room_id, r);
        let got = got.await.unwrap().unwrap();
        let state = serde_json::to_value(got.state).unwrap();
        assert_eq!((state.as_str(), got.reason.as_deref()), (Some("stopped"), Some("room_closed")), "{r}");
    }
}

on_both_backends!(
    a_closed_rooms_open_workflows_end_at_its_connectors_next_request,
    rotation_refuses_the_old_credential_at_once_and_the_new_one_polls_on,
    revocation_ends_every_open_workflow_and_refuses_the_connector,
    a_dead_man_halt_pauses_held_moves_and_marks_held_mutations_unknown,
    the_cancel_list_names_what_helix_took_from_the_connector_and_a_new_epoch_never_resumes_a_held_mutation,
);
