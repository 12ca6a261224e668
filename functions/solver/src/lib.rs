//! The `solver` function: the reference Helix Ask turn service; every rule is in helix-core.

pub use helix_core::solver::TurnService;

/// The function's whole router (`POST /v1/turns`, `GET /v1/terminal-authority-keys`).
pub fn router(service: std::sync::Arc<TurnService>) -> axum::Router {
    helix_core::solver::router(service)
}
