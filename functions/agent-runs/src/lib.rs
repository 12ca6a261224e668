//! The `agent-runs` function: its routes and, standalone, the 404 fallback; every rule is in helix-core.

pub use helix_core::http::AppState;

/// The routes alone, for composition with other functions (the local server).
pub fn routes(state: AppState) -> axum::Router {
    helix_core::http::agent::agent_runs::router(state)
}

/// The function's whole router: its routes plus the enveloped 404 fallback.
pub fn router(state: AppState) -> axum::Router {
    routes(state.clone()).fallback_service(helix_core::http::fallback_router(state))
}
