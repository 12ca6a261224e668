//! Who acts on a run: an agent's caller (its own runs, by the exact owner tuple), or the
//! signed-in person (the `/runs` console: the runs of every agent binding of the account
//! under the owner tuple the browser signed in with, the same tuple as the bearer routes,
//! so another tenant's runs of the same account are not theirs). Each answers for
//! ownership and for whose receipts its idempotency keys are.

use crate::domain::account::account_ref;
use crate::domain::hash_parts;
use crate::domain::run::Run;
use crate::error::ApiError;
use crate::service::Caller;
use crate::service::records::run_from_item;
use crate::service::sessions::Session;
use crate::store::Item;

#[derive(Debug, Clone)]
pub enum Actor {
    /// A bearer caller: the runs its own binding started.
    Agent(Caller),
    /// A browser session: the runs of all the account's agent bindings under the owner
    /// tuple it signed in with (none recorded: no run).
    Person { account_id: String, owner_hash: Option<String> },
}

impl Actor {
    /// The signed-in person of a browser session.
    pub(super) fn person(s: &Session) -> Actor {
        Actor::Person { account_id: s.account_id.clone(), owner_hash: s.owner_hash.clone() }
    }

    /// The owner named in a mutation's request hash.
    pub(super) fn owner_hash(&self) -> String {
        match self {
            Actor::Agent(p) => p.owner_hash(),
            Actor::Person { account_id, owner_hash } => person_hash(account_id, owner_hash.as_deref()),
        }
    }

    /// Whose receipts the actor's idempotency keys name (a person's never collide with an
    /// agent's: another namespace of the hash).
    pub(super) fn identity_hash(&self) -> String {
        match self {
            Actor::Agent(p) => p.identity_hash(),
            Actor::Person { account_id, owner_hash } => person_hash(account_id, owner_hash.as_deref()),
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
            Actor::Person { account_id, owner_hash } => owned_by_person(account_id, owner_hash.as_deref(), item),
        }
    }
}

/// A person's receipts are theirs under the owner tuple they signed in with: the same key
/// sent from another tenant's session never replays this one's answer.
fn person_hash(account_id: &str, owner_hash: Option<&str>) -> String {
    hash_parts(&["person.v2", account_id, owner_hash.unwrap_or("")])
}

/// The run in `item` if an agent binding of `account_id` started it under the owner tuple
/// `owner_hash` (none: no run is the person's).
fn owned_by_person(account_id: &str, owner_hash: Option<&str>, item: &Item) -> Result<Run, ApiError> {
    let run = run_from_item(item)?;
    if run.ownership.account_ref != account_ref(account_id) || owner_hash != Some(run.owner_hash.as_str()) {
        return Err(ApiError::NotFound);
    }
    Ok(run)
}
