//! The environment binding (one action-connector pairing of a room and world) and the
//! lookup of its connector credential, as stored. Knows no use case.

use serde::{Deserialize, Serialize};

use super::*;

// ---------- the environment binding ----------

/// One subject of the directory, with its native id (never shown northbound).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubjectEntry {
    pub subject_ref: String,
    pub native_id: String,
    pub display_name: String,
    pub online: bool,
    /// The player's block position as the connector last reported it (reach is counted from it).
    #[serde(default)]
    pub position: Option<[i32; 3]>,
}

/// A member's selected subject and its control lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selection {
    pub account_id: String,
    pub subject_ref: String,
    /// Epoch seconds.
    pub lease_until: i64,
}

/// A member's Emergency Stop of one subject: only a person clears it, in the browser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubjectStop {
    pub native_id: String,
    pub account_id: String,
    pub stopped_at: String,
}

/// The guard attribute a subject's stop sets on the binding item (a hash: native ids
/// are the connector's text and never become attribute names).
pub(super) fn subject_stop_attr(native_id: &str) -> String {
    let h = crate::domain::hash_parts(&["subject_stop.v1", native_id]);
    format!("subject_stop_{}", &h[..24])
}

/// What the registered connector declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredConnector {
    pub connector_name: String,
    pub connector_version: String,
    pub schema_hash: String,
    pub capabilities: Vec<String>,
    pub registered_at: String,
}

/// An environment binding as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvBinding {
    pub binding_id: String,
    pub room_id: String,
    pub world_id: String,
    pub owner_account: String,
    pub credential_hash: String,
    /// `active` or `revoked`.
    pub status: String,
    /// Raised by each registration (0: never registered).
    pub epoch: u64,
    pub connector: Option<RegisteredConnector>,
    /// Epoch seconds of the connector's last poll (written at most every few seconds).
    pub last_seen: i64,
    pub directory_generation: u64,
    pub subjects: Vec<SubjectEntry>,
    pub selections: Vec<Selection>,
    pub estop_generation: u64,
    pub estop_active: bool,
    /// The owner-set box every step must stay in (none: the world's bounds only).
    #[serde(default)]
    pub region: Option<RegionBox>,
    /// Members' Emergency Stops of one subject each (by native id, so a changed
    /// directory does not lift them); each is also a guard attribute of the item.
    #[serde(default)]
    pub subject_stops: Vec<SubjectStop>,
    pub created_at: String,
    /// The optimistic-concurrency revision every write is conditional on.
    #[serde(skip)]
    pub rev: i64,
}

impl EnvBinding {
    pub fn key(&self) -> Key {
        env_key(&self.room_id, &self.binding_id)
    }

    pub fn to_item(&self) -> Item {
        let k = self.key();
        let item = Item::new(k.pk, k.sk)
            .with_s(BODY, json(self))
            .with_n(REV, self.rev)
            .with_n(CONNECTOR_EPOCH, self.epoch as i64)
            .with_s(ESTOP_ACTIVE, flag(self.estop_active));
        self.subject_stops.iter().fold(item, |i, s| i.with_s(&subject_stop_attr(&s.native_id), flag(true)))
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        let b: EnvBinding = read(item, "environment binding")?;
        Ok(EnvBinding { rev: item.n(REV).unwrap_or(0), ..b })
    }

    pub fn is_active(&self) -> bool {
        self.status == "active"
    }

    /// The next revision of this binding (the caller changes its fields).
    pub fn next(&self) -> Self {
        EnvBinding { rev: self.rev + 1, ..self.clone() }
    }

    /// The binding's put, conditional on nobody having written it since `self` was read.
    pub fn write(&self, tx: &mut Tx, read_rev: i64) {
        tx.put(Role::EnvBinding, self.to_item(), unchanged_since(read_rev));
    }

    /// A check that the binding is still at revision `rev` when the write commits.
    pub fn check_unchanged(&self, tx: &mut Tx) {
        tx.check(Role::EnvBinding, self.key(), unchanged_since(self.rev));
    }

    pub fn selection_of(&self, account: &str) -> Option<&Selection> {
        self.selections.iter().find(|s| s.account_id == account)
    }

    pub fn subject(&self, subject_ref: &str) -> Option<&SubjectEntry> {
        self.subjects.iter().find(|s| s.subject_ref == subject_ref)
    }

    /// A member's Emergency Stop of this subject is active.
    pub fn subject_stopped(&self, native_id: &str) -> bool {
        self.subject_stops.iter().any(|s| s.native_id == native_id)
    }

    /// Another member holds `subject_ref` under a live lease at `now`.
    pub fn held_by_other(&self, subject_ref: &str, account: &str, now: i64) -> bool {
        self.selections.iter().any(|s| s.subject_ref == subject_ref && s.account_id != account && s.lease_until > now)
    }
}

/// Nobody wrote the item since revision `rev` (a new item: `rev` 0 and absent).
pub fn unchanged_since(rev: i64) -> Cond {
    if rev == 0 { Cond::NotExists } else { Cond::eq_n(REV, rev) }
}

/// The binding still admits writes of a connector at `epoch` (no newer registration).
pub fn at_epoch(epoch: u64) -> Cond {
    Cond::eq_n(CONNECTOR_EPOCH, epoch as i64)
}

/// No Emergency Stop is active on the binding.
pub fn not_stopped() -> Cond {
    Cond::eq_s(ESTOP_ACTIVE, flag(false))
}

/// Neither the binding's Emergency Stop nor one of the subject `native_id` is active.
pub fn not_stopped_for(native_id: &str) -> Cond {
    Cond::And(vec![not_stopped(), Cond::Missing(subject_stop_attr(native_id))])
}

/// The lookup from a credential hash to its binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialLookup {
    pub room_id: String,
    pub binding_id: String,
    pub owner_account: String,
}

impl CredentialLookup {
    pub fn to_item(&self, credential_hash: &str) -> Item {
        let k = credential_key(credential_hash);
        Item::new(k.pk, k.sk).with_s(BODY, json(self))
    }
    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        read(item, "connector credential lookup")
    }
}

/// A binding read with its room, the owner's membership and (with `with_account`) the
/// owner's account item: one BatchGetItem.
pub struct BindingInRoom {
    pub binding: Option<EnvBinding>,
    /// The room is active, of the caller's tenant and owned by `account`, who is its
    /// owner member.
    pub owner_holds: bool,
    pub account: Option<Item>,
}

pub async fn binding_in_room(
    store: &dyn Store,
    room_id: &str,
    binding_id: &str,
    account: &str,
    tenant: &RoomTenant,
    with_account: bool,
) -> Result<BindingInRoom, ApiError> {
    let mut keys = vec![env_key(room_id, binding_id), room_key(room_id), member_key(room_id, account)];
    if with_account {
        keys.push(account_key(account));
    }
    let mut got = store.batch_get(&keys).await?.into_iter();
    let (binding, room, member) = (got.next().flatten(), got.next().flatten(), got.next().flatten());
    Ok(BindingInRoom {
        binding: binding.as_ref().map(EnvBinding::from_item).transpose()?,
        owner_holds: tenant.admits_item(room.as_ref())
            && room_active_and_owned_by(account).holds(room.as_ref(), 0)
            && member_is_owner().holds(member.as_ref(), 0),
        account: got.next().flatten(),
    })
}

/// The environment bindings of a room (at most `limit`).
pub async fn bindings_of_room(store: &dyn Store, room_id: &str, limit: usize) -> Result<Vec<EnvBinding>, ApiError> {
    let page = store.query(&room_pk(room_id), ENV_PREFIX, None, limit).await?;
    page.items.iter().map(EnvBinding::from_item).collect()
}
