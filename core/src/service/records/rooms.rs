//! The room items of the table: keys, one typed record per kind (`to_item`/`from_item`),
//! the stored statuses as serde enums, the conditions room writes are guarded by, and
//! the named reads of the room use cases. Stored shapes are a compatibility promise:
//! attribute names, key strings and body fields are exactly what the room service has
//! always written (`core/tests/fixtures/items/rooms/` holds captured items).
//! Knows the store and the domain values; must not depend on the use cases above it.

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{BODY, event_from_item, event_sk, run_from_item, run_key};
use crate::domain::event::Event;
use crate::domain::hash_parts;
use crate::domain::room::{RoomRole, SnapshotMessage};
use crate::domain::run::Run;
use crate::error::ApiError;
use crate::store::{Cond, EXPIRES_AT, Item, Key, Store};

// ---------- keys ----------

const ROOM_PREFIX: &str = "ROOM#";
const MEMBER_PREFIX: &str = "MEM#";

pub fn room_key(room_id: &str) -> Key {
    Key::new(format!("{ROOM_PREFIX}{room_id}"), "ROOM")
}
pub fn member_key(room_id: &str, account_id: &str) -> Key {
    Key::new(format!("{ROOM_PREFIX}{room_id}"), format!("{MEMBER_PREFIX}{account_id}"))
}
/// The durable consent receipt of one member for one consent version.
pub fn consent_key(room_id: &str, account_id: &str, version: u32) -> Key {
    Key::new(format!("{ROOM_PREFIX}{room_id}"), format!("CONSENT#{account_id}#{version:010}"))
}
/// The account's listing entry of a room it belongs to (written with the membership).
pub fn account_room_key(account_id: &str, room_id: &str) -> Key {
    Key::new(account_pk(account_id), format!("{ROOM_PREFIX}{room_id}"))
}
/// The one-active-run-room-binding slot of a run.
pub fn run_room_slot(run_id: &str) -> Key {
    Key::new(format!("RUNROOM#{run_id}"), "SLOT")
}
/// The one-active-run-chat-binding slot of a run.
pub fn run_chat_slot(run_id: &str) -> Key {
    Key::new(format!("RUNCHAT#{run_id}"), "SLOT")
}
/// A binding, by the hash of its opaque reference (the reference itself is never stored).
pub fn bind_key(binding_ref: &str) -> Key {
    Key::new(format!("BIND#{}", hash_parts(&["room-binding.v1", binding_ref])), "BIND")
}
/// A chat claim handle, by its hash (TTL; consumed by a conditional delete).
pub fn claim_key(handle_hash: &str) -> Key {
    Key::new(format!("CLAIM#{handle_hash}"), "CLAIM")
}
/// An invite, by the hash of its show-once code (TTL; consumed by a conditional delete).
pub fn invite_key(code_hash: &str) -> Key {
    Key::new(format!("INVITE#{code_hash}"), "INVITE")
}
/// The stored form of an invite code.
pub fn invite_code_hash(code: &str) -> String {
    hash_parts(&["room-invite.v1", code])
}
pub fn observer_key(observer_ref: &str) -> Key {
    Key::new(format!("OBS#{observer_ref}"), "OBS")
}
pub fn snapshot_key(observer_ref: &str) -> Key {
    Key::new(format!("OBS#{observer_ref}"), "SNAP")
}

fn account_pk(account_id: &str) -> String {
    format!("ACCOUNT#{account_id}")
}

// ---------- attribute names (the only place they are spelled) ----------

const OWNER_ACCOUNT: &str = "owner_account";
const STATUS: &str = "status";
const CONSENT_VERSION: &str = "consent_version";
const CONSENT_RECEIPT: &str = "consent_receipt";
const ACCEPTED_AT: &str = "accepted_at";
const ROLE: &str = "role";
const ROOM_ID: &str = "room_id";
const RUN_ID: &str = "run_id";
const OWNER_HASH: &str = "owner_hash";
const BINDING_REF: &str = "binding_ref";
const KIND: &str = "kind";
const CREATED_AT: &str = "created_at";
const REVOKED_AT: &str = "revoked_at";
const OBSERVER_REF: &str = "observer_ref";
const ACCOUNT_ID: &str = "account_id";
const CREATED_BY: &str = "created_by";

fn broken(what: &'static str) -> ApiError {
    ApiError::internal(std::io::Error::other(what))
}

/// The stored string of a serde enum value (`"active"`, `"run_room"`, ...).
fn tag(v: &impl Serialize) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

fn untag<T: DeserializeOwned>(s: Option<&str>, what: &'static str) -> Result<T, ApiError> {
    serde_json::from_value(serde_json::Value::String(s.ok_or_else(|| broken(what))?.to_owned()))
        .map_err(|_| broken(what))
}

fn body<T: DeserializeOwned>(item: &Item, what: &'static str) -> Result<T, ApiError> {
    serde_json::from_str(item.s(BODY).ok_or_else(|| broken(what))?).map_err(ApiError::internal)
}

fn text(v: &impl Serialize) -> Result<String, ApiError> {
    serde_json::to_string(v).map_err(ApiError::internal)
}

fn s_or_empty(item: &Item, name: &str) -> String {
    item.s(name).unwrap_or_default().to_owned()
}

/// The version of a stored body. Version 1 is also the shape written before bodies
/// carried the field, hence the default.
pub const BODY_VERSION: u32 = 1;

fn first_version() -> u32 {
    1
}

// ---------- rooms, memberships, consent receipts, listing entries ----------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoomStatus {
    Active,
    Closed,
}

/// The room item: its body, with the owner, status and consent version also as
/// attributes (conditions and the source lane read those).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomRecord {
    pub room_id: String,
    pub name: String,
    pub description: Option<String>,
    pub owner_account: String,
    pub status: RoomStatus,
    pub consent_version: u32,
    pub created_at: DateTime<Utc>,
    #[serde(default = "first_version")]
    pub schema_version: u32,
}

impl RoomRecord {
    pub fn is_active(&self) -> bool {
        self.status == RoomStatus::Active
    }

    pub fn to_item(&self) -> Result<Item, ApiError> {
        let k = room_key(&self.room_id);
        Ok(Item::new(k.pk, k.sk)
            .with_s(OWNER_ACCOUNT, &self.owner_account)
            .with_s(STATUS, tag(&self.status))
            .with_n(CONSENT_VERSION, self.consent_version as i64)
            .with_s(BODY, text(self)?))
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        body(item, "room without body")
    }
}

/// One account's membership of a room: its role and the consent version it accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub room_id: String,
    pub account_id: String,
    pub role: RoomRole,
    /// 0 when none was ever recorded (never current).
    pub consent_version: u32,
    pub consent_receipt: String,
    pub accepted_at: String,
}

impl Membership {
    pub fn to_item(&self) -> Item {
        let k = member_key(&self.room_id, &self.account_id);
        Item::new(k.pk, k.sk)
            .with_s(ROLE, tag(&self.role))
            .with_n(CONSENT_VERSION, self.consent_version as i64)
            .with_s(CONSENT_RECEIPT, &self.consent_receipt)
            .with_s(ACCEPTED_AT, &self.accepted_at)
    }

    pub fn from_item(item: &Item) -> Self {
        Membership {
            room_id: item.pk.trim_start_matches(ROOM_PREFIX).to_owned(),
            account_id: item.sk.trim_start_matches(MEMBER_PREFIX).to_owned(),
            // Only "owner" grants the owner's role; anything else is a member.
            role: if item.s(ROLE) == Some("owner") { RoomRole::Owner } else { RoomRole::Member },
            consent_version: item.n(CONSENT_VERSION).and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
            consent_receipt: s_or_empty(item, CONSENT_RECEIPT),
            accepted_at: s_or_empty(item, ACCEPTED_AT),
        }
    }
}

/// The durable receipt of one member's acceptance of one consent version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consent {
    pub room_id: String,
    pub account_id: String,
    pub version: u32,
    pub consent_receipt: String,
    pub accepted_at: String,
}

impl Consent {
    /// The opaque reference of a member's acceptance of a version (stable: the same
    /// acceptance always has the same reference).
    pub fn receipt_ref(room_id: &str, account_id: &str, version: u32) -> String {
        format!("consent_{}", &hash_parts(&["room-consent.v1", room_id, account_id, &version.to_string()])[..24])
    }

    pub fn to_item(&self) -> Item {
        let k = consent_key(&self.room_id, &self.account_id, self.version);
        Item::new(k.pk, k.sk).with_s(CONSENT_RECEIPT, &self.consent_receipt).with_s(ACCEPTED_AT, &self.accepted_at)
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        let rest = item.sk.strip_prefix("CONSENT#").ok_or_else(|| broken("not a consent receipt"))?;
        let (account_id, version) = rest.rsplit_once('#').ok_or_else(|| broken("not a consent receipt"))?;
        Ok(Consent {
            room_id: item.pk.trim_start_matches(ROOM_PREFIX).to_owned(),
            account_id: account_id.to_owned(),
            version: version.parse().map_err(|_| broken("not a consent receipt"))?,
            consent_receipt: s_or_empty(item, CONSENT_RECEIPT),
            accepted_at: s_or_empty(item, ACCEPTED_AT),
        })
    }
}

/// The listing entry of a room under an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRoom {
    pub account_id: String,
    pub room_id: String,
}

impl AccountRoom {
    pub fn to_item(&self) -> Item {
        let k = account_room_key(&self.account_id, &self.room_id);
        Item::new(k.pk, k.sk).with_s(ROOM_ID, &self.room_id)
    }

    pub fn from_item(item: &Item) -> Option<Self> {
        Some(AccountRoom {
            account_id: item.pk.trim_start_matches("ACCOUNT#").to_owned(),
            room_id: item.s(ROOM_ID)?.to_owned(),
        })
    }
}

/// An invite: which room, who issued it, until when (TTL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invite {
    pub code_hash: String,
    pub room_id: String,
    pub created_by: String,
    pub expires_at: i64,
}

impl Invite {
    pub fn key(&self) -> Key {
        invite_key(&self.code_hash)
    }

    pub fn to_item(&self) -> Item {
        let k = self.key();
        Item::new(k.pk, k.sk)
            .with_s(ROOM_ID, &self.room_id)
            .with_s(CREATED_BY, &self.created_by)
            .with_n(EXPIRES_AT, self.expires_at)
    }

    pub fn from_item(item: &Item) -> Option<Self> {
        Some(Invite {
            code_hash: item.pk.trim_start_matches("INVITE#").to_owned(),
            room_id: item.s(ROOM_ID)?.to_owned(),
            created_by: s_or_empty(item, CREATED_BY),
            expires_at: item.n(EXPIRES_AT).unwrap_or(i64::MAX),
        })
    }
}

// ---------- slots and bindings ----------

/// The run-room slot: which binding holds the run, for which room and owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRoomSlot {
    pub run_id: String,
    pub binding_ref: String,
    pub room_id: String,
    pub owner_hash: String,
}

impl RunRoomSlot {
    pub fn to_item(&self) -> Item {
        let k = run_room_slot(&self.run_id);
        Item::new(k.pk, k.sk)
            .with_s(BINDING_REF, &self.binding_ref)
            .with_s(ROOM_ID, &self.room_id)
            .with_s(OWNER_HASH, &self.owner_hash)
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        Ok(RunRoomSlot {
            run_id: item.pk.trim_start_matches("RUNROOM#").to_owned(),
            binding_ref: item.s(BINDING_REF).ok_or_else(|| broken("slot without binding"))?.to_owned(),
            room_id: s_or_empty(item, ROOM_ID),
            owner_hash: s_or_empty(item, OWNER_HASH),
        })
    }
}

/// The run-chat slot: which claimed chat binding holds the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunChatSlot {
    pub run_id: String,
    pub binding_ref: String,
    pub owner_hash: String,
}

impl RunChatSlot {
    pub fn to_item(&self) -> Item {
        let k = run_chat_slot(&self.run_id);
        Item::new(k.pk, k.sk).with_s(BINDING_REF, &self.binding_ref).with_s(OWNER_HASH, &self.owner_hash)
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        Ok(RunChatSlot {
            run_id: item.pk.trim_start_matches("RUNCHAT#").to_owned(),
            binding_ref: item.s(BINDING_REF).ok_or_else(|| broken("slot without binding"))?.to_owned(),
            owner_hash: s_or_empty(item, OWNER_HASH),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingKind {
    RunRoom,
    RunChat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingState {
    Active,
    /// Permanent: a withdrawn binding is marked, never deleted.
    Revoked,
}

/// What a binding binds the run to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindingTarget {
    /// A room, with the member's role and the consent it bound under.
    Room { room_id: String, role: RoomRole, consent_version: u32, consent_receipt: String },
    /// A browser chat, through its observer.
    Chat { observer_ref: String },
}

/// A run-room or run-chat binding, stored under the hash of its reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub owner_hash: String,
    pub state: BindingState,
    pub run_id: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
    pub target: BindingTarget,
}

impl Binding {
    pub fn kind(&self) -> BindingKind {
        match self.target {
            BindingTarget::Room { .. } => BindingKind::RunRoom,
            BindingTarget::Chat { .. } => BindingKind::RunChat,
        }
    }

    pub fn is_active(&self) -> bool {
        self.state == BindingState::Active
    }

    /// The slot this binding holds (or held) on its run.
    pub fn slot_key(&self) -> Key {
        match self.kind() {
            BindingKind::RunRoom => run_room_slot(&self.run_id),
            BindingKind::RunChat => run_chat_slot(&self.run_id),
        }
    }

    pub fn to_item(&self, binding_ref: &str) -> Item {
        let k = bind_key(binding_ref);
        let mut item = Item::new(k.pk, k.sk)
            .with_s(KIND, tag(&self.kind()))
            .with_s(OWNER_HASH, &self.owner_hash)
            .with_s(STATUS, tag(&self.state))
            .with_s(RUN_ID, &self.run_id);
        item = match &self.target {
            BindingTarget::Room { room_id, role, consent_version, consent_receipt } => item
                .with_s(ROOM_ID, room_id)
                .with_s(ROLE, tag(role))
                .with_n(CONSENT_VERSION, *consent_version as i64)
                .with_s(CONSENT_RECEIPT, consent_receipt),
            BindingTarget::Chat { observer_ref } => item.with_s(OBSERVER_REF, observer_ref),
        };
        item = item.with_s(CREATED_AT, &self.created_at);
        match &self.revoked_at {
            Some(at) => item.with_s(REVOKED_AT, at),
            None => item,
        }
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        let kind: BindingKind = untag(item.s(KIND), "binding of an unknown kind")?;
        let target = match kind {
            BindingKind::RunRoom => BindingTarget::Room {
                room_id: s_or_empty(item, ROOM_ID),
                role: if item.s(ROLE) == Some("owner") { RoomRole::Owner } else { RoomRole::Member },
                consent_version: item.n(CONSENT_VERSION).and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
                consent_receipt: s_or_empty(item, CONSENT_RECEIPT),
            },
            BindingKind::RunChat => BindingTarget::Chat { observer_ref: s_or_empty(item, OBSERVER_REF) },
        };
        Ok(Binding {
            owner_hash: s_or_empty(item, OWNER_HASH),
            state: untag(item.s(STATUS), "binding without a status")?,
            run_id: s_or_empty(item, RUN_ID),
            created_at: s_or_empty(item, CREATED_AT),
            revoked_at: item.s(REVOKED_AT).map(str::to_owned),
            target,
        })
    }
}

// ---------- observers, claims and snapshots ----------

/// The stored states of an observer (expiry and revocation are read, not stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObserverState {
    AwaitingClaim,
    Bound,
    Disconnected,
}

/// The stored observer record (its claim item carries a copy until consumed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObserverRecord {
    pub observer_ref: String,
    pub account_id: String,
    pub chat_hash: String,
    pub claim_hash: String,
    pub status: ObserverState,
    pub binding_ref: Option<String>,
    pub run_id: Option<String>,
    pub snapshot_ref: Option<String>,
    pub snapshot_message_count: u32,
    pub snapshot_char_count: u32,
    pub created_at: DateTime<Utc>,
    pub claim_expires_at: i64,
    #[serde(default = "first_version")]
    pub schema_version: u32,
}

impl ObserverRecord {
    pub fn to_item(&self) -> Result<Item, ApiError> {
        let k = observer_key(&self.observer_ref);
        Ok(Item::new(k.pk, k.sk)
            .with_s(STATUS, tag(&self.status))
            .with_s(ACCOUNT_ID, &self.account_id)
            .with_s(BODY, text(self)?))
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        body(item, "observer without body")
    }
}

/// The claim item of an unclaimed observer: its account, and a copy of the observer.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub observer: ObserverRecord,
    pub expires_at: i64,
}

impl Claim {
    pub fn to_item(&self) -> Result<Item, ApiError> {
        let k = claim_key(&self.observer.claim_hash);
        Ok(Item::new(k.pk, k.sk)
            .with_s(ACCOUNT_ID, &self.observer.account_id)
            .with_s(OBSERVER_REF, &self.observer.observer_ref)
            .with_s(BODY, text(&self.observer)?)
            .with_n(EXPIRES_AT, self.expires_at))
    }

    /// The account the claim was issued to, from the attribute its delete is guarded on.
    pub fn account_of(item: &Item) -> Option<&str> {
        item.s(ACCOUNT_ID)
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        Ok(Claim { observer: body(item, "claim without body")?, expires_at: item.n(EXPIRES_AT).unwrap_or(0) })
    }
}

/// The redacted chat snapshot kept with an observer (its body is the message array).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub observer_ref: String,
    pub messages: Vec<SnapshotMessage>,
}

impl Snapshot {
    pub fn to_item(&self) -> Result<Item, ApiError> {
        let k = snapshot_key(&self.observer_ref);
        Ok(Item::new(k.pk, k.sk).with_s(BODY, text(&self.messages)?))
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        Ok(Snapshot {
            observer_ref: item.pk.trim_start_matches("OBS#").to_owned(),
            messages: body(item, "snapshot without body")?,
        })
    }
}

// ---------- conditions ----------

/// The room (or membership) still has this consent version.
pub fn consent_is(version: u32) -> Cond {
    Cond::eq_n(CONSENT_VERSION, version as i64)
}

/// The binding is still active.
pub fn binding_active() -> Cond {
    Cond::eq_s(STATUS, tag(&BindingState::Active))
}

/// A slot naming another binding is never freed; a missing slot does not block cleanup.
pub fn slot_free_or_held_by(binding_ref: &str) -> Cond {
    Cond::Or(vec![Cond::NotExists, Cond::eq_s(BINDING_REF, binding_ref)])
}

/// The claim still exists and was issued to this account.
pub fn claim_held_by(account_id: &str) -> Cond {
    Cond::And(vec![Cond::Exists, Cond::eq_s(ACCOUNT_ID, account_id)])
}

/// The observer is still in this state.
pub fn observer_in(state: ObserverState) -> Cond {
    Cond::eq_s(STATUS, tag(&state))
}

/// The run still belongs to this owner. A room write guards the run item with it, so a
/// condition on the run's attributes is spelled beside the run key, not in the use case.
pub fn run_owned_by(owner_hash: &str) -> Cond {
    Cond::eq_s(OWNER_HASH, owner_hash)
}

// ---------- named reads ----------

/// The room ids listed under an account (one page), and whether more exist.
pub async fn rooms_of_account(
    store: &dyn Store,
    account_id: &str,
    limit: usize,
) -> Result<(Vec<String>, bool), ApiError> {
    let page = store.query(&account_pk(account_id), ROOM_PREFIX, None, limit).await?;
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

/// The members of a room (one page).
pub async fn members_of_room(store: &dyn Store, room_id: &str, limit: usize) -> Result<Vec<Membership>, ApiError> {
    let page = store.query(&room_key(room_id).pk, MEMBER_PREFIX, None, limit).await?;
    Ok(page.items.iter().map(Membership::from_item).collect())
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

/// What a chat claim reads in one request: the claim issued to `account_id` (live at
/// `now`), the run, and whether the run's chat slot is taken.
pub struct ClaimReads {
    pub claim: Option<Claim>,
    pub run: Option<Run>,
    pub slot_taken: bool,
}

pub async fn claim_reads(
    store: &dyn Store,
    claim_hash: &str,
    account_id: &str,
    run_id: &str,
    now: i64,
) -> Result<ClaimReads, ApiError> {
    let got = store.batch_get(&[claim_key(claim_hash), run_key(run_id), run_chat_slot(run_id)]).await?;
    let claim = got[0].as_ref().filter(|c| Claim::account_of(c) == Some(account_id) && !c.is_expired(now));
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

/// A page of a run's events after `after_seq` (0: from the start), and whether more exist.
pub async fn run_events_after(
    store: &dyn Store,
    run_id: &str,
    after_seq: u64,
    limit: usize,
) -> Result<(Vec<Event>, bool), ApiError> {
    let after = (after_seq > 0).then(|| event_sk(after_seq));
    let page = store.query(&run_key(run_id).pk, "EVT#", after.as_deref(), limit).await?;
    Ok((page.items.iter().map(event_from_item).collect::<Result<_, _>>()?, page.has_more))
}
