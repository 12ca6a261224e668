//! `helix_run_continue` as an MCP task (the `io.modelcontextprotocol/tasks` extension,
//! declared per request on 2026-07-28): a turn longer than the emulated gateway answers
//! `CreateTaskResult`, `tasks/get` polls it to the synchronous call's tool result, and
//! `tasks/cancel` cancels the run. The answers are read with the official Rust SDK's own
//! model types (rmcp), which implement the extension's published schema.

use std::time::Duration;

use helix_core::executor::scripted::Step;
use helix_integration_tests::support::runs::{assert_contiguous, completing_step, kinds, research_run};
use helix_integration_tests::*;
use rmcp::model::{CreateTaskResult, GetTaskResult, TaskPayload, TaskStatus};
use serde_json::{Value, json};

use super::lifecycle::start;

const BEHIND_A_GATEWAY: &[(&str, &str)] = &[("HELIX_GATEWAY_TIMEOUT_MS", "1000"), ("HELIX_DEADLINE_MARGIN_MS", "200")];

/// One 2026-07-28 request; `tasks` declares the extension in its per-request capabilities.
async fn rpc(app: &TestApp, token: &str, method: &str, params: Value, tasks: bool) -> Value {
    let (status, body) = rpc_answer(app, token, method, params, tasks).await;
    assert_eq!(status, 200, "{method}: {body}");
    body
}

async fn rpc_answer(app: &TestApp, token: &str, method: &str, mut params: Value, tasks: bool) -> (u16, Value) {
    let capabilities = if tasks { json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}) } else { json!({}) };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let mut req = app
        .post("/mcp", token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params["name"].as_str().or(params["taskId"].as_str()) {
        req = req.header("mcp-name", name);
    }
    let res = req.json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})).send().await.unwrap();
    read(res).await
}

fn continue_call(run_id: &str, key: &str) -> Value {
    json!({"name": "helix_run_continue", "arguments": {"run_id": run_id, "idempotency_key": key,
        "request": {"expected_version": 1, "instruction": "Find the measured force."}}})
}

async fn get_task(app: &TestApp, token: &str, task_id: &str) -> GetTaskResult {
    let reply = rpc(app, token, "tasks/get", json!({"taskId": task_id}), true).await;
    serde_json::from_value(reply["result"].clone()).unwrap_or_else(|e| panic!("{e}: {reply}"))
}

async fn until_terminal(app: &TestApp, token: &str, task_id: &str) -> GetTaskResult {
    for _ in 0..100 {
        let got = get_task(app, token, task_id).await;
        if got.task.status().is_terminal() {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the task never ended");
}

async fn a_slow_turn_completes_as_an_mcp_task(backend: Backend) {
    let app = TestApp::spawn_with(backend, BEHIND_A_GATEWAY).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    let discovered = rpc(&app, &token, "server/discover", json!({}), true).await;
    assert!(discovered["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object());
    app.script(Step::Delay(Duration::from_secs(3), Box::new(completing_step(1))));
    let started = std::time::Instant::now();
    let reply = rpc(&app, &token, "tools/call", continue_call(&id, "task-turn-0001"), true).await;
    assert!(started.elapsed() < Duration::from_secs(1), "answered before the gateway's limit");
    let created: CreateTaskResult =
        serde_json::from_value(reply["result"].clone()).unwrap_or_else(|e| panic!("{e}: {reply}"));
    assert_eq!(created.task.status, TaskStatus::Working);
    assert_eq!(created.task.task_id, format!("{id}/task-turn-0001"));
    assert!(created.task.poll_interval_ms.is_some() && created.task.ttl_ms.is_some());

    let working = get_task(&app, &token, &created.task.task_id).await;
    assert_eq!(working.task.status(), TaskStatus::Working);
    // The name is not a capability: another caller finds no such task.
    let bob = app.token_for("bob", "tenant-a", &["helix.agent_runs.read", "helix.agent_runs.write"]).await;
    let foreign = rpc(&app, &bob, "tasks/get", json!({"taskId": created.task.task_id}), true).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    let foreign = rpc(&app, &bob, "tasks/cancel", json!({"taskId": created.task.task_id}), true).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");

    let done = until_terminal(&app, &token, &created.task.task_id).await;
    assert!(started.elapsed() >= Duration::from_secs(3));
    let TaskPayload::Completed { result } = done.task.payload else { panic!("{:?}", done.task) };
    assert_eq!(result["isError"], false);
    assert_eq!(result["structuredContent"]["completion_status"], "completed");
    assert_eq!(result["structuredContent"]["version"], 2);
    // The same key through the synchronous call replays that same tool result.
    let replay = rpc(&app, &token, "tools/call", continue_call(&id, "task-turn-0001"), false).await;
    assert_eq!(replay["result"]["structuredContent"], result["structuredContent"]);
    assert_eq!(replay["result"]["_meta"]["helix/idempotency_replayed"], true);
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1, "one turn executed");
}

async fn a_client_without_the_extension_is_answered_synchronously(backend: Backend) {
    let app = TestApp::spawn_with(backend, BEHIND_A_GATEWAY).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(Step::Delay(Duration::from_secs(3), Box::new(completing_step(1))));
    let reply = rpc(&app, &token, "tools/call", continue_call(&id, "plain-turn-001"), false).await;
    assert_eq!(reply["result"]["resultType"], "complete", "{reply}");
    assert_eq!(reply["result"]["structuredContent"]["latest_result"]["failure_code"], "turn_timeout");
    let task_id = format!("{id}/plain-turn-001");
    let (_, refused) = rpc_answer(&app, &token, "tasks/get", json!({"taskId": task_id}), false).await;
    assert_eq!(refused["error"]["code"], -32021, "tasks/* needs the declared extension: {refused}");
}

async fn tasks_cancel_cancels_the_run_of_a_running_task(backend: Backend) {
    let app = TestApp::spawn_with(backend, BEHIND_A_GATEWAY).await;
    let token = app.token().await;
    let id = start(&app, &token, research_run()).await;
    app.script(Step::Delay(Duration::from_secs(20), Box::new(completing_step(1))));
    let reply = rpc(&app, &token, "tools/call", continue_call(&id, "task-cancel-001"), true).await;
    let created: CreateTaskResult = serde_json::from_value(reply["result"].clone()).unwrap();
    let started = std::time::Instant::now();
    let ack = rpc(&app, &token, "tasks/cancel", json!({"taskId": created.task.task_id}), true).await;
    assert!(ack["result"].is_object(), "{ack}");
    let done = until_terminal(&app, &token, &created.task.task_id).await;
    assert!(started.elapsed() < Duration::from_secs(10), "the cancel stopped the turn, not its 20 s");
    assert_eq!(done.task.status(), TaskStatus::Cancelled, "{:?}", done.task);
    let again = rpc(&app, &token, "tasks/cancel", json!({"taskId": created.task.task_id}), true).await;
    assert_eq!(again["error"]["code"], -32602, "a terminal task cannot be cancelled: {again}");
    let run: Value = app.get(&format!("/api/v1/agent-runs/{id}"), &token).send().await.unwrap().json().await.unwrap();
    assert_eq!((run["completion_status"].as_str(), run["budget"]["steps_used"].as_u64()), (Some("cancelled"), Some(0)));
    let events = app.events(&token, &id).await;
    assert_contiguous(&events);
    assert_eq!(kinds(&events), ["run_started", "run_cancelled"]);
}

on_both_backends!(
    a_slow_turn_completes_as_an_mcp_task,
    a_client_without_the_extension_is_answered_synchronously,
    tasks_cancel_cancels_the_run_of_a_running_task,
);
