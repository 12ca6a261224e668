//! Tenant isolation of player embodiment's cookie routes, over real HTTP on both store
//! backends: the same person (the same Helix account) signed in under another tenant
//! reaches none of the first tenant's rooms, pairings or bindings. Every cookie route
//! that names a room or a binding answers exactly as for a room that does not exist
//! (`404`), and the stored bindings are unchanged.

use helix_core::service::records::embodiment::{EnvBinding, bindings_of_room};
use helix_integration_tests::*;
use reqwest::Method;
use serde_json::{Value, json};

use crate::embodiment::{World, connector, paired, register};

/// A well-formed room id no room has.
const NO_ROOM: &str = "room_00000000000000000000";

/// The room's bindings as stored.
async fn stored(app: &TestApp, w: &World) -> Vec<EnvBinding> {
    bindings_of_room(app.state.services.store.as_ref(), &w.room_id, 8).await.unwrap()
}

async fn json_post(app: &TestApp, cookie: &str, path: &str, body: Value) -> (u16, Value) {
    read(app.browser(Method::POST, path, cookie).json(&body).send().await.unwrap()).await
}

/// The parts of a JSON refusal a caller can tell rooms apart by.
fn refusal((status, v): (u16, Value)) -> (u16, Value, Value) {
    (status, v["error"]["code"].clone(), v["error"]["message"].clone())
}

async fn another_tenants_session_reaches_no_pairing_stop_or_region_of_the_room(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register(&app, &w).await;
    let region_path = format!("/api/account/room-connectors/{}/region", w.binding_id);
    let boxed = json!({ "room_id": w.room_id, "min": {"x": 0, "y": 0, "z": 0}, "max": {"x": 9, "y": 99, "z": 9} });
    assert_eq!(json_post(&app, &w.cookie, &region_path, boxed).await.0, 200);
    // The same alice (same account, still a developer) signed in under tenant B.
    let b = app.session_in("alice", "tenant-b").await;
    let before = stored(&app, &w).await;
    assert_eq!(before.len(), 1);
    assert!(before[0].region.is_some() && !before[0].estop_active);
    // Every route is tried; what any of them did wrong is reported together at the end.
    let mut wrong: Vec<String> = vec![];
    let mut expect = |route: &str, status: u16, same_as_missing: bool, unchanged: bool| {
        if status != 404 || !same_as_missing || !unchanged {
            wrong.push(format!("{route}: {status}, as for a missing room: {same_as_missing}, unchanged: {unchanged}"));
        }
    };

    // Pairing a connector for the room: as for a room that does not exist.
    let pair = |room: &str| json!({ "room_id": room, "world_id": "nether" });
    let pairings = "/api/account/room-connectors/pairings";
    let missing = refusal(json_post(&app, &b, pairings, pair(NO_ROOM)).await);
    let got = refusal(json_post(&app, &b, pairings, pair(&w.room_id)).await);
    expect("pairings", got.0, got == missing, stored(&app, &w).await == before);

    // The room-wide Emergency Stop on /rooms.
    let room = [("room_id", w.room_id.as_str())];
    let missing = app.form(&b, "/rooms/emergency-stop", &[("room_id", NO_ROOM)]).await.0;
    let got = app.form(&b, "/rooms/emergency-stop", &room).await.0;
    expect("/rooms/emergency-stop", got, got == missing, stored(&app, &w).await == before);

    // Tenant A's owner presses it; tenant B clears it on neither page nor route.
    assert_eq!(app.form(&w.cookie, "/rooms/emergency-stop", &room).await.0, 303);
    let stopped = stored(&app, &w).await;
    assert!(stopped[0].estop_active);
    let got = app.form(&b, "/rooms/emergency-stop/clear", &room).await.0;
    expect("/rooms/emergency-stop/clear", got, true, stored(&app, &w).await == stopped);
    let clear = "/api/account/room-connectors/emergency-stop/clear";
    let body = |room: &str| json!({ "room_id": room, "environment_binding_id": w.binding_id });
    let missing = refusal(json_post(&app, &b, clear, body(NO_ROOM)).await);
    let got = refusal(json_post(&app, &b, clear, body(&w.room_id)).await);
    expect("emergency-stop/clear", got.0, got == missing, stored(&app, &w).await == stopped);

    // The region: neither the JSON route nor the pairing page's form clears it.
    let current = stored(&app, &w).await;
    let got = json_post(&app, &b, &region_path, json!({ "room_id": w.room_id, "clear": true })).await.0;
    expect("region (JSON)", got, true, stored(&app, &w).await == current);
    let current = stored(&app, &w).await;
    let form = [("room_id", w.room_id.as_str()), ("environment_binding_id", &w.binding_id), ("op", "clear")];
    let got = app.form(&b, "/account/room-connectors/region", &form).await.0;
    expect("region (form)", got, true, stored(&app, &w).await == current);

    // Rotation and revocation, on the JSON routes and the confirmed form.
    for op in ["rotate", "revoke"] {
        let current = stored(&app, &w).await;
        let path = format!("/api/account/room-connectors/{}/{op}", w.binding_id);
        let got = json_post(&app, &b, &path, json!({ "room_id": w.room_id })).await.0;
        expect(&format!("{op} (JSON)"), got, true, stored(&app, &w).await == current);
        let current = stored(&app, &w).await;
        let form = [
            ("room_id", w.room_id.as_str()),
            ("environment_binding_id", &w.binding_id),
            ("op", op),
            ("confirm", "yes"),
        ];
        let (got, html) = app.form(&b, "/account/room-connectors/credential", &form).await;
        expect(&format!("{op} (form)"), got, !html.contains("hac_"), stored(&app, &w).await == current);
    }
    assert!(wrong.is_empty(), "tenant B reached tenant A's room:\n{}", wrong.join("\n"));
    assert_eq!(stored(&app, &w).await, stopped, "nothing changed");

    // The connector still polls with its credential, still stopped; tenant A's owner
    // still reaches everything (the same routes answer the right tenant).
    let (status, p) = connector(&app, &w.credential, "poll", json!({ "epoch": epoch, "acks": [] })).await;
    assert_eq!((status, p["emergency_stop_active"].as_bool()), (200, Some(true)), "{p}");
    assert_eq!(json_post(&app, &w.cookie, clear, body(&w.room_id)).await.0, 200);
    assert!(!stored(&app, &w).await[0].estop_active);
}

on_both_backends!(another_tenants_session_reaches_no_pairing_stop_or_region_of_the_room);
