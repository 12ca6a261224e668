//! The strict wire requests of the room routes and their limits.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CHAT_ID_MAX_CHARS, ROOM_NAME_MAX_CHARS, SNAPSHOT_MAX_MESSAGE_CHARS, SNAPSHOT_MAX_MESSAGES};
use super::{SNAPSHOT_MAX_TOTAL_CHARS, credential_shaped, redact_text};
use crate::domain::hash_parts;

// ---------- requests ----------

/// Why a room request was refused; the message never echoes the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoomInvalid {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}: credential-shaped values are refused")]
    CredentialShaped(&'static str),
}

/// A room name as published: no control character (Unicode `Cc`, what `char::is_control`
/// refuses) and at least one that is not whitespace.
const ROOM_NAME_PATTERN: &str =
    "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$";
/// The longest room description.
const ROOM_DESCRIPTION_MAX_CHARS: usize = 1_000;

/// `POST /api/v1/rooms`. Owner, tenant and account come from the principal; any such
/// field in the body is an unknown field and refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRoomRequest {
    /// Display name, 1-120 characters.
    #[schemars(length(min = 1, max = ROOM_NAME_MAX_CHARS), regex(pattern = ROOM_NAME_PATTERN))]
    pub name: String,
    /// Optional description, at most 1,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = ROOM_DESCRIPTION_MAX_CHARS))]
    pub description: Option<String>,
}

impl CreateRoomRequest {
    pub fn validate(&self) -> Result<(), RoomInvalid> {
        let name = self.name.trim();
        if name.is_empty() || self.name.chars().count() > ROOM_NAME_MAX_CHARS {
            return Err(RoomInvalid::Invalid(format!("name: must be 1-{ROOM_NAME_MAX_CHARS} characters")));
        }
        if name.chars().any(char::is_control) {
            return Err(RoomInvalid::Invalid("name: control characters are refused".into()));
        }
        if credential_shaped(name) {
            return Err(RoomInvalid::CredentialShaped("name"));
        }
        if let Some(d) = &self.description {
            if d.chars().count() > ROOM_DESCRIPTION_MAX_CHARS {
                let max = ROOM_DESCRIPTION_MAX_CHARS;
                return Err(RoomInvalid::Invalid(format!("description: at most {max} characters")));
            }
            if credential_shaped(d) {
                return Err(RoomInvalid::CredentialShaped("description"));
            }
        }
        Ok(())
    }
}

/// `POST /api/v1/rooms/run-bindings`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBindingRequest {
    /// The room (room_...), one the caller owns or is a consenting member of.
    #[schemars(with = "super::RoomId")]
    pub room_id: String,
    /// The caller's own run (run_...).
    #[schemars(with = "crate::domain::ids::RunId")]
    pub run_id: String,
}

/// `POST /api/v1/rooms/chat-bindings/claim`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatClaimRequest {
    /// The one-time claim handle the signed-in browser issued (hcc_...). Published as any
    /// string, not its pattern: a wrong shape is the same `claim_handle_invalid` (404) as an
    /// unknown handle, so the answer reveals nothing.
    pub claim_handle: String,
    /// The caller's own run (run_...) to bind the chat to.
    #[schemars(with = "crate::domain::ids::RunId")]
    pub run_id: String,
}

/// One message of a browser's chat snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotMessage {
    pub role: SnapshotRole,
    pub content: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotRole {
    User,
    Assistant,
}

/// `POST /api/agi/agent-run-observer/bindings` (cookie lane).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObserverRequest {
    /// The browser's own chat id (local chats included).
    pub chat_id: String,
    #[serde(default)]
    pub snapshot: Vec<SnapshotMessage>,
}

impl ObserverRequest {
    /// Checks the limits and returns the snapshot redacted, ready to store.
    pub fn validate(&self) -> Result<Vec<SnapshotMessage>, RoomInvalid> {
        let chat_ok = !self.chat_id.is_empty()
            && self.chat_id.len() <= CHAT_ID_MAX_CHARS
            && self.chat_id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b));
        if !chat_ok {
            return Err(RoomInvalid::Invalid(format!(
                "chat_id: must be 1-{CHAT_ID_MAX_CHARS} characters of [A-Za-z0-9._:-]"
            )));
        }
        if self.snapshot.len() > SNAPSHOT_MAX_MESSAGES {
            return Err(RoomInvalid::Invalid(format!("snapshot: at most {SNAPSHOT_MAX_MESSAGES} messages")));
        }
        let mut total = 0;
        for m in &self.snapshot {
            let n = m.content.chars().count();
            if n > SNAPSHOT_MAX_MESSAGE_CHARS {
                return Err(RoomInvalid::Invalid(format!(
                    "snapshot: each message at most {SNAPSHOT_MAX_MESSAGE_CHARS} characters"
                )));
            }
            total += n;
        }
        if total > SNAPSHOT_MAX_TOTAL_CHARS {
            return Err(RoomInvalid::Invalid(format!(
                "snapshot: at most {SNAPSHOT_MAX_TOTAL_CHARS} characters in all"
            )));
        }
        Ok(self.snapshot.iter().map(|m| SnapshotMessage { role: m.role, content: redact_text(&m.content) }).collect())
    }

    /// The chat as stored: a hash under the account, never the browser's id itself.
    pub fn chat_hash(&self, account_id: &str) -> String {
        hash_parts(&["room-chat.v1", account_id, &self.chat_id])
    }
}
