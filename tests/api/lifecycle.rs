//! Continue, cancel, completion, evidence and budgets: every status transition of the
//! claim -> execute -> finalize protocol. Its races and crash points are in `lifecycle_races`.

use std::time::Duration;

use helix_core::domain::run::Question;
use helix_core::domain::turn::TurnFailure;
use helix_core::executor::scripted::Step;
use helix_integration_tests::support::runs::{
    assert_contiguous, completing_step, evidence_artifact, kinds, research_run,
};
use helix_integration_tests::*;
use serde_json::{Value, json};

pub(crate) fn go(version: u64) -> Value {
    json!({ "expected_version": version, "instruction": "Find the measured force." })
}

pub(crate) async fn body(res: reqwest::Response) -> (u16, Value) {
    (res.status().as_u16(), res.json().await.unwrap())
}

pub(crate) async fn start(app: &TestApp, token: &str, body: Value) -> String {
    app.started(token, body).await["run_id"].as_str().unwrap().to_owned()
}

/// Waits until inspect shows the turn holding its claim (bounded), so a test acts
/// during the turn whatever the machine's load.
pub(crate) async fn until_running(app: &TestApp, token: &str, id: &str) {
    for _ in 0..200 {
        let run: Value =
            app.get(&format!("/api/v1/agent-runs/{id}"), token).send().await.unwrap().json().await.unwrap();
        if run["lifecycle_status"] == "running" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the turn never started");
}

pub(crate) fn question_step(id: &str) -> Step {
    let mut a = evidence_artifact(0);
    a.solver_status = helix_core::domain::turn::SolverStatus::Partial;
    a.satisfied_evidence_families.clear();
    a.pending_questions = vec![Question { question_id: id.into(), prompt: "Which geometry?".into() }];
    Step::Artifact(a)
}

async fn a_continuation_completes_the_run_with_verified_authority(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(completing_step(2));
    let (status, run) = body(app.continue_run(&token, &id, "turn-0001-key", go(1)).await).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["version"], 2);
    assert_eq!(run["lifecycle_status"], "completed");
    assert_eq!(run["completion_status"], "completed");
    assert_eq!(run["terminal_authority_status"], "authorized");
    assert_eq!(run["recommended_next_action"], "stop");
    assert_eq!(run["budget"]["steps_used"], 1);
    assert_eq!(run["unresolved_requirements"], json!([]));
    assert_eq!(run["latest_result"]["terminal_product"]["supporting_evidence_refs"].as_array().unwrap().len(), 2);
    assert!(run["completed_at"].is_string());
    for flag in ["answer_authority", "assistant_answer", "terminal_eligible", "raw_content_included"] {
        assert_eq!(run[flag], false);
    }
    let events = app.events(&token, &id).await;
    assert_contiguous(&events);
    assert_eq!(
        kinds(&events),
        ["run_started", "continuation_received", "evidence_reentered", "terminal_authority_evaluated", "run_completed"]
    );
    let bundle: Value =
        app.get(&format!("/api/v1/agent-runs/{id}/evidence"), &token).send().await.unwrap().json().await.unwrap();
    assert_eq!(bundle["schema"], "helix.agent_run.evidence_bundle.v1");
    assert_eq!(bundle["evidence_refs"].as_array().unwrap().len(), 2);
    assert_eq!(bundle["terminal_authority_status"], "authorized");
    assert!(bundle["terminal_candidate_ref"].as_str().unwrap().starts_with("terminal:sha256:"));
    assert_eq!(bundle["answer_authority"], false);
    assert_eq!(bundle["raw_content_included"], false);
    let (status, err) = body(app.continue_run(&token, &id, "turn-0002-key", go(2)).await).await;
    assert_eq!((status, err["error"]["code"].as_str()), (409, Some("run_not_continuable")));
}

async fn a_pending_question_needs_input_and_its_answer_continues(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(question_step("q_geometry"));
    let (_, run) = body(app.continue_run(&token, &id, "turn-q-00001", go(1)).await).await;
    assert_eq!(run["completion_status"], "needs_input");
    assert_eq!(run["lifecycle_status"], "waiting");
    assert_eq!(run["recommended_next_action"], "answer_questions");
    assert_eq!(run["pending_questions"][0]["question_id"], "q_geometry");
    let unknown = json!({ "expected_version": 2, "answers": [{ "question_id": "q_other", "value": "x" }] });
    let (status, err) = body(app.continue_run(&token, &id, "turn-q-00002", unknown).await).await;
    assert_eq!((status, err["error"]["code"].as_str()), (400, Some("invalid_request")));
    let twice = json!({ "expected_version": 2, "answers": [{ "question_id": "q_geometry", "value": 1 }, { "question_id": "q_geometry", "value": 2 }] });
    assert_eq!(app.continue_run(&token, &id, "turn-q-00003", twice).await.status(), 400);
    app.script(completing_step(1));
    let answer = json!({ "expected_version": 2, "answers": [{ "question_id": "q_geometry", "value": { "geometry": "sphere-plate" } }] });
    let (_, run) = body(app.continue_run(&token, &id, "turn-q-00004", answer).await).await;
    assert_eq!(run["completion_status"], "completed", "{run}");
    assert_eq!(run["pending_questions"], json!([]));
    let answered = app.executor.seen.lock().unwrap().last().unwrap().answers[0].question_id.clone();
    assert_eq!(answered, "q_geometry", "the answer reaches the executor");
    let kinds = kinds(&app.events(&token, &id).await);
    assert!(
        kinds.contains(&"input_requested".to_string()) && kinds.contains(&"issue_resolved".to_string()),
        "{kinds:?}"
    );
}

async fn a_stale_version_is_version_conflict_with_the_current_version(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(question_step("q1"));
    app.continue_run(&token, &id, "stale-0000001", go(1)).await;
    let (status, err) = body(app.continue_run(&token, &id, "stale-0000002", go(1)).await).await;
    assert_eq!(status, 409);
    assert_eq!(err["error"]["code"], "version_conflict");
    assert_eq!(err["error"]["details"]["current_version"], 2);
    let (status, _) =
        body(app.continue_run(&token, &id, "stale-0000003", json!({"expected_version": 0, "instruction": "x"})).await)
            .await;
    assert_eq!(status, 400);
    let (status, _) = body(app.continue_run(&token, &id, "stale-0000004", json!({"expected_version": 2})).await).await;
    assert_eq!(status, 400, "needs an instruction or an answer");
}

async fn a_retried_continuation_replays_without_a_second_step(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(question_step("q1"));
    let first = app.continue_run(&token, &id, "retry-turn-001", go(1)).await;
    assert_eq!(first.headers()["idempotency-replayed"], "false");
    let first: Value = first.json().await.unwrap();
    let again = app.continue_run(&token, &id, "retry-turn-001", go(1)).await;
    assert_eq!(again.headers()["idempotency-replayed"], "true");
    assert_eq!(again.json::<Value>().await.unwrap(), first);
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1, "one turn executed");
    let (status, err) = body(app.continue_run(&token, &id, "retry-turn-001", go(2)).await).await;
    assert_eq!((status, err["error"]["code"].as_str()), (422, Some("idempotency_conflict")));
}

async fn cancel_is_irreversible_versioned_and_replayable(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    let stale = app.cancel(&token, &id, "cancel-stale-01", json!({"expected_version": 5})).await;
    assert_eq!(stale.status(), 409);
    let req = json!({"expected_version": 1, "reason": "no longer needed"});
    let res = app.cancel(&token, &id, "cancel-key-0001", req.clone()).await;
    assert_eq!(res.headers()["etag"], "W/\"v2\"");
    let (status, run) = body(res).await;
    assert_eq!(status, 200);
    assert_eq!(run["lifecycle_status"], "cancelled");
    assert_eq!(run["completion_status"], "cancelled");
    assert_eq!(run["version"], 2);
    assert!(run["cancelled_at"].is_string());
    let replay = app.cancel(&token, &id, "cancel-key-0001", req).await;
    assert_eq!(replay.headers()["idempotency-replayed"], "true");
    let (status, err) = body(app.continue_run(&token, &id, "after-cancel-1", go(2)).await).await;
    assert_eq!((status, err["error"]["code"].as_str()), (409, Some("run_not_continuable")));
    assert_eq!(err["error"]["details"]["completion_status"], "cancelled");
    let again = app.cancel(&token, &id, "cancel-key-0002", json!({"expected_version": 2})).await;
    assert_eq!(again.status(), 409);
    let events = app.events(&token, &id).await;
    assert_contiguous(&events);
    assert_eq!(kinds(&events), ["run_started", "run_cancelled"]);
}

async fn the_last_step_without_completion_exhausts_the_budget(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(
        &app,
        &token,
        json!({"objective": "x", "database_scope": ["research_library"], "budget": {"max_steps": 1}}),
    )
    .await;
    app.script(Step::Artifact(evidence_artifact(1)));
    let (_, run) = body(app.continue_run(&token, &id, "budget-turn-01", go(1)).await).await;
    assert_eq!(run["completion_status"], "budget_exhausted", "{run}");
    assert_eq!(run["lifecycle_status"], "failed");
    assert_eq!(run["budget"]["steps_remaining"], 0);
    assert_eq!(*kinds(&app.events(&token, &id).await).last().unwrap(), "budget_exhausted");
}

async fn an_expired_run_ends_as_budget_exhausted_without_a_turn(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, json!({"objective": "x", "budget": {"expires_in_seconds": 60}})).await;
    app.state.services.clock.advance(61);
    let (status, run) = body(app.continue_run(&token, &id, "expired-turn-1", go(1)).await).await;
    assert_eq!(status, 200);
    assert_eq!(run["completion_status"], "budget_exhausted");
    assert_eq!(run["version"], 2);
    assert!(app.executor.seen.lock().unwrap().is_empty(), "no turn ran");
}

async fn required_evidence_is_a_hard_gate_that_strips_the_terminal_product(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    // Evidence and a valid signature, but the turn does not name the required family.
    let mut artifact = evidence_artifact(2);
    artifact.satisfied_evidence_families.clear();
    artifact.resolved_requirements = vec!["required_evidence:research_library_evidence".into()];
    let refs = artifact.evidence.iter().map(|e| e.reference.clone()).collect();
    app.script(Step::Signed { artifact, text: "answer".into(), refs });
    let (_, run) = body(app.continue_run(&token, &id, "gate-turn-0001", go(1)).await).await;
    assert_eq!(run["completion_status"], "blocked", "{run}");
    assert_eq!(run["terminal_authority_status"], "blocked");
    assert_eq!(run["latest_result"]["terminal_product"], Value::Null);
    assert_eq!(run["unresolved_requirements"][0]["id"], "required_evidence:research_library_evidence");
    // Earlier turns' evidence cannot clear it either: the next turn names the family but brings no refs.
    let mut empty = evidence_artifact(0);
    empty.satisfied_evidence_families = vec!["research_library_evidence".into()];
    app.script(Step::Artifact(empty));
    let (_, run) = body(app.continue_run(&token, &id, "gate-turn-0002", go(2)).await).await;
    assert_eq!(run["terminal_authority_status"], "blocked");
    app.script(completing_step(1));
    let (_, run) = body(app.continue_run(&token, &id, "gate-turn-0003", go(3)).await).await;
    assert_eq!(run["completion_status"], "completed");
}

async fn a_forged_or_stale_terminal_candidate_is_rejected(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    let mut artifact = evidence_artifact(1);
    let forger = helix_core::domain::authority::TerminalSigner::from_seed(SIGNER_ISSUER, "k1", [1; 32]);
    artifact.terminal_candidate = Some(forger.sign(&id, 1, "guessed-claim", "forged", vec!["evidence:test:0".into()]));
    app.script(Step::Artifact(artifact));
    let (_, run) = body(app.continue_run(&token, &id, "forged-turn-01", go(1)).await).await;
    assert_eq!(run["terminal_authority_status"], "rejected");
    assert_eq!(run["completion_status"], "blocked");
    assert_eq!(run["latest_result"]["terminal_product"], Value::Null);
    // Signed for this turn, but citing a ref the turn did not supply.
    app.script(Step::Signed {
        artifact: evidence_artifact(1),
        text: "t".into(),
        refs: vec!["evidence:elsewhere".into()],
    });
    let (_, run) = body(app.continue_run(&token, &id, "forged-turn-02", go(2)).await).await;
    assert_eq!(run["terminal_authority_status"], "rejected");
}

async fn contradictions_are_conflict_detected_unless_allowed(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    let mut artifact = evidence_artifact(1);
    artifact.contradictions = vec![helix_core::domain::run::Contradiction {
        id: "c1".into(),
        claim: "two measurements disagree".into(),
        evidence_refs: vec!["evidence:test:0".into()],
    }];
    let refs = vec!["evidence:test:0".to_string()];
    app.script(Step::Signed { artifact: artifact.clone(), text: "t".into(), refs: refs.clone() });
    let (_, run) = body(app.continue_run(&token, &id, "conflict-turn-1", go(1)).await).await;
    assert_eq!(run["completion_status"], "conflict_detected");
    assert_eq!(run["contradictions"][0]["id"], "c1");
    let allowing = start(&app, &token, json!({"objective": "x", "database_scope": ["research_library"], "completion_contract": {"allow_conflicts": true}})).await;
    app.script(Step::Signed { artifact, text: "t".into(), refs });
    let (_, run) = body(app.continue_run(&token, &allowing, "conflict-turn-2", go(1)).await).await;
    assert_eq!(run["completion_status"], "completed");
}

async fn too_little_evidence_needs_more_evidence_and_a_failed_solver_fails_the_run(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, json!({"objective": "x", "database_scope": ["research_library"], "completion_contract": {"min_evidence_refs": 3}})).await;
    app.script(completing_step(1));
    let (_, run) = body(app.continue_run(&token, &id, "evidence-turn-1", go(1)).await).await;
    assert_eq!(run["completion_status"], "needs_more_evidence");
    assert_eq!(run["recommended_next_action"], "continue");
    let mut failed = evidence_artifact(0);
    failed.solver_status = helix_core::domain::turn::SolverStatus::Failed;
    app.script(Step::Artifact(failed));
    let (_, run) = body(app.continue_run(&token, &id, "evidence-turn-2", go(2)).await).await;
    assert_eq!(run["completion_status"], "failed");
    assert_eq!(run["lifecycle_status"], "failed");
    assert_eq!(*kinds(&app.events(&token, &id).await).last().unwrap(), "run_failed");
}

async fn without_required_authority_evidence_alone_completes(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(
        &app,
        &token,
        json!({"objective": "x", "database_scope": ["research_library"],
                                   "completion_contract": {"require_terminal_authority": false}}),
    )
    .await;
    // Read mode: the evidence is of the run's one admitted family (a run without scopes
    // may cite none).
    app.script(Step::Artifact(evidence_artifact(1)));
    let (_, run) = body(app.continue_run(&token, &id, "no-authority-01", go(1)).await).await;
    assert_eq!(run["completion_status"], "completed", "{run}");
    assert_eq!(run["terminal_authority_status"], "not_required");
}

async fn the_account_policy_is_rechecked_before_every_continuation(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    let provider = app.state.services.config.oauth.provider.clone();
    app.state
        .services
        .accounts
        .set_denied_capabilities(&provider, "alice", &["research-library.read_document"])
        .await
        .unwrap();
    let (status, err) = body(app.continue_run(&token, &id, "policy-turn-01", go(1)).await).await;
    assert_eq!((status, err["error"]["code"].as_str()), (403, Some("data_scope_not_admitted")));
}

async fn evidence_of(app: &TestApp, token: &str, id: &str) -> Value {
    let res = app.get(&format!("/api/v1/agent-runs/{id}/evidence"), token).send().await.unwrap();
    res.json().await.unwrap()
}

/// Item 11: only a successful solver artifact projects evidence, and when terminal grounding
/// is required only what the verified authority cites.
async fn evidence_is_projected_only_from_a_successful_turn_within_the_authority_refs(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    // A partial solver artifact carrying refs projects nothing.
    let mut partial = evidence_artifact(2);
    partial.solver_status = helix_core::domain::turn::SolverStatus::Partial;
    partial.observation_refs = vec!["observation:partial:0".into()];
    app.script(Step::Artifact(partial));
    let (_, run) = body(app.continue_run(&token, &id, "projection-turn-1", go(1)).await).await;
    assert_eq!(run["evidence"]["evidence_refs"], json!([]), "{run}");
    assert_eq!(run["evidence"]["observation_refs"], json!([]), "{run}");
    let b = evidence_of(&app, &token, &id).await;
    assert_eq!(b["evidence"], json!([]), "{b}");
    // A successful turn whose verified authority cites one of its three refs projects that one.
    let artifact = evidence_artifact(3);
    app.script(Step::Signed { artifact, text: "grounded".into(), refs: vec!["evidence:test:1".into()] });
    let (_, run) = body(app.continue_run(&token, &id, "projection-turn-2", go(2)).await).await;
    assert_eq!(run["terminal_authority_status"], "authorized", "{run}");
    assert_eq!(run["completion_status"], "completed", "{run}");
    assert_eq!(run["evidence"]["evidence_refs"], json!(["evidence:test:1"]));
    let b = evidence_of(&app, &token, &id).await;
    assert_eq!(b["evidence_refs"], json!(["evidence:test:1"]), "{b}");
    assert_eq!(b["evidence"].as_array().unwrap().len(), 1, "{b}");
    assert_eq!(b["evidence"][0]["ref"], "evidence:test:1");
    assert_contiguous(&app.events(&token, &id).await);

    // Without required grounding, a successful turn projects all its refs, a failed one none.
    let open = start(
        &app,
        &token,
        json!({"objective": "x", "database_scope": ["research_library"], "completion_contract": {"require_terminal_authority": false, "min_evidence_refs": 5}}),
    )
    .await;
    let mut failed = evidence_artifact(2);
    failed.solver_status = helix_core::domain::turn::SolverStatus::Failed;
    app.script(Step::Artifact(failed));
    let (_, run) = body(app.continue_run(&token, &open, "projection-turn-3", go(1)).await).await;
    assert_eq!(run["completion_status"], "failed");
    assert_eq!(run["evidence"]["evidence_refs"], json!([]), "{run}");
    let open = start(
        &app,
        &token,
        json!({"objective": "x", "database_scope": ["research_library"], "completion_contract": {"require_terminal_authority": false, "min_evidence_refs": 5}}),
    )
    .await;
    app.script(Step::Artifact(evidence_artifact(2)));
    let (_, run) = body(app.continue_run(&token, &open, "projection-turn-4", go(1)).await).await;
    assert_eq!(run["evidence"]["evidence_refs"], json!(["evidence:test:0", "evidence:test:1"]), "{run}");
}

/// Item 11: the bundle names a provider terminal candidate whenever a turn offered one,
/// verified or not, and forgets it when a later turn offers none.
async fn terminal_candidate_ref_follows_the_latest_turn(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    let mut artifact = evidence_artifact(1);
    let forger = helix_core::domain::authority::TerminalSigner::from_seed(SIGNER_ISSUER, "k1", [1; 32]);
    artifact.terminal_candidate =
        Some(forger.sign(&id, 1, "guessed-claim", "unverified", vec!["evidence:test:0".into()]));
    app.script(Step::Artifact(artifact));
    let (_, run) = body(app.continue_run(&token, &id, "candidate-turn-1", go(1)).await).await;
    assert_eq!(run["terminal_authority_status"], "rejected");
    let expected = format!("terminal:sha256:{}", helix_core::domain::sha256_hex("unverified"));
    assert_eq!(
        evidence_of(&app, &token, &id).await["terminal_candidate_ref"],
        json!(expected),
        "a present candidate is reported"
    );
    app.script(Step::Artifact(evidence_artifact(1)));
    let (_, run) = body(app.continue_run(&token, &id, "candidate-turn-2", go(2)).await).await;
    assert_eq!(run["terminal_authority_status"], "missing");
    assert_eq!(
        evidence_of(&app, &token, &id).await["terminal_candidate_ref"],
        Value::Null,
        "cleared when the latest turn has none"
    );
    app.script(Step::Fail(TurnFailure::ExecutorUnavailable));
    app.continue_run(&token, &id, "candidate-turn-3", go(3)).await;
    assert_eq!(evidence_of(&app, &token, &id).await["terminal_candidate_ref"], Value::Null);
}

/// A run holding a room-bound scope (`bound_room_evidence` or
/// `bound_room_environment_probe`) but no room binding ends its turn blocked with
/// `room_binding_missing`, without the executor (and without queueing a probe).
async fn a_run_holding_a_room_scope_without_a_binding_is_blocked_at_continue(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        &[("HELIX_AGENT_DATABASE_SCOPES", "research_library,bound_room_evidence,bound_room_environment_probe")],
    )
    .await;
    let token = app
        .token_for(
            "alice",
            "tenant-a",
            &[
                "helix.agent_runs.read",
                "helix.agent_runs.write",
                "helix.data.research_library.read",
                "helix.rooms.read",
            ],
        )
        .await;
    for scope in ["bound_room_evidence", "bound_room_environment_probe"] {
        let id = start(&app, &token, research_run()).await;
        // Give the stored run a room scope, as a run started before this refusal would hold.
        let store = app.state.services.store.clone();
        let key = helix_core::service::records::run_key(&id);
        let mut stored = helix_core::service::records::run_from_item(&store.get(&key).await.unwrap().unwrap()).unwrap();
        stored.database_scope.push(scope.into());
        store.put(helix_core::service::records::run_item(&stored).unwrap(), None).await.unwrap();
        app.script(completing_step(1));
        let (status, v) = body(app.continue_run(&token, &id, &format!("room-turn-{scope}"), go(1)).await).await;
        assert_eq!(status, 200, "{scope}: {v}");
        assert_eq!(v["completion_status"], "blocked", "{scope}: {v}");
        assert_eq!(v["latest_result"]["failure_code"], "room_binding_missing", "{scope}: {v}");
        assert!(app.executor.seen.lock().unwrap().is_empty(), "{scope}: no turn ran");
    }
}

on_both_backends!(
    a_continuation_completes_the_run_with_verified_authority,
    a_pending_question_needs_input_and_its_answer_continues,
    a_stale_version_is_version_conflict_with_the_current_version,
    a_retried_continuation_replays_without_a_second_step,
    cancel_is_irreversible_versioned_and_replayable,
    the_last_step_without_completion_exhausts_the_budget,
    an_expired_run_ends_as_budget_exhausted_without_a_turn,
    required_evidence_is_a_hard_gate_that_strips_the_terminal_product,
    a_forged_or_stale_terminal_candidate_is_rejected,
    contradictions_are_conflict_detected_unless_allowed,
    too_little_evidence_needs_more_evidence_and_a_failed_solver_fails_the_run,
    without_required_authority_evidence_alone_completes,
    the_account_policy_is_rechecked_before_every_continuation,
    evidence_is_projected_only_from_a_successful_turn_within_the_authority_refs,
    terminal_candidate_ref_follows_the_latest_turn,
    a_run_holding_a_room_scope_without_a_binding_is_blocked_at_continue,
);
