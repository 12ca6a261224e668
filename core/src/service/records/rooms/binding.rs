//! The one-active-binding slots of a run and the run-room / run-chat bindings, as
//! stored. Must not depend on the use cases above the kernel.

use serde::{Deserialize, Serialize};

use super::*;
use crate::domain::room::RoomRole;
use crate::error::ApiError;
use crate::store::{Item, Key};

// ---------- slots and bindings ----------

/// The run-room slot: which binding holds the run, for which room and owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRoomSlot {
    pub run_id: String,
    pub binding_ref: String,
    pub room_id: String,
    pub owner_hash: String,
}

impl RunRoomSlot {
    pub fn to_item(&self) -> Item {
        let k = run_room_slot(&self.run_id);
        Item::new(k.pk, k.sk)
            .with_s(BINDING_REF, &self.binding_ref)
            .with_s(ROOM_ID, &self.room_id)
            .with_s(OWNER_HASH, &self.owner_hash)
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        Ok(RunRoomSlot {
            run_id: item.pk.trim_start_matches(RUN_ROOM_PREFIX).to_owned(),
            binding_ref: item.s(BINDING_REF).ok_or_else(|| broken("slot without binding"))?.to_owned(),
            room_id: s_or_empty(item, ROOM_ID),
            owner_hash: s_or_empty(item, OWNER_HASH),
        })
    }
}

/// The run-chat slot: which claimed chat binding holds the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunChatSlot {
    pub run_id: String,
    pub binding_ref: String,
    pub owner_hash: String,
}

impl RunChatSlot {
    pub fn to_item(&self) -> Item {
        let k = run_chat_slot(&self.run_id);
        Item::new(k.pk, k.sk).with_s(BINDING_REF, &self.binding_ref).with_s(OWNER_HASH, &self.owner_hash)
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        Ok(RunChatSlot {
            run_id: item.pk.trim_start_matches(RUN_CHAT_PREFIX).to_owned(),
            binding_ref: item.s(BINDING_REF).ok_or_else(|| broken("slot without binding"))?.to_owned(),
            owner_hash: s_or_empty(item, OWNER_HASH),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingKind {
    RunRoom,
    RunChat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingState {
    Active,
    /// Permanent: a withdrawn binding is marked, never deleted.
    Revoked,
}

/// What a binding binds the run to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindingTarget {
    /// A room, with the member's role and the consent it bound under.
    Room { room_id: String, role: RoomRole, consent_version: u32, consent_receipt: String },
    /// A browser chat, through its observer.
    Chat { observer_ref: String },
}

/// A run-room or run-chat binding, stored under the hash of its reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub owner_hash: String,
    pub state: BindingState,
    pub run_id: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
    pub target: BindingTarget,
}

impl Binding {
    pub fn kind(&self) -> BindingKind {
        match self.target {
            BindingTarget::Room { .. } => BindingKind::RunRoom,
            BindingTarget::Chat { .. } => BindingKind::RunChat,
        }
    }

    pub fn is_active(&self) -> bool {
        self.state == BindingState::Active
    }

    /// The slot this binding holds (or held) on its run.
    pub fn slot_key(&self) -> Key {
        match self.kind() {
            BindingKind::RunRoom => run_room_slot(&self.run_id),
            BindingKind::RunChat => run_chat_slot(&self.run_id),
        }
    }

    pub fn to_item(&self, binding_ref: &str) -> Item {
        let k = bind_key(binding_ref);
        let mut item = Item::new(k.pk, k.sk)
            .with_s(KIND, tag(&self.kind()))
            .with_s(OWNER_HASH, &self.owner_hash)
            .with_s(STATUS, tag(&self.state))
            .with_s(RUN_ID, &self.run_id);
        item = match &self.target {
            BindingTarget::Room { room_id, role, consent_version, consent_receipt } => item
                .with_s(ROOM_ID, room_id)
                .with_s(ROLE, tag(role))
                .with_n(CONSENT_VERSION, *consent_version as i64)
                .with_s(CONSENT_RECEIPT, consent_receipt),
            BindingTarget::Chat { observer_ref } => item.with_s(OBSERVER_REF, observer_ref),
        };
        item = item.with_s(CREATED_AT, &self.created_at);
        match &self.revoked_at {
            Some(at) => item.with_s(REVOKED_AT, at),
            None => item,
        }
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        let kind: BindingKind = untag(item.s(KIND), "binding of an unknown kind")?;
        let target = match kind {
            BindingKind::RunRoom => BindingTarget::Room {
                room_id: s_or_empty(item, ROOM_ID),
                role: role_of(item),
                consent_version: item.n(CONSENT_VERSION).and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
                consent_receipt: s_or_empty(item, CONSENT_RECEIPT),
            },
            BindingKind::RunChat => BindingTarget::Chat { observer_ref: s_or_empty(item, OBSERVER_REF) },
        };
        Ok(Binding {
            owner_hash: s_or_empty(item, OWNER_HASH),
            state: untag(item.s(STATUS), "binding without a status")?,
            run_id: s_or_empty(item, RUN_ID),
            created_at: s_or_empty(item, CREATED_AT),
            revoked_at: item.s(REVOKED_AT).map(str::to_owned),
            target,
        })
    }
}
