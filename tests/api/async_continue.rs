//! Asynchronous continue (`Prefer: respond-async`): a turn longer than the gateway in
//! front (emulated by `HELIX_GATEWAY_TIMEOUT_MS`) is claimed, answered `202`, runs to its
//! own deadline in the background and is learned from inspect, events or the key's replay.

use std::sync::Arc;
use std::time::Duration;

use helix_core::executor::scripted::Step;
use helix_integration_tests::support::runs::{assert_contiguous, completing_step, kinds, research_run};
use helix_integration_tests::*;
use serde_json::{Value, json};

use super::lifecycle::{body, go, start};

/// A 1 s gateway with a 0.2 s margin: a synchronous turn gets 0.8 s.
const BEHIND_A_GATEWAY: &[(&str, &str)] = &[("HELIX_GATEWAY_TIMEOUT_MS", "1000"), ("HELIX_DEADLINE_MARGIN_MS", "200")];

/// A scripted solver turn three times longer than the gateway.
fn slow_turn() -> Step {
    Step::Delay(Duration::from_secs(3), Box::new(completing_step(1)))
}

async fn a_turn_longer_than_the_gateway_completes_when_continued_asynchronously(backend: Backend) {
    let app = TestApp::spawn_with(backend, BEHIND_A_GATEWAY).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(slow_turn());
    let started = std::time::Instant::now();
    let res = app.continue_async(&token, &id, "async-turn-0001", go(1)).await;
    assert!(started.elapsed() < Duration::from_secs(1), "answered before the gateway's limit");
    assert_eq!(res.status(), 202);
    let h = res.headers().clone();
    assert_eq!(h["preference-applied"], "respond-async");
    assert_eq!(h["location"], format!("/api/v1/agent-runs/{id}"));
    assert!(h["retry-after"].to_str().unwrap().parse::<u64>().unwrap() >= 1);
    assert_eq!(h["idempotency-replayed"], "false");
    let accepted: Value = res.json().await.unwrap();
    assert_eq!((accepted["run_id"].as_str(), accepted["version"].as_u64()), (Some(id.as_str()), Some(1)));
    assert_eq!(accepted["lifecycle_status"], "running");

    // Until the turn ends, the key answers in progress and names the run.
    let (status, during) = body(app.continue_async(&token, &id, "async-turn-0001", go(1)).await).await;
    assert_eq!((status, during["error"]["code"].as_str()), (409, Some("idempotency_in_progress")), "{during}");
    assert_eq!(during["error"]["details"]["run_id"], id.as_str());
    assert_eq!(during["error"]["retryable"], true);

    let run = app.until_version(&token, &id, 2, Duration::from_secs(20)).await;
    assert_eq!(run["completion_status"], "completed", "{run}");
    assert!(started.elapsed() >= Duration::from_secs(3), "the turn ran its whole 3 s");
    assert_eq!(run["budget"]["steps_used"], 1);
    let events = app.events(&token, &id).await;
    assert_contiguous(&events);
    assert_eq!(kinds(&events).iter().filter(|k| *k == "continuation_received").count(), 1, "{:?}", kinds(&events));

    // Once finished, the key replays what the synchronous call would have answered,
    // with or without the preference.
    for replay in [
        app.continue_async(&token, &id, "async-turn-0001", go(1)).await,
        app.continue_run(&token, &id, "async-turn-0001", go(1)).await,
    ] {
        assert_eq!(replay.status(), 200);
        assert_eq!(replay.headers()["idempotency-replayed"], "true");
        assert!(!replay.headers().contains_key("preference-applied"));
        let replayed: Value = replay.json().await.unwrap();
        assert_eq!(replayed["version"], 2);
        assert_eq!(replayed["completion_status"], "completed");
    }
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1, "one turn executed");
}

async fn without_the_preference_the_gateway_still_bounds_the_turn(backend: Backend) {
    let app = TestApp::spawn_with(backend, BEHIND_A_GATEWAY).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(slow_turn());
    let started = std::time::Instant::now();
    let res = app.continue_run(&token, &id, "sync-turn-00001", go(1)).await;
    assert!(started.elapsed() < Duration::from_secs(2), "the synchronous turn fits the gateway");
    assert!(!res.headers().contains_key("preference-applied"));
    let (status, run) = body(res).await;
    assert_eq!(status, 200);
    assert_eq!(run["latest_result"]["failure_code"], "turn_timeout");
}

async fn an_asynchronous_continue_is_refused_as_a_synchronous_one(backend: Backend) {
    let app = Arc::new(TestApp::spawn_with(backend, BEHIND_A_GATEWAY).await);
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    let (status, stale) = body(app.continue_async(&token, &id, "async-stale-001", go(7)).await).await;
    assert_eq!((status, stale["error"]["code"].as_str()), (409, Some("version_conflict")));
    app.script(slow_turn());
    assert_eq!(app.continue_async(&token, &id, "async-first-001", go(1)).await.status(), 202);
    let (status, busy) = body(app.continue_async(&token, &id, "async-second-01", go(1)).await).await;
    assert_eq!((status, busy["error"]["code"].as_str()), (409, Some("run_busy")));
    let (status, other) =
        body(app.continue_async(&token, &id, "async-first-001", go(1).merge_instruction()).await).await;
    assert_eq!((status, other["error"]["code"].as_str()), (422, Some("idempotency_conflict")));
    let reader = app.token_for("alice", "tenant-a", &["helix.agent_runs.read"]).await;
    let (status, _) = body(app.continue_async(&reader, &id, "async-scope-001", go(1)).await).await;
    assert_eq!(status, 403);
    let bob = app.token_for("bob", "tenant-a", &["helix.agent_runs.read", "helix.agent_runs.write"]).await;
    let (status, _) = body(app.continue_async(&bob, &id, "async-owner-001", go(1)).await).await;
    assert_eq!(status, 404, "another owner's run is not found");
}

async fn cancel_stops_an_asynchronous_turn(backend: Backend) {
    let app = TestApp::spawn_with(backend, BEHIND_A_GATEWAY).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(Step::Delay(Duration::from_secs(20), Box::new(completing_step(1))));
    assert_eq!(app.continue_async(&token, &id, "async-cancel-01", go(1)).await.status(), 202);
    let started = std::time::Instant::now();
    let (status, cancelled) =
        body(app.cancel(&token, &id, "cancel-async-01", json!({"expected_version": 1})).await).await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["completion_status"], "cancelled");
    let mut replay = (0, Value::Null);
    for _ in 0..25 {
        replay = body(app.continue_async(&token, &id, "async-cancel-01", go(1)).await).await;
        if replay.1["error"]["code"] != "idempotency_in_progress" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(started.elapsed() < Duration::from_secs(10), "the cancel stopped the turn, not its 20 s");
    assert_eq!((replay.0, replay.1["error"]["code"].as_str()), (409, Some("run_not_continuable")), "{replay:?}");
    let run: Value = app.get(&format!("/api/v1/agent-runs/{id}"), &token).send().await.unwrap().json().await.unwrap();
    assert_eq!((run["version"].as_u64(), run["budget"]["steps_used"].as_u64()), (Some(2), Some(0)));
    let events = app.events(&token, &id).await;
    assert_contiguous(&events);
    assert_eq!(kinds(&events), ["run_started", "run_cancelled"]);
}

trait Instruction {
    fn merge_instruction(self) -> Value;
}

impl Instruction for Value {
    /// The same continuation with another instruction: another request under the same key.
    fn merge_instruction(mut self) -> Value {
        self["instruction"] = json!("Something else entirely.");
        self
    }
}

on_both_backends!(
    a_turn_longer_than_the_gateway_completes_when_continued_asynchronously,
    without_the_preference_the_gateway_still_bounds_the_turn,
    an_asynchronous_continue_is_refused_as_a_synchronous_one,
    cancel_stops_an_asynchronous_turn,
);
