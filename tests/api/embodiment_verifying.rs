//! `verifying`, on both store backends: a connector may acknowledge a step `completed`
//! before its effect is readable (a chat echo arrives after the send); the workflow is
//! `verifying` until a following `completed` carries the observation, and the
//! postcondition decides then. A verifying mutation past its deadline is
//! `outcome_unknown`, and an Emergency Stop stops it. The queue time and the step deadline
//! come from the configuration.

use helix_integration_tests::*;
use serde_json::{Value, json};

use super::embodiment::{World, ack, act, paired, poll, register, select_first, status, tool};

/// Queues `action` and takes its command at the connector (accepted).
async fn dispatched(app: &TestApp, w: &World, epoch: u64, key: &str, action: Value) -> (String, Value) {
    let (is_error, wf) = act(app, w, &w.token, key, action).await;
    assert!(!is_error && wf["status"] == "queued", "{wf}");
    let r = wf["workflow_ref"].as_str().unwrap().to_owned();
    let (_, p) = poll(app, w, epoch, json!([])).await;
    let cmd = p["commands"].as_array().unwrap().iter().find(|c| c["workflow_ref"] == r.as_str()).cloned();
    let cmd = cmd.unwrap_or_else(|| panic!("{r} not dispatched: {p}"));
    assert_eq!(poll(app, w, epoch, json!([ack(&cmd, 1, "accepted", Value::Null)])).await.0, 200);
    (r, cmd)
}

fn state(s: &Value) -> (Option<&str>, Option<&str>) {
    (s["status"].as_str(), s["reason"].as_str())
}

async fn a_step_completed_before_its_effect_is_readable_is_verifying_until_the_observation(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let w = paired(&app).await;
    let epoch = register(&app, &w).await;
    assert!(!select_first(&app, &w, &w.token).await.0);

    // Sent, then echoed: verifying in between (late effects possible, poll again), never
    // delivered again meanwhile, succeeded from the echo.
    let hello = json!({"type": "chat", "text": "hello"});
    let (r, cmd) = dispatched(&app, &w, epoch, "verify-key-01", hello).await;
    let (_, p) = poll(&app, &w, epoch, json!([ack(&cmd, 2, "completed", Value::Null)])).await;
    assert_eq!(p["acks"][0]["outcome"], "applied", "{p}");
    let s = status(&app, &w, &r).await;
    assert_eq!(state(&s), (Some("verifying"), None), "{s}");
    assert_eq!((s["late_effects_possible"].as_bool(), s["poll_after_ms"].is_u64()), (Some(true), true), "{s}");
    assert_eq!(p["commands"].as_array().map(Vec::len), Some(0), "a verifying step is not handed out again: {p}");
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert_eq!(p["commands"].as_array().map(Vec::len), Some(0), "{p}");
    poll(&app, &w, epoch, json!([ack(&cmd, 3, "progress", Value::Null)])).await;
    assert_eq!(status(&app, &w, &r).await["status"], "verifying", "a late progress changes nothing");
    poll(&app, &w, epoch, json!([ack(&cmd, 4, "completed", json!({"chat_echo": "hello"}))])).await;
    let s = status(&app, &w, &r).await;
    assert_eq!(state(&s), (Some("succeeded"), None), "{s}");
    assert!(s["last_observation_at"].is_string(), "{s}");

    // The echo that follows shows another line: the postcondition decides.
    let (r, cmd) = dispatched(&app, &w, epoch, "verify-key-02", json!({"type": "chat", "text": "again"})).await;
    poll(&app, &w, epoch, json!([ack(&cmd, 2, "completed", Value::Null)])).await;
    poll(&app, &w, epoch, json!([ack(&cmd, 3, "completed", json!({"chat_echo": "other"}))])).await;
    assert_eq!(state(&status(&app, &w, &r).await), (Some("failed"), Some("postcondition_unmet")));

    // A step with nothing to observe needs no observation.
    let (r, cmd) = dispatched(&app, &w, epoch, "verify-key-03", json!({"type": "wait", "ticks": 1})).await;
    poll(&app, &w, epoch, json!([ack(&cmd, 2, "completed", Value::Null)])).await;
    assert_eq!(state(&status(&app, &w, &r).await), (Some("succeeded"), None));

    // No echo before the step's deadline: the line may have been sent, unconfirmed.
    let (r, cmd) = dispatched(&app, &w, epoch, "verify-key-04", json!({"type": "chat", "text": "late"})).await;
    poll(&app, &w, epoch, json!([ack(&cmd, 2, "completed", Value::Null)])).await;
    app.state.services.clock.advance(31);
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert!(p["cancel"].as_array().unwrap().iter().any(|c| c == r.as_str()), "{p}");
    let s = status(&app, &w, &r).await;
    assert_eq!(state(&s), (Some("outcome_unknown"), Some("step_deadline_passed")), "{s}");
    assert_eq!(s["late_effects_possible"], true);

    // A person takes the controls after the send: the effect happened unverified, so it
    // is not resumable (a resume would send it again).
    let (r, cmd) = dispatched(&app, &w, epoch, "verify-key-05", json!({"type": "chat", "text": "mine"})).await;
    poll(&app, &w, epoch, json!([ack(&cmd, 2, "completed", Value::Null)])).await;
    poll(&app, &w, epoch, json!([ack(&cmd, 3, "overridden", Value::Null)])).await;
    assert_eq!(state(&status(&app, &w, &r).await), (Some("outcome_unknown"), Some("manual_override")));

    // An Emergency Stop stops a verifying workflow.
    let (r, cmd) = dispatched(&app, &w, epoch, "verify-key-06", json!({"type": "chat", "text": "stop me"})).await;
    poll(&app, &w, epoch, json!([ack(&cmd, 2, "completed", Value::Null)])).await;
    assert_eq!(status(&app, &w, &r).await["status"], "verifying");
    let control = json!({"room_id": w.room_id, "workflow_ref": r, "control": "emergency_stop"});
    let (is_error, s) = tool(&app, &w.token, "helix_minecraft_workflow_control", control).await;
    assert_eq!((is_error, state(&s)), (false, (Some("stopped"), Some("emergency_stop"))), "{s}");
}

async fn the_queue_time_and_the_step_deadline_come_from_the_configuration(backend: Backend) {
    let env = [("HELIX_EMBODIMENT_QUEUE_TTL_SECS", "5"), ("HELIX_EMBODIMENT_STEP_DEADLINE_MS", "2000")];
    let app = TestApp::spawn_with(backend, &env).await;
    let clock = &app.state.services.clock;
    let w = paired(&app).await;
    let epoch = register(&app, &w).await;
    assert!(!select_first(&app, &w, &w.token).await.0);
    let wait = json!({"type": "wait", "ticks": 1});
    let (_, a) = act(&app, &w, &w.token, "config-key-01", wait.clone()).await;
    clock.advance(6);
    let s = status(&app, &w, a["workflow_ref"].as_str().unwrap()).await;
    assert_eq!(state(&s), (Some("expired"), Some("not_dispatched_in_time")), "{s}");

    let (r, cmd) = dispatched(&app, &w, epoch, "config-key-02", wait).await;
    let left = cmd["deadline_ms"].as_i64().unwrap() - clock.now().timestamp_millis();
    assert!((1_000..=2_000).contains(&left), "the step deadline is the configured 2 s: {left} ms");
    clock.advance(3);
    poll(&app, &w, epoch, json!([])).await;
    assert_eq!(state(&status(&app, &w, &r).await), (Some("timed_out"), Some("step_deadline_passed")));
}

on_both_backends!(
    a_step_completed_before_its_effect_is_readable_is_verifying_until_the_observation,
    the_queue_time_and_the_step_deadline_come_from_the_configuration,
);
