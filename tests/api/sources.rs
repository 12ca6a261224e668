//! Room sources over real HTTP on both store backends: creation with a deferred credential
//! delivery, the one browser claim (16 concurrent claims -> one bearer), rotation,
//! revocation, and producer ingress (manifest admission, epochs, observation batches,
//! limits, and every credential boundary rechecked on every use).

use helix_core::domain::account::PolicyChange;
use helix_core::domain::source::adapter;
use helix_integration_tests::support::sources::{ALL, batch, manifest};
use helix_integration_tests::*;
use reqwest::Method;
use serde_json::{Value, json};

/// alice: a developer who owns a room, with a token and a signed-in browser.
async fn owner(app: &TestApp) -> (String, String, String) {
    let token = app.token_for("alice", "tenant-a", ALL).await;
    app.developer("alice").await;
    let cookie = app.session("alice").await;
    let room_id = app.room(&token, "Lab").await;
    (token, cookie, room_id)
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
    assert_eq!(d.as_object().unwrap().len(), 5, "only handle, URL, expiry and the two flags: {d}");
    let s = &created["source"];
    assert_eq!((s["status"].as_str(), s["credentialed"].as_bool()), (Some("awaiting_claim"), Some(false)));
    assert_eq!((s["read_only"].as_bool(), s["execution_enabled"].as_bool()), (Some(true), Some(false)));
    assert_eq!(created["answer_authority"], false);

    // A replay answers the same source without the handle (the store keeps only its hash).
    let (status, replay) = app.create_source(&token, &room_id, "source-create-1", body).await;
    assert_eq!(status, 201);
    assert_eq!(replay["source"]["source_id"], s["source_id"]);
    assert_eq!(replay["credential_delivery"]["claim_handle"], Value::Null);
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
    let (token, cookie, room_id) = owner(&app).await;
    let (_, created) = app
        .create_source(&token, &room_id, "k-claim-001", json!({ "adapter_profile": "minecraft", "world_id": "w" }))
        .await;
    let handle = created["credential_delivery"]["claim_handle"].as_str().unwrap().to_owned();
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
    let (token, cookie, room_id) = owner(&app).await;
    let (_, created) = app
        .create_source(&token, &room_id, "k-claim-002", json!({ "adapter_profile": "fixture", "world_id": "w" }))
        .await;
    let handle = created["credential_delivery"]["claim_handle"].as_str().unwrap().to_owned();
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

async fn an_expired_delivery_cannot_be_claimed(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (token, cookie, room_id) = owner(&app).await;
    let (_, created) = app
        .create_source(&token, &room_id, "k-claim-003", json!({ "adapter_profile": "fixture", "world_id": "w" }))
        .await;
    let handle = created["credential_delivery"]["claim_handle"].as_str().unwrap().to_owned();
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

async fn ingress_admits_an_exact_manifest_and_stores_observations_with_provenance(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (token, cookie, room_id) = owner(&app).await;
    let (source_id, bearer) = app.claimed_source(&token, &cookie, &room_id, "w").await;

    // Observations before any manifest: refused.
    let (status, err) = app.ingress(&bearer, "observations", &batch("w", 1, &["req-0001"], 0)).await;
    assert_eq!((status, code(&err)), (409, "manifest_not_registered"));

    // Mismatches, each with its reason.
    let mut wrong = manifest("w", 2);
    wrong["world_id"] = json!("nether");
    let (status, err) = app.ingress(&bearer, "manifest", &wrong).await;
    assert_eq!(
        (status, code(&err), err["error"]["details"]["reason"].as_str()),
        (409, "manifest_not_admitted", Some("world_mismatch"))
    );
    let mut wrong = manifest("w", 2);
    wrong["adapter_profile"] = json!("fixture");
    let (_, err) = app.ingress(&bearer, "manifest", &wrong).await;
    assert_eq!(err["error"]["details"]["reason"], "adapter_profile_mismatch");
    let mut wrong = manifest("w", 2);
    wrong["manifest_hash"] = json!("sha256:0000");
    let (_, err) = app.ingress(&bearer, "manifest", &wrong).await;
    assert_eq!(err["error"]["details"]["reason"], "manifest_hash_mismatch");

    let (status, receipt) = app.ingress(&bearer, "manifest", &manifest("w", 2)).await;
    assert_eq!(status, 200, "{receipt}");
    assert_eq!((receipt["admitted"].as_bool(), receipt["producer_epoch"].as_u64()), (Some(true), Some(2)));
    let (status, err) = app.ingress(&bearer, "manifest", &manifest("w", 1)).await;
    assert_eq!((status, code(&err)), (409, "producer_epoch_stale"));
    assert_eq!(err["error"]["details"]["admitted_epoch"], 2);

    let (status, err) = app.ingress(&bearer, "observations", &batch("w", 1, &["req-0001"], 0)).await;
    assert_eq!((status, code(&err)), (409, "producer_epoch_stale"));
    let (status, receipt) = app.ingress(&bearer, "observations", &batch("w", 2, &["req-0001", "req-0002"], 0)).await;
    assert_eq!(status, 202, "{receipt}");
    assert_eq!(receipt["accepted"], 2);
    let (status, err) = app.ingress(&bearer, "observations", &batch("w", 2, &["req-0001"], 0)).await;
    assert_eq!((status, code(&err)), (409, "duplicate_observation"), "{err}");
    let (status, err) = app.ingress(&bearer, "observations", &batch("w", 2, &["rm -rf"], 0)).await;
    assert_eq!((status, code(&err)), (400, "invalid_request"));

    let stored = app.state.services.sources.fresh_observations(&source_id, 60_000, 50).await.unwrap();
    assert_eq!(stored.len(), 2);
    let o = &stored[0].provenance;
    assert_eq!(
        (o.room_id.as_str(), o.world_id.as_str(), o.adapter_profile.as_str()),
        (room_id.as_str(), "w", "minecraft")
    );
    assert_eq!(o.producer_epoch, 2);
    assert_eq!(o.manifest_hash, adapter("minecraft").unwrap().manifest_hash("w"));
    assert_eq!(o.adapter_hash, adapter("minecraft").unwrap().adapter_hash());
    assert!(o.request_id.starts_with("req-000"));
    // Past the window: not fresh.
    app.state.services.clock.advance(120);
    assert!(app.state.services.sources.fresh_observations(&source_id, 60_000, 50).await.unwrap().is_empty());
}

async fn a_bearer_after_rotation_is_refused_and_revocation_is_permanent(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (token, cookie, room_id) = owner(&app).await;
    let (source_id, old) = app.claimed_source(&token, &cookie, &room_id, "w").await;
    assert_eq!(app.ingress(&old, "manifest", &manifest("w", 1)).await.0, 200);

    let (status, rotated) = read(
        app.browser(Method::POST, "/api/account/room-sources/rotations", &cookie)
            .json(&json!({ "room_id": room_id, "source_id": source_id }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{rotated}");
    assert_eq!(rotated["credential_generation"], 2);
    let new = rotated["source_bearer"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    let (status, err) = app.ingress(&old, "manifest", &manifest("w", 1)).await;
    assert_eq!((status, code(&err)), (401, "source_credential_invalid"));
    // The new credential starts unadmitted, and the epoch stays monotonic.
    assert_eq!(
        code(&app.ingress(&new, "observations", &batch("w", 1, &["req-0001"], 0)).await.1),
        "manifest_not_registered"
    );
    assert_eq!(app.ingress(&new, "manifest", &manifest("w", 1)).await.0, 200);
    assert_eq!(app.ingress(&new, "observations", &batch("w", 1, &["req-0001"], 0)).await.0, 202);

    let revoke = || {
        app.browser(Method::POST, "/api/account/room-sources/revocations", &cookie)
            .json(&json!({ "room_id": room_id, "source_id": source_id }))
            .send()
    };
    let (status, v) = read(revoke().await.unwrap()).await;
    assert_eq!((status, v["revocation_status"].as_str()), (200, Some("revoked")));
    let (status, v) = read(revoke().await.unwrap()).await;
    assert_eq!((status, v["revocation_status"].as_str()), (200, Some("already_revoked")));
    let (status, err) = app.ingress(&new, "observations", &batch("w", 1, &["req-0002"], 0)).await;
    assert_eq!((status, code(&err)), (401, "source_credential_invalid"));
    let (status, _) = read(
        app.browser(Method::POST, "/api/account/room-sources/rotations", &cookie)
            .json(&json!({ "room_id": room_id, "source_id": source_id }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404, "a revoked source cannot be rotated back to life");
}

async fn policy_changes_and_credential_expiry_are_enforced_on_every_ingress_use(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (token, cookie, room_id) = owner(&app).await;
    let (_, bearer) = app.claimed_source(&token, &cookie, &room_id, "w").await;
    assert_eq!(app.ingress(&bearer, "manifest", &manifest("w", 1)).await.0, 200);

    app.set_policy("alice", PolicyChange { developer: Some(false), ..Default::default() }).await;
    assert_eq!(code(&app.ingress(&bearer, "manifest", &manifest("w", 1)).await.1), "source_credential_invalid");
    app.developer("alice").await;
    assert_eq!(app.ingress(&bearer, "manifest", &manifest("w", 1)).await.0, 200);
    app.set_policy("alice", PolicyChange { rooms_locked: Some(true), ..Default::default() }).await;
    assert_eq!(code(&app.ingress(&bearer, "manifest", &manifest("w", 1)).await.1), "source_credential_invalid");
    app.set_policy("alice", PolicyChange { rooms_locked: Some(false), ..Default::default() }).await;
    assert_eq!(app.ingress(&bearer, "manifest", &manifest("w", 1)).await.0, 200);

    // Not a source bearer at all: an OAuth token, garbage, nothing.
    assert_eq!(code(&app.ingress(&token, "manifest", &manifest("w", 1)).await.1), "source_credential_invalid");
    assert_eq!(code(&app.ingress("hsb_nope", "manifest", &manifest("w", 1)).await.1), "source_credential_invalid");
    let (status, _) = read(
        app.http
            .post(format!("{}/api/ingress/room-sources/manifest", app.base))
            .json(&manifest("w", 1))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);

    app.state.services.clock.advance(helix_core::service::sources::CREDENTIAL_TTL_SECS + 1);
    assert_eq!(code(&app.ingress(&bearer, "manifest", &manifest("w", 1)).await.1), "source_credential_invalid");
}

async fn ingress_has_its_own_body_and_rate_limits(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        &[("HELIX_ROOM_SOURCE_INGRESS_BODY_LIMIT", "2048"), ("HELIX_ROOM_SOURCE_INGRESS_SOURCE_RATE_LIMIT", "4")],
    )
    .await;
    let (token, cookie, room_id) = owner(&app).await;
    let (_, bearer) = app.claimed_source(&token, &cookie, &room_id, "w").await;
    assert_eq!(app.ingress(&bearer, "manifest", &manifest("w", 1)).await.0, 200);
    let ids: Vec<String> = (0..20).map(|i| format!("req-{i:04}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let (status, err) = app.ingress(&bearer, "observations", &batch("w", 1, &ids, 0)).await;
    assert_eq!((status, code(&err)), (413, "payload_too_large"));
    let mut last = 0;
    for _ in 0..4 {
        last = app.ingress(&bearer, "manifest", &manifest("w", 1)).await.0;
    }
    assert_eq!(last, 429, "the fifth use within a minute is over the per-source limit");
}

async fn the_source_tools_frame_the_same_services_over_mcp(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (token, _cookie, room_id) = owner(&app).await;
    let (status, list) = app.rpc("/mcp", &token, "tools/list", json!({})).await;
    assert_eq!(status, 200);
    let tools = list["result"]["tools"].as_array().unwrap();
    for name in ["helix_room_source_list", "helix_room_source_create"] {
        let t = tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} listed"));
        assert_eq!(t["securitySchemes"][0]["scopes"], json!(["helix.room_sources.manage"]), "{t}");
        assert!(t["outputSchema"].is_object());
    }
    let args = json!({ "room_id": room_id, "idempotency_key": "mcp-source-0001",
        "request": { "adapter_profile": "fixture", "world_id": "demo" } });
    let (_, v) =
        app.rpc("/mcp", &token, "tools/call", json!({ "name": "helix_room_source_create", "arguments": args })).await;
    let created = &v["result"]["structuredContent"];
    assert_eq!(v["result"]["isError"], false, "{v}");
    assert_eq!(created["credential_delivery"]["bearer_included"], false);
    assert!(created["credential_delivery"]["claim_handle"].as_str().unwrap().starts_with("hsc_"));
    let (_, v) =
        app.rpc("/mcp", &token, "tools/call", json!({ "name": "helix_room_source_create", "arguments": args })).await;
    assert_eq!(v["result"]["_meta"]["helix/idempotency_replayed"], true, "{v}");
    assert_eq!(v["result"]["structuredContent"]["credential_delivery"]["claim_handle"], Value::Null);
    let (_, v) = app
        .rpc(
            "/mcp",
            &token,
            "tools/call",
            json!({ "name": "helix_room_source_list", "arguments": { "room_id": room_id } }),
        )
        .await;
    assert_eq!(v["result"]["structuredContent"]["sources"].as_array().unwrap().len(), 1, "{v}");
    // A token with only helix.rooms.read is refused the source tools.
    let reader = app.token_for("alice", "tenant-a", &["helix.rooms.read"]).await;
    let (_, v) = app
        .rpc(
            "/mcp",
            &reader,
            "tools/call",
            json!({ "name": "helix_room_source_list", "arguments": { "room_id": room_id } }),
        )
        .await;
    assert_eq!(v["result"]["isError"], true);
    assert_eq!(v["result"]["structuredContent"]["error"]["code"], "insufficient_scope", "{v}");
}

async fn device_check_publishes_one_tool_and_reports_source_health_only(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[("HELIX_BOUND_ROOM_EVIDENCE_MAX_AGE_MS", "5000")]).await;
    let (token, cookie, room_id) = owner(&app).await;
    let (source_id, bearer) = app.claimed_source(&token, &cookie, &room_id, "w").await;
    let reader = app.token_for("alice", "tenant-a", &["helix.rooms.read"]).await;
    let dc = "/mcp/device-check";

    let (status, list) = app.rpc(dc, &reader, "tools/list", json!({})).await;
    assert_eq!(status, 200, "{list}");
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "exactly one tool: {list}");
    assert_eq!(tools[0]["name"], "helix_environment_device_check");
    assert_eq!(tools[0]["securitySchemes"][0]["scopes"], json!(["helix.rooms.read"]));
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], true);
    // Another server's tool is not callable here.
    let (status, _) = app.rpc(dc, &reader, "tools/call", json!({ "name": "helix_run_start", "arguments": {} })).await;
    assert_eq!(status, 400);

    let call = json!({ "name": "helix_environment_device_check", "arguments": {} });
    let (_, v) = app.rpc(dc, &reader, "tools/call", call.clone()).await;
    let report = &v["result"]["structuredContent"];
    assert_eq!(report["schema"], "helix.environment_device_check.v1", "{v}");
    let s = &report["rooms"][0]["sources"][0];
    assert_eq!(
        (s["source_id"].as_str(), s["registered"].as_bool(), s["admitted"].as_bool()),
        (Some(source_id.as_str()), Some(false), Some(false))
    );
    assert_eq!(s["freshness"], "no_observations");

    assert_eq!(app.ingress(&bearer, "manifest", &manifest("w", 3)).await.0, 200);
    assert_eq!(app.ingress(&bearer, "observations", &batch("w", 3, &["req-0001"], 1000)).await.0, 202);
    let (_, v) = app.rpc(dc, &reader, "tools/call", call.clone()).await;
    let s = &v["result"]["structuredContent"]["rooms"][0]["sources"][0];
    assert_eq!(
        (s["registered"].as_bool(), s["admitted"].as_bool(), s["producer_epoch"].as_u64()),
        (Some(true), Some(true), Some(3)),
        "{v}"
    );
    assert_eq!(s["freshness"], "fresh");
    assert!(s["last_observation_age_ms"].as_u64().unwrap() >= 1000);
    let text = v.to_string();
    assert!(
        !text.contains(&bearer) && !text.contains("hsb_") && !text.contains("ingress") && !text.contains("Steve"),
        "{text}"
    );

    app.state.services.clock.advance(10);
    let (_, v) = app.rpc(dc, &reader, "tools/call", call.clone()).await;
    assert_eq!(v["result"]["structuredContent"]["rooms"][0]["sources"][0]["freshness"], "stale", "{v}");

    // Without helix.rooms.read: an error result whose challenge names this server's metadata.
    let other = app.token_for("alice", "tenant-a", &["helix.agent_runs.read"]).await;
    let (_, v) = app.rpc(dc, &other, "tools/call", call).await;
    assert_eq!(v["result"]["structuredContent"]["error"]["code"], "insufficient_scope", "{v}");
    assert!(v["result"]["_meta"]["mcp/www_authenticate"][0].as_str().unwrap().contains("/mcp/device-check"), "{v}");
}

/// `/mcp` publishes Device Check too (the contract's Codex configuration enables it there):
/// the same tool as `/mcp/device-check`, the same report, its challenge naming `/mcp`.
async fn mcp_publishes_device_check_with_the_same_tool_and_report(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let (token, cookie, room_id) = owner(&app).await;
    let (source_id, _bearer) = app.claimed_source(&token, &cookie, &room_id, "w").await;
    let reader = app.token_for("alice", "tenant-a", &["helix.rooms.read"]).await;
    let tool_of = |list: &Value| {
        let tools = list["result"]["tools"].as_array().unwrap();
        tools.iter().find(|t| t["name"] == "helix_environment_device_check").cloned()
    };
    let (_, on_mcp) = app.rpc("/mcp", &reader, "tools/list", json!({})).await;
    let (_, alone) = app.rpc("/mcp/device-check", &reader, "tools/list", json!({})).await;
    assert_eq!(tool_of(&on_mcp).expect("on /mcp"), tool_of(&alone).unwrap());

    let call = json!({ "name": "helix_environment_device_check", "arguments": {} });
    let (status, v) = app.rpc("/mcp", &reader, "tools/call", call.clone()).await;
    assert_eq!(status, 200, "{v}");
    let (_, w) = app.rpc("/mcp/device-check", &reader, "tools/call", call.clone()).await;
    let report = |v: &Value| {
        let mut r = v["result"]["structuredContent"].clone();
        r.as_object_mut().unwrap().remove("checked_at");
        r
    };
    assert_eq!(report(&v), report(&w));
    assert_eq!(v["result"]["structuredContent"]["rooms"][0]["sources"][0]["source_id"], source_id.as_str(), "{v}");

    let other = app.token_for("alice", "tenant-a", &["helix.agent_runs.read"]).await;
    let (_, v) = app.rpc("/mcp", &other, "tools/call", call).await;
    assert_eq!(v["result"]["structuredContent"]["error"]["code"], "insufficient_scope", "{v}");
    let challenge = v["result"]["_meta"]["mcp/www_authenticate"][0].as_str().unwrap();
    assert!(challenge.contains("/mcp") && !challenge.contains("/mcp/device-check"), "{v}");
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
    source_creation_checks_scope_profile_ownership_and_the_developer_flag,
    sixteen_concurrent_claims_of_one_delivery_show_exactly_one_bearer,
    only_the_same_origin_developer_owner_may_claim,
    an_expired_delivery_cannot_be_claimed,
    ingress_admits_an_exact_manifest_and_stores_observations_with_provenance,
    a_bearer_after_rotation_is_refused_and_revocation_is_permanent,
    policy_changes_and_credential_expiry_are_enforced_on_every_ingress_use,
    ingress_has_its_own_body_and_rate_limits,
    the_source_tools_frame_the_same_services_over_mcp,
    device_check_publishes_one_tool_and_reports_source_health_only,
    mcp_publishes_device_check_with_the_same_tool_and_report,
);
