//! Consent over the browser lane: a member accepts the room's current consent version
//! again; the owner raises it, after which every other member must accept before their
//! next bind. Every acceptance leaves a durable consent receipt. Must not depend on
//! `http` or `mcp`.

use super::{RoomService, rules, unlocked};
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::Actor;
use crate::service::records::rooms::{self as items, Consent};
use crate::service::records::{Role, Tx};
use crate::service::sessions::Session;
use crate::store::Cond;

impl RoomService {
    /// A member accepts the room's current consent version again (after the owner raised it).
    pub async fn accept_consent(&self, s: &Session, room_id: &str, consent_version: u32) -> Result<(), ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let (room, mut member) = self.room_and_member(room_id, &Actor::person(s)).await?;
        rules::accepts_current(&room, consent_version)?;
        let consent = Consent::accepted(&room.room_id, &s.account_id, consent_version, rfc3339(self.clock.now()));
        member.consent_version = consent_version;
        member.consent_receipt = consent.consent_receipt.clone();
        member.accepted_at = consent.accepted_at.clone();
        let mut tx = Tx::new();
        tx.put(Role::Member, member.to_item(), Cond::Exists).put(Role::Consent, consent.to_item(), None).check(
            Role::Room,
            items::room_key(&room.room_id),
            items::consent_is(consent_version),
        );
        match tx.commit(&*self.store).await {
            Ok(()) => Ok(()),
            Err(f) if f.failed(Role::Member) => Err(ApiError::NotFound),
            Err(f) if f.failed(Role::Room) => Err(ApiError::ConsentRequired),
            Err(f) => Err(f.into()),
        }
    }

    /// The owner raises the consent version: every other member must accept again before
    /// their next bind (the owner's own acceptance is written in the same transaction).
    pub async fn raise_consent(&self, s: &Session, room_id: &str) -> Result<u32, ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let (mut room, mut owner) = self.owned_room(s, room_id).await?;
        let old = room.consent_version;
        room.consent_version = rules::raised(&room);
        let consent = Consent::accepted(&room.room_id, &s.account_id, room.consent_version, rfc3339(self.clock.now()));
        // The owner's membership keeps the time it first accepted; the receipt has this one.
        owner.consent_version = room.consent_version;
        owner.consent_receipt = consent.consent_receipt.clone();
        let mut tx = Tx::new();
        tx.put(Role::Room, room.to_item()?, items::consent_is(old))
            .put(Role::Member, owner.to_item(), Cond::Exists)
            .put(Role::Consent, consent.to_item(), None);
        match tx.commit(&*self.store).await {
            Ok(()) => Ok(room.consent_version),
            // Another raise (or a removal) got there first: the owner may simply retry.
            Err(f) if f.is_cancelled() => Err(ApiError::RunBusy),
            Err(f) => Err(f.into()),
        }
    }
}
