//! Shared Live Rooms through the Lambda adapter (every room and observer event file), their
//! documented store round trips, and the room and observer limits' own variables.

use helix_integration_tests::support::events::{event_text, through_adapter};
use helix_integration_tests::support::rooms::ALL;
use helix_integration_tests::support::runs::research_run;
use helix_integration_tests::*;
use serde_json::{Value, json};

use super::rooms::{claim, delete, observe};

/// One payload of events/ through lambda_http's decoding and the Lambda adapter.
async fn invoke_event(app: &TestApp, file: &str, bearer: Option<&str>, replace: &[(&str, &str)]) -> (u16, Value) {
    let raw = event_text(file, replace);
    let (status, _, bytes) = through_adapter(compose(app.state.clone()), file, &raw, bearer).await;
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn every_room_and_observer_event_file_is_served_through_the_lambda_adapter() {
    let app = TestApp::spawn_with(Backend::Embedded, EVENTS_HOST).await;
    let token = app.token_for("alice", "tenant-a", ALL).await;
    let cookie = app.session("alice").await;
    let session_token = cookie.trim_start_matches("helix_session=").to_owned();
    let s = [("SESSION_EXAMPLE", session_token.as_str())];
    let (status, room) = invoke_event(&app, "rooms-create.json", Some(&token), &[]).await;
    assert_eq!(status, 201, "{room}");
    let room_id = room["room_id"].as_str().unwrap().to_owned();
    let (status, list) = invoke_event(&app, "rooms-list.json", Some(&token), &[]).await;
    assert_eq!((status, list["rooms"][0]["room_id"].as_str()), (200, Some(room_id.as_str())));
    let r = [("ROOM_ID_EXAMPLE", room_id.as_str())];
    assert_eq!(invoke_event(&app, "rooms-inspect.json", Some(&token), &r).await.0, 200);
    let (status, err) = invoke_event(&app, "rooms-command.json", Some(&token), &r).await;
    assert_eq!((status, code(&err)), (403, "command_execution_not_enabled"));
    let (status, run) = invoke_event(&app, "start.json", Some(&token), &[]).await;
    assert_eq!(status, 201, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let (status, b) =
        invoke_event(&app, "rooms-bind-run.json", Some(&token), &[r[0], ("RUN_ID_EXAMPLE", run_id.as_str())]).await;
    assert_eq!(status, 201, "{b}");
    let bref = b["binding_ref"].as_str().unwrap().to_owned();
    let (status, rev) =
        invoke_event(&app, "rooms-unbind-run.json", Some(&token), &[("BINDING_REF_EXAMPLE", bref.as_str())]).await;
    assert_eq!((status, rev["revocation_status"].as_str()), (200, Some("revoked")));

    let (status, obs) = invoke_event(&app, "observer-create.json", None, &s).await;
    assert_eq!(status, 201, "{obs}");
    let handle = obs["claim_handle"].as_str().unwrap().to_owned();
    let obs_ref = obs["observer_binding_ref"].as_str().unwrap().to_owned();
    let (status, c) = invoke_event(
        &app,
        "rooms-claim-chat.json",
        Some(&token),
        &[("CLAIM_HANDLE_EXAMPLE", handle.as_str()), ("RUN_ID_EXAMPLE", run_id.as_str())],
    )
    .await;
    assert_eq!(status, 201, "{c}");
    let o = [s[0], ("OBSERVER_REF_EXAMPLE", obs_ref.as_str())];
    let (status, view) = invoke_event(&app, "observer-read.json", None, &o).await;
    assert_eq!((status, view["binding_status"].as_str()), (200, Some("bound")));
    let (status, page) = invoke_event(&app, "observer-events.json", None, &o).await;
    assert_eq!((status, page["receipts"][0]["seq"].as_u64()), (200, Some(1)));
    let cref = c["binding_ref"].as_str().unwrap().to_owned();
    let (status, _) =
        invoke_event(&app, "rooms-unbind-chat.json", Some(&token), &[("BINDING_REF_EXAMPLE", cref.as_str())]).await;
    assert_eq!(status, 200);
    let (status, d) = invoke_event(&app, "observer-disconnect.json", None, &o).await;
    assert_eq!((status, d["disconnect_status"].as_str()), (200, Some("disconnected")));
    // The room pages (HTML and the chat script: not JSON, so only the status is read).
    for file in ["chat-page.json", "chat-script.json", "rooms-page.json"] {
        assert_eq!(invoke_event(&app, file, None, &s).await.0, 200, "{file}");
    }
}

/// Store round trips per room operation (docs/round-trips.md, "Rooms"), counted at the
/// store seam on a warm request; the principal's and the session's reads included.
#[tokio::test]
async fn room_operations_take_the_documented_round_trips() {
    let app = TestApp::spawn().await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let cookie = app.session("alice").await;
    let run = app.started(&alice, research_run()).await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    // Warm the session (its idle expiry is written at most every few minutes).
    observe(&app, &cookie, json!({ "chat_id": "warm" })).await;
    let mut table = vec![];
    let mut measure = |name: &'static str, log: Vec<&'static str>| table.push((name, log));

    app.faults.take_log();
    let (_, created) = app.create_room(&alice, "rt-room-create-1", json!({ "name": "Bench" })).await;
    measure("create room", app.faults.take_log());
    let room_id = created["room_id"].as_str().unwrap().to_owned();
    read(app.get("/api/v1/rooms", &alice).send().await.unwrap()).await;
    measure("list rooms", app.faults.take_log());
    read(app.get(&format!("/api/v1/rooms/{room_id}"), &alice).send().await.unwrap()).await;
    measure("inspect room", app.faults.take_log());
    let (_, b) = app.bind(&alice, &room_id, &run_id).await;
    measure("bind run (new)", app.faults.take_log());
    app.bind(&alice, &room_id, &run_id).await;
    measure("bind run (exact retry)", app.faults.take_log());
    delete(&app, &alice, &format!("/api/v1/rooms/run-bindings/{}", b["binding_ref"].as_str().unwrap())).await;
    measure("withdraw run binding", app.faults.take_log());
    let (_, obs) =
        observe(&app, &cookie, json!({ "chat_id": "c1", "snapshot": [{ "role": "user", "content": "hi" }] })).await;
    measure("observer create", app.faults.take_log());
    let (_, c) = claim(&app, &alice, obs["claim_handle"].as_str().unwrap(), &run_id).await;
    measure("claim chat", app.faults.take_log());
    let path = format!("/api/agi/agent-run-observer/bindings/{}", obs["observer_binding_ref"].as_str().unwrap());
    read(app.browser(reqwest::Method::GET, &path, &cookie).send().await.unwrap()).await;
    measure("observer read", app.faults.take_log());
    read(app.browser(reqwest::Method::GET, &format!("{path}/events"), &cookie).send().await.unwrap()).await;
    measure("observer events", app.faults.take_log());
    delete(&app, &alice, &format!("/api/v1/rooms/chat-bindings/{}", c["binding_ref"].as_str().unwrap())).await;
    measure("withdraw chat binding", app.faults.take_log());
    read(app.browser(reqwest::Method::DELETE, &path, &cookie).send().await.unwrap()).await;
    measure("observer disconnect", app.faults.take_log());
    for (name, log) in &table {
        println!("{name:<24} {} {log:?}", log.len());
    }
    let counts: Vec<(&str, usize)> = table.iter().map(|(n, l)| (*n, l.len())).collect();
    assert_eq!(
        counts,
        vec![
            ("create room", 2),
            ("list rooms", 3),
            ("inspect room", 2),
            ("bind run (new)", 3),
            ("bind run (exact retry)", 3),
            ("withdraw run binding", 3),
            ("observer create", 3),
            ("claim chat", 3),
            ("observer read", 4),
            ("observer events", 5),
            ("withdraw chat binding", 3),
            ("observer disconnect", 5),
        ]
    );
}

#[tokio::test]
async fn the_room_and_observer_limits_have_their_own_variables() {
    let app = TestApp::spawn_with(
        Backend::Embedded,
        &[("HELIX_ROOM_AGENT_PRINCIPAL_RATE_LIMIT", "2"), ("HELIX_AGENT_RUN_OBSERVER_ACCOUNT_RATE_LIMIT", "1")],
    )
    .await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let statuses = [
        app.get("/api/v1/rooms", &alice).send().await.unwrap().status().as_u16(),
        app.get("/api/v1/rooms", &alice).send().await.unwrap().status().as_u16(),
        app.get("/api/v1/rooms", &alice).send().await.unwrap().status().as_u16(),
    ];
    assert_eq!(statuses, [200, 200, 429]);
    // The run routes keep their own (default) limit.
    assert_eq!(app.start(&alice, "limits-run-0001", research_run()).await.status(), 201);
    let cookie = app.session("alice").await;
    assert_eq!(observe(&app, &cookie, json!({ "chat_id": "c1" })).await.0, 201);
    let (status, err) = observe(&app, &cookie, json!({ "chat_id": "c2" })).await;
    assert_eq!((status, code(&err)), (429, "rate_limited"));
    let ip_limited = TestApp::spawn_with(Backend::Embedded, &[("HELIX_ROOM_AGENT_IP_RATE_LIMIT", "1")]).await;
    let t = ip_limited.token_for("alice", "tenant-a", ALL).await;
    assert_eq!(ip_limited.get("/api/v1/rooms", &t).send().await.unwrap().status(), 200);
    assert_eq!(ip_limited.get("/api/v1/rooms", &t).send().await.unwrap().status(), 429);
}
