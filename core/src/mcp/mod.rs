//! The MCP facade (being written).

use crate::http::AppState;

pub fn router(_state: AppState) -> axum::Router {
    axum::Router::new()
}
