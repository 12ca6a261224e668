//! Room source producer ingress over real HTTP on both store backends: manifest admission,
//! epochs and observation batches with provenance, rotation and revocation, the policy and
//! expiry rechecked on every use, ingress limits, and the source tools over MCP and Device
//! Check.

use helix_core::domain::account::PolicyChange;
use helix_core::domain::source::adapter;
use helix_integration_tests::support::sources::{batch, manifest};
use helix_integration_tests::*;
use reqwest::Method;
use serde_json::{Value, json};

use super::sources::owner;

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
    // The replay delivers again: a fresh handle (the first one is void).
    let again = &v["result"]["structuredContent"]["credential_delivery"];
    assert_eq!(again["status"], "pending", "{v}");
    assert!(again["claim_handle"].as_str().unwrap().starts_with("hsc_"));
    assert_ne!(again["claim_handle"], created["credential_delivery"]["claim_handle"]);
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

on_both_backends!(
    ingress_admits_an_exact_manifest_and_stores_observations_with_provenance,
    a_bearer_after_rotation_is_refused_and_revocation_is_permanent,
    policy_changes_and_credential_expiry_are_enforced_on_every_ingress_use,
    ingress_has_its_own_body_and_rate_limits,
    the_source_tools_frame_the_same_services_over_mcp,
    device_check_publishes_one_tool_and_reports_source_health_only,
    mcp_publishes_device_check_with_the_same_tool_and_report,
);
