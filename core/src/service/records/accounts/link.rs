//! A provider subject's link to its account, as stored. Knows no use case.

use super::super::attrs::{ACCOUNT_ID, CREATED_AT, STATUS, opt, text, with_opt};
use serde::{Deserialize, Serialize};

use super::super::{enum_parse, enum_text};
use super::link_key;
use crate::store::{Cond, Item};

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
        with_opt(Item::new(key.pk, key.sk), ACCOUNT_ID, self.account_id.as_deref())
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
