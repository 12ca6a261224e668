//! The one-time delivery of a source's first credential (consumed once, by its own
//! account) and the bearer lookup by which ingress finds a source from its bearer's
//! hash. Must not depend on `http`, `mcp` or any use-case module.

use super::super::attrs::{GENERATION, OWNER_ACCOUNT, ROOM_ID, SOURCE_ID, text};
use super::super::tx::{Role, Tx};
use super::{SourceRecord, awaiting_delivery, bearer_key, delivery_key};
use crate::store::{Cond, EXPIRES_AT, Item};

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
            room_id: text(item, ROOM_ID),
            source_id: text(item, SOURCE_ID),
            owner_account: text(item, OWNER_ACCOUNT),
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

/// A fresh delivery in place of the source's current one, in one transaction: the source
/// (still awaiting the claim of exactly the delivery `old_hash`) records the new handle's
/// hash, the old delivery is deleted (its handle refused from this commit on) and the new
/// one put. A claim of the old handle that commits first makes the source's condition fail
/// ([`Role::Source`]).
pub fn replace_delivery(tx: &mut Tx, source: &SourceRecord, old_hash: &str, new: &Delivery, new_hash: &str) {
    let next = SourceRecord { delivery_hash: Some(new_hash.to_owned()), ..source.clone() };
    tx.put(Role::Source, next.to_item(), awaiting_delivery(new.generation, old_hash));
    tx.delete(Role::Delivery, delivery_key(old_hash), None);
    tx.put(Role::Delivery, new.to_item(new_hash), Cond::NotExists);
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
            room_id: text(item, ROOM_ID),
            source_id: text(item, SOURCE_ID),
            owner_account: text(item, OWNER_ACCOUNT),
            generation: item.n(GENERATION).unwrap_or(0) as u32,
        }
    }
}
