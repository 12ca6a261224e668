//! The room rows a room-bound turn rechecks (the run's run-room slot, its run-room
//! binding, the room, the caller's membership, the caller's account), read as the typed
//! values the source lane's rechecks need. Keys, attribute names and stored strings are
//! the rooms kernel's; these views only read them leniently (a damaged row reads as one
//! that fails its recheck, never as an error).
//! Must not depend on `http`, `mcp` or any use-case module.

use super::accounts::account_key;
use super::attrs::{
    BINDING_REF, CONSENT_RECEIPT, CONSENT_VERSION, KIND, OWNER_ACCOUNT, OWNER_HASH, ROLE, ROOM_ID, RUN_ID, opt, text,
};
use super::enum_text;
use super::rooms::{
    BindingKind, RoomTenant, bind_key, binding_active, member_key, room_active, room_key,
    run_room_slot as run_room_slot_key,
};
use crate::store::{Item, Key, Store, StoreError};

/// The one-active-run-room-binding slot of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRoomSlot {
    pub owner_hash: String,
    pub binding_ref: String,
    pub room_id: String,
}

impl RunRoomSlot {
    fn from_item(item: &Item) -> Self {
        RunRoomSlot {
            owner_hash: text(item, OWNER_HASH),
            binding_ref: text(item, BINDING_REF),
            room_id: text(item, ROOM_ID),
        }
    }
}

/// A run-room binding: active or not, whose and for which run, under which role and
/// consent identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRoomBinding {
    /// An active binding of the `run_room` kind.
    pub active_run_room: bool,
    pub owner_hash: String,
    pub run_id: String,
    pub room_id: String,
    pub role: Option<String>,
    pub consent_version: Option<i64>,
    pub consent_receipt: Option<String>,
}

impl RunRoomBinding {
    fn from_item(item: &Item) -> Self {
        RunRoomBinding {
            active_run_room: item.s(KIND) == Some(enum_text(&BindingKind::RunRoom).as_str())
                && binding_active().holds(Some(item), 0),
            owner_hash: text(item, OWNER_HASH),
            run_id: text(item, RUN_ID),
            room_id: text(item, ROOM_ID),
            role: opt(item, ROLE),
            consent_version: item.n(CONSENT_VERSION),
            consent_receipt: opt(item, CONSENT_RECEIPT),
        }
    }
}

/// The room as a bound turn sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundRoomRow {
    pub active: bool,
    pub owner_account: String,
    pub consent_version: Option<i64>,
}

/// The caller's membership as a bound turn sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundMember {
    pub role: Option<String>,
    pub consent_version: Option<i64>,
    pub consent_receipt: Option<String>,
}

/// The rows of one recheck, read together.
#[derive(Debug, Clone)]
pub struct BoundRoomRows {
    /// Only when read with the rows ([`bound_room_rows`] with a run id).
    pub slot: Option<RunRoomSlot>,
    pub binding: Option<RunRoomBinding>,
    pub room: Option<BoundRoomRow>,
    pub member: Option<BoundMember>,
    /// The caller's account item (its policy).
    pub account: Option<Item>,
}

/// The run's run-room slot: one GetItem.
pub async fn run_room_slot(store: &dyn Store, run_id: &str) -> Result<Option<RunRoomSlot>, StoreError> {
    Ok(store.get(&run_room_slot_key(run_id)).await?.as_ref().map(RunRoomSlot::from_item))
}

/// The binding, room, membership and account rows of a recheck, with the run's slot too
/// when `slot_of_run` names the run: one BatchGetItem. A room of another tenant than the
/// caller's reads as absent.
pub async fn bound_room_rows(
    store: &dyn Store,
    slot_of_run: Option<&str>,
    binding_ref: &str,
    room_id: &str,
    account: &str,
    tenant: &RoomTenant,
) -> Result<BoundRoomRows, StoreError> {
    let mut keys: Vec<Key> = slot_of_run.map(run_room_slot_key).into_iter().collect();
    keys.extend([bind_key(binding_ref), room_key(room_id), member_key(room_id, account), account_key(account)]);
    let mut got = store.batch_get(&keys).await?.into_iter();
    let slot = if slot_of_run.is_some() { got.next().flatten().as_ref().map(RunRoomSlot::from_item) } else { None };
    let (binding, room, member) = (got.next().flatten(), got.next().flatten(), got.next().flatten());
    Ok(BoundRoomRows {
        slot,
        binding: binding.as_ref().map(RunRoomBinding::from_item),
        room: room.as_ref().filter(|r| tenant.admits_item(Some(r))).map(|r| BoundRoomRow {
            active: room_active().holds(Some(r), 0),
            owner_account: text(r, OWNER_ACCOUNT),
            consent_version: r.n(CONSENT_VERSION),
        }),
        member: member.as_ref().map(|m| BoundMember {
            role: opt(m, ROLE),
            consent_version: m.n(CONSENT_VERSION),
            consent_receipt: opt(m, CONSENT_RECEIPT),
        }),
        account: got.next().flatten(),
    })
}
