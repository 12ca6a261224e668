//! Action authority for members, on both store backends: the owner grants it on `/rooms`
//! (a plain form, post/redirect/get), a revoke asks for confirmation first, and a revoke
//! is effective at once: new actions are refused, a queued workflow pauses at dispatch and
//! a dispatched one at its next acknowledgement. And the room page's Emergency Stop.

use helix_integration_tests::support::browser::between;
use helix_integration_tests::*;
use serde_json::json;

use super::embodiment::{World, ack, act, err, join_bob, paired, poll, register, select_first, status};

/// The owner's `/rooms` page and the member reference of bob (the one member row with a form).
pub(crate) async fn bob_ref(app: &TestApp, w: &World) -> (String, String) {
    let res = app.browser(reqwest::Method::GET, "/rooms", &w.cookie).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    let row = between(&html, "action=\"/rooms/members/authority\">", "</form>").to_owned();
    (between(&row, "name=\"account_ref\" value=\"", "\"").to_owned(), html)
}

pub(crate) async fn set_authority(
    app: &TestApp,
    w: &World,
    member: &str,
    authority: &str,
    confirm: bool,
) -> (u16, String) {
    let mut form = vec![("room_id", w.room_id.as_str()), ("account_ref", member), ("authority", authority)];
    if confirm {
        form.push(("confirm", "yes"));
    }
    app.form(&w.cookie, "/rooms/members/authority", &form).await
}

async fn a_member_acts_only_with_authority_the_owner_grants_and_revokes_at_once(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    register(&app, &w).await;
    let bob = join_bob(&app, &w).await;
    let (is_error, sel) = select_first(&app, &w, &bob).await;
    assert!(!is_error, "{sel}");
    let wait = json!({"type": "wait", "ticks": 5});
    let (is_error, e) = act(&app, &w, &bob, "auth-key-0001", wait.clone()).await;
    assert_eq!((is_error, err(&e)), (true, "action_authority_required"));

    // The owner grants it on /rooms (redirect back; the page shows it).
    let (member, html) = bob_ref(&app, &w).await;
    assert!(html.contains("class=\"grant-authority\""), "{html}");
    assert_eq!(set_authority(&app, &w, &member, "grant", false).await.0, 303);
    let (_, html) = bob_ref(&app, &w).await;
    assert!(html.contains("class=\"revoke-authority\""), "{html}");
    let (is_error, a) = act(&app, &w, &bob, "auth-key-0001", wait.clone()).await;
    assert_eq!((is_error, a["status"].as_str()), (false, Some("queued")), "{a}");
    let (_, p) = poll(&app, &w, 1, json!([])).await;
    let cmd = p["commands"][0].clone();
    assert_eq!(cmd["workflow_ref"], a["workflow_ref"], "{p}");
    let (_, b) = act(&app, &w, &bob, "auth-key-0002", json!({"type": "chat", "text": "hi"})).await;
    assert_eq!(b["status"], "queued", "{b}");

    // A revoke asks first: nothing changes until it is confirmed.
    let (code, html) = set_authority(&app, &w, &member, "revoke", false).await;
    assert_eq!(code, 200);
    assert!(html.contains("id=\"confirm-revoke-authority\""), "{html}");
    let (_, c) = act(&app, &w, &bob, "auth-key-0003", wait.clone()).await;
    assert_eq!(c["status"], "queued", "{c}");
    assert_eq!(set_authority(&app, &w, &member, "revoke", true).await.0, 303);

    // Effective at once: new actions refused; the queued ones pause at dispatch, the
    // dispatched one at its acknowledgement (the step's outcome is not applied).
    let (_, e) = act(&app, &w, &bob, "auth-key-0004", wait.clone()).await;
    assert_eq!(err(&e), "action_authority_required");
    let (_, p) = poll(&app, &w, 1, json!([ack(&cmd, 1, "completed", json!({}))])).await;
    assert_eq!(p["acks"][0]["outcome"], "action_authority_revoked", "{p}");
    assert!(p["commands"].as_array().unwrap().is_empty(), "{p}");
    for wf in [&a, &b, &c] {
        let s = status(&app, &w, wf["workflow_ref"].as_str().unwrap()).await;
        assert_eq!((s["status"].as_str(), s["reason"].as_str()), (Some("paused"), Some("action_authority_revoked")));
    }
    // The member cannot resume it either.
    let args = json!({ "room_id": w.room_id, "workflow_ref": b["workflow_ref"], "control": "resume" });
    let (_, e) = super::embodiment::tool(&app, &bob, "helix_minecraft_workflow_control", args).await;
    assert_eq!(err(&e), "action_authority_required");
}

/// Only the owner manages authority; a bad value is a typed refusal.
async fn only_the_owner_grants_authority(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    join_bob(&app, &w).await;
    let (member, _) = bob_ref(&app, &w).await;
    let (code, _) = set_authority(&app, &w, &member, "forever", false).await;
    assert_eq!(code, 400);
    let bob_web = app.session("bob").await;
    let form = [("room_id", w.room_id.as_str()), ("account_ref", member.as_str()), ("authority", "grant")];
    assert_eq!(app.form(&bob_web, "/rooms/members/authority", &form).await.0, 404);
}

/// The room page's Emergency Stop: the owner's button stops the room's workflows, new
/// actions are refused until the person clears it there; a member has no such button.
async fn the_room_page_stops_and_only_a_person_clears_it(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    register(&app, &w).await;
    select_first(&app, &w, &w.token).await;
    let (_, a) = act(&app, &w, &w.token, "page-stop-01", json!({"type": "wait", "ticks": 100})).await;
    let (_, p) = poll(&app, &w, 1, json!([])).await;
    assert_eq!(p["commands"].as_array().unwrap().len(), 1, "{p}");
    let bob_web = {
        join_bob(&app, &w).await;
        app.session("bob").await
    };
    let room = [("room_id", w.room_id.as_str())];
    assert_eq!(app.form(&bob_web, "/rooms/emergency-stop", &room).await.0, 404);
    assert_eq!(app.form(&w.cookie, "/rooms/emergency-stop", &room).await.0, 303);
    assert_eq!(status(&app, &w, a["workflow_ref"].as_str().unwrap()).await["status"], "stopped");
    let (_, p) = poll(&app, &w, 1, json!([])).await;
    assert_eq!(p["emergency_stop_active"], true, "{p}");
    let (_, e) = act(&app, &w, &w.token, "page-stop-02", json!({"type": "wait", "ticks": 1})).await;
    assert_eq!(err(&e), "emergency_stop_active");
    assert_eq!(app.form(&bob_web, "/rooms/emergency-stop/clear", &room).await.0, 404);
    assert_eq!(app.form(&w.cookie, "/rooms/emergency-stop/clear", &room).await.0, 303);
    let (is_error, v) = act(&app, &w, &w.token, "page-stop-02", json!({"type": "wait", "ticks": 1})).await;
    assert_eq!((is_error, v["status"].as_str()), (false, Some("queued")), "{v}");
}

on_both_backends!(
    a_member_acts_only_with_authority_the_owner_grants_and_revokes_at_once,
    only_the_owner_grants_authority,
    the_room_page_stops_and_only_a_person_clears_it,
);
