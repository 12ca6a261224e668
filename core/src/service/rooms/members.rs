//! Members over the browser lane: a signed-in account's rooms with the member list of
//! each room it owns, and the owner's removal of a member. Members are shown by the name
//! their sign-in provider gave (when it gave one) beside their opaque account reference,
//! never by identity (subject, issuer, tenant). Must not depend on `http` or `mcp`.

use serde::Serialize;

use super::rooms::room_view;
use super::{MAX_MEMBERS, RoomService, rules, unlocked};
use crate::domain::account::account_ref;
use crate::domain::page::{self, PagedList};
use crate::domain::room::{RoomId, RoomRole, RoomView};
use crate::error::ApiError;
use crate::service::Actor;
use crate::service::records::accounts::display_names;
use crate::service::records::rooms::{self as items, Membership, RoomRecord};
use crate::service::records::{Role, Tx};
use crate::service::sessions::Session;
use crate::store::Cond;

/// One member as the owner sees it (a name and an opaque account reference, never an identity).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemberView {
    pub account_ref: String,
    /// The member's name as their sign-in provider gave it, if it gave one.
    pub display_name: Option<String>,
    pub role: RoomRole,
    pub consent_current: bool,
    pub is_caller: bool,
    /// The owner granted this member action authority (the owner always has it).
    pub action_authority: bool,
}

/// One room on the owner page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoomAdminView {
    pub room: RoomView,
    /// Listed for the owner only (one page).
    pub members: Vec<MemberView>,
    /// The `cursor` of the room's next page of members; None on the last page.
    pub members_next_cursor: Option<String>,
}

/// One page of the owner page: a page of rooms, or (for a member cursor) one room with a
/// later page of its members.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RoomAdminPage {
    pub rooms: Vec<RoomAdminView>,
    /// The `cursor` of the next page of rooms; None on the last page.
    pub next_cursor: Option<String>,
    /// True when the page continues one room's member list.
    pub one_room: bool,
}

impl RoomService {
    /// The room and the actor's account's membership; a room it cannot see (another
    /// tenant's too) is not found.
    pub(super) async fn room_and_member(
        &self,
        room_id: &str,
        actor: &Actor,
    ) -> Result<(RoomRecord, Membership), ApiError> {
        let id = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        let (room, member) = items::room_and_membership(&*self.store, id.as_str(), actor.account_id()).await?;
        rules::visible(rules::of_tenant(&actor.room_tenant(&self.config.oauth.issuer), room), member)
    }

    /// The owner's room and the caller's membership; a non-owner is not found.
    pub(super) async fn owned_room(&self, s: &Session, room_id: &str) -> Result<(RoomRecord, Membership), ApiError> {
        let (room, member) = self.room_and_member(room_id, &Actor::person(s)).await?;
        rules::may_manage(&room, &s.account_id)?;
        Ok((room, member))
    }

    /// One page of the rooms of a signed-in browser in its tenant, with the first page of members of
    /// each room it owns; a members `cursor` instead gives that room with its next page of
    /// members (the room is checked to be the caller's own first).
    pub async fn rooms_for_session(&self, s: &Session, cursor: Option<&str>) -> Result<RoomAdminPage, ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        if let Some(raw) = cursor.filter(|c| page::list_of(c) == Some(PagedList::Members)) {
            return self.members_page(s, raw).await;
        }
        let tenant = self.session_tenant(s);
        let after = super::rooms::rooms_cursor(cursor, &s.account_id)?;
        let (ids, next_cursor) = self.room_ids_page(&s.account_id, after.as_deref()).await?;
        let mut rooms = vec![];
        for (room, member) in items::rooms_with_membership(&*self.store, &ids, &s.account_id).await? {
            if !room.is_active() || !tenant.admits(&room) {
                continue;
            }
            rooms.push(self.admin_view(s, room, member, None).await?);
        }
        Ok(RoomAdminPage { rooms, next_cursor, one_room: false })
    }

    /// The room a members cursor names, with the page of members after it.
    async fn members_page(&self, s: &Session, raw: &str) -> Result<RoomAdminPage, ApiError> {
        let c = page::decode(raw, PagedList::Members, &s.account_id, None, |a| !a.is_empty())?;
        let room_id = c.of.as_deref().filter(|r| RoomId::parse(r).is_some()).ok_or_else(page::invalid)?;
        let (room, member) = self.owned_room(s, room_id).await?;
        let view = self.admin_view(s, room, member, Some(&c.after)).await?;
        Ok(RoomAdminPage { rooms: vec![view], next_cursor: None, one_room: true })
    }

    /// One room as its member sees it, with a page of its members (after `after`) for its owner.
    async fn admin_view(
        &self,
        s: &Session,
        room: RoomRecord,
        member: Membership,
        after: Option<&str>,
    ) -> Result<RoomAdminView, ApiError> {
        let (mut members, mut members_next_cursor) = (vec![], None);
        if rules::may_manage(&room, &s.account_id).is_ok() {
            let (page_of, more) = items::members_of_room(&*self.store, &room.room_id, after, MAX_MEMBERS).await?;
            members_next_cursor = page_of
                .last()
                .filter(|_| more)
                .map(|m| page::encode(PagedList::Members, &s.account_id, Some(&room.room_id), &m.account_id));
            let ids: Vec<String> = page_of.iter().map(|m| m.account_id.clone()).collect();
            let mut names = display_names(&*self.store, &ids).await?;
            members = page_of
                .iter()
                .map(|m| MemberView {
                    account_ref: account_ref(&m.account_id),
                    display_name: names.remove(&m.account_id),
                    role: m.role,
                    consent_current: rules::consent_current(&room, m),
                    is_caller: m.account_id == s.account_id,
                    action_authority: m.may_act(),
                })
                .collect();
        }
        Ok(RoomAdminView { room: room_view(&room, &member, &s.account_id), members, members_next_cursor })
    }

    /// The owner removes a member (by opaque account reference). Works under the policy
    /// lock: it only takes access away. The reference is looked for through every page of
    /// the room's members, so a member past the first page is found too.
    pub async fn remove_member(&self, s: &Session, room_id: &str, member_ref: &str) -> Result<(), ApiError> {
        let (room, _) = self.owned_room(s, room_id).await?;
        let target = self.member_by_ref(&room, member_ref).await?;
        let mut tx = Tx::new();
        tx.delete(Role::Member, items::member_key(&room.room_id, &target), Cond::Exists).delete(
            Role::AccountEntry,
            items::account_room_key(&target, &room.room_id),
            None,
        );
        match tx.commit(&*self.store).await {
            Ok(()) => Ok(()),
            Err(f) if f.failed(Role::Member) => Err(ApiError::NotFound),
            Err(f) => Err(f.into()),
        }
    }

    /// The owner grants (or revokes) action authority to a member (by opaque account
    /// reference): the `action_authority` attribute of its membership, written conditional
    /// on the membership read (unchanged consent). Effective at once: every action, resume,
    /// dispatch and acknowledgement checks it. Revoking works under the policy lock.
    pub async fn set_action_authority(
        &self,
        s: &Session,
        room_id: &str,
        member_ref: &str,
        grant: bool,
    ) -> Result<(), ApiError> {
        if grant {
            unlocked(s.policy.rooms_locked)?;
        }
        let (room, _) = self.owned_room(s, room_id).await?;
        let target = self.member_by_ref(&room, member_ref).await?;
        let key = items::member_key(&room.room_id, &target);
        let item = self.store.get(&key).await?.ok_or(ApiError::NotFound)?;
        let mut member = Membership::from_item(&item);
        if member.action_authority == grant {
            return Ok(());
        }
        member.action_authority = grant;
        let cond = Cond::And(vec![Cond::Exists, items::consent_is(member.consent_version)]);
        let mut tx = Tx::new();
        tx.put(Role::Member, member.to_item(), cond);
        match tx.commit(&*self.store).await {
            Ok(()) => Ok(()),
            Err(f) if f.failed(Role::Member) => Err(ApiError::RunBusy),
            Err(f) => Err(f.into()),
        }
    }

    /// The account behind a removable member reference: one Query per page of members
    /// up to the page that holds it.
    async fn member_by_ref(&self, room: &RoomRecord, member_ref: &str) -> Result<String, ApiError> {
        let mut after: Option<String> = None;
        loop {
            let (members, more) =
                items::members_of_room(&*self.store, &room.room_id, after.as_deref(), MAX_MEMBERS).await?;
            if let Ok(target) = rules::removable(room, &members, member_ref) {
                return Ok(target.to_owned());
            }
            match members.last() {
                Some(last) if more => after = Some(last.account_id.clone()),
                _ => return Err(ApiError::NotFound),
            }
        }
    }
}
