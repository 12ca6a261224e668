//! The races and the crash points of the claim -> execute -> finalize protocol on both
//! store backends: timed-out and slow turns, concurrent continuations and starts, a
//! fault at each store call, contended finalizes, and clients that go away mid-turn.

use std::sync::Arc;
use std::time::Duration;

use helix_core::domain::turn::TurnFailure;
use helix_core::executor::scripted::Step;
use helix_integration_tests::support::faults::FaultPoint;
use helix_integration_tests::support::runs::{assert_contiguous, completing_step, kinds, research_run};
use helix_integration_tests::*;
use serde_json::{Value, json};

use super::lifecycle::{body, go, question_step, start, until_running};

async fn a_timed_out_turn_is_a_typed_step_failure_not_a_hung_request(backend: Backend) {
    let app =
        TestApp::spawn_with(backend, &[("HELIX_AGENT_TURN_TIMEOUT_MS", "1000"), ("HELIX_DEADLINE_MARGIN_MS", "200")])
            .await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(Step::Delay(Duration::from_secs(30), Box::new(completing_step(1))));
    let started = std::time::Instant::now();
    let (status, run) = body(app.continue_run(&token, &id, "timeout-turn-01", go(1)).await).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(status, 200);
    assert_eq!(run["completion_status"], "blocked");
    assert_eq!(run["latest_result"]["failure_code"], "turn_timeout");
    assert_eq!(run["budget"]["steps_used"], 1);
    assert_eq!(run["recommended_next_action"], "continue");
    app.script(Step::Fail(TurnFailure::ExecutorUnavailable));
    let (_, run) = body(app.continue_run(&token, &id, "timeout-turn-02", go(2)).await).await;
    assert_eq!(run["latest_result"]["failure_code"], "executor_unavailable");
    assert_eq!(
        run["unresolved_requirements"].as_array().unwrap().iter().filter(|r| r["kind"] == "turn_failure").count(),
        1
    );
}

async fn sixteen_concurrent_continuations_accept_exactly_one(backend: Backend) {
    let app = Arc::new(TestApp::spawn_with(backend, &[]).await);
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(Step::Delay(Duration::from_millis(300), Box::new(question_step("q1"))));
    let calls = (0..16).map(|i| {
        let (app, token, id) = (app.clone(), token.clone(), id.clone());
        tokio::spawn(
            async move { body(app.continue_run(&token, &id, &format!("race-turn-{i:04}"), go(1)).await).await },
        )
    });
    let results: Vec<(u16, Value)> = futures::future::join_all(calls).await.into_iter().map(Result::unwrap).collect();
    let accepted = results.iter().filter(|(s, _)| *s == 200).count();
    assert_eq!(accepted, 1, "{results:?}");
    for (status, b) in results.iter().filter(|(s, _)| *s != 200) {
        assert_eq!(*status, 409);
        assert!(["run_busy", "version_conflict"].contains(&b["error"]["code"].as_str().unwrap()), "{b}");
    }
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1);
    let events = app.events(&token, &id).await;
    assert_contiguous(&events);
    let run: Value = app.get(&format!("/api/v1/agent-runs/{id}"), &token).send().await.unwrap().json().await.unwrap();
    assert_eq!(run["version"], 2);
    assert_eq!(run["budget"]["steps_used"], 1);
}

async fn the_same_key_during_a_running_turn_is_idempotency_in_progress(backend: Backend) {
    let app = Arc::new(TestApp::spawn_with(backend, &[]).await);
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(Step::Delay(Duration::from_millis(1500), Box::new(question_step("q1"))));
    let slow = {
        let (app, token, id) = (app.clone(), token.clone(), id.clone());
        tokio::spawn(async move { body(app.continue_run(&token, &id, "same-key-turn-1", go(1)).await).await })
    };
    until_running(&app, &token, &id).await;
    let (status, err) = body(app.continue_run(&token, &id, "same-key-turn-1", go(1)).await).await;
    assert_eq!((status, err["error"]["code"].as_str()), (409, Some("idempotency_in_progress")));
    let during: Value =
        app.get(&format!("/api/v1/agent-runs/{id}"), &token).send().await.unwrap().json().await.unwrap();
    assert_eq!(during["lifecycle_status"], "running");
    assert_eq!(during["completion_status"], "pending");
    assert_eq!(during["recommended_next_action"], "wait");
    assert_eq!(during["version"], 1, "a claim is not a version");
    assert_eq!(err["error"]["retryable"], true);
    assert_eq!(slow.await.unwrap().0, 200);
}

async fn cancel_during_a_slow_turn_wins_and_the_stale_result_is_discarded(backend: Backend) {
    let app = Arc::new(TestApp::spawn_with(backend, &[]).await);
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(Step::Delay(Duration::from_secs(20), Box::new(completing_step(1))));
    let turn = {
        let (app, token, id) = (app.clone(), token.clone(), id.clone());
        tokio::spawn(async move { body(app.continue_run(&token, &id, "slow-turn-0001", go(1)).await).await })
    };
    until_running(&app, &token, &id).await;
    let started = std::time::Instant::now();
    let (status, cancelled) =
        body(app.cancel(&token, &id, "cancel-slow-001", json!({"expected_version": 1})).await).await;
    assert_eq!(status, 200, "{cancelled}");
    let (turn_status, turn_body) = turn.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "the process-local signal stopped the turn");
    assert_eq!(turn_status, 409);
    assert_eq!(turn_body["error"]["code"], "run_not_continuable");
    let run: Value = app.get(&format!("/api/v1/agent-runs/{id}"), &token).send().await.unwrap().json().await.unwrap();
    assert_eq!(run["completion_status"], "cancelled");
    assert_eq!(run["version"], 2);
    assert_eq!(run["budget"]["steps_used"], 0, "the discarded turn consumed nothing");
    let events = app.events(&token, &id).await;
    assert_contiguous(&events);
    assert_eq!(kinds(&events), ["run_started", "run_cancelled"]);
    let replay = app.continue_run(&token, &id, "slow-turn-0001", go(1)).await;
    assert_eq!(replay.headers()["idempotency-replayed"], "true");
    assert_eq!(replay.status(), 409, "the stored refusal replays");
}

/// A continuation makes three store calls: (1) one read of the principal's link and
/// binding with the run and the receipt, (2) the claim transaction, (3) the finalize
/// transaction. A fault before or after each must never lose or
/// duplicate a step; retries with the same key end in a replay or outcome_unknown.
async fn a_fault_at_each_store_call_of_continue_never_duplicates_a_step(backend: Backend) {
    for call in 1..=3 {
        for point in [FaultPoint::Before, FaultPoint::After] {
            let app = TestApp::spawn_with(backend, &[]).await;
            let token = app.token().await;
            let id = start(&app, &token, research_run()).await;
            app.script(question_step("q1"));
            app.script(question_step("q2"));
            app.faults.arm(call, point);
            let (status, _) = body(app.continue_run(&token, &id, "faulty-turn-001", go(1)).await).await;
            assert_eq!(status, 503, "call {call} {point:?}: the fault surfaces as unavailable");
            let (retry_status, retry) = body(app.continue_run(&token, &id, "faulty-turn-001", go(1)).await).await;
            let claimed_but_unfinished =
                call == 3 && point == FaultPoint::Before || call == 2 && point == FaultPoint::After;
            let finished = call == 3 && point == FaultPoint::After;
            if finished {
                assert_eq!(retry_status, 200, "call {call} {point:?}: replay {retry}");
                assert_eq!(retry["version"], 2);
            } else if claimed_but_unfinished {
                assert_eq!(retry["error"]["code"], "idempotency_in_progress", "call {call} {point:?}");
                app.state.services.clock.advance(200);
                let (_, unknown) = body(app.continue_run(&token, &id, "faulty-turn-001", go(1)).await).await;
                assert_eq!(unknown["error"]["code"], "outcome_unknown", "call {call} {point:?}");
                assert_eq!(unknown["error"]["details"]["run_id"], id.as_str());
                // A new continuation at the current version recovers the run.
                let (status, run) = body(app.continue_run(&token, &id, "recover-turn-01", go(1)).await).await;
                assert_eq!(status, 200, "call {call} {point:?}: {run}");
                assert_eq!(run["version"], 2);
                assert!(kinds(&app.events(&token, &id).await).contains(&"run_recovered".to_string()));
            } else {
                assert_eq!(retry_status, 200, "call {call} {point:?}: nothing was written, the retry runs: {retry}");
            }
            let run: Value =
                app.get(&format!("/api/v1/agent-runs/{id}"), &token).send().await.unwrap().json().await.unwrap();
            assert_eq!(run["budget"]["steps_used"], 1, "call {call} {point:?}: exactly one step");
            assert_eq!(run["version"], 2);
            assert_contiguous(&app.events(&token, &id).await);
        }
    }
}

async fn a_contended_finalize_is_retried_not_discarded(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(completing_step(1));
    app.faults.arm(3, FaultPoint::Conflict); // (1) read, (2) claim, (3) finalize
    let (status, run) = body(app.continue_run(&token, &id, "contended-turn-1", go(1)).await).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["completion_status"], "completed");
    assert_eq!(run["version"], 2);
    assert_contiguous(&app.events(&token, &id).await);
}

async fn concurrent_starts_with_one_key_create_one_run(backend: Backend) {
    let app = Arc::new(TestApp::spawn_with(backend, &[]).await);
    let token = app.token().await;
    let calls = (0..8).map(|_| {
        let (app, token) = (app.clone(), token.clone());
        tokio::spawn(async move {
            let res = app.start(&token, "one-key-many-starts", research_run()).await;
            let replayed = res.headers().get("idempotency-replayed").map(|v| v == "true");
            (res.status().as_u16(), replayed, res.json::<Value>().await.unwrap())
        })
    });
    let results: Vec<_> = futures::future::join_all(calls).await.into_iter().map(Result::unwrap).collect();
    let created: Vec<_> = results.iter().filter(|(s, _, _)| *s == 201).collect();
    assert_eq!(created.iter().filter(|(_, replayed, _)| *replayed == Some(false)).count(), 1, "{results:?}");
    assert!(created.iter().all(|(_, _, b)| b["run_id"] == created[0].2["run_id"]), "one run: {results:?}");
    for (status, _, b) in results.iter().filter(|(s, _, _)| *s != 201) {
        assert_eq!((*status, b["error"]["code"].as_str()), (409, Some("idempotency_in_progress")), "{b}");
    }
}

/// Item 2: a client that gives up mid-turn (timeout, closed socket) does not abort the turn:
/// the claimed turn runs to its finalize, and a retry of the key replays it.
async fn a_continuation_whose_client_disconnects_mid_turn_still_finalizes(backend: Backend) {
    let app = Arc::new(TestApp::spawn_with(backend, &[]).await);
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(Step::Delay(Duration::from_millis(1500), Box::new(question_step("q1"))));
    let impatient = reqwest::Client::builder().timeout(Duration::from_millis(400)).build().unwrap();
    let gone = impatient
        .post(format!("{}/api/v1/agent-runs/{id}/continue", app.base))
        .bearer_auth(&token)
        .header("Idempotency-Key", "disconnect-turn-1")
        .json(&go(1))
        .send()
        .await;
    assert!(gone.is_err_and(|e| e.is_timeout()), "the client gave up before the turn ended");
    // Polled sparingly (the principal rate limit counts every read); the turn takes 1.5 s,
    // and up to 15 s are allowed for a loaded machine to finalize it.
    let mut run = Value::Null;
    for _ in 0..75 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        run = app.get(&format!("/api/v1/agent-runs/{id}"), &token).send().await.unwrap().json().await.unwrap();
        if run["version"] == 2 {
            break;
        }
    }
    assert_eq!(run["version"], 2, "the claimed turn finalized without its client: {run}");
    assert_eq!(run["completion_status"], "needs_input");
    assert_eq!(run["budget"]["steps_used"], 1);
    let events = app.events(&token, &id).await;
    assert_contiguous(&events);
    assert_eq!(*kinds(&events).last().unwrap(), "run_waiting");
    let retry = app.continue_run(&token, &id, "disconnect-turn-1", go(1)).await;
    assert_eq!(retry.status(), 200);
    assert_eq!(retry.headers()["idempotency-replayed"], "true");
    assert_eq!(retry.json::<Value>().await.unwrap()["version"], 2);
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1, "one turn executed");
}

/// Item 2: a turn whose client went away is still this process's running turn: a cancel
/// stops it, its result is discarded, and its key replays the refusal.
async fn a_cancel_stops_a_turn_whose_client_went_away(backend: Backend) {
    let app = Arc::new(TestApp::spawn_with(backend, &[]).await);
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(Step::Delay(Duration::from_secs(20), Box::new(completing_step(1))));
    // The client goes away once its turn holds the claim. (Leaving after a fixed time
    // instead raced the server under load: a client gone before the request was
    // authenticated and detached never started a turn at all, which is correct.)
    let request = app
        .http
        .post(format!("{}/api/v1/agent-runs/{id}/continue", app.base))
        .bearer_auth(&token)
        .header("Idempotency-Key", "gone-turn-00001")
        .json(&go(1))
        .send();
    let client = tokio::spawn(request);
    until_running(&app, &token, &id).await;
    client.abort();
    assert!(client.await.is_err_and(|e| e.is_cancelled()), "the client left before its answer");
    let (status, _) = body(app.cancel(&token, &id, "cancel-gone-0001", json!({"expected_version": 1})).await).await;
    assert_eq!(status, 200);
    let mut replay = (0, Value::Null);
    for _ in 0..25 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        replay = body(app.continue_run(&token, &id, "gone-turn-00001", go(1)).await).await;
        if replay.1["error"]["code"] != "idempotency_in_progress" {
            break;
        }
    }
    assert_eq!((replay.0, replay.1["error"]["code"].as_str()), (409, Some("run_not_continuable")), "{replay:?}");
    let events = app.events(&token, &id).await;
    assert_contiguous(&events);
    assert_eq!(kinds(&events), ["run_started", "run_cancelled"]);
}

on_both_backends!(
    a_timed_out_turn_is_a_typed_step_failure_not_a_hung_request,
    sixteen_concurrent_continuations_accept_exactly_one,
    the_same_key_during_a_running_turn_is_idempotency_in_progress,
    cancel_during_a_slow_turn_wins_and_the_stale_result_is_discarded,
    a_fault_at_each_store_call_of_continue_never_duplicates_a_step,
    a_contended_finalize_is_retried_not_discarded,
    concurrent_starts_with_one_key_create_one_run,
    a_continuation_whose_client_disconnects_mid_turn_still_finalizes,
    a_cancel_stops_a_turn_whose_client_went_away,
);
