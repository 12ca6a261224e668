//! Bearer verification: a JWT access token becomes a [`VerifiedToken`] (issuer,
//! subject, signed tenant, scopes) or an `invalid_token` with a stable reason.
//!
//! Production tokens are verified against the authorization server's JWKS with one
//! of the admitted asymmetric algorithms. HS256 is accepted only when the
//! configuration carries a local secret, which the config refuses in production.
//! Claims are checked here, not by `jsonwebtoken`'s validation, so every rule
//! (exact issuer, tenant claims, bounds) is explicit and maps to one reason.
//!
//! Never log, echo or keep the token: errors carry static reasons only.
//!
//! The token's outer form (`header`), its claims (`claims`), the key set (`jwks`), the
//! verifier with its cache of verified tokens (`verifier`), and local minting (`mint`).
//! Depends on the config and the error type only.

mod claims;
mod header;
mod jwks;
mod mint;
mod verifier;

pub(crate) use claims::signed_tenant;
pub use header::bearer_from_header;
pub use jwks::{JwksError, JwksPolicy, MAX_JWKS_BYTES};
pub use mint::mint_local_hs256;
pub use verifier::{TokenVerifier, VERIFIED_TOKEN_TTL_SECS};

use crate::error::ApiError;

/// Longest bearer accepted; longer is `malformed` before any parsing.
pub const MAX_BEARER_BYTES: usize = 8 * 1024;
/// Clock skew tolerated on `exp` and `nbf`.
pub const CLOCK_LEEWAY_SECS: i64 = 30;
/// Longest `sub` and tenant claim, in characters.
pub const MAX_IDENTIFIER_CHARS: usize = 256;

/// Tenant claim names, in precedence order. All present ones must agree.
pub const TENANT_CLAIMS: [&str; 6] = ["tenantId", "tenant_id", "customerId", "customer_id", "orgId", "org_id"];

/// A verified access token. Holds no token material; `Debug` leaves out the
/// subject and tenant so a logged value cannot identify the caller.
#[derive(Clone, PartialEq, Eq)]
pub struct VerifiedToken {
    pub issuer: String,
    pub subject: String,
    pub tenant: String,
    pub scopes: Vec<String>,
    /// `exp`, epoch seconds.
    pub expires_at: i64,
}

impl std::fmt::Debug for VerifiedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifiedToken")
            .field("issuer", &self.issuer)
            .field("subject", &"<redacted>")
            .field("tenant", &"<redacted>")
            .field("scopes", &self.scopes)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// The optional tenant headers of a request (`X-Tenant-Id`, `X-Customer-Id`,
/// `X-Org-Id`). Each one supplied must equal the signed tenant; none of them can
/// establish or override tenancy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantHeaders<'a> {
    pub tenant_id: Option<&'a str>,
    pub customer_id: Option<&'a str>,
    pub org_id: Option<&'a str>,
}

fn invalid(reason: &'static str) -> ApiError {
    ApiError::InvalidToken { reason }
}
