//! A member's Emergency Stop of their own subject, on both store backends: the member
//! selects their player on `/rooms` ("Your identity in this environment"), stops it there
//! or with the `emergency_stop` control; only that subject's workflows stop, another
//! member's player keeps working, new actions on it are refused, the poll names it in
//! `stopped_subjects`, no agent can clear it and the person clears it on the page.

use helix_integration_tests::support::browser::between;
use helix_integration_tests::*;
use serde_json::{Value, json};

use super::embodiment::{
    World, ack, act, connector, err, join_bob, paired, poll, registration, status, subjects, tool,
};

const ALEX: &str = "alex-native-0001";

/// The connector reports Steve and Alex.
async fn register_two(app: &TestApp, w: &World) -> u64 {
    let players = json!([
        { "native_id": super::embodiment::STEVE, "display_name": "Steve", "online": true },
        { "native_id": ALEX, "display_name": "Alex", "online": true },
    ]);
    let (code, r) = connector(app, &w.credential, "register", registration(players)).await;
    assert_eq!(code, 200, "{r}");
    r["epoch"].as_u64().unwrap()
}

fn subject<'a>(list: &'a Value, name: &str) -> &'a Value {
    let all = list["environments"][0]["subjects"].as_array().unwrap();
    all.iter().find(|s| s["display_name"] == name).unwrap()
}

/// bob, joined, granted action authority by alice on `/rooms`; his browser session.
async fn bob_with_authority(app: &TestApp, w: &World) -> (String, String) {
    let bob = join_bob(app, w).await;
    let res = app.browser(reqwest::Method::GET, "/rooms", &w.cookie).send().await.unwrap();
    let html = res.text().await.unwrap();
    let row = between(&html, "action=\"/rooms/members/authority\">", "</form>").to_owned();
    let member = between(&row, "name=\"account_ref\" value=\"", "\"").to_owned();
    let form = [("room_id", w.room_id.as_str()), ("account_ref", member.as_str()), ("authority", "grant")];
    assert_eq!(app.form(&w.cookie, "/rooms/members/authority", &form).await.0, 303);
    (bob, app.session("bob").await)
}

async fn page(app: &TestApp, cookie: &str) -> String {
    let res = app.browser(reqwest::Method::GET, "/rooms", cookie).send().await.unwrap();
    assert_eq!(res.status(), 200);
    res.text().await.unwrap()
}

async fn a_member_stops_only_their_own_player_and_only_a_person_clears_it(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register_two(&app, &w).await;
    let (bob, bob_web) = bob_with_authority(&app, &w).await;
    let own = [("room_id", w.room_id.as_str()), ("environment_binding_id", w.binding_id.as_str())];

    // Without a selected subject the page's stop is a typed refusal, shown readably.
    let (code, html) = app.form(&bob_web, "/rooms/subject/emergency-stop", &own).await;
    assert_eq!(code, 409, "{html}");
    assert!(html.contains("id=\"rooms-notice\">subject_not_selected: select your subject"), "{html}");

    // bob selects Alex on the page (same rules as the tool: alice then cannot take it).
    let html = page(&app, &bob_web).await;
    assert!(html.contains("Your identity in this environment") && html.contains(">Alex</td>"), "{html}");
    let list = subjects(&app, &w, &bob).await;
    let alex_ref = subject(&list, "Alex")["subject_ref"].as_str().unwrap().to_owned();
    let steve_ref = subject(&list, "Steve")["subject_ref"].as_str().unwrap().to_owned();
    let pick = |r: &str| {
        vec![
            ("room_id", w.room_id.clone()),
            ("environment_binding_id", w.binding_id.clone()),
            ("subject_ref", r.to_owned()),
        ]
    };
    let form = pick(&alex_ref);
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(app.form(&bob_web, "/rooms/subject/select", &form).await.0, 303);
    let (code, html) = app.form(&w.cookie, "/rooms/subject/select", &form).await;
    assert_eq!(code, 409);
    assert!(html.contains("subject_conflict: "), "{html}");
    let html = page(&app, &bob_web).await;
    assert!(html.contains("selected by you") && html.contains("class=\"stop-my-player\""), "{html}");
    let args = json!({ "room_id": w.room_id, "environment_binding_id": w.binding_id, "subject_ref": steve_ref });
    assert!(!tool(&app, &w.token, "helix_environment_subject_select", args).await.0);

    // Both play: alice (Steve) and bob (Alex, one running and one queued).
    let long = json!({"type": "wait", "ticks": 200});
    let (_, wa) = act(&app, &w, &w.token, "sstop-a-0001", long.clone()).await;
    let (_, wb) = act(&app, &w, &bob, "sstop-b-0001", long.clone()).await;
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    let cmds = p["commands"].as_array().unwrap().clone();
    assert_eq!(cmds.len(), 2, "{p}");
    let cmd_b = cmds.iter().find(|c| c["workflow_ref"] == wb["workflow_ref"]).unwrap().clone();
    let (_, p) = poll(&app, &w, epoch, json!([ack(&cmd_b, 1, "accepted", Value::Null)])).await;
    assert_eq!(p["acks"][0]["outcome"], "applied", "{p}");
    assert_eq!(p["stopped_subjects"], json!([]), "{p}");
    let (_, wb2) = act(&app, &w, &bob, "sstop-b-0002", json!({"type": "chat", "text": "hi"})).await;
    assert_eq!(wb2["status"], "queued", "{wb2}");

    // bob's stop (the control, as a member): only his subject's workflows stop.
    let args = json!({ "room_id": w.room_id, "workflow_ref": wb["workflow_ref"], "control": "emergency_stop" });
    let (is_error, v) = tool(&app, &bob, "helix_minecraft_workflow_control", args).await;
    assert_eq!(
        (is_error, v["status"].as_str(), v["reason"].as_str()),
        (false, Some("stopped"), Some("emergency_stop"))
    );
    for wf in [&wb, &wb2] {
        let s = status(&app, &w, wf["workflow_ref"].as_str().unwrap()).await;
        assert_eq!((s["status"].as_str(), s["reason"].as_str()), (Some("stopped"), Some("emergency_stop")), "{s}");
    }
    assert_eq!(status(&app, &w, wa["workflow_ref"].as_str().unwrap()).await["status"], "dispatched");

    // The connector learns it at its next poll: Alex only; a late ack of his is recorded
    // in the stopped workflow (not applied).
    let (_, p) = poll(&app, &w, epoch, json!([ack(&cmd_b, 2, "completed", json!({}))])).await;
    assert_eq!(
        (p["stopped_subjects"].clone(), p["emergency_stop_active"].clone()),
        (json!([ALEX]), json!(false)),
        "{p}"
    );
    assert_eq!(p["acks"][0]["outcome"], "recorded_late", "{p}");
    let late = status(&app, &w, wb["workflow_ref"].as_str().unwrap()).await;
    assert_eq!(
        (late["status"].as_str(), late["late_acknowledgements"][0]["status"].as_str()),
        (Some("stopped"), Some("completed"))
    );
    let delivered: Vec<&Value> = p["commands"].as_array().unwrap().iter().map(|c| &c["workflow_ref"]).collect();
    assert_eq!(delivered, vec![&wa["workflow_ref"]], "{p}");

    // New actions on Alex are refused; Steve keeps working.
    let (_, e) = act(&app, &w, &bob, "sstop-b-0003", long.clone()).await;
    assert_eq!(err(&e), "emergency_stop_active");
    let (is_error, a2) = act(&app, &w, &w.token, "sstop-a-0002", json!({"type": "chat", "text": "still here"})).await;
    assert_eq!((is_error, a2["status"].as_str()), (false, Some("queued")), "{a2}");
    let list = subjects(&app, &w, &bob).await;
    assert_eq!(subject(&list, "Alex")["subject_stop_active"], true, "{list}");
    assert_eq!(subject(&list, "Steve")["subject_stop_active"], false, "{list}");
    assert_eq!(list["environments"][0]["emergency_stop_active"], false, "{list}");

    // No agent can clear it: the control has no such value, and the cookie routes are
    // not an agent's (the owner-only clear route is not bob's either).
    let args = json!({ "room_id": w.room_id, "workflow_ref": wb["workflow_ref"], "control": "clear" });
    let (code, body) = app
        .rpc("/mcp", &bob, "tools/call", json!({ "name": "helix_minecraft_workflow_control", "arguments": args }))
        .await;
    let refused = &body["result"]["structuredContent"]["error"];
    assert_eq!((code, &body["result"]["isError"], &refused["code"]), (200, &json!(true), &json!("invalid_request")));
    assert_eq!(refused["details"]["field"], "control", "{body}");
    let res = app
        .http
        .post(format!("{}/rooms/subject/emergency-stop/clear", app.base))
        .bearer_auth(&bob)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("room_id={}&environment_binding_id={}", w.room_id, w.binding_id))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_client_error(), "{}", res.status());
    let body = json!({ "room_id": w.room_id, "environment_binding_id": w.binding_id });
    let res = app
        .browser(reqwest::Method::POST, "/api/account/room-connectors/emergency-stop/clear", &bob_web)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let (_, e) = act(&app, &w, &bob, "sstop-b-0003", long.clone()).await;
    assert_eq!(err(&e), "emergency_stop_active");

    // The person clears it on the page; the poll no longer names Alex; bob acts again.
    let html = page(&app, &bob_web).await;
    assert!(html.contains("class=\"clear-my-player-stop\""), "{html}");
    assert_eq!(app.form(&bob_web, "/rooms/subject/emergency-stop/clear", &own).await.0, 303);
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!(p["stopped_subjects"], json!([]), "{p}");
    let (is_error, b3) = act(&app, &w, &bob, "sstop-b-0004", long.clone()).await;
    assert_eq!((is_error, b3["status"].as_str()), (false, Some("queued")), "{b3}");

    // The page's stop does the same: his new workflow stops, alice's play on.
    assert_eq!(app.form(&bob_web, "/rooms/subject/emergency-stop", &own).await.0, 303);
    assert_eq!(status(&app, &w, b3["workflow_ref"].as_str().unwrap()).await["status"], "stopped");
    assert_eq!(status(&app, &w, wa["workflow_ref"].as_str().unwrap()).await["status"], "dispatched");
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!(p["stopped_subjects"], json!([ALEX]), "{p}");
}

/// The owner's stop stays whole-room (with the owner's control and page), and a stop
/// of a subject survives a changed directory (it is kept by the player, not the ref).
async fn the_owner_stop_stays_whole_room_and_a_subject_stop_outlives_a_new_directory(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register_two(&app, &w).await;
    let (bob, bob_web) = bob_with_authority(&app, &w).await;
    let own = [("room_id", w.room_id.as_str()), ("environment_binding_id", w.binding_id.as_str())];
    let list = subjects(&app, &w, &bob).await;
    for (token, name) in [(&bob, "Alex"), (&w.token, "Steve")] {
        let subject_ref = subject(&list, name)["subject_ref"].clone();
        let args = json!({ "room_id": w.room_id, "environment_binding_id": w.binding_id, "subject_ref": subject_ref });
        assert!(!tool(&app, token, "helix_environment_subject_select", args).await.0);
    }
    assert_eq!(app.form(&bob_web, "/rooms/subject/emergency-stop", &own).await.0, 303);
    // A third player joins: the directory (and every subject_ref) changes; Alex stays stopped.
    let players = json!([
        { "native_id": super::embodiment::STEVE, "display_name": "Steve", "online": true },
        { "native_id": ALEX, "display_name": "Alex", "online": true },
        { "native_id": "kai-native-0001", "display_name": "Kai", "online": true },
    ]);
    let body = json!({ "epoch": epoch, "acks": [], "subjects": players });
    let (_, p) = connector(&app, &w.credential, "poll", body).await;
    assert_eq!(p["stopped_subjects"], json!([ALEX]), "{p}");
    let list = subjects(&app, &w, &bob).await;
    assert_eq!(subject(&list, "Alex")["subject_stop_active"], true, "{list}");

    // alice's selection lapsed with the directory; she selects Steve again and plays.
    let (_, e) = act(&app, &w, &w.token, "ostop-a-0001", json!({"type": "wait", "ticks": 200})).await;
    assert_eq!(err(&e), "subject_not_selected");
    let args = json!({ "room_id": w.room_id, "environment_binding_id": w.binding_id,
        "subject_ref": subject(&list, "Steve")["subject_ref"] });
    assert!(!tool(&app, &w.token, "helix_environment_subject_select", args).await.0);
    let (_, wa) = act(&app, &w, &w.token, "ostop-a-0001", json!({"type": "wait", "ticks": 200})).await;
    assert_eq!(wa["status"], "queued", "{wa}");
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!(p["commands"].as_array().unwrap().len(), 1, "{p}");

    // The owner's control stops the whole room (not only the owner's subject).
    let args = json!({ "room_id": w.room_id, "workflow_ref": wa["workflow_ref"], "control": "emergency_stop" });
    let (is_error, v) = tool(&app, &w.token, "helix_minecraft_workflow_control", args).await;
    assert_eq!((is_error, v["status"].as_str()), (false, Some("stopped")), "{v}");
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!(p["emergency_stop_active"], true, "{p}");
    let (_, e) = act(&app, &w, &w.token, "ostop-a-0002", json!({"type": "chat", "text": "hi"})).await;
    assert_eq!(err(&e), "emergency_stop_active");

    // Clearing the room's stop leaves a member's stop of their player to that member.
    let room = [("room_id", w.room_id.as_str())];
    assert_eq!(app.form(&w.cookie, "/rooms/emergency-stop/clear", &room).await.0, 303);
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!((p["emergency_stop_active"].clone(), p["stopped_subjects"].clone()), (json!(false), json!([ALEX])));
    let (is_error, a2) = act(&app, &w, &w.token, "ostop-a-0002", json!({"type": "chat", "text": "hi"})).await;
    assert_eq!((is_error, a2["status"].as_str()), (false, Some("queued")), "{a2}");
    let args = json!({ "room_id": w.room_id, "environment_binding_id": w.binding_id,
        "subject_ref": subject(&list, "Alex")["subject_ref"] });
    assert!(!tool(&app, &bob, "helix_environment_subject_select", args).await.0);
    let (_, e) = act(&app, &w, &bob, "ostop-b-0001", json!({"type": "chat", "text": "hi"})).await;
    assert_eq!(err(&e), "emergency_stop_active");
}

on_both_backends!(
    a_member_stops_only_their_own_player_and_only_a_person_clears_it,
    the_owner_stop_stays_whole_room_and_a_subject_stop_outlives_a_new_directory,
);
