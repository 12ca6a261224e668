//! The one-time replay ledger of runtime approval receipts: one item per consumed
//! receipt, written only when absent (a second use of the same receipt is refused by the
//! condition, on both backends), kept until `expires_at`. Knows no use case.

use super::attrs::{MUTATION_SHA256, RUN_ID, STEP};
use crate::store::{Cond, EXPIRES_AT, Item, Key, Store, StoreError};

/// A consumed receipt outlives every turn it could be bound to: eight days, one more
/// than the longest run lifetime (seven days).
pub const APPROVAL_LEDGER_TTL_SECS: i64 = 8 * 24 * 3600;

/// A consumed receipt, by its ledger identity (issuer, key id, receipt id, hashed).
pub fn approval_key(ledger_id: &str) -> Key {
    Key::new(format!("APPROVAL#{ledger_id}"), "APPROVAL")
}

/// What the ledger keeps of a consumed receipt: where it was used, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedApproval {
    pub run_id: String,
    pub step: u32,
    pub mutation_sha256: String,
    pub expires_at: i64,
}

impl ConsumedApproval {
    pub fn to_item(&self, ledger_id: &str) -> Item {
        let key = approval_key(ledger_id);
        Item::new(key.pk, key.sk)
            .with_s(RUN_ID, &self.run_id)
            .with_n(STEP, self.step as i64)
            .with_s(MUTATION_SHA256, &self.mutation_sha256)
            .with_n(EXPIRES_AT, self.expires_at)
    }

    pub fn from_item(item: &Item) -> Option<Self> {
        Some(ConsumedApproval {
            run_id: item.s(RUN_ID)?.to_owned(),
            step: item.n(STEP)? as u32,
            mutation_sha256: item.s(MUTATION_SHA256)?.to_owned(),
            expires_at: item.n(EXPIRES_AT).unwrap_or(0),
        })
    }
}

/// Consumes the receipt: `Ok(true)` when this call recorded it, `Ok(false)` when it was
/// already consumed (a replay).
pub async fn consume_approval(store: &dyn Store, ledger_id: &str, c: &ConsumedApproval) -> Result<bool, StoreError> {
    match store.put(c.to_item(ledger_id), Some(Cond::NotExists)).await {
        Ok(()) => Ok(true),
        Err(StoreError::ConditionFailed { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_consumed_receipt_round_trips_through_its_item() {
        let c = ConsumedApproval { run_id: "run_x".into(), step: 3, mutation_sha256: "ab".into(), expires_at: 9 };
        let item = c.to_item("lid");
        assert_eq!((item.pk.as_str(), item.sk.as_str()), ("APPROVAL#lid", "APPROVAL"));
        assert_eq!(ConsumedApproval::from_item(&item), Some(c));
    }

    #[cfg(feature = "embedded")]
    #[tokio::test]
    async fn the_second_consumption_of_a_receipt_is_a_replay() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::embedded::EmbeddedStore::open(&dir.path().join("t.redb")).unwrap();
        let c =
            ConsumedApproval { run_id: "run_x".into(), step: 1, mutation_sha256: "ab".into(), expires_at: i64::MAX };
        assert!(consume_approval(&store, "lid", &c).await.unwrap());
        assert!(!consume_approval(&store, "lid", &c).await.unwrap());
        assert!(consume_approval(&store, "other", &c).await.unwrap());
    }
}
