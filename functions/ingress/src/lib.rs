//! The `ingress` function: the room-source producer ingress (source bearer only, its own
//! body and rate limits) and, standalone, the 404 fallback; every rule is in helix-core.

pub use helix_core::http::AppState;

/// The routes alone, for composition with other functions (the local server).
pub fn routes(state: AppState) -> axum::Router {
    // The action connector routes share the ingress function (short polls, no held
    // connections) with their own route group and limits.
    helix_core::http::connector::sources::ingress_router(state.clone())
        .merge(helix_core::http::connector::embodiment::connector_router(state))
}

/// The function's whole router: its routes plus the enveloped 404 fallback.
pub fn router(state: AppState) -> axum::Router {
    routes(state.clone()).fallback_service(helix_core::http::fallback_router(state))
}
