//! Late effects on both store backends: a mutating step the connector held (dispatched or
//! accepted) that Helix then takes back (an Emergency Stop, a cancel, a pause when the
//! member's authority is revoked) says `late_effects_possible`, and the connector's
//! later acknowledgements of it are recorded in the workflow (`late_acknowledgements`)
//! and answered `recorded_late`, never dropped as `not_at_connector`.

use helix_integration_tests::*;
use serde_json::{Value, json};

use super::embodiment::{World, ack, act, join_bob, paired, poll, register, select_first, status, tool};
use super::embodiment_authority::{bob_ref, set_authority};

fn brk(x: i32) -> Value {
    json!({"type": "break_block", "x": x, "y": 64, "z": 5, "expected_block": "minecraft:oak_log"})
}

fn air() -> Value {
    json!({"block_at_target": "minecraft:air"})
}

async fn control(app: &TestApp, w: &World, token: &str, wf: &Value, control: &str) -> Value {
    let args = json!({ "room_id": w.room_id, "workflow_ref": wf["workflow_ref"], "control": control });
    let (is_error, v) = tool(app, token, "helix_minecraft_workflow_control", args).await;
    assert!(!is_error, "{v}");
    v
}

/// The command of `wf` in a poll's answer.
fn command_of(p: &Value, wf: &Value) -> Value {
    let cmds = p["commands"].as_array().unwrap();
    cmds.iter().find(|c| c["workflow_ref"] == wf["workflow_ref"]).cloned().unwrap_or_else(|| panic!("{p}"))
}

fn outcome(p: &Value) -> &str {
    p["acks"][0]["outcome"].as_str().unwrap_or("")
}

async fn an_emergency_stop_of_a_held_break_says_late_effects_and_records_the_late_completion(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register(&app, &w).await;
    select_first(&app, &w, &w.token).await;
    let (_, accepted) = act(&app, &w, &w.token, "late-key-0001", brk(5)).await;
    let (_, dispatched) = act(&app, &w, &w.token, "late-key-0002", brk(6)).await;
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    let (a, d) = (command_of(&p, &accepted), command_of(&p, &dispatched));
    let (_, p) = poll(&app, &w, epoch, json!([ack(&a, 1, "accepted", Value::Null)])).await;
    assert_eq!(outcome(&p), "applied");

    let stop = control(&app, &w, &w.token, &accepted, "emergency_stop").await;
    assert_eq!(stop["status"], "stopped");
    for (wf, was) in [(&accepted, "accepted"), (&dispatched, "dispatched")] {
        let s = status(&app, &w, wf["workflow_ref"].as_str().unwrap()).await;
        assert_eq!(
            (s["status"].as_str(), s["reason"].as_str(), s["late_effects_possible"].as_bool()),
            (Some("stopped"), Some("emergency_stop"), Some(true)),
            "a {was} break the connector held may still happen: {s}"
        );
    }

    // The connector had broken the block before it saw the stop: its acknowledgement is
    // recorded, and answered so that it is not sent again.
    let (_, p) = poll(&app, &w, epoch, json!([ack(&a, 2, "completed", air())])).await;
    assert_eq!(outcome(&p), "recorded_late", "{p}");
    assert_eq!(p["emergency_stop_active"], true);
    let s = status(&app, &w, accepted["workflow_ref"].as_str().unwrap()).await;
    assert_eq!((s["status"].as_str(), s["late_effects_possible"].as_bool()), (Some("stopped"), Some(true)), "{s}");
    let late = &s["late_acknowledgements"];
    assert_eq!(late.as_array().map(Vec::len), Some(1), "{s}");
    assert_eq!(
        (late[0]["step"].as_u64(), late[0]["status"].as_str(), late[0]["postcondition_met"].as_bool()),
        (Some(0), Some("completed"), Some(true)),
        "{s}"
    );
    // The dispatched one: the connector says it never started (no world change).
    let mut failed = ack(&d, 1, "failed", Value::Null);
    failed["reason"] = json!("halted");
    let (_, p) = poll(&app, &w, epoch, json!([failed])).await;
    assert_eq!(outcome(&p), "recorded_late", "{p}");
    let s = status(&app, &w, dispatched["workflow_ref"].as_str().unwrap()).await;
    assert_eq!(s["late_acknowledgements"][0]["status"], "failed", "{s}");
    assert_eq!(s["late_acknowledgements"][0]["reason"], "halted", "{s}");
    // Another lease (or a replayed sequence) is not this command's: not recorded.
    let mut forged = ack(&a, 3, "completed", air());
    forged["lease_token"] = json!("not-the-lease");
    let (_, p) = poll(&app, &w, epoch, json!([forged])).await;
    assert_eq!(outcome(&p), "not_at_connector", "{p}");
    let (_, p) = poll(&app, &w, epoch, json!([ack(&a, 2, "completed", air())])).await;
    assert_ne!(outcome(&p), "recorded_late", "{p}");
    let s = status(&app, &w, accepted["workflow_ref"].as_str().unwrap()).await;
    assert_eq!(s["late_acknowledgements"].as_array().map(Vec::len), Some(1), "{s}");
}

async fn a_cancelled_break_the_connector_completed_says_so(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register(&app, &w).await;
    select_first(&app, &w, &w.token).await;
    let (_, done) = act(&app, &w, &w.token, "late-key-0011", brk(5)).await;
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    let c = command_of(&p, &done);
    poll(&app, &w, epoch, json!([ack(&c, 1, "accepted", Value::Null)])).await;
    let v = control(&app, &w, &w.token, &done, "cancel").await;
    assert_eq!((v["status"].as_str(), v["late_effects_possible"].as_bool()), (Some("cancel_requested"), Some(true)));
    // Too late to cancel: the block was broken.
    let (_, p) = poll(&app, &w, epoch, json!([ack(&c, 2, "completed", air())])).await;
    assert_eq!(outcome(&p), "applied", "{p}");
    let s = status(&app, &w, done["workflow_ref"].as_str().unwrap()).await;
    assert_eq!(
        (s["status"].as_str(), s["late_effects_possible"].as_bool()),
        (Some("cancelled"), Some(true)),
        "a cancelled break that happened is never `no effect`: {s}"
    );
    assert_eq!(
        (
            s["late_acknowledgements"][0]["status"].as_str(),
            s["late_acknowledgements"][0]["postcondition_met"].as_bool()
        ),
        (Some("completed"), Some(true)),
        "{s}"
    );

    // Cancelled in time: the connector says it stopped before any change.
    let (_, undone) = act(&app, &w, &w.token, "late-key-0012", brk(6)).await;
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    let c = command_of(&p, &undone);
    poll(&app, &w, epoch, json!([ack(&c, 1, "accepted", Value::Null)])).await;
    control(&app, &w, &w.token, &undone, "cancel").await;
    let mut failed = ack(&c, 2, "failed", Value::Null);
    failed["reason"] = json!("cancelled");
    poll(&app, &w, epoch, json!([failed])).await;
    let s = status(&app, &w, undone["workflow_ref"].as_str().unwrap()).await;
    assert_eq!((s["status"].as_str(), s["late_effects_possible"].as_bool()), (Some("cancelled"), Some(false)), "{s}");
    assert_eq!(s["late_acknowledgements"][0]["status"], "failed", "{s}");
}

async fn a_held_break_taken_back_by_an_authority_revoke_records_its_completion(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register(&app, &w).await;
    let bob = join_bob(&app, &w).await;
    select_first(&app, &w, &bob).await;
    let (member, _) = bob_ref(&app, &w).await;
    assert_eq!(set_authority(&app, &w, &member, "grant", false).await.0, 303);
    let (_, wf) = act(&app, &w, &bob, "late-key-0021", brk(5)).await;
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    let c = command_of(&p, &wf);
    poll(&app, &w, epoch, json!([ack(&c, 1, "accepted", Value::Null)])).await;
    assert_eq!(set_authority(&app, &w, &member, "revoke", true).await.0, 303);

    // The connector reports the block broken; the member may no longer act.
    let (_, p) = poll(&app, &w, epoch, json!([ack(&c, 2, "completed", air())])).await;
    assert_eq!(outcome(&p), "action_authority_revoked", "{p}");
    let s = status(&app, &w, wf["workflow_ref"].as_str().unwrap()).await;
    assert_eq!(
        (s["status"].as_str(), s["reason"].as_str(), s["late_effects_possible"].as_bool()),
        (Some("outcome_unknown"), Some("action_authority_revoked"), Some(true)),
        "a held break is never paused for a blind resume: {s}"
    );
    assert_eq!(
        (
            s["late_acknowledgements"][0]["status"].as_str(),
            s["late_acknowledgements"][0]["postcondition_met"].as_bool()
        ),
        (Some("completed"), Some(true)),
        "{s}"
    );
}

on_both_backends!(
    an_emergency_stop_of_a_held_break_says_late_effects_and_records_the_late_completion,
    a_cancelled_break_the_connector_completed_says_so,
    a_held_break_taken_back_by_an_authority_revoke_records_its_completion,
);
