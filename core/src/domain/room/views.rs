//! The named, versioned room views and receipts, each with the four false flags.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::RunBindingSchemaName;
use super::{ChatBindingSchemaName, FalseFlags, RevocationSchemaName, RoomListSchemaName, RoomSchemaName};
use crate::domain::hash_parts;

// ---------- receipts ----------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RoomRole {
    Owner,
    Member,
}

/// `helix.room.v1`: one room as a member sees it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RoomView {
    pub schema: RoomSchemaName,
    pub room_id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `active`.
    pub status: String,
    /// The caller's role in the room.
    pub role: RoomRole,
    /// The room's current consent version.
    pub consent_version: u32,
    /// The caller has accepted the current consent version.
    pub consent_current: bool,
    /// The caller owns the room (owner identity itself is never shown).
    pub owned_by_caller: bool,
    pub created_at: String,
    pub execution_enabled: bool,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

/// `helix.room_list.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RoomList {
    pub schema: RoomListSchemaName,
    pub rooms: Vec<RoomView>,
    pub has_more: bool,
    /// The `cursor` of the next page; null on the last page.
    pub next_cursor: Option<String>,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BindingStatus {
    Active,
    Revoked,
}

/// `helix.room_run_binding.v1`: a control receipt for one run-room binding.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RunBindingReceipt {
    pub schema: RunBindingSchemaName,
    pub binding_ref: String,
    pub binding_status: BindingStatus,
    pub room_id: String,
    pub run_id: String,
    pub created_at: String,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

/// `helix.room_chat_binding.v1`: the agent-facing receipt of a claimed chat. It never
/// carries the chat id or any chat catalog.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ChatBindingReceipt {
    pub schema: ChatBindingSchemaName,
    pub binding_ref: String,
    pub binding_status: BindingStatus,
    pub run_id: String,
    /// Opaque reference of the stored (redacted) snapshot, when one was sent.
    pub snapshot_ref: Option<String>,
    pub snapshot_message_count: u32,
    pub snapshot_char_count: u32,
    pub chat_id_included: bool,
    pub created_at: String,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RevocationStatus {
    Revoked,
    AlreadyRevoked,
}

/// `helix.room_binding_revocation.v1`: the binding ref and its statuses, nothing about
/// the run, room, chat or stored context.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RevocationReceipt {
    pub schema: RevocationSchemaName,
    pub binding_ref: String,
    pub binding_status: BindingStatus,
    pub revocation_status: RevocationStatus,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

/// `helix.agent_run_observer_binding_created.v1`: shown once to the browser.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ObserverCreated {
    pub schema: &'static str,
    pub observer_binding_ref: String,
    /// Show-once: give it to the agent, which passes it to the chat-claim operation.
    pub claim_handle: String,
    pub expires_at: String,
    pub snapshot_message_count: u32,
    pub snapshot_redacted: bool,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObserverStatus {
    /// Issued; the agent has not claimed it yet.
    AwaitingClaim,
    /// Claimed by a run: progress flows.
    Bound,
    /// The claimed chat binding was withdrawn by its owner.
    Revoked,
    /// The browser disconnected.
    Disconnected,
    /// The handle expired unclaimed.
    Expired,
}

/// The one assistant message projected from a verified canonical terminal product.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct TerminalMessage {
    /// Stable: the same message always has the same id, so a reload cannot duplicate it.
    pub id: String,
    pub role: &'static str,
    pub content: String,
    pub terminal_authority_status: &'static str,
}

/// `helix.agent_run_observer_binding.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ObserverView {
    pub schema: &'static str,
    pub observer_binding_ref: String,
    pub binding_status: ObserverStatus,
    /// Progress of the bound run (null until claimed).
    pub lifecycle_status: Option<String>,
    pub completion_status: Option<String>,
    /// Exactly one assistant message, only from an authorized canonical terminal product.
    pub terminal_message: Option<TerminalMessage>,
    /// The questions the bound run waits on (`needs_input`); empty otherwise.
    pub pending_questions: Vec<crate::domain::run::Question>,
    pub created_at: String,
    pub claim_expires_at: String,
}

/// One progress receipt of the observer lane (never a chat message).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ProgressReceipt {
    pub seq: u64,
    pub kind: String,
    pub at: String,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

/// `helix.agent_run_observer_event_page.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ObserverEventPage {
    pub schema: &'static str,
    pub observer_binding_ref: String,
    pub receipts: Vec<ProgressReceipt>,
    pub next_after_seq: u64,
    pub has_more: bool,
}

/// `helix.agent_run_observer_disconnect.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ObserverDisconnect {
    pub schema: &'static str,
    pub observer_binding_ref: String,
    pub binding_status: ObserverStatus,
    /// `disconnected` or `already_disconnected`.
    pub disconnect_status: &'static str,
}

/// The stable id of a run's terminal assistant message in one observer binding.
pub fn terminal_message_id(observer_ref: &str, run_id: &str, text_sha256: &str) -> String {
    format!("msg_{}", &hash_parts(&["room-terminal-message.v1", observer_ref, run_id, text_sha256])[..24])
}

/// An opaque reference of a stored snapshot.
pub fn snapshot_ref(observer_ref: &str) -> String {
    format!("snap_{}", &hash_parts(&["room-snapshot.v1", observer_ref])[..24])
}
