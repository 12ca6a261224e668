//! Members over the browser lane: a signed-in account's rooms with the member list of
//! each room it owns, and the owner's removal of a member. Members are shown by opaque
//! account reference, never by identity. Must not depend on `http` or `mcp`.

use serde::Serialize;

use super::rooms::room_view;
use super::{MAX_LISTED_ROOMS, MAX_MEMBERS, RoomService, rules, unlocked};
use crate::domain::account::account_ref;
use crate::domain::room::{RoomId, RoomRole, RoomView};
use crate::error::ApiError;
use crate::service::records::rooms::{self as items, Membership, RoomRecord};
use crate::service::records::{Role, Tx};
use crate::service::sessions::Session;
use crate::store::Cond;

/// One member as the owner sees it (an opaque account reference, never an identity).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemberView {
    pub account_ref: String,
    pub role: RoomRole,
    pub consent_current: bool,
    pub is_caller: bool,
}

/// One room on the owner page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoomAdminView {
    pub room: RoomView,
    /// Listed for the owner only.
    pub members: Vec<MemberView>,
}

impl RoomService {
    /// The room and the session account's membership; a room it cannot see (another
    /// tenant's too) is not found.
    pub(super) async fn room_and_member(
        &self,
        room_id: &str,
        s: &Session,
    ) -> Result<(RoomRecord, Membership), ApiError> {
        let id = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        let (room, member) = items::room_and_membership(&*self.store, id.as_str(), &s.account_id).await?;
        rules::visible(rules::of_tenant(&self.session_tenant(s), room), member)
    }

    /// The owner's room and the caller's membership; a non-owner is not found.
    pub(super) async fn owned_room(&self, s: &Session, room_id: &str) -> Result<(RoomRecord, Membership), ApiError> {
        let (room, member) = self.room_and_member(room_id, s).await?;
        rules::may_manage(&room, &s.account_id)?;
        Ok((room, member))
    }

    /// The rooms of a signed-in browser in its tenant, with the member list of each room it owns.
    pub async fn rooms_for_session(&self, s: &Session) -> Result<Vec<RoomAdminView>, ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let tenant = self.session_tenant(s);
        let (ids, _) = items::rooms_of_account(&*self.store, &s.account_id, MAX_LISTED_ROOMS).await?;
        let mut out = vec![];
        for (room, member) in items::rooms_with_membership(&*self.store, &ids, &s.account_id).await? {
            if !room.is_active() || !tenant.admits(&room) {
                continue;
            }
            let mut members = vec![];
            if rules::may_manage(&room, &s.account_id).is_ok() {
                for m in items::members_of_room(&*self.store, &room.room_id, MAX_MEMBERS).await? {
                    members.push(MemberView {
                        account_ref: account_ref(&m.account_id),
                        role: m.role,
                        consent_current: rules::consent_current(&room, &m),
                        is_caller: m.account_id == s.account_id,
                    });
                }
            }
            out.push(RoomAdminView { room: room_view(&room, &member, &s.account_id), members });
        }
        Ok(out)
    }

    /// The owner removes a member (by opaque account reference). Works under the policy
    /// lock: it only takes access away.
    pub async fn remove_member(&self, s: &Session, room_id: &str, member_ref: &str) -> Result<(), ApiError> {
        let (room, _) = self.owned_room(s, room_id).await?;
        let members = items::members_of_room(&*self.store, &room.room_id, MAX_MEMBERS).await?;
        let target = rules::removable(&room, &members, member_ref)?;
        let mut tx = Tx::new();
        tx.delete(Role::Member, items::member_key(&room.room_id, target), Cond::Exists).delete(
            Role::AccountEntry,
            items::account_room_key(target, &room.room_id),
            None,
        );
        match tx.commit(&*self.store).await {
            Ok(()) => Ok(()),
            Err(f) if f.failed(Role::Member) => Err(ApiError::NotFound),
            Err(f) => Err(f.into()),
        }
    }
}
