//! Shared Live Rooms over real HTTP on both store backends: rooms, run-room bindings,
//! the browser observer lane and chat claims, withdrawals, the policy lock and hostile input.

use helix_core::domain::account::PolicyChange;
use helix_integration_tests::support::events::{event_text, through_adapter};
use helix_integration_tests::support::rooms::ALL;
use helix_integration_tests::support::runs::{completing_step, evidence_artifact, research_run};
use helix_integration_tests::*;
use serde_json::{Value, json};

const FLAGS: [&str; 4] = ["answer_authority", "assistant_answer", "terminal_eligible", "raw_content_included"];

fn assert_false_flags(v: &Value) {
    for f in FLAGS {
        assert_eq!(v[f], false, "{f} in {v}");
    }
}

async fn delete(app: &TestApp, token: &str, path: &str) -> (u16, Value) {
    read(app.http.delete(format!("{}{path}", app.base)).bearer_auth(token).send().await.unwrap()).await
}

async fn observe(app: &TestApp, cookie: &str, body: Value) -> (u16, Value) {
    read(
        app.browser(reqwest::Method::POST, "/api/agi/agent-run-observer/bindings", cookie)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn claim(app: &TestApp, token: &str, handle: &str, run_id: &str) -> (u16, Value) {
    read(
        app.post("/api/v1/rooms/chat-bindings/claim", token)
            .json(&json!({ "claim_handle": handle, "run_id": run_id }))
            .send()
            .await
            .unwrap(),
    )
    .await
}

// ---------------------------------------------------------------------------------------------

async fn rooms_are_created_idempotently_listed_and_inspected_by_members_only(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let bob = app.token_for("bob", "tenant-a", ALL).await;
    let res = app
        .post("/api/v1/rooms", &alice)
        .header("Idempotency-Key", "room-create-0001")
        .json(&json!({ "name": "Lab" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(res.headers()["idempotency-replayed"], "false");
    assert_eq!(res.headers()["cache-control"], "no-store");
    let created: Value = res.json().await.unwrap();
    assert_eq!(created["schema"], "helix.room.v1");
    assert_eq!(created["role"], "owner");
    assert_eq!(created["owned_by_caller"], true);
    assert_eq!(created["execution_enabled"], false);
    assert_false_flags(&created);
    let id = created["room_id"].as_str().unwrap();
    assert_eq!(location, format!("/api/v1/rooms/{id}"));
    assert!(!created.to_string().contains("alice") && !created.to_string().contains("tenant-a"));

    // An exact retry replays; the same key with another body is a conflict.
    let res = app
        .post("/api/v1/rooms", &alice)
        .header("Idempotency-Key", "room-create-0001")
        .json(&json!({ "name": "Lab" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["idempotency-replayed"], "true");
    assert_eq!(res.json::<Value>().await.unwrap(), created);
    let (status, err) = app.create_room(&alice, "room-create-0001", json!({ "name": "Other" })).await;
    assert_eq!((status, code(&err)), (422, "idempotency_conflict"));
    let (status, err) = app.create_room(&alice, "short", json!({ "name": "Other" })).await;
    assert_eq!((status, code(&err)), (400, "invalid_idempotency_key"));

    let (status, list) = read(app.get("/api/v1/rooms", &alice).send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(list["schema"], "helix.room_list.v1");
    assert_eq!(list["rooms"].as_array().unwrap().len(), 1);
    assert_eq!(list["rooms"][0], created);
    assert_false_flags(&list);
    let (_, theirs) = read(app.get("/api/v1/rooms", &bob).send().await.unwrap()).await;
    assert_eq!(theirs["rooms"], json!([]), "only rooms the account is a member of");

    let (status, got) = read(app.get(&location, &alice).send().await.unwrap()).await;
    assert_eq!((status, &got), (200, &created));
    let (status, err) = read(app.get(&location, &bob).send().await.unwrap()).await;
    assert_eq!((status, code(&err)), (404, "not_found"), "another account's room is not found");
    let (status, _) = read(app.get("/api/v1/rooms/room_nope", &alice).send().await.unwrap()).await;
    assert_eq!(status, 404);
    let (status, _) = read(app.get("/api/v1/rooms?owner=bob", &alice).send().await.unwrap()).await;
    assert_eq!(status, 400, "a caller-supplied filter is refused");
}

async fn room_routes_need_their_scopes(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let reader = app.token_for("alice", "tenant-a", &["helix.rooms.read"]).await;
    let (status, err) = app.create_room(&reader, "room-create-0002", json!({ "name": "Lab" })).await;
    assert_eq!((status, code(&err)), (403, "insufficient_scope"));
    assert_eq!(err["error"]["details"]["required_scopes"], json!(["helix.rooms.manage"]));
    let manager = app.token_for("alice", "tenant-a", &["helix.rooms.manage", "helix.agent_runs.write"]).await;
    let res = app.get("/api/v1/rooms", &manager).send().await.unwrap();
    assert_eq!(res.status(), 403);
    assert!(res.headers()["www-authenticate"].to_str().unwrap().contains("scope=\"helix.rooms.read\""));
    // Binding needs both scopes, named together.
    let only_manage = app.token_for("alice", "tenant-a", &["helix.rooms.manage"]).await;
    let (status, err) = app.bind(&only_manage, "room_00000000000000000000", "run_0000000000000000").await;
    assert_eq!((status, code(&err)), (403, "insufficient_scope"));
    assert_eq!(err["error"]["details"]["required_scopes"], json!(["helix.rooms.manage", "helix.agent_runs.write"]));
    let res = app.http.get(format!("{}/api/v1/rooms", app.base)).send().await.unwrap();
    assert_eq!(res.status(), 401);
    assert!(
        res.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("/.well-known/oauth-protected-resource/api/v1/rooms")
    );
}

async fn hostile_room_input_is_refused_before_any_mutation(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    for field in ["owner", "tenant_id", "account_id", "participant", "chat_id", "source_id", "owner_hash"] {
        let (status, err) = app.create_room(&alice, "room-hostile-001", json!({ "name": "Lab", field: "x" })).await;
        assert_eq!((status, code(&err)), (400, "invalid_request"), "{field}");
    }
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlc2ln";
    for name in
        [jwt, "sk-live-0123456789abcdef", "room hcc_0000000000000000000000000000000000000000000000000000000000000000"]
    {
        let (status, err) = app.create_room(&alice, "room-hostile-002", json!({ "name": name })).await;
        assert_eq!((status, code(&err)), (400, "credential_rejected"), "{name}");
        assert!(!err.to_string().contains(name), "never echoed");
    }
    let room_id = app.room(&alice, "Lab").await;
    let (status, err) = app.bind(&alice, &room_id, &format!("run_{jwt}")).await;
    assert_eq!((status, code(&err)), (400, "credential_rejected"));
    let (status, err) = read(
        app.post("/api/v1/rooms/run-bindings", &alice)
            .json(&json!({ "room_id": room_id, "run_id": "run_0123456789", "owner": "bob" }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code(&err)), (400, "invalid_request"));
    // Nothing was created by any refused request.
    let (_, list) = read(app.get("/api/v1/rooms", &alice).send().await.unwrap()).await;
    assert_eq!(list["rooms"].as_array().unwrap().len(), 1);
    // The room body limit is its own variable.
    let small = TestApp::spawn_with(backend, &[("HELIX_ROOM_AGENT_BODY_LIMIT", "1024")]).await;
    let t = small.token_for("alice", "tenant-a", ALL).await;
    let (status, err) = small
        .create_room(&t, "room-big-00001", json!({ "name": "L", "description": "d".repeat(900) + &" x".repeat(100) }))
        .await;
    assert_eq!((status, code(&err)), (413, "payload_too_large"));
}

async fn a_run_binds_once_retries_return_it_and_rebinding_elsewhere_conflicts(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let bob = app.token_for("bob", "tenant-a", ALL).await;
    let (r1, r2) = (app.room(&alice, "One").await, app.room(&alice, "Two").await);
    let run = app.started(&alice, research_run()).await;
    let run_id = run["run_id"].as_str().unwrap();
    let (status, b) = app.bind(&alice, &r1, run_id).await;
    assert_eq!(status, 201, "{b}");
    assert_eq!(b["schema"], "helix.room_run_binding.v1");
    assert_eq!(b["binding_status"], "active");
    assert_false_flags(&b);
    let binding_ref = b["binding_ref"].as_str().unwrap().to_owned();
    assert!(binding_ref.starts_with("rrb_"));
    let (status, again) = app.bind(&alice, &r1, run_id).await;
    assert_eq!((status, &again), (200, &b), "an exact retry returns the same binding");
    let (status, err) = app.bind(&alice, &r2, run_id).await;
    assert_eq!((status, code(&err)), (409, "run_already_bound"));
    // Another account cannot bind alice's run, nor bind to alice's room.
    let bob_room = app.room(&bob, "Bob's").await;
    assert_eq!(app.bind(&bob, &bob_room, run_id).await.0, 404);
    let bob_run = app.started(&bob, research_run()).await;
    assert_eq!(app.bind(&bob, &r1, bob_run["run_id"].as_str().unwrap()).await.0, 404);

    // Withdrawal: another owner's is not found; body or query refused; idempotent; permanent.
    let path = format!("/api/v1/rooms/run-bindings/{binding_ref}");
    assert_eq!(delete(&app, &bob, &path).await.0, 404);
    let (status, _) =
        read(app.http.delete(format!("{}{path}?run_id={run_id}", app.base)).bearer_auth(&alice).send().await.unwrap())
            .await;
    assert_eq!(status, 400);
    let (status, _) = read(
        app.http
            .delete(format!("{}{path}", app.base))
            .bearer_auth(&alice)
            .json(&json!({"room_id": r1}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    let (status, rev) = delete(&app, &alice, &path).await;
    assert_eq!(status, 200);
    assert_eq!(rev["schema"], "helix.room_binding_revocation.v1");
    assert_eq!(rev["binding_ref"], binding_ref);
    assert_eq!(rev["binding_status"], "revoked");
    assert_eq!(rev["revocation_status"], "revoked");
    assert_false_flags(&rev);
    let text = rev.to_string();
    assert!(!text.contains(run_id) && !text.contains(&r1), "nothing about the run or room: {text}");
    let (_, again) = delete(&app, &alice, &path).await;
    assert_eq!(again["revocation_status"], "already_revoked");
    // The slot is free: a fresh bind (even to another room) gets a new reference.
    let (status, fresh) = app.bind(&alice, &r2, run_id).await;
    assert_eq!(status, 201);
    assert_ne!(fresh["binding_ref"], b["binding_ref"]);
    let (_, still) = delete(&app, &alice, &path).await;
    assert_eq!(still["revocation_status"], "already_revoked", "a revoked binding never comes back");
    assert_eq!(delete(&app, &alice, "/api/v1/rooms/run-bindings/rrb_nope").await.0, 404);
    // A chat-binding path does not withdraw a run binding.
    let fresh_ref = fresh["binding_ref"].as_str().unwrap();
    assert_eq!(delete(&app, &alice, &format!("/api/v1/rooms/chat-bindings/{fresh_ref}")).await.0, 404);
}

async fn a_withdrawal_never_frees_a_slot_it_does_not_hold(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let room_id = app.room(&alice, "One").await;
    let run = app.started(&alice, research_run()).await;
    let run_id = run["run_id"].as_str().unwrap();
    let (_, first) = app.bind(&alice, &room_id, run_id).await;
    let first_ref = first["binding_ref"].as_str().unwrap().to_owned();
    // A slot lost (or never written) does not block the owner's cleanup ...
    let slot = helix_core::service::records::rooms::run_room_slot(run_id);
    app.state
        .services
        .store
        .transact(vec![helix_core::store::WriteOp::Delete { key: slot.clone(), cond: None }])
        .await
        .unwrap();
    let (status, rev) = delete(&app, &alice, &format!("/api/v1/rooms/run-bindings/{first_ref}")).await;
    assert_eq!((status, rev["revocation_status"].as_str()), (200, Some("revoked")));
    // ... and a stale withdrawal never deletes the slot of the binding that replaced it.
    let (_, second) = app.bind(&alice, &room_id, run_id).await;
    assert_eq!(
        delete(&app, &alice, &format!("/api/v1/rooms/run-bindings/{first_ref}")).await.1["revocation_status"],
        "already_revoked"
    );
    let held = app.state.services.store.get(&slot).await.unwrap().expect("the slot stays");
    assert_eq!(held.s("binding_ref"), second["binding_ref"].as_str());
    assert_eq!(app.bind(&alice, &room_id, run_id).await.1["binding_ref"], second["binding_ref"]);
}

async fn sixteen_concurrent_binds_of_one_run_make_exactly_one_binding(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let (r1, r2) = (app.room(&alice, "One").await, app.room(&alice, "Two").await);
    let run = app.started(&alice, research_run()).await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let (app_base, token, run_id) = (app.base.clone(), alice.clone(), run_id.clone());
            let room_id = if i % 2 == 0 { r1.clone() } else { r2.clone() };
            tokio::spawn(async move {
                let res = reqwest::Client::new()
                    .post(format!("{app_base}/api/v1/rooms/run-bindings"))
                    .bearer_auth(token)
                    .json(&json!({ "room_id": room_id, "run_id": run_id }))
                    .send()
                    .await
                    .unwrap();
                read(res).await
            })
        })
        .collect();
    let mut refs = std::collections::BTreeSet::new();
    let (mut created, mut conflicts) = (0, 0);
    for t in tasks {
        let (status, v) = t.await.unwrap();
        match status {
            201 => created += 1,
            200 => {}
            409 => {
                conflicts += 1;
                assert_eq!(code(&v), "run_already_bound");
                continue;
            }
            other => panic!("unexpected {other}: {v}"),
        }
        refs.insert(v["binding_ref"].as_str().unwrap().to_owned());
    }
    assert_eq!(created, 1, "exactly one bind creates");
    assert_eq!(refs.len(), 1, "every success names the one binding");
    assert_eq!(conflicts, 8, "the other room's eight binds conflict");
}

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
            let (base, token, handle) = (app.base.clone(), alice.clone(), handle.clone());
            tokio::spawn(async move {
                let res = reqwest::Client::new()
                    .post(format!("{base}/api/v1/rooms/chat-bindings/claim"))
                    .bearer_auth(token)
                    .json(&json!({ "claim_handle": handle, "run_id": run_id }))
                    .send()
                    .await
                    .unwrap();
                read(res).await
            })
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

async fn the_policy_lock_blocks_rooms_but_not_withdrawals(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let cookie = app.session("alice").await;
    let room_id = app.room(&alice, "Lab").await;
    let run = app.started(&alice, research_run()).await;
    let run_id = run["run_id"].as_str().unwrap();
    let (_, b) = app.bind(&alice, &room_id, run_id).await;
    let (_, obs) = observe(&app, &cookie, json!({ "chat_id": "c1" })).await;
    let (_, chat) = claim(&app, &alice, obs["claim_handle"].as_str().unwrap(), run_id).await;
    let (_, obs2) = observe(&app, &cookie, json!({ "chat_id": "c2" })).await;
    app.set_policy("alice", PolicyChange { rooms_locked: Some(true), ..Default::default() }).await;

    let locked = |(status, v): (u16, Value)| {
        assert_eq!((status, code(&v)), (403, "room_feature_locked"), "{v}");
        assert!(v["error"]["details"].get("required_scopes").is_none(), "not a scope error");
    };
    locked(read(app.get("/api/v1/rooms", &alice).send().await.unwrap()).await);
    locked(read(app.get(&format!("/api/v1/rooms/{room_id}"), &alice).send().await.unwrap()).await);
    locked(app.create_room(&alice, "room-locked-001", json!({ "name": "x" })).await);
    let run2 = app.started(&alice, research_run()).await;
    locked(app.bind(&alice, &room_id, run2["run_id"].as_str().unwrap()).await);
    locked(claim(&app, &alice, obs2["claim_handle"].as_str().unwrap(), run2["run_id"].as_str().unwrap()).await);
    locked(observe(&app, &cookie, json!({ "chat_id": "c3" })).await);
    let obs_path = format!("/api/agi/agent-run-observer/bindings/{}", obs["observer_binding_ref"].as_str().unwrap());
    locked(read(app.browser(reqwest::Method::GET, &obs_path, &cookie).send().await.unwrap()).await);
    locked(read(app.browser(reqwest::Method::GET, &format!("{obs_path}/events"), &cookie).send().await.unwrap()).await);

    // The two owner withdrawals and the browser's disconnect still work.
    let (status, rev) =
        delete(&app, &alice, &format!("/api/v1/rooms/run-bindings/{}", b["binding_ref"].as_str().unwrap())).await;
    assert_eq!((status, rev["revocation_status"].as_str()), (200, Some("revoked")));
    let (status, rev) =
        delete(&app, &alice, &format!("/api/v1/rooms/chat-bindings/{}", chat["binding_ref"].as_str().unwrap())).await;
    assert_eq!((status, rev["revocation_status"].as_str()), (200, Some("revoked")));
    let path2 = format!("/api/agi/agent-run-observer/bindings/{}", obs2["observer_binding_ref"].as_str().unwrap());
    let (status, d) = read(app.browser(reqwest::Method::DELETE, &path2, &cookie).send().await.unwrap()).await;
    assert_eq!((status, d["disconnect_status"].as_str()), (200, Some("disconnected")));
    let (_, d) = read(app.browser(reqwest::Method::DELETE, &path2, &cookie).send().await.unwrap()).await;
    assert_eq!(d["disconnect_status"], "already_disconnected");

    // Unlocked again: the disconnected observer's handle is dead.
    app.set_policy("alice", PolicyChange { rooms_locked: Some(false), ..Default::default() }).await;
    let (status, err) =
        claim(&app, &alice, obs2["claim_handle"].as_str().unwrap(), run2["run_id"].as_str().unwrap()).await;
    assert_eq!((status, code(&err)), (404, "claim_handle_invalid"));
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

async fn commands_are_never_executed(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let room_id = app.room(&alice, "Lab").await;
    let (status, err) = read(
        app.post(&format!("/api/v1/rooms/{room_id}/commands"), &alice)
            .json(&json!({ "command": "/op me" }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code(&err)), (403, "command_execution_not_enabled"));
    let reader = app.token_for("carol", "tenant-a", &["helix.rooms.read"]).await;
    let (status, err) =
        read(app.post(&format!("/api/v1/rooms/{room_id}/commands"), &reader).send().await.unwrap()).await;
    assert_eq!((status, code(&err)), (403, "insufficient_scope"));
}

/// `Idempotency-Replayed` on every room create response, refusals and pipeline errors
/// included, as on the agent runs: `true` only for a replay; reads and the mutations
/// without a key never carry it.
async fn every_room_create_response_carries_idempotency_replayed_errors_included(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let alice = app.token_for("alice", "tenant-a", ALL).await;
    let replayed =
        |res: &reqwest::Response| res.headers().get("idempotency-replayed").map(|v| v.to_str().unwrap().to_owned());
    let create = |key: &str, body: Value| app.post("/api/v1/rooms", &alice).header("Idempotency-Key", key).json(&body);
    let first = create("room-replayed-01", json!({ "name": "Lab" })).send().await.unwrap();
    assert_eq!((first.status().as_u16(), replayed(&first).as_deref()), (201, Some("false")));
    let again = create("room-replayed-01", json!({ "name": "Lab" })).send().await.unwrap();
    assert_eq!((again.status().as_u16(), replayed(&again).as_deref()), (201, Some("true")));
    let cases: Vec<(&str, reqwest::RequestBuilder, u16, &str)> = vec![
        (
            "the same key with another body",
            create("room-replayed-01", json!({ "name": "Other" })),
            422,
            "idempotency_conflict",
        ),
        (
            "an unknown field",
            create("room-replayed-02", json!({ "name": "Lab", "owner": "me" })),
            400,
            "invalid_request",
        ),
        ("no key", app.post("/api/v1/rooms", &alice).json(&json!({ "name": "Lab" })), 400, "invalid_idempotency_key"),
        (
            "no bearer",
            app.http
                .post(format!("{}/api/v1/rooms", app.base))
                .header("Idempotency-Key", "room-replayed-03")
                .json(&json!({ "name": "Lab" })),
            401,
            "",
        ),
    ];
    for (name, req, status, error) in cases {
        let res = req.send().await.unwrap();
        assert_eq!((res.status().as_u16(), replayed(&res).as_deref()), (status, Some("false")), "{name}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["schema"], "helix.agent_api.error.v1", "{name}");
        if !error.is_empty() {
            assert_eq!(code(&body), error, "{name}");
        }
    }
    let list = app.get("/api/v1/rooms", &alice).send().await.unwrap();
    assert_eq!((list.status().as_u16(), replayed(&list)), (200, None));
    let claim = app.post("/api/v1/rooms/chat-bindings/claim", &alice).json(&json!({})).send().await.unwrap();
    assert_eq!(replayed(&claim), None);
}

on_both_backends!(
    rooms_are_created_idempotently_listed_and_inspected_by_members_only,
    every_room_create_response_carries_idempotency_replayed_errors_included,
    room_routes_need_their_scopes,
    hostile_room_input_is_refused_before_any_mutation,
    a_run_binds_once_retries_return_it_and_rebinding_elsewhere_conflicts,
    sixteen_concurrent_binds_of_one_run_make_exactly_one_binding,
    the_observer_lane_issues_a_claim_the_agent_consumes_once,
    the_terminal_message_appears_once_only_from_authorized_authority,
    concurrent_claims_of_one_handle_have_exactly_one_consumer,
    the_policy_lock_blocks_rooms_but_not_withdrawals,
    the_observer_lane_is_cookie_same_origin_and_member_only,
    commands_are_never_executed,
    an_expired_claim_handle_is_the_same_invalid_handle,
    a_withdrawal_never_frees_a_slot_it_does_not_hold,
);

/// One payload of events/ through lambda_http's decoding and the Lambda adapter.
async fn invoke_event(app: &TestApp, file: &str, bearer: Option<&str>, replace: &[(&str, &str)]) -> (u16, Value) {
    let raw = event_text(file, replace);
    let (status, _, bytes) = through_adapter(compose(app.state.clone()), file, &raw, bearer).await;
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn every_room_and_observer_event_file_is_served_through_the_lambda_adapter() {
    let app = TestApp::spawn_with(
        Backend::Embedded,
        &[
            ("CASIMIR_PUBLIC_BASE_URL", "https://api.example.com"),
            ("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com"),
            ("HELIX_AGENT_ALLOWED_ORIGINS", "https://api.example.com"),
        ],
    )
    .await;
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
