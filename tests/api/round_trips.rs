//! Store round trips per operation (one store call = one DynamoDB request on the
//! DynamoDB backend). docs/round-trips.md is this table; this test keeps it honest.

use helix_core::executor::scripted::Step;
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
