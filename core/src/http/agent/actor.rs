//! The agent of a bearer request as the [`Actor`] its handler receives: [`Authed`]'s caller
//! (token, link, binding, rate windows); the use case checks its scopes against the agent's
//! grant. The cookie lanes build theirs in the pages kit (`pages::actor`).

use axum::extract::FromRequestParts;
use http::request::Parts;

use crate::error::ApiError;
use crate::http::{AppState, Authed};
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
