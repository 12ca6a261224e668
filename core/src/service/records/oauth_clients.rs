//! Clients registered with the development issuer (RFC 7591): one item per client, kept
//! until its `expires_at`, and an hourly counter that bounds how many are registered.
//! Knows no use case.

use serde::{Deserialize, Serialize};

use super::BODY;
use crate::store::{Cond, EXPIRES_AT, Item, Key, Store, StoreError};

/// A registered public client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthClient {
    pub client_id: String,
    pub client_name: Option<String>,
    pub redirect_uris: Vec<String>,
    pub grant_types: Vec<String>,
    pub scope: Option<String>,
    pub issued_at: i64,
    pub expires_at: i64,
}

pub fn client_key(client_id: &str) -> Key {
    Key::new(format!("OAUTHCLIENT#{client_id}"), "CLIENT")
}

/// The counter of registrations in hour `hour` (epoch seconds / 3600).
pub fn registrations_key(hour: i64) -> Key {
    Key::new(format!("OAUTHREG#{hour}"), "COUNT")
}

/// Writes a new client (its id is fresh; an existing one is never overwritten).
pub async fn put_client(store: &dyn Store, c: &OAuthClient) -> Result<(), StoreError> {
    let key = client_key(&c.client_id);
    let body = serde_json::to_string(c).expect("a client serializes");
    store
        .put(Item::new(key.pk, key.sk).with_s(BODY, &body).with_n(EXPIRES_AT, c.expires_at), Some(Cond::NotExists))
        .await
}

/// The live client, if any (an unreadable body reads as absent).
pub async fn get_client(store: &dyn Store, client_id: &str) -> Result<Option<OAuthClient>, StoreError> {
    let item = store.get(&client_key(client_id)).await?;
    Ok(item.and_then(|i| serde_json::from_str(i.s(BODY)?).ok()))
}

/// Counts one registration in `hour`; the new count.
pub async fn count_registration(store: &dyn Store, hour: i64) -> Result<i64, StoreError> {
    store.count(&registrations_key(hour), (hour + 2) * 3600).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_keys_are_pinned() {
        assert_eq!(client_key("c1"), Key { pk: "OAUTHCLIENT#c1".into(), sk: "CLIENT".into() });
        assert_eq!(registrations_key(7), Key { pk: "OAUTHREG#7".into(), sk: "COUNT".into() });
    }
}
