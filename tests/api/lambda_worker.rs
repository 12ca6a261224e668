//! The worker of an asynchronous turn on Lambda, through the handler the turn-taking
//! functions run (`helix_core::lambda::handle_event`): the API Gateway event carrying
//! `Prefer: respond-async` is answered 202 with the turn handed over as a worker event;
//! that event, delivered as the worker invocation, runs the turn to its finalize; a second
//! delivery (Lambda retries an `Event` invocation) runs no second turn; a late one after
//! the lease runs nothing. The hand-over itself (Lambda's Invoke API) is replaced by a
//! recorder here; `scripts/lambda-check` drives the real one under `cargo lambda watch`.

use std::sync::{Arc, Mutex};

use helix_core::service::runs::{TurnDispatch, WorkerEvent};
use helix_integration_tests::support::events::event_text;
use helix_integration_tests::support::runs::completing_step;
use helix_integration_tests::*;
use serde_json::Value;

const LAMBDA: &[(&str, &str)] = &[("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com")];

/// Keeps each worker event handed over, as Lambda's queue would.
#[derive(Default)]
struct Handed(Mutex<Vec<Value>>);

#[async_trait::async_trait]
impl TurnDispatch for Handed {
    async fn dispatch(&self, event: &WorkerEvent) -> Result<(), String> {
        self.0.lock().unwrap().push(event.to_document());
        Ok(())
    }
}

/// An Invoke that fails (throttled, or no permission).
struct Refusing;

#[async_trait::async_trait]
impl TurnDispatch for Refusing {
    async fn dispatch(&self, _: &WorkerEvent) -> Result<(), String> {
        Err("TooManyRequestsException".into())
    }
}

/// An Invoke that reaches the worker (which runs the turn) and still reports a failure,
/// as a timeout after Lambda queued the event would.
struct DeliveredThenFailed(helix_core::service::Services);

#[async_trait::async_trait]
impl TurnDispatch for DeliveredThenFailed {
    async fn dispatch(&self, event: &WorkerEvent) -> Result<(), String> {
        let ran = self.0.run_turn_worker(event, Some(std::time::Duration::from_secs(60))).await;
        assert!(matches!(ran, Ok(helix_core::service::runs::WorkerOutcome::Ran(200))), "{ran:?}");
        Err("operation timed out".into())
    }
}

/// One invocation of the function with `payload`, a minute before its deadline.
async fn invoke(app: &TestApp, payload: Value) -> Value {
    let mut context = lambda_http::Context::default();
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    context.deadline = now_ms + 60_000;
    let adapted = helix_core::lambda::adapt(compose(app.state.clone()));
    let event = lambda_http::LambdaEvent::new(payload, context);
    helix_core::lambda::handle_event(adapted, &app.state.services, event).await.unwrap()
}

/// An API Gateway event of events/ with the bearer and the run id: its status, headers and JSON body.
async fn invoke_http(app: &TestApp, file: &str, token: &str, run_id: Option<&str>) -> (u16, Value, Value) {
    let replace: Vec<(&str, &str)> = run_id.map(|id| ("RUN_ID_EXAMPLE", id)).into_iter().collect();
    let mut event: Value = serde_json::from_str(&event_text(file, &replace)).unwrap();
    event["headers"]["authorization"] = Value::from(format!("Bearer {token}"));
    let result = invoke(app, event).await;
    let body: Value = serde_json::from_str(result["body"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
    (result["statusCode"].as_u64().unwrap() as u16, result["headers"].clone(), body)
}

/// The worker event of events/turn-worker.json for this run, claim and caller.
fn worker_event(run_id: &str, handed: &Value) -> Value {
    let w = &handed["helix_turn_worker"];
    let claim = w["claim"].as_str().unwrap();
    let mut event: Value = serde_json::from_str(&event_text(
        "turn-worker.json",
        &[("RUN_ID_EXAMPLE", run_id), ("CLAIM_SHA256_EXAMPLE", claim)],
    ))
    .unwrap();
    event["helix_turn_worker"]["caller"] = w["caller"].clone();
    event
}

async fn inspect(app: &TestApp, token: &str, id: &str) -> Value {
    let (status, _, run) = invoke_http(app, "inspect.json", token, Some(id)).await;
    assert_eq!(status, 200, "{run}");
    run
}

/// A Lambda-mode app whose worker hand-overs are recorded, a token, and a started run whose
/// next turn is scripted to complete.
async fn started_with_worker(backend: Backend) -> (TestApp, Arc<Handed>, String, String) {
    let app = TestApp::spawn_with(backend, LAMBDA).await;
    let handed = Arc::new(Handed::default());
    assert!(app.state.services.runs.set_worker(handed.clone()));
    let token = app.token().await;
    let (status, _, run) = invoke_http(&app, "start.json", &token, None).await;
    assert_eq!(status, 201, "{run}");
    let id = run["run_id"].as_str().unwrap().to_owned();
    app.script(completing_step(2));
    (app, handed, token, id)
}

async fn an_asynchronous_turn_runs_in_its_worker_invocation_once(backend: Backend) {
    let (app, handed, token, id) = started_with_worker(backend).await;

    let (status, headers, accepted) = invoke_http(&app, "continue-async.json", &token, Some(&id)).await;
    assert_eq!(status, 202, "the turn is handed to a worker, not served in the request: {accepted}");
    assert_eq!(headers["preference-applied"], "respond-async");
    assert_eq!((accepted["version"].as_u64(), accepted["lifecycle_status"].as_str()), (Some(1), Some("running")));
    assert!(app.executor.seen.lock().unwrap().is_empty(), "no turn ran in the request");
    let events = handed.0.lock().unwrap().clone();
    assert_eq!(events.len(), 1, "one worker event handed over");
    let handed_event = &events[0];
    // The event is the emulated one of events/ (same fields), and carries no credential.
    assert_eq!(handed_event, &worker_event(&id, handed_event));
    assert!(!handed_event.to_string().contains(&token), "the bearer is never in the worker event");

    let outcome = invoke(&app, worker_event(&id, handed_event)).await;
    assert_eq!(outcome["helix_turn_worker"]["outcome"], "ran", "{outcome}");
    assert_eq!(outcome["helix_turn_worker"]["detail"], 200, "{outcome}");
    let run = inspect(&app, &token, &id).await;
    assert_eq!((run["version"].as_u64(), run["completion_status"].as_str()), (Some(2), Some("completed")), "{run}");
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1);

    // Lambda's retry of the same event: the claim is no longer there, nothing runs.
    let again = invoke(&app, worker_event(&id, handed_event)).await;
    assert_eq!(again["helix_turn_worker"]["outcome"], "refused", "{again}");
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1, "no second turn");
    assert_eq!(inspect(&app, &token, &id).await["version"], 2);

    // The key replays what the synchronous call would have answered.
    let (status, headers, replay) = invoke_http(&app, "continue-async.json", &token, Some(&id)).await;
    assert_eq!((status, replay["version"].as_u64()), (200, Some(2)), "{replay}");
    assert_eq!(headers["idempotency-replayed"], "true");
}

/// Two deliveries of one event at once: the take-over is one conditional write, so one
/// runs the turn and the other is refused.
async fn concurrent_deliveries_run_one_turn(backend: Backend) {
    let (app, handed, token, id) = started_with_worker(backend).await;
    let (status, _, _) = invoke_http(&app, "continue-async.json", &token, Some(&id)).await;
    assert_eq!(status, 202);
    let event = worker_event(&id, &handed.0.lock().unwrap()[0]);
    let (a, b) = tokio::join!(invoke(&app, event.clone()), invoke(&app, event));
    let mut outcomes = [a, b].map(|o| o["helix_turn_worker"]["outcome"].as_str().unwrap().to_owned());
    outcomes.sort();
    assert_eq!(outcomes, ["ran", "refused"]);
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1, "one turn");
}

/// A worker invocation that was lost: the lease ends the turn as before (the key answers
/// `outcome_unknown`), and the event delivered late runs nothing.
async fn a_lost_worker_invocation_is_left_to_the_lease(backend: Backend) {
    let (app, handed, token, id) = started_with_worker(backend).await;
    let (status, _, _) = invoke_http(&app, "continue-async.json", &token, Some(&id)).await;
    assert_eq!(status, 202);
    app.state.services.clock.advance(app.state.services.config.lease().as_secs() as i64 + 1);

    let (status, _, lost) = invoke_http(&app, "continue-async.json", &token, Some(&id)).await;
    assert_eq!((status, lost["error"]["code"].as_str()), (409, Some("outcome_unknown")), "{lost}");
    let event = worker_event(&id, &handed.0.lock().unwrap()[0]);
    let late = invoke(&app, event).await;
    assert_eq!(late["helix_turn_worker"]["outcome"], "refused", "{late}");
    assert!(app.executor.seen.lock().unwrap().is_empty(), "no turn ran");
    assert_eq!(inspect(&app, &token, &id).await["version"], 1, "the run is untouched");
}

/// An Invoke that fails leaves the turn to its request: served synchronously within the
/// request's limits, never a 202 for a turn nobody runs.
async fn a_failed_hand_over_serves_the_turn_in_its_request(backend: Backend) {
    let app = TestApp::spawn_with(backend, LAMBDA).await;
    app.state.services.runs.set_worker(Arc::new(Refusing));
    let token = app.token().await;
    let (_, _, run) = invoke_http(&app, "start.json", &token, None).await;
    let id = run["run_id"].as_str().unwrap().to_owned();
    app.script(completing_step(2));
    let (status, headers, body) = invoke_http(&app, "continue-async.json", &token, Some(&id)).await;
    assert_eq!((status, body["completion_status"].as_str()), (200, Some("completed")), "{body}");
    assert!(headers.get("preference-applied").is_none());
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1);
}

/// A hand-over reported failed after the worker got the event: the request takes its turn
/// back only if no worker took it, so the turn runs once and the answer is the `202`.
async fn a_hand_over_reported_failed_after_delivery_runs_one_turn(backend: Backend) {
    let app = TestApp::spawn_with(backend, LAMBDA).await;
    app.state.services.runs.set_worker(Arc::new(DeliveredThenFailed(app.state.services.clone())));
    let token = app.token().await;
    let (_, _, run) = invoke_http(&app, "start.json", &token, None).await;
    let id = run["run_id"].as_str().unwrap().to_owned();
    app.script(completing_step(2));
    let (status, _, body) = invoke_http(&app, "continue-async.json", &token, Some(&id)).await;
    assert_eq!(status, 202, "the worker has the turn: {body}");
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1, "one turn, in the worker");
    let run = inspect(&app, &token, &id).await;
    assert_eq!((run["version"].as_u64(), run["completion_status"].as_str()), (Some(2), Some("completed")), "{run}");
}

/// One 2026-07-28 MCP request through the HTTP API's `/mcp` event, declaring the tasks
/// extension: its JSON-RPC answer.
async fn invoke_mcp(app: &TestApp, token: &str, method: &str, mut params: Value) -> Value {
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "lambda-worker-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    });
    let mut event: Value = serde_json::from_str(&event_text("mcp-tools-list.json", &[])).unwrap();
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let headers = event["headers"].as_object_mut().unwrap();
    headers.remove("content-length");
    headers.insert("authorization".into(), Value::from(format!("Bearer {token}")));
    headers.insert("mcp-protocol-version".into(), Value::from("2026-07-28"));
    headers.insert("mcp-method".into(), Value::from(method));
    if let Some(name) = params["name"].as_str().or(params["taskId"].as_str()) {
        headers.insert("mcp-name".into(), Value::from(name));
    }
    event["body"] = Value::from(body);
    let result = invoke(app, event).await;
    assert_eq!(result["statusCode"], 200, "{result}");
    serde_json::from_str(result["body"].as_str().unwrap()).unwrap()
}

/// `helix_run_continue` as a task on Lambda: `CreateTaskResult` from the request
/// invocation, the turn in the worker invocation, `tasks/get` completed with the tool result.
async fn an_mcp_task_runs_in_its_worker_invocation(backend: Backend) {
    let (app, handed, token, id) = started_with_worker(backend).await;
    let call = serde_json::json!({"name": "helix_run_continue", "arguments": {"run_id": id, "idempotency_key": "lambda-task-0001",
        "request": {"expected_version": 1, "instruction": "Find the measured force."}}});
    let reply = invoke_mcp(&app, &token, "tools/call", call).await;
    let task = &reply["result"];
    assert_eq!((task["resultType"].as_str(), task["status"].as_str()), (Some("task"), Some("working")), "{reply}");
    assert!(app.executor.seen.lock().unwrap().is_empty(), "no turn ran in the request");
    let event = handed.0.lock().unwrap()[0].clone();
    assert_eq!(invoke(&app, event).await["helix_turn_worker"]["outcome"], "ran");
    let got = invoke_mcp(&app, &token, "tasks/get", serde_json::json!({"taskId": task["taskId"]})).await;
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert_eq!(got["result"]["result"]["structuredContent"]["completion_status"], "completed", "{got}");
    assert_eq!(app.executor.seen.lock().unwrap().len(), 1);
}

/// A malformed worker event, or one of another version, runs nothing.
#[tokio::test]
async fn a_malformed_worker_event_runs_nothing() {
    let app = TestApp::spawn_with(Backend::Embedded, LAMBDA).await;
    let mut event: Value = serde_json::from_str(&event_text("turn-worker.json", &[])).unwrap();
    event["helix_turn_worker"]["v"] = Value::from(2);
    assert_eq!(invoke(&app, event.clone()).await["helix_turn_worker"]["outcome"], "refused");
    event["helix_turn_worker"]["v"] = Value::from(1);
    event["helix_turn_worker"]["token"] = Value::from("anything");
    assert_eq!(invoke(&app, event).await["helix_turn_worker"]["outcome"], "refused");
    assert!(app.executor.seen.lock().unwrap().is_empty());
}

on_both_backends!(
    an_asynchronous_turn_runs_in_its_worker_invocation_once,
    concurrent_deliveries_run_one_turn,
    a_lost_worker_invocation_is_left_to_the_lease,
    a_failed_hand_over_serves_the_turn_in_its_request,
    an_mcp_task_runs_in_its_worker_invocation,
    a_hand_over_reported_failed_after_delivery_runs_one_turn,
);
