//! The room checks a source leans on: who may act on a room's sources (the active room's
//! owner, as its owner member), checked inside a write or read with the source, and the
//! active rooms of a member. Keys and conditions are the rooms kernel's, so the room's
//! item shapes are spelled once. Must not depend on `http`, `mcp` or any use-case module.

use super::super::accounts::account_key;
use super::super::rooms::{
    AccountRoom, ROOM_PREFIX, RoomTenant, account_room_key, member_is_owner, member_key, room_active,
    room_active_and_owned_by, room_key,
};
use super::super::tx::{Role, Tx};
use super::{SourceRecord, source_key};
use crate::error::ApiError;
use crate::store::{Item, Key, Store, StoreError};

/// The room is active and owned by `account`, and `account` is its owner member: who may
/// act on the room's sources. The same conditions as the write's check, read on the items.
fn owner_holds(room: Option<&Item>, member: Option<&Item>, account: &str) -> bool {
    room_active_and_owned_by(account).holds(room, 0) && member_is_owner().holds(member, 0)
}

/// Checks, inside the write, that the room is still active and owned by `account`
/// ([`Role::Room`]), with `tenant` that it belongs to that tenant, and, with
/// `with_member`, that `account` is still its owner member ([`Role::Member`]).
pub fn check_room_owner(tx: &mut Tx, room_id: &str, account: &str, with_member: bool, tenant: Option<&RoomTenant>) {
    let owned = room_active_and_owned_by(account);
    let cond = match tenant {
        Some(t) => crate::store::Cond::And(vec![owned, t.cond()]),
        None => owned,
    };
    tx.check(Role::Room, room_key(room_id), cond);
    if with_member {
        tx.check(Role::Member, member_key(room_id, account), member_is_owner());
    }
}

/// A source read with its room in one BatchGetItem.
#[derive(Debug, Clone)]
pub struct SourceInRoom {
    pub source: Option<SourceRecord>,
    /// The room is active, owned by the member account, who is its owner member.
    pub owner_holds: bool,
    /// The member account's item (its policy), when asked for.
    pub account: Option<Item>,
}

/// The source, its room and `account`'s membership (and with `with_account` the
/// account's item): one BatchGetItem.
pub async fn source_in_room(
    store: &dyn Store,
    room_id: &str,
    source_id: &str,
    account: &str,
    with_account: bool,
) -> Result<SourceInRoom, StoreError> {
    let mut keys = vec![source_key(room_id, source_id), room_key(room_id), member_key(room_id, account)];
    if with_account {
        keys.push(account_key(account));
    }
    let mut got = store.batch_get(&keys).await?.into_iter();
    let (source, room, member) = (got.next().flatten(), got.next().flatten(), got.next().flatten());
    Ok(SourceInRoom {
        source: source.as_ref().map(SourceRecord::from_item),
        owner_holds: owner_holds(room.as_ref(), member.as_ref(), account),
        account: got.next().flatten(),
    })
}

/// Whether the room is active, of `tenant` and owned by `account`, its owner member: one
/// BatchGetItem.
pub async fn room_owned_by(
    store: &dyn Store,
    room_id: &str,
    account: &str,
    tenant: &RoomTenant,
) -> Result<bool, StoreError> {
    let got = store.batch_get(&[room_key(room_id), member_key(room_id, account)]).await?;
    Ok(tenant.admits_item(got[0].as_ref()) && owner_holds(got[0].as_ref(), got[1].as_ref(), account))
}

/// The active rooms of `tenant` that `account` is a member of (at most `limit` listing
/// entries): a Query of the account's room entries, then one BatchGetItem of the rooms
/// and memberships. Starts after the room `after` when given; with the active ids comes
/// the last room id the page read when more entries follow it (where the next page starts).
pub async fn active_rooms_of_member(
    store: &dyn Store,
    account: &str,
    after: Option<&str>,
    limit: usize,
    tenant: &RoomTenant,
) -> Result<(Vec<String>, Option<String>), ApiError> {
    let after = after.map(|room_id| account_room_key(account, room_id).sk);
    let entries = store.query(&account_key(account).pk, ROOM_PREFIX, after.as_deref(), limit).await?;
    let ids: Vec<String> = entries.items.iter().filter_map(AccountRoom::from_item).map(|e| e.room_id).collect();
    let next = if entries.has_more { ids.last().cloned() } else { None };
    if ids.is_empty() {
        return Ok((ids, next));
    }
    let keys: Vec<Key> = ids.iter().flat_map(|id| [room_key(id), member_key(id, account)]).collect();
    let got = store.batch_get(&keys).await?;
    let active = ids
        .into_iter()
        .zip(got.chunks(2))
        .filter(|(_, pair)| {
            matches!(pair, [Some(room), Some(_)] if room_active().holds(Some(room), 0) && tenant.admits_item(Some(room)))
        })
        .map(|(id, _)| id)
        .collect();
    Ok((active, next))
}

#[cfg(test)]
mod tests {
    use super::super::super::attrs::{OWNER_ACCOUNT, ROLE, STATUS};
    use super::*;

    #[test]
    fn only_the_active_rooms_owner_member_acts_on_its_sources() {
        let item = |k: Key| Item::new(k.pk, k.sk);
        let room = |status: &str, owner: &str| item(room_key("r")).with_s(STATUS, status).with_s(OWNER_ACCOUNT, owner);
        let member = |role: &str| item(member_key("r", "a")).with_s(ROLE, role);
        for (r, m, holds) in [
            (Some(room("active", "a")), Some(member("owner")), true),
            (Some(room("active", "a")), Some(member("participant")), false),
            (Some(room("active", "b")), Some(member("owner")), false),
            (Some(room("archived", "a")), Some(member("owner")), false),
            (None, Some(member("owner")), false),
            (Some(room("active", "a")), None, false),
        ] {
            assert_eq!(owner_holds(r.as_ref(), m.as_ref(), "a"), holds, "{r:?} {m:?}");
        }
    }
}
