//! Store round trips per operation (one store call = one DynamoDB request on the
//! DynamoDB backend). docs/round-trips.md is this table; this test keeps it honest.

use helix_core::executor::scripted::Step;
use helix_integration_tests::support::runs::{evidence_artifact, research_run};
use helix_integration_tests::*;
use serde_json::json;

#[tokio::test]
async fn each_operation_makes_the_documented_store_calls() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    app.faults.take_log();

    let run = app.started(&token, research_run()).await;
    assert_eq!(app.faults.take_log(), ["batch_get", "transact"], "start: auth + one transaction");
    let id = run["run_id"].as_str().unwrap();

    app.start(&token, "replayed-start-1", research_run()).await;
    app.faults.take_log();
    app.start(&token, "replayed-start-1", research_run()).await;
    assert_eq!(
        app.faults.take_log(),
        ["batch_get", "transact"],
        "start replay: the failed transaction returns the receipt"
    );

    app.get(&format!("/api/v1/agent-runs/{id}"), &token).send().await.unwrap();
    assert_eq!(app.faults.take_log(), ["batch_get"], "inspect: the run comes with the principal");

    app.get(&format!("/api/v1/agent-runs/{id}/events"), &token).send().await.unwrap();
    assert_eq!(app.faults.take_log(), ["batch_get", "query"], "events");

    app.script(Step::Artifact(evidence_artifact(1)));
    app.continue_run(&token, id, "counted-turn-01", json!({"expected_version": 1, "instruction": "go"})).await;
    assert_eq!(
        app.faults.take_log(),
        ["batch_get", "transact", "transact"],
        "continue: principal + run + receipt, claim, finalize"
    );

    app.continue_run(&token, id, "counted-turn-01", json!({"expected_version": 1, "instruction": "go"})).await;
    assert_eq!(app.faults.take_log(), ["batch_get"], "continue replay");

    app.cancel(&token, id, "counted-cancel-1", json!({"expected_version": 2})).await;
    assert_eq!(app.faults.take_log(), ["batch_get", "transact"], "cancel: principal + run + receipt, one transaction");
}

#[tokio::test]
async fn mcp_tool_calls_read_the_run_with_the_principal() {
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let id = run["run_id"].as_str().unwrap();
    app.faults.take_log();
    let call = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": { "name": "helix_run_inspect", "arguments": { "run_id": id } }
    });
    let res = app
        .post("/mcp", &token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25")
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["result"]["structuredContent"]["run_id"], id, "{body}");
    assert_eq!(app.faults.take_log(), ["batch_get"], "inspect over MCP: one BatchGetItem");
}

/// With a shared store (DynamoDB) each request also counts its IP and principal windows;
/// both counts overlap the authentication read, so they add no sequential round trip.
#[tokio::test]
async fn with_a_shared_store_both_rate_limit_counts_overlap_the_authentication_read() {
    let app = TestApp::spawn_with(Backend::Dynamo, &[]).await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let id = run["run_id"].as_str().unwrap();
    app.faults.take_log();
    app.faults.require_overlap();
    let res = app.get(&format!("/api/v1/agent-runs/{id}"), &token).send().await.unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let mut log = app.faults.take_log();
    log.sort_unstable();
    assert_eq!(log, ["batch_get", "count", "count"], "inspect: the read plus the IP and principal counts");
}

/// Store calls per source operation (docs/round-trips.md, "Room sources and bound-room
/// evidence"), on warm requests: the principal's and the session's reads included.
#[tokio::test]
async fn source_operations_make_the_documented_store_calls() {
    use helix_integration_tests::support::sources::{ALL, batch, manifest};
    let app = TestApp::spawn_with(
        Backend::Embedded,
        &[("HELIX_AGENT_DATABASE_SCOPES", "research_library,bound_room_evidence")],
    )
    .await;
    let token = app.token_for("alice", "tenant-a", ALL).await;
    app.developer("alice").await;
    let cookie = app.session("alice").await;
    let room_id = app.room(&token, "Lab").await;
    let run = app
        .started(&token, json!({ "objective": "What is happening?", "database_scope": ["bound_room_evidence"] }))
        .await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let mut table: Vec<(&str, Vec<&str>)> = vec![];
    app.faults.take_log();

    let body = json!({ "adapter_profile": "minecraft", "world_id": "w" });
    let (status, created) = app.create_source(&token, &room_id, "rt-source-0001", body.clone()).await;
    assert_eq!(status, 201, "{created}");
    table.push(("create source", app.faults.take_log()));
    let (status, replayed) = app.create_source(&token, &room_id, "rt-source-0001", body).await;
    assert_eq!(status, 201);
    table.push(("create source, replayed", app.faults.take_log()));
    let (status, _) = read(app.get(&format!("/api/v1/rooms/{room_id}/sources"), &token).send().await.unwrap()).await;
    assert_eq!(status, 200);
    table.push(("list sources", app.faults.take_log()));
    // The replay's fresh handle (it voided the first one).
    assert_ne!(replayed["credential_delivery"]["claim_handle"], created["credential_delivery"]["claim_handle"]);
    let handle = replayed["credential_delivery"]["claim_handle"].as_str().unwrap();
    let (status, cred) = read(
        app.browser(reqwest::Method::POST, "/api/account/room-sources/credential-claims", &cookie)
            .json(&json!({ "claim_handle": handle }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{cred}");
    table.push(("credential claim", app.faults.take_log()));
    let bearer = cred["source_bearer"].as_str().unwrap().to_owned();
    assert_eq!(app.ingress(&bearer, "manifest", &manifest("w", 1)).await.0, 200);
    table.push(("ingress manifest", app.faults.take_log()));
    assert_eq!(app.ingress(&bearer, "observations", &batch("w", 1, &["req-0001", "req-0002"], 0)).await.0, 202);
    table.push(("ingress observations", app.faults.take_log()));

    let (status, b) = read(
        app.post("/api/v1/rooms/run-bindings", &token)
            .json(&json!({ "room_id": room_id, "run_id": run_id }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{b}");
    app.faults.take_log();
    app.script(Step::Artifact(
        serde_json::from_value(json!({ "solver_status": "succeeded", "summary": "looked" })).unwrap(),
    ));
    let res = app
        .continue_run(&token, &run_id, "rt-room-turn-01", json!({ "expected_version": 1, "instruction": "look" }))
        .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    table.push(("continue, bound_room_evidence", app.faults.take_log()));

    // A second room with a source of its own: Device Check reads each room's sources.
    let second = app.room(&token, "Lab").await;
    app.create_source(&token, &second, "rt-source-0002", json!({ "adapter_profile": "fixture", "world_id": "w" }))
        .await;
    let reader = app.token_for("alice", "tenant-a", &["helix.rooms.read"]).await;
    app.faults.take_log();
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "helix_environment_device_check", "arguments": {} } });
    let res = app
        .post("/mcp/device-check", &reader)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25")
        .json(&call)
        .send()
        .await
        .unwrap();
    let v: serde_json::Value = res.json().await.unwrap();
    let rooms = v["result"]["structuredContent"]["rooms"].as_array().unwrap();
    let first = rooms.iter().find(|r| r["room_id"] == room_id.as_str()).unwrap_or_else(|| panic!("{v}"));
    assert_eq!((rooms.len(), &first["sources"][0]["freshness"]), (2, &serde_json::json!("fresh")), "{v}");
    let mut log = app.faults.take_log();
    // The rooms are read concurrently: their calls interleave in any order.
    log[3..].sort_unstable();
    table.push(("device check, two rooms", log));

    for (name, log) in &table {
        println!("{name:<32} {} {log:?}", log.len());
    }
    let expected: Vec<(&str, Vec<&str>)> = vec![
        // principal; one transaction that also checks the room's owner and membership
        ("create source", vec!["batch_get", "transact"]),
        // the failed transaction's ALL_OLD receipt answers; the source; a fresh delivery
        // in place of the old one (one transaction with the room check)
        ("create source, replayed", vec!["batch_get", "transact", "get", "transact"]),
        ("list sources", vec!["batch_get", "batch_get", "query"]),
        // session + account; delivery; room + membership + source; one transaction
        ("credential claim", vec!["get", "get", "get", "batch_get", "transact"]),
        // bearer lookup; source + room + owner membership + owner account; the write
        ("ingress manifest", vec!["get", "batch_get", "put"]),
        ("ingress observations", vec!["get", "batch_get", "transact"]),
        // continue (principal + run + receipt, claim), then the room rechecks (slot, then
        // binding + room + membership + account), the room's sources, one source's fresh
        // observations, the recheck before projection (one BatchGetItem), finalize
        (
            "continue, bound_room_evidence",
            vec!["batch_get", "transact", "get", "batch_get", "query", "query", "batch_get", "transact"],
        ),
        // principal; the account's rooms; rooms + memberships; per room (concurrently) its
        // sources and their health markers
        (
            "device check, two rooms",
            vec!["batch_get", "query", "batch_get", "batch_get", "batch_get", "query", "query"],
        ),
    ];
    assert_eq!(table, expected);
}

/// Store calls per connector operation (docs/round-trips.md, "Player embodiment"), with
/// the connector's credential lookup already kept by the process (its first request reads
/// it once more). An idle poll is its one authentication read.
#[tokio::test]
async fn connector_operations_make_the_documented_store_calls() {
    use super::embodiment::{ack, paired, poll, register, select_first};
    let app = TestApp::spawn_with(Backend::Embedded, &[]).await;
    let w = paired(&app).await;
    let mut table: Vec<(&str, Vec<&str>)> = vec![];
    app.faults.take_log();

    let epoch = register(&app, &w).await;
    table.push(("register, first request", app.faults.take_log()));
    let first = poll(&app, &w, epoch, json!([])).await;
    assert_eq!(first.0, 200, "{}", first.1);
    table.push(("poll, first of an epoch", app.faults.take_log()));
    poll(&app, &w, epoch, json!([])).await;
    table.push(("poll, idle", app.faults.take_log()));

    assert!(!select_first(&app, &w, &w.token).await.0);
    app.faults.take_log();
    let action = json!({"type": "move_to", "x": 1, "y": 64, "z": 0});
    let args = json!({ "room_id": w.room_id, "idempotency_key": "rt-move-0001", "action": action });
    let call = json!({ "name": "helix_minecraft_player_action", "arguments": args });
    let (status, body) = app.rpc("/mcp", &w.token, "tools/call", call).await;
    assert_eq!((status, &body["result"]["isError"]), (200, &json!(false)), "{body}");
    let wf = body["result"]["structuredContent"].clone();
    table.push(("player action (MCP)", app.faults.take_log()));
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    let cmd = p["commands"][0].clone();
    assert_eq!(cmd["workflow_ref"], wf["workflow_ref"], "{p}");
    table.push(("poll, dispatching one action", app.faults.take_log()));
    poll(&app, &w, epoch, json!([])).await;
    table.push(("poll, redelivering", app.faults.take_log()));
    let (_, p) = poll(&app, &w, epoch, json!([ack(&cmd, 1, "completed", json!({"position": [1, 64, 0]}))])).await;
    assert_eq!(p["acks"][0]["outcome"], "applied", "{p}");
    table.push(("poll, one acknowledgement", app.faults.take_log()));
    poll(&app, &w, epoch, json!([])).await;
    table.push(("poll, going idle", app.faults.take_log()));
    let (_, p) = poll(&app, &w, epoch, json!([])).await;
    assert!(p["commands"].as_array().unwrap().is_empty() && p["cancel"].as_array().unwrap().is_empty(), "{p}");
    table.push(("poll, idle again", app.faults.take_log()));

    for (name, log) in &table {
        println!("{name:<32} {} {log:?}", log.len());
    }
    let expected: Vec<(&str, Vec<&str>)> = vec![
        // credential lookup (then kept); binding + room + owner membership + account + work
        // marker; the binding with the new epoch; the open workflows to pause
        ("register, first request", vec!["get", "batch_get", "transact", "query"]),
        // no cleared work marker at this epoch yet: the query, then the marker cleared
        ("poll, first of an epoch", vec!["batch_get", "query", "transact"]),
        ("poll, idle", vec!["batch_get"]),
        // principal; room + membership; the room's bindings; workflow + open marker + work
        // marker + receipt, conditional on the binding's revision
        ("player action (MCP)", vec!["batch_get", "batch_get", "query", "count", "transact"]),
        ("poll, dispatching one action", vec!["batch_get", "query", "transact"]),
        ("poll, redelivering", vec!["batch_get", "query"]),
        ("poll, one acknowledgement", vec!["batch_get", "query", "transact"]),
        ("poll, going idle", vec!["batch_get", "query", "transact"]),
        ("poll, idle again", vec!["batch_get"]),
    ];
    assert_eq!(table, expected);
}
