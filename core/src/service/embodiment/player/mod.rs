//! The player lane of embodiment (bearer; MCP and REST share it; a member's browser for
//! selection and the own subject's stop): the sanitized subject directory (`subjects`),
//! selection with its control lease, typed actions accepted as durable workflows, never
//! blocking (`action`), status, and control (resume, cancel, Emergency Stop; `subject_stop`).
//! Every call re-checks scopes, membership, authority, lease, stop and connector.
//! Must not depend on `http` or `mcp`.

mod action;
mod subject_stop;
mod subjects;

pub use subject_stop::SubjectStopOutcome;
pub use subjects::RoomIdentity;

use super::{EmbodimentService, LIVE_SECS, MAX_BINDINGS, MAX_BLOCK_CHANGES, POLL_INTERVAL_MS, RACE_RETRIES};
use crate::domain::embodiment::action::MAX_SEQUENCE_STEPS;
use crate::domain::embodiment::*;
use crate::domain::room::{RoomId, RoomRole};
use crate::domain::scopes::{ENV_ACTIONS_READ, ENV_ACTIONS_WRITE, ROOMS_READ};
use crate::error::ApiError;
use crate::service::Actor;
use crate::service::Caller;
use crate::service::records::embodiment::{
    EnvBinding, WorkflowRecord, bindings_of_room, open_workflows, read_workflow,
};
use crate::service::records::rooms::room_and_membership;
use crate::service::records::{Role, Tx};

/// The control a workflow accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    Resume,
    Cancel,
    EmergencyStop,
}

/// The actor in one room: an active room of its tenant it is a member of.
pub(super) struct InRoom {
    pub(super) room_id: String,
    pub(super) name: String,
    pub(super) owner: bool,
    /// The owner, or a member the owner granted action authority.
    pub(super) may_act: bool,
}

impl WorkflowRecord {
    /// `helix.minecraft_workflow.v1` (never the native id).
    pub fn view(&self) -> WorkflowView {
        let block_changes_max = MAX_BLOCK_CHANGES;
        WorkflowView {
            schema: WORKFLOW_SCHEMA.into(),
            workflow_ref: self.workflow_ref.clone(),
            room_id: self.room_id.clone(),
            environment_binding_id: self.binding_id.clone(),
            subject_ref: self.subject_ref.clone(),
            status: self.state,
            reason: self.reason.clone(),
            step: self.step_index,
            budget: WorkflowBudget {
                steps_total: self.steps.len() as u32,
                steps_done: self.step_index,
                block_changes_used: self.block_changes,
                block_changes_max,
                steps_max: MAX_SEQUENCE_STEPS as u32,
            },
            last_observation_at: self.last_observation_at.clone(),
            late_effects_possible: self.late_effects_possible(),
            late_acknowledgements: self.late_acks.clone(),
            poll_after_ms: (!self.state.is_terminal()).then_some(POLL_INTERVAL_MS),
            created_at: self.created_at.clone(),
            updated_at: self.updated_at.clone(),
            flags: StoredFlags::default(),
        }
    }
}

impl EmbodimentService {
    /// The actor in one room: an active room of its tenant it is a member of (an agent's
    /// grant holding `scopes`; a person a member session), the room feature unlocked.
    pub(super) async fn in_room(&self, actor: &Actor, room_id: &str, scopes: &[&str]) -> Result<InRoom, ApiError> {
        actor.require_room_member(scopes)?;
        if actor.policy().rooms_locked {
            return Err(ApiError::RoomFeatureLocked);
        }
        let account = actor.account_id();
        let tenant = actor.room_tenant(&self.config.oauth.issuer);
        let id = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        let (room, member) = room_and_membership(self.store.as_ref(), id.as_str(), account).await?;
        let room = room.filter(|r| r.is_active() && tenant.admits(r)).ok_or(ApiError::NotFound)?;
        let member = member.ok_or(ApiError::NotFound)?;
        Ok(InRoom {
            owner: member.role == RoomRole::Owner && room.owner_account == account,
            may_act: member.may_act(),
            room_id: room.room_id,
            name: room.name,
        })
    }

    pub(super) fn live(&self, b: &EnvBinding) -> bool {
        b.epoch > 0 && self.clock.epoch() - b.last_seen <= LIVE_SECS
    }

    /// The caller's workflow in the room (the room owner sees every workflow of the room).
    async fn workflow_of(&self, r: &InRoom, p: &Caller, workflow_ref: &str) -> Result<WorkflowRecord, ApiError> {
        let wf = WorkflowRef::parse(workflow_ref).ok_or(ApiError::NotFound)?;
        let w = read_workflow(self.store.as_ref(), &r.room_id, wf.as_str()).await?.ok_or(ApiError::NotFound)?;
        if w.account_id != p.account_id && !r.owner {
            return Err(ApiError::NotFound);
        }
        Ok(w)
    }

    /// `helix_minecraft_workflow_status`.
    pub async fn workflow_status(
        &self,
        p: &Caller,
        room_id: &str,
        workflow_ref: &str,
    ) -> Result<WorkflowView, ApiError> {
        let r = self.in_room(&Actor::Agent(p.clone()), room_id, &[ROOMS_READ, ENV_ACTIONS_READ]).await?;
        let w = self.workflow_of(&r, p, workflow_ref).await?;
        Ok(self.expire_if_due(w).await?.view())
    }

    /// `helix_minecraft_workflow_control`: `resume` (paused only, every check again),
    /// `cancel` (idempotent on terminal states), `emergency_stop` (the owner: every open
    /// workflow of every environment of the room; a member: only the subject they selected
    /// on this workflow's environment; new actions refused until a person clears it in the
    /// browser).
    pub async fn workflow_control(
        &self,
        p: &Caller,
        room_id: &str,
        workflow_ref: &str,
        control: Control,
    ) -> Result<WorkflowView, ApiError> {
        let r = self.in_room(&Actor::Agent(p.clone()), room_id, &[ROOMS_READ, ENV_ACTIONS_WRITE]).await?;
        for _ in 0..RACE_RETRIES {
            let w = self.workflow_of(&r, p, workflow_ref).await?;
            let done = match control {
                // The owner stops the room; a member stops only the subject they selected.
                Control::EmergencyStop if r.owner => {
                    self.emergency_stop(&r.room_id).await?;
                    true
                }
                Control::EmergencyStop => {
                    self.stop_own_subject(&r, &p.account_id, &w.binding_id).await?;
                    true
                }
                Control::Cancel if w.state.is_terminal() => true,
                Control::Cancel if w.state.at_connector() => {
                    self.settle(&w, WorkflowState::CancelRequested, Some("cancel_requested")).await?
                }
                Control::Cancel => self.settle(&w, WorkflowState::Cancelled, None).await?,
                Control::Resume => {
                    if w.state != WorkflowState::Paused {
                        return Err(ApiError::WorkflowNotResumable);
                    }
                    if !r.may_act {
                        return Err(ApiError::ActionAuthorityRequired);
                    }
                    let b = self.binding(&r.room_id, &w.binding_id).await?;
                    let now = self.clock.epoch();
                    if b.estop_active || b.subject_stopped(&w.native_id) {
                        return Err(ApiError::EmergencyStopActive);
                    }
                    if !self.live(&b) {
                        return Err(ApiError::ConnectorUnavailable);
                    }
                    if b.subject(&w.subject_ref).is_none() {
                        return Err(ApiError::SubjectStale);
                    }
                    // The lease is re-taken when it lapsed and nobody else holds the subject.
                    if b.selection_of(&p.account_id).is_some_and(|s| s.subject_ref != w.subject_ref) {
                        return Err(ApiError::SubjectNotSelected);
                    }
                    if b.held_by_other(&w.subject_ref, &p.account_id, now) {
                        return Err(ApiError::LeaseHeld);
                    }
                    self.requeue(&b, &w, &p.account_id).await?
                }
            };
            if done {
                return Ok(self.workflow_of(&r, p, workflow_ref).await?.view());
            }
        }
        Err(ApiError::RunBusy)
    }

    /// Raises the Emergency Stop of every environment of the room and stops every open
    /// workflow (the connector halts on its next poll: the generation changed).
    pub(super) async fn emergency_stop(&self, room_id: &str) -> Result<(), ApiError> {
        for b in bindings_of_room(self.store.as_ref(), room_id, MAX_BINDINGS).await? {
            let mut b = b;
            for _ in 0..RACE_RETRIES {
                let mut next = b.next();
                next.estop_active = true;
                next.estop_generation = b.estop_generation + 1;
                let mut tx = Tx::new();
                next.write(&mut tx, b.rev);
                match tx.commit(self.store.as_ref()).await {
                    Ok(()) => break,
                    Err(f) if f.failed(Role::EnvBinding) || f.contended() => {
                        b = self.binding(room_id, &b.binding_id).await?;
                    }
                    Err(f) => return Err(f.into()),
                }
            }
            for w in open_workflows(self.store.as_ref(), room_id, &b.binding_id, 64).await? {
                for _ in 0..RACE_RETRIES {
                    if self.settle(&w, WorkflowState::Stopped, Some("emergency_stop")).await? {
                        break;
                    }
                    match read_workflow(self.store.as_ref(), room_id, &w.workflow_ref).await? {
                        Some(fresh) if !fresh.state.is_terminal() => continue,
                        _ => break,
                    }
                }
            }
        }
        Ok(())
    }
}
