//! The idempotent commit every create and mutation uses: one transaction writes the
//! completed receipt (absent before) with the mutation's own actions; a receipt that
//! already exists answers the retry (replay, conflict, in progress, outcome unknown).

use serde_json::Value;

use super::tx::{Role, Tx, TxFailure};
use super::{Receipt, ReceiptState};
use crate::error::ApiError;
use crate::service::{Mutation, MutationView};
use crate::store::{Cond, Item, Key, Store};

/// The receipt a completed mutation leaves: who asked (request hash), what it answered.
pub struct Completion<'a> {
    pub receipt_key: &'a Key,
    pub request_hash: &'a str,
    pub status: u16,
    pub response: &'a Value,
    /// The run the receipt answers for, when the mutation is a run's.
    pub run_id: Option<&'a str>,
    pub expires_at: i64,
}

/// How an idempotent commit ended.
#[derive(Debug)]
pub enum Committed<V> {
    /// Written now, or answered from the receipt a previous request with this key left.
    Answered(Mutation<V>),
    /// The receipt was free but another action's condition failed: the caller reads the
    /// failure by role (a run that changed, a room that is gone, a colliding fresh id).
    Refused(TxFailure),
}

/// Commits `tx` with the completed receipt put first under [`Role::Receipt`]; `V` is the
/// view `done.response` serializes (and a replay of the key answers with).
pub async fn commit_once<V: MutationView>(
    store: &dyn Store,
    now: i64,
    done: Completion<'_>,
    tx: Tx,
) -> Result<Committed<V>, ApiError> {
    let receipt = Receipt {
        request_hash: done.request_hash.to_owned(),
        state: ReceiptState::Completed { status: done.status, body: done.response.to_string() },
        run_id: done.run_id.map(str::to_owned),
        lease_until: 0,
        expires_at: done.expires_at,
    };
    let mut all = Tx::new();
    all.put(Role::Receipt, receipt.to_item(done.receipt_key), Cond::NotExists);
    all.extend(tx);
    match all.commit(store).await {
        Ok(()) => Ok(Committed::Answered(Mutation::answered(done.status, done.response.clone(), false))),
        Err(f) => {
            if let Some(existing) = f.current(Role::Receipt) {
                return answer_from_receipt(existing, done.request_hash, now).map(|a| Committed::Answered(a.into()));
            }
            // Another request with this key is being written at this instant.
            if f.contended_at(Role::Receipt) {
                return Err(ApiError::IdempotencyInProgress);
            }
            if f.is_cancelled() { Ok(Committed::Refused(f)) } else { Err(f.into()) }
        }
    }
}

/// A receipt's stored answer as read back: the status and the exact JSON the first request
/// was answered with. The use case that owns the operation names its view
/// ([`Mutation::from`]); the storage kernel only keeps the bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredAnswer {
    pub status: u16,
    pub body: Value,
    pub replayed: bool,
}

impl<V: MutationView> From<StoredAnswer> for Mutation<V> {
    fn from(a: StoredAnswer) -> Self {
        Mutation::answered(a.status, a.body, a.replayed)
    }
}

/// What an existing receipt answers for a retry carrying `request_hash` at `now`.
pub fn answer_from_receipt(item: &Item, request_hash: &str, now: i64) -> Result<StoredAnswer, ApiError> {
    let receipt = Receipt::from_item(item)?;
    if receipt.request_hash != request_hash {
        return Err(ApiError::IdempotencyConflict);
    }
    match receipt.state {
        ReceiptState::Completed { status, body } => {
            let body = serde_json::from_str(&body).map_err(ApiError::internal)?;
            Ok(StoredAnswer { status, body, replayed: true })
        }
        ReceiptState::InProgress { .. } if receipt.lease_until > now => Err(match receipt.run_id {
            Some(run_id) => ApiError::IdempotencyInProgressOn { run_id },
            None => ApiError::IdempotencyInProgress,
        }),
        ReceiptState::InProgress { .. } => Err(ApiError::OutcomeUnknown { run_id: receipt.run_id }),
    }
}
