//! A member's Emergency Stop of their own subject: the subject the member selected (their
//! own player) is stopped, every open workflow on it ends `stopped` (`emergency_stop`), new
//! actions on it are refused `emergency_stop_active`, and the connector learns it at its
//! next poll (`stopped_subjects`). The dispatch and acknowledgement transactions are
//! conditional on the subject's guard attribute. Only a person clears it, in the browser.
//! The room owner's stop stays whole-room (`agent::emergency_stop`).

use super::InRoom;
use crate::domain::embodiment::WorkflowState;
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::Actor;
use crate::service::embodiment::{EmbodimentService, RACE_RETRIES};
use crate::service::records::embodiment::{EnvBinding, SubjectStop, open_workflows, read_workflow};
use crate::service::records::{Role, Tx};
use crate::service::sessions::Session;

/// What a subject stop (or its clearing) changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectStopOutcome {
    pub environment_binding_id: String,
    pub subject_ref: String,
    pub subject_stop_active: bool,
    /// Workflows this call ended `stopped`.
    pub workflows_stopped: u32,
}

impl EmbodimentService {
    /// The caller's own subject on a binding: its current selection of a subject still in
    /// the directory and not held by another member; its native id and ref.
    fn own_subject(&self, b: &EnvBinding, account: &str) -> Result<(String, String), ApiError> {
        let sel = b.selection_of(account).ok_or(ApiError::SubjectNotSelected)?;
        let subject = b.subject(&sel.subject_ref).ok_or(ApiError::SubjectNotSelected)?;
        if b.held_by_other(&sel.subject_ref, account, self.clock.epoch()) {
            return Err(ApiError::LeaseHeld);
        }
        Ok((subject.native_id.clone(), subject.subject_ref.clone()))
    }

    /// Stops the member's own subject on `binding_id` (no action authority needed:
    /// stopping is always allowed), then ends every open workflow on that subject.
    pub(in crate::service::embodiment) async fn stop_own_subject(
        &self,
        r: &InRoom,
        account: &str,
        binding_id: &str,
    ) -> Result<SubjectStopOutcome, ApiError> {
        for _ in 0..RACE_RETRIES {
            let b = self.binding(&r.room_id, binding_id).await?;
            let (native_id, subject_ref) = self.own_subject(&b, account)?;
            if !b.subject_stopped(&native_id) {
                let mut next = b.next();
                next.subject_stops.push(SubjectStop {
                    native_id: native_id.clone(),
                    account_id: account.to_owned(),
                    stopped_at: rfc3339(self.clock.now()),
                });
                let mut tx = Tx::new();
                next.write(&mut tx, b.rev);
                match tx.commit(self.store.as_ref()).await {
                    Ok(()) => {}
                    Err(f) if f.failed(Role::EnvBinding) || f.contended() => continue,
                    Err(f) => return Err(f.into()),
                }
            }
            // From here on no dispatch or acknowledgement of this subject commits; the
            // open workflows on it end (a repeated stop finishes an interrupted one).
            let workflows_stopped = self.stop_subject_workflows(&b, &native_id).await?;
            return Ok(SubjectStopOutcome {
                environment_binding_id: b.binding_id,
                subject_ref,
                subject_stop_active: true,
                workflows_stopped,
            });
        }
        Err(ApiError::RunBusy)
    }

    async fn stop_subject_workflows(&self, b: &EnvBinding, native_id: &str) -> Result<u32, ApiError> {
        let mut stopped = 0;
        for w in open_workflows(self.store.as_ref(), &b.room_id, &b.binding_id, 64).await? {
            let mut w = w;
            for _ in 0..RACE_RETRIES {
                if w.state.is_terminal() || w.native_id != native_id {
                    break;
                }
                if self.settle(&w, WorkflowState::Stopped, Some("emergency_stop")).await? {
                    stopped += 1;
                    break;
                }
                match read_workflow(self.store.as_ref(), &w.room_id, &w.workflow_ref).await? {
                    Some(fresh) => w = fresh,
                    None => break,
                }
            }
        }
        Ok(stopped)
    }

    /// The room page's **Emergency Stop my player**: the signed-in member stops the
    /// subject they selected on `binding_id`.
    pub async fn stop_own_subject_as_person(
        &self,
        s: &Session,
        room_id: &str,
        binding_id: &str,
    ) -> Result<SubjectStopOutcome, ApiError> {
        let r = self.in_room(&Actor::person(s), room_id, &[]).await?;
        self.stop_own_subject(&r, &s.account_id, binding_id).await
    }

    /// The room page's **Clear my player's Emergency Stop**: only a signed-in person who
    /// has the stopped subject selected clears it (an agent has no way to); conditional on
    /// the binding's revision. Clearing what is not stopped changes nothing.
    pub async fn clear_own_subject_stop(
        &self,
        s: &Session,
        room_id: &str,
        binding_id: &str,
    ) -> Result<SubjectStopOutcome, ApiError> {
        let r = self.in_room(&Actor::person(s), room_id, &[]).await?;
        for _ in 0..RACE_RETRIES {
            let b = self.binding(&r.room_id, binding_id).await?;
            let (native_id, subject_ref) = self.own_subject(&b, &s.account_id)?;
            let done = SubjectStopOutcome {
                environment_binding_id: b.binding_id.clone(),
                subject_ref,
                subject_stop_active: false,
                workflows_stopped: 0,
            };
            if !b.subject_stopped(&native_id) {
                return Ok(done);
            }
            let mut next = b.next();
            next.subject_stops.retain(|x| x.native_id != native_id);
            let mut tx = Tx::new();
            next.write(&mut tx, b.rev);
            s.recheck(&mut tx);
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => return Ok(done),
                Err(f) if f.failed(Role::Session) => return Err(ApiError::SessionRequired),
                Err(f) if f.failed(Role::EnvBinding) || f.contended() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }
}
