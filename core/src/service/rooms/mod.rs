//! Shared Live Room use cases, one file per noun: rooms (create, list, inspect),
//! members, invites, consent, run-room bindings, claimed run-chat bindings and the
//! browser's observer lane; `rules` holds the decisions, free of I/O. Every
//! bind/claim/withdraw is one transaction; the one-active-binding rule is a conditional
//! put on a per-run slot item; withdrawal marks revoked (never deletes the binding) and
//! frees the slot. Every output view is [`Redacted`]. Items are the storage kernel's
//! (`records::rooms`). The service holds only the shared context: it reads sessions as
//! values of the accounts feature and must not depend on sources or runs, nor on `http`
//! or `mcp`.

mod bindings;
mod chat;
mod consent;
mod invites;
mod members;
mod observers;
#[allow(clippy::module_inception)]
mod rooms;
pub mod rules;

use serde::Serialize;
use serde_json::Value;

use crate::auth::principal::Principal;
use crate::domain::ids::RunId;
use crate::domain::room::{RoomId, credential_shaped, is_own_identifier, redact};
use crate::domain::run::Run;
use crate::error::ApiError;
use crate::service::Ctx;
use crate::service::records::rooms::RoomTenant;
use crate::service::sessions::Session;

pub use crate::domain::room::Redacted;
pub(crate) use bindings::revoke_binding;
pub use invites::InvitePreview;
pub use members::{MemberView, RoomAdminPage, RoomAdminView};

/// How long a browser-issued chat claim handle stays usable.
pub const CLAIM_TTL_SECS: i64 = 600;
/// How many rooms one listing returns (membership entries, each with two reads).
pub const MAX_LISTED_ROOMS: usize = 50;
/// How long an invite code stays usable.
pub const INVITE_TTL_SECS: i64 = 7 * 24 * 3600;
/// How many members one room lists.
pub const MAX_MEMBERS: usize = 100;
/// Bounded re-reads of a write that lost a race with a concurrent writer.
const RACE_RETRIES: usize = 6;

/// Rooms, members, invites, consent, run-room and run-chat bindings, and observers.
#[derive(Clone)]
pub struct RoomService {
    ctx: Ctx,
}

impl std::ops::Deref for RoomService {
    type Target = Ctx;
    fn deref(&self) -> &Ctx {
        &self.ctx
    }
}

impl RoomService {
    pub(crate) fn new(ctx: Ctx) -> Self {
        Self { ctx }
    }
}

/// Serialises a projection and redacts it, for lanes that answer JSON values.
pub fn project(value: &impl Serialize) -> Result<Value, ApiError> {
    Ok(redact(serde_json::to_value(value).map_err(ApiError::internal)?))
}

fn broken(what: &'static str) -> ApiError {
    ApiError::internal(std::io::Error::other(what))
}

/// The room feature lock of the current account policy (withdrawals skip this check).
fn unlocked(locked: bool) -> Result<(), ApiError> {
    if locked { Err(ApiError::RoomFeatureLocked) } else { Ok(()) }
}

/// The tenant a bearer caller reaches rooms under (the owner tuple's tenant).
pub(crate) fn room_tenant(p: &Principal) -> RoomTenant {
    RoomTenant::of(&p.issuer, &p.tenant)
}

impl RoomService {
    /// The tenant a signed-in browser reaches rooms under: the one it signed in with.
    fn session_tenant(&self, s: &Session) -> RoomTenant {
        RoomTenant::of_session(s.tenant_ref.as_deref(), &self.config.oauth.issuer)
    }
}

fn check_principal(p: &Principal) -> Result<(), ApiError> {
    unlocked(p.policy.rooms_locked)
}

/// A run id from a request body: credential-shaped values are refused before any read.
fn body_run_id(raw: &str) -> Result<RunId, ApiError> {
    if credential_shaped(raw) && !is_own_identifier(raw) {
        return Err(ApiError::CredentialRejected("run_id: credential-shaped values are refused".into()));
    }
    RunId::parse(raw).ok_or_else(|| ApiError::InvalidRequest("run_id: not a run id".into()))
}

fn body_room_id(raw: &str) -> Result<RoomId, ApiError> {
    if credential_shaped(raw) && !is_own_identifier(raw) {
        return Err(ApiError::CredentialRejected("room_id: credential-shaped values are refused".into()));
    }
    RoomId::parse(raw).ok_or_else(|| ApiError::InvalidRequest("room_id: not a room id".into()))
}

/// The caller's run; another owner's run is indistinguishable from a missing one.
fn owned_run(p: &Principal, run: Option<Run>) -> Result<Run, ApiError> {
    run.filter(|r| r.owner_hash == p.owner_hash()).ok_or(ApiError::NotFound)
}

/// The snake_case wire name of a serialisable enum value.
fn enum_name(v: &impl Serialize) -> Option<String> {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_owned))
}
