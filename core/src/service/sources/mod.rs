//! Room sources: read-only source bindings of a room (create, list), the deferred
//! credential delivery and its one browser claim, rotation and revocation, the producer
//! ingress (source-bearer authentication, manifest admission, observation batches with
//! TTL and exact provenance, probe polls and answers), Device Check, and the bound-room
//! evidence and probes a run's turn reads. Secrets exist here only as hashes; every
//! credential check is repeated on every use. The table is the kernel's
//! (`records::sources`, `records::observations`, `records::probes`). The service holds
//! only the shared context: it reads sessions and policies as values of the accounts
//! feature and must not depend on runs, nor on `http` or `mcp`.

mod credentials;
mod device_check;
pub mod evidence;
mod ingress;
mod observations;
pub mod probes;
mod redelivery;
#[allow(clippy::module_inception)]
mod sources;

use crate::domain::account::AccountPolicy;
use crate::error::ApiError;
use crate::service::Ctx;

pub use super::records::observations::StoredObservation;
pub use super::records::sources::SourceRecord;
pub use ingress::AuthedSource;

/// How long a credential delivery handle stays claimable.
pub const DELIVERY_TTL_SECS: i64 = 900;
/// How long a claimed (or rotated) source bearer is valid.
pub const CREDENTIAL_TTL_SECS: i64 = 30 * 86_400;
/// How many sources one listing returns.
pub const MAX_LISTED_SOURCES: usize = 50;
/// The page the claim URL names.
pub const CLAIM_PAGE_PATH: &str = "/account/room-sources/claim";
/// Bounded re-reads of a credential write that lost a race with a concurrent writer.
const RACE_RETRIES: usize = 6;

/// Room sources, their credentials and ingress, Device Check, and the room evidence
/// and probes a run's turn reads.
#[derive(Clone)]
pub struct SourceService {
    ctx: Ctx,
}

impl std::ops::Deref for SourceService {
    type Target = Ctx;
    fn deref(&self) -> &Ctx {
        &self.ctx
    }
}

impl SourceService {
    pub(crate) fn new(ctx: Ctx) -> Self {
        Self { ctx }
    }
}

/// Where a developer privilege is asked for: a bearer token (which carries OAuth
/// scopes), a signed-in browser, or a producer acting for its source's owner (neither of
/// the last two has a token to carry a scope).
#[derive(Clone, Copy)]
pub(crate) enum DeveloperLane<'a> {
    Bearer(&'a crate::auth::principal::Principal),
    Browser,
    Producer,
}

/// Sources are a developer feature of an unlocked, non-guest account whose operator
/// policy marks it a developer. In production the account must also be on the
/// developer-profile allowlist (`HELIX_DEVELOPER_PROFILE_ALLOWLIST`; empty admits no
/// one) and a bearer must carry the developer OAuth scope. Fails closed.
pub(crate) fn developer(
    config: &crate::config::Config,
    account_id: &str,
    policy: &AccountPolicy,
    lane: DeveloperLane<'_>,
) -> Result<(), ApiError> {
    if policy.rooms_locked {
        return Err(ApiError::RoomFeatureLocked);
    }
    if policy.guest {
        return Err(ApiError::GuestNotAllowed);
    }
    if !policy.developer {
        return Err(ApiError::DeveloperRequired);
    }
    if config.mode == crate::config::Mode::Production {
        if !config.developer_profiles.iter().any(|a| a == account_id) {
            return Err(ApiError::DeveloperRequired);
        }
        match lane {
            // Named with the operation's other scope: the one challenge names both.
            DeveloperLane::Bearer(p) => {
                p.require(&[crate::domain::scopes::ROOM_SOURCES_MANAGE, crate::domain::scopes::DEVELOPER])?
            }
            DeveloperLane::Browser | DeveloperLane::Producer => {}
        }
    }
    Ok(())
}
