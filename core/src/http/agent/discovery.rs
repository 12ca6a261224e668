//! RFC 9728 protected-resource metadata at the contract's well-known paths.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::domain::scopes::{ROOMS_READ, all_oauth_scopes};
use crate::http::{AppState, Group, pipeline};

pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

pub fn router(state: AppState) -> Router {
    Router::new()
        .route(WELL_KNOWN, get(full))
        .route(&format!("{WELL_KNOWN}/api/v1/agent-runs"), get(full))
        .route(&format!("{WELL_KNOWN}/api/v1/rooms"), get(full))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Discovery), pipeline))
        .with_state(state.clone())
        .merge(mcp_router(state))
}

/// The metadata of the two MCP servers alone (`/mcp`, `/mcp/device-check`): part of
/// [`router`], and mounted by the MCP function itself so that its function URL, when it is
/// its own public origin, serves the document its challenge names.
pub fn mcp_router(state: AppState) -> Router {
    Router::new()
        .route(&format!("{WELL_KNOWN}/mcp"), get(full))
        .route(&format!("{WELL_KNOWN}/mcp/device-check"), get(device_check))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Discovery), pipeline))
        .with_state(state)
}

/// The metadata document: one canonical resource shared by REST and MCP, which is the
/// configured audience (config refuses to start when it disagrees with the public origin).
pub fn metadata(state: &AppState, scopes: Vec<&str>) -> Value {
    let config = &state.services.config;
    json!({
        "resource": config.resource,
        "authorization_servers": config.oauth.authorization_servers,
        "scopes_supported": scopes,
        "bearer_methods_supported": ["header"],
        "resource_name": "Helix Agent API",
        "resource_documentation": format!("{}/agent-access", config.public_base_url),
    })
}

async fn full(State(state): State<AppState>) -> Json<Value> {
    Json(metadata(&state, all_oauth_scopes()))
}

async fn device_check(State(state): State<AppState>) -> Json<Value> {
    Json(metadata(&state, vec![ROOMS_READ]))
}
