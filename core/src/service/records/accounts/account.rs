//! The account item: status, timestamps and the operator-held policy, as stored. Knows
//! no use case.

use super::super::attrs::{CREATED_AT, DENIED_CAPABILITIES, DEVELOPER, GUEST, ROOMS_LOCKED, STATUS, UPDATED_AT, text};
use serde::{Deserialize, Serialize};

use super::super::enum_text;
use super::account_key;
use crate::domain::account::AccountPolicy;
use crate::store::{Cond, Item};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
