//! The southbound connector (connector credential only): authentication with every
//! boundary rechecked on every use, registration (a new fencing epoch), and the one poll
//! that applies acknowledgements and hands out leased commands, the cancel list and the
//! Emergency Stop generation. Must not depend on `http` or `mcp`.

use std::collections::BTreeSet;

use super::{DEAD_MAN_MS, EmbodimentService, LAST_SEEN_WRITE_SECS, POLL_INTERVAL_MS, RACE_RETRIES, STEP_DEADLINE_MS};
use crate::domain::embodiment::protocol::*;
use crate::domain::embodiment::{
    POLL_SCHEMA, REGISTER_SCHEMA, WorkflowState, action_schema_hash, postcondition_met, subject_ref,
};
use crate::domain::random_hex;
use crate::domain::source::{ConnectorCredential, hashes_equal};
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::records::accounts::policy_of;
use crate::service::records::embodiment::{
    CredentialLookup, EnvBinding, RegisteredConnector, SubjectEntry, WorkflowRecord, at_epoch, binding_in_room,
    credential_key, not_stopped_for, open_workflows, read_workflow,
};
use crate::service::records::rooms::{member_key, member_may_act};
use crate::service::records::{Role, Tx};
use crate::service::sources::{DeveloperLane, developer};

/// A connector admitted for this request (every check of its credential held).
#[derive(Debug, Clone)]
pub struct AuthedConnector {
    pub binding: EnvBinding,
}

/// The v1 step types a connector may declare.
/// Why a workflow paused: its member no longer may act (authority revoked, or removed).
const AUTHORITY_REVOKED: &str = "action_authority_revoked";

const STEP_TYPES: &[&str] =
    &["move_to", "look_at", "stop", "break_block", "place_block", "equip", "craft", "chat", "wait"];

impl EmbodimentService {
    /// Authenticates a connector credential: hash lookup, then every boundary again (the
    /// binding active under this exact hash; the room active and still owned by the
    /// pairing's owner, its owner member; the owner still a developer, unlocked). Any
    /// failure is the same `connector_credential_invalid`. A source bearer never parses.
    pub async fn authenticate_connector(&self, raw: &str) -> Result<AuthedConnector, ApiError> {
        let credential = ConnectorCredential::parse(raw).ok_or(ApiError::ConnectorCredentialInvalid)?;
        let hash = credential.hash();
        let lookup = self.store.get(&credential_key(&hash)).await?.ok_or(ApiError::ConnectorCredentialInvalid)?;
        let lookup = CredentialLookup::from_item(&lookup)?;
        let owner = lookup.owner_account.clone();
        let got = binding_in_room(self.store.as_ref(), &lookup.room_id, &lookup.binding_id, &owner, true).await?;
        let binding = got.binding.ok_or(ApiError::ConnectorCredentialInvalid)?;
        let policy_ok = got
            .account
            .as_ref()
            .map(policy_of)
            .is_some_and(|p| developer(&self.config, &owner, &p, DeveloperLane::Producer).is_ok());
        if !binding.is_active() || binding.owner_account != owner || !hashes_equal(&binding.credential_hash, &hash) {
            return Err(ApiError::ConnectorCredentialInvalid);
        }
        if !got.owner_holds {
            // lifecycle: the room closed (or changed owner) under the pairing; its open
            // workflows are ended at the first refused use (lazily: no room-close hook).
            self.end_open_workflows(&binding, super::pairing::ROOM_CLOSED).await?;
            return Err(ApiError::ConnectorCredentialInvalid);
        }
        if !policy_ok {
            return Err(ApiError::ConnectorCredentialInvalid);
        }
        Ok(AuthedConnector { binding })
    }

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

    /// `POST /api/connectors/v1/poll`: the acknowledgements in, then the work out. A poll
    /// of an older epoch is refused whole (`connector_epoch_stale`): its acks are not applied.
    pub async fn poll_connector(&self, a: &AuthedConnector, req: PollRequest) -> Result<PollResponse, ApiError> {
        let mut binding = a.binding.clone();
        if binding.epoch == 0 || req.epoch != binding.epoch {
            return Err(ApiError::ConnectorEpochStale { current: binding.epoch });
        }
        if req.acks.len() > MAX_ACKS {
            return Err(ApiError::InvalidRequest(format!("acks: at most {MAX_ACKS}")));
        }
        if let Some(subjects) = &req.subjects {
            check_subjects(subjects)?;
        }
        // The binding's own changes (directory, last seen) first: acks are checked against it.
        let stale_seen = self.clock.epoch() - binding.last_seen >= LAST_SEEN_WRITE_SECS;
        if req.subjects.is_some() || stale_seen || req.dead_man_halted {
            binding = self.touch(binding, req.subjects.as_deref()).await?;
        }
        let mut acks = Vec::with_capacity(req.acks.len());
        for ack in &req.acks {
            let outcome = self.apply_ack(&binding, ack).await?;
            acks.push(AckResult { workflow_ref: ack.workflow_ref.clone(), seq: ack.seq, outcome: outcome.into() });
        }
        if req.dead_man_halted {
            self.record_dead_man_halt(&binding).await?;
        }
        let (commands, cancel) = self.work_for(&binding).await?;
        Ok(PollResponse {
            schema: POLL_SCHEMA.into(),
            epoch: binding.epoch,
            acks,
            commands,
            cancel,
            emergency_stop_generation: binding.estop_generation,
            emergency_stop_active: binding.estop_active,
            stopped_subjects: binding.subject_stops.iter().map(|s| s.native_id.clone()).collect(),
            next_poll_ms: POLL_INTERVAL_MS,
        })
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
    async fn touch(
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
    async fn apply_ack(&self, binding: &EnvBinding, ack: &Ack) -> Result<&'static str, ApiError> {
        for _ in 0..RACE_RETRIES {
            let Some(w) = read_workflow(self.store.as_ref(), &binding.room_id, &ack.workflow_ref).await? else {
                return Ok("unknown_workflow");
            };
            if w.binding_id != binding.binding_id {
                return Ok("unknown_workflow");
            }
            if w.dispatch_epoch != Some(binding.epoch) {
                return Ok("stale_epoch");
            }
            if !w.state.at_connector() {
                return Ok("not_at_connector");
            }
            if w.lease_token.as_deref() != Some(ack.lease_token.as_str()) || w.step_index != ack.step_index {
                return Ok("lease_mismatch");
            }
            if ack.seq <= w.last_seq {
                return Ok("stale_seq");
            }
            let next = self.acked(&w, ack);
            let mut tx = Tx::new();
            next.write(&mut tx, w.rev);
            let guard = crate::store::Cond::And(vec![at_epoch(binding.epoch), not_stopped_for(&w.native_id)]);
            tx.check(Role::EnvBinding, binding.key(), guard);
            tx.check(Role::Member, member_key(&w.room_id, &w.account_id), member_may_act());
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => return Ok("applied"),
                Err(f) if f.failed(Role::EnvBinding) => return Ok("stale_epoch"),
                Err(f) if f.failed(Role::Member) => {
                    self.settle(&w, WorkflowState::Paused, Some(AUTHORITY_REVOKED)).await?;
                    return Ok(AUTHORITY_REVOKED);
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
        match (w.state, ack.status) {
            (CancelRequested, AckStatus::Completed | AckStatus::Failed | AckStatus::Overridden) => {
                to(&mut n, Cancelled, None)
            }
            (CancelRequested, AckStatus::Interrupted) => to(&mut n, OutcomeUnknown, Some("interrupted")),
            (CancelRequested, _) => {}
            (_, AckStatus::Accepted | AckStatus::Progress) => to(&mut n, Running, None),
            (_, AckStatus::Completed) => {
                n.last_observation = ack.observation.clone();
                n.last_observation_at = Some(now);
                to(&mut n, Verifying, None);
                let met = ack.observation.as_ref().is_some_and(|o| postcondition_met(step, o));
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
                    n.deadline_ms = Some(self.now_ms() + STEP_DEADLINE_MS);
                    to(&mut n, Dispatched, None);
                }
            }
            (_, AckStatus::Failed) => {
                let reason = format!("step_failed:{}", ack.reason.as_deref().unwrap_or("unspecified"));
                n.state = Failed;
                n.reason = Some(reason);
            }
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
    async fn work_for(&self, binding: &EnvBinding) -> Result<(Vec<Command>, Vec<String>), ApiError> {
        let open = open_workflows(self.store.as_ref(), &binding.room_id, &binding.binding_id, 16).await?;
        let (mut commands, mut cancel) = (Vec::new(), Vec::new());
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
                WorkflowState::Queued => {
                    if let Some(d) = self.dispatch(binding, &w).await? {
                        commands.push(command(&d));
                    }
                }
                WorkflowState::Dispatched | WorkflowState::Running if w.deadline_ms.is_some_and(|d| d < now_ms) => {
                    let mutating = w.steps[w.step_index as usize].mutates() && w.state == WorkflowState::Running;
                    let (state, reason) = if mutating {
                        (WorkflowState::OutcomeUnknown, "step_deadline_passed")
                    } else {
                        (WorkflowState::TimedOut, "step_deadline_passed")
                    };
                    self.settle(&w, state, Some(reason)).await?;
                    cancel.push(w.workflow_ref.clone());
                }
                WorkflowState::Dispatched if w.dispatch_epoch == Some(binding.epoch) => commands.push(command(&w)),
                // lifecycle: paused by Helix (authority revoked, lease lapse) while this
                // connector may still run it: it stops it (sticky while paused).
                WorkflowState::Paused if w.dispatch_epoch == Some(binding.epoch) => cancel.push(w.workflow_ref.clone()),
                _ => {}
            }
        }
        Ok((commands, cancel))
    }

    /// Dispatches a queued workflow under a fresh lease (None when it changed meanwhile).
    async fn dispatch(&self, binding: &EnvBinding, w: &WorkflowRecord) -> Result<Option<WorkflowRecord>, ApiError> {
        let mut n = w.next();
        n.state = WorkflowState::Dispatched;
        n.lease_token = Some(random_hex(12));
        n.dispatch_epoch = Some(binding.epoch);
        n.deadline_ms = Some(self.now_ms() + STEP_DEADLINE_MS);
        n.last_seq = 0;
        n.updated_at = rfc3339(self.clock.now());
        let mut tx = Tx::new();
        n.write(&mut tx, w.rev);
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
        let mut n = w.next();
        n.state = state;
        n.reason = reason.map(str::to_owned);
        n.updated_at = rfc3339(self.clock.now());
        if state.is_terminal() || state == WorkflowState::Paused {
            n.lease_token = None;
        }
        let mut tx = Tx::new();
        n.write(&mut tx, w.rev);
        match tx.commit(self.store.as_ref()).await {
            Ok(()) => Ok(true),
            Err(f) if f.is_cancelled() => Ok(false),
            Err(f) => Err(f.into()),
        }
    }

    /// Pauses every workflow a previous registration held at the connector; a mutating
    /// step it held may have happened (resuming would repeat it blindly), so that one is
    /// `outcome_unknown`.
    async fn pause_at_connector(&self, binding: &EnvBinding, reason: &str) -> Result<(), ApiError> {
        for w in open_workflows(self.store.as_ref(), &binding.room_id, &binding.binding_id, 16).await? {
            if matches!(w.state, WorkflowState::Dispatched | WorkflowState::Running)
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
    async fn record_dead_man_halt(&self, binding: &EnvBinding) -> Result<(), ApiError> {
        for w in open_workflows(self.store.as_ref(), &binding.room_id, &binding.binding_id, 16).await? {
            if w.dispatch_epoch != Some(binding.epoch) {
                continue;
            }
            let state = match (w.state, held_state(&w)) {
                (WorkflowState::Dispatched | WorkflowState::Running, held) => held,
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

fn check_subjects(subjects: &[ReportedSubject]) -> Result<(), ApiError> {
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
        })
        .collect();
}
