//! The room pages people use: `/chat` (local chats, attach an agent run, the progress lane
//! and the one terminal message) and its small script. Served by the account function
//! behind the same pipeline; the only pages with a script, so their policy admits exactly
//! `script-src 'self'` and same-origin `connect-src` (no inline script, no framing).

use askama::Template;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue};

use super::account::session_of;
use super::{AppState, Group, pipeline};
use crate::error::ApiError;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/chat", get(chat_page))
        .route("/chat/static/chat.js", get(chat_script))
        .merge(super::room_admin::router())
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Account), pipeline))
        .layer(axum::middleware::map_response(script_page_headers))
        .with_state(state)
}

pub const SCRIPT_PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; \
     img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

async fn script_page_headers(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(SCRIPT_PAGE_POLICY));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    res
}

pub(crate) fn html(body: Result<String, askama::Error>) -> Result<Response, ApiError> {
    let body = body.map_err(ApiError::internal)?;
    let mut res = body.into_response();
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    Ok(res)
}

#[derive(Template)]
#[template(path = "chat.html")]
struct ChatPage {
    signed_in: bool,
    guest: bool,
}

async fn chat_page(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let session = session_of(&state, &headers).await?;
    html(ChatPage { signed_in: session.is_some(), guest: session.as_ref().is_some_and(|s| s.policy.guest) }.render())
}

const CHAT_SCRIPT: &str = include_str!("../../templates/chat.js");

async fn chat_script() -> Response {
    let mut res = CHAT_SCRIPT.into_response();
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/javascript; charset=utf-8"));
    res
}
