//! Shared Live Rooms over real HTTP on both store backends: rooms, run-room bindings,
//! withdrawals, the policy lock and hostile input. The browser observer lane and its chat
//! claims are in `rooms_observer`; the event files, round trips and limits in `rooms_events`.

use helix_core::domain::account::PolicyChange;
use helix_integration_tests::support::rooms::ALL;
use helix_integration_tests::support::runs::research_run;
use helix_integration_tests::*;
use serde_json::{Value, json};

const FLAGS: [&str; 4] = ["answer_authority", "assistant_answer", "terminal_eligible", "raw_content_included"];

pub(crate) fn assert_false_flags(v: &Value) {
    for f in FLAGS {
        assert_eq!(v[f], false, "{f} in {v}");
    }
}

pub(crate) async fn delete(app: &TestApp, token: &str, path: &str) -> (u16, Value) {
    read(app.http.delete(format!("{}{path}", app.base)).bearer_auth(token).send().await.unwrap()).await
}

pub(crate) async fn observe(app: &TestApp, cookie: &str, body: Value) -> (u16, Value) {
    read(
        app.browser(reqwest::Method::POST, "/api/agi/agent-run-observer/bindings", cookie)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

pub(crate) async fn claim(app: &TestApp, token: &str, handle: &str, run_id: &str) -> (u16, Value) {
    read(
        app.post("/api/v1/rooms/chat-bindings/claim", token)
            .json(&json!({ "claim_handle": handle, "run_id": run_id }))
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// A bearer POST of `body` to `path` on its own client and task, so that many of them race.
pub(crate) fn spawn_post(app: &TestApp, path: &str, token: &str, body: Value) -> tokio::task::JoinHandle<(u16, Value)> {
    let (url, token) = (format!("{}{path}", app.base), token.to_owned());
    tokio::spawn(async move {
        let res = reqwest::Client::new().post(url).bearer_auth(token).json(&body).send().await.unwrap();
        read(res).await
    })
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
            let room_id = if i % 2 == 0 { &r1 } else { &r2 };
            spawn_post(&app, "/api/v1/rooms/run-bindings", &alice, json!({ "room_id": room_id, "run_id": run_id }))
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
    the_policy_lock_blocks_rooms_but_not_withdrawals,
    commands_are_never_executed,
    a_withdrawal_never_frees_a_slot_it_does_not_hold,
);
