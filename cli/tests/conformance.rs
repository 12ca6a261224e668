//! `helix conformance` as an operator runs it: the real binary against a real `helix serve`,
//! with fake OpenAI and Gemini providers (small axum servers) over real HTTP.

use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

mod support;

use support::{BIN, Server, free_port};

const OPENAI_KEY: &str = "sk-test-openai-4f1c9a7e";
const GEMINI_KEY: &str = "gm-test-gemini-8b2d6e0f";

/// Every variable the probe reads, removed from the child so the developer's own
/// environment never reaches a test.
const PROBE_ENV: [&str; 9] = [
    "CASIMIRBOT_MCP_PUBLIC_BASE_URL",
    "CASIMIRBOT_MCP_CONFORMANCE_ALLOW_LOOPBACK_HTTP",
    "CASIMIRBOT_MCP_ACCESS_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_MODEL",
    "CASIMIRBOT_MCP_CONFORMANCE_OPENAI_BASE_URL",
    "GEMINI_API_KEY",
    "GEMINI_MODEL",
    "CASIMIRBOT_MCP_CONFORMANCE_GEMINI_BASE_URL",
];

/// `helix serve` on a free port, with a dev token for it.
struct Helix {
    _server: Server,
    _dir: tempfile::TempDir,
    base: String,
    token: String,
}

async fn helix() -> Helix {
    let dir = tempfile::tempdir().unwrap();
    let token = support::dev_token(dir.path(), "probe-user", "probe-tenant");
    let port = free_port();
    let server = support::serve(dir.path(), port, &[]).await;
    Helix { _server: server, _dir: dir, base: format!("http://127.0.0.1:{port}"), token }
}

struct Probe {
    ok: bool,
    stdout: String,
    report: Value,
}

impl Probe {
    fn check(&self, name: &str) -> &Value {
        let checks = self.report["checks"].as_array().unwrap();
        checks.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no {name} check: {}", self.stdout))
    }

    fn status(&self, name: &str) -> &str {
        self.check(name)["status"].as_str().unwrap()
    }
}

async fn probe(env: &[(&str, &str)]) -> Probe {
    let mut cmd = Command::new(BIN);
    cmd.arg("conformance");
    for name in PROBE_ENV {
        cmd.env_remove(name);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    // Blocking, off the runtime's thread: the fake providers keep answering meanwhile.
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(report["schema"], "casimirbot.mcp_provider_conformance.v1");
    Probe { ok: out.status.success(), stdout, report }
}

fn loopback(h: &Helix) -> Vec<(&str, String)> {
    vec![
        ("CASIMIRBOT_MCP_PUBLIC_BASE_URL", h.base.clone()),
        ("CASIMIRBOT_MCP_CONFORMANCE_ALLOW_LOOPBACK_HTTP", "1".into()),
    ]
}

/// The probe's settings with an access token and a Gemini key whose provider is `gemini`.
fn with_gemini<'a>(h: &'a Helix, gemini: &Fake) -> Vec<(&'a str, String)> {
    let mut env = loopback(h);
    env.extend([
        ("CASIMIRBOT_MCP_ACCESS_TOKEN", h.token.clone()),
        ("GEMINI_API_KEY", GEMINI_KEY.into()),
        ("CASIMIRBOT_MCP_CONFORMANCE_GEMINI_BASE_URL", gemini.base()),
    ]);
    env
}

/// `helix_run_start` over MCP under the idempotency key the fake Gemini model proposes.
async fn start_under_the_models_key(h: &Helix) -> Value {
    let call = json!({ "name": "helix_run_start", "arguments": proposed_args("fake-gemini-run-0001", 1) });
    mcp(&format!("{}/mcp", h.base), &h.token, "tools/call", call).await
}

fn refs<'a>(env: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// One request a fake provider received.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    headers: HeaderMap,
    body: Value,
}

type BoxFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>>;
type Behaviour = fn(Arc<Fake>, Seen) -> BoxFuture;

/// A fake provider: records every request and answers with its behaviour.
struct Fake {
    seen: Mutex<Vec<Seen>>,
    /// The MCP `tools/call`s the fake itself made against the target (the OpenAI fake).
    mcp_calls: Mutex<Vec<Value>>,
    behaviour: Behaviour,
    base: Mutex<String>,
}

async fn fake(behaviour: Behaviour) -> Arc<Fake> {
    let fake =
        Arc::new(Fake { seen: Mutex::default(), mcp_calls: Mutex::default(), behaviour, base: Mutex::default() });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    *fake.base.lock().unwrap() = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new().fallback(record).with_state(fake.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    fake
}

impl Fake {
    fn base(&self) -> String {
        self.base.lock().unwrap().clone()
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn record(
    State(fake): State<Arc<Fake>>,
    _method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> Response {
    let seen = Seen { path: uri.path().to_owned(), headers, body: serde_json::from_str(&body).unwrap_or(Value::Null) };
    fake.seen.lock().unwrap().push(seen.clone());
    (fake.behaviour)(fake.clone(), seen).await
}

/// What the fake "model" proposes for helix_run_start.
fn proposed_args(key: &str, max_steps: u64) -> Value {
    json!({
        "idempotency_key": key,
        "request": { "objective": "Provider conformance probe.", "budget": { "max_steps": max_steps, "expires_in_seconds": 60 } },
    })
}

/// A JSON-RPC call to the target's MCP endpoint, as the real provider makes it.
async fn mcp(server_url: &str, token: &str, method: &str, params: Value) -> Value {
    reqwest::Client::new()
        .post(server_url)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// OpenAI Responses with a remote MCP tool and `require_approval: always`: the first
/// request lists the tools and asks for approval; the approval makes the one call.
fn openai_behaviour(fake: Arc<Fake>, seen: Seen) -> BoxFuture {
    Box::pin(async move {
        assert_eq!(seen.path, "/v1/responses");
        let tool = &seen.body["tools"][0];
        let (url, token) = (tool["server_url"].as_str().unwrap(), tool["authorization"].as_str().unwrap());
        if seen.body["previous_response_id"].is_null() {
            let listed = mcp(url, token, "tools/list", json!({})).await;
            let tools: Vec<Value> = listed["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| tool["allowed_tools"].as_array().unwrap().contains(&t["name"]))
                .map(|t| json!({ "name": t["name"], "input_schema": t["inputSchema"] }))
                .collect();
            let args = proposed_args("fake-openai-run-0001", 1).to_string();
            return axum::Json(json!({ "id": "resp_1", "output": [
                { "type": "mcp_list_tools", "id": "mcpl_1", "server_label": "casimirbot", "tools": tools, "error": null },
                { "type": "mcp_approval_request", "id": "mcpr_1", "server_label": "casimirbot",
                  "name": "helix_run_start", "arguments": args },
            ] }))
            .into_response();
        }
        assert_eq!(seen.body["input"][0]["approval_request_id"], "mcpr_1");
        let args = proposed_args("fake-openai-run-0001", 1);
        let called = mcp(url, token, "tools/call", json!({ "name": "helix_run_start", "arguments": args })).await;
        fake.mcp_calls.lock().unwrap().push(called.clone());
        let output = called["result"]["content"][0]["text"].as_str().unwrap().to_owned();
        axum::Json(json!({ "id": "resp_2", "output": [
            { "type": "mcp_call", "id": "mcp_1", "server_label": "casimirbot", "name": "helix_run_start",
              "arguments": args.to_string(), "output": output, "error": null },
        ] }))
        .into_response()
    })
}

fn gemini_call(max_steps: u64) -> Response {
    axum::Json(json!({ "candidates": [{ "content": { "role": "model", "parts": [
        { "functionCall": { "name": "helix_run_start", "args": proposed_args("fake-gemini-run-0001", max_steps) } },
    ] } }] }))
    .into_response()
}

fn gemini_behaviour(_: Arc<Fake>, _: Seen) -> BoxFuture {
    Box::pin(async { gemini_call(1) })
}

fn gemini_over_budget(_: Arc<Fake>, _: Seen) -> BoxFuture {
    Box::pin(async { gemini_call(12) })
}

/// A provider error that quotes the caller's key back (as some do).
fn gemini_echoes_the_key(_: Arc<Fake>, seen: Seen) -> BoxFuture {
    let key = seen.headers.get("x-goog-api-key").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    Box::pin(async move { (StatusCode::UNAUTHORIZED, format!("API key {key} is not valid")).into_response() })
}

fn never(_: Arc<Fake>, _: Seen) -> BoxFuture {
    Box::pin(async { StatusCode::IM_A_TEAPOT.into_response() })
}

/// The run as the owner reads it over REST.
async fn run(h: &Helix, run_id: &str) -> Value {
    let res = reqwest::Client::new()
        .get(format!("{}/api/v1/agent-runs/{run_id}", h.base))
        .bearer_auth(&h.token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

fn assert_never_continued(run: &Value) {
    assert_eq!(run["version"], 1, "never continued: {run}");
    assert_eq!(run["budget"]["max_steps"], 1);
    assert_eq!(run["budget"]["steps_used"], 0);
    assert_eq!(run["latest_result"], Value::Null);
}

fn assert_no_secret(p: &Probe, secrets: &[&str]) {
    for secret in secrets {
        assert!(!p.stdout.contains(secret), "a credential reached the report: {}", p.stdout);
    }
}

#[tokio::test]
async fn without_credentials_the_public_checks_pass_and_the_rest_is_skipped() {
    let h = helix().await;
    let p = probe(&refs(&loopback(&h))).await;
    assert!(p.ok, "{}", p.stdout);
    for name in ["target", "agent_access_manifest", "protected_resource_metadata", "mcp_unauthenticated_challenge"] {
        assert_eq!(p.status(name), "pass", "{name}: {}", p.stdout);
    }
    for name in ["mcp_initialize", "mcp_tools_list", "openai_responses_invocation", "gemini_function_call_invocation"] {
        assert_eq!(p.status(name), "skipped", "{name}");
    }
    assert_eq!(p.report["passed"], true);
    assert_eq!(p.report["summary"], json!({ "pass": 4, "fail": 0, "skipped": 4 }));
}

#[tokio::test]
async fn an_access_token_adds_initialize_and_tools_list_and_never_reaches_the_report() {
    let h = helix().await;
    let mut env = loopback(&h);
    env.push(("CASIMIRBOT_MCP_ACCESS_TOKEN", h.token.clone()));
    let p = probe(&refs(&env)).await;
    assert!(p.ok, "{}", p.stdout);
    assert_eq!((p.status("mcp_initialize"), p.status("mcp_tools_list")), ("pass", "pass"), "{}", p.stdout);
    assert_no_secret(&p, &[&h.token]);
}

#[tokio::test]
async fn a_wrong_token_fails_the_authenticated_checks_and_exits_non_zero() {
    let h = helix().await;
    let mut env = loopback(&h);
    env.push(("CASIMIRBOT_MCP_ACCESS_TOKEN", "not-a-valid-token-0123456789".into()));
    let p = probe(&refs(&env)).await;
    assert!(!p.ok);
    assert_eq!(p.status("mcp_initialize"), "fail");
    assert!(p.check("mcp_initialize")["reason"].as_str().unwrap().contains("401"), "{}", p.stdout);
    assert_no_secret(&p, &["not-a-valid-token-0123456789"]);
}

#[tokio::test]
async fn the_openai_invocation_offers_one_tool_and_creates_one_bounded_run() {
    let h = helix().await;
    let openai = fake(openai_behaviour).await;
    let mut env = loopback(&h);
    env.extend([
        ("CASIMIRBOT_MCP_ACCESS_TOKEN", h.token.clone()),
        ("OPENAI_API_KEY", OPENAI_KEY.into()),
        ("CASIMIRBOT_MCP_CONFORMANCE_OPENAI_BASE_URL", openai.base()),
    ]);
    let p = probe(&refs(&env)).await;
    assert!(p.ok, "{}", p.stdout);
    assert_eq!(p.status("openai_responses_invocation"), "pass");
    assert_eq!(p.status("gemini_function_call_invocation"), "skipped");

    let seen = openai.seen();
    assert_eq!(seen.len(), 2, "one proposal and one approval");
    for s in &seen {
        assert_eq!(s.headers["authorization"], format!("Bearer {OPENAI_KEY}"));
        let tools = s.body["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 1, "one tool");
        assert_eq!(tools[0]["type"], "mcp");
        assert_eq!(tools[0]["server_url"], format!("{}/mcp", h.base));
        assert_eq!(tools[0]["authorization"], h.token.as_str());
        assert_eq!(tools[0]["allowed_tools"], json!(["helix_run_start"]));
        assert_eq!(tools[0]["require_approval"], "always");
    }
    assert_eq!(seen[1].body["input"][0]["approve"], true);
    assert_eq!(openai.mcp_calls.lock().unwrap().len(), 1, "exactly one tools/call");
    let run_id = p.check("openai_responses_invocation")["details"]["run_id"].as_str().unwrap().to_owned();
    assert_never_continued(&run(&h, &run_id).await);
    assert_no_secret(&p, &[&h.token, OPENAI_KEY]);
}

#[tokio::test]
async fn the_gemini_invocation_declares_one_function_and_the_probe_runs_its_one_call() {
    let h = helix().await;
    let gemini = fake(gemini_behaviour).await;
    let mut env = with_gemini(&h, &gemini);
    env.push(("GEMINI_MODEL", "gemini-test".into()));
    let p = probe(&refs(&env)).await;
    assert!(p.ok, "{}", p.stdout);
    assert_eq!(p.status("gemini_function_call_invocation"), "pass");

    let seen = gemini.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1beta/models/gemini-test:generateContent");
    assert_eq!(seen[0].headers["x-goog-api-key"], GEMINI_KEY);
    let declarations = seen[0].body["tools"][0]["functionDeclarations"].as_array().unwrap();
    assert_eq!(declarations.len(), 1);
    assert_eq!(declarations[0]["name"], "helix_run_start");
    let schema = &declarations[0]["parametersJsonSchema"];
    assert_eq!(schema["type"], "object");
    assert!(schema["properties"]["request"].is_object(), "{schema}");
    let run_id = p.check("gemini_function_call_invocation")["details"]["run_id"].as_str().unwrap().to_owned();
    let created = run(&h, &run_id).await;
    assert_never_continued(&created);

    // The model's key was used exactly once: replaying it over MCP answers the same run.
    let replay = start_under_the_models_key(&h).await;
    assert_eq!(replay["result"]["structuredContent"]["run_id"], run_id.as_str());
    assert_never_continued(&run(&h, &run_id).await);
    assert_no_secret(&p, &[&h.token, GEMINI_KEY]);
}

#[tokio::test]
async fn a_call_outside_the_one_step_budget_is_not_executed() {
    let h = helix().await;
    let gemini = fake(gemini_over_budget).await;
    let env = with_gemini(&h, &gemini);
    let p = probe(&refs(&env)).await;
    assert!(!p.ok);
    assert_eq!(p.status("gemini_function_call_invocation"), "fail");
    assert!(p.check("gemini_function_call_invocation")["reason"].as_str().unwrap().contains("not executed"));
    // No run holds the model's key: another request under it is a new run, not a conflict.
    let fresh = start_under_the_models_key(&h).await;
    assert_ne!(fresh["result"]["isError"], true, "{fresh}");
    assert_eq!(fresh["result"]["structuredContent"]["version"], 1, "{fresh}");
}

#[tokio::test]
async fn a_provider_error_quoting_a_key_is_redacted_from_the_whole_report() {
    let h = helix().await;
    let gemini = fake(gemini_echoes_the_key).await;
    let env = with_gemini(&h, &gemini);
    let p = probe(&refs(&env)).await;
    assert!(!p.ok);
    assert_eq!(p.check("gemini_function_call_invocation")["reason"], "[redacted]", "{}", p.stdout);
    assert_no_secret(&p, &[&h.token, GEMINI_KEY]);
}

#[tokio::test]
async fn plain_http_to_a_non_loopback_host_is_refused_without_a_request() {
    let listener = fake(never).await;
    let port = listener.base().rsplit(':').next().unwrap().to_owned();
    for target in ["http://example.com".to_owned(), format!("http://localhost:{port}")] {
        let p = probe(&[
            ("CASIMIRBOT_MCP_PUBLIC_BASE_URL", &target),
            ("CASIMIRBOT_MCP_CONFORMANCE_ALLOW_LOOPBACK_HTTP", "1"),
            ("CASIMIRBOT_MCP_ACCESS_TOKEN", "tok-never-sent-0123456789"),
        ])
        .await;
        assert!(!p.ok, "{target}");
        assert_eq!(p.report["checks"].as_array().unwrap().len(), 1, "{}", p.stdout);
        assert_eq!(p.status("target"), "fail");
        assert!(p.check("target")["reason"].as_str().unwrap().contains("non-loopback"), "{}", p.stdout);
        assert_no_secret(&p, &["tok-never-sent-0123456789"]);
    }
    assert!(listener.seen().is_empty(), "no request was sent");
}

#[tokio::test]
async fn plain_http_to_loopback_needs_the_opt_in() {
    let listener = fake(never).await;
    let p = probe(&[("CASIMIRBOT_MCP_PUBLIC_BASE_URL", &listener.base())]).await;
    assert!(!p.ok);
    assert_eq!(p.status("target"), "fail");
    assert!(p.check("target")["reason"].as_str().unwrap().contains("CASIMIRBOT_MCP_CONFORMANCE_ALLOW_LOOPBACK_HTTP=1"));
    assert!(listener.seen().is_empty(), "no request was sent");
}
