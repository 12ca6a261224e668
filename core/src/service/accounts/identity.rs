//! What a token identity (issuer, signed tenant, provider, subject) derives, computed once
//! per identity instead of once per request: the binding hash (the principal's identity
//! and its rate-limit and receipt scope), the keys of its link, binding and derived
//! account, and the owner hash under that derived account. Each is a SHA-256 over the
//! identity's own strings, so a remembered value can never differ from a fresh one; the
//! map holds identity strings and their hashes (never token material), and is emptied
//! when full, so many identities cost recomputation, never memory.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::auth::principal::binding_hash;
use crate::domain::account::{account_id_for, owner_hash};
use crate::service::records::{account_key, binding_key, link_key};
use crate::store::Key;

/// Distinct identities remembered (the verified-token cache keeps as many tokens).
const IDENTITIES: usize = 4096;

/// The values derived from one token identity under the configured provider.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct IdentityKeys {
    /// The binding hash ([`binding_hash`]).
    pub identity: String,
    pub link: Key,
    pub binding: Key,
    /// The account id a link made by this service names ([`account_id_for`]).
    pub derived_account: String,
    pub account: Key,
    /// The owner hash under `derived_account` ([`owner_hash`]).
    pub derived_owner: String,
}

impl IdentityKeys {
    fn derive(issuer: &str, tenant: &str, provider: &str, subject: &str) -> Self {
        let identity = binding_hash(issuer, tenant, provider, subject);
        let derived_account = account_id_for(provider, subject);
        Self {
            link: link_key(provider, subject),
            binding: binding_key(&identity),
            account: account_key(&derived_account),
            derived_owner: owner_hash(tenant, issuer, provider, subject, &derived_account),
            identity,
            derived_account,
        }
    }
}

/// Remembered [`IdentityKeys`] under one provider (the configuration's), by (issuer,
/// tenant, subject), each part length-prefixed so no two identities share a lookup.
pub(crate) struct IdentityMemo {
    provider: String,
    map: RwLock<HashMap<Vec<u8>, Arc<IdentityKeys>>>,
}

impl IdentityMemo {
    pub(crate) fn new(provider: &str) -> Self {
        Self { provider: provider.to_owned(), map: RwLock::default() }
    }

    pub(crate) fn keys(&self, issuer: &str, tenant: &str, subject: &str) -> Arc<IdentityKeys> {
        let mut lookup = Vec::with_capacity(24 + issuer.len() + tenant.len() + subject.len());
        for part in [issuer, tenant, subject] {
            lookup.extend_from_slice(&(part.len() as u64).to_be_bytes());
            lookup.extend_from_slice(part.as_bytes());
        }
        if let Some(keys) = self.map.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(&lookup) {
            return keys.clone();
        }
        let keys = Arc::new(IdentityKeys::derive(issuer, tenant, &self.provider, subject));
        let mut map = self.map.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= IDENTITIES {
            map.clear();
        }
        map.insert(lookup, keys.clone());
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_keys_equal_fresh_ones_and_differ_per_identity() {
        let memo = IdentityMemo::new("auth0");
        let first = memo.keys("iss", "t1", "alice");
        let again = memo.keys("iss", "t1", "alice");
        assert!(Arc::ptr_eq(&first, &again), "the second lookup is remembered");
        assert_eq!(*first, IdentityKeys::derive("iss", "t1", "auth0", "alice"));
        assert_eq!(first.identity, binding_hash("iss", "t1", "auth0", "alice"));
        assert_eq!(first.link, link_key("auth0", "alice"));
        assert_eq!(first.binding, binding_key(&first.identity));
        assert_eq!(first.account, account_key(&account_id_for("auth0", "alice")));
        let other_tenant = memo.keys("iss", "t2", "alice");
        assert_ne!(other_tenant.identity, first.identity);
        assert_ne!(other_tenant.derived_owner, first.derived_owner);
        // The same subject under another tenant links the same account (the link is per
        // provider subject); its owner tuple still differs.
        assert_eq!(other_tenant.derived_account, first.derived_account);
    }

    #[test]
    fn a_full_memo_starts_over() {
        let memo = IdentityMemo::new("auth0");
        for i in 0..=IDENTITIES {
            memo.keys("iss", "t", &format!("user-{i}"));
        }
        assert_eq!(memo.map.read().unwrap().len(), 1);
        // Parts are length-prefixed: moving a character between them is another identity.
        assert_ne!(memo.keys("is", "st", "alice").identity, memo.keys("iss", "t", "alice").identity);
    }
}
