//! The signed-in person as the [`Actor`] a cookie handler receives: a live session from the
//! public origin within its window ([`SameOriginSession`]), or on a read-only page a live
//! session, signed-out visitors being sent to sign in ([`PageSession`]). The bearer lanes
//! build theirs from the bearer (`agent::actor`); no route takes both.

use axum::extract::FromRequestParts;
use axum::response::Response;
use http::request::Parts;

use super::SameOriginSession;
use super::sign_in_first::PageSession;
use crate::error::ApiError;
use crate::http::AppState;
use crate::service::Actor;

/// The signed-in person of a cookie request that acts or reads JSON (same origin only).
pub struct PersonActor(pub Actor);

impl FromRequestParts<AppState> for PersonActor {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let SameOriginSession(session) = SameOriginSession::from_request_parts(parts, state).await?;
        Ok(PersonActor(Actor::Person(session)))
    }
}

/// The signed-in person on a read-only page; signed out, the visitor is sent to sign in.
pub struct PageActor(pub Actor);

impl FromRequestParts<AppState> for PageActor {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let PageSession(session) = PageSession::from_request_parts(parts, state).await?;
        Ok(PageActor(Actor::Person(session)))
    }
}
