//! One transaction builder for every use case. Each action carries the [`Role`] it plays,
//! and a cancelled transaction is read back by role, never by position: the position of
//! an action is known here only.

use crate::error::ApiError;
use crate::store::{CancelReason, Cond, Item, Key, Store, StoreError, WriteOp};

/// What an action of a transaction is for. A refusal names the role whose condition
/// failed, so a use case maps "the receipt exists" or "the slot is taken" to its answer
/// without knowing where in the transaction that action sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The idempotency receipt of the mutation (put when absent).
    Receipt,
    /// A run item (compare-and-set on its revision, or put when absent).
    Run,
    /// A run event (put when absent).
    Event,
    /// A check that a run belongs to the caller.
    RunOwner,
    /// A room item, or a check of the room's state.
    Room,
    /// A room membership, or a check of its consent.
    Member,
    /// A listing entry under an account (a room of the account, a binding of the account).
    AccountEntry,
    /// An accepted consent receipt.
    Consent,
    /// A one-active-binding slot (`RUNROOM#`, `RUNCHAT#`).
    Slot,
    /// A run-room or chat binding.
    Binding,
    /// A one-time claim handle.
    Claim,
    /// A single-use room invite.
    Invite,
    /// An observer of a chat.
    Observer,
    /// The snapshot kept with an observer.
    Snapshot,
    /// A room source.
    Source,
    /// The pending one-time delivery of a source credential.
    Delivery,
    /// The lookup of a source bearer by its hash.
    BearerLookup,
    /// One stored observation of a source.
    Observation,
    /// The marker of a producer's request identity (one per observation or answer).
    RequestMarker,
    /// A source's health marker (moves forward only).
    HealthMarker,
    /// A probe record.
    Probe,
    /// A probe's pending marker.
    PendingProbe,
    /// An account item, or a check of it.
    Account,
    /// An agent account binding.
    AgentBinding,
    /// An account link (provider subject to account).
    Link,
    /// A browser session.
    Session,
    /// A sign-in intent.
    Intent,
    /// An environment binding (action-connector pairing, directory, leases, stop).
    EnvBinding,
    /// The lookup of a connector credential by its hash.
    ConnectorLookup,
    /// A player-action workflow.
    Workflow,
    /// The open marker of a non-terminal workflow.
    OpenMarker,
    /// A binding's pending-work marker (what lets an idle connector poll skip its query).
    WorkMarker,
}

/// An all-or-nothing transaction under construction.
#[derive(Debug, Default, Clone)]
pub struct Tx {
    ops: Vec<(Role, WriteOp)>,
}

impl Tx {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn put(&mut self, role: Role, item: Item, cond: impl Into<Option<Cond>>) -> &mut Self {
        self.ops.push((role, WriteOp::Put { item, cond: cond.into() }));
        self
    }

    pub fn check(&mut self, role: Role, key: Key, cond: Cond) -> &mut Self {
        self.ops.push((role, WriteOp::Check { key, cond }));
        self
    }

    pub fn delete(&mut self, role: Role, key: Key, cond: impl Into<Option<Cond>>) -> &mut Self {
        self.ops.push((role, WriteOp::Delete { key, cond: cond.into() }));
        self
    }

    /// Drops every action of `role` (e.g. to write a batch again without a marker that
    /// a newer batch already moved).
    pub fn without(&mut self, role: Role) -> &mut Self {
        self.ops.retain(|(r, _)| *r != role);
        self
    }

    /// Appends the actions of `other`, keeping their roles.
    pub fn extend(&mut self, other: Tx) -> &mut Self {
        self.ops.extend(other.ops);
        self
    }

    pub fn has(&self, role: Role) -> bool {
        self.ops.iter().any(|(r, _)| *r == role)
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Commits every action or none. A cancelled transaction is a [`TxFailure`] that
    /// names the roles whose conditions failed.
    /// The transaction is consumed: its items move into the store request, uncopied.
    pub async fn commit(self, store: &dyn Store) -> Result<(), TxFailure> {
        let (roles, ops): (Vec<Role>, Vec<WriteOp>) = self.ops.into_iter().unzip();
        store.transact(ops).await.map_err(|error| TxFailure { roles, error })
    }
}

/// Why a transaction did not commit: a cancellation (read by role) or a store error.
#[derive(Debug)]
pub struct TxFailure {
    roles: Vec<Role>,
    error: StoreError,
}

impl TxFailure {
    fn reasons(&self) -> impl Iterator<Item = (Role, &CancelReason)> {
        let reasons: &[CancelReason] = match &self.error {
            StoreError::TransactionCanceled { reasons } => reasons,
            _ => &[],
        };
        self.roles.iter().copied().zip(reasons.iter())
    }

    /// True when the condition of an action of `role` failed.
    pub fn failed(&self, role: Role) -> bool {
        self.reasons().any(|(r, reason)| r == role && matches!(reason, CancelReason::ConditionFailed { .. }))
    }

    /// The stored item behind the first failed action of `role` (None when that item is
    /// absent, or when no action of `role` failed).
    pub fn current(&self, role: Role) -> Option<&Item> {
        self.reasons().find_map(|(r, reason)| match reason {
            CancelReason::ConditionFailed { current } if r == role => current.as_ref(),
            _ => None,
        })
    }

    /// True when the backend cancelled an action for another reason than its condition
    /// (a concurrent transaction on the same item): a retry may succeed.
    pub fn contended(&self) -> bool {
        self.reasons().any(|(_, reason)| matches!(reason, CancelReason::Other(_)))
    }

    /// True when the backend gave another reason than a condition for an action of `role`.
    pub fn contended_at(&self, role: Role) -> bool {
        self.reasons().any(|(r, reason)| r == role && matches!(reason, CancelReason::Other(_)))
    }

    /// True when the transaction was cancelled (rather than failing in the store).
    pub fn is_cancelled(&self) -> bool {
        matches!(self.error, StoreError::TransactionCanceled { .. })
    }

    pub fn into_store_error(self) -> StoreError {
        self.error
    }
}

impl From<TxFailure> for ApiError {
    fn from(f: TxFailure) -> Self {
        f.error.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cancelled(roles: Vec<Role>, reasons: Vec<CancelReason>) -> TxFailure {
        TxFailure { roles, error: StoreError::TransactionCanceled { reasons } }
    }

    #[test]
    fn a_failure_is_read_by_the_role_that_failed_not_by_position() {
        let stored = Item::new("IDEM#x", "IDEM");
        let f = cancelled(
            vec![Role::Receipt, Role::Run, Role::Event],
            vec![
                CancelReason::None,
                CancelReason::ConditionFailed { current: Some(stored.clone()) },
                CancelReason::None,
            ],
        );
        assert!(f.failed(Role::Run));
        assert!(!f.failed(Role::Receipt));
        assert!(!f.failed(Role::Event));
        assert_eq!(f.current(Role::Run), Some(&stored));
        assert!(!f.contended());
    }

    #[test]
    fn a_role_repeated_fails_when_any_of_its_actions_fails() {
        let f = cancelled(
            vec![Role::Observation, Role::Observation, Role::HealthMarker],
            vec![CancelReason::None, CancelReason::ConditionFailed { current: None }, CancelReason::None],
        );
        assert!(f.failed(Role::Observation));
        assert_eq!(f.current(Role::Observation), None);
        assert!(!f.failed(Role::HealthMarker));
    }

    #[test]
    fn another_reason_is_contention_not_a_failed_condition() {
        let f =
            cancelled(vec![Role::Receipt, Role::Room], vec![CancelReason::Other("busy".into()), CancelReason::None]);
        assert!(f.contended());
        assert!(f.contended_at(Role::Receipt));
        assert!(!f.failed(Role::Receipt));
    }

    #[test]
    fn a_store_error_is_no_cancellation() {
        let f = TxFailure { roles: vec![Role::Run], error: StoreError::Invalid("x".into()) };
        assert!(!f.is_cancelled());
        assert!(!f.failed(Role::Run));
        assert!(!f.contended());
    }

    #[test]
    fn without_drops_every_action_of_a_role() {
        let mut tx = Tx::new();
        tx.put(Role::Observation, Item::new("a", "1"), Cond::NotExists)
            .put(Role::HealthMarker, Item::new("a", "H"), None)
            .check(Role::Source, Key::new("a", "S"), Cond::Exists);
        tx.without(Role::HealthMarker);
        assert_eq!(tx.len(), 2);
        assert!(!tx.has(Role::HealthMarker));
    }
}
