//! Room sources over real HTTP on both store backends: creation with a deferred credential
//! delivery and the one browser claim (16 concurrent claims -> one bearer). Producer
//! ingress, rotation and revocation are in `sources_ingress`.

use helix_core::domain::account::PolicyChange;
use helix_core::domain::source::adapter;
use helix_integration_tests::support::sources::ALL;
use helix_integration_tests::*;
use reqwest::Method;
use serde_json::{Value, json};

/// alice: a developer who owns a room, with a token and a signed-in browser.
pub(crate) async fn owner(app: &TestApp) -> (String, String, String) {
    let token = app.token_for("alice", "tenant-a", ALL).await;
    app.developer("alice").await;
    let cookie = app.session("alice").await;
    let room_id = app.room(&token, "Lab").await;
    (token, cookie, room_id)
}

/// A source of `profile` in alice's room, created with idempotency key `key`: alice's
/// token, cookie and room, and the claim handle of its deferred credential delivery.
async fn delivery(app: &TestApp, key: &str, profile: &str) -> (String, String, String, String) {
    let (token, cookie, room_id) = owner(app).await;
    let (_, created) =
        app.create_source(&token, &room_id, key, json!({ "adapter_profile": profile, "world_id": "w" })).await;
    let handle = created["credential_delivery"]["claim_handle"].as_str().unwrap().to_owned();
    (token, cookie, room_id, handle)
}

// ---------------------------------------------------------------------------------------------

async fn sources_are_created_with_a_deferred_delivery_and_listed_without_credentials(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (token, _cookie, room_id) = owner(&app).await;
    let body = json!({ "adapter_profile": "minecraft", "world_id": "overworld-1", "label": "Survival" });
    let (status, created) = app.create_source(&token, &room_id, "source-create-1", body.clone()).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["schema"], "helix.room_source_created.v1");
    let d = &created["credential_delivery"];
    assert_eq!((d["bearer_included"].clone(), d["plugin_config_included"].clone()), (json!(false), json!(false)));
    assert!(d["claim_handle"].as_str().unwrap().starts_with("hsc_"));
    assert!(d["claim_url"].as_str().unwrap().ends_with("/account/room-sources/claim"));
    assert!(d["expires_at"].is_string());
    assert_eq!(d["status"], "pending");
    assert_eq!(d.as_object().unwrap().len(), 6, "only handle, URL, expiry, status and the two flags: {d}");
    let s = &created["source"];
    assert_eq!((s["status"].as_str(), s["credentialed"].as_bool()), (Some("awaiting_claim"), Some(false)));
    assert_eq!((s["read_only"].as_bool(), s["execution_enabled"].as_bool()), (Some(true), Some(false)));
    assert_eq!(created["answer_authority"], false);

    // A replay answers the same source with a fresh handle (the store keeps only hashes).
    let (status, replay) = app.create_source(&token, &room_id, "source-create-1", body).await;
    assert_eq!(status, 201);
    assert_eq!(replay["source"]["source_id"], s["source_id"]);
    assert!(replay["credential_delivery"]["claim_handle"].as_str().unwrap().starts_with("hsc_"), "{replay}");
    assert_ne!(replay["credential_delivery"]["claim_handle"], d["claim_handle"]);
    let (status, err) = app
        .create_source(
            &token,
            &room_id,
            "source-create-1",
            json!({ "adapter_profile": "fixture", "world_id": "overworld-1" }),
        )
        .await;
    assert_eq!((status, code(&err)), (422, "idempotency_conflict"));

    let (status, list) = read(app.get(&format!("/api/v1/rooms/{room_id}/sources"), &token).send().await.unwrap()).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["schema"], "helix.room_source_list.v1");
    assert_eq!(list["sources"].as_array().unwrap().len(), 1);
    assert_eq!(list["sources"][0]["label"], "Survival");
    assert!(!list.to_string().contains("hsc_") && !list.to_string().contains("hsb_"));
}

async fn source_creation_checks_scope_profile_ownership_and_the_developer_flag(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (token, _cookie, room_id) = owner(&app).await;
    let ok = json!({ "adapter_profile": "minecraft", "world_id": "w1" });
    let (status, err) = app
        .create_source(&token, &room_id, "k-profile-1", json!({ "adapter_profile": "factorio", "world_id": "w1" }))
        .await;
    assert_eq!((status, code(&err)), (400, "invalid_request"));
    let (status, err) = app
        .create_source(
            &token,
            &room_id,
            "k-cred-0001",
            json!({ "adapter_profile": "minecraft", "world_id": "ghp_abcdef0123456789" }),
        )
        .await;
    assert_eq!((status, code(&err)), (400, "credential_rejected"));
    assert!(!err.to_string().contains("ghp_"));
    let (status, err) = app
        .create_source(
            &token,
            &room_id,
            "k-field-0001",
            json!({ "adapter_profile": "minecraft", "world_id": "w1", "owner_account": "x" }),
        )
        .await;
    assert_eq!((status, code(&err)), (400, "invalid_request"));
    let (status, err) = app.create_source(&token, "room_00000000000000000000", "k-none-0001", ok.clone()).await;
    assert_eq!((status, code(&err)), (404, "not_found"));

    // Another account (even a developer) cannot see or use alice's room.
    let bob = app.token_for("bob", "tenant-a", ALL).await;
    app.developer("bob").await;
    let (status, err) = app.create_source(&bob, &room_id, "k-bob-00001", ok.clone()).await;
    assert_eq!((status, code(&err)), (404, "not_found"));
    let (status, _) = read(app.get(&format!("/api/v1/rooms/{room_id}/sources"), &bob).send().await.unwrap()).await;
    assert_eq!(status, 404);

    let narrow = app.token_for("alice", "tenant-a", &["helix.rooms.manage"]).await;
    let (status, err) = app.create_source(&narrow, &room_id, "k-scope-0001", ok.clone()).await;
    assert_eq!((status, code(&err)), (403, "insufficient_scope"));

    app.set_policy("alice", PolicyChange { developer: Some(false), ..Default::default() }).await;
    let (status, err) = app.create_source(&token, &room_id, "k-dev-00001", ok).await;
    assert_eq!((status, code(&err)), (403, "developer_required"));
}

async fn sixteen_concurrent_claims_of_one_delivery_show_exactly_one_bearer(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (token, cookie, room_id, handle) = delivery(&app, "k-claim-001", "minecraft").await;
    let claims = (0..16).map(|_| {
        app.browser(Method::POST, "/api/account/room-sources/credential-claims", &cookie)
            .json(&json!({ "claim_handle": handle }))
            .send()
    });
    let results = futures::future::join_all(claims).await;
    let mut bearers = vec![];
    for r in results {
        let (status, v) = read(r.unwrap()).await;
        match status {
            201 => bearers.push(v),
            _ => assert_eq!(code(&v), "claim_handle_invalid", "{status} {v}"),
        }
    }
    assert_eq!(bearers.len(), 1, "exactly one bearer shown");
    let cred = &bearers[0];
    assert_eq!(cred["schema"], "helix.room_source_credential.v1");
    assert!(cred["source_bearer"].as_str().unwrap().starts_with("hsb_"));
    assert_eq!(cred["plugin_config"]["adapter_profile"], "minecraft");
    assert_eq!(cred["plugin_config"]["manifest_hash"], adapter("minecraft").unwrap().manifest_hash("w"));
    assert_eq!((cred["shown_once"].as_bool(), cred["action_credential"].as_bool()), (Some(true), Some(false)));

    // The listing shows it credentialed, still without any secret.
    let (_, list) = read(app.get(&format!("/api/v1/rooms/{room_id}/sources"), &token).send().await.unwrap()).await;
    assert_eq!(list["sources"][0]["status"], "active");
    assert_eq!(list["sources"][0]["credentialed"], true);
    assert!(!list.to_string().contains(cred["source_bearer"].as_str().unwrap()));
}

async fn only_the_same_origin_developer_owner_may_claim(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (token, cookie, _, handle) = delivery(&app, "k-claim-002", "fixture").await;
    let body = json!({ "claim_handle": handle });
    let path = format!("{}/api/account/room-sources/credential-claims", app.base);

    // Cross-site, no cookie, a bearer instead of the cookie: refused.
    let (status, err) = read(
        app.http
            .post(&path)
            .header("cookie", &cookie)
            .header("origin", "https://evil.example")
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 403, "{err}");
    let (status, err) = read(app.http.post(&path).header("cookie", &cookie).json(&body).send().await.unwrap()).await;
    assert_eq!((status, code(&err)), (403, "cross_site_request"));
    let (status, err) = read(
        app.browser(Method::POST, "/api/account/room-sources/credential-claims", "").json(&body).send().await.unwrap(),
    )
    .await;
    assert_eq!((status, code(&err)), (401, "session_required"));
    let (status, _) = read(
        app.browser(Method::POST, "/api/account/room-sources/credential-claims", "")
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);

    // Another developer's session: the handle is not theirs.
    app.token_for("bob", "tenant-a", ALL).await;
    app.developer("bob").await;
    let bob = app.session("bob").await;
    let (status, err) = read(
        app.browser(Method::POST, "/api/account/room-sources/credential-claims", &bob)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code(&err)), (404, "claim_handle_invalid"));

    // The owner without the developer flag: refused; with it: claimed; then never again.
    app.set_policy("alice", PolicyChange { developer: Some(false), ..Default::default() }).await;
    let (status, err) = read(
        app.browser(Method::POST, "/api/account/room-sources/credential-claims", &cookie)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code(&err)), (403, "developer_required"));
    app.developer("alice").await;
    let (status, _) = read(
        app.browser(Method::POST, "/api/account/room-sources/credential-claims", &cookie)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201);
    let (status, err) = read(
        app.browser(Method::POST, "/api/account/room-sources/credential-claims", &cookie)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code(&err)), (404, "claim_handle_invalid"));
}

async fn claim(app: &TestApp, cookie: &str, handle: &Value) -> (u16, Value) {
    let body = json!({ "claim_handle": handle });
    read(
        app.browser(Method::POST, "/api/account/room-sources/credential-claims", cookie)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// The create's response was lost: replaying its key delivers a fresh handle that voids the
/// lost one, until the credential is claimed; then the replay says the delivery is used.
async fn a_replayed_create_delivers_a_fresh_handle_until_the_claim(backend: Backend) {
    use helix_core::service::records::sources::source_key;
    let app = TestApp::spawn_with(backend, &[]).await;
    let (token, cookie, room_id) = owner(&app).await;
    let body = json!({ "adapter_profile": "fixture", "world_id": "w" });
    let (status, first) = app.create_source(&token, &room_id, "source-lost-0001", body.clone()).await;
    assert_eq!(status, 201, "{first}");
    let lost = first["credential_delivery"]["claim_handle"].clone();
    let source_id = first["source"]["source_id"].as_str().unwrap().to_owned();

    let (status, again) = app.create_source(&token, &room_id, "source-lost-0001", body.clone()).await;
    assert_eq!(status, 201, "{again}");
    assert_eq!(again["source"]["source_id"], source_id.as_str(), "the same source");
    let d = &again["credential_delivery"];
    assert_eq!((d["status"].as_str(), d["bearer_included"].as_bool()), (Some("pending"), Some(false)), "{d}");
    let fresh = d["claim_handle"].clone();
    assert!(fresh.as_str().is_some_and(|h| h.starts_with("hsc_")) && fresh != lost, "{d}");
    // The store keeps hashes only.
    let item = app.state.services.store.get(&source_key(&room_id, &source_id)).await.unwrap().unwrap();
    let stored = format!("{item:?}");
    for h in [&lost, &fresh] {
        assert!(!stored.contains(h.as_str().unwrap()), "no handle in plain text");
    }

    // The lost handle is void; the fresh one claims, once.
    let (status, err) = claim(&app, &cookie, &lost).await;
    assert_eq!((status, code(&err)), (404, "claim_handle_invalid"), "{err}");
    let (status, cred) = claim(&app, &cookie, &fresh).await;
    assert_eq!(status, 201, "{cred}");
    assert!(cred["source_bearer"].as_str().unwrap().starts_with("hsb_"));

    // Claimed: the replay says the delivery is used, with no handle, and delivers nothing.
    let (status, used) = app.create_source(&token, &room_id, "source-lost-0001", body).await;
    assert_eq!(status, 201, "{used}");
    let d = &used["credential_delivery"];
    assert_eq!((d["status"].as_str(), &d["claim_handle"]), (Some("claimed"), &Value::Null), "{d}");
    assert_eq!(claim(&app, &cookie, &fresh).await.0, 404);
}

async fn an_expired_delivery_cannot_be_claimed(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (_, cookie, _, handle) = delivery(&app, "k-claim-003", "fixture").await;
    app.state.services.clock.advance(helix_core::service::sources::DELIVERY_TTL_SECS + 1);
    let (status, err) = read(
        app.browser(Method::POST, "/api/account/room-sources/credential-claims", &cookie)
            .json(&json!({ "claim_handle": handle }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code(&err)), (404, "claim_handle_invalid"), "{err}");
}

/// `Idempotency-Replayed` on every source create response, refusals included, as on the
/// agent runs: `true` only for a replay; the list never carries it.
async fn every_source_create_response_carries_idempotency_replayed_errors_included(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (token, _cookie, room_id) = owner(&app).await;
    let path = format!("/api/v1/rooms/{room_id}/sources");
    let replayed =
        |res: &reqwest::Response| res.headers().get("idempotency-replayed").map(|v| v.to_str().unwrap().to_owned());
    let create = |key: &str, body: Value| app.post(&path, &token).header("Idempotency-Key", key).json(&body);
    let body = json!({ "adapter_profile": "minecraft", "world_id": "overworld-1", "label": "Survival" });
    let first = create("source-replay-01", body.clone()).send().await.unwrap();
    assert_eq!((first.status().as_u16(), replayed(&first).as_deref()), (201, Some("false")));
    let again = create("source-replay-01", body.clone()).send().await.unwrap();
    assert_eq!((again.status().as_u16(), replayed(&again).as_deref()), (201, Some("true")));
    let other = json!({ "adapter_profile": "fixture", "world_id": "overworld-1" });
    let unknown = json!({ "adapter_profile": "minecraft", "world_id": "overworld-2", "owner": "me" });
    let cases: Vec<(&str, reqwest::RequestBuilder, u16, &str)> = vec![
        ("the same key with another body", create("source-replay-01", other), 422, "idempotency_conflict"),
        ("an unknown field", create("source-replay-02", unknown), 400, "invalid_request"),
        ("no key", app.post(&path, &token).json(&body), 400, "invalid_idempotency_key"),
    ];
    for (name, req, status, error) in cases {
        let res = req.send().await.unwrap();
        assert_eq!((res.status().as_u16(), replayed(&res).as_deref()), (status, Some("false")), "{name}");
        let v: Value = res.json().await.unwrap();
        assert_eq!((v["schema"].as_str(), code(&v)), (Some("helix.agent_api.error.v1"), error), "{name}");
    }
    let list = app.get(&path, &token).send().await.unwrap();
    assert_eq!((list.status().as_u16(), replayed(&list)), (200, None));
}

on_both_backends!(
    sources_are_created_with_a_deferred_delivery_and_listed_without_credentials,
    every_source_create_response_carries_idempotency_replayed_errors_included,
    a_replayed_create_delivers_a_fresh_handle_until_the_claim,
    source_creation_checks_scope_profile_ownership_and_the_developer_flag,
    sixteen_concurrent_claims_of_one_delivery_show_exactly_one_bearer,
    only_the_same_origin_developer_owner_may_claim,
    an_expired_delivery_cannot_be_claimed,
);
