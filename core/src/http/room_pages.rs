//! The room pages people use: `/chat` (local chats, attach an agent run, the progress lane
//! and the one terminal message) and its small script. Served by the account function
//! behind the same pipeline; the only pages with a script, so their policy admits exactly
//! `script-src 'self'` and same-origin `connect-src` (no inline script, no framing).

use askama::Template;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::HeaderMap;

use super::pages::{Asset, Csp, Page, Referrer, page_headers, session_of};
use super::{AppState, Group, pipeline};
use crate::domain::event::EventKind;
use crate::error::ApiError;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/chat", get(chat_page))
        .route("/chat/static/chat.js", get(chat_script))
        .merge(super::room_admin::router())
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Account), pipeline))
        .layer(page_headers(&state, Csp::SameOriginScript, Referrer::SameOrigin))
        .with_state(state)
}

#[derive(Template)]
#[template(path = "chat.html")]
struct ChatPage {
    signed_in: bool,
    guest: bool,
    labels: Vec<(String, &'static str)>,
}

async fn chat_page(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let session = session_of(&state, &headers).await?;
    let guest = session.as_ref().is_some_and(|s| s.policy.guest);
    Ok(Page(ChatPage { signed_in: session.is_some(), guest, labels: EventKind::labels() }).into_response())
}

const CHAT_SCRIPT: &str = include_str!("../../templates/chat.js");

async fn chat_script() -> Asset {
    Asset::script(CHAT_SCRIPT)
}
