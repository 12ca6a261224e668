//! Player embodiment bounds on both store backends: the owner-set region of a binding
//! (cookie route and the pairing page's form), reach from the reported position, the
//! per-subject rate limit, and the states no other path reaches: `rejected` (by the
//! connector instead of accepting, and at dispatch when the region changed), `expired`
//! (queued too long) and `paused: lease_lapsed` (resume re-takes the lease).

use helix_core::config::EmbodimentConfig;
use helix_core::domain::embodiment::action_schema_hash;
use helix_core::service::embodiment::ACTIONS_PER_MINUTE;
use helix_integration_tests::*;
use reqwest::Method;
use serde_json::{Value, json};

use super::embodiment::{STEVE, World, ack, act, connector_sim, err, paired, poll, select_first, status, tool};

/// Registers with Steve standing at `position` (or nowhere known).
async fn register_at(app: &TestApp, w: &World, position: Option<[i32; 3]>) -> u64 {
    let mut steve = json!({ "native_id": STEVE, "display_name": "Steve", "online": true });
    if let Some(p) = position {
        steve["position"] = json!(p);
    }
    let body = json!({
        "protocol": "helix.connector.v1",
        "manifest": { "connector_name": "scripted", "connector_version": "1.0.0", "world_id": "overworld" },
        "schema_hash": action_schema_hash(),
        "capabilities": ["move_to", "look_at", "stop", "break_block", "place_block", "equip", "craft", "chat", "wait"],
        "subjects": [steve],
    });
    let url = format!("{}/api/connectors/v1/register", app.base);
    let (s, r) = read(app.http.post(url).bearer_auth(&w.credential).json(&body).send().await.unwrap()).await;
    assert_eq!(s, 200, "{r}");
    r["epoch"].as_u64().unwrap()
}

async fn region(app: &TestApp, cookie: &str, w: &World, body: Value) -> (u16, Value) {
    let path = format!("/api/account/room-connectors/{}/region", w.binding_id);
    read(app.browser(Method::POST, &path, cookie).json(&body).send().await.unwrap()).await
}

fn reason(e: &Value) -> &str {
    e["error"]["details"]["reason"].as_str().unwrap_or("")
}

fn brk(x: i32, z: i32) -> Value {
    json!({"type": "break_block", "x": x, "y": 64, "z": z, "expected_block": "minecraft:oak_log"})
}

async fn the_owner_sets_a_region_every_step_must_stay_in(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    register_at(&app, &w, None).await;
    select_first(&app, &w, &w.token).await;
    let boxed = json!({"room_id": w.room_id, "min": {"x": -10, "y": 60, "z": -10}, "max": {"x": 10, "y": 80, "z": 10}});
    // Only the owner, only same-origin, only a well-formed body.
    let bob = app.session("bob").await;
    assert_eq!(region(&app, &bob, &w, boxed.clone()).await.0, 404, "not the room's owner");
    let mut unknown = boxed.clone();
    unknown["label"] = json!("x");
    assert_eq!(region(&app, &w.cookie, &w, unknown).await.0, 400, "unknown fields are refused");
    let both = json!({"room_id": w.room_id, "min": {"x": 0, "y": 64, "z": 0}, "max": {"x": 1, "y": 64, "z": 1}, "clear": true});
    assert_eq!(region(&app, &w.cookie, &w, both).await.0, 400);
    let inverted = json!({"room_id": w.room_id, "min": {"x": 5, "y": 64, "z": 0}, "max": {"x": 1, "y": 64, "z": 1}});
    assert_eq!(region(&app, &w.cookie, &w, inverted).await.0, 400);
    let url = format!("{}/api/account/room-connectors/{}/region", app.base, w.binding_id);
    let cross = app
        .http
        .post(url)
        .header("cookie", &w.cookie)
        .header("origin", "https://evil.example")
        .header("sec-fetch-site", "cross-site")
        .json(&boxed)
        .send()
        .await
        .unwrap();
    assert!(cross.status().is_client_error(), "a cross-site region change is refused: {}", cross.status());
    let (_, far) = act(&app, &w, &w.token, "region-key-00", json!({"type": "move_to", "x": 50, "y": 64, "z": 0})).await;
    assert_eq!(far["status"], "queued", "no region yet: {far}");

    let (s, r) = region(&app, &w.cookie, &w, boxed).await;
    assert_eq!(
        (s, r["schema"].as_str(), r["region"]["max"]["x"].as_i64()),
        (200, Some("helix.room_connector_region.v1"), Some(10)),
        "{r}"
    );
    let (is_error, e) =
        act(&app, &w, &w.token, "region-key-01", json!({"type": "move_to", "x": 11, "y": 64, "z": 0})).await;
    assert_eq!((is_error, err(&e), reason(&e)), (true, "action_refused", "out_of_region"), "{e}");
    let seq = json!({"type": "sequence", "steps": [{"type": "chat", "text": "hi"}, {"type": "look_at", "x": 0, "y": 81, "z": 0}]});
    let (is_error, e) = act(&app, &w, &w.token, "region-key-02", seq).await;
    assert_eq!((is_error, reason(&e)), (true, "out_of_region"), "one step outside refuses the sequence: {e}");
    let (is_error, ok) =
        act(&app, &w, &w.token, "region-key-03", json!({"type": "move_to", "x": 10, "y": 60, "z": -10})).await;
    assert!(!is_error && ok["status"] == "queued", "the corners are inside: {ok}");

    // The page's form: set (303 back to the page), then clear.
    let page = app.browser(Method::GET, "/account/room-connectors", &w.cookie).send().await.unwrap();
    assert!(page.text().await.unwrap().contains("id=\"region-form\""));
    let form = |op: &'static str, max_x: &'static str| {
        let (room, binding) = (w.room_id.clone(), w.binding_id.clone());
        let cookie = w.cookie.clone();
        let app = &app;
        async move {
            let f = [
                ("room_id", room.as_str()),
                ("environment_binding_id", binding.as_str()),
                ("op", op),
                ("min_x", "0"),
                ("min_y", "60"),
                ("min_z", "0"),
                ("max_x", max_x),
                ("max_y", "70"),
                ("max_z", "3"),
            ];
            let fields: Vec<(&str, &str)> = if op == "clear" { f[..3].to_vec() } else { f.to_vec() };
            app.form(&cookie, "/account/room-connectors/region", &fields).await.0
        }
    };
    assert_eq!(form("set", "3").await, 303, "post/redirect/get");
    let (is_error, e) =
        act(&app, &w, &w.token, "region-key-04", json!({"type": "move_to", "x": 4, "y": 64, "z": 0})).await;
    assert_eq!((is_error, reason(&e)), (true, "out_of_region"), "{e}");
    assert_eq!(form("set", "x").await, 400, "a coordinate is a whole number");
    assert_eq!(form("clear", "").await, 303);
    let (is_error, ok) =
        act(&app, &w, &w.token, "region-key-05", json!({"type": "move_to", "x": 4, "y": 64, "z": 0})).await;
    assert!(!is_error, "cleared: {ok}");
}

async fn reach_counts_from_the_reported_position_or_the_preceding_move(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register_at(&app, &w, Some([0, 64, 0])).await;
    let (_, sel) = select_first(&app, &w, &w.token).await;
    let (is_error, e) = act(&app, &w, &w.token, "reach-key-01", brk(5, 5)).await;
    assert_eq!((is_error, err(&e), reason(&e)), (true, "action_refused", "out_of_reach"), "7.07 blocks away: {e}");
    let look = json!({"type": "look_at", "x": 0, "y": 64, "z": 7});
    assert_eq!(reason(&act(&app, &w, &w.token, "reach-key-02", look).await.1), "out_of_reach");
    let place = json!({"type": "place_block", "x": 4, "y": 64, "z": 4, "item": "minecraft:dirt", "face": "up"});
    assert!(!act(&app, &w, &w.token, "reach-key-03", place).await.0, "5.66 blocks: within reach");
    let seq = json!({"type": "sequence", "steps": [{"type": "move_to", "x": 5, "y": 64, "z": 4}, brk(5, 5)]});
    let (is_error, ok) = act(&app, &w, &w.token, "reach-key-04", seq).await;
    assert!(!is_error, "reach counts from the preceding move: {ok}");
    // The connector reports where the player stands now; the subject ref stays.
    let moved = json!([{ "native_id": STEVE, "display_name": "Steve", "online": true, "position": [5, 64, 3] }]);
    let url = format!("{}/api/connectors/v1/poll", app.base);
    let body = json!({ "epoch": epoch, "acks": [], "subjects": moved });
    assert_eq!(read(app.http.post(url).bearer_auth(&w.credential).json(&body).send().await.unwrap()).await.0, 200);
    let (is_error, ok) = act(&app, &w, &w.token, "reach-key-05", brk(5, 5)).await;
    assert!(!is_error, "{ok}");
    assert_eq!(ok["subject_ref"], sel["subject_ref"], "a moved player keeps its ref");
}

async fn a_subject_is_rate_limited_per_minute_and_a_replay_still_answers(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let clock = &app.state.services.clock;
    let w = paired(&app).await;
    // Start at the beginning of a minute, so the test's actions share one window.
    clock.advance(60 - clock.epoch().rem_euclid(60));
    let epoch = register_at(&app, &w, None).await;
    select_first(&app, &w, &w.token).await;
    let wait = json!({"type": "wait", "ticks": 1});
    for i in 0..ACTIONS_PER_MINUTE {
        let args = json!({ "room_id": w.room_id, "idempotency_key": format!("rate-key-{i:03}"), "action": wait });
        let (_, r) = app
            .rpc("/mcp", &w.token, "tools/call", json!({"name": "helix_minecraft_player_action", "arguments": args}))
            .await;
        assert_eq!(r["result"]["isError"], false, "{i}: {r}");
    }
    let (is_error, e) = act(&app, &w, &w.token, "rate-key-over", wait.clone()).await;
    assert_eq!((is_error, err(&e)), (true, "rate_limited"), "{e}");
    let retry = e["error"]["details"]["retry_after_seconds"].as_u64().unwrap();
    assert!((1..=60).contains(&retry), "{e}");
    // A replay of an accepted key answers its receipt, never a refusal.
    let (is_error, replay) = act(&app, &w, &w.token, "rate-key-000", wait.clone()).await;
    assert!(!is_error && replay["status"] == "queued", "{replay}");
    // Over REST too: 429 with Retry-After.
    let res = app
        .post(&format!("/api/v1/rooms/{}/player-actions", w.room_id), &w.token)
        .header("Idempotency-Key", "rate-key-rest")
        .json(&json!({ "action": wait }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    assert!(res.headers().contains_key("retry-after"));
    // The next minute admits again (the connector polled, so it is still live).
    clock.advance(60);
    assert_eq!(poll(&app, &w, epoch, json!([])).await.0, 200);
    let (is_error, ok) = act(&app, &w, &w.token, "rate-key-next", wait).await;
    assert!(!is_error, "{ok}");
}

async fn a_connector_rejects_a_command_before_touching_the_world(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register_at(&app, &w, None).await;
    select_first(&app, &w, &w.token).await;
    let equip = json!({"type": "equip", "item": "minecraft:diamond_sword", "slot": "mainhand"});
    let (_, wf) = act(&app, &w, &w.token, "reject-key-01", equip).await;
    let wref = wf["workflow_ref"].as_str().unwrap();
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    let cmd = p["commands"][0].clone();
    assert_eq!(cmd["workflow_ref"], wref, "{p}");
    let mut rejected = ack(&cmd, 1, "rejected", Value::Null);
    rejected["reason"] = json!("not_in_inventory");
    let (_, p) = poll(&app, &w, epoch, json!([rejected])).await;
    assert_eq!(p["acks"][0]["outcome"], "applied", "{p}");
    let s = status(&app, &w, wref).await;
    assert_eq!(
        (s["status"].as_str(), s["reason"].as_str(), s["late_effects_possible"].as_bool(), &s["poll_after_ms"]),
        (Some("rejected"), Some("not_in_inventory"), Some(false), &Value::Null),
        "terminal, nothing happened: {s}"
    );
    assert_eq!(s["budget"]["steps_max"], 16, "{s}");
    // No late effect: a later acknowledgement of it is refused, and no command is handed out.
    let (_, p) =
        poll(&app, &w, epoch, json!([ack(&cmd, 2, "completed", json!({"equipped": "minecraft:diamond_sword"}))])).await;
    assert_eq!(
        (p["acks"][0]["outcome"].as_str(), p["commands"].as_array().map(Vec::len)),
        (Some("not_at_connector"), Some(0))
    );
    let (is_error, e) = tool(
        &app,
        &w.token,
        "helix_minecraft_workflow_control",
        json!({"room_id": w.room_id, "workflow_ref": wref, "control": "resume"}),
    )
    .await;
    assert_eq!((is_error, err(&e)), (true, "workflow_not_resumable"));
}

async fn a_region_narrowed_after_queueing_rejects_at_dispatch(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register_at(&app, &w, None).await;
    select_first(&app, &w, &w.token).await;
    let (_, wf) = act(&app, &w, &w.token, "narrow-key-01", json!({"type": "move_to", "x": 20, "y": 64, "z": 0})).await;
    let (_, kept) = act(&app, &w, &w.token, "narrow-key-02", json!({"type": "move_to", "x": 2, "y": 64, "z": 0})).await;
    let boxed = json!({"room_id": w.room_id, "min": {"x": -10, "y": 0, "z": -10}, "max": {"x": 10, "y": 100, "z": 10}});
    assert_eq!(region(&app, &w.cookie, &w, boxed).await.0, 200);
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    let handed: Vec<&Value> = p["commands"].as_array().unwrap().iter().map(|c| &c["workflow_ref"]).collect();
    assert_eq!(handed, [&kept["workflow_ref"]], "only the one still inside is dispatched: {p}");
    let s = status(&app, &w, wf["workflow_ref"].as_str().unwrap()).await;
    assert_eq!(
        (s["status"].as_str(), s["reason"].as_str(), s["late_effects_possible"].as_bool()),
        (Some("rejected"), Some("out_of_region"), Some(false))
    );
}

async fn a_queued_workflow_expires_and_a_lapsed_lease_pauses_until_resumed(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let clock = &app.state.services.clock;
    let w = paired(&app).await;
    let epoch = register_at(&app, &w, None).await;
    select_first(&app, &w, &w.token).await;
    let wait = json!({"type": "wait", "ticks": 1});
    // Expired lazily on a status read (no connector poll in between) ...
    let (_, a) = act(&app, &w, &w.token, "expire-key-01", wait.clone()).await;
    clock.advance(EmbodimentConfig::default().queue_ttl_secs + 1);
    let s = status(&app, &w, a["workflow_ref"].as_str().unwrap()).await;
    assert_eq!(
        (s["status"].as_str(), s["reason"].as_str(), &s["poll_after_ms"]),
        (Some("expired"), Some("not_dispatched_in_time"), &Value::Null),
        "{s}"
    );
    // ... and at poll time.
    assert_eq!(poll(&app, &w, epoch, json!([])).await.0, 200, "the connector is live again");
    select_first(&app, &w, &w.token).await;
    let (_, b) = act(&app, &w, &w.token, "expire-key-02", wait.clone()).await;
    clock.advance(EmbodimentConfig::default().queue_ttl_secs + 1);
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!(p["commands"].as_array().map(Vec::len), Some(0), "{p}");
    assert_eq!(status(&app, &w, b["workflow_ref"].as_str().unwrap()).await["status"], "expired");

    // The control lease (300 s) lapses before dispatch: paused, and resume re-takes it.
    select_first(&app, &w, &w.token).await;
    let (_, c) = act(&app, &w, &w.token, "lease-key-01", wait).await;
    let cref = c["workflow_ref"].as_str().unwrap();
    clock.advance(helix_core::service::embodiment::LEASE_SECS + 1);
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!(p["commands"].as_array().map(Vec::len), Some(0), "{p}");
    let s = status(&app, &w, cref).await;
    assert_eq!((s["status"].as_str(), s["reason"].as_str()), (Some("paused"), Some("lease_lapsed")), "{s}");
    let control = json!({"room_id": w.room_id, "workflow_ref": cref, "control": "resume"});
    let (is_error, r) = tool(&app, &w.token, "helix_minecraft_workflow_control", control).await;
    assert!(!is_error && r["status"] == "queued", "{r}");
    let list = super::embodiment::subjects(&app, &w, &w.token).await;
    assert_eq!(list["environments"][0]["own_binding"]["lease_live"], true, "the lease is re-taken: {list}");
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!(p["commands"][0]["workflow_ref"], cref, "dispatched after the resume: {p}");
}

async fn connector_sim_reports_positions_and_rejects_an_equip_it_cannot_do(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let (_dir, mut sim) = connector_sim(&app, &w).await;
    select_first(&app, &w, &w.token).await;
    // The simulator's player stands at (4, 64, 0): the log at (8, 64, 5) is out of reach.
    let (is_error, e) = act(&app, &w, &w.token, "simb-key-01", brk(8, 5)).await;
    assert_eq!((is_error, reason(&e)), (true, "out_of_reach"), "{e}");
    let settle = |key: &'static str, action: Value| {
        let (app, w) = (&app, &w);
        async move {
            let (is_error, wf) = act(app, w, &w.token, key, action).await;
            assert!(!is_error, "{wf}");
            let mut last = Value::Null;
            for _ in 0..60 {
                last = status(app, w, wf["workflow_ref"].as_str().unwrap()).await;
                if !["queued", "dispatched", "running"].contains(&last["status"].as_str().unwrap_or("")) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            last
        }
    };
    let s =
        settle("simb-key-02", json!({"type": "equip", "item": "minecraft:diamond_sword", "slot": "mainhand"})).await;
    assert_eq!((s["status"].as_str(), s["reason"].as_str()), (Some("rejected"), Some("not_in_inventory")), "{s}");
    // After a move the simulator reports where the player stands: the log is in reach now.
    let s = settle("simb-key-03", json!({"type": "move_to", "x": 5, "y": 64, "z": 4})).await;
    assert_eq!(s["status"], "succeeded", "{s}");
    let s = settle("simb-key-04", brk(8, 5)).await;
    assert_eq!(s["status"], "succeeded", "{s}");
    let _ = sim.kill();
    let _ = sim.wait();
}

on_both_backends!(
    the_owner_sets_a_region_every_step_must_stay_in,
    reach_counts_from_the_reported_position_or_the_preceding_move,
    a_subject_is_rate_limited_per_minute_and_a_replay_still_answers,
    a_connector_rejects_a_command_before_touching_the_world,
    a_region_narrowed_after_queueing_rejects_at_dispatch,
    a_queued_workflow_expires_and_a_lapsed_lease_pauses_until_resumed,
    connector_sim_reports_positions_and_rejects_an_equip_it_cannot_do,
);
