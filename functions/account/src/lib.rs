//! The `account` function: the cookie lane (sign-in, session, agent bindings) and the
//! pages people use; every rule is in helix-core.

pub use helix_core::http::AppState;

/// The routes alone, for composition with other functions (the local server).
pub fn routes(state: AppState) -> axum::Router {
    // The observer lane is part of the cookie lane (same function, same session).
    // The observer lane, the room pages, the run console and the source credential lane are part of the
    // cookie lane (same function, same session).
    helix_core::http::browser::account::router(state.clone())
        .merge(helix_core::http::browser::observer::router(state.clone()))
        .merge(helix_core::http::browser::room_pages::router(state.clone()))
        .merge(helix_core::http::browser::run_console::router(state.clone()))
        .merge(helix_core::http::connector::sources::browser_router(state.clone()))
        .merge(helix_core::http::connector::embodiment::browser_router(state))
}

/// The function's whole router: its routes plus the enveloped 404 fallback.
pub fn router(state: AppState) -> axum::Router {
    routes(state.clone()).fallback_service(helix_core::http::fallback_router(state))
}
