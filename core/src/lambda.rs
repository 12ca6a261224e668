//! The Lambda transport: runs a router under `lambda_http`, passing the invocation's
//! remaining time, the caller's source IP and the front door (`Transport::ApiGateway`)
//! to the pipeline as typed extensions, behind the same panic guard as `helix serve`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::Request;
pub use lambda_http::Error;
use lambda_http::request::RequestContext;

use crate::http::admission::Transport;
use crate::http::{ClientIp, Invocation};

fn annotate(mut req: Request) -> Request {
    let ip = match req.extensions().get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(ctx)) => Some(ctx.http.source_ip.clone()),
        Some(RequestContext::ApiGatewayV1(ctx)) => Some(ctx.identity.source_ip.clone()),
        _ => None,
    };
    if ip.is_some() {
        // API Gateway and function URLs (payload v2) accept HTTPS only.
        req.extensions_mut().insert(Transport::ApiGateway);
    }
    if let Some(ip) = ip.flatten() {
        req.extensions_mut().insert(ClientIp(ip));
    }
    if let Some(ctx) = req.extensions().get::<lambda_http::Context>() {
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let remaining = Duration::from_millis(ctx.deadline.saturating_sub(now_ms));
        req.extensions_mut().insert(Invocation { remaining: Some(remaining) });
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
    lambda_http::run(adapt(router).layer(axum::middleware::from_fn(flush_after))).await
}

async fn flush_after(req: Request, next: axum::middleware::Next) -> axum::response::Response {
    let res = next.run(req).await;
    if crate::telemetry::enabled() {
        // `force_flush` blocks until the exporter answers (at most `OTEL_EXPORTER_OTLP_TIMEOUT`).
        let _ = tokio::task::spawn_blocking(crate::telemetry::flush).await;
    }
    res
}
