//! Accounts, links and agent bindings as stored: keys, typed records (statuses as serde
//! enums with the stored strings), the conditions that guard their writes and the
//! listing of an account's bindings. Knows no use case.

use serde::{Deserialize, Serialize};

use super::{enum_parse, enum_text};
use crate::domain::account::AccountPolicy;
use crate::domain::hash_parts;
use crate::error::ApiError;
use crate::store::{Cond, Item, Key, Store};

const ACCOUNT_ID: &str = "account_id";
const STATUS: &str = "status";
const CREATED_AT: &str = "created_at";
const UPDATED_AT: &str = "updated_at";
const REVOKED_AT: &str = "revoked_at";
const GENERATION: &str = "generation";
const BINDING_REF: &str = "binding_ref";
const ISSUER: &str = "issuer";
const PROVIDER: &str = "provider";
const TENANT_REF: &str = "tenant_ref";
const ROOMS_LOCKED: &str = "rooms_locked";
const DEVELOPER: &str = "developer";
const GUEST: &str = "guest";
const DENIED_CAPABILITIES: &str = "denied_capabilities";

pub fn link_key(provider: &str, subject: &str) -> Key {
    Key::new(format!("LINK#{}", hash_parts(&["link.v1", provider, subject])), "LINK")
}

pub fn binding_key(binding_hash: &str) -> Key {
    Key::new(format!("AGENTBIND#{binding_hash}"), "AGENTBIND")
}

/// The account item: status and the operator-held policy.
pub fn account_key(account_id: &str) -> Key {
    Key::new(format!("ACCOUNT#{account_id}"), "ACCOUNT")
}

/// Prefix of the account's binding entries (one per agent binding, for listing).
pub const BINDING_ENTRY_PREFIX: &str = "AGENTBIND#";

/// The listing entry of an agent binding under its account, written in the same
/// transaction as the binding item itself.
pub fn binding_entry_key(account_id: &str, binding_hash: &str) -> Key {
    Key::new(account_key(account_id).pk, format!("{BINDING_ENTRY_PREFIX}{binding_hash}"))
}

fn text(item: &Item, name: &str) -> String {
    item.s(name).unwrap_or_default().to_owned()
}

fn opt(item: &Item, name: &str) -> Option<String> {
    item.s(name).map(str::to_owned)
}

fn with_opt(item: Item, name: &str, value: &Option<String>) -> Item {
    match value {
        Some(v) => item.with_s(name, v),
        None => item,
    }
}

/// A link's status: only `active` is written; anything else reads as not linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkStatus {
    Active,
    #[serde(other)]
    Inactive,
}

/// A provider subject's link to its account (`LINK#`), created once, never rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRecord {
    /// Absent only on a damaged link, which links nothing.
    pub account_id: Option<String>,
    pub status: LinkStatus,
    pub created_at: String,
}

impl LinkRecord {
    pub fn new(account_id: &str, created_at: &str) -> Self {
        LinkRecord { account_id: Some(account_id.into()), status: LinkStatus::Active, created_at: created_at.into() }
    }

    /// The account of an active link.
    pub fn linked_account(&self) -> Option<&str> {
        self.account_id.as_deref().filter(|_| self.status == LinkStatus::Active)
    }

    pub fn to_item(&self, provider: &str, subject: &str) -> Item {
        let key = link_key(provider, subject);
        with_opt(Item::new(key.pk, key.sk), ACCOUNT_ID, &self.account_id)
            .with_s(STATUS, enum_text(&self.status))
            .with_s(CREATED_AT, &self.created_at)
    }

    pub fn from_item(item: &Item) -> Self {
        LinkRecord {
            account_id: opt(item, ACCOUNT_ID),
            status: item.s(STATUS).and_then(enum_parse).unwrap_or(LinkStatus::Inactive),
            created_at: text(item, CREATED_AT),
        }
    }
}

/// The check that a link is still active (beside a write that relies on it).
pub fn link_is_active() -> Cond {
    Cond::eq_s(STATUS, enum_text(&LinkStatus::Active))
}

/// An account's status, kept verbatim: only `active` is written; another value (set
/// by hand) reads as not active and survives a policy change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum AccountStatus {
    Active,
    Other(String),
}

impl From<String> for AccountStatus {
    fn from(s: String) -> Self {
        if s == "active" { AccountStatus::Active } else { AccountStatus::Other(s) }
    }
}

impl From<AccountStatus> for String {
    fn from(s: AccountStatus) -> Self {
        match s {
            AccountStatus::Active => "active".into(),
            AccountStatus::Other(s) => s,
        }
    }
}

/// The account item (`ACCOUNT#`/`ACCOUNT`): status, timestamps, the policy as flat
/// attributes (flags as 0/1, denied capabilities comma-joined).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRecord {
    pub status: AccountStatus,
    pub created_at: String,
    pub updated_at: String,
    pub policy: AccountPolicy,
}

impl AccountRecord {
    pub fn new(now: &str) -> Self {
        AccountRecord {
            status: AccountStatus::Active,
            created_at: now.into(),
            updated_at: now.into(),
            policy: AccountPolicy::default(),
        }
    }

    pub fn is_active(&self) -> bool {
        self.status == AccountStatus::Active
    }

    pub fn to_item(&self, account_id: &str) -> Item {
        let key = account_key(account_id);
        let p = &self.policy;
        Item::new(key.pk, key.sk)
            .with_s(STATUS, enum_text(&self.status))
            .with_s(CREATED_AT, &self.created_at)
            .with_s(UPDATED_AT, &self.updated_at)
            .with_n(ROOMS_LOCKED, p.rooms_locked as i64)
            .with_n(DEVELOPER, p.developer as i64)
            .with_n(GUEST, p.guest as i64)
            .with_s(DENIED_CAPABILITIES, p.denied_capabilities.join(","))
    }

    pub fn from_item(item: &Item) -> Self {
        AccountRecord {
            status: AccountStatus::from(text(item, STATUS)),
            created_at: text(item, CREATED_AT),
            updated_at: text(item, UPDATED_AT),
            policy: policy_of(item),
        }
    }

    /// Guards a rewrite of this account: nobody updated it since it was read, so two
    /// operators cannot lose each other's change.
    pub fn unchanged(&self) -> Cond {
        Cond::eq_s(UPDATED_AT, &self.updated_at)
    }
}

/// The policy of an account item (what a use case reading the account for its policy needs).
pub fn policy_of(item: &Item) -> AccountPolicy {
    let flag = |name: &str| item.n(name) == Some(1);
    AccountPolicy {
        rooms_locked: flag(ROOMS_LOCKED),
        developer: flag(DEVELOPER),
        guest: flag(GUEST),
        denied_capabilities: item
            .s(DENIED_CAPABILITIES)
            .map(|s| s.split(',').filter(|c| !c.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default(),
    }
}

/// An agent binding's status: `active` or `revoked` (anything else reads as revoked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingStatus {
    Active,
    #[serde(other)]
    Revoked,
}

impl BindingStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BindingStatus::Active => "active",
            BindingStatus::Revoked => "revoked",
        }
    }

    fn of(item: &Item) -> Self {
        item.s(STATUS).and_then(enum_parse).unwrap_or(BindingStatus::Revoked)
    }
}

/// The agent account binding of one token identity (`AGENTBIND#<identity>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingRecord {
    pub account_id: String,
    pub status: BindingStatus,
    /// Absent on a binding written before bindings had generations and listing entries.
    pub generation: Option<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
    pub revoked_at: Option<String>,
}

impl BindingRecord {
    pub fn to_item(&self, identity_hash: &str) -> Item {
        let key = binding_key(identity_hash);
        let item =
            Item::new(key.pk, key.sk).with_s(ACCOUNT_ID, &self.account_id).with_s(STATUS, enum_text(&self.status));
        let item = with_opt(item, GENERATION, &self.generation);
        let item = with_opt(item, CREATED_AT, &self.created_at);
        let item = with_opt(item, UPDATED_AT, &self.updated_at);
        with_opt(item, REVOKED_AT, &self.revoked_at)
    }

    pub fn from_item(item: &Item) -> Self {
        BindingRecord {
            account_id: text(item, ACCOUNT_ID),
            status: BindingStatus::of(item),
            generation: opt(item, GENERATION),
            created_at: opt(item, CREATED_AT),
            updated_at: opt(item, UPDATED_AT),
            revoked_at: opt(item, REVOKED_AT),
        }
    }

    pub fn is_active(&self) -> bool {
        self.status == BindingStatus::Active
    }

    /// This binding, revoked at `now`.
    pub fn revoked(&self, now: &str) -> Self {
        BindingRecord {
            status: BindingStatus::Revoked,
            updated_at: Some(now.into()),
            revoked_at: Some(now.into()),
            ..self.clone()
        }
    }

    /// A re-grant replaces only this revoked grant of `account_id`, never an active
    /// binding nor one of another account.
    pub fn regrant_cond(&self, account_id: &str) -> Cond {
        Cond::And(vec![
            Cond::eq_s(STATUS, enum_text(&BindingStatus::Revoked)),
            Cond::eq_s(ACCOUNT_ID, account_id),
            Cond::eq_s(GENERATION, self.generation.clone().unwrap_or_default()),
        ])
    }

    /// A revocation holds only for this active grant.
    pub fn revoke_cond(&self) -> Cond {
        Cond::And(vec![Cond::eq_s(STATUS, enum_text(&BindingStatus::Active)), self.entry_of_this_grant()])
    }

    /// The entry (or the binding) still names this grant's generation.
    pub fn entry_of_this_grant(&self) -> Cond {
        Cond::eq_s(GENERATION, self.generation.clone().unwrap_or_default())
    }
}

/// The repair of a binding from before generations holds only while it still has none.
pub fn binding_without_generation() -> Cond {
    Cond::And(vec![Cond::Exists, Cond::Missing(GENERATION.into())])
}

/// The listing entry of an agent binding under its account: what the account may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingEntry {
    /// The identity hash the entry's sort key names.
    pub identity_hash: String,
    pub binding_ref: String,
    pub generation: String,
    pub issuer: String,
    pub provider: String,
    pub tenant_ref: String,
    pub status: BindingStatus,
    pub created_at: String,
    pub updated_at: String,
    pub revoked_at: Option<String>,
}

impl BindingEntry {
    pub fn to_item(&self, account_id: &str) -> Item {
        let key = binding_entry_key(account_id, &self.identity_hash);
        let item = Item::new(key.pk, key.sk)
            .with_s(BINDING_REF, &self.binding_ref)
            .with_s(GENERATION, &self.generation)
            .with_s(ISSUER, &self.issuer)
            .with_s(PROVIDER, &self.provider)
            .with_s(TENANT_REF, &self.tenant_ref)
            .with_s(STATUS, enum_text(&self.status))
            .with_s(CREATED_AT, &self.created_at)
            .with_s(UPDATED_AT, &self.updated_at);
        with_opt(item, REVOKED_AT, &self.revoked_at)
    }

    pub fn from_item(item: &Item) -> Self {
        BindingEntry {
            identity_hash: item.sk.strip_prefix(BINDING_ENTRY_PREFIX).unwrap_or_default().to_owned(),
            binding_ref: text(item, BINDING_REF),
            generation: text(item, GENERATION),
            issuer: text(item, ISSUER),
            provider: text(item, PROVIDER),
            tenant_ref: text(item, TENANT_REF),
            status: BindingStatus::of(item),
            created_at: text(item, CREATED_AT),
            updated_at: text(item, UPDATED_AT),
            revoked_at: opt(item, REVOKED_AT),
        }
    }

    /// This entry, revoked at `now`.
    pub fn revoked(&self, now: &str) -> Self {
        BindingEntry {
            status: BindingStatus::Revoked,
            updated_at: now.into(),
            revoked_at: Some(now.into()),
            ..self.clone()
        }
    }
}

/// A grant's entry is written when absent or over a revoked one.
pub fn entry_free_or_revoked() -> Cond {
    Cond::Or(vec![Cond::NotExists, entry_is_revoked()])
}

/// The check that an entry is revoked (an idempotent revocation re-checks it).
pub fn entry_is_revoked() -> Cond {
    Cond::eq_s(STATUS, enum_text(&BindingStatus::Revoked))
}

/// The binding entries of an account, at most `limit`, in identity-hash order.
pub async fn bindings_of_account(
    store: &dyn Store,
    account_id: &str,
    limit: usize,
) -> Result<Vec<BindingEntry>, ApiError> {
    let pk = account_key(account_id).pk;
    let page = store.query(&pk, BINDING_ENTRY_PREFIX, None, limit).await?;
    Ok(page.items.iter().map(BindingEntry::from_item).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(status: BindingStatus, generation: Option<&str>) -> BindingRecord {
        BindingRecord {
            account_id: "acct_a".into(),
            status,
            generation: generation.map(str::to_owned),
            created_at: Some("t0".into()),
            updated_at: Some("t1".into()),
            revoked_at: None,
        }
    }

    fn entry(status: BindingStatus) -> BindingEntry {
        BindingEntry {
            identity_hash: "idh".into(),
            binding_ref: "agent-binding:sha256:r".into(),
            generation: "g1".into(),
            issuer: "iss".into(),
            provider: "p".into(),
            tenant_ref: "tenant:sha256:t".into(),
            status,
            created_at: "t0".into(),
            updated_at: "t1".into(),
            revoked_at: None,
        }
    }

    #[test]
    fn an_account_status_is_active_only_for_active_and_any_other_value_is_kept() {
        for (stored, active) in [("active", true), ("disabled", false), ("", false), ("Active", false)] {
            let item = AccountRecord::new("t").to_item("acct_a").with_s(STATUS, stored);
            let record = AccountRecord::from_item(&item);
            assert_eq!(record.is_active(), active, "{stored:?}");
            assert_eq!(record.to_item("acct_a"), item, "{stored:?} survives a rewrite");
        }
    }

    #[test]
    fn a_binding_status_reads_revoked_unless_it_is_active() {
        for (stored, status) in [
            (Some("active"), BindingStatus::Active),
            (Some("revoked"), BindingStatus::Revoked),
            (Some("suspended"), BindingStatus::Revoked),
            (None, BindingStatus::Revoked),
        ] {
            let mut item = Item::new("AGENTBIND#x", "AGENTBIND");
            if let Some(s) = stored {
                item = item.with_s(STATUS, s);
            }
            assert_eq!(BindingRecord::from_item(&item).status, status, "{stored:?}");
            assert_eq!(BindingEntry::from_item(&item).status, status, "{stored:?}");
        }
        assert_eq!(enum_text(&BindingStatus::Active), BindingStatus::Active.as_str());
        assert_eq!(enum_text(&BindingStatus::Revoked), BindingStatus::Revoked.as_str());
    }

    #[test]
    fn a_link_links_its_account_only_while_active() {
        let base = LinkRecord::new("acct_a", "t").to_item("p", "s");
        for (item, linked) in [
            (base.clone(), Some("acct_a")),
            (base.clone().with_s(STATUS, "unlinked"), None),
            (Item::new(&base.pk, &base.sk).with_s(STATUS, "active"), None),
        ] {
            assert_eq!(LinkRecord::from_item(&item).linked_account(), linked);
        }
        assert!(link_is_active().holds(Some(&base), 0));
        assert!(!link_is_active().holds(None, 0));
    }

    #[test]
    fn the_policy_round_trips_as_flags_and_a_comma_joined_list() {
        let policies = [
            AccountPolicy::default(),
            AccountPolicy { rooms_locked: true, ..Default::default() },
            AccountPolicy { developer: true, guest: true, ..Default::default() },
            AccountPolicy { denied_capabilities: vec!["a".into(), "b".into()], ..Default::default() },
        ];
        for policy in policies {
            let record = AccountRecord { policy: policy.clone(), ..AccountRecord::new("t") };
            let item = record.to_item("acct_a");
            assert_eq!(item.n(ROOMS_LOCKED), Some(policy.rooms_locked as i64));
            assert_eq!(item.s(DENIED_CAPABILITIES), Some(policy.denied_capabilities.join(",").as_str()));
            assert_eq!(AccountRecord::from_item(&item), record);
            assert_eq!(policy_of(&item), policy);
        }
    }

    #[test]
    fn an_account_rewrite_holds_only_over_the_update_it_read() {
        let read = AccountRecord::new("t1");
        let stored = read.to_item("acct_a");
        assert!(read.unchanged().holds(Some(&stored), 0));
        let moved = AccountRecord { updated_at: "t2".into(), ..read.clone() }.to_item("acct_a");
        assert!(!read.unchanged().holds(Some(&moved), 0));
    }

    #[test]
    fn a_regrant_replaces_only_a_revoked_grant_of_the_same_account_and_generation() {
        let revoked = binding(BindingStatus::Revoked, Some("g1"));
        let cond = revoked.regrant_cond("acct_a");
        for (stored, holds) in [
            (revoked.clone(), true),
            (binding(BindingStatus::Active, Some("g1")), false),
            (binding(BindingStatus::Revoked, Some("g2")), false),
            (BindingRecord { account_id: "acct_b".into(), ..revoked.clone() }, false),
        ] {
            assert_eq!(cond.holds(Some(&stored.to_item("idh")), 0), holds, "{stored:?}");
        }
        assert!(!cond.holds(None, 0));
    }

    #[test]
    fn a_revocation_holds_only_for_the_active_grant_it_read() {
        let active = binding(BindingStatus::Active, Some("g1"));
        let cond = active.revoke_cond();
        for (stored, holds) in
            [(active.clone(), true), (active.revoked("t2"), false), (binding(BindingStatus::Active, Some("g2")), false)]
        {
            assert_eq!(cond.holds(Some(&stored.to_item("idh")), 0), holds, "{stored:?}");
        }
        let e = entry(BindingStatus::Active);
        assert!(active.entry_of_this_grant().holds(Some(&e.to_item("acct_a")), 0));
    }

    #[test]
    fn revoking_sets_status_and_both_timestamps_and_keeps_the_rest() {
        let b = binding(BindingStatus::Active, Some("g1")).revoked("t9");
        assert_eq!(
            (b.status, b.updated_at.as_deref(), b.revoked_at.as_deref()),
            (BindingStatus::Revoked, Some("t9"), Some("t9"))
        );
        assert_eq!((b.created_at.as_deref(), b.generation.as_deref()), (Some("t0"), Some("g1")));
        let e = entry(BindingStatus::Active).revoked("t9");
        assert_eq!(
            (e.status, e.updated_at.as_str(), e.revoked_at.as_deref()),
            (BindingStatus::Revoked, "t9", Some("t9"))
        );
        assert_eq!(e.binding_ref, entry(BindingStatus::Active).binding_ref);
    }

    #[test]
    fn binding_records_round_trip_with_and_without_their_optional_parts() {
        for b in [
            binding(BindingStatus::Active, Some("g1")),
            binding(BindingStatus::Active, Some("g1")).revoked("t2"),
            BindingRecord { created_at: None, updated_at: None, ..binding(BindingStatus::Active, None) },
        ] {
            assert_eq!(BindingRecord::from_item(&b.to_item("idh")), b);
        }
        for e in [entry(BindingStatus::Active), entry(BindingStatus::Active).revoked("t2")] {
            let item = e.to_item("acct_a");
            assert_eq!(item.key(), binding_entry_key("acct_a", "idh"));
            assert_eq!(BindingEntry::from_item(&item), e);
        }
    }

    #[test]
    fn entry_and_repair_conditions_follow_what_is_stored() {
        let active = entry(BindingStatus::Active).to_item("acct_a");
        let revoked = entry(BindingStatus::Revoked).to_item("acct_a");
        for (stored, free) in [(None, true), (Some(&revoked), true), (Some(&active), false)] {
            assert_eq!(entry_free_or_revoked().holds(stored, 0), free);
        }
        assert!(entry_is_revoked().holds(Some(&revoked), 0) && !entry_is_revoked().holds(Some(&active), 0));
        let legacy = binding(BindingStatus::Active, None).to_item("idh");
        let current = binding(BindingStatus::Active, Some("g1")).to_item("idh");
        for (stored, repairable) in [(Some(&legacy), true), (Some(&current), false), (None, false)] {
            assert_eq!(binding_without_generation().holds(stored, 0), repairable);
        }
    }
}
