//! `POST /mcp` (and the same front at `/mcp/device-check`) through the router with
//! `tower::ServiceExt::oneshot` (no socket): every tool result, in every run state, against
//! the outputSchema it publishes, and what both fronts share (a stalled body, `Accept`
//! media ranges, the shape caches and direct path). Transport decisions, the envelope
//! preflight, authentication and the tools over real services are in `mcp_http_transport`.

use std::sync::Arc;

use axum::body::Body;
use helix_core::executor::scripted::Step;
use http::{Request, StatusCode};
use serde_json::{Value, json};

mod support;

use support::mcp::{App, FULL, READ_ONLY, Reply};

/// A solver artifact with one research_library evidence item, plus `extra` fields.
fn artifact(extra: Value) -> helix_core::domain::turn::TurnArtifact {
    let mut a = json!({
        "solver_status": "succeeded",
        "summary": "found a passage",
        "satisfied_evidence_families": ["research_library_evidence"],
        "evidence": [{"ref": "evidence:t:0", "family": "research_library_evidence",
            "source": "research-library://doc0.md#p0", "content_sha256": "00".repeat(32), "excerpt": "passage"}],
    });
    for (k, v) in extra.as_object().unwrap() {
        a[k] = v.clone();
    }
    serde_json::from_value(a).unwrap()
}

/// Checks MCP results against the outputSchema each tool publishes, with a real JSON
/// Schema validator (the `jsonschema` crate), and records what was covered.
struct Published {
    validators: std::collections::HashMap<String, jsonschema::Validator>,
    seen: std::collections::BTreeSet<String>,
}

impl Published {
    fn new(tools: &[Value]) -> Self {
        let validators = tools
            .iter()
            .map(|t| {
                let name = t["name"].as_str().unwrap().to_owned();
                (name, jsonschema::validator_for(&t["outputSchema"]).expect("a valid JSON Schema"))
            })
            .collect();
        Published { validators, seen: Default::default() }
    }

    /// The structuredContent of `result`, checked: valid against the tool's schema, equal
    /// to the text block, and carrying the four false flags (on every event too).
    fn check(&mut self, tool: &str, result: &Value) -> Value {
        let sc = result["structuredContent"].clone();
        let errors: Vec<String> = self.validators[tool].iter_errors(&sc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{tool} result violates its published outputSchema: {errors:?}\n{sc}");
        let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, sc, "{tool}: text block and structuredContent differ");
        let mut objects = vec![&sc];
        objects.extend(sc["events"].as_array().into_iter().flatten());
        for o in objects {
            for flag in ["answer_authority", "assistant_answer", "terminal_eligible", "raw_content_included"] {
                assert_eq!(o[flag], false, "{tool}: {flag} in {o}");
            }
        }
        let state = if result["isError"] == true {
            format!("error:{}", sc["error"]["code"].as_str().unwrap())
        } else if let Some(action) = sc["recommended_next_action"].as_str() {
            format!("{}/{}", sc["completion_status"].as_str().unwrap(), action)
        } else {
            "ok".into()
        };
        self.seen.insert(format!("{tool} {state}"));
        sc
    }

    /// Inspect, evidence and events of a run, each checked.
    async fn reads(&mut self, app: &App, token: &str, run_id: &str) -> Value {
        let run = app.call(token, "helix_run_inspect", json!({"run_id": run_id})).await;
        let run = self.check("helix_run_inspect", &run);
        let bundle = app.call(token, "helix_run_fetch_evidence", json!({"run_id": run_id})).await;
        self.check("helix_run_fetch_evidence", &bundle);
        let page = app.call(token, "helix_run_list_events", json!({"run_id": run_id, "limit": 200})).await;
        self.check("helix_run_list_events", &page);
        run
    }
}

/// Items 9 and 10 of issue 7: in every run state (a live turn included) and for error
/// results, each tool's structuredContent validates against the outputSchema it
/// publishes and carries the four false flags.
#[tokio::test]
async fn every_tool_result_in_every_run_state_matches_its_published_output_schema() {
    let (app, script) = App::scripted();
    let app = Arc::new(app);
    let token = app.token("alice", FULL).await;
    let tools = app.tools(&token).await;
    let mut p = Published::new(&tools);
    let start = |key: &str, request: Value| json!({"idempotency_key": key, "request": request});
    let research = |extra: Value| {
        let mut r = json!({"objective": "Measure the Casimir force.", "database_scope": ["research_library"]});
        for (k, v) in extra.as_object().unwrap() {
            r[k] = v.clone();
        }
        r
    };
    let cont = |run: &Value, key: &str, request: Value| {
        let mut request = request;
        request["expected_version"] = run["version"].clone();
        json!({"run_id": run["run_id"], "idempotency_key": key, "request": request})
    };

    // waiting / needs_more_evidence, then needs_input.
    let run = app.call(&token, "helix_run_start", start("st-start-0001", research(json!({})))).await;
    let run = p.check("helix_run_start", &run);
    let id = run["run_id"].as_str().unwrap().to_owned();
    assert_eq!(p.reads(&app, &token, &id).await["lifecycle_status"], "waiting");
    script
        .push(Step::Artifact(artifact(json!({"pending_questions": [{"question_id": "q1", "prompt": "Which year?"}]}))));
    let asked = app.call(&token, "helix_run_continue", cont(&run, "st-cont-0001", json!({"instruction": "go"}))).await;
    let asked = p.check("helix_run_continue", &asked);
    assert_eq!(asked["completion_status"], "needs_input");
    p.reads(&app, &token, &id).await;

    // During a live turn: running / pending / wait.
    script.push(Step::Delay(
        std::time::Duration::from_millis(600),
        Box::new(Step::Artifact(artifact(
            json!({"contradictions": [{"id": "c1", "claim": "x", "evidence_refs": []}]}),
        ))),
    ));
    let answer = cont(&asked, "st-cont-0002", json!({"answers": [{"question_id": "q1", "value": 1997}]}));
    let turn = tokio::spawn({
        let (app, token) = (app.clone(), token.clone());
        async move { app.call(&token, "helix_run_continue", answer).await }
    });
    let mut live = None;
    for _ in 0..100 {
        let run = app.call(&token, "helix_run_inspect", json!({"run_id": id})).await;
        if run["structuredContent"]["recommended_next_action"] == "wait" {
            live = Some(run);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let live = p.check("helix_run_inspect", &live.expect("an inspect during the turn"));
    assert_eq!(
        (live["lifecycle_status"].as_str(), live["completion_status"].as_str()),
        (Some("running"), Some("pending"))
    );
    p.reads(&app, &token, &id).await;
    let conflicted = p.check("helix_run_continue", &turn.await.unwrap());
    assert_eq!(conflicted["completion_status"], "conflict_detected");
    p.reads(&app, &token, &id).await;

    // blocked (a failed turn), then completed with verified terminal authority.
    script.push(Step::Fail(helix_core::domain::turn::TurnFailure::ExecutorUnavailable));
    let blocked = app
        .call(&token, "helix_run_continue", cont(&conflicted, "st-cont-0003", json!({"instruction": "again"})))
        .await;
    let blocked = p.check("helix_run_continue", &blocked);
    assert_eq!(blocked["completion_status"], "blocked");
    p.reads(&app, &token, &id).await;

    let run = app.call(&token, "helix_run_start", start("st-start-0002", research(json!({})))).await;
    let run = p.check("helix_run_start", &run);
    script.push(Step::Signed {
        artifact: artifact(json!({})),
        text: "About 0.3 nN at 1 micrometre.".into(),
        refs: vec!["evidence:t:0".into()],
    });
    let done = app.call(&token, "helix_run_continue", cont(&run, "st-cont-0004", json!({"instruction": "go"}))).await;
    let done = p.check("helix_run_continue", &done);
    assert_eq!(
        (done["completion_status"].as_str(), done["terminal_authority_status"].as_str()),
        (Some("completed"), Some("authorized"))
    );
    p.reads(&app, &token, done["run_id"].as_str().unwrap()).await;

    // failed (the solver failed), budget_exhausted, cancelled.
    let run = app.call(&token, "helix_run_start", start("st-start-0003", research(json!({})))).await;
    let run = p.check("helix_run_start", &run);
    script.push(Step::Artifact(artifact(json!({"solver_status": "failed"}))));
    let failed = app.call(&token, "helix_run_continue", cont(&run, "st-cont-0005", json!({"instruction": "go"}))).await;
    assert_eq!(p.check("helix_run_continue", &failed)["completion_status"], "failed");
    p.reads(&app, &token, run["run_id"].as_str().unwrap()).await;

    let run = app
        .call(&token, "helix_run_start", start("st-start-0004", research(json!({"budget": {"max_steps": 1}}))))
        .await;
    let run = p.check("helix_run_start", &run);
    script.push(Step::Artifact(artifact(json!({"satisfied_evidence_families": []}))));
    let spent = app.call(&token, "helix_run_continue", cont(&run, "st-cont-0006", json!({"instruction": "go"}))).await;
    assert_eq!(p.check("helix_run_continue", &spent)["completion_status"], "budget_exhausted");
    p.reads(&app, &token, run["run_id"].as_str().unwrap()).await;

    let run = app.call(&token, "helix_run_start", start("st-start-0005", research(json!({})))).await;
    let run = p.check("helix_run_start", &run);
    let cancel =
        json!({"run_id": run["run_id"], "idempotency_key": "st-cancel-001", "request": {"expected_version": 1}});
    let cancelled = app.call(&token, "helix_run_cancel", cancel.clone()).await;
    assert_eq!(p.check("helix_run_cancel", &cancelled)["completion_status"], "cancelled");
    let replayed = app.call(&token, "helix_run_cancel", cancel).await;
    assert_eq!(replayed["_meta"]["helix/idempotency_replayed"], true);
    p.check("helix_run_cancel", &replayed);
    p.reads(&app, &token, run["run_id"].as_str().unwrap()).await;

    // Error results of every tool.
    let missing = json!({"run_id": "run_00000000000000000000"});
    for tool in ["helix_run_inspect", "helix_run_fetch_evidence", "helix_run_list_events"] {
        let r = app.call(&token, tool, missing.clone()).await;
        p.check(tool, &r);
    }
    let r = app.call(&token, "helix_run_list_events", json!({"run_id": id, "limit": 500})).await;
    p.check("helix_run_list_events", &r);
    let r = app.call(&token, "helix_run_continue", cont(&run, "st-cont-0007", json!({"instruction": "go"}))).await;
    p.check("helix_run_continue", &r);
    let r = app
        .call(
            &token,
            "helix_run_continue",
            cont(&json!({"run_id": id, "version": 1}), "st-cont-0008", json!({"instruction": "go"})),
        )
        .await;
    p.check("helix_run_continue", &r);
    let r = app
        .call(
            &token,
            "helix_run_cancel",
            json!({"run_id": run["run_id"], "idempotency_key": "st-cancel-002", "request": {"expected_version": 9}}),
        )
        .await;
    p.check("helix_run_cancel", &r);
    let r =
        app.call(&token, "helix_run_start", start("st-start-0001", research(json!({"constraints": ["other"]})))).await;
    p.check("helix_run_start", &r);
    let reader = app.token("bob", READ_ONLY).await;
    let r = app.call(&reader, "helix_run_start", start("st-start-0006", research(json!({})))).await;
    p.check("helix_run_start", &r);

    let seen: Vec<&str> = p.seen.iter().map(String::as_str).collect();
    for want in [
        "helix_run_start needs_more_evidence/continue",
        "helix_run_inspect needs_more_evidence/continue",
        "helix_run_continue needs_input/answer_questions",
        "helix_run_inspect pending/wait",
        "helix_run_continue conflict_detected/continue",
        "helix_run_continue blocked/continue",
        "helix_run_continue completed/stop",
        "helix_run_continue failed/stop",
        "helix_run_continue budget_exhausted/stop",
        "helix_run_cancel cancelled/stop",
        "helix_run_list_events ok",
        "helix_run_fetch_evidence ok",
        "helix_run_inspect error:not_found",
        "helix_run_fetch_evidence error:not_found",
        "helix_run_list_events error:not_found",
        "helix_run_list_events error:invalid_request",
        "helix_run_continue error:run_not_continuable",
        "helix_run_continue error:version_conflict",
        "helix_run_cancel error:run_not_continuable",
        "helix_run_start error:idempotency_conflict",
        "helix_run_start error:insufficient_scope",
    ] {
        assert!(seen.iter().any(|s| s.starts_with(want)), "not covered: {want}; seen {seen:#?}");
    }
}

/// Both fronts of the one MCP front type.
const FRONTS: [&str; 2] = ["/mcp", "/mcp/device-check"];

/// A body that stops arriving (the server's body-read deadline passed) is `408` on both
/// fronts, as on every REST route; the Device Check server once answered it `413`.
#[tokio::test]
async fn a_stalled_body_is_a_request_timeout_on_both_fronts() {
    let app = App::new();
    for path in FRONTS {
        let chunks: Vec<Result<bytes::Bytes, helix_core::http::server::BodyTimedOut>> =
            vec![Ok(bytes::Bytes::from_static(br#"{"jsonrpc":"#)), Err(helix_core::http::server::BodyTimedOut)];
        let req = Request::post(path)
            .header("host", "127.0.0.1:9000")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Body::from_stream(futures::stream::iter(chunks)))
            .unwrap();
        let reply = app.send(req).await;
        assert_eq!(reply.status, StatusCode::REQUEST_TIMEOUT, "{path}: {}", reply.body);
        assert_eq!(reply.body["error"]["code"], "request_timeout", "{path}");
    }
}

/// `Accept` is read as a list of media ranges on both fronts: one that admits JSON is
/// served as the SDK wants it, anything else gets the SDK's own answer. (The Device Check
/// server once matched substrings: `application/jsonx` passed, `application/*` did not.)
#[tokio::test]
async fn both_fronts_read_accept_as_media_ranges() {
    let app = App::new();
    let token = app.token("alice", &["helix.rooms.read"]).await;
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).to_string();
    let v = ("mcp-protocol-version", "2025-11-25");
    for (accept, served) in [
        ("application/json", true),
        ("application/*", true),
        ("*/*", true),
        ("text/html, Application/JSON;q=0.5", true),
        ("text/event-stream", false),
        ("application/jsonx", false),
        ("text/plain", false),
        ("", false),
    ] {
        let headers = [v, ("accept", accept)];
        let mut replies = vec![];
        for path in FRONTS {
            replies.push(app.post_to(path, Some(&token), list.clone(), &headers).await);
        }
        for (path, reply) in FRONTS.iter().zip(&replies) {
            assert_eq!(reply.status == StatusCode::OK, served, "{path} with Accept {accept:?}: {}", reply.body);
        }
        assert_eq!(replies[0].status, replies[1].status, "Accept {accept:?}: the fronts disagree");
    }
}

/// The Device Check front has the same shape caches and direct path as `/mcp`: repeated
/// `tools/list` and `tools/call` requests answer what its SDK answered the first time.
#[tokio::test]
async fn the_device_check_front_answers_repeated_shapes_as_its_sdk_did() {
    let app = App::new();
    let token = app.token("alice", &["helix.rooms.read"]).await;
    let dc = "/mcp/device-check";
    let v = [("mcp-protocol-version", "2025-11-25")];
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let listed: Vec<Reply> =
        futures::future::join_all((0..3).map(|_| app.post_to(dc, Some(&token), list.clone(), &v))).await;
    let tools = listed[0].body["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let rows: Vec<&str> = helix_core::mcp::catalog::DEVICE_CHECK.rows.iter().map(|t| t.name).collect();
    assert_eq!(names, rows);
    assert_eq!(tools[0]["securitySchemes"], json!([{"type": "oauth2", "scopes": ["helix.rooms.read"]}]));
    assert_eq!(tools[0]["_meta"]["securitySchemes"], tools[0]["securitySchemes"]);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": rows[0], "arguments": {}}})
    .to_string();
    let mut called = vec![];
    for _ in 0..3 {
        called.push(app.post_to(dc, Some(&token), call.clone(), &v).await);
    }
    assert_eq!(called[0].body["result"]["structuredContent"]["schema"], "helix.environment_device_check.v1");
    for (i, reply) in listed.iter().enumerate().skip(1) {
        assert_eq!((reply.status, &reply.body), (listed[0].status, &listed[0].body), "tools/list #{i}");
    }
    // The report's clock reading is the one value that moves between calls.
    let timeless = |reply: &Reply| {
        let mut body = reply.body.clone();
        let text = body["result"]["content"][0]["text"].as_str().unwrap();
        let mut text: Value = serde_json::from_str(text).unwrap();
        assert_eq!(text, body["result"]["structuredContent"], "the text copy is the structured content");
        text.as_object_mut().unwrap().remove("checked_at");
        body["result"]["content"][0]["text"] = text;
        body["result"]["structuredContent"].as_object_mut().unwrap().remove("checked_at");
        (reply.status, body)
    };
    for (i, reply) in called.iter().enumerate().skip(1) {
        assert_eq!(timeless(reply), timeless(&called[0]), "tools/call #{i}");
    }
}
