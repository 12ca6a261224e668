//! The southbound connector (connector credential only): authentication with every
//! boundary rechecked on every use, registration (a new fencing epoch), and the one poll
//! that applies acknowledgements and hands out leased commands, the cancel list and the
//! Emergency Stop generation. Must not depend on `http` or `mcp`.

use std::collections::BTreeSet;

mod auth;
mod poll;

pub use auth::AuthedConnector;
pub(super) use auth::LookupCache;

use super::{DEAD_MAN_MS, EmbodimentService, POLL_INTERVAL_MS, RACE_RETRIES};
use crate::domain::embodiment::protocol::*;
use crate::domain::embodiment::{
    LateAck, REGISTER_SCHEMA, WorkflowState, action_schema_hash, postcondition_met, subject_ref,
};
use crate::domain::random_hex;
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::records::embodiment::{
    EnvBinding, RegisteredConnector, SubjectEntry, WorkflowRecord, at_epoch, not_stopped_for, open_workflows,
    read_workflow,
};
use crate::service::records::rooms::{member_key, member_may_act};
use crate::service::records::{Role, Tx};

/// The v1 step types a connector may declare.
/// Why a workflow paused: its member no longer may act (authority revoked, or removed).
const AUTHORITY_REVOKED: &str = "action_authority_revoked";

const STEP_TYPES: &[&str] =
    &["move_to", "look_at", "stop", "break_block", "place_block", "equip", "craft", "chat", "wait"];

impl EmbodimentService {
    /// `POST /api/connectors/v1/register`: admits the manifest and raises the epoch. The
    /// workflows a previous registration held at the connector are paused (`connector_epoch_changed`).
    pub async fn register_connector(
        &self,
        a: &AuthedConnector,
        req: RegisterRequest,
    ) -> Result<RegisterReceipt, ApiError> {
        let refuse = |reason| Err(ApiError::ConnectorRegistrationRefused { reason });
        if req.protocol != PROTOCOL_V1 {
            return refuse("protocol");
        }
        if req.manifest.world_id != a.binding.world_id {
            return refuse("world_id");
        }
        if req.schema_hash != action_schema_hash() {
            return refuse("schema_hash");
        }
        if req.capabilities.is_empty() || req.capabilities.iter().any(|c| !STEP_TYPES.contains(&c.as_str())) {
            return refuse("capabilities");
        }
        check_subjects(&req.subjects)?;
        let mut binding = a.binding.clone();
        for _ in 0..RACE_RETRIES {
            let mut next = binding.next();
            next.epoch = binding.epoch + 1;
            next.connector = Some(RegisteredConnector {
                connector_name: req.manifest.connector_name.clone(),
                connector_version: req.manifest.connector_version.clone(),
                schema_hash: req.schema_hash.clone(),
                capabilities: req.capabilities.clone(),
                registered_at: rfc3339(self.clock.now()),
            });
            next.last_seen = self.clock.epoch();
            set_directory(&mut next, &req.subjects);
            let mut tx = Tx::new();
            next.write(&mut tx, binding.rev);
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => {
                    self.pause_at_connector(&next, "connector_epoch_changed").await?;
                    return Ok(RegisterReceipt {
                        schema: REGISTER_SCHEMA.into(),
                        environment_binding_id: next.binding_id,
                        epoch: next.epoch,
                        poll_interval_ms: POLL_INTERVAL_MS,
                        dead_man_ms: DEAD_MAN_MS,
                    });
                }
                Err(f) if f.failed(Role::EnvBinding) || f.contended() => {
                    binding = self.reread(&binding).await?;
                }
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }

    async fn reread(&self, b: &EnvBinding) -> Result<EnvBinding, ApiError> {
        let item = self.store.get(&b.key()).await?.ok_or(ApiError::ConnectorCredentialInvalid)?;
        let fresh = EnvBinding::from_item(&item)?;
        if !fresh.is_active() || fresh.credential_hash != b.credential_hash {
            return Err(ApiError::ConnectorCredentialInvalid);
        }
        Ok(fresh)
    }

    /// Writes the last-seen time and a changed directory (at the same epoch only).
    pub(super) async fn touch(
        &self,
        mut binding: EnvBinding,
        subjects: Option<&[ReportedSubject]>,
    ) -> Result<EnvBinding, ApiError> {
        let epoch = binding.epoch;
        for _ in 0..RACE_RETRIES {
            let mut next = binding.next();
            next.last_seen = self.clock.epoch();
            if let Some(s) = subjects {
                set_directory(&mut next, s);
            }
            let mut tx = Tx::new();
            next.write(&mut tx, binding.rev);
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => return Ok(next),
                Err(f) if f.failed(Role::EnvBinding) || f.contended() => {
                    binding = self.reread(&binding).await?;
                    if binding.epoch != epoch {
                        return Err(ApiError::ConnectorEpochStale { current: binding.epoch });
                    }
                }
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }

    /// Applies one acknowledgement: only for this binding's workflow, at the connector,
    /// under its current lease token and dispatch epoch, with a higher sequence; the write
    /// is conditional on the workflow's revision and on the binding still at this epoch
    /// with no Emergency Stop (of the binding or of the workflow's subject).
    /// The workflow is taken from the poll's query (`open`) first, read again after a lost race.
    pub(super) async fn apply_ack(
        &self,
        binding: &EnvBinding,
        ack: &Ack,
        open: &[WorkflowRecord],
    ) -> Result<(&'static str, Option<WorkflowRecord>), ApiError> {
        let mut queried = open.iter().find(|w| w.workflow_ref == ack.workflow_ref).cloned();
        for _ in 0..RACE_RETRIES {
            let w = match queried.take() {
                Some(w) => w,
                None => match read_workflow(self.store.as_ref(), &binding.room_id, &ack.workflow_ref).await? {
                    Some(w) => w,
                    None => return Ok(("unknown_workflow", None)),
                },
            };
            if w.binding_id != binding.binding_id {
                return Ok(("unknown_workflow", None));
            }
            if w.dispatch_epoch != Some(binding.epoch) {
                return Ok(("stale_epoch", None));
            }
            // About a command Helix took from the connector: recorded, never dropped.
            let current = w.state.at_connector()
                && w.lease_token.as_deref() == Some(ack.lease_token.as_str())
                && w.step_index == ack.step_index;
            if !current && let Some(late) = self.record_late(binding, ack, w.clone()).await? {
                return Ok(late);
            }
            if !w.state.at_connector() {
                return Ok(("not_at_connector", None));
            }
            if w.lease_token.as_deref() != Some(ack.lease_token.as_str()) || w.step_index != ack.step_index {
                return Ok(("lease_mismatch", None));
            }
            if ack.seq <= w.last_seq {
                return Ok(("stale_seq", None));
            }
            let next = self.acked(&w, ack);
            let mut tx = Tx::new();
            next.write_from_poll(&mut tx, w.rev);
            let guard = crate::store::Cond::And(vec![at_epoch(binding.epoch), not_stopped_for(&w.native_id)]);
            tx.check(Role::EnvBinding, binding.key(), guard);
            tx.check(Role::Member, member_key(&w.room_id, &w.account_id), member_may_act());
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => return Ok(("applied", Some(next))),
                Err(f) if f.failed(Role::EnvBinding) => return Ok(("stale_epoch", None)),
                Err(f) if f.failed(Role::Member) => {
                    // Taken from the connector (a held mutation: outcome unknown); the
                    // acknowledgement that found it so is recorded as late.
                    let Some(held) = self.settle_to(&w, held_state(&w), Some(AUTHORITY_REVOKED)).await? else {
                        return Ok((AUTHORITY_REVOKED, None));
                    };
                    let recorded = self.record_late(binding, ack, held.clone()).await?;
                    return Ok((AUTHORITY_REVOKED, recorded.and_then(|(_, w)| w).or(Some(held))));
                }
                Err(f) if f.failed(Role::Workflow) || f.contended() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }

    /// The workflow after an acknowledgement (one transition of the table).
    fn acked(&self, w: &WorkflowRecord, ack: &Ack) -> WorkflowRecord {
        use WorkflowState::*;
        let now = rfc3339(self.clock.now());
        let mut n = w.next();
        n.last_seq = ack.seq;
        n.updated_at = now.clone();
        let step = &w.steps[w.step_index as usize];
        let to = |n: &mut WorkflowRecord, s: WorkflowState, reason: Option<&str>| {
            debug_assert!(n.state.may_become(s) || n.state == s, "{:?} -> {s:?}", n.state);
            n.state = s;
            n.reason = reason.map(str::to_owned);
        };
        if w.state == CancelRequested {
            // The answer to a cancel: what the connector did is recorded with it.
            let late = LateAck::of(w.step_index, step, ack, now.clone());
            n.late_effects |= late.may_have_effect(step);
            n.push_late(late);
        }
        match (w.state, ack.status) {
            (
                CancelRequested,
                AckStatus::Completed | AckStatus::Failed | AckStatus::Overridden | AckStatus::Rejected,
            ) => to(&mut n, Cancelled, None),
            (CancelRequested, AckStatus::Interrupted) => to(&mut n, OutcomeUnknown, Some("interrupted")),
            (CancelRequested, _) => {}
            // The step finished; it is verified once its observation is reported.
            (Verifying, AckStatus::Accepted | AckStatus::Progress) => {}
            (_, AckStatus::Accepted | AckStatus::Progress) => to(&mut n, Running, None),
            // `completed` without an observation: the step finished and its effect is not
            // readable yet (a chat echo, a block update a tick later). `verifying` until a
            // following `completed` carries it, or the step's deadline passes.
            // (A step with nothing to observe, such as `wait`, needs no observation.)
            (_, AckStatus::Completed) if ack.observation.is_none() && !postcondition_met(step, &Default::default()) => {
                to(&mut n, Verifying, None)
            }
            (_, AckStatus::Completed) => {
                n.last_observation = ack.observation.clone();
                n.last_observation_at = Some(now);
                to(&mut n, Verifying, None);
                let met = postcondition_met(step, &ack.observation.clone().unwrap_or_default());
                if !met {
                    to(&mut n, Failed, Some("postcondition_unmet"));
                } else if (w.step_index as usize) + 1 == w.steps.len() {
                    n.step_index += 1;
                    to(&mut n, Succeeded, None);
                } else {
                    // The next step is dispatched under a fresh lease.
                    n.step_index += 1;
                    n.lease_token = Some(random_hex(12));
                    n.last_seq = 0;
                    n.deadline_ms = Some(self.now_ms() + self.config.embodiment.step_deadline_ms);
                    to(&mut n, Dispatched, None);
                }
            }
            (_, AckStatus::Failed) => {
                let reason = format!("step_failed:{}", ack.reason.as_deref().unwrap_or("unspecified"));
                n.state = Failed;
                n.reason = Some(reason);
            }
            (_, AckStatus::Rejected) => {
                let (state, reason) = super::bounds::rejected(w, ack.reason.as_deref());
                (n.state, n.reason) = (state, Some(reason));
            }
            // The step's effect happened, unverified: resuming would repeat it.
            (Verifying, AckStatus::Overridden) if step.mutates() => to(&mut n, OutcomeUnknown, Some("manual_override")),
            (_, AckStatus::Overridden) => to(&mut n, Paused, Some("manual_override")),
            (_, AckStatus::Interrupted) if step.mutates() => to(&mut n, OutcomeUnknown, Some("interrupted")),
            (_, AckStatus::Interrupted) => to(&mut n, Paused, Some("connector_interrupted")),
        }
        if n.state.is_terminal() || n.state == Paused {
            n.lease_token = None;
        }
        n
    }

    /// The commands of this poll: queued workflows are dispatched (guarded by the binding
    /// at this epoch, no Emergency Stop), dispatched ones not yet acknowledged are
    /// delivered again (the connector's ledger makes that effectively once), overdue ones
    /// time out; cancel-requested ones are in the cancel list.
    /// Also says whether it wrote.
    pub(super) async fn work_for(
        &self,
        binding: &EnvBinding,
        open: Vec<WorkflowRecord>,
    ) -> Result<(Vec<Command>, Vec<String>, bool), ApiError> {
        let (mut commands, mut cancel, mut wrote) = (Vec::new(), Vec::new(), false);
        let now_ms = self.now_ms();
        for w in open {
            if commands.len() >= MAX_COMMANDS {
                break;
            }
            let command = |w: &WorkflowRecord| Command {
                workflow_ref: w.workflow_ref.clone(),
                lease_token: w.lease_token.clone().unwrap_or_default(),
                step_index: w.step_index,
                step: w.steps[w.step_index as usize].clone(),
                native_id: w.native_id.clone(),
                deadline_ms: w.deadline_ms.unwrap_or(now_ms),
            };
            match w.state {
                WorkflowState::CancelRequested => cancel.push(w.workflow_ref.clone()),
                _ if binding.estop_active || binding.subject_stopped(&w.native_id) => {}
                WorkflowState::Queued if self.gated(binding, &w).await? => {}
                WorkflowState::Queued => {
                    wrote = true;
                    if let Some(d) = self.dispatch(binding, &w).await? {
                        commands.push(command(&d));
                    }
                }
                WorkflowState::Dispatched | WorkflowState::Running | WorkflowState::Verifying
                    if w.deadline_ms.is_some_and(|d| d < now_ms) =>
                {
                    let mutating = w.steps[w.step_index as usize].mutates() && w.state != WorkflowState::Dispatched;
                    let (state, reason) = if mutating {
                        (WorkflowState::OutcomeUnknown, "step_deadline_passed")
                    } else {
                        (WorkflowState::TimedOut, "step_deadline_passed")
                    };
                    self.settle(&w, state, Some(reason)).await?;
                    wrote = true;
                    cancel.push(w.workflow_ref.clone());
                }
                WorkflowState::Dispatched if w.dispatch_epoch == Some(binding.epoch) => commands.push(command(&w)),
                // lifecycle: paused by Helix (authority revoked, lease lapse) while this
                // connector may still run it: it stops it (sticky while paused).
                WorkflowState::Paused if w.dispatch_epoch == Some(binding.epoch) => cancel.push(w.workflow_ref.clone()),
                _ => {}
            }
        }
        Ok((commands, cancel, wrote))
    }

    /// Dispatches a queued workflow under a fresh lease (None when it changed meanwhile).
    async fn dispatch(&self, binding: &EnvBinding, w: &WorkflowRecord) -> Result<Option<WorkflowRecord>, ApiError> {
        let mut n = w.next();
        n.state = WorkflowState::Dispatched;
        n.lease_token = Some(random_hex(12));
        n.dispatch_epoch = Some(binding.epoch);
        n.deadline_ms = Some(self.now_ms() + self.config.embodiment.step_deadline_ms);
        n.last_seq = 0;
        n.updated_at = rfc3339(self.clock.now());
        let mut tx = Tx::new();
        n.write_from_poll(&mut tx, w.rev);
        tx.check(
            Role::EnvBinding,
            binding.key(),
            crate::store::Cond::And(vec![at_epoch(binding.epoch), not_stopped_for(&w.native_id)]),
        );
        tx.check(Role::Member, member_key(&w.room_id, &w.account_id), member_may_act());
        match tx.commit(self.store.as_ref()).await {
            Ok(()) => Ok(Some(n)),
            Err(f) if f.failed(Role::Member) => {
                self.settle(w, WorkflowState::Paused, Some(AUTHORITY_REVOKED)).await?;
                Ok(None)
            }
            Err(f) if f.is_cancelled() => Ok(None),
            Err(f) => Err(f.into()),
        }
    }

    /// Moves a workflow to `state` if nobody changed it meanwhile (best effort: a lost
    /// race leaves it to the next reader).
    pub(super) async fn settle(
        &self,
        w: &WorkflowRecord,
        state: WorkflowState,
        reason: Option<&str>,
    ) -> Result<bool, ApiError> {
        Ok(self.settle_to(w, state, reason).await?.is_some())
    }

    /// [`Self::settle`], answering the workflow as written (None: it changed meanwhile).
    async fn settle_to(
        &self,
        w: &WorkflowRecord,
        state: WorkflowState,
        reason: Option<&str>,
    ) -> Result<Option<WorkflowRecord>, ApiError> {
        let mut n = w.next();
        n.state = state;
        n.reason = reason.map(str::to_owned);
        n.updated_at = rfc3339(self.clock.now());
        n.withdraw_from(w);
        if state.is_terminal() || state == WorkflowState::Paused {
            n.lease_token = None;
        }
        let mut tx = Tx::new();
        n.write(&mut tx, w.rev);
        match tx.commit(self.store.as_ref()).await {
            Ok(()) => Ok(Some(n)),
            Err(f) if f.is_cancelled() => Ok(None),
            Err(f) => Err(f.into()),
        }
    }

    /// Pauses every workflow a previous registration held at the connector; a mutating
    /// step it held may have happened (resuming would repeat it blindly), so that one is
    /// `outcome_unknown`.
    async fn pause_at_connector(&self, binding: &EnvBinding, reason: &str) -> Result<(), ApiError> {
        for w in open_workflows(self.store.as_ref(), &binding.room_id, &binding.binding_id, 16).await? {
            if matches!(w.state, WorkflowState::Dispatched | WorkflowState::Running | WorkflowState::Verifying)
                && w.dispatch_epoch.is_some_and(|e| e < binding.epoch)
            {
                self.settle(&w, held_state(&w), Some(reason)).await?;
            }
        }
        Ok(())
    }

    /// lifecycle: the connector halted its players on its own (dead-man rule) and says so:
    /// every command of this epoch it held and did not acknowledge in this poll is paused
    /// `dead_man_halted` (a mutating one is `outcome_unknown`); one whose cancel was
    /// requested is `cancelled` (or `outcome_unknown`).
    pub(super) async fn record_dead_man_halt(&self, binding: &EnvBinding) -> Result<(), ApiError> {
        for w in open_workflows(self.store.as_ref(), &binding.room_id, &binding.binding_id, 16).await? {
            if w.dispatch_epoch != Some(binding.epoch) {
                continue;
            }
            let state = match (w.state, held_state(&w)) {
                (WorkflowState::Dispatched | WorkflowState::Running | WorkflowState::Verifying, held) => held,
                (WorkflowState::CancelRequested, WorkflowState::Paused) => WorkflowState::Cancelled,
                (WorkflowState::CancelRequested, held) => held,
                _ => continue,
            };
            self.settle(&w, state, Some(DEAD_MAN_HALTED)).await?;
        }
        Ok(())
    }
}

/// Why a workflow paused: its connector halted on its own, having lost Helix.
const DEAD_MAN_HALTED: &str = "dead_man_halted";

/// A command the connector held and can no longer report on: `paused`, or
/// `outcome_unknown` for a mutating step (it may have happened).
fn held_state(w: &WorkflowRecord) -> WorkflowState {
    let mutating = w.steps.get(w.step_index as usize).is_some_and(|s| s.mutates());
    if mutating { WorkflowState::OutcomeUnknown } else { WorkflowState::Paused }
}

pub(super) fn check_subjects(subjects: &[ReportedSubject]) -> Result<(), ApiError> {
    if subjects.len() > MAX_SUBJECTS {
        return Err(ApiError::InvalidRequest(format!("subjects: at most {MAX_SUBJECTS}")));
    }
    let ok = |s: &str| (1..=64).contains(&s.chars().count()) && !s.chars().any(char::is_control);
    if subjects.iter().any(|s| !ok(&s.native_id) || !ok(&s.display_name)) {
        return Err(ApiError::InvalidRequest("subjects: native_id and display_name are 1-64 characters".into()));
    }
    let ids: BTreeSet<&str> = subjects.iter().map(|s| s.native_id.as_str()).collect();
    if ids.len() != subjects.len() {
        return Err(ApiError::InvalidRequest("subjects: native ids must be unique".into()));
    }
    Ok(())
}

/// Sets the reported directory. A changed set of players (ids or names) raises the
/// directory generation, so every earlier `subject_ref` is stale and selections lapse;
/// a change of `online` only keeps the refs.
fn set_directory(b: &mut EnvBinding, reported: &[ReportedSubject]) {
    let same = b.subjects.len() == reported.len()
        && b.subjects.iter().zip(reported).all(|(s, r)| s.native_id == r.native_id && s.display_name == r.display_name);
    if !same || b.directory_generation == 0 {
        b.directory_generation += 1;
        b.selections.clear();
    }
    let generation = b.directory_generation;
    b.subjects = reported
        .iter()
        .map(|r| SubjectEntry {
            subject_ref: subject_ref(&b.room_id, &b.binding_id, generation, &r.native_id),
            native_id: r.native_id.clone(),
            display_name: r.display_name.clone(),
            online: r.online,
            position: r.position,
        })
        .collect();
}
