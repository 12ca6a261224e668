//! The `/mcp` function: its two routes (`/mcp`, `/mcp/device-check`) and, standalone, their
//! protected-resource metadata and the 404 fallback (MCP rules are in helix-core).

pub use helix_core::http::AppState;

/// The route alone, for composition with other functions (the local server).
pub fn routes(state: AppState) -> axum::Router {
    helix_core::mcp::router(state.clone()).merge(helix_core::mcp::device_check_router(state))
}

/// The function's whole router: its routes, the metadata of its two servers (the document
/// its 401 challenge names, so that its function URL can be a public origin of its own:
/// docs/deploy.md, "Long turns") and the enveloped 404 fallback.
pub fn router(state: AppState) -> axum::Router {
    routes(state.clone())
        .merge(helix_core::http::agent::discovery::mcp_router(state.clone()))
        .fallback_service(helix_core::http::fallback_router(state))
}
