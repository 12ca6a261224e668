//! The one credential rule on every lane, over real HTTP on both store backends: a chat
//! snapshot carrying `name: value` credentials is stored redacted (`snapshot_redacted`),
//! an observation summary carrying one is refused at ingress and never reaches a run's
//! outputs or the chat, executor output carrying one is redacted before it is stored,
//! REST refuses a credential-shaped run objective as MCP does, MCP refuses one in a tool
//! call's `_meta` as in its arguments, and a `400` never quotes a caller's question id.

use std::sync::Arc;

use helix_core::executor::local::LocalExecutor;
use helix_core::executor::scripted::Step;
use helix_integration_tests::support::runs::research_run;
use helix_integration_tests::support::sources::{ALL, batch, manifest};
use helix_integration_tests::*;
use serde_json::{Value, json};

/// The secrets of the `name: value` forms below; none may survive anywhere.
const SECRETS: [&str; 5] = ["hunter2-chat", "Xq7-json-pass", "tok3n-api-77", "cl1ent-s3cret", "zw0-bearer-value"];

fn name_value_forms() -> Vec<String> {
    vec![
        format!("my password: {}", SECRETS[0]),
        format!(r#"{{"password": "{}"}}"#, SECRETS[1]),
        format!("api token: {}", SECRETS[2]),
        format!("client_secret = {}", SECRETS[3]),
        format!("Bearer\u{200b}{}", SECRETS[4]),
    ]
}

fn assert_no_secret(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{s} reached {what}: {text}");
    }
}

async fn browser_post(app: &TestApp, cookie: &str, path: &str, body: Value) -> (u16, Value) {
    read(app.browser(reqwest::Method::POST, path, cookie).json(&body).send().await.unwrap()).await
}

async fn a_chat_snapshot_with_name_value_credentials_is_stored_redacted(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let cookie = app.session("alice").await;
    let snapshot: Vec<Value> =
        name_value_forms().into_iter().map(|content| json!({ "role": "user", "content": content })).collect();
    let (status, obs) = browser_post(
        &app,
        &cookie,
        "/api/agi/agent-run-observer/bindings",
        json!({ "chat_id": "chat-name-value", "snapshot": snapshot }),
    )
    .await;
    assert_eq!(status, 201, "{obs}");
    assert_eq!(obs["snapshot_redacted"], true, "{obs}");
    let obs_ref = obs["observer_binding_ref"].as_str().unwrap();
    let item = app
        .state
        .services
        .store
        .get(&helix_core::service::records::rooms::snapshot_key(obs_ref))
        .await
        .unwrap()
        .expect("the snapshot is stored");
    let stored = item.s("body").unwrap();
    assert_no_secret("the stored snapshot", stored);
    assert!(stored.contains("my password: [redacted]"), "the name stays, the value goes: {stored}");
    assert!(stored.contains("api token: [redacted]"), "{stored}");
}

async fn an_observation_summary_with_a_credential_never_reaches_a_run_or_the_chat(backend: Backend) {
    let config = [("HELIX_AGENT_DATABASE_SCOPES", "research_library,bound_room_evidence")];
    let local = Arc::new(LocalExecutor::from_documents(vec![], signer()));
    let app = TestApp::spawn_with_executor(backend, &config, local).await;
    let token = app.token_for("alice", "tenant-a", ALL).await;
    app.developer("alice").await;
    let cookie = app.session("alice").await;
    let room_id = app.room(&token, "Lab").await;
    let (_, bearer) = app.claimed_source(&token, &cookie, &room_id, "overworld").await;
    assert_eq!(app.ingress(&bearer, "manifest", &manifest("overworld", 1)).await.0, 200);

    // The producer's summary carries `api token: …`: refused, as a room name would be.
    let mut leaky = batch("overworld", 1, &["tick-0001", "tick-0002"], 0);
    leaky["observations"][1]["summary"] = json!(format!("Steve joined; api token: {}", SECRETS[2]));
    let (status, v) = app.ingress(&bearer, "observations", &leaky).await;
    assert_eq!((status, code(&v)), (400, "credential_rejected"), "{v}");
    assert_no_secret("the ingress error", &v.to_string());
    let (status, v) = app.ingress(&bearer, "observations", &batch("overworld", 1, &["tick-0003"], 0)).await;
    assert_eq!(status, 202, "{v}");

    // A bound run reads the room and completes; its chat shows the terminal message.
    let run_id = app
        .started_and_bound(&token, &room_id, "What is happening in the shared world?", &["bound_room_evidence"])
        .await;
    let (status, obs) =
        browser_post(&app, &cookie, "/api/agi/agent-run-observer/bindings", json!({ "chat_id": "c1" })).await;
    assert_eq!(status, 201, "{obs}");
    let (status, v) = read(
        app.post("/api/v1/rooms/chat-bindings/claim", &token)
            .json(&json!({ "claim_handle": obs["claim_handle"], "run_id": run_id }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    let done = app.turn_with(&token, &run_id, "Report what the room shows now.").await;
    assert_eq!(done["completion_status"], "completed", "{done}");

    let inspect = app.get(&format!("/api/v1/agent-runs/{run_id}"), &token).send().await.unwrap().text().await.unwrap();
    assert_no_secret("REST inspect", &inspect);
    let evidence =
        app.get(&format!("/api/v1/agent-runs/{run_id}/evidence"), &token).send().await.unwrap().text().await.unwrap();
    assert_no_secret("the evidence bundle", &evidence);
    let (status, mcp) = app
        .rpc("/mcp", &token, "tools/call", json!({ "name": "helix_run_inspect", "arguments": { "run_id": run_id } }))
        .await;
    assert_eq!(status, 200, "{mcp}");
    assert_no_secret("MCP inspect", &mcp.to_string());
    let path = format!("/api/agi/agent-run-observer/bindings/{}", obs["observer_binding_ref"].as_str().unwrap());
    let (_, view) = read(app.browser(reqwest::Method::GET, &path, &cookie).send().await.unwrap()).await;
    assert!(view["terminal_message"]["content"].is_string(), "{view}");
    assert_no_secret("the chat's terminal message", &view.to_string());
}

async fn executor_output_carrying_credentials_is_redacted_before_it_is_stored(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let run_id = run["run_id"].as_str().unwrap();
    let mut artifact = helix_integration_tests::support::runs::evidence_artifact(1);
    let forms = name_value_forms();
    artifact.summary = format!("found it; {}", forms[0]);
    artifact.evidence[0].excerpt = forms[1].clone();
    artifact.supported_claims = vec![forms[2].clone(), forms[3].clone(), forms[4].clone()];
    let refs = vec![artifact.evidence[0].reference.clone()];
    app.script(Step::Signed { artifact, text: "The measured force agrees with theory.".into(), refs });
    let done = app.turn_with(&token, run_id, "go").await;
    assert_eq!(done["completion_status"], "completed", "{done}");
    assert_no_secret("the continue answer", &done.to_string());
    assert!(done["latest_result"]["summary"].as_str().unwrap().contains("my password: [redacted]"), "{done}");
    let evidence =
        app.get(&format!("/api/v1/agent-runs/{run_id}/evidence"), &token).send().await.unwrap().text().await.unwrap();
    assert_no_secret("the evidence bundle", &evidence);
    let (_, mcp) = app
        .rpc("/mcp", &token, "tools/call", json!({ "name": "helix_run_inspect", "arguments": { "run_id": run_id } }))
        .await;
    assert_no_secret("MCP inspect", &mcp.to_string());

    // A terminal candidate whose signed text carries a credential cannot be changed under
    // its signature: it is rejected, and its text is stored nowhere.
    let run = app.started(&token, research_run()).await;
    let run_id = run["run_id"].as_str().unwrap();
    let artifact = helix_integration_tests::support::runs::evidence_artifact(1);
    let refs = vec![artifact.evidence[0].reference.clone()];
    app.script(Step::Signed { artifact, text: forms[2].clone(), refs });
    let v = app.turn_with(&token, run_id, "go").await;
    assert_eq!(v["terminal_authority_status"], "rejected", "{v}");
    assert_no_secret("a rejected terminal candidate", &v.to_string());
}

async fn rest_refuses_a_credential_shaped_run_objective_as_mcp_does(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    for (i, form) in name_value_forms().into_iter().enumerate() {
        let objective = format!("Summarize the Casimir force. {form}");
        let res = app.start(&token, &format!("start-cred-{i:04}"), json!({ "objective": objective })).await;
        let (status, v) = read(res).await;
        assert_eq!((status, code(&v)), (400, "credential_rejected"), "REST: {form:?} {v}");
        assert_no_secret("the REST error", &v.to_string());
        let arguments = json!({ "idempotency_key": format!("mcp-cred-{i:04}"), "request": { "objective": objective } });
        let (_, m) =
            app.rpc("/mcp", &token, "tools/call", json!({ "name": "helix_run_start", "arguments": arguments })).await;
        assert_eq!(m["error"]["code"], -32600, "MCP: {form:?} {m}");
        assert_no_secret("the MCP error", &m.to_string());
    }
    let (status, v) = read(app.start(&token, "start-plain-0001", research_run()).await).await;
    assert_eq!(status, 201, "plain objectives still start: {v}");
}

/// A tool call whose `_meta` carries a credential gets the static refusal (`id: null`),
/// nothing of it is echoed and nothing runs; an ordinary `_meta` still passes.
async fn a_credential_in_a_tool_calls_meta_is_refused_like_one_in_its_arguments(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let start = |key: &str, meta: Value| {
        json!({ "name": "helix_run_start", "_meta": meta,
            "arguments": { "idempotency_key": key, "request": research_run() } })
    };
    for (i, form) in name_value_forms().into_iter().enumerate() {
        for meta in [json!({ "note": form }), json!({ "vendor.example/context": { "auth": [form] } })] {
            let (status, m) = app.rpc("/mcp", &token, "tools/call", start(&format!("mcp-meta-{i:04}"), meta)).await;
            assert_eq!(status, 400, "{form:?} {m}");
            assert_eq!(m["id"], Value::Null, "{m}");
            assert_eq!(m["error"]["code"], -32600, "{m}");
            assert_eq!(m["error"]["message"], "Invalid Request: _meta must not carry a credential");
            assert_no_secret("the MCP error", &m.to_string());
        }
    }
    let (status, v) = read(app.get("/api/v1/agent-runs", &token).send().await.unwrap()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(0), "nothing ran: {v}");
    let ordinary = json!({ "progressToken": 7,
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" });
    let (status, m) = app.rpc("/mcp", &token, "tools/call", start("mcp-meta-plain", ordinary)).await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(m["result"]["isError"], false, "{m}");
}

async fn a_400_never_quotes_a_callers_question_id(backend: Backend) {
    let app = TestApp::spawn_with(backend, &[]).await;
    let token = app.token().await;
    let run = app.started(&token, research_run()).await;
    let run_id = run["run_id"].as_str().unwrap();
    for (i, question_id) in
        ["password=hunter2-question", "api token: tok3n-question", "q-unknown-4242"].iter().enumerate()
    {
        let body =
            json!({ "expected_version": run["version"], "answers": [{ "question_id": question_id, "value": "yes" }] });
        let (status, v) = read(app.continue_run(&token, run_id, &format!("cont-q-{i:04}"), body).await).await;
        assert_eq!(status, 400, "{v}");
        let text = v.to_string();
        for part in ["hunter2", "tok3n", "unknown-4242"] {
            assert!(!text.contains(part), "{part} quoted back: {text}");
        }
        assert!(text.contains("question_id"), "the field is named: {text}");
    }
}

on_both_backends!(
    a_chat_snapshot_with_name_value_credentials_is_stored_redacted,
    an_observation_summary_with_a_credential_never_reaches_a_run_or_the_chat,
    executor_output_carrying_credentials_is_redacted_before_it_is_stored,
    rest_refuses_a_credential_shaped_run_objective_as_mcp_does,
    a_credential_in_a_tool_calls_meta_is_refused_like_one_in_its_arguments,
    a_400_never_quotes_a_callers_question_id,
);
