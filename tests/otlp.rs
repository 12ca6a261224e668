//! Traces over real HTTP, on their own test binary: the process environment names the
//! collector, and the subscriber is global. A test OTLP/HTTP receiver (protobuf, as the
//! exporter sends by default) collects what the server exports; a fake Helix Ask serves
//! the turns (through the scripted executor) and records the headers it was sent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::routing::post;
use helix_core::executor::http::{HttpExecutor, TURN_ARTIFACT_SCHEMA, TurnResponse};
use helix_core::executor::scripted::ScriptedExecutor;
use helix_core::executor::{TurnExecutor, TurnRequest};
use helix_integration_tests::support::runs::{completing_step, research_run};
use helix_integration_tests::*;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";
const TRACESTATE: &str = "vendor=opaque-state";
const ASK_BEARER: &str = "ask-bearer-ocelot-0001";
const OBJECTIVE: &str = "Summarize the measured Casimir force.";
const INSTRUCTION: &str = "Find the force, pangolin-quartz.";

type Recorded = Arc<Mutex<Vec<(HeaderMap, Bytes)>>>;

/// Serves `POST path` on `listener`, recording each request's headers and body; the
/// answer is `answer`'s.
async fn record<F, Fut>(listener: std::net::TcpListener, path: &str, answer: F) -> Recorded
where
    F: Fn(Bytes) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = axum::response::Response> + Send,
{
    let seen = Recorded::default();
    let app = axum::Router::new()
        .route(
            path,
            post(move |State(seen): State<Recorded>, headers: HeaderMap, body: Bytes| {
                let answer = answer.clone();
                async move {
                    seen.lock().unwrap().push((headers, body.clone()));
                    answer(body).await
                }
            }),
        )
        .with_state(seen.clone());
    listener.set_nonblocking(true).unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    seen
}

/// A Helix Ask that answers each turn request with the next scripted step.
async fn fake_ask(scripted: Arc<Mutex<Option<Arc<ScriptedExecutor>>>>) -> (String, Recorded) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/turn", listener.local_addr().unwrap());
    let seen = record(listener, "/turn", move |body: Bytes| {
        let scripted = scripted.clone();
        async move {
            let request: TurnRequest = serde_json::from_slice(&body).unwrap();
            let executor = scripted.lock().unwrap().clone().unwrap();
            let artifact = executor.execute(request, Default::default()).await.unwrap();
            let response = TurnResponse { schema: TURN_ARTIFACT_SCHEMA.into(), artifact };
            axum::Json(response).into_response()
        }
    })
    .await;
    (url, seen)
}

fn spans(exports: &[(HeaderMap, Bytes)]) -> Vec<Span> {
    let mut out = vec![];
    for (_, body) in exports {
        let request = ExportTraceServiceRequest::decode(body.as_ref()).expect("an OTLP protobuf export");
        for resource in request.resource_spans {
            for scope in resource.scope_spans {
                out.extend(scope.spans);
            }
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

async fn continue_with_traceparent(app: &TestApp, token: &str, run_id: &str, key: &str) -> serde_json::Value {
    let res = app
        .post(&format!("/api/v1/agent-runs/{run_id}/continue"), token)
        .header("Idempotency-Key", key)
        .header("traceparent", format!("00-{TRACE_ID}-{PARENT_ID}-01"))
        .header("tracestate", TRACESTATE)
        .json(&json!({ "expected_version": 1, "instruction": INSTRUCTION }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

#[test]
fn a_continue_is_one_trace_under_the_callers_traceparent_and_no_span_holds_a_secret() {
    // Export off (no endpoint): no provider, nothing propagated, nothing sent.
    // SAFETY: the only test of this binary, before any thread of its own is started.
    unsafe { std::env::remove_var("OTEL_EXPORTER_OTLP_ENDPOINT") };
    unsafe { std::env::remove_var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") };
    assert!(helix_core::telemetry::provider_from_env("helix-test").is_none());
    let collector = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let collector_url = format!("http://{}", collector.local_addr().unwrap());

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let exports = record(collector, "/v1/traces", |_| async { axum::http::StatusCode::OK.into_response() }).await;
        let scripted = Arc::new(Mutex::new(None));
        let (ask_url, asked) = fake_ask(scripted.clone()).await;
        let executor =
            HttpExecutor::new(ask_url).with_bearer(Some(helix_core::config::Secret::new(ASK_BEARER.to_owned())));
        let app = TestApp::spawn_with_executor(Backend::Embedded, &[], Arc::new(executor)).await;
        *scripted.lock().unwrap() = Some(app.executor.clone());
        let token = app.token().await;
        let untraced = app.started(&token, research_run()).await["run_id"].as_str().unwrap().to_owned();
        let traced = app.started(&token, research_run()).await["run_id"].as_str().unwrap().to_owned();

        app.script(completing_step(2));
        let run = continue_with_traceparent(&app, &token, &untraced, "untraced-continue-key-0001").await;
        assert_eq!(run["terminal_authority_status"], "authorized", "{run}");
        assert!(!asked.lock().unwrap()[0].0.contains_key("traceparent"), "nothing is propagated while export is off");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(exports.lock().unwrap().is_empty(), "no export attempt without an endpoint");

        // Export on: the SDK reads the endpoint from the environment.
        // SAFETY: no other thread reads the environment now (the runtime is this thread).
        unsafe { std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", &collector_url) };
        let provider = helix_core::telemetry::provider_from_env("helix-test").expect("export requested");
        let subscriber = helix_core::wiring::subscriber("info", false, std::io::sink, Some(&provider));
        tracing::subscriber::set_global_default(subscriber).unwrap();
        helix_core::telemetry::install(provider);

        app.script(completing_step(2));
        let idempotency_key = "traced-continue-key-0001";
        let run = continue_with_traceparent(&app, &token, &traced, idempotency_key).await;
        assert_eq!(run["terminal_authority_status"], "authorized", "{run}");
        tokio::task::spawn_blocking(helix_core::telemetry::flush).await.unwrap();

        let exported = exports.lock().unwrap().clone();
        let spans = spans(&exported);
        let trace_id = hex::decode(TRACE_ID).unwrap();
        assert!(!spans.is_empty(), "the continue was exported");
        assert!(spans.iter().all(|s| s.trace_id == trace_id), "one trace, the caller's: {spans:#?}");
        let named = |name: &str| spans.iter().filter(|s| s.name == name).collect::<Vec<_>>();
        // The request's span is named by its method (the OpenTelemetry HTTP convention).
        let server = opentelemetry_proto::tonic::trace::v1::span::SpanKind::Server as i32;
        let requests: Vec<&Span> = spans.iter().filter(|s| s.kind == server).collect();
        let [request] = requests[..] else { panic!("one request span: {spans:#?}") };
        assert_eq!(request.name, "POST");
        assert_eq!(request.parent_span_id, hex::decode(PARENT_ID).unwrap(), "the caller's span is the parent");
        assert_eq!(request.trace_state, TRACESTATE);
        let [turn] = named("turn")[..] else { panic!("one turn span") };
        let [executor] = named("executor")[..] else { panic!("one executor span") };
        assert_eq!(turn.parent_span_id, request.span_id, "the turn runs in the request");
        assert_eq!(executor.parent_span_id, turn.span_id, "the executor call is part of the turn");
        let store: Vec<&Span> = spans.iter().filter(|s| s.name.starts_with("redb.")).collect();
        assert!(store.iter().any(|s| s.parent_span_id == request.span_id), "store reads before the turn");
        assert!(store.iter().any(|s| s.parent_span_id == turn.span_id), "store writes of the turn");
        // Helix Ask continues the same trace, under the executor call.
        let (headers, _) = asked.lock().unwrap()[1].clone();
        let sent = headers["traceparent"].to_str().unwrap().to_owned();
        assert_eq!(sent, format!("00-{TRACE_ID}-{}-01", hex::encode(&executor.span_id)));
        assert_eq!(headers["tracestate"], TRACESTATE);

        for (_, body) in &exported {
            for secret in [token.as_str(), idempotency_key, OBJECTIVE, INSTRUCTION, ASK_BEARER, SECRET] {
                assert!(!contains(body, secret), "an exported span carries {secret:?}");
            }
        }
    });
}
