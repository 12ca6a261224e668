//! Who calls a use case: an agent (a verified bearer [`Caller`]) or a person (a signed-in
//! browser [`Session`]). The transports build one in their extractors; a use case that both
//! lanes offer is written once over `&Actor`. How an actor was authenticated, and the checks
//! only its lane applies (same-origin and guests for a person), stay in the lane; what
//! differs per kind of actor inside a use case is answered here: the scopes an agent's
//! grant must hold (a person holds no grant: its lane admitted it), whose runs it may act
//! on, and whose receipts its idempotency keys name. Must not depend on `http` or `mcp`.
//!
//! A person acts on the runs of every agent binding of the account under the owner tuple
//! the browser signed in with (the same tuple as the bearer routes, so another tenant's
//! runs of the same account are not theirs).

use crate::domain::account::{AccountPolicy, account_ref};
use crate::domain::hash_parts;
use crate::domain::page::PagedList;
use crate::domain::run::Run;
use crate::error::ApiError;
use crate::service::Caller;
use crate::service::records::rooms::RoomTenant;
use crate::service::records::run_from_item;
use crate::service::sessions::Session;
use crate::store::{Item, Key};

#[derive(Debug, Clone)]
pub enum Actor {
    /// A bearer caller: the runs its own binding started.
    Agent(Caller),
    /// A browser session: the runs of all the account's agent bindings under the owner
    /// tuple it signed in with (none recorded: no run).
    Person(Session),
}

impl From<Caller> for Actor {
    fn from(c: Caller) -> Self {
        Actor::Agent(c)
    }
}

impl From<Session> for Actor {
    fn from(s: Session) -> Self {
        Actor::Person(s)
    }
}

impl Actor {
    /// The signed-in person of a browser session.
    pub fn person(s: &Session) -> Actor {
        Actor::Person(s.clone())
    }

    /// The account the actor acts for.
    pub fn account_id(&self) -> &str {
        match self {
            Actor::Agent(p) => &p.account_id,
            Actor::Person(s) => &s.account_id,
        }
    }

    /// The account's policy, read with the principal or the session on this request.
    pub fn policy(&self) -> &AccountPolicy {
        match self {
            Actor::Agent(p) => &p.policy,
            Actor::Person(s) => &s.policy,
        }
    }

    /// The tenant the actor reaches rooms under: an agent's owner tuple's, a person's the
    /// one it signed in with (`issuer`: this deployment's, for sessions from before
    /// tenants were recorded).
    pub(crate) fn room_tenant(&self, issuer: &str) -> RoomTenant {
        match self {
            Actor::Agent(p) => crate::service::rooms::room_tenant(p),
            Actor::Person(s) => RoomTenant::of_session(s.tenant_ref.as_deref(), issuer),
        }
    }

    /// A room member acting in a room: an agent's grant holds `scopes`; a person is a
    /// member session, never a guest.
    pub(crate) fn require_room_member(&self, scopes: &[&str]) -> Result<(), ApiError> {
        match self {
            Actor::Agent(p) => p.require(scopes),
            Actor::Person(s) => s.require_member(),
        }
    }

    /// An agent's grant must hold every scope of `scopes`; a person has no grant to check
    /// (its lane admitted it: a live session from the public origin).
    pub fn require(&self, scopes: &[&str]) -> Result<(), ApiError> {
        match self {
            Actor::Agent(p) => p.require(scopes),
            Actor::Person(_) => Ok(()),
        }
    }

    /// The owner named in a mutation's request hash.
    pub(crate) fn owner_hash(&self) -> String {
        match self {
            Actor::Agent(p) => p.owner_hash(),
            Actor::Person(s) => person_hash(&s.account_id, s.owner_hash.as_deref()),
        }
    }

    /// Whose receipts the actor's idempotency keys name (a person's never collide with an
    /// agent's: another namespace of the hash).
    pub(crate) fn identity_hash(&self) -> String {
        match self {
            Actor::Agent(p) => p.identity_hash(),
            Actor::Person(s) => person_hash(&s.account_id, s.owner_hash.as_deref()),
        }
    }

    /// The caller, whose authentication read may already hold the run and the receipt.
    pub(crate) fn caller(&self) -> Option<&Caller> {
        match self {
            Actor::Agent(p) => Some(p),
            Actor::Person(_) => None,
        }
    }

    /// The item the authentication read already holds for `key` (an agent's run route
    /// prefetches its run and receipt with the principal): `Some(None)` means read and absent.
    pub(crate) fn prefetched(&self, key: &Key) -> Option<Option<Item>> {
        self.caller().and_then(|p| p.prefetched(key))
    }

    /// The run in `item` if this actor may act on it; otherwise `not_found`, as if absent.
    pub(crate) fn owns(&self, item: &Item) -> Result<Run, ApiError> {
        match self {
            Actor::Agent(p) => super::runs::owned_by(&p.owner_hash(), item),
            Actor::Person(s) => owned_by_person(&s.account_id, s.owner_hash.as_deref(), item),
        }
    }

    /// Which run listing the actor pages (cursors of one never continue the other) and the
    /// owner tuple its runs were started under. A session from before the tuple was
    /// recorded has none: nothing matches an empty owner hash, so it lists no run (fail
    /// closed; signing in again records it).
    pub(crate) fn run_listing(&self) -> (PagedList, String) {
        match self {
            Actor::Agent(p) => (PagedList::Runs, p.owner_hash()),
            Actor::Person(s) => (PagedList::AccountRuns, s.owner_hash.clone().unwrap_or_default()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::account::AccountPolicy;

    fn person(owner_hash: Option<&str>, guest: bool) -> Actor {
        Actor::Person(Session {
            token_hash: "t".into(),
            account_id: "acct_1".into(),
            policy: AccountPolicy { guest, ..AccountPolicy::default() },
            tenant_ref: None,
            owner_hash: owner_hash.map(str::to_owned),
        })
    }

    #[test]
    fn a_session_without_an_owner_tuple_lists_under_no_owner() {
        assert_eq!(person(None, false).run_listing(), (PagedList::AccountRuns, String::new()));
        assert_eq!(person(Some("o1"), false).run_listing(), (PagedList::AccountRuns, "o1".to_owned()));
    }

    #[test]
    fn a_persons_receipts_differ_by_the_owner_tuple_it_signed_in_with() {
        let (a, b) = (person(Some("o1"), false), person(Some("o2"), false));
        assert_ne!(a.identity_hash(), b.identity_hash());
        assert_eq!(a.identity_hash(), a.owner_hash());
    }

    #[test]
    fn a_person_holds_no_grant_but_a_guest_is_no_room_member() {
        assert!(person(None, false).require(&["helix.runs.write"]).is_ok());
        assert!(person(None, false).require_room_member(&["helix.rooms.read"]).is_ok());
        let guest = person(None, true).require_room_member(&["helix.rooms.read"]);
        assert!(matches!(guest, Err(ApiError::GuestNotAllowed)));
        assert!(person(None, false).caller().is_none());
    }
}
