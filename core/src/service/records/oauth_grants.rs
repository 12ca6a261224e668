//! What the development issuer keeps while it authorizes agents: pending authorizations
//! (the browser's way from `/authorize` through sign-in to consent), authorization codes
//! and refresh-token families. Every secret is stored by its SHA-256 only; every item
//! carries its `expires_at`. Knows no use case.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::BODY;
use crate::domain::sha256_hex;
use crate::store::{Cond, EXPIRES_AT, Item, Key, Store, StoreError, WriteOp};

/// An authorization request the browser is working through (sign-in, then consent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingAuthorization {
    pub client_id: String,
    pub client_name: Option<String>,
    pub redirect_uri: String,
    pub state: String,
    pub code_challenge: String,
    pub scopes: Vec<String>,
    pub resource: String,
    /// Set once the person signed in: who, and the browser session that did it.
    pub subject: Option<String>,
    pub tenant: Option<String>,
    pub session_hash: Option<String>,
    pub expires_at: i64,
}

/// What an authorization code (and a refresh family) grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub client_id: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub scopes: Vec<String>,
    pub resource: String,
    pub subject: String,
    pub tenant: String,
    pub expires_at: i64,
}

/// A refresh-token family: one live token (`current_hash`); any other member presented
/// again is a replay and ends the family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshFamily {
    pub family_id: String,
    pub client_id: String,
    pub scopes: Vec<String>,
    pub resource: String,
    pub subject: String,
    pub tenant: String,
    pub current_hash: String,
    pub expires_at: i64,
}

/// A member of a family (stored under the hash of its token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshMember {
    pub family_id: String,
}

pub fn pending_key(id: &str) -> Key {
    Key::new(format!("OAUTHPENDING#{}", sha256_hex(id)), "PENDING")
}

pub fn code_key(code: &str) -> Key {
    Key::new(format!("OAUTHCODE#{}", sha256_hex(code)), "CODE")
}

pub fn family_key(family_id: &str) -> Key {
    Key::new(format!("OAUTHFAMILY#{family_id}"), "FAMILY")
}

pub fn refresh_key(token: &str) -> Key {
    Key::new(format!("OAUTHREFRESH#{}", sha256_hex(token)), "REFRESH")
}

fn item<T: Serialize>(key: Key, body: &T, expires_at: i64) -> Item {
    let body = serde_json::to_string(body).expect("a record serializes");
    Item::new(key.pk, key.sk).with_s(BODY, &body).with_n(EXPIRES_AT, expires_at)
}

async fn read<T: DeserializeOwned>(store: &dyn Store, key: &Key) -> Result<Option<T>, StoreError> {
    let found = store.get(key).await?;
    Ok(found.and_then(|i| serde_json::from_str(i.s(BODY)?).ok()))
}

/// Reads and deletes the live item under `key` (None when absent, expired, or taken by a
/// concurrent caller first: exactly one caller gets it).
async fn take<T: DeserializeOwned>(store: &dyn Store, key: Key) -> Result<Option<T>, StoreError> {
    let Some(found) = read::<T>(store, &key).await? else { return Ok(None) };
    match store.transact(vec![WriteOp::Delete { key, cond: Some(Cond::Exists) }]).await {
        Ok(()) => Ok(Some(found)),
        Err(StoreError::TransactionCanceled { .. } | StoreError::ConditionFailed { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

pub async fn put_pending(store: &dyn Store, id: &str, p: &PendingAuthorization) -> Result<(), StoreError> {
    store.put(item(pending_key(id), p, p.expires_at), None).await
}

pub async fn get_pending(store: &dyn Store, id: &str) -> Result<Option<PendingAuthorization>, StoreError> {
    read(store, &pending_key(id)).await
}

/// The pending authorization, consumed: a decision is taken once.
pub async fn take_pending(store: &dyn Store, id: &str) -> Result<Option<PendingAuthorization>, StoreError> {
    take(store, pending_key(id)).await
}

pub async fn put_code(store: &dyn Store, code: &str, g: &Grant) -> Result<(), StoreError> {
    store.put(item(code_key(code), g, g.expires_at), Some(Cond::NotExists)).await
}

/// The code's grant, consumed whatever the caller does next (single use).
pub async fn take_code(store: &dyn Store, code: &str) -> Result<Option<Grant>, StoreError> {
    take(store, code_key(code)).await
}

/// A new family with its first token, in one transaction.
pub async fn start_family(store: &dyn Store, token: &str, f: &RefreshFamily) -> Result<(), StoreError> {
    let member = RefreshMember { family_id: f.family_id.clone() };
    store
        .transact(vec![
            WriteOp::Put { item: item(family_key(&f.family_id), f, f.expires_at), cond: Some(Cond::NotExists) },
            WriteOp::Put { item: item(refresh_key(token), &member, f.expires_at), cond: Some(Cond::NotExists) },
        ])
        .await
}

/// The family a refresh token belongs to (live or ended), and the family if still live.
pub async fn family_of(
    store: &dyn Store,
    token: &str,
) -> Result<Option<(RefreshMember, Option<RefreshFamily>)>, StoreError> {
    let Some(member) = read::<RefreshMember>(store, &refresh_key(token)).await? else { return Ok(None) };
    let family = read(store, &family_key(&member.family_id)).await?;
    Ok(Some((member, family)))
}

/// Moves the family from `old` to `next` (fails when another rotation came first).
pub async fn rotate(store: &dyn Store, f: &RefreshFamily, old: &str, next: &str) -> Result<bool, StoreError> {
    let mut moved = f.clone();
    moved.current_hash = sha256_hex(next);
    let member = RefreshMember { family_id: f.family_id.clone() };
    let guard = Cond::eq_s(BODY, serde_json::to_string(f).expect("a record serializes"));
    debug_assert_eq!(f.current_hash, sha256_hex(old));
    let ops = vec![
        WriteOp::Put { item: item(family_key(&f.family_id), &moved, f.expires_at), cond: Some(guard) },
        WriteOp::Put { item: item(refresh_key(next), &member, f.expires_at), cond: Some(Cond::NotExists) },
    ];
    match store.transact(ops).await {
        Ok(()) => Ok(true),
        Err(StoreError::TransactionCanceled { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Ends a family: none of its tokens refreshes again.
pub async fn end_family(store: &dyn Store, family_id: &str) -> Result<(), StoreError> {
    store.transact(vec![WriteOp::Delete { key: family_key(family_id), cond: None }]).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_keys_are_pinned_and_hold_no_secret() {
        assert_eq!(pending_key("p").pk, format!("OAUTHPENDING#{}", sha256_hex("p")));
        assert_eq!(code_key("c"), Key { pk: format!("OAUTHCODE#{}", sha256_hex("c")), sk: "CODE".into() });
        assert_eq!(family_key("f1"), Key { pk: "OAUTHFAMILY#f1".into(), sk: "FAMILY".into() });
        assert_eq!(refresh_key("r").sk, "REFRESH");
        assert!(!refresh_key("secret-token").pk.contains("secret-token"));
    }
}
