//! Invites over the browser lane: the owner issues a single-use, expiring code (shown
//! once, stored hashed); a signed-in invitee previews it and accepts the room's current
//! consent version, only when signed in under the room's tenant. Must not depend on
//! `http` or `mcp`.

use super::{INVITE_TTL_SECS, RoomService, rules, unlocked};
use crate::domain::room::RoomRole;
use crate::domain::time::{epoch_rfc3339, rfc3339};
use crate::error::ApiError;
use crate::service::records::rooms::{self as items, AccountRoom, Consent, Invite, Membership, RoomRecord};
use crate::service::records::{Role, Tx};
use crate::service::sessions::Session;
use crate::store::Cond;

/// What an invite code leads to, shown before the invitee accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvitePreview {
    pub room_name: String,
    pub consent_version: u32,
}

/// A new invite as its owner sees it once: the code, the room it is for, when it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInvite {
    pub code: String,
    pub room_name: String,
    /// RFC 3339.
    pub expires_at: String,
}

impl RoomService {
    /// The owner issues a single-use, expiring invite; the code is shown once and stored hashed.
    pub async fn create_invite(&self, s: &Session, room_id: &str) -> Result<NewInvite, ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let (room, _) = self.owned_room(s, room_id).await?;
        let code = format!("hri_{}", crate::domain::random_hex(32));
        let invite = Invite {
            code_hash: items::invite_code_hash(&code),
            room_id: room.room_id.clone(),
            created_by: s.account_id.clone(),
            expires_at: self.clock.epoch() + INVITE_TTL_SECS,
        };
        self.store.put(invite.to_item(), Some(Cond::NotExists)).await?;
        Ok(NewInvite { code, room_name: room.name.clone(), expires_at: epoch_rfc3339(invite.expires_at) })
    }

    /// The live invite behind a code and its active room in the session's tenant; anything
    /// else (a room of another tenant too) is one error.
    async fn live_invite(&self, s: &Session, code: &str) -> Result<(Invite, RoomRecord), ApiError> {
        if !rules::invite_code_shaped(code) {
            return Err(ApiError::InviteInvalid);
        }
        let now = self.clock.epoch();
        let invite = items::live_invite(&*self.store, &items::invite_code_hash(code), now).await?;
        let invite = invite.ok_or(ApiError::InviteInvalid)?;
        let room = items::read_room(&*self.store, &invite.room_id).await?.ok_or(ApiError::InviteInvalid)?;
        if !room.is_active() || !self.session_tenant(s).admits(&room) {
            return Err(ApiError::InviteInvalid);
        }
        Ok((invite, room))
    }

    /// What the invitee is about to accept (room name and current consent version).
    pub async fn preview_invite(&self, s: &Session, code: &str) -> Result<InvitePreview, ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let (_, room) = self.live_invite(s, code).await?;
        Ok(InvitePreview { room_name: room.name, consent_version: room.consent_version })
    }

    /// A signed-in invitee accepts the room's current consent version: one transaction
    /// consumes the invite, writes the membership, the durable consent receipt and the
    /// listing entry, and checks the room still has that consent version.
    pub async fn accept_invite(&self, s: &Session, code: &str, consent_version: u32) -> Result<String, ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let (invite, room) = self.live_invite(s, code).await?;
        rules::accepts_current(&room, consent_version)?;
        let consent = Consent::accepted(&room.room_id, &s.account_id, consent_version, rfc3339(self.clock.now()));
        let member = Membership {
            room_id: room.room_id.clone(),
            account_id: s.account_id.clone(),
            role: RoomRole::Member,
            consent_version,
            consent_receipt: consent.consent_receipt.clone(),
            accepted_at: consent.accepted_at.clone(),
            action_authority: false,
        };
        let entry = AccountRoom { account_id: s.account_id.clone(), room_id: room.room_id.clone() };
        let mut tx = Tx::new();
        tx.delete(Role::Invite, invite.key(), Cond::Exists)
            .put(Role::Member, member.to_item(), Cond::NotExists)
            // A removed member who rejoins at the same version accepts it again: the
            // receipt keeps its stable reference and records this acceptance's time.
            .put(Role::Consent, consent.to_item(), None)
            .put(Role::AccountEntry, entry.to_item(), None)
            .check(Role::Room, items::room_key(&room.room_id), items::consent_is(consent_version));
        match tx.commit(&*self.store).await {
            Ok(()) => Ok(room.room_id),
            Err(f) if f.failed(Role::Invite) => Err(ApiError::InviteInvalid),
            Err(f) if f.failed(Role::Member) => {
                Err(ApiError::InvalidRequest("this account is already a member of the room".into()))
            }
            Err(f) if f.failed(Role::Room) => Err(ApiError::ConsentRequired),
            Err(f) => Err(f.into()),
        }
    }
}
