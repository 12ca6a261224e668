//! The browser lane's one room-access rule: a signed-in person reaches a room only under
//! the tenant their session signed in with, exactly as the room's inspect does. Every
//! cookie use case that names a room, a pairing or an environment binding (pairing,
//! rotation, revocation, region, Emergency Stop clear, the room page's room-wide stop and
//! its clear, the person's subject) goes through [`PersonOwner`] or
//! [`EmbodimentService::person_tenant`]; a room of another tenant is `not_found`, the
//! answer for a room that does not exist. Must not depend on `http` or `mcp`.

use super::EmbodimentService;
use crate::domain::embodiment::EnvBindingId;
use crate::domain::room::RoomId;
use crate::error::ApiError;
use crate::service::records::Tx;
use crate::service::records::embodiment::{EnvBinding, binding_in_room};
use crate::service::records::rooms::RoomTenant;
use crate::service::records::sources::{check_room_owner, room_owned_by};
use crate::service::sessions::Session;

/// The signed-in person acting as a room's owner: a member session (never a guest), its
/// account and the tenant it signed in with. A room is theirs when it is active, of that
/// tenant, owned by the account, and the account is its owner member.
pub(super) struct PersonOwner<'a> {
    account: &'a str,
    tenant: RoomTenant,
}

impl EmbodimentService {
    /// The tenant a signed-in browser reaches rooms under: the one it signed in with.
    pub(super) fn person_tenant(&self, s: &Session) -> RoomTenant {
        RoomTenant::of_session(s.tenant_ref.as_deref(), &self.config.oauth.issuer)
    }

    /// The session as a room owner (a guest is refused first).
    pub(super) fn person_owner<'a>(&self, s: &'a Session) -> Result<PersonOwner<'a>, ApiError> {
        s.require_member()?;
        Ok(PersonOwner { account: &s.account_id, tenant: self.person_tenant(s) })
    }
}

impl PersonOwner<'_> {
    /// Inside a write: the room is still the person's (its refusal is read as
    /// [`crate::service::records::Role::Room`] or [`crate::service::records::Role::Member`]).
    pub(super) fn check(&self, tx: &mut Tx, room_id: &str) {
        check_room_owner(tx, room_id, self.account, true, Some(&self.tenant));
    }

    /// The person's room `room_id`, or `not_found`.
    pub(super) async fn room(&self, svc: &EmbodimentService, room_id: &str) -> Result<RoomId, ApiError> {
        let id = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        if !room_owned_by(svc.store.as_ref(), id.as_str(), self.account, &self.tenant).await? {
            return Err(ApiError::NotFound);
        }
        Ok(id)
    }

    /// The binding `binding_id` (any status, whoever paired it) of the person's room
    /// `room_id`, or `not_found`.
    pub(super) async fn binding(
        &self,
        svc: &EmbodimentService,
        room_id: &str,
        binding_id: &str,
    ) -> Result<EnvBinding, ApiError> {
        let room = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        let binding_id = EnvBindingId::parse(binding_id).ok_or(ApiError::NotFound)?;
        let store = svc.store.as_ref();
        let got = binding_in_room(store, room.as_str(), binding_id.as_str(), self.account, &self.tenant, false).await?;
        got.binding.filter(|_| got.owner_holds).ok_or(ApiError::NotFound)
    }
}
