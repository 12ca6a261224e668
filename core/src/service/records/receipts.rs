//! Idempotency receipts as stored: the key (scoped by the token identity), the typed
//! record of a reservation or a completed response, and the condition that a
//! reservation is still the claimant's. Knows no use case.

use super::BODY;
use super::attrs::{CLAIM_TOKEN, LEASE_UNTIL, REQUEST_HASH, RUN_ID, STATE, STATUS};
use crate::domain::hash_parts;
use crate::error::ApiError;
use crate::store::{Cond, EXPIRES_AT, Item, Key};

const IN_PROGRESS: &str = "in_progress";
const COMPLETED: &str = "completed";

pub const RECEIPT_TTL_SECS: i64 = 24 * 3600;

/// A receipt is keyed by the token identity (issuer, tenant, provider, subject), which the
/// transport knows before the principal read; see `runs::request_hash` for the owner.
pub fn receipt_key(identity_hash: &str, operation: &str, idempotency_key: &str) -> Key {
    Key::new(format!("IDEM#{}", hash_parts(&["idem.v1", identity_hash, operation, idempotency_key])), "IDEM")
}

/// The receipt is still the reservation of the turn holding `claim_token` (a finalize
/// or a discard of that turn may complete it; nobody else may).
pub fn held_by(claim_token: &str) -> Cond {
    Cond::eq_s(CLAIM_TOKEN, claim_token)
}

/// An idempotency receipt: a reservation (in progress, with a lease) or a completed
/// response kept for 24 hours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub request_hash: String,
    pub state: ReceiptState,
    pub run_id: Option<String>,
    pub lease_until: i64,
    pub expires_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiptState {
    InProgress { claim_token: String },
    Completed { status: u16, body: String },
}

impl Receipt {
    pub fn to_item(&self, key: &Key) -> Item {
        let mut item = Item::new(key.pk.clone(), key.sk.clone())
            .with_s(REQUEST_HASH, &self.request_hash)
            .with_n(LEASE_UNTIL, self.lease_until)
            .with_n(EXPIRES_AT, self.expires_at);
        if let Some(id) = &self.run_id {
            item = item.with_s(RUN_ID, id);
        }
        match &self.state {
            ReceiptState::InProgress { claim_token } => {
                item.with_s(STATE, IN_PROGRESS).with_s(CLAIM_TOKEN, claim_token)
            }
            ReceiptState::Completed { status, body } => {
                item.with_s(STATE, COMPLETED).with_n(STATUS, *status as i64).with_s(BODY, body)
            }
        }
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        let broken = || ApiError::internal(std::io::Error::other("malformed idempotency receipt"));
        let state = match item.s(STATE) {
            Some(IN_PROGRESS) => {
                ReceiptState::InProgress { claim_token: item.s(CLAIM_TOKEN).ok_or_else(broken)?.to_owned() }
            }
            Some(COMPLETED) => ReceiptState::Completed {
                status: item.n(STATUS).ok_or_else(broken)? as u16,
                body: item.s(BODY).ok_or_else(broken)?.to_owned(),
            },
            _ => return Err(broken()),
        };
        Ok(Receipt {
            request_hash: item.s(REQUEST_HASH).ok_or_else(broken)?.to_owned(),
            state,
            run_id: item.s(RUN_ID).map(str::to_owned),
            lease_until: item.n(LEASE_UNTIL).unwrap_or(0),
            expires_at: item.n(EXPIRES_AT).unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        receipt_key("identity", "run.start", "key-0001")
    }

    #[test]
    fn both_receipt_states_round_trip_through_their_item() {
        for state in [
            ReceiptState::InProgress { claim_token: "c0ffee".into() },
            ReceiptState::Completed { status: 201, body: "{\"a\":1}".into() },
        ] {
            for run_id in [None, Some("run_x".to_owned())] {
                let r =
                    Receipt { request_hash: "h".into(), state: state.clone(), run_id, lease_until: 5, expires_at: 9 };
                assert_eq!(Receipt::from_item(&r.to_item(&key())).unwrap(), r);
            }
        }
    }

    #[test]
    fn a_receipt_without_a_known_state_is_malformed() {
        let item = Item::new("IDEM#x", "IDEM").with_s(REQUEST_HASH, "h");
        assert!(Receipt::from_item(&item).is_err());
        assert!(Receipt::from_item(&item.with_s(STATE, COMPLETED)).is_err(), "completed needs status and body");
    }

    #[test]
    fn the_claim_condition_holds_only_for_the_claimant() {
        let r = Receipt {
            request_hash: "h".into(),
            state: ReceiptState::InProgress { claim_token: "mine".into() },
            run_id: None,
            lease_until: 0,
            expires_at: i64::MAX,
        };
        let item = r.to_item(&key());
        assert!(held_by("mine").holds(Some(&item), 0));
        assert!(!held_by("theirs").holds(Some(&item), 0));
        assert!(!held_by("mine").holds(None, 0));
    }
}
