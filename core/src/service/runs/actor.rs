//! Who acts on a run: an agent's caller (its own runs, by the exact owner tuple), or the
//! signed-in person whose account owns the run (the runs of every agent binding of the
//! account: the `/runs` console). Each answers for ownership and for whose receipts its
//! idempotency keys are.

use crate::domain::account::account_ref;
use crate::domain::hash_parts;
use crate::domain::run::Run;
use crate::error::ApiError;
use crate::service::Caller;
use crate::service::records::run_from_item;
use crate::store::Item;

#[derive(Debug, Clone)]
pub enum Actor {
    /// A bearer caller: the runs its own binding started.
    Agent(Caller),
    /// A browser session of the account: the runs of all its agent bindings.
    Person { account_id: String },
}

impl Actor {
    /// The owner named in a mutation's request hash.
    pub(super) fn owner_hash(&self) -> String {
        match self {
            Actor::Agent(p) => p.owner_hash(),
            Actor::Person { account_id } => person_hash(account_id),
        }
    }

    /// Whose receipts the actor's idempotency keys name (a person's never collide with an
    /// agent's: another namespace of the hash).
    pub(super) fn identity_hash(&self) -> String {
        match self {
            Actor::Agent(p) => p.identity_hash(),
            Actor::Person { account_id } => person_hash(account_id),
        }
    }

    /// The caller, whose authentication read may already hold the run and the receipt.
    pub(super) fn caller(&self) -> Option<&Caller> {
        match self {
            Actor::Agent(p) => Some(p),
            Actor::Person { .. } => None,
        }
    }

    /// The run in `item` if this actor may act on it; otherwise `not_found`, as if absent.
    pub(super) fn owns(&self, item: &Item) -> Result<Run, ApiError> {
        match self {
            Actor::Agent(p) => super::owned(p, item),
            Actor::Person { account_id } => owned_by_account(account_id, item),
        }
    }
}

fn person_hash(account_id: &str) -> String {
    hash_parts(&["person.v1", account_id])
}

/// The run in `item` if any agent binding of `account_id` started it.
pub(super) fn owned_by_account(account_id: &str, item: &Item) -> Result<Run, ApiError> {
    let run = run_from_item(item)?;
    if run.ownership.account_ref != account_ref(account_id) {
        return Err(ApiError::NotFound);
    }
    Ok(run)
}
