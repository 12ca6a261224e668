//! Agent account bindings and their listing entries under the account, as stored: the
//! records, the conditions of a grant, a re-grant, a revocation and a repair, and the
//! listing of an account's bindings. Knows no use case.

use super::super::attrs::{
    ACCOUNT_ID, BINDING_REF, CREATED_AT, GENERATION, ISSUER, PROVIDER, REVOKED_AT, STATUS, TENANT_REF, UPDATED_AT, opt,
    text, with_opt,
};
use serde::{Deserialize, Serialize};

use super::super::{enum_parse, enum_text};
use super::{BINDING_ENTRY_PREFIX, account_key, binding_entry_key, binding_key};
use crate::error::ApiError;
use crate::store::{Cond, Item, Store};

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
        let item = with_opt(item, GENERATION, self.generation.as_deref());
        let item = with_opt(item, CREATED_AT, self.created_at.as_deref());
        let item = with_opt(item, UPDATED_AT, self.updated_at.as_deref());
        with_opt(item, REVOKED_AT, self.revoked_at.as_deref())
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
        with_opt(item, REVOKED_AT, self.revoked_at.as_deref())
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
