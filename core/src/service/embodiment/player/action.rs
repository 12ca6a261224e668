//! `helix_minecraft_player_action` in three steps: `admit` (every
//! check and bound against the environment as read, and the idempotency lookup of a
//! subject over its action rate; nothing of the action is written), `record` (the one
//! transaction: the workflow with its open marker, the lease renewal or the check that the
//! binding is unchanged, and the answer the receipt keeps) and `commit` (writes it once,
//! reads a refusal, answers). A binding that changed in between is read and admitted again.

use serde_json::Value;

use super::InRoom;
use crate::domain::embodiment::*;
use crate::domain::hash_parts;
use crate::domain::ids::IdempotencyKey;
use crate::domain::scopes::{ENV_ACTIONS_WRITE, ROOMS_READ};
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::embodiment::{EmbodimentService, LEASE_SECS, MAX_BINDINGS, MAX_BLOCK_CHANGES, RACE_RETRIES};
use crate::service::records::embodiment::{EnvBinding, SubjectEntry, WorkflowRecord, bindings_of_room};
use crate::service::records::{Committed, Completion, Role, Tx, commit_once, receipt_key};
use crate::service::{Actor, Caller, Mutation};
use crate::store::Key;

const OP_ACTION: &str = "minecraft.player_action";

/// The action request of one caller, checked once before the environment is read.
struct ActionRequest<'a> {
    svc: &'a EmbodimentService,
    p: &'a Caller,
    room: InRoom,
    environment: Option<&'a str>,
    /// What was checked is what is queued and delivered (a chat line normalised).
    action: Action,
    steps: Vec<Step>,
    block_changes: u32,
    receipt: Key,
    request_hash: String,
}

/// What `admit` found: the binding as read (the transaction is
/// conditional on it), the caller's subject and the end of its control lease.
struct Admitted {
    binding: EnvBinding,
    subject: SubjectEntry,
    lease_until: i64,
    now: i64,
}

/// An admitted action, or the answer already given to its idempotency key.
enum Admission {
    New(Box<Admitted>),
    Replayed(Mutation<WorkflowView>),
}

impl EmbodimentService {
    /// `helix_minecraft_player_action`: checks everything, then accepts the action as a
    /// durable workflow in one idempotent transaction (conditional on the binding's
    /// revision, so the lease, stop and epoch it checked still hold) and answers at once.
    pub async fn player_action(
        &self,
        p: &Caller,
        room_id: &str,
        key: &IdempotencyKey,
        environment: Option<&str>,
        action: &Value,
    ) -> Result<Mutation<WorkflowView>, ApiError> {
        let req = self.action_request(p, room_id, key, environment, action).await?;
        let mut counted = false;
        for _ in 0..RACE_RETRIES {
            let admitted = match req.admit(!counted).await? {
                Admission::New(a) => a,
                Admission::Replayed(m) => return Ok(m),
            };
            counted = true;
            let (tx, answer) = req.record(&admitted)?;
            if let Some(m) = req.commit(tx, &answer).await? {
                return Ok(m);
            }
        }
        Err(ApiError::IdempotencyInProgress)
    }

    /// The room, the caller's authority and the action itself (its shape, its steps within
    /// any region, its block-change budget); the request's hash and receipt key.
    async fn action_request<'a>(
        &'a self,
        p: &'a Caller,
        room_id: &str,
        key: &IdempotencyKey,
        environment: Option<&'a str>,
        action: &Value,
    ) -> Result<ActionRequest<'a>, ApiError> {
        let room = self.in_room(&Actor::Agent(p.clone()), room_id, &[ROOMS_READ, ENV_ACTIONS_WRITE]).await?;
        if !room.may_act {
            return Err(ApiError::ActionAuthorityRequired);
        }
        let parsed = Action::parse(action).map_err(|e| ApiError::ActionRefused { reason: e.reason() })?;
        parsed.check(&Region::default()).map_err(|e| ApiError::ActionRefused { reason: e.reason() })?;
        let parsed = parsed.normalized();
        let steps = parsed.steps();
        let changes = steps.iter().filter(|s| matches!(s, Step::BreakBlock(_) | Step::PlaceBlock(_))).count();
        if changes as u32 > MAX_BLOCK_CHANGES {
            return Err(ApiError::ActionRefused { reason: "block_change_budget" });
        }
        let request = serde_json::json!({ "room_id": room.room_id, "environment": environment, "action": action });
        Ok(ActionRequest {
            svc: self,
            p,
            request_hash: hash_parts(&["minecraft.action.v1", &p.owner_hash(), OP_ACTION, &request.to_string()]),
            receipt: receipt_key(&p.identity_hash(), OP_ACTION, key.as_str()),
            room,
            environment,
            action: parsed,
            steps,
            block_changes: changes as u32,
        })
    }
}

impl ActionRequest<'_> {
    /// Admits the action against the environment as read: the caller's selection, subject
    /// and lease, no Emergency Stop, a live connector that supports every step, the bounds;
    /// then (once per request, `count`) the subject's action rate, whose refusal replays an
    /// answered key. Writes nothing but that counter.
    async fn admit(&self, count: bool) -> Result<Admission, ApiError> {
        let bindings = bindings_of_room(self.svc.store.as_ref(), &self.room.room_id, MAX_BINDINGS).await?;
        let now = self.svc.clock.epoch();
        let b = bindings
            .into_iter()
            .filter(|b| b.is_active())
            .filter(|b| self.environment.is_none_or(|e| e == b.binding_id || e == b.world_id))
            .find(|b| b.selection_of(&self.p.account_id).is_some())
            .ok_or(ApiError::SubjectNotSelected)?;
        let sel = b.selection_of(&self.p.account_id).expect("found by its selection");
        let subject = b.subject(&sel.subject_ref).ok_or(ApiError::SubjectStale)?;
        if b.held_by_other(&sel.subject_ref, &self.p.account_id, now) {
            return Err(ApiError::LeaseHeld);
        }
        if b.estop_active || b.subject_stopped(&subject.native_id) {
            return Err(ApiError::EmergencyStopActive);
        }
        if !self.svc.live(&b) {
            return Err(ApiError::ConnectorUnavailable);
        }
        crate::service::embodiment::bounds::check_bounds(&b, subject, &self.steps)?;
        let caps = b.connector.as_ref().map(|c| c.capabilities.clone()).unwrap_or_default();
        if self.steps.iter().any(|s| !caps.iter().any(|c| c == s.kind())) {
            return Err(ApiError::ActionRefused { reason: "not_supported_by_connector" });
        }
        if count && let Some(replayed) = self.svc.count_action(&b, subject, &self.receipt, &self.request_hash).await? {
            return Ok(Admission::Replayed(replayed));
        }
        let (subject, lease_until) = (subject.clone(), sel.lease_until);
        Ok(Admission::New(Box::new(Admitted { binding: b, subject, lease_until, now })))
    }

    /// The transaction that accepts the action, and its answer: the new workflow (with its
    /// open marker and the binding's work marker); the lease renewed by use once less than
    /// half of it remains, else the binding only checked (unchanged since read: same lease,
    /// stop, epoch).
    fn record(&self, a: &Admitted) -> Result<(Tx, Value), ApiError> {
        let w = self.new_workflow(a);
        let mut tx = Tx::new();
        w.create(&mut tx);
        let b = &a.binding;
        if a.lease_until - a.now < LEASE_SECS / 2 {
            let mut next = b.next();
            next.selections.iter_mut().filter(|s| s.account_id == self.p.account_id).for_each(|s| {
                s.lease_until = a.now + LEASE_SECS;
            });
            next.write(&mut tx, b.rev);
        } else {
            b.check_unchanged(&mut tx);
        }
        let answer = serde_json::to_value(w.view()).map_err(ApiError::internal)?;
        Ok((tx, answer))
    }

    /// Writes the transaction with its receipt once (`202` and the workflow). None: the
    /// binding changed or the key is held meanwhile, so the action is admitted again.
    async fn commit(&self, tx: Tx, answer: &Value) -> Result<Option<Mutation<WorkflowView>>, ApiError> {
        let done = Completion {
            receipt_key: &self.receipt,
            request_hash: &self.request_hash,
            status: 202,
            response: answer,
            run_id: None,
            expires_at: self.svc.receipt_expiry(),
        };
        match commit_once(self.svc.store.as_ref(), self.svc.clock.epoch(), done, tx).await {
            Ok(Committed::Answered(m)) => Ok(Some(m)),
            Ok(Committed::Refused(f)) if f.failed(Role::EnvBinding) || f.contended() => Ok(None),
            Ok(Committed::Refused(_)) => Err(ApiError::internal(std::io::Error::other("workflow id collision"))),
            Err(ApiError::IdempotencyInProgress) => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// A queued workflow of the admitted action.
    fn new_workflow(&self, a: &Admitted) -> WorkflowRecord {
        let at = rfc3339(self.svc.clock.now());
        WorkflowRecord {
            workflow_ref: WorkflowRef::generate().as_str().to_owned(),
            room_id: self.room.room_id.clone(),
            binding_id: a.binding.binding_id.clone(),
            account_id: self.p.account_id.clone(),
            subject_ref: a.subject.subject_ref.clone(),
            native_id: a.subject.native_id.clone(),
            action: self.action.clone(),
            steps: self.steps.clone(),
            state: WorkflowState::Queued,
            reason: None,
            step_index: 0,
            block_changes: self.block_changes,
            lease_token: None,
            dispatch_epoch: None,
            deadline_ms: None,
            last_seq: 0,
            last_observation: None,
            last_observation_at: None,
            late_effects: false,
            withdrawn: None,
            late_acks: Vec::new(),
            queued_at: a.now,
            created_at: at.clone(),
            updated_at: at,
            rev: 1,
        }
    }
}
