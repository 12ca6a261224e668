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
    let app = adapt(router).layer(axum::middleware::from_fn(flush_after));
    crate::cold_start::mark("router");
    crate::cold_start::report();
    lambda_http::run(app).await
}

async fn flush_after(req: Request, next: axum::middleware::Next) -> axum::response::Response {
    let res = next.run(req).await;
    if crate::telemetry::enabled() {
        // `force_flush` blocks until the exporter answers (at most `OTEL_EXPORTER_OTLP_TIMEOUT`).
        let _ = tokio::task::spawn_blocking(crate::telemetry::flush).await;
    }
    res
}
