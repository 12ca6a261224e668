//! The named reads of the room use cases: each is one store request, so the documented
//! round trips are these calls. Must not depend on the use cases above the kernel.

use super::*;
use crate::domain::room::SnapshotMessage;
use crate::domain::run::Run;
use crate::error::ApiError;
use crate::service::records::{run_from_item, run_key};
use crate::store::{Item, Key, Store};

// ---------- named reads ----------

/// The room ids listed under an account (one page, after the room `after` when given),
/// and whether more exist.
pub async fn rooms_of_account(
    store: &dyn Store,
    account_id: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<(Vec<String>, bool), ApiError> {
    let after = after.map(|room_id| account_room_key(account_id, room_id).sk);
    let page = store.query(&account_key(account_id).pk, ROOM_PREFIX, after.as_deref(), limit).await?;
    Ok((page.items.iter().filter_map(AccountRoom::from_item).map(|e| e.room_id).collect(), page.has_more))
}

/// Each room with the account's membership, in one read; a room without a live
/// membership (a stale listing entry) is left out.
pub async fn rooms_with_membership(
    store: &dyn Store,
    room_ids: &[String],
    account_id: &str,
) -> Result<Vec<(RoomRecord, Membership)>, ApiError> {
    if room_ids.is_empty() {
        return Ok(vec![]);
    }
    let keys: Vec<Key> = room_ids.iter().flat_map(|id| [room_key(id), member_key(id, account_id)]).collect();
    let got = store.batch_get(&keys).await?;
    let mut out = vec![];
    for pair in got.chunks(2) {
        if let [Some(room), Some(member)] = pair {
            out.push((RoomRecord::from_item(room)?, Membership::from_item(member)));
        }
    }
    Ok(out)
}

/// One room and the account's membership of it, in one read.
pub async fn room_and_membership(
    store: &dyn Store,
    room_id: &str,
    account_id: &str,
) -> Result<(Option<RoomRecord>, Option<Membership>), ApiError> {
    let got = store.batch_get(&[room_key(room_id), member_key(room_id, account_id)]).await?;
    let room = got[0].as_ref().map(RoomRecord::from_item).transpose()?;
    Ok((room, got[1].as_ref().map(Membership::from_item)))
}

pub async fn read_room(store: &dyn Store, room_id: &str) -> Result<Option<RoomRecord>, ApiError> {
    store.get(&room_key(room_id)).await?.as_ref().map(RoomRecord::from_item).transpose()
}

/// The members of a room (one page, after the member `after` when given), and whether
/// more exist.
pub async fn members_of_room(
    store: &dyn Store,
    room_id: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<(Vec<Membership>, bool), ApiError> {
    let after = after.map(|account_id| member_key(room_id, account_id).sk);
    let page = store.query(&room_key(room_id).pk, MEMBER_PREFIX, after.as_deref(), limit).await?;
    Ok((page.items.iter().map(Membership::from_item).collect(), page.has_more))
}

/// A room, the caller's membership and another account's membership, in one read.
pub async fn room_and_two_members(
    store: &dyn Store,
    room_id: &str,
    account_id: &str,
    other_account: &str,
) -> Result<(Option<RoomRecord>, Option<Membership>, Option<Membership>), ApiError> {
    let keys = [room_key(room_id), member_key(room_id, account_id), member_key(room_id, other_account)];
    let got = store.batch_get(&keys).await?;
    let room = got[0].as_ref().map(RoomRecord::from_item).transpose()?;
    Ok((room, got[1].as_ref().map(Membership::from_item), got[2].as_ref().map(Membership::from_item)))
}

/// A live invite (not expired at `now`).
pub async fn live_invite(store: &dyn Store, code_hash: &str, now: i64) -> Result<Option<Invite>, ApiError> {
    let item = store.get(&invite_key(code_hash)).await?;
    Ok(item.filter(|i| !i.is_expired(now)).as_ref().and_then(Invite::from_item))
}

pub async fn read_binding(store: &dyn Store, binding_ref: &str) -> Result<Option<Binding>, ApiError> {
    store.get(&bind_key(binding_ref)).await?.as_ref().map(Binding::from_item).transpose()
}

pub async fn read_observer(store: &dyn Store, observer_ref: &str) -> Result<Option<ObserverRecord>, ApiError> {
    store.get(&observer_key(observer_ref)).await?.as_ref().map(ObserverRecord::from_item).transpose()
}

/// What a bind reads in one request: the run, the room, the caller's membership, the
/// run's room slot.
pub struct BindReads {
    pub run: Option<Run>,
    pub room: Option<RoomRecord>,
    pub member: Option<Membership>,
    pub slot: Option<RunRoomSlot>,
}

pub async fn bind_reads(
    store: &dyn Store,
    run_id: &str,
    room_id: &str,
    account_id: &str,
) -> Result<BindReads, ApiError> {
    let keys = [run_key(run_id), room_key(room_id), member_key(room_id, account_id), run_room_slot(run_id)];
    let got = store.batch_get(&keys).await?;
    Ok(BindReads {
        run: got[0].as_ref().map(run_from_item).transpose()?,
        room: got[1].as_ref().map(RoomRecord::from_item).transpose()?,
        member: got[2].as_ref().map(Membership::from_item),
        slot: got[3].as_ref().map(RunRoomSlot::from_item).transpose()?,
    })
}

/// What a chat claim reads in one request: the claim issued to `account_id` under
/// `tenant` (live at `now`), the run, and whether the run's chat slot is taken.
pub struct ClaimReads {
    pub claim: Option<Claim>,
    pub run: Option<Run>,
    pub slot_taken: bool,
}

pub async fn claim_reads(
    store: &dyn Store,
    claim_hash: &str,
    account_id: &str,
    tenant: &RoomTenant,
    run_id: &str,
    now: i64,
) -> Result<ClaimReads, ApiError> {
    let got = store.batch_get(&[claim_key(claim_hash), run_key(run_id), run_chat_slot(run_id)]).await?;
    let claim = got[0]
        .as_ref()
        .filter(|c| Claim::account_of(c) == Some(account_id) && tenant.admits_item(Some(c)) && !c.is_expired(now));
    Ok(ClaimReads {
        claim: claim.map(Claim::from_item).transpose()?,
        run: got[1].as_ref().map(run_from_item).transpose()?,
        slot_taken: got[2].is_some(),
    })
}

/// A binding and its run, in one read.
pub async fn binding_and_run(
    store: &dyn Store,
    binding_ref: &str,
    run_id: &str,
) -> Result<(Option<Binding>, Option<Run>), ApiError> {
    let got = store.batch_get(&[bind_key(binding_ref), run_key(run_id)]).await?;
    let binding = got[0].as_ref().map(Binding::from_item).transpose()?;
    Ok((binding, got[1].as_ref().map(run_from_item).transpose()?))
}

/// The stored snapshot of a run's active chat binding, for the turn's conversation
/// context: the run-chat slot (`slot`, when the caller already read it with the principal,
/// else one GetItem), then, only for a chat-bound run, its binding (GetItem) and the
/// observer with its snapshot (BatchGetItem). Nothing unless every link still holds: the
/// slot and binding of this owner and run, the binding active, the observer bound to it.
pub async fn bound_chat_snapshot(
    store: &dyn Store,
    slot: Option<Option<Item>>,
    run_id: &str,
    owner_hash: &str,
) -> Result<Vec<SnapshotMessage>, ApiError> {
    let slot = match slot {
        Some(item) => item,
        None => store.get(&run_chat_slot(run_id)).await?,
    };
    let Some(slot) = slot.as_ref().map(RunChatSlot::from_item).transpose()? else { return Ok(vec![]) };
    if slot.owner_hash != owner_hash {
        return Ok(vec![]);
    }
    let Some(binding) = read_binding(store, &slot.binding_ref).await? else { return Ok(vec![]) };
    let BindingTarget::Chat { observer_ref } = &binding.target else { return Ok(vec![]) };
    if !binding.is_active() || binding.owner_hash != owner_hash || binding.run_id != run_id {
        return Ok(vec![]);
    }
    let got = store.batch_get(&[observer_key(observer_ref), snapshot_key(observer_ref)]).await?;
    let observer = got[0].as_ref().map(ObserverRecord::from_item).transpose()?;
    let bound = observer.is_some_and(|o| {
        o.status == ObserverState::Bound && o.binding_ref.as_deref() == Some(slot.binding_ref.as_str())
    });
    if !bound {
        return Ok(vec![]);
    }
    Ok(got[1].as_ref().map(Snapshot::from_item).transpose()?.map(|s| s.messages).unwrap_or_default())
}
