//! Late effects: the one rule for a command Helix takes from the connector (an Emergency
//! Stop, a cancel, a pause, a deadline, a new epoch, a revocation) and for what the
//! connector reports about it afterwards. A held mutating step may still have happened,
//! so the workflow says `late_effects_possible` whatever state it ends in; the
//! connector's later acknowledgements of that command are recorded in the workflow
//! (`late_acknowledgements`) and answered `recorded_late` (final: nothing to send again),
//! never dropped. Must not depend on `http` or `mcp`.

use super::{EmbodimentService, RACE_RETRIES};
use crate::domain::embodiment::protocol::Ack;
use crate::domain::embodiment::{LateAck, WorkflowState};
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::records::embodiment::{
    EnvBinding, MAX_LATE_ACKS, Withdrawn, WorkflowRecord, at_epoch, read_workflow,
};
use crate::service::records::{Role, Tx};

/// The answer to a late acknowledgement: recorded, never to be sent again.
pub const RECORDED_LATE: &str = "recorded_late";

impl WorkflowRecord {
    /// `self` is the next revision of `held`, moving to a state in which the connector no
    /// longer holds the command: the command is remembered as withdrawn, and a mutating
    /// step makes late effects possible.
    pub(super) fn withdraw_from(&mut self, held: &WorkflowRecord) {
        if !held.state.at_connector() || self.state.at_connector() {
            return;
        }
        if let Some(lease_token) = held.lease_token.clone() {
            self.withdrawn = Some(Withdrawn { lease_token, step_index: held.step_index, last_seq: held.last_seq });
        }
        self.late_effects |= held.steps.get(held.step_index as usize).is_some_and(|s| s.mutates());
    }

    /// Whether `ack` is about the command Helix withdrew, with a sequence not yet recorded.
    pub(super) fn is_late(&self, ack: &Ack) -> bool {
        self.withdrawn
            .as_ref()
            .is_some_and(|c| c.lease_token == ack.lease_token && c.step_index == ack.step_index && ack.seq > c.last_seq)
    }

    /// Appends a late acknowledgement (the newest replaces the last one when full).
    pub(super) fn push_late(&mut self, late: LateAck) {
        if self.late_acks.len() >= MAX_LATE_ACKS {
            self.late_acks.pop();
        }
        self.late_acks.push(late);
    }

    /// What the agent is told: effects may still arrive.
    pub fn late_effects_possible(&self) -> bool {
        self.state.at_connector() || self.state == WorkflowState::OutcomeUnknown || self.late_effects
    }
}

impl EmbodimentService {
    /// Records an acknowledgement of a withdrawn command in its workflow (conditional on
    /// the workflow's revision and on the binding still at this epoch; an Emergency Stop
    /// does not hold it back: the stop is why it is late). Answers `recorded_late`, or
    /// None when the acknowledgement is not about the withdrawn command.
    pub(super) async fn record_late(
        &self,
        binding: &EnvBinding,
        ack: &Ack,
        w: WorkflowRecord,
    ) -> Result<Option<(&'static str, Option<WorkflowRecord>)>, ApiError> {
        let mut w = w;
        for _ in 0..RACE_RETRIES {
            if !w.is_late(ack) {
                return Ok(None);
            }
            let Some(step) = w.steps.get(ack.step_index as usize) else { return Ok(None) };
            let late = LateAck::of(ack.step_index, step, ack, rfc3339(self.clock.now()));
            let mut n = w.next();
            n.late_effects |= late.may_have_effect(step);
            if let Some(c) = n.withdrawn.as_mut() {
                c.last_seq = ack.seq;
            }
            n.push_late(late);
            n.updated_at = rfc3339(self.clock.now());
            let mut tx = Tx::new();
            n.write_from_poll(&mut tx, w.rev);
            tx.check(Role::EnvBinding, binding.key(), at_epoch(binding.epoch));
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => return Ok(Some((RECORDED_LATE, Some(n)))),
                Err(f) if f.failed(Role::EnvBinding) => return Ok(Some(("stale_epoch", None))),
                Err(f) if f.failed(Role::Workflow) || f.contended() => {
                    match read_workflow(self.store.as_ref(), &w.room_id, &w.workflow_ref).await? {
                        Some(fresh) => w = fresh,
                        None => return Ok(None),
                    }
                }
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }
}
