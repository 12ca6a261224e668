//! The browser observer lane of Shared Live Rooms over real HTTP on both store backends:
//! chat claims issued to a signed-in member and consumed once by the agent, the terminal
//! message, expired and concurrent claims, and the lane's cookie, origin and membership checks.

use helix_core::domain::account::PolicyChange;
use helix_integration_tests::support::rooms::ALL;
use helix_integration_tests::support::runs::{completing_step, evidence_artifact, research_run};
use helix_integration_tests::*;
use serde_json::{Value, json};

use super::rooms::{assert_false_flags, claim, delete, observe, spawn_post};

async fn the_observer_lane_issues_a_claim_the_agent_consumes_once(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let cookie = app.session("alice").await;
    let secret = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlc2ln";
    let (status, obs) = observe(
        &app,
        &cookie,
        json!({ "chat_id": "local-chat-1", "snapshot": [
            { "role": "user", "content": format!("my key is {secret} ok") },
            { "role": "assistant", "content": "noted" },
        ]}),
    )
    .await;
    assert_eq!(status, 201, "{obs}");
    assert_eq!(obs["schema"], "helix.agent_run_observer_binding_created.v1");
    assert_eq!(obs["snapshot_redacted"], true);
    assert_eq!(obs["snapshot_message_count"], 2);
    let handle = obs["claim_handle"].as_str().unwrap().to_owned();
    let obs_ref = obs["observer_binding_ref"].as_str().unwrap().to_owned();
    assert!(handle.starts_with("hcc_") && obs["expires_at"].is_string());

    let obs_path = format!("/api/agi/agent-run-observer/bindings/{obs_ref}");
    let (status, view) = read(app.browser(reqwest::Method::GET, &obs_path, &cookie).send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(view["binding_status"], "awaiting_claim");
    assert_eq!(view["terminal_message"], Value::Null);
    assert!(!view.to_string().contains(&handle), "the handle is shown once");

    let run = app.started(&alice, research_run()).await;
    let run_id = run["run_id"].as_str().unwrap();
    // Another account cannot consume it; a wrong shape or unknown handle is the same error.
    let bob = app.token_for("bob", "tenant-a", ALL).await;
    let bob_run = app.started(&bob, research_run()).await;
    let (status, foreign) = claim(&app, &bob, &handle, bob_run["run_id"].as_str().unwrap()).await;
    assert_eq!((status, code(&foreign)), (404, "claim_handle_invalid"));
    let (_, unknown) = claim(&app, &alice, &format!("hcc_{}", "0".repeat(64)), run_id).await;
    assert_eq!(unknown["error"], foreign["error"], "one error that reveals nothing");
    let (status, _) = claim(&app, &alice, "not-a-handle", run_id).await;
    assert_eq!(status, 404);

    let (status, receipt) = claim(&app, &alice, &handle, run_id).await;
    assert_eq!(status, 201, "{receipt}");
    assert_eq!(receipt["schema"], "helix.room_chat_binding.v1");
    assert_eq!(receipt["chat_id_included"], false);
    assert_eq!(receipt["snapshot_message_count"], 2);
    assert!(receipt["snapshot_ref"].as_str().unwrap().starts_with("snap_"));
    assert_false_flags(&receipt);
    assert!(!receipt.to_string().contains("local-chat-1"), "never a chat id");
    let (status, reused) = claim(&app, &alice, &handle, run_id).await;
    assert_eq!((status, reused["error"].clone()), (404, foreign["error"].clone()), "consumed once");

    // The stored snapshot is redacted.
    let snap = app
        .state
        .services
        .store
        .get(&helix_core::service::records::rooms::snapshot_key(&obs_ref))
        .await
        .unwrap()
        .unwrap();
    let stored = snap.s("body").unwrap();
    assert!(!stored.contains("eyJ") && stored.contains("[redacted]"), "{stored}");

    let (_, view) = read(app.browser(reqwest::Method::GET, &obs_path, &cookie).send().await.unwrap()).await;
    assert_eq!(view["binding_status"], "bound");
    assert_eq!(view["lifecycle_status"], "waiting");
    assert_eq!(view["terminal_message"], Value::Null, "no terminal product yet");
    let (status, page) = read(
        app.browser(reqwest::Method::GET, &format!("{obs_path}/events?after_seq=0&limit=10"), &cookie)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(page["schema"], "helix.agent_run_observer_event_page.v1");
    assert_eq!(page["receipts"][0]["kind"], "run_started");
    assert!(page["receipts"][0].get("data").is_none(), "progress receipts only");

    // A second chat for the same run conflicts; the withdrawal frees the slot.
    let (_, obs2) = observe(&app, &cookie, json!({ "chat_id": "local-chat-2" })).await;
    let (status, err) = claim(&app, &alice, obs2["claim_handle"].as_str().unwrap(), run_id).await;
    assert_eq!((status, code(&err)), (409, "run_already_bound"));
    let bref = receipt["binding_ref"].as_str().unwrap();
    let (status, rev) = delete(&app, &alice, &format!("/api/v1/rooms/chat-bindings/{bref}")).await;
    assert_eq!((status, rev["revocation_status"].as_str()), (200, Some("revoked")));
    assert!(!rev.to_string().contains(run_id));
    let (_, view) = read(app.browser(reqwest::Method::GET, &obs_path, &cookie).send().await.unwrap()).await;
    assert_eq!(view["binding_status"], "revoked");
    let (_, page) =
        read(app.browser(reqwest::Method::GET, &format!("{obs_path}/events"), &cookie).send().await.unwrap()).await;
    assert_eq!(page["receipts"], json!([]), "no progress after withdrawal");
    let (status, fresh) = claim(&app, &alice, obs2["claim_handle"].as_str().unwrap(), run_id).await;
    assert_eq!(status, 201, "the freed slot takes a fresh claim: {fresh}");
    assert_ne!(fresh["binding_ref"], receipt["binding_ref"]);
}

async fn the_terminal_message_appears_once_only_from_authorized_authority(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let cookie = app.session("alice").await;
    let (_, obs) = observe(&app, &cookie, json!({ "chat_id": "c1" })).await;
    let run = app.started(&alice, research_run()).await;
    let run_id = run["run_id"].as_str().unwrap();
    assert_eq!(claim(&app, &alice, obs["claim_handle"].as_str().unwrap(), run_id).await.0, 201);
    let obs_path = format!("/api/agi/agent-run-observer/bindings/{}", obs["observer_binding_ref"].as_str().unwrap());

    // An unverified candidate (forged signature) completes nothing and projects nothing.
    let mut artifact = evidence_artifact(1);
    let forger = helix_core::domain::authority::TerminalSigner::from_seed(SIGNER_ISSUER, "k1", [1; 32]);
    artifact.terminal_candidate =
        Some(forger.sign(run_id, 1, "guessed-claim", "forged", vec!["evidence:test:0".into()]));
    app.script(helix_core::executor::scripted::Step::Artifact(artifact));
    let res =
        app.continue_run(&alice, run_id, "obs-turn-0001", json!({ "expected_version": 1, "instruction": "go" })).await;
    assert_eq!(res.status(), 200);
    let (_, view) = read(app.browser(reqwest::Method::GET, &obs_path, &cookie).send().await.unwrap()).await;
    assert_eq!(view["terminal_message"], Value::Null, "{view}");

    app.script(completing_step(1));
    let res =
        app.continue_run(&alice, run_id, "obs-turn-0002", json!({ "expected_version": 2, "instruction": "go" })).await;
    let done: Value = res.json().await.unwrap();
    assert_eq!(done["terminal_authority_status"], "authorized", "{done}");
    let (_, view) = read(app.browser(reqwest::Method::GET, &obs_path, &cookie).send().await.unwrap()).await;
    let msg = &view["terminal_message"];
    assert_eq!(msg["role"], "assistant");
    assert_eq!(msg["content"], "The measured force agrees with theory within 5%.");
    assert!(msg["id"].as_str().unwrap().starts_with("msg_"));
    let (_, again) = read(app.browser(reqwest::Method::GET, &obs_path, &cookie).send().await.unwrap()).await;
    assert_eq!(again["terminal_message"], view["terminal_message"], "stable id: a reload cannot duplicate it");
    let (_, page) =
        read(app.browser(reqwest::Method::GET, &format!("{obs_path}/events?limit=200"), &cookie).send().await.unwrap())
            .await;
    assert!(
        page["receipts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r.get("content").is_none() && r["answer_authority"] == false)
    );
}

async fn an_expired_claim_handle_is_the_same_invalid_handle(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let cookie = app.session("alice").await;
    let (_, obs) = observe(&app, &cookie, json!({ "chat_id": "c1" })).await;
    let run = app.started(&alice, research_run()).await;
    app.state.services.clock.advance(helix_core::service::rooms::CLAIM_TTL_SECS + 1);
    let (status, err) =
        claim(&app, &alice, obs["claim_handle"].as_str().unwrap(), run["run_id"].as_str().unwrap()).await;
    assert_eq!((status, code(&err)), (404, "claim_handle_invalid"));
    let path = format!("/api/agi/agent-run-observer/bindings/{}", obs["observer_binding_ref"].as_str().unwrap());
    let cookie = app.session("alice").await;
    let (_, view) = read(app.browser(reqwest::Method::GET, &path, &cookie).send().await.unwrap()).await;
    assert_eq!(view["binding_status"], "expired");
}

async fn concurrent_claims_of_one_handle_have_exactly_one_consumer(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let cookie = app.session("alice").await;
    let (_, obs) = observe(&app, &cookie, json!({ "chat_id": "c1" })).await;
    let handle = obs["claim_handle"].as_str().unwrap().to_owned();
    let mut runs = vec![];
    for _ in 0..8 {
        runs.push(app.started(&alice, research_run()).await["run_id"].as_str().unwrap().to_owned());
    }
    let tasks: Vec<_> = runs
        .into_iter()
        .map(|run_id| {
            let body = json!({ "claim_handle": handle, "run_id": run_id });
            spawn_post(&app, "/api/v1/rooms/chat-bindings/claim", &alice, body)
        })
        .collect();
    let mut winners = 0;
    for t in tasks {
        let (status, v) = t.await.unwrap();
        match status {
            201 => winners += 1,
            404 => assert_eq!(code(&v), "claim_handle_invalid"),
            other => panic!("unexpected {other}: {v}"),
        }
    }
    assert_eq!(winners, 1, "exactly one consumer");
}

async fn the_observer_lane_is_cookie_same_origin_and_member_only(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let cookie = app.session("alice").await;
    let base = "/api/agi/agent-run-observer/bindings";
    // A bearer is not a session.
    let res = app.post(base, &alice).json(&json!({ "chat_id": "c1" })).send().await.unwrap();
    assert_eq!(read(res).await.1["error"]["code"], "session_required");
    // Cross-site is refused.
    let res = app
        .http
        .post(format!("{}{base}", app.base))
        .header("cookie", &cookie)
        .header("origin", "https://evil.example")
        .json(&json!({ "chat_id": "c1" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    // Snapshot limits, unknown fields and caller-supplied identity.
    let long = json!({ "chat_id": "c1", "snapshot": [{ "role": "user", "content": "a".repeat(2001) }] });
    assert_eq!(observe(&app, &cookie, long).await.0, 400);
    let many: Vec<Value> = (0..13).map(|_| json!({ "role": "user", "content": "hi" })).collect();
    assert_eq!(observe(&app, &cookie, json!({ "chat_id": "c1", "snapshot": many })).await.0, 400);
    let total: Vec<Value> = (0..7).map(|_| json!({ "role": "assistant", "content": "a".repeat(2000) })).collect();
    assert_eq!(observe(&app, &cookie, json!({ "chat_id": "c1", "snapshot": total })).await.0, 400);
    assert_eq!(
        observe(&app, &cookie, json!({ "chat_id": "c1", "snapshot": [{ "role": "system", "content": "x" }] })).await.0,
        400
    );
    assert_eq!(observe(&app, &cookie, json!({ "chat_id": "c1", "account_id": "acct_x" })).await.0, 400);
    // Another account's observer is not found; a guest cannot observe.
    let (_, obs) = observe(&app, &cookie, json!({ "chat_id": "c1" })).await;
    let bob = app.session("bob").await;
    let path = format!("{base}/{}", obs["observer_binding_ref"].as_str().unwrap());
    assert_eq!(read(app.browser(reqwest::Method::GET, &path, &bob).send().await.unwrap()).await.0, 404);
    assert_eq!(read(app.browser(reqwest::Method::DELETE, &path, &bob).send().await.unwrap()).await.0, 404);
    app.set_policy("bob", PolicyChange { guest: Some(true), ..Default::default() }).await;
    let (status, err) = observe(&app, &bob, json!({ "chat_id": "c1" })).await;
    assert_eq!((status, code(&err)), (403, "guest_not_allowed"));
    // Disconnect takes no body or query.
    let res = app.browser(reqwest::Method::DELETE, &format!("{path}?x=1"), &cookie).send().await.unwrap();
    assert_eq!(res.status(), 400);
}

on_both_backends!(
    the_observer_lane_issues_a_claim_the_agent_consumes_once,
    the_terminal_message_appears_once_only_from_authorized_authority,
    concurrent_claims_of_one_handle_have_exactly_one_consumer,
    the_observer_lane_is_cookie_same_origin_and_member_only,
    an_expired_claim_handle_is_the_same_invalid_handle,
);
