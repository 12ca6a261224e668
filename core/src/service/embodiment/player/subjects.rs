//! The sanitized subject directory and selection with its control lease, for an agent
//! (bearer, MCP and REST) and for a signed-in person on `/rooms` ("Your identity in this
//! environment"): both lanes run the same checks and the same conditional write.
//! Must not depend on `http` or `mcp`.

use super::InRoom;
use crate::domain::embodiment::*;
use crate::domain::room::FalseFlags;
use crate::domain::scopes::{ENV_ACTIONS_WRITE, ROOMS_READ};
use crate::domain::time::epoch_rfc3339;
use crate::error::ApiError;
use crate::service::Actor;
use crate::service::embodiment::{EmbodimentService, LEASE_SECS, MAX_BINDINGS, RACE_RETRIES};
use crate::service::records::embodiment::{EnvBinding, Selection, bindings_of_room};
use crate::service::records::{Role, Tx};
use crate::service::sessions::Session;

/// One room of a signed-in person with its environments as that person sees them.
#[derive(Debug, Clone)]
pub struct RoomIdentity {
    pub room_id: String,
    pub room_name: String,
    pub environments: Vec<EnvironmentView>,
}

impl EmbodimentService {
    /// The active environments of a room as `account` sees them (never a native id).
    async fn environments_for(&self, room_id: &str, account: &str) -> Result<Vec<EnvironmentView>, ApiError> {
        let now = self.clock.epoch();
        let bindings = bindings_of_room(self.store.as_ref(), room_id, MAX_BINDINGS).await?;
        let view = |b: &EnvBinding| {
            let own = b.selection_of(account).filter(|s| b.subject(&s.subject_ref).is_some());
            EnvironmentView {
                environment_binding_id: b.binding_id.clone(),
                world_id: b.world_id.clone(),
                label: None,
                connector_live: self.live(b),
                emergency_stop_active: b.estop_active,
                subjects: b
                    .subjects
                    .iter()
                    .map(|s| SubjectView {
                        subject_ref: s.subject_ref.clone(),
                        display_name: s.display_name.clone(),
                        online: s.online,
                        selected_by_caller: own.is_some_and(|o| o.subject_ref == s.subject_ref),
                        held_by_other: b.held_by_other(&s.subject_ref, account, now),
                        subject_stop_active: b.subject_stopped(&s.native_id),
                    })
                    .collect(),
                own_binding: own.map(|o| OwnBinding {
                    subject_ref: o.subject_ref.clone(),
                    lease_live: o.lease_until > now,
                    lease_expires_at: epoch_rfc3339(o.lease_until),
                }),
            }
        };
        Ok(bindings.iter().filter(|b| b.is_active()).map(view).collect())
    }

    /// `helix_environment_subject_list`: per environment binding, the sanitized subjects
    /// and the caller's own binding.
    pub async fn list_subjects(&self, actor: &Actor, room_id: &str) -> Result<SubjectList, ApiError> {
        let r = self.in_room(actor, room_id, &[ROOMS_READ]).await?;
        let environments = self.environments_for(&r.room_id, actor.account_id()).await?;
        Ok(SubjectList {
            schema: SubjectListSchemaName,
            room_id: r.room_id,
            environments,
            flags: FalseFlags::default(),
        })
    }

    /// "Your identity in this environment" on `/rooms`: the rooms of `room_ids` the
    /// signed-in person is a member of that have an environment binding, each with its
    /// environments as that person sees them. A room that is not (or no longer) the
    /// person's is left out.
    pub async fn identities_for_person(&self, s: &Session, room_ids: &[String]) -> Result<Vec<RoomIdentity>, ApiError> {
        let (mut out, person) = (Vec::new(), Actor::person(s));
        for room_id in room_ids {
            let r = match self.in_room(&person, room_id, &[]).await {
                Ok(found) => found,
                Err(ApiError::NotFound) => continue,
                Err(e) => return Err(e),
            };
            let environments = self.environments_for(&r.room_id, &s.account_id).await?;
            if !environments.is_empty() {
                out.push(RoomIdentity { room_id: r.room_id, room_name: r.name, environments });
            }
        }
        Ok(out)
    }

    pub(in crate::service::embodiment) async fn binding(
        &self,
        room_id: &str,
        binding_id: &str,
    ) -> Result<EnvBinding, ApiError> {
        let id = EnvBindingId::parse(binding_id).ok_or(ApiError::NotFound)?;
        let item = self
            .store
            .get(&crate::service::records::embodiment::env_key(room_id, id.as_str()))
            .await?
            .ok_or(ApiError::NotFound)?;
        let b = EnvBinding::from_item(&item)?;
        if !b.is_active() {
            return Err(ApiError::NotFound);
        }
        Ok(b)
    }

    /// `helix_environment_subject_select`, and the room page's **Select**: binds the calling
    /// member (only) to one exact, fresh `subject_ref` and takes its control lease,
    /// conditional on the binding's revision.
    pub async fn select_subject(
        &self,
        actor: &Actor,
        room_id: &str,
        binding_id: &str,
        subject_ref: &str,
    ) -> Result<SubjectSelection, ApiError> {
        let r = self.in_room(actor, room_id, &[ROOMS_READ, ENV_ACTIONS_WRITE]).await?;
        self.select_for(&r, actor.account_id(), binding_id, subject_ref).await
    }

    async fn select_for(
        &self,
        r: &InRoom,
        account: &str,
        binding_id: &str,
        subject_ref: &str,
    ) -> Result<SubjectSelection, ApiError> {
        if !is_subject_ref(subject_ref) {
            return Err(ApiError::SubjectStale);
        }
        for _ in 0..RACE_RETRIES {
            let b = self.binding(&r.room_id, binding_id).await?;
            if b.epoch == 0 {
                return Err(ApiError::ConnectorUnavailable);
            }
            if b.subject(subject_ref).is_none() {
                return Err(ApiError::SubjectStale);
            }
            let now = self.clock.epoch();
            if b.held_by_other(subject_ref, account, now) {
                return Err(ApiError::SubjectConflict);
            }
            let mut next = b.next();
            next.selections.retain(|s| s.account_id != account && s.lease_until > now);
            let lease_until = now + LEASE_SECS;
            next.selections.push(Selection {
                account_id: account.to_owned(),
                subject_ref: subject_ref.to_owned(),
                lease_until,
            });
            let mut tx = Tx::new();
            next.write(&mut tx, b.rev);
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => {
                    return Ok(SubjectSelection {
                        schema: SubjectSelectionSchemaName,
                        room_id: r.room_id.clone(),
                        environment_binding_id: next.binding_id,
                        subject_ref: subject_ref.to_owned(),
                        lease_expires_at: epoch_rfc3339(lease_until),
                        flags: FalseFlags::default(),
                    });
                }
                Err(f) if f.failed(Role::EnvBinding) || f.contended() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }
}
