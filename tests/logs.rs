//! The log, on its own test binary: a tracing subscriber set for one test must not
//! share its process with tests that run without one (tracing caches callsite interest
//! process-wide).

use helix_integration_tests::support::runs::{completing_step, research_run};
use helix_integration_tests::*;

#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Captures this thread's log lines (the tests' runtime is single-threaded) until the guard drops.
fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || sink.clone()).with_ansi(false).finish();
    (captured, tracing::subscriber::set_default(subscriber))
}

#[tokio::test]
async fn access_logs_carry_status_and_code_but_never_credentials() {
    let (captured, _guard) = capture();
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let id = run["run_id"].as_str().unwrap();
    app.get(&format!("/api/v1/agent-runs/{id}"), &token)
        .header("X-Request-Id", "sk-live-not-a-request-id")
        .send()
        .await
        .unwrap();
    app.get("/api/v1/agent-runs/run_missing0001", "not-a-valid-token-value").send().await.unwrap();
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("code=\"invalid_token\"") || logs.contains("code=invalid_token"), "{logs}");
    assert!(logs.contains("status=201"), "{logs}");
    for secret in [token.as_str(), "not-a-valid-token-value", "sk-live-not-a-request-id", SECRET] {
        assert!(!logs.contains(secret), "a credential reached the log");
    }
}

/// Issue 7 item 8, in process: the subscriber `init_tracing` installs, at `RUST_LOG=trace`
/// (rmcp named explicitly), over real HTTP and the real rmcp transport: no tool argument,
/// result, idempotency key or token reaches the log.
#[tokio::test]
async fn the_installed_subscriber_at_trace_drops_mcp_arguments_results_and_keys() {
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = helix_core::wiring::log_subscriber("trace,rmcp=trace", false, move || sink.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "helix_run_start",
        "arguments": {"idempotency_key": "trace-probe-key-0001",
            "request": {"objective": "Casimir probe ibex-marmot", "database_scope": ["research_library"]}}}});
    let res = app
        .post("/mcp", &token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: serde_json::Value = res.json().await.unwrap();
    let run_id = body["result"]["structuredContent"]["run_id"].as_str().unwrap().to_owned();
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("request_id") && logs.contains("latency_ms"), "helix's own lines are written: {logs}");
    for secret in [token.as_str(), "trace-probe-key-0001", "ibex-marmot", "structuredContent", run_id.as_str()] {
        assert!(!logs.contains(secret), "the log carries {secret:?}");
    }
}

#[tokio::test]
async fn the_per_turn_log_line_carries_its_request_id() {
    let (captured, _guard) = capture();
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let id = run["run_id"].as_str().unwrap();
    app.script(completing_step(1));
    let res = app
        .post(&format!("/api/v1/agent-runs/{id}/continue"), &token)
        .header("Idempotency-Key", "turn-log-key-01")
        .header("X-Request-Id", "trace-turn-4242")
        .json(&serde_json::json!({ "expected_version": 1, "instruction": "Find the measured force." }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let turn = logs.lines().find(|l| l.contains(" turn") && l.contains(id)).unwrap_or_else(|| panic!("{logs}"));
    assert!(turn.contains("trace-turn-4242"), "{turn}");
}

#[tokio::test]
async fn an_mcp_turn_log_line_carries_its_request_id_too() {
    let (captured, _guard) = capture();
    let app = TestApp::spawn().await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let id = run["run_id"].as_str().unwrap();
    app.script(completing_step(1));
    let call = serde_json::json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": { "name": "helix_run_continue", "arguments": {
            "run_id": id, "idempotency_key": "mcp-turn-log-01",
            "request": { "expected_version": 1, "instruction": "Find the measured force.", "answers": [] } } }
    });
    let res = app
        .post("/mcp", &token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25")
        .header("X-Request-Id", "trace-mcp-turn-77")
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let turn = logs.lines().find(|l| l.contains(" turn") && l.contains(id)).unwrap_or_else(|| panic!("{logs}"));
    assert!(turn.contains("trace-mcp-turn-77"), "{turn}");
}
