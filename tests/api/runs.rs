//! Start, inspect and events as the contract says.

use helix_integration_tests::support::runs::research_run;
use helix_integration_tests::*;
use serde_json::{Value, json};

#[tokio::test]
async fn start_returns_201_with_location_etag_and_the_initial_state() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let res = app.start(&token, "client-job-2041-start", research_run()).await;
    assert_eq!(res.status(), 201);
    let h = res.headers().clone();
    let run: Value = res.json().await.unwrap();
    let id = run["run_id"].as_str().unwrap();
    assert!(id.starts_with("run_"));
    assert_eq!(h["location"], format!("/api/v1/agent-runs/{id}").as_str());
    assert_eq!(h["etag"], "W/\"v1\"");
    assert_eq!(h["idempotency-replayed"], "false");
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(h["pragma"], "no-cache");
    assert!(h.contains_key("x-request-id"));
    assert_eq!(run["schema"], "helix.agent_run.v1");
    assert_eq!(run["version"], 1);
    assert_eq!(run["lifecycle_status"], "waiting");
    assert_eq!(run["completion_status"], "needs_more_evidence");
    assert_eq!(run["terminal_authority_status"], "not_evaluated");
    assert_eq!(run["budget"]["max_steps"], 12);
    assert_eq!(run["completion_contract"]["min_evidence_refs"], 1);
    assert_eq!(run["completion_contract"]["require_terminal_authority"], true);
    for flag in ["answer_authority", "assistant_answer", "terminal_eligible", "raw_content_included"] {
        assert_eq!(run[flag], false, "{flag}");
    }
    let owner = run["ownership"]["owner_ref"].as_str().unwrap();
    assert!(owner.starts_with("owner:sha256:"));
    assert!(!run.to_string().contains("alice") && !run.to_string().contains("tenant-a"), "opaque ownership");
}

#[tokio::test]
async fn inspect_returns_the_run_with_its_etag() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let id = run["run_id"].as_str().unwrap();
    let res = app.get(&format!("/api/v1/agent-runs/{id}"), &token).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["etag"], "W/\"v1\"");
    let got: Value = res.json().await.unwrap();
    assert_eq!(got, run);
}

#[tokio::test]
async fn events_start_with_run_started_at_seq_1_and_page() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let id = run["run_id"].as_str().unwrap();
    let page: Value =
        app.get(&format!("/api/v1/agent-runs/{id}/events"), &token).send().await.unwrap().json().await.unwrap();
    assert_eq!(page["events"][0]["seq"], 1);
    assert_eq!(page["events"][0]["kind"], "run_started");
    assert_eq!(page["events"][0]["schema"], "helix.agent_run.event.v1");
    assert_eq!(page["next_after_seq"], 1);
    assert_eq!(page["has_more"], false);
    let empty: Value = app
        .get(&format!("/api/v1/agent-runs/{id}/events?after_seq=1&limit=5"), &token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(empty["events"], json!([]));
    assert_eq!(empty["next_after_seq"], 1);
    for bad in ["limit=0", "limit=201", "after_seq=x", "cursor=2"] {
        let res = app.get(&format!("/api/v1/agent-runs/{id}/events?{bad}"), &token).send().await.unwrap();
        assert_eq!(res.status(), 400, "{bad}");
    }
}

#[tokio::test]
async fn exact_replay_returns_the_stored_response_marked_replayed() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let first = app.start(&token, "replay-key-0001", research_run()).await;
    let first_body: Value = first.json().await.unwrap();
    let again = app.start(&token, "replay-key-0001", research_run()).await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotency-replayed"], "true");
    assert!(again.headers().contains_key("location"));
    let again_body: Value = again.json().await.unwrap();
    assert_eq!(again_body, first_body);
}

#[tokio::test]
async fn a_different_request_under_the_same_key_is_idempotency_conflict() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    app.start(&token, "conflict-key-01", research_run()).await;
    let res = app.start(&token, "conflict-key-01", json!({"objective": "Another objective"})).await;
    assert_eq!(res.status(), 422);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "idempotency_conflict");
    assert_eq!(body["schema"], "helix.agent_api.error.v1");
}

#[tokio::test]
async fn keys_are_scoped_by_owner() {
    let app = TestApp::spawn().await;
    let alice = app.token().await;
    let bob = app.token_for("bob", "tenant-a", &["helix.agent_runs.read", "helix.agent_runs.write"]).await;
    let a: Value = app.start(&alice, "shared-key-0001", json!({"objective": "x"})).await.json().await.unwrap();
    let res = app.start(&bob, "shared-key-0001", json!({"objective": "x"})).await;
    assert_eq!(res.status(), 201);
    assert_eq!(res.headers()["idempotency-replayed"], "false");
    let b: Value = res.json().await.unwrap();
    assert_ne!(a["run_id"], b["run_id"]);
}

#[tokio::test]
async fn a_run_of_another_owner_is_not_found() {
    let app = TestApp::spawn().await;
    let alice = app.token().await;
    let run = app.started(&alice, research_run()).await;
    let id = run["run_id"].as_str().unwrap();
    let other_tenant = app.token_for("alice", "tenant-b", &["helix.agent_runs.read", "helix.agent_runs.write"]).await;
    for path in [
        format!("/api/v1/agent-runs/{id}"),
        format!("/api/v1/agent-runs/{id}/events"),
        format!("/api/v1/agent-runs/{id}/evidence"),
    ] {
        let res = app.get(&path, &other_tenant).send().await.unwrap();
        assert_eq!(res.status(), 404, "{path}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "not_found");
    }
    let res = app.cancel(&other_tenant, id, "cancel-other-01", json!({"expected_version": 1})).await;
    assert_eq!(res.status(), 404);
}

#[tokio::test]
async fn invalid_start_requests_are_typed_400s() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let cases = [
        json!({"objective": "x", "owner": "me"}),
        json!({"objective": "x", "budget": {"max_steps": 0}}),
        json!({"objective": "x", "budget": {"max_steps": 65}}),
        json!({"objective": "x", "budget": {"expires_in_seconds": 59}}),
        json!({"objective": "x", "budget": {"expires_in_seconds": 604801}}),
        json!({"objective": ""}),
        json!({"constraints": []}),
        json!({"objective": "x", "completion_contract": {"required_output_fields": ["chain_of_thought"]}}),
        // Shapes serde reads but the published schema refuses: an object spelled as an
        // array, a length counted before trimming.
        json!({"objective": "x", "budget": [null, null]}),
        json!({"objective": "x", "completion_contract": [null, null, null, null, null]}),
        json!({"objective": format!(" {}", "x".repeat(4000))}),
    ];
    for (i, body) in cases.into_iter().enumerate() {
        let res = app.start(&token, &format!("invalid-start-{i:03}"), body.clone()).await;
        assert_eq!(res.status(), 400, "{body}");
        let err: Value = res.json().await.unwrap();
        assert_eq!(err["error"]["code"], "invalid_request", "{body}");
    }
}

#[tokio::test]
async fn idempotency_key_is_required_and_bounded() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let missing = app.post("/api/v1/agent-runs", &token).json(&research_run()).send().await.unwrap();
    assert_eq!(missing.status(), 400);
    assert_eq!(missing.json::<Value>().await.unwrap()["error"]["code"], "invalid_idempotency_key");
    for key in ["short", &"k".repeat(201)] {
        let res = app.start(&token, key, research_run()).await;
        assert_eq!(res.status(), 400);
    }
}

#[tokio::test]
async fn data_scopes_must_be_enabled_known_and_entitled() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    for (scope, why) in [("theory_registry", "not enabled"), ("public_web", "not entitled"), ("made_up", "unknown")] {
        let res = app
            .start(&token, &format!("scope-check-{scope}"), json!({"objective": "x", "database_scope": [scope]}))
            .await;
        assert_eq!(res.status(), 403, "{why}");
        assert_eq!(res.json::<Value>().await.unwrap()["error"]["code"], "data_scope_not_admitted");
    }
    let empty = app.start(&token, "scope-check-empty", json!({"objective": "x", "database_scope": []})).await;
    assert_eq!(empty.status(), 201);
}

/// Item 12: `Idempotency-Replayed` on every start, continue and cancel response, refusals
/// included; `false` unless the response is a replay.
#[tokio::test]
async fn every_mutation_response_carries_idempotency_replayed_errors_included() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let id = run["run_id"].as_str().unwrap();
    let continue_path = format!("/api/v1/agent-runs/{id}/continue");
    let cancel_path = format!("/api/v1/agent-runs/{id}/cancel");
    let stale = json!({"expected_version": 9, "instruction": "go"});
    let cases: Vec<(&str, reqwest::RequestBuilder, u16)> = vec![
        ("start without a key", app.post("/api/v1/agent-runs", &token).json(&research_run()), 400),
        (
            "start without a bearer",
            app.http
                .post(format!("{}/api/v1/agent-runs", app.base))
                .header("Idempotency-Key", "no-bearer-0001")
                .json(&research_run()),
            401,
        ),
        (
            "start with an unknown field",
            app.post("/api/v1/agent-runs", &token)
                .header("Idempotency-Key", "bad-body-00001")
                .json(&json!({"objective": "x", "owner": "me"})),
            400,
        ),
        (
            "start from a host not allowed",
            app.post("/api/v1/agent-runs", &token)
                .header("Idempotency-Key", "bad-host-00001")
                .header("Host", "evil.example")
                .json(&research_run()),
            400,
        ),
        (
            "continue at a stale version",
            app.post(&continue_path, &token).header("Idempotency-Key", "stale-cont-001").json(&stale),
            409,
        ),
        (
            "continue of an unknown run",
            app.post("/api/v1/agent-runs/run_missing00001/continue", &token)
                .header("Idempotency-Key", "missing-cont-01")
                .json(&stale),
            404,
        ),
        (
            "cancel at a stale version",
            app.post(&cancel_path, &token)
                .header("Idempotency-Key", "stale-cancel-1")
                .json(&json!({"expected_version": 9})),
            409,
        ),
        ("cancel without a body", app.post(&cancel_path, &token).header("Idempotency-Key", "empty-cancel-1"), 415),
    ];
    for (name, req, status) in cases {
        let res = req.send().await.unwrap();
        assert_eq!(res.status().as_u16(), status, "{name}");
        assert_eq!(res.headers().get("idempotency-replayed").map(|v| v.to_str().unwrap()), Some("false"), "{name}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["schema"], "helix.agent_api.error.v1", "{name}");
    }
    // Reads never carry it.
    let inspect = app.get(&format!("/api/v1/agent-runs/{id}"), &token).send().await.unwrap();
    assert!(!inspect.headers().contains_key("idempotency-replayed"));
    // A replayed refusal says true.
    let conflict = app.start(&token, "replayed-start-1", research_run()).await;
    assert_eq!(conflict.headers()["idempotency-replayed"], "false");
    let replay = app.start(&token, "replayed-start-1", research_run()).await;
    assert_eq!(replay.headers()["idempotency-replayed"], "true");
}

/// Both room-bound scopes start (a run is bound to a room after it
/// exists, and every turn rechecks the binding); neither is admitted unless enabled.
#[tokio::test]
async fn room_bound_scopes_start_when_enabled_and_are_refused_when_not() {
    let app = TestApp::spawn_with(
        Backend::Embedded,
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
    let scope = "bound_room_environment_probe";
    let res = app
        .start(&token, "room-start-probe", json!({"objective": "x", "database_scope": ["research_library", scope]}))
        .await;
    assert_eq!(res.status(), 201, "the probe scope starts");
    let off = TestApp::spawn_with(
        Backend::Embedded,
        &[("HELIX_AGENT_DATABASE_SCOPES", "research_library,bound_room_evidence")],
    )
    .await;
    let off_token = off.token_for("alice", "tenant-a", &["helix.agent_runs.write", "helix.rooms.read"]).await;
    let res = off.start(&off_token, "room-start-probe-off", json!({"objective": "x", "database_scope": [scope]})).await;
    assert_eq!(res.status(), 403);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["code"], "data_scope_not_admitted");
    assert!(err["error"]["message"].as_str().unwrap().contains(scope));
    let res = app
        .start(
            &token,
            "room-start-evidence",
            json!({"objective": "x", "database_scope": ["research_library", "bound_room_evidence"]}),
        )
        .await;
    assert_eq!(res.status(), 201);
    let plain = app.start(&token, "room-start-plain", research_run()).await;
    assert_eq!(plain.status(), 201, "other scopes still start");
}
