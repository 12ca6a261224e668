//! Rooms over the bearer lane: create (idempotent, like a run start), list, inspect,
//! and the command route that never executes. Must not depend on `http` or `mcp`.

use serde_json::Value;

use super::{MAX_LISTED_ROOMS, Redacted, RoomService, broken, check_principal, room_tenant, rules, unlocked};
use crate::domain::hash_parts;
use crate::domain::ids::IdempotencyKey;
use crate::domain::page::{self, PagedList};
use crate::domain::room::{CreateRoomRequest, FalseFlags, RoomId, RoomList, RoomListSchemaName, RoomRole};
use crate::domain::room::{RoomSchemaName, RoomView};
use crate::domain::scopes::{ROOMS_MANAGE, ROOMS_READ};
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::records::rooms::{
    self as items, AccountRoom, BODY_VERSION, Consent, Membership, RoomRecord, RoomStatus,
};
use crate::service::records::{Committed, Completion, Role, Tx, commit_once, receipt_key};
use crate::service::{Actor, Caller, Mutation};
use crate::store::Cond;

const OP_CREATE: &str = "room.create";
/// The consent version a new room starts at (its owner accepts it by creating it).
const FIRST_CONSENT: u32 = 1;

/// The room a `cursor` of the rooms list (issued to `account_id`) continues after.
pub(super) fn rooms_cursor(cursor: Option<&str>, account_id: &str) -> Result<Option<String>, ApiError> {
    let c = page::decode_opt(cursor, PagedList::Rooms, account_id, None, |a| RoomId::parse(a).is_some())?;
    Ok(c.map(|c| c.after))
}

/// One room as `account_id` sees it through its membership.
pub(super) fn room_view(room: &RoomRecord, member: &Membership, account_id: &str) -> RoomView {
    RoomView {
        schema: RoomSchemaName,
        room_id: room.room_id.clone(),
        name: room.name.clone(),
        description: room.description.clone(),
        status: super::enum_name(&room.status).unwrap_or_default(),
        role: member.role,
        consent_version: room.consent_version,
        consent_current: rules::consent_current(room, member),
        owned_by_caller: room.owner_account == account_id,
        created_at: rfc3339(room.created_at),
        execution_enabled: false,
        flags: FalseFlags::default(),
    }
}

impl RoomService {
    /// `POST /api/v1/rooms`: idempotent like a run start; one transaction writes the
    /// receipt, the room, the owner's membership, the owner's listing entry and the
    /// owner's acceptance of the first consent version.
    pub async fn create_room(
        &self,
        p: &Caller,
        key: &IdempotencyKey,
        req: CreateRoomRequest,
    ) -> Result<Mutation<RoomView>, ApiError> {
        p.require(&[ROOMS_MANAGE])?;
        check_principal(p)?;
        req.validate()?;
        let body = serde_json::to_value(&req).map_err(ApiError::internal)?;
        let hash = hash_parts(&["room.request.v1", &p.owner_hash(), OP_CREATE, &body.to_string()]);
        let rkey = receipt_key(&p.identity_hash(), OP_CREATE, key.as_str());
        let now = self.clock.now();
        let room = RoomRecord {
            room_id: RoomId::generate().to_string(),
            name: req.name.trim().to_owned(),
            description: req.description.as_ref().map(|d| d.trim().to_owned()).filter(|d| !d.is_empty()),
            owner_account: p.account_id.clone(),
            status: RoomStatus::Active,
            consent_version: FIRST_CONSENT,
            created_at: now,
            schema_version: BODY_VERSION,
            tenant_ref: room_tenant(p).tenant_ref().map(str::to_owned),
        };
        let consent = Consent::accepted(&room.room_id, &p.account_id, FIRST_CONSENT, rfc3339(now));
        let member = Membership {
            room_id: room.room_id.clone(),
            account_id: p.account_id.clone(),
            role: RoomRole::Owner,
            consent_version: FIRST_CONSENT,
            consent_receipt: consent.consent_receipt.clone(),
            accepted_at: consent.accepted_at.clone(),
            action_authority: false,
        };
        let entry = AccountRoom { account_id: p.account_id.clone(), room_id: room.room_id.clone() };
        let response = serde_json::to_value(Redacted::new(room_view(&room, &member, &p.account_id)))
            .map_err(ApiError::internal)?;
        let mut tx = Tx::new();
        tx.put(Role::Room, room.to_item()?, Cond::NotExists)
            .put(Role::Member, member.to_item(), Cond::NotExists)
            .put(Role::AccountEntry, entry.to_item(), Cond::NotExists)
            .put(Role::Consent, consent.to_item(), Cond::NotExists);
        let done = Completion {
            receipt_key: &rkey,
            request_hash: &hash,
            status: 201,
            response: &response,
            run_id: None,
            expires_at: self.receipt_expiry(),
        };
        match commit_once(&*self.store, self.clock.epoch(), done, tx).await? {
            Committed::Answered(m) => Ok(m),
            // The receipt was free, so a fresh room id met an existing item.
            Committed::Refused(_) => Err(broken("room id collision")),
        }
    }

    /// `GET /api/v1/rooms`: only rooms the linked account is a member of, in the caller's tenant,
    /// one page (after the `cursor` of the previous page, when given).
    pub async fn list_rooms(&self, p: &Caller, cursor: Option<&str>) -> Result<Redacted<RoomList>, ApiError> {
        p.require(&[ROOMS_READ])?;
        check_principal(p)?;
        let tenant = room_tenant(p);
        let after = rooms_cursor(cursor, &p.account_id)?;
        let (ids, next_cursor) = self.room_ids_page(&p.account_id, after.as_deref()).await?;
        let pairs = items::rooms_with_membership(&*self.store, &ids, &p.account_id).await?;
        let rooms = pairs
            .iter()
            .filter(|(room, _)| room.is_active() && tenant.admits(room))
            .map(|(room, member)| room_view(room, member, &p.account_id))
            .collect();
        let has_more = next_cursor.is_some();
        Ok(Redacted::new(RoomList {
            schema: RoomListSchemaName,
            rooms,
            has_more,
            next_cursor,
            flags: FalseFlags::default(),
        }))
    }

    /// One page of the account's listed room ids, and the cursor of the next page.
    pub(super) async fn room_ids_page(
        &self,
        account_id: &str,
        after: Option<&str>,
    ) -> Result<(Vec<String>, Option<String>), ApiError> {
        let (ids, has_more) = items::rooms_of_account(&*self.store, account_id, after, MAX_LISTED_ROOMS).await?;
        let next = ids.last().filter(|_| has_more).map(|last| page::encode(PagedList::Rooms, account_id, None, last));
        Ok((ids, next))
    }

    /// `GET /api/v1/rooms/{room_id}`: membership, tenant and policy checked; others' rooms
    /// (another tenant's too) are not found.
    pub async fn inspect_room(&self, actor: &Actor, room_id: &str) -> Result<Redacted<RoomView>, ApiError> {
        actor.require(&[ROOMS_READ])?;
        unlocked(actor.policy().rooms_locked)?;
        let (room, member) = self.room_and_member(room_id, actor).await?;
        Ok(Redacted::new(room_view(&room, &member, actor.account_id())))
    }

    /// `POST /api/v1/rooms/{room_id}/commands`: never executes anything.
    pub async fn room_command(&self, p: &Caller) -> Result<Value, ApiError> {
        p.require(&[ROOMS_MANAGE])?;
        Err(ApiError::CommandExecutionNotEnabled)
    }
}
