//! The room pages people use: `/chat` (local chats, attach an agent run, the progress lane
//! and the one terminal message) and its small script. Served by the account function
//! behind the same pipeline; the only pages with a script, so their policy admits exactly
//! `script-src 'self'` and same-origin `connect-src` (no inline script, no framing).

use askama::Template;
use axum::Router;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::domain::event::EventKind;
use crate::http::pages::sign_in_first::PageSession;
use crate::http::pages::{Asset, Csp, Page, Referrer, page_headers};
use crate::http::{AppState, Group, pipeline};

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/chat", get(chat_page))
        .route("/chat/static/chat.js", get(chat_script))
        .merge(super::room_admin::router())
        .merge(super::room_embodiment::router())
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Account), pipeline))
        .layer(page_headers(&state, Csp::SameOriginScript, Referrer::SameOrigin))
        .with_state(state)
}

#[derive(Template)]
#[template(path = "chat.html")]
struct ChatPage {
    guest: bool,
    labels: Vec<(String, &'static str)>,
}

async fn chat_page(PageSession(session): PageSession) -> Response {
    Page(ChatPage { guest: session.policy.guest, labels: EventKind::labels() }).into_response()
}

const CHAT_SCRIPT: &str = include_str!("../../../templates/chat.js");

async fn chat_script() -> Asset {
    Asset::script(CHAT_SCRIPT)
}
