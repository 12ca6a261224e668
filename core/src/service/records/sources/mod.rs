//! Room sources in the table: the source item (its credential and admission), the
//! conditions that guard it and the listing of a room's sources; the one-time credential
//! delivery and the bearer lookup (`delivery`); the room checks a source's writes and
//! reads lean on, built from the rooms kernel (`room`). Observations, request markers and
//! the health marker are `observations`; probes are `probes`. Secrets are only ever
//! hashes here. Must not depend on `http`, `mcp` or any use-case module.

mod delivery;
mod room;

pub use delivery::{BearerLookup, Delivery, consume_delivery, replace_delivery};
pub use room::{SourceInRoom, active_rooms_of_member, check_room_owner, room_owned_by, source_in_room};

use super::attrs::{
    ADAPTER_HASH, ADAPTER_PROFILE, ADAPTER_VERSION, ADMITTED, BEARER_HASH, CREATED_AT, CREDENTIAL_EXPIRES_AT,
    CREDENTIALED_AT, DELIVERY_HASH, GENERATION, LABEL, MANIFEST_HASH, OWNER_ACCOUNT, PRODUCER_EPOCH, REGISTERED_AT,
    REVOKED_AT, ROOM_ID, SOURCE_ID, STATUS, WORLD_ID, opt, set_n, set_s, text,
};
use super::rooms::room_pk;
use super::tx::{Role, Tx};
use super::{enum_parse, enum_text};
use crate::domain::source::SourceStatus;
use crate::store::{Cond, Item, Key, Store, StoreError};

// ---------- keys ----------

const SOURCE_PREFIX: &str = "SRC#";

pub fn source_key(room_id: &str, source_id: &str) -> Key {
    Key::new(room_pk(room_id), format!("{SOURCE_PREFIX}{source_id}"))
}
/// A delivery handle, by its hash (TTL; consumed by a conditional delete).
pub fn delivery_key(handle_hash: &str) -> Key {
    Key::new(format!("SRCCLAIM#{handle_hash}"), "CLAIM")
}
/// The current bearer of a source, by its hash: how ingress finds the source.
pub fn bearer_key(bearer_hash: &str) -> Key {
    Key::new(format!("SRCBEARER#{bearer_hash}"), "BEARER")
}
// ---------- stored values ----------

/// A stored flag (`admitted`): the strings `true` and `false`.
fn flag(v: bool) -> &'static str {
    if v { "true" } else { "false" }
}

// ---------- the source ----------

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
    /// The hash of the handle of the source's current delivery while it awaits its claim
    /// (absent on a source created before it was recorded).
    pub delivery_hash: Option<String>,
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
            .with_s(ADAPTER_PROFILE, &self.adapter_profile)
            .with_s(WORLD_ID, &self.world_id)
            .with_s(STATUS, enum_text(&self.status))
            .with_n(GENERATION, self.generation as i64)
            .with_s(CREATED_AT, &self.created_at);
        set_s(&mut item, LABEL, self.label.as_deref());
        set_s(&mut item, BEARER_HASH, self.bearer_hash.as_deref());
        set_s(&mut item, DELIVERY_HASH, self.delivery_hash.as_deref());
        set_n(&mut item, CREDENTIAL_EXPIRES_AT, self.credential_expires_at);
        set_s(&mut item, CREDENTIALED_AT, self.credentialed_at.as_deref());
        set_s(&mut item, ADMITTED, self.admitted.map(flag));
        set_s(&mut item, ADAPTER_VERSION, self.adapter_version.as_deref());
        set_s(&mut item, ADAPTER_HASH, self.adapter_hash.as_deref());
        set_s(&mut item, MANIFEST_HASH, self.manifest_hash.as_deref());
        set_n(&mut item, PRODUCER_EPOCH, self.producer_epoch.map(|e| e as i64));
        set_s(&mut item, REGISTERED_AT, self.registered_at.as_deref());
        set_s(&mut item, REVOKED_AT, self.revoked_at.as_deref());
        item
    }

    /// Reads a source item. Missing strings read as empty and an unknown status as
    /// revoked, as the source lane always read them: a broken item admits nothing.
    pub fn from_item(item: &Item) -> Self {
        let s = |n: &str| text(item, n);
        let o = |n: &str| opt(item, n);
        SourceRecord {
            source_id: s(SOURCE_ID),
            room_id: s(ROOM_ID),
            owner_account: s(OWNER_ACCOUNT),
            adapter_profile: s(ADAPTER_PROFILE),
            world_id: s(WORLD_ID),
            label: o(LABEL),
            status: item.s(STATUS).and_then(enum_parse).unwrap_or(SourceStatus::Revoked),
            generation: item.n(GENERATION).unwrap_or(0) as u32,
            created_at: s(CREATED_AT),
            bearer_hash: o(BEARER_HASH),
            delivery_hash: o(DELIVERY_HASH),
            credential_expires_at: item.n(CREDENTIAL_EXPIRES_AT),
            credentialed_at: o(CREDENTIALED_AT),
            admitted: item.s(ADMITTED).map(|a| a == flag(true)),
            adapter_version: o(ADAPTER_VERSION),
            adapter_hash: o(ADAPTER_HASH),
            manifest_hash: o(MANIFEST_HASH),
            producer_epoch: item.n(PRODUCER_EPOCH).map(|e| e as u64),
            registered_at: o(REGISTERED_AT),
            revoked_at: o(REVOKED_AT),
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
        Cond::eq_s(STATUS, enum_text(&SourceStatus::AwaitingClaim)),
        Cond::eq_n(GENERATION, generation as i64),
    ])
}

/// The source still awaits the claim of exactly the delivery whose handle hashes to
/// `delivery_hash`.
fn awaiting_delivery(generation: u32, delivery_hash: &str) -> Cond {
    Cond::And(vec![awaiting_claim_of(generation), Cond::eq_s(DELIVERY_HASH, delivery_hash)])
}

/// The source is active under exactly this bearer.
pub fn active_under(bearer_hash: &str) -> Cond {
    Cond::And(vec![Cond::eq_s(STATUS, enum_text(&SourceStatus::Active)), Cond::eq_s(BEARER_HASH, bearer_hash)])
}

/// Nobody changed the source's status since it was read.
pub fn status_still(status: SourceStatus) -> Cond {
    Cond::eq_s(STATUS, enum_text(&status))
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
    sources_page(store, room_id, None, limit).await
}

/// At most `limit` sources of a room after the source `after` (when given), with whether
/// there are more.
pub async fn sources_page(
    store: &dyn Store,
    room_id: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<(Vec<SourceRecord>, bool), StoreError> {
    let after = after.map(|source_id| source_key(room_id, source_id).sk);
    let page = store.query(&source_key(room_id, "").pk, SOURCE_PREFIX, after.as_deref(), limit).await?;
    Ok((page.items.iter().map(SourceRecord::from_item).collect(), page.has_more))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::source::ProbeStatus;

    #[test]
    fn stored_statuses_are_the_strings_the_table_has_always_held() {
        let cases = [
            (enum_text(&SourceStatus::AwaitingClaim), "awaiting_claim"),
            (enum_text(&SourceStatus::Active), "active"),
            (enum_text(&SourceStatus::Revoked), "revoked"),
            (enum_text(&ProbeStatus::Pending), "pending"),
            (enum_text(&ProbeStatus::Answered), "answered"),
            (enum_text(&ProbeStatus::Expired), "expired"),
        ];
        for (stored, want) in cases {
            assert_eq!(stored, want);
        }
        assert_eq!(enum_parse::<SourceStatus>("active"), Some(SourceStatus::Active));
        assert_eq!(enum_parse::<SourceStatus>("Active"), None);
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
            delivery_hash: None,
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
}
