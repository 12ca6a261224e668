//! The [`Actor`] a handler receives: each lane's extractor authenticates in its own way and
//! applies its own checks, then hands the use case one actor. A bearer route's agent is
//! [`Authed`]'s caller (token, link, binding, rate windows; scopes are checked by the use
//! case against the agent's grant); a cookie route's person is a live session from the
//! public origin within its window ([`SameOriginSession`]), or on a read-only page a live
//! session, signed-out visitors being sent to sign in ([`PageSession`]). No route takes both.

use axum::extract::FromRequestParts;
use axum::response::Response;
use http::request::Parts;

use super::pages::SameOriginSession;
use super::sign_in_first::PageSession;
use super::{AppState, Authed};
use crate::error::ApiError;
use crate::service::Actor;

/// The agent of a bearer request.
pub struct AgentActor(pub Actor);

impl FromRequestParts<AppState> for AgentActor {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Authed(caller) = Authed::from_request_parts(parts, state).await?;
        Ok(AgentActor(Actor::Agent(caller)))
    }
}

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
