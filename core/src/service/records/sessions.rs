//! Browser sessions and sign-in intents as stored: keys, typed records and the
//! conditions that guard a session's refresh and an intent's consumption. Knows no use
//! case.

use super::attrs::{
    ABSOLUTE_UNTIL, ACCOUNT_ID, BROWSER_HASH, CREATED_AT, OWNER_HASH, PURPOSE, REFRESHED_AT, RETURN_TO, SESSION_HASH,
    TENANT_REF,
};
use super::{enum_parse, enum_text};
use crate::domain::account::IntentPurpose;
use crate::store::{Cond, EXPIRES_AT, Item, Key};

/// A browser session, by the hash of its token.
pub fn session_key(token_hash: &str) -> Key {
    Key::new(format!("SESSION#{token_hash}"), "SESSION")
}

/// A sign-in intent, by the hash of its state.
pub fn intent_key(state_hash: &str) -> Key {
    Key::new(format!("INTENT#{state_hash}"), "INTENT")
}

/// A session item: its account, when it was opened and last slid, its absolute end, its
/// idle expiry (the TTL), the tenant reference of the identity it was signed in with
/// (none on a session stored before tenants were recorded) and that identity's owner tuple
/// hash (none on a session stored before it was recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub account_id: String,
    pub created_at: i64,
    pub refreshed_at: i64,
    pub absolute_until: i64,
    pub expires_at: i64,
    pub tenant_ref: Option<String>,
    pub owner_hash: Option<String>,
}

impl SessionRecord {
    pub fn to_item(&self, token_hash: &str) -> Item {
        let key = session_key(token_hash);
        let item = Item::new(key.pk, key.sk)
            .with_s(ACCOUNT_ID, &self.account_id)
            .with_n(CREATED_AT, self.created_at)
            .with_n(REFRESHED_AT, self.refreshed_at)
            .with_n(ABSOLUTE_UNTIL, self.absolute_until)
            .with_n(EXPIRES_AT, self.expires_at);
        let item = match &self.tenant_ref {
            Some(t) => item.with_s(TENANT_REF, t),
            None => item,
        };
        match &self.owner_hash {
            Some(o) => item.with_s(OWNER_HASH, o),
            None => item,
        }
    }

    /// None for a session item without an account (no session).
    pub fn from_item(item: &Item) -> Option<Self> {
        Some(SessionRecord {
            account_id: item.s(ACCOUNT_ID)?.to_owned(),
            created_at: item.n(CREATED_AT).unwrap_or(0),
            refreshed_at: item.n(REFRESHED_AT).unwrap_or(0),
            absolute_until: item.n(ABSOLUTE_UNTIL).unwrap_or(0),
            expires_at: item.n(EXPIRES_AT).unwrap_or(0),
            tenant_ref: item.s(TENANT_REF).map(str::to_owned),
            owner_hash: item.s(OWNER_HASH).map(str::to_owned),
        })
    }
}

/// The session is still live and still the account's (signed out or replaced: not).
pub fn session_of(account_id: &str) -> Cond {
    Cond::And(vec![Cond::Exists, Cond::eq_s(ACCOUNT_ID, account_id)])
}

/// A sign-in intent: the browser it is bound to (by hash), its purpose, the session a
/// step-up came from, and its expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentRecord {
    pub browser_hash: String,
    pub purpose: IntentPurpose,
    pub session_hash: Option<String>,
    /// The same-origin page to land on after a sign-in (validated before it is stored).
    pub return_to: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
}

impl IntentRecord {
    pub fn to_item(&self, state_hash: &str) -> Item {
        let key = intent_key(state_hash);
        let item = Item::new(key.pk, key.sk)
            .with_s(BROWSER_HASH, &self.browser_hash)
            .with_s(PURPOSE, enum_text(&self.purpose))
            .with_n(CREATED_AT, self.created_at)
            .with_n(EXPIRES_AT, self.expires_at);
        let item = match &self.session_hash {
            Some(h) => item.with_s(SESSION_HASH, h),
            None => item,
        };
        match &self.return_to {
            Some(to) => item.with_s(RETURN_TO, to),
            None => item,
        }
    }

    /// None for an intent whose purpose is unknown (it signs nobody in).
    pub fn from_item(item: &Item) -> Option<Self> {
        Some(IntentRecord {
            browser_hash: item.s(BROWSER_HASH).unwrap_or_default().to_owned(),
            purpose: item.s(PURPOSE).and_then(enum_parse)?,
            session_hash: item.s(SESSION_HASH).map(str::to_owned),
            return_to: item.s(RETURN_TO).map(str::to_owned),
            created_at: item.n(CREATED_AT).unwrap_or(0),
            expires_at: item.n(EXPIRES_AT).unwrap_or(0),
        })
    }
}

/// An intent is consumed only by the browser it is bound to, while it lives.
pub fn intent_of_browser(browser_hash: &str) -> Cond {
    Cond::And(vec![Cond::Exists, Cond::eq_s(BROWSER_HASH, browser_hash)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> SessionRecord {
        SessionRecord {
            account_id: "acct_a".into(),
            created_at: 10,
            refreshed_at: 20,
            absolute_until: 99,
            expires_at: 50,
            tenant_ref: Some("tenant:sha256:t".into()),
            owner_hash: Some("o".repeat(64)),
        }
    }

    #[test]
    fn a_session_round_trips_and_one_without_an_account_is_none() {
        let item = session().to_item("th");
        assert_eq!(item.key(), session_key("th"));
        assert_eq!(SessionRecord::from_item(&item), Some(session()));
        let mut before_tenants = item.clone();
        before_tenants.attrs.remove(TENANT_REF);
        before_tenants.attrs.remove(OWNER_HASH);
        let old = SessionRecord { tenant_ref: None, owner_hash: None, ..session() };
        assert_eq!(SessionRecord::from_item(&before_tenants), Some(old));
        let mut orphan = item.clone();
        orphan.attrs.remove(ACCOUNT_ID);
        assert_eq!(SessionRecord::from_item(&orphan), None);
    }

    #[test]
    fn a_session_is_rechecked_as_live_and_of_the_same_account() {
        let item = session().to_item("th");
        for (stored, account, holds) in
            [(Some(&item), "acct_a", true), (Some(&item), "acct_b", false), (None, "acct_a", false)]
        {
            assert_eq!(session_of(account).holds(stored, 0), holds, "{account}");
        }
        assert!(!session_of("acct_a").holds(Some(&item), 50), "an expired session is gone");
    }

    #[test]
    fn intents_round_trip_for_each_purpose_under_their_stored_names() {
        for (purpose, stored) in [(IntentPurpose::SignIn, "sign_in"), (IntentPurpose::AllowAgents, "allow_agents")] {
            for (session_hash, return_to) in [(None, None), (Some("sh".to_owned()), Some("/rooms?cursor=c".to_owned()))]
            {
                let intent = IntentRecord {
                    browser_hash: "bh".into(),
                    purpose,
                    session_hash,
                    return_to,
                    created_at: 1,
                    expires_at: 2,
                };
                let item = intent.to_item("st");
                assert_eq!(item.s(PURPOSE), Some(stored));
                assert_eq!(stored, purpose.as_str());
                assert_eq!(IntentRecord::from_item(&item), Some(intent));
            }
        }
    }

    #[test]
    fn an_intent_of_an_unknown_purpose_signs_nobody_in() {
        let item = Item::new("INTENT#st", "INTENT").with_s(BROWSER_HASH, "bh").with_s(PURPOSE, "sudo");
        assert_eq!(IntentRecord::from_item(&item), None);
    }

    #[test]
    fn an_intent_is_consumed_only_by_its_browser() {
        let item = IntentRecord {
            browser_hash: "bh".into(),
            purpose: IntentPurpose::SignIn,
            session_hash: None,
            return_to: None,
            created_at: 1,
            expires_at: 9,
        }
        .to_item("st");
        assert!(intent_of_browser("bh").holds(Some(&item), 0));
        assert!(!intent_of_browser("other").holds(Some(&item), 0));
        assert!(!intent_of_browser("bh").holds(None, 0));
    }
}
