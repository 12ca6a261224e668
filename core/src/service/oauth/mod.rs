//! The development authorization server's state: registered clients (bounded per hour),
//! pending authorizations on their way through sign-in and consent, single-use codes and
//! refresh-token families (rotated; a rotated token presented again ends its family).
//! Its HTTP framing (`http::oauth`) only checks requests and shapes answers; every read
//! and write is here, as `records::oauth_clients` and `records::oauth_grants` records
//! only. Depends on nothing but the [`Ctx`]; must not depend on `http` or `mcp`.

use super::Ctx;
pub use super::records::oauth_clients::OAuthClient;
pub use super::records::oauth_grants::{Grant, PendingAuthorization, RefreshFamily};
use super::records::{oauth_clients, oauth_grants};
use crate::error::ApiError;

/// What became of a registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// The client is kept until its `expires_at`.
    Kept,
    /// The hour's bound was reached: nothing was kept.
    TooMany,
}

#[derive(Clone)]
pub struct OAuthService {
    ctx: Ctx,
}

impl OAuthService {
    pub fn new(ctx: Ctx) -> Self {
        Self { ctx }
    }

    /// Counts one registration in the hour `client` was issued in and keeps it, unless the
    /// hour already counted more than `max_per_hour` (the refused attempt counts too).
    pub async fn register(&self, client: &OAuthClient, max_per_hour: i64) -> Result<Registration, ApiError> {
        let store = self.ctx.store.as_ref();
        let hour = client.issued_at.div_euclid(3600);
        if oauth_clients::count_registration(store, hour).await? > max_per_hour {
            return Ok(Registration::TooMany);
        }
        oauth_clients::put_client(store, client).await?;
        Ok(Registration::Kept)
    }

    /// The live registered client `client_id`, if any.
    pub async fn client(&self, client_id: &str) -> Result<Option<OAuthClient>, ApiError> {
        Ok(oauth_clients::get_client(self.ctx.store.as_ref(), client_id).await?)
    }

    /// Keeps (or replaces) the pending authorization `id`.
    pub async fn keep_pending(&self, id: &str, pending: &PendingAuthorization) -> Result<(), ApiError> {
        Ok(oauth_grants::put_pending(self.ctx.store.as_ref(), id, pending).await?)
    }

    /// The live pending authorization `id`, if any.
    pub async fn pending(&self, id: &str) -> Result<Option<PendingAuthorization>, ApiError> {
        Ok(oauth_grants::get_pending(self.ctx.store.as_ref(), id).await?)
    }

    /// The pending authorization `id`, consumed: a decision is taken once.
    pub async fn take_pending(&self, id: &str) -> Result<Option<PendingAuthorization>, ApiError> {
        Ok(oauth_grants::take_pending(self.ctx.store.as_ref(), id).await?)
    }

    /// Keeps the grant of a new authorization code (a code is never overwritten).
    pub async fn issue_code(&self, code: &str, grant: &Grant) -> Result<(), ApiError> {
        Ok(oauth_grants::put_code(self.ctx.store.as_ref(), code, grant).await?)
    }

    /// The code's grant, consumed whatever the caller does next (single use).
    pub async fn redeem_code(&self, code: &str) -> Result<Option<Grant>, ApiError> {
        Ok(oauth_grants::take_code(self.ctx.store.as_ref(), code).await?)
    }

    /// A new refresh-token family with its first token.
    pub async fn start_family(&self, token: &str, family: &RefreshFamily) -> Result<(), ApiError> {
        Ok(oauth_grants::start_family(self.ctx.store.as_ref(), token, family).await?)
    }

    /// The live family the refresh token `token` belongs to (None: unknown, expired or
    /// ended). Its `current_hash` tells whether `token` is the current one.
    pub async fn live_family(&self, token: &str) -> Result<Option<RefreshFamily>, ApiError> {
        let found = oauth_grants::family_of(self.ctx.store.as_ref(), token).await?;
        Ok(found.and_then(|(_, family)| family))
    }

    /// Moves the family from `old` to `next`; false when another rotation came first.
    pub async fn rotate(&self, family: &RefreshFamily, old: &str, next: &str) -> Result<bool, ApiError> {
        Ok(oauth_grants::rotate(self.ctx.store.as_ref(), family, old, next).await?)
    }

    /// Ends a family: none of its tokens refreshes again.
    pub async fn end_family(&self, family_id: &str) -> Result<(), ApiError> {
        Ok(oauth_grants::end_family(self.ctx.store.as_ref(), family_id).await?)
    }
}
