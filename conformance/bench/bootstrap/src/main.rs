//! The floor of the cold-start benchmark (`scripts/bench-cold-start`): `lambda_http::run`
//! of a one-route axum router, built with the functions' release profile and allocator.
//! It answers the discovery event's path with a small fixed JSON document and does
//! nothing else at start: what the Lambda runtime, tokio and the binary's loading cost.

/// helix's allocator (helix-core sets it for every helix binary).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

async fn metadata() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "resource": "https://api.example.com/mcp", "bearer_methods_supported": ["header"] }))
}

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    let router = axum::Router::new().route("/.well-known/oauth-protected-resource/mcp", axum::routing::get(metadata));
    lambda_http::run(router).await
}
