//! The Lambda transport: runs a router under `lambda_http`, passing the invocation's
//! remaining time (clamped to the limit of the front that delivered the event), the
//! caller's source IP and the front door (`Transport::ApiGateway`) to the pipeline as
//! typed extensions, behind the same panic guard as `helix serve`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::Request;
pub use lambda_http::Error;
use lambda_http::request::RequestContext;

use crate::http::admission::Transport;
use crate::http::{ClientIp, Invocation};
use crate::service::Services;
use crate::service::runs::{WorkerEvent, WorkerOutcome};

#[cfg(feature = "lambda-worker")]
mod worker;
#[cfg(feature = "lambda-worker")]
pub use worker::SelfInvoke;

/// An API Gateway HTTP API cuts every integration at 30 s, and that cannot be raised.
pub const HTTP_API_LIMIT: Duration = Duration::from_secs(30);
/// A REST API's default integration timeout.
pub const REST_API_LIMIT: Duration = Duration::from_secs(29);

/// A Lambda function URL's host: `<url-id>.lambda-url.<region>.on.aws`. AWS writes the
/// request context, so a caller cannot make an API Gateway event look like one.
pub fn is_function_url_host(domain: &str) -> bool {
    let d = domain.to_ascii_lowercase();
    d.ends_with(".on.aws") && d.split('.').nth(1) == Some("lambda-url")
}

/// The response limit of the front that delivered the event: the gateway's for API
/// Gateway; none of its own for a function URL (payload 2.0 too, but capped only by the
/// function's `Timeout`, which the invocation's remaining time already carries). So a
/// function serving both fronts never lets a turn that came through the gateway outlive
/// the gateway's response, whatever its `HELIX_GATEWAY_TIMEOUT_MS`.
fn front_limit(ctx: Option<&RequestContext>) -> Option<Duration> {
    match ctx? {
        RequestContext::ApiGatewayV2(c) if c.domain_name.as_deref().is_some_and(is_function_url_host) => None,
        RequestContext::ApiGatewayV2(_) => Some(HTTP_API_LIMIT),
        RequestContext::ApiGatewayV1(_) => Some(REST_API_LIMIT),
        _ => None,
    }
}

fn annotate(mut req: Request) -> Request {
    let ip = match req.extensions().get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(ctx)) => Some(ctx.http.source_ip.clone()),
        Some(RequestContext::ApiGatewayV1(ctx)) => Some(ctx.identity.source_ip.clone()),
        _ => None,
    };
    let front = front_limit(req.extensions().get::<RequestContext>());
    if ip.is_some() {
        // API Gateway and function URLs (payload v2) accept HTTPS only.
        req.extensions_mut().insert(Transport::ApiGateway);
    }
    if let Some(ip) = ip.flatten() {
        req.extensions_mut().insert(ClientIp(ip));
    }
    let lambda = req.extensions().get::<lambda_http::Context>().map(|ctx| {
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        Duration::from_millis(ctx.deadline.saturating_sub(now_ms))
    });
    let remaining = match (lambda, front) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if remaining.is_some() {
        req.extensions_mut().insert(Invocation { remaining });
    }
    req
}

/// Adds the Lambda annotations to a router (also used by tests that feed `events/`).
pub fn adapt(router: Router) -> Router {
    crate::http::server::guard(router.layer(axum::middleware::map_request(|req: Request| async move { annotate(req) })))
}

/// Serves the router as this Lambda function until the runtime stops it. When traces
/// are exported, each invocation's spans are flushed before its response is handed to
/// the runtime: after that the environment may be frozen until the next invocation.
pub async fn run(router: Router) -> Result<(), lambda_http::Error> {
    lambda_http::run(served(router)).await
}

/// The router as an invocation runs it ([`adapt`], spans flushed after each), the last
/// step of a cold start: its phases are reported here, just before the first poll.
fn served(router: Router) -> Router {
    let app = adapt(router).layer(axum::middleware::from_fn(flush_after));
    crate::cold_start::mark("router");
    crate::cold_start::report();
    app
}

/// Serves the router of a function that takes turns: an asynchronous turn is handed to a
/// worker invocation of this same function ([`SelfInvoke`]), and an invocation whose
/// payload is a worker event runs that turn ([`handle_event`]).
#[cfg(feature = "lambda-worker")]
pub async fn run_with_worker(router: Router, services: Services) -> Result<(), lambda_http::Error> {
    if let Some(worker) = SelfInvoke::from_env() {
        services.runs.set_worker(std::sync::Arc::new(worker));
    }
    let app = served(router);
    lambda_http::lambda_runtime::run(lambda_http::service_fn(move |event| {
        let (app, services) = (app.clone(), services.clone());
        async move { handle_event(app, &services, event).await }
    }))
    .await
}

/// One invocation of a function that takes turns: a worker event (`{"helix_turn_worker":
/// ...}`, which only an invocation authorised by IAM can deliver) runs its turn within the
/// invocation's remaining time; any other payload is an API Gateway or function URL event,
/// decoded by lambda_http and served by `adapted` (a router through [`adapt`]).
pub async fn handle_event(
    adapted: Router,
    services: &Services,
    event: lambda_http::LambdaEvent<serde_json::Value>,
) -> Result<serde_json::Value, lambda_http::Error> {
    use tower::Service;
    let lambda_http::LambdaEvent { payload, context } = event;
    let Some(worker_event) = WorkerEvent::from_document(&payload) else {
        let request: lambda_http::request::LambdaRequest = serde_json::from_value(payload)?;
        let mut adapter = lambda_http::Adapter::from(adapted);
        let response = adapter.call(lambda_http::LambdaEvent::new(request, context)).await?;
        return Ok(serde_json::to_value(response)?);
    };
    let worker_event = match worker_event {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(error = %e, "a malformed worker event ran nothing");
            return Ok(WorkerOutcome::Refused("malformed").to_document());
        }
    };
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    let remaining = Duration::from_millis(context.deadline.saturating_sub(now_ms));
    let services = services.clone();
    // Its own task, as a request's turn: a panic ends the task, not the runtime.
    let outcome = tokio::spawn(async move { services.run_turn_worker(&worker_event, Some(remaining)).await })
        .await
        .map_err(|e| lambda_http::Error::from(e.to_string()))?;
    if crate::telemetry::enabled() {
        let _ = tokio::task::spawn_blocking(crate::telemetry::flush).await;
    }
    // A store error before the take-over fails the invocation, and Lambda retries it.
    Ok(outcome?.to_document())
}

async fn flush_after(req: Request, next: axum::middleware::Next) -> axum::response::Response {
    let res = next.run(req).await;
    if crate::telemetry::enabled() {
        // `force_flush` blocks until the exporter answers (at most `OTEL_EXPORTER_OTLP_TIMEOUT`).
        let _ = tokio::task::spawn_blocking(crate::telemetry::flush).await;
    }
    res
}
