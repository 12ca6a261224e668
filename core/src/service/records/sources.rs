//! Room sources in the table: the source item (its credential and admission), the
//! one-time credential delivery, the bearer lookup, observations with their
//! request-identity markers, and the connection-health marker; the conditions that guard
//! them and the named reads over them. Also the few room, membership and account-listing
//! attributes a source leans on, read here from today's key strings so that the source
//! lane needs no other kernel file. Secrets are only ever hashes here.
//! Must not depend on `http`, `mcp` or any use-case module.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::account_key;
use super::tx::{Role, Tx};
use crate::domain::source::SourceStatus;
use crate::store::{Attr, Cond, EXPIRES_AT, Item, Key, Store, StoreError};

// ---------- keys ----------

const SOURCE_PREFIX: &str = "SRC#";

pub fn source_key(room_id: &str, source_id: &str) -> Key {
    Key::new(format!("ROOM#{room_id}"), format!("{SOURCE_PREFIX}{source_id}"))
}
/// A delivery handle, by its hash (TTL; consumed by a conditional delete).
pub fn delivery_key(handle_hash: &str) -> Key {
    Key::new(format!("SRCCLAIM#{handle_hash}"), "CLAIM")
}
/// The current bearer of a source, by its hash: how ingress finds the source.
pub fn bearer_key(bearer_hash: &str) -> Key {
    Key::new(format!("SRCBEARER#{bearer_hash}"), "BEARER")
}
// ---------- stored enums ----------

/// A serde enum as the plain string it is stored as (`awaiting_claim`, `pending`, ...).
pub(super) fn stored_str(v: &impl Serialize) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

/// The serde enum a stored string names, if any.
pub(super) fn parse_stored<T: DeserializeOwned>(s: Option<&str>) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(s?.to_owned())).ok()
}

fn flag(v: bool) -> &'static str {
    if v { "true" } else { "false" }
}

pub(super) fn set_s(item: &mut Item, name: &str, v: Option<&str>) {
    if let Some(v) = v {
        item.attrs.insert(name.to_owned(), Attr::S(v.to_owned()));
    }
}

fn set_n(item: &mut Item, name: &str, v: Option<i64>) {
    if let Some(v) = v {
        item.attrs.insert(name.to_owned(), Attr::N(v));
    }
}

// ---------- the source ----------

const STATUS: &str = "status";
const BEARER_HASH: &str = "bearer_hash";
const GENERATION: &str = "generation";
const ADMITTED: &str = "admitted";
const PRODUCER_EPOCH: &str = "producer_epoch";
const OWNER_ACCOUNT: &str = "owner_account";
const ROOM_ID: &str = "room_id";
const SOURCE_ID: &str = "source_id";

/// A room source as stored: identity, credential (bearer hash, generation, expiry) and
/// the producer's admission. Optional attributes are absent until their step happened
/// (`admitted` appears with the first credential, the manifest fields at registration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRecord {
    pub source_id: String,
    pub room_id: String,
    pub owner_account: String,
    pub adapter_profile: String,
    pub world_id: String,
    pub label: Option<String>,
    pub status: SourceStatus,
    pub generation: u32,
    pub created_at: String,
    pub bearer_hash: Option<String>,
    /// Epoch seconds; absent while no credential was issued.
    pub credential_expires_at: Option<i64>,
    pub credentialed_at: Option<String>,
    pub admitted: Option<bool>,
    pub adapter_version: Option<String>,
    pub adapter_hash: Option<String>,
    pub manifest_hash: Option<String>,
    pub producer_epoch: Option<u64>,
    pub registered_at: Option<String>,
    pub revoked_at: Option<String>,
}

impl SourceRecord {
    pub fn key(&self) -> Key {
        source_key(&self.room_id, &self.source_id)
    }

    /// Admitted under a registered manifest (every credential starts unadmitted).
    pub fn is_admitted(&self) -> bool {
        self.admitted == Some(true)
    }

    pub fn to_item(&self) -> Item {
        let key = self.key();
        let mut item = Item::new(key.pk, key.sk)
            .with_s(SOURCE_ID, &self.source_id)
            .with_s(ROOM_ID, &self.room_id)
            .with_s(OWNER_ACCOUNT, &self.owner_account)
            .with_s("adapter_profile", &self.adapter_profile)
            .with_s("world_id", &self.world_id)
            .with_s(STATUS, stored_str(&self.status))
            .with_n(GENERATION, self.generation as i64)
            .with_s("created_at", &self.created_at);
        set_s(&mut item, "label", self.label.as_deref());
        set_s(&mut item, BEARER_HASH, self.bearer_hash.as_deref());
        set_n(&mut item, "credential_expires_at", self.credential_expires_at);
        set_s(&mut item, "credentialed_at", self.credentialed_at.as_deref());
        set_s(&mut item, ADMITTED, self.admitted.map(flag));
        set_s(&mut item, "adapter_version", self.adapter_version.as_deref());
        set_s(&mut item, "adapter_hash", self.adapter_hash.as_deref());
        set_s(&mut item, "manifest_hash", self.manifest_hash.as_deref());
        set_n(&mut item, PRODUCER_EPOCH, self.producer_epoch.map(|e| e as i64));
        set_s(&mut item, "registered_at", self.registered_at.as_deref());
        set_s(&mut item, "revoked_at", self.revoked_at.as_deref());
        item
    }

    /// Reads a source item. Missing strings read as empty and an unknown status as
    /// revoked, as the source lane always read them: a broken item admits nothing.
    pub fn from_item(item: &Item) -> Self {
        let s = |n: &str| item.s(n).unwrap_or_default().to_owned();
        let o = |n: &str| item.s(n).map(str::to_owned);
        SourceRecord {
            source_id: s(SOURCE_ID),
            room_id: s(ROOM_ID),
            owner_account: s(OWNER_ACCOUNT),
            adapter_profile: s("adapter_profile"),
            world_id: s("world_id"),
            label: o("label"),
            status: parse_stored(item.s(STATUS)).unwrap_or(SourceStatus::Revoked),
            generation: item.n(GENERATION).unwrap_or(0) as u32,
            created_at: s("created_at"),
            bearer_hash: o(BEARER_HASH),
            credential_expires_at: item.n("credential_expires_at"),
            credentialed_at: o("credentialed_at"),
            admitted: item.s(ADMITTED).map(|a| a == "true"),
            adapter_version: o("adapter_version"),
            adapter_hash: o("adapter_hash"),
            manifest_hash: o("manifest_hash"),
            producer_epoch: item.n(PRODUCER_EPOCH).map(|e| e as u64),
            registered_at: o("registered_at"),
            revoked_at: o("revoked_at"),
        }
    }

    /// Active with a current bearer that has not expired at `now` (epoch seconds).
    pub fn credential_live(&self, now: i64) -> bool {
        self.status == SourceStatus::Active
            && self.bearer_hash.is_some()
            && self.credential_expires_at.is_some_and(|at| at > now)
    }

    /// The source with a fresh bearer of `generation`: active, unadmitted until its
    /// producer registers again.
    pub fn credentialed(&self, bearer_hash: String, generation: u32, expires_at: i64, now: String) -> Self {
        SourceRecord {
            status: SourceStatus::Active,
            bearer_hash: Some(bearer_hash),
            generation,
            credential_expires_at: Some(expires_at),
            credentialed_at: Some(now),
            admitted: Some(false),
            ..self.clone()
        }
    }

    /// The source admitted under a producer's manifest at `epoch`.
    pub fn registered(
        &self,
        adapter_version: &str,
        adapter_hash: &str,
        manifest_hash: &str,
        epoch: u64,
        now: String,
    ) -> Self {
        SourceRecord {
            admitted: Some(true),
            adapter_version: Some(adapter_version.to_owned()),
            adapter_hash: Some(adapter_hash.to_owned()),
            manifest_hash: Some(manifest_hash.to_owned()),
            producer_epoch: Some(epoch),
            registered_at: Some(now),
            ..self.clone()
        }
    }

    /// The source permanently revoked: no bearer, nothing admitted.
    pub fn revoked(&self, now: String) -> Self {
        SourceRecord {
            status: SourceStatus::Revoked,
            revoked_at: Some(now),
            admitted: Some(false),
            bearer_hash: None,
            ..self.clone()
        }
    }
}

/// The source is still awaiting the claim of the delivery of `generation`.
pub fn awaiting_claim_of(generation: u32) -> Cond {
    Cond::And(vec![
        Cond::eq_s(STATUS, stored_str(&SourceStatus::AwaitingClaim)),
        Cond::eq_n(GENERATION, generation as i64),
    ])
}

/// The source is active under exactly this bearer.
pub fn active_under(bearer_hash: &str) -> Cond {
    Cond::And(vec![Cond::eq_s(STATUS, stored_str(&SourceStatus::Active)), Cond::eq_s(BEARER_HASH, bearer_hash)])
}

/// Nobody changed the source's status since it was read.
pub fn status_still(status: SourceStatus) -> Cond {
    Cond::eq_s(STATUS, stored_str(&status))
}

/// A manifest at `epoch` may register: active under this bearer, no higher epoch admitted.
pub fn may_register(bearer_hash: &str, epoch: i64) -> Cond {
    Cond::And(vec![
        active_under(bearer_hash),
        Cond::Or(vec![Cond::Missing(PRODUCER_EPOCH.into()), Cond::Lt(PRODUCER_EPOCH.into(), epoch + 1)]),
    ])
}

/// The guard of a report: the source is still active, under this bearer, admitted at
/// this epoch when the write commits.
pub fn check_still_admitted(tx: &mut Tx, room_id: &str, source_id: &str, bearer_hash: &str, epoch: u64) {
    tx.check(Role::Source, source_key(room_id, source_id), still_admitted(bearer_hash, epoch));
}

fn still_admitted(bearer_hash: &str, epoch: u64) -> Cond {
    Cond::And(vec![
        active_under(bearer_hash),
        Cond::eq_s(ADMITTED, flag(true)),
        Cond::eq_n(PRODUCER_EPOCH, epoch as i64),
    ])
}

/// At most `limit` sources of a room, with whether there are more.
pub async fn sources_of_room(
    store: &dyn Store,
    room_id: &str,
    limit: usize,
) -> Result<(Vec<SourceRecord>, bool), StoreError> {
    let page = store.query(&source_key(room_id, "").pk, SOURCE_PREFIX, None, limit).await?;
    Ok((page.items.iter().map(SourceRecord::from_item).collect(), page.has_more))
}

// ---------- the delivery and the bearer lookup ----------

/// The pending one-time delivery of a source's first credential (TTL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub room_id: String,
    pub source_id: String,
    pub owner_account: String,
    pub generation: u32,
    pub expires_at: i64,
}

impl Delivery {
    pub fn to_item(&self, handle_hash: &str) -> Item {
        let key = delivery_key(handle_hash);
        Item::new(key.pk, key.sk)
            .with_s(ROOM_ID, &self.room_id)
            .with_s(SOURCE_ID, &self.source_id)
            .with_s(OWNER_ACCOUNT, &self.owner_account)
            .with_n(GENERATION, self.generation as i64)
            .with_n(EXPIRES_AT, self.expires_at)
    }

    pub fn from_item(item: &Item) -> Self {
        Delivery {
            room_id: item.s(ROOM_ID).unwrap_or_default().to_owned(),
            source_id: item.s(SOURCE_ID).unwrap_or_default().to_owned(),
            owner_account: item.s(OWNER_ACCOUNT).unwrap_or_default().to_owned(),
            generation: item.n(GENERATION).unwrap_or(0) as u32,
            expires_at: item.n(EXPIRES_AT).unwrap_or(0),
        }
    }
}

/// The delivery is consumed once, by its own account: a concurrent claim that loses is
/// refused here.
pub fn consume_delivery(tx: &mut Tx, handle_hash: &str, account: &str) {
    let cond = Cond::And(vec![Cond::Exists, Cond::eq_s(OWNER_ACCOUNT, account)]);
    tx.delete(Role::Delivery, delivery_key(handle_hash), cond);
}

/// How ingress finds a source from its bearer's hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BearerLookup {
    pub room_id: String,
    pub source_id: String,
    pub owner_account: String,
    pub generation: u32,
}

impl BearerLookup {
    pub fn to_item(&self, bearer_hash: &str) -> Item {
        let key = bearer_key(bearer_hash);
        Item::new(key.pk, key.sk)
            .with_s(ROOM_ID, &self.room_id)
            .with_s(SOURCE_ID, &self.source_id)
            .with_s(OWNER_ACCOUNT, &self.owner_account)
            .with_n(GENERATION, self.generation as i64)
    }

    pub fn from_item(item: &Item) -> Self {
        BearerLookup {
            room_id: item.s(ROOM_ID).unwrap_or_default().to_owned(),
            source_id: item.s(SOURCE_ID).unwrap_or_default().to_owned(),
            owner_account: item.s(OWNER_ACCOUNT).unwrap_or_default().to_owned(),
            generation: item.n(GENERATION).unwrap_or(0) as u32,
        }
    }
}

// ---------- the room rows a source leans on ----------

/// The room item (same key string as the room lane's).
fn room_key(room_id: &str) -> Key {
    Key::new(format!("ROOM#{room_id}"), "ROOM")
}
/// A membership of the room.
fn member_key(room_id: &str, account_id: &str) -> Key {
    Key::new(format!("ROOM#{room_id}"), format!("MEM#{account_id}"))
}
const ACTIVE: &str = "active";
const ROLE: &str = "role";
const OWNER: &str = "owner";

/// The room is active and owned by `account`, and `account` is its owner member: who may
/// act on the room's sources.
fn owner_holds(room: Option<&Item>, member: Option<&Item>, account: &str) -> bool {
    room.is_some_and(|r| r.s(STATUS) == Some(ACTIVE) && r.s(OWNER_ACCOUNT) == Some(account))
        && member.is_some_and(|m| m.s(ROLE) == Some(OWNER))
}

/// Checks, inside the write, that the room is still active and owned by `account`
/// ([`Role::Room`]) and, with `with_member`, that `account` is still its owner member
/// ([`Role::Member`]).
pub fn check_room_owner(tx: &mut Tx, room_id: &str, account: &str, with_member: bool) {
    let room = Cond::And(vec![Cond::eq_s(STATUS, ACTIVE), Cond::eq_s(OWNER_ACCOUNT, account)]);
    tx.check(Role::Room, room_key(room_id), room);
    if with_member {
        tx.check(Role::Member, member_key(room_id, account), Cond::eq_s(ROLE, OWNER));
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

/// Whether the room is active and owned by `account`, its owner member: one BatchGetItem.
pub async fn room_owned_by(store: &dyn Store, room_id: &str, account: &str) -> Result<bool, StoreError> {
    let got = store.batch_get(&[room_key(room_id), member_key(room_id, account)]).await?;
    Ok(owner_holds(got[0].as_ref(), got[1].as_ref(), account))
}

/// The active rooms `account` is a member of (at most `limit` listing entries): a Query
/// of the account's room entries, then one BatchGetItem of the rooms and memberships.
pub async fn active_rooms_of_member(store: &dyn Store, account: &str, limit: usize) -> Result<Vec<String>, StoreError> {
    let entries = store.query(&account_key(account).pk, "ROOM#", None, limit).await?;
    let ids: Vec<String> = entries.items.iter().filter_map(|i| i.s(ROOM_ID).map(str::to_owned)).collect();
    if ids.is_empty() {
        return Ok(ids);
    }
    let keys: Vec<Key> = ids.iter().flat_map(|id| [room_key(id), member_key(id, account)]).collect();
    let got = store.batch_get(&keys).await?;
    Ok(ids
        .into_iter()
        .zip(got.chunks(2))
        .filter(|(_, pair)| matches!(pair, [Some(room), Some(_)] if room.s(STATUS) == Some(ACTIVE)))
        .map(|(id, _)| id)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::source::ProbeStatus;

    #[test]
    fn stored_statuses_are_the_strings_the_table_has_always_held() {
        let cases = [
            (stored_str(&SourceStatus::AwaitingClaim), "awaiting_claim"),
            (stored_str(&SourceStatus::Active), "active"),
            (stored_str(&SourceStatus::Revoked), "revoked"),
            (stored_str(&ProbeStatus::Pending), "pending"),
            (stored_str(&ProbeStatus::Answered), "answered"),
            (stored_str(&ProbeStatus::Expired), "expired"),
        ];
        for (stored, want) in cases {
            assert_eq!(stored, want);
        }
        assert_eq!(parse_stored::<SourceStatus>(Some("active")), Some(SourceStatus::Active));
        assert_eq!(parse_stored::<SourceStatus>(Some("Active")), None);
        assert_eq!(parse_stored::<SourceStatus>(None), None);
    }

    fn source(status: SourceStatus, bearer: Option<&str>, epoch: Option<u64>) -> Item {
        SourceRecord {
            source_id: "src_1".into(),
            room_id: "room_1".into(),
            owner_account: "acct_1".into(),
            adapter_profile: "minecraft".into(),
            world_id: "w".into(),
            label: None,
            status,
            generation: 1,
            created_at: "t".into(),
            bearer_hash: bearer.map(str::to_owned),
            credential_expires_at: Some(i64::MAX),
            credentialed_at: None,
            admitted: Some(epoch.is_some()),
            adapter_version: None,
            adapter_hash: None,
            manifest_hash: None,
            producer_epoch: epoch,
            registered_at: None,
            revoked_at: None,
        }
        .to_item()
    }

    #[test]
    fn a_manifest_registers_at_its_epoch_or_a_later_one_under_the_current_bearer() {
        use SourceStatus::*;
        for (stored, epoch, registers) in [
            (source(Active, Some("b"), None), 1, true),
            (source(Active, Some("b"), Some(2)), 2, true),
            (source(Active, Some("b"), Some(2)), 3, true),
            (source(Active, Some("b"), Some(2)), 1, false),
            (source(Active, Some("other"), None), 1, false),
            (source(Revoked, None, Some(1)), 2, false),
            (source(AwaitingClaim, None, None), 1, false),
        ] {
            assert_eq!(may_register("b", epoch).holds(Some(&stored), 0), registers, "{stored:?} at {epoch}");
        }
    }

    #[test]
    fn a_report_is_admitted_only_at_the_admitted_epoch_under_the_current_bearer() {
        use SourceStatus::*;
        for (stored, epoch, admitted) in [
            (source(Active, Some("b"), Some(2)), 2, true),
            (source(Active, Some("b"), Some(2)), 1, false),
            (source(Active, Some("b"), Some(2)), 3, false),
            (source(Active, Some("b"), None), 2, false),
            (source(Active, Some("rotated"), Some(2)), 2, false),
            (source(Revoked, Some("b"), Some(2)), 2, false),
        ] {
            assert_eq!(still_admitted("b", epoch).holds(Some(&stored), 0), admitted, "{stored:?} at {epoch}");
        }
    }

    #[test]
    fn a_delivery_is_claimed_only_for_its_generation_while_awaiting() {
        let awaiting = source(SourceStatus::AwaitingClaim, None, None);
        assert!(awaiting_claim_of(1).holds(Some(&awaiting), 0));
        assert!(!awaiting_claim_of(2).holds(Some(&awaiting), 0));
        assert!(!awaiting_claim_of(1).holds(Some(&source(SourceStatus::Active, Some("b"), None)), 0));
    }

    #[test]
    fn only_the_active_rooms_owner_member_acts_on_its_sources() {
        let room =
            |status: &str, owner: &str| Item::new("ROOM#r", "ROOM").with_s(STATUS, status).with_s(OWNER_ACCOUNT, owner);
        let member = |role: &str| Item::new("ROOM#r", "MEM#a").with_s(ROLE, role);
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
