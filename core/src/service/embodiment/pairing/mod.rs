//! The browser lane (cookie, same-origin): the room owner pairs an action connector for
//! one room and world; the credential and configuration exist only in that one response
//! (the store keeps the credential's hash); the owner rotates it (the old one refused at
//! once) or revokes the pairing (its open workflows ended); and the person clears an
//! Emergency Stop. Must not depend on `http` or `mcp`.

use serde::{Deserialize, Serialize};

mod region;

use super::{CREDENTIAL_ENV, EmbodimentService, MAX_BINDINGS, POLL_INTERVAL_MS, RACE_RETRIES};
use crate::domain::credential::text_carries_credential;
use crate::domain::embodiment::WorkflowState;
use crate::domain::embodiment::protocol::PROTOCOL_V1;
use crate::domain::embodiment::{
    ConnectorConfig, EnvBindingId, PAIRING_SCHEMA, PairingCreated, PairingRequest, StopCleared,
};
use crate::domain::room::RoomId;
use crate::domain::source::ConnectorCredential;
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::records::embodiment::{
    CredentialLookup, EnvBinding, WorkflowRecord, bindings_of_room, credential_key, open_workflows, read_workflow,
};
use crate::service::records::{Role, Tx};
use crate::service::sessions::Session;
use crate::service::sources::{DeveloperLane, developer};
use crate::store::Cond;

/// The body of the Emergency Stop clear route.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClearStopRequest {
    pub room_id: String,
    pub environment_binding_id: String,
}

/// The body of the rotation and revocation routes (the binding is in the path).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PairingRoom {
    pub room_id: String,
}

/// `helix.room_connector_revocation.v1`: the pairing is revoked for good.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PairingRevoked {
    pub schema: &'static str,
    pub environment_binding_id: String,
    pub room_id: String,
    /// Always `revoked`: no credential of this pairing is admitted again.
    pub status: &'static str,
    /// Open workflows this revocation ended (`stopped`, or `outcome_unknown` for a mutating
    /// step the connector held).
    pub workflows_ended: u32,
}

pub const REVOCATION_SCHEMA: &str = "helix.room_connector_revocation.v1";
/// The status of a revoked environment binding.
const REVOKED: &str = "revoked";
/// Why a workflow ended when its pairing was revoked.
pub const CONNECTOR_REVOKED: &str = "connector_revoked";
/// Why a workflow ended when its room closed or changed owner under the pairing.
pub const ROOM_CLOSED: &str = "room_closed";

fn world_ok(w: &str) -> bool {
    (1..=64).contains(&w.len())
        && w.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
        && !text_carries_credential(w)
}

impl EmbodimentService {
    /// `POST /api/account/room-connectors/pairings`: the signed-in developer room owner
    /// pairs an action connector for one room and world. The binding, the credential's
    /// lookup and the room-owner check are one transaction.
    pub async fn pair_connector(&self, s: &Session, req: PairingRequest) -> Result<PairingCreated, ApiError> {
        let owner = self.person_owner(s)?;
        developer(&self.config, &s.account_id, &s.policy, DeveloperLane::Browser)?;
        let room = RoomId::parse(&req.room_id).ok_or(ApiError::NotFound)?;
        if !world_ok(&req.world_id) {
            return Err(ApiError::InvalidRequest("world_id: 1-64 characters of A-Z a-z 0-9 . _ : -".into()));
        }
        let credential = ConnectorCredential::generate();
        let binding = EnvBinding {
            binding_id: EnvBindingId::generate().as_str().to_owned(),
            room_id: room.as_str().to_owned(),
            world_id: req.world_id.clone(),
            owner_account: s.account_id.clone(),
            credential_hash: credential.hash(),
            status: "active".into(),
            epoch: 0,
            connector: None,
            last_seen: 0,
            directory_generation: 0,
            subjects: Vec::new(),
            selections: Vec::new(),
            estop_generation: 0,
            estop_active: false,
            region: None,
            subject_stops: Vec::new(),
            created_at: rfc3339(self.clock.now()),
            rev: 1,
        };
        let lookup = CredentialLookup {
            room_id: binding.room_id.clone(),
            binding_id: binding.binding_id.clone(),
            owner_account: s.account_id.clone(),
        };
        let mut tx = Tx::new();
        tx.put(Role::EnvBinding, binding.to_item(), Cond::NotExists);
        tx.put(Role::ConnectorLookup, lookup.to_item(&binding.credential_hash), Cond::NotExists);
        owner.check(&mut tx, room.as_str());
        match tx.commit(self.store.as_ref()).await {
            Ok(()) => {}
            Err(f) if f.failed(Role::Room) || f.failed(Role::Member) => return Err(ApiError::NotFound),
            Err(f) => return Err(f.into()),
        }
        Ok(self.shown_once(binding, &credential))
    }

    /// The one answer that shows a connector credential and its configuration.
    fn shown_once(&self, binding: EnvBinding, credential: &ConnectorCredential) -> PairingCreated {
        PairingCreated {
            schema: PAIRING_SCHEMA,
            environment_binding_id: binding.binding_id.clone(),
            room_id: binding.room_id.clone(),
            world_id: binding.world_id.clone(),
            connector_credential: credential.expose().to_owned(),
            connector_config: ConnectorConfig {
                protocol: PROTOCOL_V1.into(),
                base_url: self.config.public_base_url.clone(),
                environment_binding_id: binding.binding_id,
                room_id: binding.room_id,
                world_id: binding.world_id,
                credential_env: CREDENTIAL_ENV.into(),
                poll_interval_ms: POLL_INTERVAL_MS,
            },
            shown_once: true,
            action_credential: true,
        }
    }

    /// The binding `binding_id` the session's account paired, of a room it owns under the
    /// session's tenant ([`super::owner::PersonOwner`]).
    pub(super) async fn owned_binding(
        &self,
        s: &Session,
        room_id: &str,
        binding_id: &str,
    ) -> Result<EnvBinding, ApiError> {
        let binding = self.person_owner(s)?.binding(self, room_id, binding_id).await?;
        if binding.owner_account != s.account_id {
            return Err(ApiError::NotFound);
        }
        Ok(binding)
    }

    /// `POST /api/account/room-connectors/{environment_binding_id}/rotate`: a new credential,
    /// shown once; the old one is refused from this commit on (its lookup is deleted and
    /// the binding carries the new hash, in one transaction with the room-owner check).
    /// The epoch stays: a connector that switches to the new credential polls on.
    pub async fn rotate_connector(
        &self,
        s: &Session,
        binding_id: &str,
        req: PairingRoom,
    ) -> Result<PairingCreated, ApiError> {
        developer(&self.config, &s.account_id, &s.policy, DeveloperLane::Browser)?;
        let owner = self.person_owner(s)?;
        for _ in 0..RACE_RETRIES {
            let binding = self.owned_binding(s, &req.room_id, binding_id).await?;
            if !binding.is_active() {
                return Err(ApiError::NotFound);
            }
            let credential = ConnectorCredential::generate();
            let mut next = binding.next();
            next.credential_hash = credential.hash();
            let lookup = CredentialLookup {
                room_id: next.room_id.clone(),
                binding_id: next.binding_id.clone(),
                owner_account: s.account_id.clone(),
            };
            let mut tx = Tx::new();
            next.write(&mut tx, binding.rev);
            tx.delete(Role::ConnectorLookup, credential_key(&binding.credential_hash), None);
            tx.put(Role::ConnectorLookup, lookup.to_item(&next.credential_hash), Cond::NotExists);
            owner.check(&mut tx, &next.room_id);
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => return Ok(self.shown_once(next, &credential)),
                Err(f) if f.failed(Role::Room) || f.failed(Role::Member) => return Err(ApiError::NotFound),
                Err(f) if f.failed(Role::EnvBinding) || f.contended() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }

    /// `POST /api/account/room-connectors/{environment_binding_id}/revoke`: the pairing is
    /// revoked for good (its credential lookup deleted, the binding `revoked`, one
    /// transaction), then every open workflow of it is ended. Any owner may revoke (no
    /// developer check: cutting a connector off is always allowed). Revoking again answers
    /// the same and finishes an interrupted clean-up.
    pub async fn revoke_connector(
        &self,
        s: &Session,
        binding_id: &str,
        req: PairingRoom,
    ) -> Result<PairingRevoked, ApiError> {
        let owner = self.person_owner(s)?;
        let mut revoked = None;
        for _ in 0..RACE_RETRIES {
            let binding = self.owned_binding(s, &req.room_id, binding_id).await?;
            if !binding.is_active() {
                revoked = Some(binding);
                break;
            }
            let mut next = binding.next();
            next.status = REVOKED.into();
            let mut tx = Tx::new();
            next.write(&mut tx, binding.rev);
            tx.delete(Role::ConnectorLookup, credential_key(&binding.credential_hash), None);
            owner.check(&mut tx, &next.room_id);
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => {
                    revoked = Some(next);
                    break;
                }
                Err(f) if f.failed(Role::Room) || f.failed(Role::Member) => return Err(ApiError::NotFound),
                Err(f) if f.failed(Role::EnvBinding) || f.contended() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        let binding = revoked.ok_or(ApiError::RunBusy)?;
        let ended = self.end_open_workflows(&binding, CONNECTOR_REVOKED).await?;
        Ok(PairingRevoked {
            schema: REVOCATION_SCHEMA,
            environment_binding_id: binding.binding_id,
            room_id: binding.room_id,
            status: REVOKED,
            workflows_ended: ended,
        })
    }

    /// Ends every open workflow of a binding whose connector is cut off for good (revoked,
    /// or its room closed or owned by someone else): a mutating step the connector held
    /// may have happened, so it is `outcome_unknown`; everything else is `stopped`. Each
    /// write is conditional on the workflow's revision (re-read on a lost race).
    pub(super) async fn end_open_workflows(&self, binding: &EnvBinding, reason: &str) -> Result<u32, ApiError> {
        let mut ended = 0;
        for w in open_workflows(self.store.as_ref(), &binding.room_id, &binding.binding_id, 64).await? {
            let mut w = w;
            for _ in 0..RACE_RETRIES {
                if w.state.is_terminal() {
                    break;
                }
                if self.settle(&w, ended_state(&w), Some(reason)).await? {
                    ended += 1;
                    break;
                }
                match read_workflow(self.store.as_ref(), &w.room_id, &w.workflow_ref).await? {
                    Some(fresh) => w = fresh,
                    None => break,
                }
            }
        }
        Ok(ended)
    }

    /// `POST /api/account/room-connectors/emergency-stop/clear`: only a person, signed in
    /// as the room owner, clears an Emergency Stop (an agent has no route to this).
    pub async fn clear_emergency_stop(&self, s: &Session, req: ClearStopRequest) -> Result<StopCleared, ApiError> {
        let owner = self.person_owner(s)?;
        for _ in 0..RACE_RETRIES {
            let binding = owner.binding(self, &req.room_id, &req.environment_binding_id).await?;
            if !binding.estop_active {
                return Ok(StopCleared {
                    environment_binding_id: binding.binding_id,
                    emergency_stop_active: false,
                    emergency_stop_generation: None,
                });
            }
            let mut next = binding.next();
            next.estop_active = false;
            let mut tx = Tx::new();
            next.write(&mut tx, binding.rev);
            owner.check(&mut tx, &next.room_id);
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => {
                    return Ok(StopCleared {
                        environment_binding_id: next.binding_id,
                        emergency_stop_active: false,
                        emergency_stop_generation: Some(next.estop_generation),
                    });
                }
                Err(f) if f.failed(Role::Room) || f.failed(Role::Member) => return Err(ApiError::NotFound),
                Err(f) if f.failed(Role::EnvBinding) || f.contended() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }

    /// The room page's Emergency Stop: the signed-in room owner stops every environment of
    /// the room (the same stop as the `emergency_stop` control).
    pub async fn emergency_stop_room(&self, s: &Session, room_id: &str) -> Result<(), ApiError> {
        let room = self.owned_active_room(s, room_id).await?;
        self.emergency_stop(&room).await
    }

    /// The room page's "clear": the signed-in room owner clears the stop of every
    /// environment of the room that has one.
    pub async fn clear_room_stop(&self, s: &Session, room_id: &str) -> Result<(), ApiError> {
        let room = self.owned_active_room(s, room_id).await?;
        for b in bindings_of_room(self.store.as_ref(), &room, MAX_BINDINGS).await? {
            if b.is_active() && b.estop_active {
                let req = ClearStopRequest { room_id: room.clone(), environment_binding_id: b.binding_id };
                self.clear_emergency_stop(s, req).await?;
            }
        }
        Ok(())
    }

    /// An active room of the session's tenant that its account owns (its owner member);
    /// anything else is not found.
    async fn owned_active_room(&self, s: &Session, room_id: &str) -> Result<String, ApiError> {
        Ok(self.person_owner(s)?.room(self, room_id).await?.as_str().to_owned())
    }
}

/// How a workflow ends when its connector is cut off for good.
fn ended_state(w: &WorkflowRecord) -> WorkflowState {
    let mutating = w.steps.get(w.step_index as usize).is_some_and(|s| s.mutates());
    if w.state.at_connector() && mutating { WorkflowState::OutcomeUnknown } else { WorkflowState::Stopped }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ending_is_a_legal_transition() {
        use WorkflowState::*;
        for from in [Queued, Dispatched, Running, Verifying, Paused, CancelRequested] {
            for to in [Stopped, OutcomeUnknown] {
                let reachable = from.may_become(to);
                let chosen = (from.at_connector() && to == OutcomeUnknown) || (to == Stopped);
                assert!(!chosen || reachable, "{from:?} -> {to:?}");
            }
        }
    }
}
