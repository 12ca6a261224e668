//! The browser lane (cookie, same-origin): the room owner pairs an action connector for
//! one room and world; the credential and configuration exist only in that one response
//! (the store keeps the credential's hash); and the person clears an Emergency Stop.
//! Must not depend on `http` or `mcp`.

use serde::Deserialize;

use super::{CREDENTIAL_ENV, EmbodimentService, MAX_BINDINGS, POLL_INTERVAL_MS, RACE_RETRIES};
use crate::domain::credential::text_carries_credential;
use crate::domain::embodiment::protocol::PROTOCOL_V1;
use crate::domain::embodiment::{ConnectorConfig, EnvBindingId, PAIRING_SCHEMA, PairingCreated, PairingRequest, StopCleared};
use crate::domain::room::RoomId;
use crate::domain::room::RoomRole;
use crate::domain::source::ConnectorCredential;
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::records::embodiment::{CredentialLookup, EnvBinding, binding_in_room, bindings_of_room};
use crate::service::records::rooms::room_and_membership;
use crate::service::records::sources::check_room_owner;
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
        s.require_member()?;
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
        check_room_owner(&mut tx, room.as_str(), &s.account_id, true, None);
        match tx.commit(self.store.as_ref()).await {
            Ok(()) => {}
            Err(f) if f.failed(Role::Room) || f.failed(Role::Member) => return Err(ApiError::NotFound),
            Err(f) => return Err(f.into()),
        }
        Ok(PairingCreated {
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
        })
    }

    /// `POST /api/account/room-connectors/emergency-stop/clear`: only a person, signed in
    /// as the room owner, clears an Emergency Stop (an agent has no route to this).
    pub async fn clear_emergency_stop(
        &self,
        s: &Session,
        req: ClearStopRequest,
    ) -> Result<StopCleared, ApiError> {
        s.require_member()?;
        let room = RoomId::parse(&req.room_id).ok_or(ApiError::NotFound)?;
        let binding_id = EnvBindingId::parse(&req.environment_binding_id).ok_or(ApiError::NotFound)?;
        for _ in 0..RACE_RETRIES {
            let got =
                binding_in_room(self.store.as_ref(), room.as_str(), binding_id.as_str(), &s.account_id, false).await?;
            let binding = got.binding.filter(|_| got.owner_holds).ok_or(ApiError::NotFound)?;
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
            check_room_owner(&mut tx, room.as_str(), &s.account_id, true, None);
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

    /// An active room the session's account owns (its owner member); anything else is not found.
    async fn owned_active_room(&self, s: &Session, room_id: &str) -> Result<String, ApiError> {
        s.require_member()?;
        let id = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        let (room, member) = room_and_membership(self.store.as_ref(), id.as_str(), &s.account_id).await?;
        let owner = member.is_some_and(|m| m.role == RoomRole::Owner);
        match room {
            Some(r) if r.is_active() && r.owner_account == s.account_id && owner => Ok(r.room_id),
            _ => Err(ApiError::NotFound),
        }
    }
}
