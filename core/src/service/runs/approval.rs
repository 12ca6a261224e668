//! What a turn's artifact may still not do, checked after the executor and before the
//! finalize: read mode (only the admitted capabilities and evidence families), then the
//! confirmation-governed room mutation it asks for. A mutation proceeds only with a
//! verified receipt of a configured approval host, bound to exactly this turn (run, step,
//! claim) and this mutation (its digest), consumed once in the replay ledger; it is then
//! applied in the finalize's own transaction. Anything else fails the turn, typed, and
//! mutates nothing. Approval is never inferred from text and never signed here.

use super::RunService;
use crate::domain::approval::{RoomMutationKind, RoomMutationRequest, TurnBinding};
use crate::domain::turn::{TurnArtifact, TurnFailure, read_mode_violation};
use crate::error::ApiError;
use crate::service::Caller;
use crate::service::records::approvals::{APPROVAL_LEDGER_TTL_SECS, ConsumedApproval, consume_approval};
use crate::service::records::rooms::{Binding, BindingKind, read_binding};
use crate::service::records::{Role, Tx};
use crate::service::rooms::revoke_binding;

/// An approved room mutation, applied by the finalize.
pub(super) struct ApprovedMutation {
    binding: Binding,
    binding_ref: String,
}

impl ApprovedMutation {
    /// Adds the mutation's actions to the finalize's transaction.
    pub(super) fn apply(&self, tx: &mut Tx, now: chrono::DateTime<chrono::Utc>) {
        revoke_binding(tx, self.binding.clone(), &self.binding_ref, now);
    }

    /// Whether a failed transaction was refused by this mutation's own guards.
    pub(super) fn refused(failure: &crate::service::records::TxFailure) -> bool {
        failure.failed(Role::Binding) || failure.failed(Role::Slot)
    }
}

/// A turn's outcome after governance, and the mutation it may apply.
pub(super) type Governed = (Result<TurnArtifact, TurnFailure>, Option<ApprovedMutation>);

impl RunService {
    pub(super) async fn govern_turn(
        &self,
        p: &Caller,
        turn: TurnBinding<'_>,
        admitted: (&[String], &[String]),
        outcome: Result<TurnArtifact, TurnFailure>,
    ) -> Result<Governed, ApiError> {
        let artifact = match outcome {
            Ok(a) => a,
            Err(f) => return Ok((Err(f), None)),
        };
        let (capabilities, families) = admitted;
        if let Some(violation) = read_mode_violation(&artifact, capabilities, families) {
            return Ok((Err(violation), None));
        }
        let Some(mutation) = &artifact.room_mutation else { return Ok((Ok(artifact), None)) };
        match self.approve(p, turn, mutation).await? {
            Ok(approved) => Ok((Ok(artifact), Some(approved))),
            Err(failure) => Ok((Err(failure), None)),
        }
    }

    /// The checks of one requested mutation, in order: a configured host, a receipt, its
    /// signature over this turn and mutation, the mutation's target, then the ledger
    /// (last, so a refused receipt is never consumed).
    async fn approve(
        &self,
        p: &Caller,
        turn: TurnBinding<'_>,
        m: &RoomMutationRequest,
    ) -> Result<Result<ApprovedMutation, TurnFailure>, ApiError> {
        debug_assert!(m.kind.confirmation_governed(), "every requestable room mutation is governed");
        let keys = &self.config.approval_keys;
        if keys.is_empty() {
            return Ok(Err(TurnFailure::RuntimeApprovalHostUnconfigured));
        }
        let Some(receipt) = &m.approval_receipt else { return Ok(Err(TurnFailure::RuntimeApprovalReceiptMissing)) };
        if keys.verify(receipt, turn, m).is_err() {
            return Ok(Err(TurnFailure::RuntimeApprovalReceiptInvalid));
        }
        let target = match m.kind {
            RoomMutationKind::WithdrawRunRoomBinding => {
                self.own_run_room_binding(p, turn.run_id, &m.binding_ref).await?
            }
        };
        let Some(binding) = target else { return Ok(Err(TurnFailure::RoomBindingMissing)) };
        let consumed = ConsumedApproval {
            run_id: turn.run_id.to_owned(),
            step: turn.step,
            mutation_sha256: m.digest(),
            expires_at: self.clock.epoch() + APPROVAL_LEDGER_TTL_SECS,
        };
        if !consume_approval(&*self.store, &receipt.ledger_id(), &consumed).await? {
            return Ok(Err(TurnFailure::RuntimeApprovalReceiptReplayed));
        }
        Ok(Ok(ApprovedMutation { binding, binding_ref: m.binding_ref.clone() }))
    }

    /// The run's own active run-room binding named `binding_ref`, if it is one.
    async fn own_run_room_binding(
        &self,
        p: &Caller,
        run_id: &str,
        binding_ref: &str,
    ) -> Result<Option<Binding>, ApiError> {
        let Some(r) = crate::domain::room::RunBindingRef::parse(binding_ref) else { return Ok(None) };
        let b = read_binding(&*self.store, r.as_str()).await?;
        Ok(b.filter(|b| {
            b.is_active() && b.kind() == BindingKind::RunRoom && b.run_id == run_id && b.owner_hash == p.owner_hash()
        }))
    }
}
