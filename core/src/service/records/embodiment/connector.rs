//! The binding's pending-work marker and what a connector request reads once, as stored.
//! Knows no use case.

use serde::{Deserialize, Serialize};

use super::*;

// ---------- the pending-work marker ----------

/// Whether a binding's connector has work that only a query of its open workflows shows.
/// Every workflow write outside the connector's poll sets it pending; a poll whose query
/// found nothing to hand out clears it, conditional on its token (so a write in between
/// keeps it pending), with the answer it computed: no command, this cancel list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkMarker {
    pub pending: bool,
    /// The epoch the cleared answer was computed at (another epoch reads as pending).
    pub epoch: u64,
    /// The sticky cancel list of that answer.
    pub cancel: Vec<String>,
    /// The stored token (None: no marker yet).
    #[serde(skip)]
    pub token: Option<String>,
}

impl WorkMarker {
    pub(super) fn pending_item(binding_id: &str) -> Item {
        let k = work_key(binding_id);
        let marker = WorkMarker { pending: true, ..WorkMarker::default() };
        Item::new(k.pk, k.sk).with_s(BODY, json(&marker)).with_s(WORK_TOKEN, random_hex(8))
    }

    /// The marker as read (absent or unreadable: pending).
    pub fn from_item(item: Option<&Item>) -> Self {
        let read = item.and_then(|i| Some((i.s(WORK_TOKEN)?, serde_json::from_str::<WorkMarker>(i.s(BODY)?).ok()?)));
        match read {
            Some((token, m)) => WorkMarker { token: Some(token.to_owned()), ..m },
            None => WorkMarker { pending: true, ..WorkMarker::default() },
        }
    }

    /// The cancel list of the standing answer at `epoch`, when nothing is pending.
    pub fn idle_at(&self, epoch: u64) -> Option<&[String]> {
        (!self.pending && self.token.is_some() && self.epoch == epoch).then_some(self.cancel.as_slice())
    }

    /// Clears the marker with the answer of a poll at `epoch`, conditional on the token read.
    pub fn clear(&self, tx: &mut Tx, binding_id: &str, epoch: u64, cancel: Vec<String>) {
        let k = work_key(binding_id);
        let marker = WorkMarker { pending: false, epoch, cancel, token: None };
        let item = Item::new(k.pk, k.sk).with_s(BODY, json(&marker)).with_s(WORK_TOKEN, random_hex(8));
        let cond = match &self.token {
            Some(t) => Cond::eq_s(WORK_TOKEN, t.clone()),
            None => Cond::NotExists,
        };
        tx.put(Role::WorkMarker, item, cond);
    }
}

/// What a connector request reads once: its binding, room, the owner's membership and
/// account, and the binding's work marker (one BatchGetItem).
pub struct ConnectorView {
    pub binding: Option<EnvBinding>,
    /// The room is active and owned by the pairing's owner, who is its owner member.
    pub owner_holds: bool,
    pub account: Option<Item>,
    pub work: WorkMarker,
}

pub async fn connector_view(store: &dyn Store, lookup: &CredentialLookup) -> Result<ConnectorView, ApiError> {
    let (room_id, owner) = (&lookup.room_id, &lookup.owner_account);
    let keys = [
        env_key(room_id, &lookup.binding_id),
        room_key(room_id),
        member_key(room_id, owner),
        account_key(owner),
        work_key(&lookup.binding_id),
    ];
    let mut got = store.batch_get(&keys).await?.into_iter();
    let mut next = || got.next().flatten();
    let (binding, room, member, account, work) = (next(), next(), next(), next(), next());
    Ok(ConnectorView {
        binding: binding.as_ref().map(EnvBinding::from_item).transpose()?,
        owner_holds: room_active_and_owned_by(owner).holds(room.as_ref(), 0)
            && member_is_owner().holds(member.as_ref(), 0),
        account,
        work: WorkMarker::from_item(work.as_ref()),
    })
}
